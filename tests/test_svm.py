"""NTP-SVM backends, tested through the optimality conditions rather than stored answers."""

import cvxpy as cp
import numpy as np
import pytest

from ntpcert import InfeasibleError, InputError, NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.decide import decide_separability
from ntpcert.solve.svm import solve_svm

from .conftest import TOL, random_instance


def assert_kkt(inst, sol, tol):
    """Feasibility, dual signs, complementarity, stationarity and zero gap, computed here from scratch."""
    W, a, H = sol.W, sol.dual, inst.embeddings
    mask = inst.support_mask()
    L = inst.logits(W)
    for j in range(inst.m):
        S = inst.support(j)
        off = np.flatnonzero(~mask[j])
        # (6a): equal logits on the support
        assert np.ptp(L[j, S]) < tol
        # (6b): margins at least 1
        if off.size:
            margins = L[j, S[0]] - L[j, off]
            assert margins.min() > 1 - tol
            # dual signs and complementarity
            assert np.all(a[off, j] <= tol)
            assert np.all(np.abs(a[off, j] * (margins - 1)) < tol * max(1.0, np.abs(a).max()))
        assert abs(a[:, j].sum()) < tol
    # stationarity W = sum_j a_j h_j^T
    assert np.max(np.abs(W - a @ H)) < tol * max(1.0, np.abs(W).max())
    assert sol.relative_gap < tol


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("solver", ["clarabel", "cvxpy"])
def test_kkt_on_random_separable_instances(seed, solver):
    rng = np.random.default_rng(seed)
    inst = random_instance(rng, 6, 9, 5, kmin=1, kmax=3)  # d > m: separable
    sol = solve_svm(inst, solver=solver)
    assert sol.is_optimal(TOL["kkt"])
    assert_kkt(inst, sol, TOL["kkt"])


@pytest.mark.parametrize("seed", range(4))
def test_clarabel_and_cvxpy_agree(seed):
    rng = np.random.default_rng(100 + seed)
    inst = random_instance(rng, 8, 10, 6, kmin=1, kmax=4)
    a = solve_svm(inst, solver="clarabel")
    b = solve_svm(inst, solver="cvxpy")
    assert abs(a.objective - b.objective) <= TOL["solver_agreement"] * max(1, a.objective)
    # strong convexity: the minimisers coincide
    assert np.linalg.norm(a.W - b.W) <= 1e-4 * max(1.0, np.linalg.norm(a.W))


def crammer_singer_no_bias(H, y, V):
    """Hard-margin multiclass SVM without bias, written independently of ntpcert's Kesler rows."""
    W = cp.Variable((V, H.shape[1]))
    cons = []
    for j, yj in enumerate(y):
        for v in range(V):
            if v != yj:
                cons.append((W[yj] - W[v]) @ H[j] >= 1)
    cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons).solve(solver="CLARABEL")
    return W.value


@pytest.mark.parametrize("seed", range(3))
def test_one_hot_supports_give_multiclass_svm(seed):
    rng = np.random.default_rng(seed)
    m, d, V = 8, 10, 4
    y = rng.integers(0, V, size=m)
    C = np.zeros((m, V), dtype=int)
    C[np.arange(m), y] = rng.integers(1, 5, size=m)
    H = rng.standard_normal((m, d))
    inst = NTPInstance.from_counts(H, C)
    sol = solve_svm(inst)
    Wcs = crammer_singer_no_bias(H, y, V)
    assert np.linalg.norm(sol.W - Wcs) <= 1e-5 * max(1.0, np.linalg.norm(Wcs))
    assert inst.entropy() == 0.0


def test_same_embedding_different_supports_not_separable():
    h = np.array([1.0, -2.0, 0.5])
    inst = NTPInstance.from_counts(np.vstack([h, h, [0.0, 1.0, 1.0]]), [[3, 0, 0], [0, 2, 0], [0, 0, 1]])
    sy = KeslerSystem.build(inst)
    assert decide_separability(sy)[0].holds is False
    with pytest.raises(InfeasibleError):
        solve_svm(sy)


def test_full_supports_give_zero_solution():
    rng = np.random.default_rng(1)
    inst = random_instance(rng, 3, 2, 3, kmin=3, kmax=3)
    sol = solve_svm(inst)
    assert sol.norm == 0.0 and sol.is_optimal()


def test_scaling_embeddings_scales_solution_inversely():
    rng = np.random.default_rng(2)
    inst = random_instance(rng, 5, 7, 4, kmin=1, kmax=3)
    scaled = NTPInstance.from_counts(3.0 * inst.embeddings, inst.counts)
    a, b = solve_svm(inst), solve_svm(scaled)
    assert np.allclose(b.W, a.W / 3.0, atol=1e-6)


def test_unknown_solver_is_input_error(rng):
    with pytest.raises(InputError, match="solver"):
        solve_svm(random_instance(rng, 3, 4, 3), solver="nope")


def test_svm_command_refutes_by_the_pair_screen_before_any_solver(monkeypatch):
    """m > d + 1 and not separable: the pair screen's exact ray answers, and no NTP-SVM solver runs."""
    import ntpcert.solve.svm as svm_mod
    from ntpcert.exact.separability import check_ray
    from ntpcert.pipeline.svm_outcome import solve_or_refute

    rng = np.random.default_rng(3)
    m, d, V = 60, 3, 6
    counts = np.zeros((m, V))
    counts[np.arange(m), rng.integers(0, V, m)] = 1.0
    inst = NTPInstance.from_counts(rng.standard_normal((m, d)), counts)
    assert decide_separability(KeslerSystem.build(inst))[0].holds is False

    def no_solver(*a, **k):
        raise AssertionError("a solver ran")

    monkeypatch.setattr(svm_mod, "solve_svm", no_solver)
    monkeypatch.setattr("ntpcert.pipeline.svm_outcome.SCREEN_FIRST_CELLS", 0)  # the screen, as on a large instance
    out = solve_or_refute(inst, solver="auto")
    assert not out.separable and "verified exactly on the whole instance" in out.message
    cert = out.certificate.to_json()
    assert cert["engine"] == "pair-farkas" and cert["verified_exactly"] is True
    assert check_ray(inst, out.certificate.witness.ray) == ""  # the ray itself, re-checked here
    assert out.to_json()["separable"] is False and out.lines()[0].startswith("not separable: ")


def test_relative_gap_does_not_change_with_the_scale_of_the_data():
    """The relative gap is |gap| / (||W||^2 / 2): the same pair scaled with the data (h -> s h, W -> W / s,
    a -> a / s^2) has the same relative gap. With max(1, objective) in the denominator, data scaled by 1e8
    (objective about 1e-13) had passed a W at four times the optimum's norm as optimal."""
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.solution import SVMSolution

    rng = np.random.default_rng(5)
    inst = random_instance(rng, 6, 8, 4, kmin=1, kmax=2)
    sol = solve_svm(inst, solver="clarabel")
    W, a = sol.W * 1.5, sol.dual  # a feasible primal point off the optimum: a visible gap
    base = SVMSolution.from_primal_dual(KeslerSystem.build(inst), W, a, solver="t", status="t", seconds=0.0)
    assert base.relative_gap > 0.1
    for s in (1e-8, 1e8):
        scaled = NTPInstance.from_counts(np.asarray(inst.embeddings) * s, np.asarray(inst.counts))
        other = SVMSolution.from_primal_dual(KeslerSystem.build(scaled), W / s, a / s**2, solver="t", status="t",
                                             seconds=0.0)
        assert other.relative_gap == pytest.approx(base.relative_gap, rel=1e-9)
