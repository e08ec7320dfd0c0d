"""The NTP-SVM backend ``active-set`` (Clarabel on a growing working set of margins, on token classes):
the same W^mm as Clarabel on the whole QP, a dual that checks, and infeasibility on non-separable data."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.errors import InfeasibleError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.svm import solve_svm


def _teacher(seed: int, m: int, d: int, V: int) -> NTPInstance:
    """Separable data with d < m: labels from a random decoder; tokens V-1 and V-2 never follow a
    context, so they form one class of two."""
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(m, d))
    Z = H @ rng.normal(size=(V - 2, d)).T
    order = np.argsort(-Z, axis=1)
    counts = np.zeros((m, V), dtype=np.int64)
    counts[np.arange(m), order[:, 0]] = 2
    return NTPInstance.from_counts(H, counts)


@pytest.mark.parametrize("seed", range(4))
def test_active_set_matches_clarabel_on_teacher_data(seed):
    inst = _teacher(seed, m=50 + 10 * seed, d=4, V=9)
    system = KeslerSystem.build(inst)
    ref = solve_svm(system, solver="clarabel")
    sol = solve_svm(system, solver="active-set")
    assert sol.solver == "active-set"
    assert np.linalg.norm(sol.W - ref.W) <= 1e-6 * np.linalg.norm(ref.W)
    assert sol.min_margin >= 1 - 1e-7
    assert sol.gap <= 1e-6 and sol.dual_residual <= 1e-6
    assert sol.info["working_set"] < system.n_margin  # it did not need every row
    # the two never-seen tokens share their row, as the class-weighted objective says they must
    assert np.allclose(sol.W[-1], sol.W[-2])


def test_active_set_with_shared_supports_matches_clarabel():
    inst = NTPInstance.from_counts(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, -1.0], [0.5, 2.0]]),
                                   np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1]]))
    system = KeslerSystem.build(inst)
    try:
        ref = solve_svm(system, solver="clarabel")
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            solve_svm(system, solver="active-set")
        return
    sol = solve_svm(system, solver="active-set")
    assert np.linalg.norm(sol.W - ref.W) <= 1e-6 * max(1.0, np.linalg.norm(ref.W))


def test_active_set_reports_non_separable_data():
    H = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]])
    inst = NTPInstance.from_counts(H, np.array([[1, 1, 0], [0, 0, 1], [0, 0, 1]]))
    with pytest.raises(InfeasibleError):
        solve_svm(KeslerSystem.build(inst), solver="active-set")


def _soft(seed: int, m: int = 60, d: int = 8, V: int = 6) -> NTPInstance:
    """Separable data with supports of 2-3 tokens at d < m: tokens in pairs share the first half of their
    teacher rows; contexts whose second half is 0 tie on a whole pair, which is their support."""
    rng = np.random.default_rng(seed)
    group = np.arange(V) // 2
    T1, T2 = rng.normal(size=(V // 2, d // 2)), rng.normal(size=(V, d - d // 2))
    H = rng.normal(size=(m, d))
    H[: m // 2, d // 2:] = 0.0
    Z = H[:, : d // 2] @ T1[group].T + H[:, d // 2:] @ T2.T
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = np.flatnonzero(Z[j] >= Z[j].max() - 1e-12 * max(1.0, abs(Z[j].max())))
        counts[j, S] = rng.integers(1, 4, size=S.size)
    return NTPInstance.from_counts(H, counts)


@pytest.mark.parametrize("seed", range(3))
def test_the_dense_working_set_matches_clarabel_with_soft_supports(seed, monkeypatch):
    """Few class rows go to DAQP (equalities eliminated by a null-space basis), more to Clarabel: the same
    W^mm, both pairs checked."""
    import ntpcert.solve.structured.working_set as ws

    inst = _soft(seed)
    assert inst.support_sizes.max() >= 2
    system = KeslerSystem.build(inst)
    dense = solve_svm(system, solver="active-set")
    monkeypatch.setattr(ws, "DENSE_MAX_VARS", 0)
    sparse = solve_svm(system, solver="active-set")
    assert dense.info["engine"] == "daqp" and sparse.info["engine"] == "clarabel"
    assert np.linalg.norm(dense.W - sparse.W) <= 1e-6 * np.linalg.norm(sparse.W)
    for sol in (dense, sparse):
        assert sol.min_margin >= 1 - 1e-7 and sol.gap <= 1e-6 and sol.dual_residual <= 1e-6


@pytest.mark.parametrize("family", ["teacher", "soft"])
@pytest.mark.parametrize("seed", range(3))
def test_the_row_space_working_set_from_a_dual_start_matches_clarabel(family, seed, monkeypatch):
    """Given a dual to start from (the structured solver's), the working set's QPs are solved in the space of
    their rows; from Clarabel's dual perturbed by 20 % (and its active margins) it reaches Clarabel's W^mm."""
    import ntpcert.solve.structured.working_set as ws
    from ntpcert.solve.structured.classes import TokenClasses

    inst = _teacher(seed, m=60, d=4, V=9) if family == "teacher" else _soft(seed)
    system = KeslerSystem.build(inst)
    ref = solve_svm(system, solver="clarabel")
    cls = TokenClasses.build(inst)
    A = cls.collapse_rows(ref.dual).T  # (m, C)
    rng = np.random.default_rng(seed)
    A = A * (1 + 0.2 * rng.uniform(-1, 1, size=A.shape))
    start = (A < -1e-6 * np.abs(A).max()) & ~cls.mask
    monkeypatch.setattr(ws, "DENSE_MAX_VARS", 0)
    sol = ws.solve(system, start=start, dual=A)
    assert sol.info["engine"] == "rows"
    assert np.linalg.norm(sol.W - ref.W) <= 1e-6 * np.linalg.norm(ref.W)
    assert sol.min_margin >= 1 - 1e-7 and sol.gap <= 1e-6 and sol.dual_residual <= 1e-6
    monkeypatch.setattr(ws, "ROWS_MAX", 0)  # too many rows for the row space: Clarabel, the same W^mm
    assert ws.solve(system, start=start, dual=A).info["engine"] == "clarabel"


@pytest.mark.parametrize("seed", range(3))
def test_the_interior_point_working_set_matches_clarabel(seed, monkeypatch):
    """Without a dual start (or with more working-set rows than (C - 1)·d) and without in-support equations, a
    working set's QP goes to the dense interior point and its crossover: Clarabel's W^mm, both pairs checked."""
    import ntpcert.solve.structured.working_set as ws

    inst = _teacher(seed, m=80, d=4, V=9)
    system = KeslerSystem.build(inst)
    ref = solve_svm(system, solver="clarabel")
    monkeypatch.setattr(ws, "DENSE_MAX_VARS", 0)
    sol = ws.solve(system)
    assert sol.info["engine"] == "ipm+rows"
    assert np.linalg.norm(sol.W - ref.W) <= 1e-6 * np.linalg.norm(ref.W)
    assert sol.min_margin >= 1 - 1e-7 and sol.gap <= 1e-6 and sol.dual_residual <= 1e-6
    from ntpcert.solve.structured.classes import TokenClasses

    C = TokenClasses.build(inst).count
    monkeypatch.setattr(ws, "IPM_MAX_VARS", C * inst.d - 1)  # its dense normal matrix too large: Clarabel
    assert ws.solve(system).info["engine"] == "clarabel"


def test_the_bounded_qp_of_the_row_space_matches_an_independent_solve():
    """The row space's bound-constrained QP against scipy's L-BFGS-B on the same objective, half of the rows
    free and half bounded below by 0: rows in a space of more dimensions (Q regular) from zero, and in one of
    fewer (Q singular, as a working set of more rows than (C - 1)·d, but no more free and active rows at the
    optimum than dimensions, as at a non-degenerate W^mm) from the reference perturbed by 10 %."""
    from scipy.optimize import minimize

    from ntpcert.solve.structured.working_set import _bounded_qp

    rng = np.random.default_rng(0)
    for trial in range(6):
        R, k = (30, 40) if trial % 2 == 0 else (40, 36)
        Phi = rng.normal(size=(R, k))
        Q = Phi @ Phi.T
        is_mar = np.arange(R) >= R // 2
        # the dual of min ||w||^2 / 2 s.t. Phi w = t (free rows), Phi w >= t (bounded rows) with a feasible w0
        # (else, with Q singular, the QP is unbounded): t = Phi w0, less a slack on half of the bounded rows
        t = Phi @ rng.normal(size=k) - np.where(is_mar & (rng.uniform(size=R) < 0.5), rng.uniform(size=R), 0.0)
        ref = minimize(lambda x: 0.5 * x @ Q @ x - t @ x, np.zeros(R), jac=lambda x: Q @ x - t, method="L-BFGS-B",
                       bounds=[(0, None) if b else (None, None) for b in is_mar],
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
        start = np.zeros(R) if R < k else ref.x * (1 + 0.1 * rng.uniform(-1, 1, size=R))
        nu, steps = _bounded_qp(Q, t, is_mar, start)
        assert nu is not None and steps >= 1
        assert (nu[is_mar] >= 0).all()
        f = lambda x: 0.5 * x @ Q @ x - t @ x  # noqa: E731
        assert f(nu) <= ref.fun + 1e-7 * max(1.0, abs(ref.fun))
        g = Q @ nu - t  # stationary on the free rows and at the positive bounded ones; >= 0 at the bound
        assert np.abs(g[~is_mar]).max() <= 1e-8 * max(1.0, np.abs(t).max())
        assert np.abs(g[is_mar & (nu > 0)]).max(initial=0.0) <= 1e-8 * max(1.0, np.abs(t).max())
        assert g[is_mar & (nu == 0)].min(initial=0.0) >= -1e-8


@pytest.mark.parametrize("solver", ["auto", "clarabel", "active-set"])
@pytest.mark.parametrize("scale", [2.0**-70, 1e-20, 1e20])
def test_the_svm_of_H_far_from_unit_size_is_the_svm_of_H_scaled(solver, scale):
    """W^mm of H·s is W^mm(H)/s. Clarabel reads its tolerances absolutely and called H·1e-20 infeasible; such
    backends now solve on H scaled by a power of two to unit size and the pair is mapped back and checked (the
    structured solver, auto's first stage, certifies with a scale-free exact bound on H itself)."""
    inst = _teacher(0, m=50, d=4, V=9)
    base = solve_svm(KeslerSystem.build(inst), solver=solver)
    sol = solve_svm(KeslerSystem.build(NTPInstance.from_counts(inst.embeddings * scale, inst.counts)), solver=solver)
    assert "scaled" in sol.info or sol.solver == "structured"
    assert np.linalg.norm(sol.W * scale - base.W) <= 1e-6 * np.linalg.norm(base.W)
    assert sol.min_margin >= 1 - 1e-7 and sol.relative_gap <= 1e-7
