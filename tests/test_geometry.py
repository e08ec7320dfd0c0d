"""The nuclear-norm NTP-SVM of the unconstrained-features model: the structured solver and the cvxpy path
against an independent SDP written here, and the certified gap as a valid bound."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from ntpcert.errors import InputError
from ntpcert.geometry.certificate import average_token_rows, certify_pair, repair_primal
from ntpcert.geometry.cvx import solve_nuclear_cvxpy
from ntpcert.geometry.lbfgs import lbfgs
from ntpcert.geometry.pattern import SupportPattern, finite_part, ufm_excess_loss
from ntpcert.geometry.certificate import nuclear_norm
from ntpcert.geometry.structured import (GAP_TOL, GAP_TOL_LARGE, LARGE_ENTRIES, _escape_column,  # private: its saddle test
                                       default_gap_tol, solve_nuclear_structured)
from tests.conftest import TOL, random_instance

#: The certified relative duality gap the structured solver must report.
GAP_TARGET = 1e-8


def random_mask(rng: np.random.Generator, V: int, m: int, density: float = 0.4) -> np.ndarray:
    S = rng.random((V, m)) < density
    for j in range(m):
        if not S[:, j].any():
            S[rng.integers(V), j] = True
    if S.all():
        S[0, 0] = False
        S[1, 0] = True
    return S


def reference_sdp(S: np.ndarray) -> tuple[float, np.ndarray]:
    r"""Independent formulation: :math:`\min \tfrac12(\mathrm{tr}P + \mathrm{tr}Q)` over
    :math:`\begin{psmallmatrix}P & L\\ L^\top & Q\end{psmallmatrix} \succeq 0`, with a free level :math:`c_j` per
    context: :math:`L_{z,j} = c_j` on :math:`S_j` and :math:`L_{v,j} \le c_j - 1` off it."""
    V, m = S.shape
    Z = cp.Variable((V + m, V + m), PSD=True)
    L = Z[:V, V:]
    c = cp.Variable(m)
    ones = np.ones(V)
    cons = []
    for j in range(m):
        inn, out = np.flatnonzero(S[:, j]), np.flatnonzero(~S[:, j])
        cons.append(L[inn, j] == c[j] * ones[: inn.size])
        if out.size:
            cons.append(L[out, j] <= (c[j] - 1) * ones[: out.size])
    prob = cp.Problem(cp.Minimize(0.5 * cp.trace(Z)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE), prob.status
    return float(prob.value), np.asarray(L.value)


def check_against_reference(S: np.ndarray) -> None:
    pattern = SupportPattern.from_mask(S)
    ref_obj, ref_L = reference_sdp(S)
    sol = solve_nuclear_structured(pattern)
    assert sol.relative_gap <= GAP_TARGET, (sol.relative_gap, sol.status)
    assert sol.gap >= -TOL["linalg"] * sol.objective  # weak duality
    assert sol.equality_violation <= TOL["linalg"] * max(1.0, np.abs(sol.L).max())
    assert sol.min_margin >= 1.0 - TOL["linalg"]
    assert abs(sol.objective - ref_obj) <= TOL["solver_agreement"] * ref_obj
    assert sol.dual_objective <= ref_obj * (1 + TOL["solver_agreement"])  # its lower bound holds independently
    # the optimum is unique up to the solvers' accuracy here: compare the matrices too
    assert np.linalg.norm(sol.L - ref_L) <= TOL["solver_agreement"] * np.linalg.norm(ref_L) * 10


def varied_mask(seed: int) -> np.ndarray:
    """A random (V, m) support matrix with V in 2..8 and m in 1..12, by ``seed % 4``: 0 plain, 1 with tokens
    outside every support, 2 with contexts sharing supports, 3 with both; densities from 0.15 to 0.8."""
    rng = np.random.default_rng(1000 + seed)
    V, m = int(rng.integers(2, 9)), int(rng.integers(1, 13))
    kind = seed % 4
    r = m if kind in (0, 1) else int(rng.integers(1, m + 1))
    outside = np.zeros(V, dtype=bool)
    if kind in (1, 3) and V >= 3:
        outside[rng.choice(V, size=int(rng.integers(1, V - 1)), replace=False)] = True
    inside = np.flatnonzero(~outside)
    density = float(rng.uniform(0.15, 0.8))
    base = np.zeros((V, r), dtype=bool)
    for g in range(r):
        col = rng.random(inside.size) < density
        if not col.any():
            col[rng.integers(inside.size)] = True
        base[inside, g] = col
    if base.all():
        base[inside[0], 0] = False
        if not base[:, 0].any():
            base[inside[-1], 0] = True
    return base[:, rng.permutation(np.concatenate([np.arange(r), rng.integers(r, size=m - r)]))]


#: Number of varied random patterns in the slow agreement test.
N_VARIED = 40

#: The 5 × 4 pattern (token 2 outside every support) on which the solver once stalled at a certified
#: relative gap of 1.3e-2: a saddle of the factorised inner problem (see ``_escape_column``).
SADDLE_PATTERN = np.array([[1, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 1, 1]], dtype=bool)


@pytest.mark.parametrize("seed,V,m", [(0, 3, 4), (1, 4, 6), (2, 5, 5)])
def test_structured_agrees_with_independent_sdp(seed: int, V: int, m: int) -> None:
    check_against_reference(random_mask(np.random.default_rng(seed), V, m))


def test_structured_leaves_the_saddle_of_a_token_outside_every_support() -> None:
    check_against_reference(SADDLE_PATTERN)


def test_escape_column_keeps_the_product_and_descends() -> None:
    rng = np.random.default_rng(11)
    A, B = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    G = rng.standard_normal((5, 4))
    G *= 0.9 / np.linalg.norm(G, 2)
    assert _escape_column(A, B, G) is None  # spectral norm <= 1: nothing to escape
    G *= 1.5 / 0.9
    An, Bn, u, v, sigma = _escape_column(A, B, G)
    assert abs(sigma - 1.5) <= TOL["linalg"]
    assert np.allclose(An @ Bn.T, A @ B.T, atol=TOL["linalg"])  # full rank: a zero column appended
    assert An.shape[1] == 4 and not An[:, -1].any() and not Bn[:, -1].any()
    # along (t u, -t v) the linearised objective falls like t^2 (1 - sigma)
    t = 1e-3
    a, b = t * u, -t * v
    assert 0.5 * (a @ a + b @ b) + a @ G @ b == pytest.approx(t * t * (1 - sigma), rel=TOL["linalg"])
    # a rank-deficient pair (a null direction hidden by a rotation): that direction is reused, the width stays
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    A2, B2 = np.hstack([A[:, :2], np.zeros((5, 1))]) @ Q, np.hstack([B[:, :2], np.zeros((4, 1))]) @ Q
    An2, Bn2, *_ = _escape_column(A2, B2, G)
    assert An2.shape[1] == 3 and not An2[:, -1].any() and not Bn2[:, -1].any()
    assert np.allclose(An2 @ Bn2.T, A2 @ B2.T, atol=TOL["linalg"])


def test_varied_patterns_cover_the_hard_cases() -> None:
    masks = [varied_mask(s) for s in range(N_VARIED)]
    assert all(S.shape[0] <= 8 and S.shape[1] <= 12 for S in masks)
    assert sum(bool((~S.any(axis=1)).any()) for S in masks) >= 10  # a token outside every support
    assert sum(SupportPattern.from_mask(S).r < S.shape[1] for S in masks) >= 10  # shared supports


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_structured_agrees_with_independent_sdp_many(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    V, m = int(rng.integers(2, 9)), int(rng.integers(1, 13))
    check_against_reference(random_mask(rng, V, m, density=float(rng.uniform(0.2, 0.7))))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(N_VARIED))
def test_structured_agrees_with_independent_sdp_varied(seed: int) -> None:
    check_against_reference(varied_mask(seed))


def test_cvxpy_path_agrees_with_independent_sdp() -> None:
    S = random_mask(np.random.default_rng(7), 6, 9)
    ref_obj, _ = reference_sdp(S)
    sol = solve_nuclear_cvxpy(SupportPattern.from_mask(S))
    assert abs(sol.objective - ref_obj) <= TOL["solver_agreement"] * ref_obj
    assert sol.dual_objective <= ref_obj * (1 + TOL["solver_agreement"])  # its lower bound holds independently
    assert sol.relative_gap <= TOL["kkt"]


def test_gap_bounds_the_suboptimality_of_any_pair() -> None:
    rng = np.random.default_rng(3)
    S = random_mask(rng, 5, 7)
    pattern = SupportPattern.from_mask(S)
    ref_obj, _ = reference_sdp(S)
    for _ in range(5):
        cand = certify_pair(rng.standard_normal(S.shape), rng.standard_normal(S.shape), pattern,
                            solver="random", status="", seconds=0.0, iterations=0)
        assert cand.min_margin >= 1.0 - TOL["linalg"]  # the repaired primal is feasible
        assert cand.dual_objective <= ref_obj * (1 + TOL["kkt"])  # a lower bound
        assert cand.objective >= ref_obj * (1 - TOL["kkt"])  # an upper bound


def test_centred_support_is_feasible_with_unit_margins() -> None:
    S = random_mask(np.random.default_rng(4), 6, 10)
    pattern = SupportPattern.from_mask(S)
    St = pattern.centered_support()
    assert pattern.equality_violation(St) == 0.0
    assert abs(pattern.min_margin(St) - 1.0) <= TOL["linalg"]
    assert np.allclose(repair_primal(St, pattern), St)


def test_same_support_columns_are_merged() -> None:
    S = np.array([[1, 1, 0, 1], [0, 0, 1, 0], [1, 1, 0, 0]], dtype=bool)
    p = SupportPattern.from_mask(S)
    assert p.r == 3 and list(p.group_of) == [0, 0, 1, 2] and list(p.multiplicity) == [2, 1, 1]


def test_finite_part_reproduces_in_support_probabilities() -> None:
    inst = random_instance(np.random.default_rng(5), m=6, d=3, V=5, kmin=2)
    Lin = finite_part(inst)
    pattern = SupportPattern.from_instance(inst)
    # in F: zero off the supports, zero mean on them
    assert np.all(Lin[~pattern.mask] == 0.0)
    assert np.allclose(pattern.project_perp(Lin), 0.0, atol=TOL["linalg"])
    # Lin + t·L^mm reaches the entropy: the excess loss falls towards 0 as t grows
    Lmm = solve_nuclear_structured(pattern).L
    excess = [ufm_excess_loss(inst, Lin + t * Lmm) for t in (1.0, 5.0, 20.0)]
    assert excess[0] > excess[1] > excess[2] >= 0.0 and excess[2] < 1e-6


@pytest.mark.parametrize("mask,field", [
    (np.ones((1, 3), dtype=bool), "mask"),
    (np.array([[1, 0], [0, 0]], dtype=bool), "mask"),
    (np.array([[2, 0], [0, 1]]), "mask"),
])
def test_bad_masks_rejected(mask: np.ndarray, field: str) -> None:
    with pytest.raises(InputError, match=field):
        SupportPattern.from_mask(mask)


def test_cvxpy_rejects_non_sdp_solver() -> None:
    with pytest.raises(InputError, match="solver"):
        solve_nuclear_cvxpy(SupportPattern.from_mask(np.eye(3, dtype=bool)), solver="OSQP")


def test_token_rows_averaged_feasibly_and_never_larger() -> None:
    S = np.array([[1, 0, 1], [1, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=bool)
    pattern = SupportPattern.from_mask(S)
    rng = np.random.default_rng(12)
    for _ in range(5):
        L = repair_primal(rng.standard_normal(S.shape), pattern)
        Lf = average_token_rows(L, pattern)
        assert np.array_equal(Lf[0], Lf[1]) and np.array_equal(Lf[3], Lf[4]) and np.array_equal(Lf[2], L[2])
        assert pattern.equality_violation(Lf) <= TOL["linalg"] and pattern.min_margin(Lf) >= 1 - TOL["linalg"]
        assert np.abs(Lf.sum(axis=0)).max() <= TOL["linalg"]
        assert nuclear_norm(Lf) <= nuclear_norm(L) * (1 + TOL["linalg"])  # a projection on the rows
        assert np.allclose(repair_primal(Lf, pattern), Lf, atol=TOL["linalg"])  # the repair keeps it


def test_cvxpy_path_does_not_average_token_rows() -> None:
    """The word-collapse statement stays an independent check on cvxpy's solutions."""
    S = np.array([[1, 0, 1], [1, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=bool)
    pattern = SupportPattern.from_mask(S)
    L = np.zeros(S.shape)
    L[3], L[4] = -2.0, -3.0  # both below the margin: the repair leaves them apart
    sol = certify_pair(L, L, pattern, solver="t", status="", seconds=0.0, iterations=0)
    assert not np.allclose(sol.L[3], sol.L[4])


def test_lbfgs_solves_an_ill_conditioned_quadratic() -> None:
    """L-BFGS meets its own stopping rule at condition number 1e3, whatever BLAS kernel evaluates the objective."""
    rng = np.random.default_rng(13)
    Q = np.linalg.qr(rng.standard_normal((40, 40)))[0]
    A = Q @ np.diag(np.logspace(0, 3, 40)) @ Q.T  # condition number 1e3
    b = rng.standard_normal(40)
    gtol = TOL["lbfgs_gtol"]
    res = lbfgs(lambda v: (0.5 * v @ A @ v - b @ v, A @ v - b), np.zeros(40), maxiter=5000, memory=10, gtol=gtol)
    assert res.reason == "gtol", res
    assert np.abs(A @ res.x - b).max() <= gtol
    assert np.linalg.norm(A @ res.x - b) <= np.sqrt(40) * gtol


def test_lbfgs_reports_why_it_stopped() -> None:
    A, b = np.diag([1.0, 1e3]), np.ones(2)
    res = lbfgs(lambda v: (0.5 * v @ A @ v - b @ v, A @ v - b), np.zeros(2), maxiter=1, memory=3, gtol=0.0)
    assert res.reason == "maxiter" and res.iterations == 1 and res.evaluations >= 2
    res = lbfgs(lambda v: (0.5 * v @ A @ v - b @ v, A @ v - b), np.array([1.0, 1e-3]), maxiter=10, memory=3, gtol=0.0)
    assert res.reason in ("gtol", "line search") and res.gmax <= 1e-12


def test_default_gap_target_depends_on_the_merged_size() -> None:
    small = SupportPattern.from_mask(random_mask(np.random.default_rng(0), 5, 8))
    large = SupportPattern.from_mask(np.eye(120, dtype=bool)[:, :100] | np.eye(120, 100, k=-1, dtype=bool))
    assert default_gap_tol(small) == GAP_TOL and default_gap_tol(large) == GAP_TOL_LARGE
    assert large.V * large.r > LARGE_ENTRIES >= small.V * small.r
