"""The active-set polish where d < m: classes pinned at more contexts than there are dimensions (a
singular KKT block), the saddle-point system that replaces its inverse, and the structured solver that
certifies with it where it used to fall back to Clarabel."""

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.structured import polish
from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.solve.structured.polish import ActiveSetSystem
from ntpcert.solve.structured.solver import solve as structured
from ntpcert.solve.svm import solve_separable, solve_svm

from .test_svm import assert_kkt


def teacher_instance(rng: np.random.Generator, m: int, d: int, V: int, *, soft: bool = False) -> NTPInstance:
    """Contexts h_j ~ N(0, I_d), next token the argmax of a random teacher (k_j = 1), so the data are
    separable and a frequent token is in the support of far more than d contexts. ``soft``: a second
    token joins the support of the contexts the first one wins, with the same teacher row."""
    H = rng.standard_normal((m, d))
    T = rng.standard_normal((V, d))
    Z = H @ T.T
    counts = np.zeros((m, V))
    top = Z.argmax(axis=1)
    counts[np.arange(m), top] = rng.integers(1, 5, size=m)
    if soft:  # token 1 has token 0's teacher row: tied wherever token 0 wins, so both are in that support
        T[1] = T[0]
        Z = H @ T.T
        top = Z.argmax(axis=1)
        counts[:] = 0
        counts[np.arange(m), top] = rng.integers(1, 5, size=m)
        won = top == 0
        counts[won, 1] = rng.integers(1, 5, size=int(won.sum()))
    keep = counts.sum(axis=0) > 0
    return NTPInstance.from_counts(H, counts[:, keep])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structured_certifies_where_d_is_below_m_and_matches_clarabel(seed):
    rng = np.random.default_rng(seed)
    inst = teacher_instance(rng, m=150, d=6, V=8)
    cls = TokenClasses.build(inst)
    assert int(cls.mask.sum(axis=0).max()) > inst.d  # a class in more supports than dimensions
    sol = structured(KeslerSystem.build(inst), separable=True, time_limit=60)
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    assert sol.info["polish_attempts"] >= 1
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.norm - ref.norm) <= 1e-6 * ref.norm
    assert np.linalg.norm(sol.W - ref.W) <= 1e-5 * np.linalg.norm(ref.W)
    assert_kkt(inst, sol, 1e-6)


@pytest.mark.parametrize("space", ["saddle", "rows"])
def test_a_singular_block_goes_through_the_saddle_point_system_or_the_rows(rng, monkeypatch, space):
    inst = teacher_instance(rng, m=120, d=5, V=6)
    ref = solve_svm(inst, solver="clarabel")
    cls = TokenClasses.build(inst)
    A = cls.collapse_rows(ref.dual).T
    active = (A < -1e-7 * np.abs(A).max()) & ~cls.mask
    if space == "saddle":
        monkeypatch.setattr(polish, "ROWS_FACTOR", 0.0)
    system = ActiveSetSystem(cls, inst.embeddings)
    assert system.rows_first(active) == (space == "rows")
    res = system.pdas(active, 20)
    assert res is not None and res.converged
    # some B_c was singular, and its null space entered the saddle-point system (or the rows answered alone)
    assert any(n is not None for n in system.null) == (space == "saddle")
    W = cls.expand_rows(res.A.T @ inst.embeddings)
    assert np.linalg.norm(W - ref.W) <= 1e-6 * np.linalg.norm(ref.W)
    # the restricted KKT conditions hold to rounding after refinement: coupling and pinned logits
    assert np.abs(res.A @ cls.sizes).max() <= 1e-9 * np.abs(res.A).max()
    Z = inst.embeddings @ (res.A.T @ inst.embeddings).T
    pinned = active | cls.mask
    target = res.t[:, None] - (~cls.mask)
    assert np.abs(np.where(pinned, Z - target, 0.0)).max() <= 1e-9 * max(1.0, np.abs(res.t).max())


@pytest.mark.parametrize("soft", [False, True])
def test_the_row_space_solve_equals_the_saddle_point_solve(soft):
    """The same pinned guess (an arbitrary one: one random margin per context, so the KKT system has a
    solution of either sign) solved in the space of the pinned rows and by the saddle-point system; with soft
    supports the rows include the in-support equations."""
    rng = np.random.default_rng(5)
    inst = teacher_instance(rng, m=30, d=8, V=8)
    if soft:  # a second support token on every third context (class-level equations; separability not needed)
        counts = np.asarray(inst.counts, dtype=np.float64).copy()
        for j in range(0, inst.m, 3):
            counts[j, rng.choice(np.flatnonzero(counts[j] == 0))] = 1
        inst = NTPInstance.from_counts(inst.embeddings, counts)
    cls = TokenClasses.build(inst)
    off = ~cls.mask
    active = np.zeros_like(cls.mask)
    for j in range(inst.m):
        active[j, rng.choice(np.flatnonzero(off[j]))] = True
    system = ActiveSetSystem(cls, inst.embeddings)
    assert system.rows_first(active)
    rows = system._solve_rows(active)
    saddle = ActiveSetSystem(cls, inst.embeddings)._solve_saddle(active)
    assert rows is not None and saddle is not None
    assert np.abs(rows.A - saddle.A).max() <= 1e-8 * np.abs(saddle.A).max()
    assert np.abs(rows.t - saddle.t).max() <= 1e-8 * max(1.0, np.abs(saddle.t).max())
    assert np.abs(rows.A @ cls.sizes).max() <= 1e-9 * np.abs(rows.A).max()  # the coupling
    if soft:
        assert (cls.mask.sum(axis=1) > 1).any()


def test_dependent_rows_go_to_the_saddle_point_system(rng):
    """More pinned rows than the (C - 1)·d dimensions they live in: Q is singular, the row space refuses,
    and the saddle-point system answers (least squares on its singular matrix)."""
    inst = teacher_instance(rng, m=60, d=3, V=4)
    cls = TokenClasses.build(inst)
    active = ~cls.mask  # every margin pinned: far more rows than (C - 1)·d
    system = ActiveSetSystem(cls, inst.embeddings)
    assert int(active.sum()) > (cls.count - 1) * inst.d
    assert system._solve_rows(active) is None
    assert system.solve(active) is not None


def test_refinement_shrinks_the_kkt_residual(rng, monkeypatch):
    inst = teacher_instance(rng, m=120, d=5, V=6)
    ref = solve_svm(inst, solver="clarabel")
    cls = TokenClasses.build(inst)
    A = cls.collapse_rows(ref.dual).T
    active = (A < -1e-7 * np.abs(A).max()) & ~cls.mask

    def residual(refine: int) -> float:
        monkeypatch.setattr(polish, "REFINE", refine)
        res = ActiveSetSystem(cls, inst.embeddings).solve(active)
        Z = inst.embeddings @ (res.A.T @ inst.embeddings).T
        pinned = active | cls.mask
        return float(np.abs(np.where(pinned, Z - (res.t[:, None] - (~cls.mask)), 0.0)).max())

    assert residual(2) <= residual(0)


def test_a_guess_too_large_for_the_saddle_point_system_is_not_polished(rng, monkeypatch):
    inst = teacher_instance(rng, m=120, d=5, V=6)
    cls = TokenClasses.build(inst)
    monkeypatch.setattr(polish, "MAX_SADDLE", inst.m)  # no room for any null space
    assert ActiveSetSystem(cls, inst.embeddings).solve(np.zeros_like(cls.mask)) is None


def test_soft_supports_below_d_certify_too():
    rng = np.random.default_rng(7)
    inst = teacher_instance(rng, m=160, d=6, V=8, soft=True)
    assert int(inst.support_sizes.max()) == 2
    sol = structured(KeslerSystem.build(inst), separable=True, time_limit=60)
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.norm - ref.norm) <= 1e-6 * ref.norm


def test_solve_separable_tells_only_the_backends_that_search_rays(rng):
    inst = teacher_instance(rng, m=60, d=4, V=5)
    a = solve_separable(inst, solver="clarabel")  # clarabel takes no "separable" option: not passed
    b = solve_separable(inst, solver="structured")
    assert abs(a.norm - b.norm) <= 1e-6 * a.norm


def test_the_working_set_qp_polishes_where_the_active_set_steps_fail(monkeypatch):
    """With the active-set steps made to fail, the polish falls back to the QP on the working set of the
    margins coordinate ascent found active (Clarabel, inequalities), and the certificate still comes."""
    from ntpcert.solve.structured import solver as structured_solver

    monkeypatch.setattr(ActiveSetSystem, "pdas", lambda self, active, steps: None)
    rng = np.random.default_rng(1)
    inst = teacher_instance(rng, m=150, d=6, V=8)
    sol = structured(KeslerSystem.build(inst), separable=True, time_limit=60)
    assert sol.info["working_set_solves"] >= 1
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.norm - ref.norm) <= 1e-6 * ref.norm
    # and not where the class rows are too many for it: then no working-set solve is tried
    monkeypatch.setattr(structured_solver, "WORKING_SET_MAX_VARS", 0)
    with pytest.raises(structured_solver.SolverError):
        structured(KeslerSystem.build(inst), separable=True, max_epochs=60)


def test_wide_classes_with_few_class_rows_go_to_the_working_set_at_once(monkeypatch):
    """Teacher data with V = 10, m = 1,000, d = 64: every class is pinned at more than d contexts and the
    working set's QP (C·d = 640 unknowns) is smaller than the active-set steps' system (m = 1,000 and more),
    so the polish solves the working set without one active-set step (those steps cost 50 s of
    eigendecompositions here), and ``auto`` answers with the structured solver, not Clarabel."""
    from ntpcert.solve.structured.solver import _Solver

    def no_steps(self, active, steps):
        raise AssertionError("active-set steps taken")

    monkeypatch.setattr(ActiveSetSystem, "pdas", no_steps)
    rng = np.random.default_rng(0)
    inst = teacher_instance(rng, m=1000, d=64, V=10)
    cls = TokenClasses.build(inst)
    assert cls.count * inst.d <= inst.m
    sol = solve_svm(inst, solver="auto")
    assert sol.solver == "structured"
    assert sol.info["working_set_solves"] >= 1 and sol.info["pdas_steps"] == 0
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    assert_kkt(inst, sol, 1e-6)
    # where C·d exceeds m the active-set steps come first, as before
    monkeypatch.setattr(_Solver, "wide", lambda self, active: False)
    with pytest.raises(AssertionError, match="active-set steps"):
        structured(KeslerSystem.build(inst), separable=True, max_epochs=2000)
