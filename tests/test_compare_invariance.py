"""compare(W) = compare(W + 1c^T): the decoder's numbers do not depend on the softmax's invariances.

Over every embedding family and support overlap of :mod:`ntpcert.experiments.strategies`, with and
without an appended bias coordinate (h_j, 1), where adding t to the whole bias column is the case
c = t e_d. Only the ``raw_*`` numbers, which are W's as exported, may differ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntpcert import NTPInstance
from ntpcert.dynamics import compare as cmp_mod
from ntpcert.dynamics.invariance import SoftmaxQuotient
from ntpcert.dynamics.trajectory import Limits
from ntpcert.experiments import strategies as nst

from tests.conftest import TOL


def _close(a, b, tol: float = TOL["shift_invariance"]) -> bool:
    if a is None or b is None or isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def _assert_same(c0: cmp_mod.Comparison, c1: cmp_mod.Comparison, tol: float = TOL["shift_invariance"]) -> None:
    assert set(c0.values) == set(c1.values)
    differ = {k: (c0.values[k], c1.values[k]) for k in c0.values
              if "raw" not in k and not _close(c0.values[k], c1.values[k], tol)}
    assert not differ, differ
    assert [b["label"] for b in c0.bins] == [b["label"] for b in c1.bins]
    for b0, b1 in zip(c0.bins, c1.bins):
        assert all(_close(b0[k], b1[k], tol) for k in b0), (b0, b1)
    assert c0.notes == c1.notes


@st.composite
def shifted_cases(draw, family: str):
    inst = draw(nst.ntp_instances(max_m=4, max_d=4, min_V=2, max_V=5, embedding=family,
                                  overlap=draw(st.sampled_from(nst.OVERLAPS)), distribution="counts"))
    if draw(st.booleans()):  # the head's bias as an appended constant coordinate
        inst = NTPInstance.from_counts(np.hstack([inst.embeddings, np.ones((inst.m, 1))]), inst.counts)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # multiples of 2^-20 below 2^12: W + 1c^T is exact in float64, so the shift is all that differs (the
    # rounding of a sum fl(W + 1c^T) would itself move W off its class by eps |c|)
    W = np.round(draw(st.sampled_from([0.1, 1.0, 10.0])) * rng.standard_normal((inst.V, inst.d)) * 2**20) / 2**20
    c = np.round(draw(st.sampled_from([1.0, 10.0, 100.0])) * rng.standard_normal(inst.d) * 2**20) / 2**20
    return inst, W, c


@pytest.mark.parametrize("family", nst.EMBEDDING_FAMILIES)
@settings(max_examples=max(1, settings().max_examples // 2))  # 15 a family by default
@given(data=st.data())
def test_compare_is_invariant_to_the_common_row_shift(family, data):
    inst, W, c = data.draw(shifted_cases(family))
    limits = Limits.compute(inst)
    c0 = cmp_mod.compare(W, limits)
    c1 = cmp_mod.compare(W + c[None, :], limits, bracket=c0.bracket)
    _assert_same(c0, c1)
    if inst.d and np.all(inst.embeddings[:, -1] == 1):  # the bias shift alone: t on the whole last column
        Wb = W.copy()
        Wb[:, -1] += c[-1]
        _assert_same(c0, cmp_mod.compare(Wb, limits, bracket=c0.bracket))
    assert c1.values["raw_norm"] == pytest.approx(float(np.linalg.norm(W + c[None, :])), rel=TOL["linalg"])


@settings(max_examples=max(1, settings().max_examples // 3))
@given(inst=nst.ntp_instances(max_m=4, max_d=5, max_V=5, embedding="low-rank"), seed=st.integers(0, 2**32 - 1))
def test_changes_along_ker_H_change_nothing_either(inst, seed):
    """The whole softmax-invariant subspace {D : D h_j in span(1)}: W + u a^T with H a = 0 too."""
    q = SoftmaxQuotient.of(inst.embeddings)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((inst.V, inst.d))
    _, s, Vt = np.linalg.svd(inst.embeddings)
    assert q.rank == int(np.linalg.matrix_rank(inst.embeddings))
    if q.rank == inst.d:
        return
    a = Vt[q.rank:].T @ rng.standard_normal(inst.d - q.rank)  # in ker H
    D = np.outer(rng.standard_normal(inst.V), a) + np.outer(np.ones(inst.V), rng.standard_normal(inst.d))
    assert np.allclose(inst.logits(W + D) - inst.logits(W),
                       (inst.logits(W + D) - inst.logits(W))[:, :1], atol=1e-9)  # the same shift on every logit
    assert np.abs(q.project(W + D) - q.project(W)).max() <= 1e-12 * (1 + np.abs(D).max())
    limits = Limits.compute(inst)
    # W + D is rounded (a is irrational): an identity of linear maps in float64, to TOL["linalg"]
    _assert_same(cmp_mod.compare(W, limits), cmp_mod.compare(W + D, limits), TOL["linalg"])
