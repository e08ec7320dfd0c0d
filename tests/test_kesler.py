import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.rows.kesler import KeslerSystem

from .conftest import TOL, random_instance


@pytest.mark.parametrize("seed", range(5))
def test_matrix_free_maps_equal_sparse_matrices(seed):
    rng = np.random.default_rng(seed)
    inst = random_instance(rng, 7, 4, 6)
    sy = KeslerSystem.build(inst)
    A, M = sy.eq_matrix(), sy.margin_matrix()
    W = rng.standard_normal((6, 4))
    assert np.allclose(A @ W.ravel(), sy.apply_eq(W), atol=TOL["linalg"])
    assert np.allclose(M @ W.ravel(), sy.apply_margin(W), atol=TOL["linalg"])
    y, lam = rng.standard_normal(sy.n_eq), rng.standard_normal(sy.n_margin)
    assert np.allclose(A.T @ y, sy.apply_eq_T(y).ravel(), atol=TOL["linalg"])
    assert np.allclose(M.T @ lam, sy.apply_margin_T(lam).ravel(), atol=TOL["linalg"])
    assert np.allclose((A @ A.T).toarray(), sy.eq_gram(), atol=TOL["linalg"])


def test_row_counts_and_vec_order():
    H = np.array([[1.0, 2.0], [3.0, 4.0]])
    inst = NTPInstance.from_counts(H, [[2, 0, 1], [0, 5, 0]])
    sy = KeslerSystem.build(inst)
    assert sy.n_eq == 1 and sy.n_margin == 1 + 2
    # the equality row is (e_2 - e_0) kron h_0, in vec(W) = W.reshape(-1) order (index v*d + i)
    row = sy.eq_matrix().toarray()[0]
    expected = np.zeros(6)
    expected[[4, 5]] = H[0]
    expected[[0, 1]] = -H[0]
    assert np.array_equal(row, expected)
    # margins of context 1 (anchor 1): (e_1 - e_0) h_1 and (e_1 - e_2) h_1
    W = np.arange(6.0).reshape(3, 2)
    Z = H @ W.T
    assert sorted(sy.apply_margin(W)[1:].tolist()) == sorted([Z[1, 1] - Z[1, 0], Z[1, 1] - Z[1, 2]])


def test_log_odds_from_counts():
    inst = NTPInstance.from_counts(np.eye(2), [[1, 3, 0], [2, 0, 6]])
    b = KeslerSystem.build(inst).log_odds()
    assert np.allclose(b, [np.log(3), np.log(3)])
