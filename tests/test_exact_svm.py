"""Exact NTP-SVM gap bounds: the repaired pair is exactly feasible and the bound holds."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.exact.svm_gap import ExactSVMBounder, exact_svm_bound
from ntpcert.solve.svm import solve_svm

from .conftest import TOL, random_instance


def _exact_logits(W: np.ndarray, H: np.ndarray) -> list[list[Fraction]]:
    """Logits (V, m) of an object matrix W of Fractions, in plain Fraction arithmetic."""
    Hq = [[Fraction(*float(x).as_integer_ratio()) for x in row] for row in H]
    return [[sum((W[v, i] * Hq[j][i] for i in range(H.shape[1])), Fraction(0)) for j in range(H.shape[0])]
            for v in range(W.shape[0])]


def _assert_exactly_primal_feasible(inst: NTPInstance, W: np.ndarray) -> None:
    L = _exact_logits(W, inst.embeddings)
    for j in range(inst.m):
        S = set(int(z) for z in inst.support(j))
        z0 = min(S)
        for v in range(inst.V):
            if v in S:
                assert L[v][j] == L[z0][j], (j, v)
            else:
                assert L[z0][j] - L[v][j] >= 1, (j, v)


def _assert_exactly_dual_feasible(inst: NTPInstance, a: np.ndarray) -> None:
    mask = inst.support_mask().T
    for j in range(inst.m):
        assert sum((Fraction(float(x)) for x in a[:, j]), Fraction(0)) == 0
        assert np.all(a[~mask[:, j], j] <= 0)


@pytest.mark.parametrize("shape", [(5, 8, 4, 3), (8, 20, 6, 3), (10, 14, 8, 4), (6, 4, 5, 3)])
def test_bound_from_solver_pair_is_exactly_feasible_and_tight(rng, shape):
    m, d, V, kmax = shape
    inst = random_instance(rng, m, d, V, 1, kmax)
    sol = solve_svm(inst)
    b = exact_svm_bound(inst, sol.W, sol.dual)
    assert b.primal_feasible, b.reason
    _assert_exactly_primal_feasible(inst, b.W_fractions())
    _assert_exactly_dual_feasible(inst, b.a)
    assert b.gap >= 0
    assert b.primal_objective == b.dual_objective + b.gap
    # the certified distance covers the solver's own W^mm up to the solver's accuracy
    assert np.linalg.norm(b.W() - sol.W) <= b.distance_bound + np.sqrt(TOL["kkt"]) * max(1.0, sol.norm)
    assert b.norm_lower <= sol.norm * (1 + TOL["kkt"]) and sol.norm <= b.norm_upper * (1 + TOL["kkt"])
    assert b.relative_gap <= 10 * TOL["kkt"]


def test_gap_grows_when_the_pair_is_perturbed(rng):
    inst = random_instance(rng, 6, 12, 5, 1, 3)
    sol = solve_svm(inst)
    tight = exact_svm_bound(inst, sol.W, sol.dual)
    loose = exact_svm_bound(inst, 1.5 * sol.W, 0.5 * sol.dual)
    assert loose.gap > tight.gap
    assert loose.distance_bound > tight.distance_bound


def test_repeated_embedding_with_shared_token_uses_consistent_common_logits(rng):
    # contexts 0 and 1 share an embedding and a support token: H_{J_v} is rank deficient
    H = rng.standard_normal((4, 6))
    H[1] = H[0]
    C = np.array([[3, 1, 0, 0, 0], [1, 2, 0, 0, 0], [0, 0, 2, 5, 0], [0, 4, 0, 0, 1]])
    inst = NTPInstance.from_counts(H, C)
    B = ExactSVMBounder(inst)
    assert B.C is not None
    sol = solve_svm(inst)
    b = B.bound(sol.W, sol.dual)
    assert b.primal_feasible, b.reason
    _assert_exactly_primal_feasible(inst, b.W_fractions())


def test_infeasible_primal_point_is_reported_not_repaired(rng):
    inst = random_instance(rng, 5, 8, 4, 1, 3)
    sol = solve_svm(inst)
    b = exact_svm_bound(inst, -sol.W, sol.dual)
    assert not b.primal_feasible and b.gap is None and b.reason
    assert b.distance_bound == np.inf
    # the dual bound alone still holds
    assert float(b.dual_objective) <= sol.objective * (1 + TOL["kkt"])


def test_no_margin_rows_gives_zero_primal(rng):
    C = rng.integers(1, 5, size=(3, 4))
    inst = NTPInstance.from_counts(rng.standard_normal((3, 5)), C)
    b = exact_svm_bound(inst, None, np.zeros((4, 3)))
    assert b.primal_feasible and b.primal_objective == 0 and b.gap == 0


@pytest.mark.parametrize("W_shape,a_shape,bits,needle", [
    ((4, 7), (4, 5), 40, "W: expected shape"),
    ((4, 8), (5, 4), 40, "a: expected shape"),
    ((4, 8), (4, 5), 0, "bits"),
    ((4, 8), (4, 5), 64, "bits"),
    ((4, 8), (4, 5), True, "bits"),
])
def test_invalid_calls_name_the_argument(rng, W_shape, a_shape, bits, needle):
    from ntpcert.errors import InputError

    inst = random_instance(rng, 5, 8, 4, 1, 3)
    with pytest.raises(InputError, match=needle):
        exact_svm_bound(inst, np.zeros(W_shape), np.zeros(a_shape), bits=bits)


# ------------------------------------------------------------------------------ helpers
@pytest.mark.parametrize("k,n,seed", [(1, 4, 0), (3, 10, 1), (12, 250, 2), (40, 60, 3), (300, 320, 4)])
def test_pivot_columns_pick_the_pivoted_qr_columns(k, n, seed):
    from scipy.linalg import qr

    from ntpcert.exact.svm_gap import pivot_columns

    A = np.random.default_rng(seed).standard_normal((k, n))
    mine = pivot_columns(A)
    ref = qr(A, mode="economic", pivoting=True)[2][:k]
    assert sorted(mine.tolist()) == sorted(ref.tolist())
    assert np.linalg.matrix_rank(A[:, mine]) == k


def test_pivot_columns_on_rank_deficient_rows_returns_distinct_columns():
    from ntpcert.exact.svm_gap import pivot_columns

    A = np.zeros((3, 5))
    A[0, 1] = 1.0
    piv = pivot_columns(A)
    assert piv[0] == 1 and len(set(piv.tolist())) == 3 and piv.max() < 5


def test_fmpq_list_is_exact_and_rejects_non_finite():
    import flint

    from ntpcert.exact.rational import fmpq_list

    vals = np.array([[0.1, -2.5], [1e-300, 3.0]])
    got = fmpq_list(vals)
    assert got == [flint.fmpq(*float(x).as_integer_ratio()) for x in vals.ravel()]
    with pytest.raises(ValueError):
        fmpq_list(np.array([1.0, np.nan]))


def test_exact_package_loads_submodules_lazily():
    import ntpcert.exact as ex

    assert set(ex.__all__) <= set(dir(ex))
    assert ex.exact_svm_bound is exact_svm_bound
    with pytest.raises(AttributeError):
        ex.no_such_name  # noqa: B018


def test_bound_on_repeated_token_rows_equals_the_row_by_row_bound(monkeypatch):
    """Tokens 4..29 never occur in a support: one class, identical rows of W and of the dual. The
    bound computed on distinct rows must equal, exactly, the bound computed row by row."""
    rng = np.random.default_rng(11)
    counts = np.zeros((8, 30), dtype=np.int64)
    for j in range(8):
        counts[j, rng.choice(4, size=int(rng.integers(1, 4)), replace=False)] = rng.integers(1, 9)
    inst = NTPInstance.from_counts(rng.standard_normal((8, 10)), counts)
    sol = solve_svm(inst, solver="structured-float")
    fast = exact_svm_bound(inst, sol.W, sol.dual)
    import ntpcert.exact.dyadic as dy
    import ntpcert.exact.svm_gap as es

    assert dy.unique_rows(fast.W_base) is not None  # the shortcut was taken
    monkeypatch.setattr(es, "unique_rows", lambda X: None)
    monkeypatch.setattr(dy, "unique_rows", lambda X: None)
    slow = ExactSVMBounder(inst).bound(sol.W, sol.dual)
    assert fast.primal_feasible and slow.primal_feasible
    assert fast.gap == slow.gap and fast.dual_objective == slow.dual_objective
    assert fast.primal_objective == slow.primal_objective
    assert fast.relative_gap <= 1e-8


@pytest.mark.parametrize("seed", range(2))
def test_the_repair_basis_modulo_a_prime_is_checked_against_every_row(seed, monkeypatch):
    """Soft supports with more tied contexts per token than d: the consistency rows of the exact repair are
    reduced to the rows independent modulo a prime, and a projected t is checked against every row exactly.
    A basis that does not span C (one row, forced here) fails that check and the exact rref takes over: the
    bound is the same either way, and the repaired primal satisfies every row."""
    import ntpcert.exact.svm_gap as G
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    from .test_active_set_svm import _soft

    system = KeslerSystem.build(_soft(seed, m=80, d=6, V=6))
    sol = solve_svm(system, solver="active-set")
    fast = G.ExactSVMBounder(system)
    assert len(fast.constraints) > fast.C.nrows() > 1 and not fast.exact_basis
    b_fast = fast.bound(sol.W, sol.dual)
    assert not fast.exact_basis  # the rows mod p spanned C: no fallback
    monkeypatch.setattr(G, "_independent_rows", lambda constraints, pos: [0])
    forced = G.ExactSVMBounder(system)
    assert forced.C.nrows() == 1
    b_forced = forced.bound(sol.W, sol.dual)
    assert forced.exact_basis and forced.C.nrows() == fast.C.nrows()  # the rref took over, same rank
    assert b_forced.gap == b_fast.gap and b_fast.primal_feasible and b_fast.relative_gap < 1e-6
