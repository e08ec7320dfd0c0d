"""The NTP-SVM in other norms: closed forms, coincidences between norms, weak duality, and the
checked certificates of each solve."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.errors import InfeasibleError, InputError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.solve.svm import solve_svm
from ntpcert.solve.norms import DUAL_NORM, NORMS, lower_bound, matrix_norm, repair, solve_norm_svm

from .conftest import TOL, random_instance


def onehot_instance(rng, m: int = 4, V: int = 5) -> NTPInstance:
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(1, V))
        S = rng.choice(V, size=k, replace=False)
        C[j, S] = rng.integers(1, 9, size=k)
    return NTPInstance.from_counts(np.eye(m), C)


@pytest.fixture
def sep(rng) -> NTPInstance:
    return random_instance(rng, m=5, d=8, V=4, kmin=1, kmax=3)


def _feasible(inst: NTPInstance, W: np.ndarray) -> tuple[float, float]:
    system = KeslerSystem.build(inst)
    eq = system.apply_eq(W)
    return (float(np.abs(eq).max()) if eq.size else 0.0), float(system.apply_margin(W).min())


# ---------------------------------------------------------------------------- norms themselves
def test_matrix_norms_and_duality_pairs(rng):
    A = rng.standard_normal((4, 6))
    s = np.linalg.svd(A, compute_uv=False)
    assert matrix_norm(A, "fro") == pytest.approx(np.sqrt(np.sum(A * A)))
    assert matrix_norm(A, "max") == pytest.approx(np.abs(A).max())
    assert matrix_norm(A, "l1") == pytest.approx(np.abs(A).sum())
    assert matrix_norm(A, "spectral") == pytest.approx(s.max())
    assert matrix_norm(A, "nuclear") == pytest.approx(s.sum())
    for _ in range(20):  # Hoelder: <A, B> <= ||A|| ||B||_* for every pair named dual
        B = rng.standard_normal((4, 6))
        for n in NORMS:
            assert float(np.vdot(A, B)) <= matrix_norm(A, n) * matrix_norm(B, DUAL_NORM[n]) * (1 + 1e-12)
    with pytest.raises(InputError, match="norm"):
        matrix_norm(A, "l2")


# ---------------------------------------------------------------------------- closed forms
def test_onehot_max_and_l1_closed_forms(rng):
    r"""With :math:`h_j = e_j` the columns decouple: in column j the support entries are equal
    (6a), say a, and the others at most a - 1. The max-norm optimum is a = 1/2, others -1/2
    (unique); the l1 optimum is :math:`\min(k_j, V - k_j)` per column."""
    inst = onehot_instance(rng)
    V = inst.V
    mx = solve_norm_svm(inst, "max")
    assert mx.value == pytest.approx(0.5, abs=TOL["kkt"])
    expect = np.full((V, inst.m), -0.5)
    for j in range(inst.m):
        expect[inst.support(j), j] = 0.5
    assert np.max(np.abs(mx.W - expect)) <= 10 * TOL["kkt"]
    l1 = solve_norm_svm(inst, "l1")
    k = inst.support_sizes
    assert l1.value == pytest.approx(float(np.minimum(k, V - k).sum()), rel=TOL["kkt"])


def test_one_dimensional_embeddings_make_all_matrix_norms_frobenius(rng):
    """With d = 1, W is a column and its spectral, nuclear and Frobenius norms coincide."""
    C = np.array([[3, 1, 0, 0], [9, 1, 0, 0], [0, 0, 2, 0]])  # separable: w2 < w3 < w0 = w1
    inst = NTPInstance.from_counts(np.array([[1.0], [2.0], [-1.0]]), C)
    fro = solve_svm(inst)
    for n in ("spectral", "nuclear", "fro"):
        sol = solve_norm_svm(inst, n)
        assert sol.value == pytest.approx(fro.norm, rel=10 * TOL["kkt"])
        assert np.max(np.abs(sol.W - fro.W)) <= 1e-4 * max(1.0, fro.norm)


# ---------------------------------------------------------------------------- certificates
@pytest.mark.parametrize("norm", NORMS)
def test_solutions_are_feasible_and_certified(sep, norm):
    sol = solve_norm_svm(sep, norm)
    eq, mn = _feasible(sep, sol.W)
    assert eq <= TOL["linalg"] * max(1.0, np.abs(sol.W).max())
    assert mn == pytest.approx(1.0, abs=1e-12)
    assert sol.value == pytest.approx(matrix_norm(sol.W, norm))
    assert sol.lower_bound <= sol.value * (1 + 1e-12)
    assert sol.relative_gap <= TOL["kkt"] * 10
    assert sol.is_optimal()
    assert set(sol.to_json()) >= {"norm", "value", "lower_bound", "relative_gap", "solver", "status"}


def test_frobenius_agrees_with_the_core_svm(sep):
    sol = solve_norm_svm(sep, "fro")
    ref = solve_svm(sep)
    assert sol.value == pytest.approx(ref.norm, rel=TOL["solver_agreement"])
    assert np.max(np.abs(sol.W - ref.W)) <= 1e-4 * ref.norm


@pytest.mark.parametrize("norm", NORMS)
def test_weak_duality_for_arbitrary_multipliers(rng, sep, norm):
    """Every λ >= 0 and ν give a lower bound; an optimal solve's value is never below one."""
    system = KeslerSystem.build(sep)
    sol = solve_norm_svm(system, norm)
    for _ in range(25):
        lam = rng.exponential(size=system.n_margin) * rng.integers(0, 2, size=system.n_margin)
        nu = rng.standard_normal(system.n_eq)
        lb, a = lower_bound(system, lam, nu, norm)
        assert lb <= sol.value * (1 + TOL["kkt"])
        assert a.shape == (sep.V, sep.m)


def test_scaling_embeddings_scales_the_optimum(sep):
    """Margins are linear in H, so H -> cH maps the optimum W to W/c."""
    scaled = NTPInstance.from_counts(3.0 * sep.embeddings, sep.counts)
    for norm in ("max", "spectral"):
        a, b = solve_norm_svm(sep, norm), solve_norm_svm(scaled, norm)
        assert b.value == pytest.approx(a.value / 3.0, rel=10 * TOL["kkt"])


def test_canonical_is_the_smallest_frobenius_near_minimiser(sep):
    plain = solve_norm_svm(sep, "max")
    canon = solve_norm_svm(sep, "max", canonical=True)
    assert canon.canonical and not plain.canonical
    assert canon.value <= plain.value * (1 + 1e-5)
    assert np.linalg.norm(canon.W) <= np.linalg.norm(plain.W) * (1 + 1e-6)
    eq, mn = _feasible(sep, canon.W)
    assert mn == pytest.approx(1.0, abs=1e-12)


def test_solver_choice_and_repair(sep):
    system = KeslerSystem.build(sep)
    a = solve_norm_svm(system, "l1", solver="SCS")
    b = solve_norm_svm(system, "l1", solver="clarabel")
    assert a.solver == "cvxpy/scs" and b.solver == "cvxpy/clarabel"
    assert a.value == pytest.approx(b.value, rel=1e-5)
    sub = Subspace.build(system)
    W = repair(sub, 2.0 * b.W + 0.01 * sub.project(np.ones_like(b.W)))
    eq, mn = _feasible(sep, W)
    assert eq <= 1e-12 and mn == pytest.approx(1.0)


# ---------------------------------------------------------------------------- bad input
def test_errors(rng):
    inst = random_instance(rng, m=4, d=5, V=3, kmin=1, kmax=2)
    with pytest.raises(InputError, match="norm"):
        solve_norm_svm(inst, "l2")
    full = NTPInstance.from_counts(np.eye(2), [[1, 2], [3, 4]])
    with pytest.raises(InputError, match="margin"):
        solve_norm_svm(full, "max")
    h = np.array([[1.0, 0.0], [-1.0, 0.0]])
    nonsep = NTPInstance.from_counts(h, [[1, 0, 0], [1, 0, 0]])  # +h and -h both want token 0 on top
    with pytest.raises(InfeasibleError):
        solve_norm_svm(nonsep, "max")
