"""The regularisation path: optimality of each constrained minimiser, agreement of the three
methods, and the trend of Theorem 1 on an instance with known limits."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.errors import InputError, SolverError
from ntpcert.dynamics.ball import (
    BUDGET_CHECK_RTOL,
    kkt_residual,
    solve_ball_cvxpy,
    solve_ball_newton,
    solve_ball_projected,
)
from ntpcert.dynamics.regpath import regularization_path
from ntpcert.dynamics.trajectory import Limits

from .conftest import random_instance


@pytest.fixture
def inst(rng) -> NTPInstance:
    return random_instance(rng, m=5, d=7, V=4, kmin=1, kmax=3)


def _cos(A, B):
    return float(np.vdot(A, B) / (np.linalg.norm(A) * np.linalg.norm(B)))


@pytest.mark.parametrize("B", [0.5, 3.0, 12.0])
def test_methods_agree_and_satisfy_kkt(inst, B):
    Wn, it, res, mu = solve_ball_newton(inst, B)
    assert it > 0 and res < 1e-8 and mu > 0
    assert np.linalg.norm(Wn) == pytest.approx(B, rel=1e-9)
    g = inst.gradient(Wn)
    assert _cos(g, Wn) == pytest.approx(-1.0, abs=1e-10)  # KKT: the gradient points straight inwards
    assert np.linalg.norm(g) == pytest.approx(mu * B, rel=1e-6)
    Wp, _, ratio = solve_ball_projected(inst, B, tol=1e-9)
    assert ratio <= 1e-9
    Wc = solve_ball_cvxpy(inst, B)
    for other in (Wp, Wc):
        assert np.linalg.norm(other - Wn) <= 1e-4 * max(1.0, B)
        assert inst.loss(Wn) <= inst.loss(other) + 1e-9


def test_no_point_of_the_ball_does_better(rng, inst):
    B = 4.0
    W, *_ = solve_ball_newton(inst, B)
    best = inst.loss(W)
    for _ in range(200):
        X = rng.standard_normal(W.shape)
        X *= B * rng.uniform() ** (1.0 / X.size) / np.linalg.norm(X)
        assert inst.loss(X) >= best - 1e-12
    for eps in (1e-3, 1e-2):  # nearby points of the sphere too
        Y = W + eps * rng.standard_normal(W.shape)
        Y *= B / np.linalg.norm(Y)
        assert inst.loss(Y) >= best - 1e-12


def test_theorem_1_trend_on_a_onehot_instance(rng):
    C = np.zeros((4, 5), dtype=np.int64)
    for j in range(4):
        S = rng.choice(5, size=int(rng.integers(2, 5)), replace=False)
        C[j, S] = rng.integers(1, 9, size=S.size)
    inst = NTPInstance.from_counts(np.eye(4), C)
    lim = Limits.compute(inst)
    rp = regularization_path(inst, np.geomspace(0.5, 30.0, 8), limits=lim)
    assert rp.method == "newton"
    assert np.all(rp.kkt < 1e-6)
    assert np.allclose(rp["norm"], rp.budgets, rtol=1e-9)
    assert np.all(np.diff(rp["excess_loss"]) < 0)  # a bigger ball never does worse
    assert rp["cos_mm_centered"][-1] > rp["cos_mm_centered"][0]
    assert rp["cos_mm_centered"][-1] > 0.99
    assert rp["rel_dist_F"][-1] < 0.02 * rp["rel_dist_F"][0]
    text = rp.to_csv().splitlines()
    assert text[0].startswith("budget,") and len(text) == 9
    assert rp.to_json()["method"] == "newton"


def test_projected_path_matches_newton_path(inst):
    budgets = [1.0, 4.0]
    a = regularization_path(inst, budgets, method="newton")
    b = regularization_path(inst, budgets, method="projected", tol=1e-9)
    assert np.max(np.abs(a.W - b.W)) <= 1e-5
    assert np.all(b.iterations > 0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"budgets": []}, "budgets"),
        ({"budgets": [1.0, -2.0]}, "budgets"),
        ({"budgets": [float("inf")]}, "budgets"),
        ({"budgets": [1.0], "method": "lbfgs"}, "method"),
        ({"budgets": [1.0], "on_failure": "ignore"}, "on_failure"),
        ({"budgets": [1.0], "kkt_max": 0.0}, "kkt_max"),
    ],
)
def test_bad_input(inst, kwargs, field):
    with pytest.raises(InputError, match=field):
        regularization_path(inst, **kwargs)


def _assert_kkt_point(inst, W, B):
    """Checked here from the gradient, independently of the solver: on the sphere, and the gradient
    points straight inwards."""
    assert np.linalg.norm(W) <= B * (1.0 + BUDGET_CHECK_RTOL)
    assert np.linalg.norm(W) >= B * (1.0 - BUDGET_CHECK_RTOL)
    assert _cos(inst.gradient(W), W) <= -1.0 + 1e-10


def test_paper_sparse_and_dense_budget_grids_give_the_same_checked_points():
    """Budgets 16 -> 89 -> 300 (jumps of 5.6x and 3.4x) once returned ||W|| = 143.6 at B = 89 with KKT
    residual 1 and garbage after it; now both grids give the same KKT points."""
    from ntpcert.instance.load import load_instance

    inst = load_instance("paper")
    lim = Limits.compute(inst)
    sparse = regularization_path(inst, [16.0, 89.0, 300.0], limits=lim)
    dense = regularization_path(inst, np.union1d(np.geomspace(16.0, 300.0, 7), [89.0]), limits=lim)
    for rp in (sparse, dense):
        assert rp.all_certified and not rp.failures
        assert np.all(rp.kkt <= rp.kkt_max)
        for B, W in zip(rp.budgets, rp.W):
            _assert_kkt_point(inst, W, B)
    for i, B in enumerate(sparse.budgets):
        j = int(np.flatnonzero(dense.budgets == B)[0])
        assert np.linalg.norm(sparse.W[i] - dense.W[j]) <= 1e-6 * B
    assert np.all(np.diff(sparse["excess_loss"]) < 0)
    assert sparse["cos_mm"][-1] > 0.99


def test_a_budget_past_float64_resolution_raises_or_is_marked():
    """Far out on the path the gradient underflows; the path must say so, not return a point."""
    inst = NTPInstance.from_counts(np.eye(3), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]])
    lim = Limits.compute(inst)
    budgets = [1.0, 4.0, 1e5]
    with pytest.raises(SolverError, match=r"B = 100000.*no KKT point"):
        regularization_path(inst, budgets, limits=lim)
    rp = regularization_path(inst, budgets, limits=lim, on_failure="mark")
    assert rp.certified.tolist() == [True, True, False]
    assert not rp.all_certified and len(rp.failures) == 1 and "100000" in rp.failures[0]
    assert np.all(np.isnan(rp.W[2])) and np.isnan(rp["cos_mm"][2])
    for B, W in zip(rp.budgets[:2], rp.W[:2]):
        _assert_kkt_point(inst, W, B)
    js = rp.to_json()
    assert js["certified"] == [True, True, False] and js["metrics"]["cos_mm"][2] is None
    assert rp.to_csv().splitlines()[3].endswith(",false")


def test_kkt_residual_tells_optimal_from_not(inst):
    W, *_ = solve_ball_newton(inst, 3.0)
    res, mu = kkt_residual(inst, W, 3.0)
    assert res <= 1e-10 and mu > 0
    bad, _ = kkt_residual(inst, W[::-1].copy(), 3.0)  # same norm, wrong point
    assert bad > 1e-3
    inside, mu_in = kkt_residual(inst, 0.5 * W, 3.0)  # strictly inside: the gradient must vanish
    assert inside == pytest.approx(1.0) and mu_in == 0.0


@pytest.mark.slow
def test_paper_path_reaches_the_limits():
    """On the paper instance, far out on the path: cos(W_B, W^mm) >= 0.99 and P_F(W_B) within 1%."""
    from ntpcert.instance.load import load_instance

    inst = load_instance("paper")
    lim = Limits.compute(inst)
    rp = regularization_path(inst, np.geomspace(1.0, 15.0 * lim.svm.norm, 12), limits=lim)
    assert rp.all_certified
    assert rp["cos_mm"][-1] >= 0.99
    assert rp["rel_dist_F"][-1] < 1e-2
    assert np.all(rp.kkt < 1e-6)
