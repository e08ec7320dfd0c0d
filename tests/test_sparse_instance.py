"""The sparse-counts instance is the dense one: supports, weights, entropy, exact rows and fingerprint."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import ntpcert.instance.model as model_mod
import ntpcert.instance.sparse as sparse_mod
from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.sparse import DenseRefused, SparseCountsInstance


def _draw(rng, m=40, V=30, d=5, k=4):
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, k + 1)), replace=False)
        C[j, S] = rng.integers(1, 9, size=S.size)
    return rng.standard_normal((m, d)), C


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("form", ["dense", "csr"])
def test_the_sparse_instance_is_the_dense_one(seed, form, monkeypatch):
    if form == "csr":
        monkeypatch.setattr(model_mod, "SPARSE_HASH_CELLS", 10)
    rng = np.random.default_rng(seed)
    H, C = _draw(rng)
    a = NTPInstance.from_counts(H, C)
    b = SparseCountsInstance.from_csr(H, sp.csr_array(C))
    assert a.hash_form == b.hash_form == form
    assert a.fingerprint() == b.fingerprint()
    assert (b.m, b.d, b.V, b.n, b.nnz) == (a.m, a.d, a.V, a.n, int(np.count_nonzero(C)))
    assert all(np.array_equal(x, y) for x, y in zip(a.supports, b.supports))
    assert np.array_equal(a.weights, b.weights) and abs(a.entropy() - b.entropy()) <= 1e-12 * abs(a.entropy())
    for j in range(0, a.m, 7):
        assert a.exact_row(j) == b.exact_row(j) and a.exact_weight(j) == b.exact_weight(j)
        assert a.ratio_integers(j) == b.ratio_integers(j)
    assert np.array_equal(a.probs, b.probs) and np.array_equal(a.counts, b.counts)  # small: built on request
    W = rng.standard_normal((a.V, a.d))
    assert a.loss(W) == b.loss(W)


def test_a_changed_count_changes_the_csr_fingerprint(monkeypatch):
    monkeypatch.setattr(model_mod, "SPARSE_HASH_CELLS", 10)
    H, C = _draw(np.random.default_rng(1))
    base = SparseCountsInstance.from_csr(H, sp.csr_array(C)).fingerprint()
    j, z = map(int, np.argwhere(C > 0)[3])
    C2 = C.copy()
    C2[j, z] += 1
    assert SparseCountsInstance.from_csr(H, sp.csr_array(C2)).fingerprint() != base
    C3 = C.copy()  # a count moved to another token of the same row: same multiset of values
    free = int(np.flatnonzero(C[j] == 0)[0])
    C3[j, free], C3[j, z] = C3[j, z], 0
    assert SparseCountsInstance.from_csr(H, sp.csr_array(C3)).fingerprint() != base


def test_dense_arrays_past_the_limit_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(sparse_mod, "DENSE_CELLS", 100)
    H, C = _draw(np.random.default_rng(2))
    b = SparseCountsInstance.from_csr(H, sp.csr_array(C))
    with pytest.raises(DenseRefused, match=r"probs: this step needs the dense \(m, V\) = \(40, 30\) array, 1,200 "
                                           r"cells.*not sparse yet"):
        b.probs  # noqa: B018
    assert b.entropy() > 0 and len(b.fingerprint()) == 64  # what is sparse still works


@pytest.mark.parametrize("bad, match", [
    (sp.csr_array(np.array([[1, 0], [0, 0]])), r"counts\[1\]: row sums to 0"),
    (sp.csr_array(np.array([[1, -2], [1, 0]])), r"counts\[0, 1\]: -2, expected a non-negative integer"),
    (sp.csr_array(np.array([[1.5, 0], [1, 0]])), "counts: expected integers, got dtype float64"),
    (np.array([[1, 0], [1, 0]]), "counts: expected a scipy sparse matrix, got ndarray"),
    (sp.csr_array(np.array([[1], [1]])), "vocabulary size V = 1"),
])
def test_bad_sparse_counts_are_refused_in_one_line(bad, match):
    with pytest.raises(InputError, match=match):
        SparseCountsInstance.from_csr(np.ones((2, 2)), bad)


def test_token_multiplicity_keeps_the_instance_sparse():
    H, C = _draw(np.random.default_rng(3), V=6, k=1)
    C = np.hstack([C, np.zeros((C.shape[0], 1), dtype=np.int64)])
    b = SparseCountsInstance.from_csr(H, sp.csr_array(C))
    n = np.ones(b.V, dtype=np.int64)
    n[-1] = 5
    bm = b.with_token_multiplicity(n)
    assert isinstance(bm, SparseCountsInstance) and bm.fingerprint() == b.fingerprint()
    assert np.array_equal(bm.multiplicity(), n)


def test_counts_past_int64_are_refused_not_wrapped():
    big = np.uint64(2**63)  # a uint64 past 2^63 - 1 would wrap to a negative int64
    C = sp.csr_array((np.array([big, 1], dtype=np.uint64), (np.array([0, 1]), np.array([0, 0]))), shape=(2, 2))
    with pytest.raises(InputError, match=r"counts: the total n = 9223372036854775809 exceeds"):
        SparseCountsInstance.from_csr(np.ones((2, 2)), C)
    # two stored duplicates of 2^62 add to 2^63: refused before scipy adds them in int64
    half = np.int64(2**62)
    D = sp.coo_array((np.array([half, half, 1]), (np.array([0, 0, 1]), np.array([0, 0, 0]))), shape=(2, 2))
    with pytest.raises(InputError, match="exceeds"):
        SparseCountsInstance.from_csr(np.ones((2, 2)), D)
    # at the bound itself: accepted, the total exactly 2^63 - 1
    E = sp.csr_array((np.array([2**63 - 2, 1], dtype=np.int64), (np.array([0, 1]), np.array([0, 1]))), shape=(2, 2))
    assert SparseCountsInstance.from_csr(np.ones((2, 2)), E).n == 2**63 - 1
