"""The excess bracket with the split P / N: its face is P, so both ends close around
L* - H = CE_N(W_fin) - H; without a determined split (or on separable data) it is what it was."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from ntpcert.certificate.checker.excess import check_excess
from ntpcert.experiments import strategies as nst
from ntpcert.instance.load import load_instance
from ntpcert.pipeline.excess_certificate import (PIPELINE_ABS_TOL, PIPELINE_TOL, bracket_split, exact_excess,
                                                excess_key)
from ntpcert.solve.excess import FACE_TOL, float_bracket, split_face
from ntpcert.solve.finite_limit import finite_limit
from ntpcert.solve.split import nonseparable_split

from .conftest import random_instance
from .test_finite_limit import partly_separable

#: Widths measured on 60 random partly separable instances (tol = 1e-7): the float bracket with the
#: split at most 7e-9 relative (median 2.7e-9; LOWER_SLACK = 1e-9 nats dominates), the certified one
#: at most 3.7e-9 (median 1e-13); without the split both were about 5e-8 (at most 1e-7).
FLOAT_WIDTH = 2e-8
EXACT_WIDTH = 2e-8
#: L* - H from finite_limit (float64 Newton to a gradient of 1e-10) against the bracket's ends.
SLACK = 1e-11


def _own_excess(inst, W) -> float:
    """CE(W) - H, written here: sum_j pi_j KL(p_j || softmax(W h_j))."""
    Z = inst.embeddings @ W.T
    Z = Z - Z.max(axis=1, keepdims=True)
    logq = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
    P = inst.probs
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(P > 0, P * (np.log(np.where(P > 0, P, 1.0)) - logq), 0.0).sum(axis=1)
    return float(inst.weights @ kl)


def _check_closes(inst, split):
    L = finite_limit(inst, split.nonseparable).excess
    b = float_bracket(inst, tol=1e-7, split=split)
    assert b.info["face"].startswith("the separable pairs P"), b.info["face"]
    assert b.excess_lower - SLACK <= L <= b.excess_upper + SLACK
    assert b.relative_width <= FLOAT_WIDTH, (b.excess_lower, b.excess_upper)
    # the upper end is CE at a real decoder (W_fin + s D_P), recomputed here
    assert abs(_own_excess(inst, b.W) - b.excess_upper) <= 1e-12 * max(1.0, b.excess_upper)
    assert np.all(b.q[split_face(inst, split)[0]] == 0)  # the dual point vanishes on P, exactly
    return L, b


@given(nst.partly_separable_instances())
@settings(max_examples=20, deadline=None)
def test_the_split_bracket_closes_around_L_star(inst):
    s = nonseparable_split(inst)
    assert s.ok and s.n_nonseparable > 0 and s.n_separable > 0
    L, b = _check_closes(inst, s)
    ee = exact_excess(inst, b)
    assert ee.repair == "exact"
    assert check_excess(ee.section, inst, []) == ""
    assert ee.excess_lower - SLACK <= L <= ee.excess_upper + SLACK
    assert ee.relative_width <= EXACT_WIDTH


def test_the_gaussian_partly_separable_instances_close_too():
    insts = partly_separable(8)
    assert len(insts) == 8
    for inst in insts:
        _check_closes(inst, nonseparable_split(inst))


def test_the_split_upper_end_is_below_the_tolerance_one_on_pydoc_like_data():
    # random_instance: m > d, supports of 1 to 3 tokens (the nonseparable fixture of test_excess_cli)
    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    s = nonseparable_split(inst)
    assert s.ok and s.n_nonseparable > 0
    old, new = float_bracket(inst, tol=1e-7), float_bracket(inst, tol=1e-7, split=s)
    assert old.info["face"].startswith("tolerance")
    assert new.excess_upper <= old.excess_upper + 1e-12
    assert new.excess_lower - SLACK <= finite_limit(inst, s.nonseparable).excess <= new.excess_upper + SLACK


def test_an_undetermined_split_keeps_the_face_tolerance_and_says_so():
    inst = partly_separable(1)[0]
    s = nonseparable_split(inst, max_nonzeros=1)
    assert not s.ok
    old, b = float_bracket(inst, tol=1e-7), float_bracket(inst, tol=1e-7, split=s)
    assert (b.excess_lower, b.excess_upper) == (old.excess_lower, old.excess_upper)
    assert b.info["face"].startswith(f"tolerance: off-support entries of the softmax below FACE_TOL = {FACE_TOL:g}")
    assert "the split is undetermined: the split LP is too large" in b.info["face"]


def test_separable_data_keep_the_bracket_of_before():
    for inst in (load_instance("paper"), random_instance(np.random.default_rng(1), m=4, d=6, V=5, kmin=1, kmax=2)):
        s = nonseparable_split(inst)
        assert s.ok and s.n_nonseparable == 0
        old, b = float_bracket(inst, tol=1e-7), float_bracket(inst, tol=1e-7, split=s)
        assert (b.excess_lower, b.excess_upper, b.iterations) == (old.excess_lower, old.excess_upper, old.iterations)
        assert "no non-separable pair" in b.info["face"]
        assert bracket_split(inst, True) is None
        key = excess_key(inst, exact=False, separable=True)[0]  # the pipeline's tolerances
        ref = float_bracket(inst, tol=PIPELINE_TOL, abs_tol=PIPELINE_ABS_TOL)
        assert (key["excess_lower"], key["excess_upper"]) == (ref.excess_lower, ref.excess_upper)


def test_explain_and_certify_use_the_split():
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.explain import explain

    inst = partly_separable(2)[1]
    L = finite_limit(inst, nonseparable_split(inst).nonseparable).excess
    key = explain(inst).excess_loss
    assert key["face"].startswith("the separable pairs P")
    assert key["excess_lower"] - SLACK <= L <= key["excess_upper"] + SLACK
    rep = exact_certify(inst, svm=False, excess=True)
    assert rep.check.valid and "excess" in rep.certificate
    ex = rep.to_json()["excess_loss"]
    assert ex["face"].startswith("the separable pairs P") and ex["relative_width"] <= EXACT_WIDTH


def test_an_exact_split_gives_the_same_face():
    from ntpcert.exact.split import exact_split

    inst = partly_separable(2)[1]
    s = nonseparable_split(inst)
    es = exact_split(inst, s)
    assert es.ok
    assert split_face(inst, es)[2].endswith("(exact)")
    assert np.array_equal(split_face(inst, es)[0], split_face(inst, s)[0])
    _check_closes(inst, es)


def test_the_explain_text_names_the_face():
    from ntpcert.pipeline.explain import explain
    from ntpcert.report.explain import explanation_lines

    text = "\n".join(explanation_lines(explain(partly_separable(2)[1])))
    assert "face of the bracket: the separable pairs P of the split: N = " in text


@pytest.mark.slow
def test_pydoc_bracket_with_the_split():
    """pydoc (k = 2): measured float 2.6e-9 (before 6.5e-8), certified 8.4e-10 (before 6.3e-8)."""
    inst = load_instance("pydoc")
    s = nonseparable_split(inst)
    old = float_bracket(inst, tol=PIPELINE_TOL, abs_tol=PIPELINE_ABS_TOL)  # the pipeline's budget of Newton steps
    b = float_bracket(inst, tol=PIPELINE_TOL, abs_tol=PIPELINE_ABS_TOL, split=s)
    assert b.info["face"].startswith("the separable pairs P") and b.relative_width <= 1e-8
    assert b.excess_upper <= old.excess_upper and b.excess_lower >= old.excess_lower - 1e-12
    ee = exact_excess(inst, b)
    assert ee.repair == "exact" and check_excess(ee.section, inst, []) == ""
    assert ee.relative_width <= 2e-9
