import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.float_witness import float_compatibility
from ntpcert.rows.subspace import Subspace, least_squares_fit

from .conftest import TOL, random_instance


def _sub(inst):
    return Subspace.build(KeslerSystem.build(inst))


@pytest.mark.parametrize("seed", range(6))
def test_w_star_solves_4_and_lies_in_F(seed):
    rng = np.random.default_rng(seed)
    m, d, V = 6, 9, 5  # d > m: compatible (Lemma 1)
    inst = random_instance(rng, m, d, V, kmin=1, kmax=4)
    F = _sub(inst)
    assert float_compatibility(F).holds is True
    sy = F.system
    W = least_squares_fit(F).W_star
    assert np.max(np.abs(sy.apply_eq(W) - sy.log_odds())) < TOL["linalg"] * 10
    assert np.max(np.abs(F.project(W) - W)) < TOL["linalg"]
    # for every pair z, z' in S_j, not only the anchored ones
    L = inst.logits(W)
    for j in range(m):
        S = inst.support(j)
        for z in S:
            for zp in S:
                assert L[j, z] - L[j, zp] == pytest.approx(np.log(inst.probs[j, z] / inst.probs[j, zp]), abs=1e-8)


def test_w_star_is_minimum_norm():
    rng = np.random.default_rng(3)
    inst = random_instance(rng, 4, 8, 5, kmin=2, kmax=4)
    F = _sub(inst)
    W = least_squares_fit(F).W_star
    # any other solution differs by an element of the null space of A_eq, which is F-perp
    for _ in range(5):
        other = W + F.project_perp(rng.standard_normal(W.shape))
        assert np.linalg.norm(other) >= np.linalg.norm(W) - 1e-12
        assert np.allclose(F.system.apply_eq(other), F.system.apply_eq(W), atol=1e-9)


def test_projections_and_basis():
    rng = np.random.default_rng(4)
    inst = random_instance(rng, 7, 3, 6, kmin=1, kmax=5)
    F = _sub(inst)
    B = F.basis().reshape(F.dim, -1)
    assert np.allclose(B @ B.T, np.eye(F.dim), atol=TOL["linalg"])
    assert F.dim == np.linalg.matrix_rank(F.system.eq_matrix().toarray())
    X = rng.standard_normal((6, 3))
    P = F.project(X)
    assert np.allclose(P, (B.T @ (B @ X.ravel())).reshape(6, 3), atol=TOL["linalg"])
    assert np.allclose(F.project(P), P, atol=TOL["linalg"])
    assert abs(np.sum(P * F.project_perp(X))) < TOL["linalg"]


def _settled(inst):
    return float_compatibility(_sub(inst))


def test_same_embedding_different_log_odds_is_incompatible():
    """The float pipeline says "no" only with an exact left null vector whose y^T b != 0."""
    h = np.array([[1.0, 2.0, -1.0]])
    inst = NTPInstance.from_counts(np.vstack([h, h]), [[1, 2, 0], [1, 3, 0]])
    assert not _sub(inst).full_row_rank  # rank deficient: the float rank alone cannot say
    res = _settled(inst)
    assert res.holds is False and "exact left null vector" in res.reason and res.engine == "float-null-vectors"
    assert res.check(inst) == ""
    assert least_squares_fit(_sub(inst)).relative_residual > 1e-3


def test_scaled_embedding_with_doubled_log_odds_is_compatible():
    h = np.array([0.5, -1.25])
    # p1 = (1/3, 2/3), p2 = (1/5, 4/5): log-odds log 2 and log 4 = 2 log 2, h2 = 2 h1
    inst = NTPInstance.from_counts(np.vstack([h, 2 * h]), [[1, 2], [1, 4]])
    res = _settled(inst)
    assert res.holds is True and "span its null space" in res.reason and res.check(inst) == ""
    changed = NTPInstance.from_counts(np.vstack([h, 2 * h]), [[1, 2], [1, 5]])
    assert _settled(changed).holds is False


def test_full_row_rank_is_compatible_whatever_the_log_odds():
    inst = NTPInstance.from_counts(np.eye(3), [[1, 7, 0], [0, 2, 3], [5, 0, 11]])
    res = float_compatibility(_sub(inst))
    assert res.holds is True and "full row rank" in res.reason and res.engine == "float-rank"


def test_near_duplicate_embeddings_are_not_called_incompatible():
    """h2 = h1 + 1e-12 noise: exactly, A_eq has full row rank (compatible); floats cannot see the
    difference from an exact duplicate, so the verdict is undetermined, never "no"."""
    rng = np.random.default_rng(0)
    h = rng.standard_normal(3)
    inst = NTPInstance.from_counts(np.vstack([h, h + 1e-12 * rng.standard_normal(3)]), [[1, 2, 0], [1, 3, 0]])
    assert _settled(inst).holds in (True, None)


def test_one_hot_supports_give_trivial_F():
    rng = np.random.default_rng(0)
    inst = random_instance(rng, 5, 3, 4, kmin=1, kmax=1)
    F = _sub(inst)
    assert F.dim == 0
    assert float_compatibility(F).holds is True and np.all(least_squares_fit(F).W_star == 0)
