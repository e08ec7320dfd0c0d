"""Glued tokens (ntpcert.solve.split_glue): the pair test's Stiemke weights, the group, and the split of the
quotient lifted back, against the split LP on the whole instance and the independent LP of test_split."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.instance import NTPInstance
from ntpcert.solve.split import glued_split, nonseparable_split
from ntpcert.solve.split_glue import glue_group, stiemke_weights, whitened

from .test_split import independent_N


def glue_instance(seed: int, m: int = 36, d: int = 3, V: int = 6) -> NTPInstance:
    """Two frequent tokens (0 and 1) whose contexts spread over R^d, so that they often glue, a third (2) in a
    few supports, rare tokens in one or two, some supports of two tokens; small integer h, all in the half-space
    h_0 > 0 (as a model's h share a direction), so that not every token glues."""
    rng = np.random.default_rng(seed)
    H = rng.integers(-6, 7, size=(m, d)).astype(float)
    H[:, 0] = rng.integers(1, 4, size=m)
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        r = rng.random()
        z = 0 if r < 0.4 else 1 if r < 0.8 else 2 if r < 0.9 else int(rng.integers(3, V))
        counts[j, z] = int(rng.integers(1, 4))
        if rng.random() < 0.2:
            counts[j, int(rng.integers(0, V))] += 1
    return NTPInstance.from_counts(H, counts)


def test_stiemke_weights_of_a_cone_that_is_zero_and_of_one_that_is_not():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [-2.0, 1.0]])
    y, res = stiemke_weights(X)
    assert y is not None and y.min() > 0 and res < 1e-10
    assert np.abs(X.T @ y).max() < 1e-9 * y.sum()
    # every row in an open half-plane: u = (1, 1) makes all of them positive, no weights exist
    y2, res2 = stiemke_weights(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 2.0]]))
    assert y2 is None and res2 == float("inf")
    # orthogonal to E: the rows need only balance off E's span
    y3, _ = stiemke_weights(np.array([[1.0, 5.0], [-1.0, 3.0]]), np.array([[0.0, 1.0]]))
    assert y3 is not None and abs(y3[0] - y3[1]) < 1e-9


@pytest.mark.parametrize("seed", range(12))
def test_glued_pairs_are_non_separable_and_the_lifted_split_is_the_split(seed):
    inst = glue_instance(seed)
    g = glue_group(inst)
    direct = nonseparable_split(inst, glue=False)
    assert direct.ok, direct.reason
    N = {tuple(p) for p in direct.nonseparable.tolist()}
    assert N == set(independent_N(inst.embeddings, inst.support_mask()))
    if g is None:
        pytest.skip("nothing glued on this seed")  # counted below: most seeds glue
    assert {0, 1} <= set(g.group.tolist())
    glued = {tuple(p) for p in g.nonseparable_pairs(inst).tolist()}
    assert glued and glued <= N
    H = inst.embeddings
    for e in g.edges:  # the weights in the original coordinates: sum_A y h - sum_B y h lies in span(h_E)
        comb = e.y[:e.pos.size] @ H[e.pos] - e.y[e.pos.size:] @ H[e.neg]
        if e.eq.size:
            comb = comb - H[e.eq].T @ np.linalg.lstsq(H[e.eq].T, comb, rcond=None)[0]
        assert np.linalg.norm(comb) <= 1e-8 * (e.y.sum() * np.abs(H).max())
        assert e.y.min() > 0
    lifted = glued_split(inst, g, lambda q: nonseparable_split(q, glue=False))
    assert lifted.ok
    assert [tuple(p) for p in lifted.nonseparable.tolist()] == sorted(N)
    assert lifted.n_separable == direct.n_separable
    # its point: margins >= about 1 on P, about 0 on N
    D = lifted.D
    S = inst.support_mask()
    for j in range(inst.m):
        top = D[inst.support(j)[0]] @ H[j]
        for v in np.flatnonzero(~S[j]):
            marg = top - D[v] @ H[j]
            assert (abs(marg) < 1e-6) if (j, v) in N else (marg > 0.5)


def test_most_seeds_glue():
    assert sum(glue_group(glue_instance(s)) is not None for s in range(12)) >= 8


def test_a_split_too_large_for_its_limit_goes_through_the_quotient():
    inst = next(i for i in (glue_instance(s, m=60) for s in range(20))
                if (g := glue_group(i)) is not None and g.group.size < i.V)
    direct = nonseparable_split(inst, glue=False)
    q = glue_group(inst).quotient(inst)
    from ntpcert.rows.kesler import KeslerSystem

    def nnz(x):
        s = KeslerSystem.build(x)
        return s.n_margin * (2 * x.d + 1) + s.n_eq * 2 * x.d
    limit = (nnz(q) + nnz(inst)) // 2
    assert nnz(q) <= limit < nnz(inst)
    small = nonseparable_split(inst, max_nonzeros=limit, max_cells=1, glue=False)
    assert not small.ok and "too large" in small.reason
    out = nonseparable_split(inst, max_nonzeros=limit, max_cells=1)
    assert out.ok, out.reason
    assert np.array_equal(out.nonseparable, direct.nonseparable)
    assert out.dual_classes is None
    from ntpcert.exact.split import exact_split

    es = exact_split(inst, out)
    assert not es.ok and "no N-certificate" in es.reason


def test_no_glue_where_h_is_not_of_full_column_rank():
    H = np.zeros((20, 3))
    H[:, 0] = np.arange(1, 21)
    H[:, 1] = -np.arange(1, 21)
    assert whitened(H) is None
    counts = np.zeros((20, 3), dtype=np.int64)
    counts[np.arange(20), np.arange(20) % 2] = 1
    assert glue_group(NTPInstance.from_counts(H, counts)) is None
