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
