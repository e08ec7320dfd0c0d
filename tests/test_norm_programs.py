"""The direct conic programs of the other-norm NTP-SVMs (ntpcert.solve.norm_programs) against the cvxpy
route: on small instances both answers are checked (repaired point, weak-duality bound), and their
norms agree within the sum of the two certified gaps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ntpcert.dynamics.trajectory import Limits
from ntpcert.errors import InfeasibleError, InputError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve import norm_programs as NP
from ntpcert.solve.norms import AUTO_SOLVER, matrix_norm, solve_norm_svm
from ntpcert import NTPInstance

from .conftest import random_instance
from .test_ce import teacher_instance

#: Relative gap each route must certify here (the module's default tolerance).
GAP = 1e-5

DIRECT_NORMS = ("max", "l1", "spectral", "nuclear")


@pytest.fixture(scope="module")
def instances():
    rng = np.random.default_rng(7)
    return {
        # d > m: the embeddings' row space has rank 6 < 9, so the spectral/nuclear programs use X = WQ
        "wide": random_instance(rng, m=6, d=9, V=4, kmin=1, kmax=3),
        # one-hot separable data with m > d (F = {0}, full row space)
        "teacher": teacher_instance(3, m=24, d=8, V=4),
    }


def _check(inst, sol):
    system = KeslerSystem.build(inst)
    eq = system.apply_eq(sol.W)
    assert (float(np.abs(eq).max()) if eq.size else 0.0) <= 1e-9 * max(1.0, float(np.abs(sol.W).max()))
    assert float(system.apply_margin(sol.W).min()) == pytest.approx(1.0, abs=1e-12)
    assert sol.lower_bound <= sol.value * (1 + 1e-12)
    assert sol.value == pytest.approx(matrix_norm(sol.W, sol.norm), rel=1e-15)
    assert sol.relative_gap <= GAP


@pytest.mark.parametrize("name", ["wide", "teacher"])
@pytest.mark.parametrize("norm", DIRECT_NORMS)
def test_direct_route_agrees_with_cvxpy(instances, name, norm):
    inst = instances[name]
    direct = solve_norm_svm(inst, norm)
    assert direct.solver.startswith("direct/")
    cvx = solve_norm_svm(inst, norm, solver=AUTO_SOLVER[norm])
    assert cvx.solver.startswith("cvxpy/")
    for sol in (direct, cvx):
        _check(inst, sol)
    # each lower bound is below the other route's feasible value, so the optima agree to the gaps
    assert direct.lower_bound <= cvx.value * (1 + 1e-12) and cvx.lower_bound <= direct.value * (1 + 1e-12)
    assert abs(direct.value - cvx.value) <= direct.gap + cvx.gap + 1e-12 * cvx.value


@pytest.mark.parametrize("norm, backends", [("max", ("clarabel", "highs", "scs")), ("l1", ("clarabel", "highs")),
                                            ("spectral", ("clarabel", "scs")), ("nuclear", ("scs",))])
def test_every_backend_certifies_the_same_optimum(instances, norm, backends):
    inst = instances["wide"]
    sols = [solve_norm_svm(inst, norm, solver=f"direct:{b}") for b in backends]
    for b, sol in zip(backends, sols):
        assert sol.solver == f"direct/{b}"
        _check(inst, sol)
    best_lb = max(s.lower_bound for s in sols)
    assert all(s.value >= best_lb * (1 - 1e-12) for s in sols)


@pytest.mark.parametrize("backend", ["clarabel", "scs"])
def test_svec_order_is_a_bijection_in_each_backend(backend):
    N = 5
    ii, jj = np.triu_indices(N)
    pos = NP.svec_index(ii, jj, N, backend)
    assert sorted(pos.tolist()) == list(range(N * (N + 1) // 2))
    assert np.array_equal(NP.svec_index(jj, ii, N, backend), pos)  # symmetric
    if backend == "clarabel":  # upper triangle by columns: (0,0), (0,1), (1,1), (0,2), ...
        order = [(i, j) for j in range(N) for i in range(j + 1)]
    else:  # lower triangle by columns: (0,0), (1,0), ..., (N-1,0), (1,1), ...
        order = [(i, j) for j in range(N) for i in range(j, N)]
    assert [int(NP.svec_index(np.array(i), np.array(j), N, backend)) for i, j in order] == list(range(len(order)))


@pytest.mark.parametrize("backend", ["clarabel", "scs"])
@pytest.mark.parametrize("norm", ["spectral", "nuclear"])
def test_psd_rows_hold_the_intended_block_matrix(instances, backend, norm):
    """b - A x on the PSD rows, unpacked, is [[I, X], [X^T, I]] (spectral) or [[P, X], [X^T, R]] (nuclear)."""
    inst = instances["wide"]
    prog = NP.build_program(KeslerSystem.build(inst), norm, backend)
    assert prog.Q is not None and prog.k == 6 and prog.psd == inst.V + 6
    rng = np.random.default_rng(0)
    x = rng.standard_normal(prog.A.shape[1])
    s = prog.b - prog.A @ x
    N = prog.psd
    ntri = N * (N + 1) // 2
    tri = s[-ntri:]
    S = np.empty((N, N))
    for i in range(N):
        for j in range(N):
            v = tri[int(NP.svec_index(np.array(i), np.array(j), N, backend))]
            S[i, j] = v if i == j else v / math.sqrt(2.0)
    V, k = prog.V, prog.k
    X = x[: V * k].reshape(V, k)
    assert np.allclose(S[:V, V:], X, rtol=0, atol=1e-14)
    assert np.allclose(S, S.T, rtol=0, atol=0)
    if norm == "spectral":
        assert np.array_equal(S[:V, :V], np.eye(V)) and np.array_equal(S[V:, V:], np.eye(k))
    else:  # P then R from their upper triangles; the trace row is the last non-negative row
        nP = V * (V + 1) // 2
        P = np.zeros((V, V))
        P[np.triu_indices(V)] = x[V * k: V * k + nP]
        assert np.allclose(S[:V, :V], P + np.triu(P, 1).T, atol=1e-14)
        r = prog.n_eq + prog.n_nonneg - 1
        assert s[r] == pytest.approx(2.0 - np.trace(S[:V, :V]) - np.trace(S[V:, V:]), abs=1e-12)
    assert np.allclose(prog.W(x), X @ prog.Q.T)


def test_progress_goes_to_stderr_with_the_gap(instances, capsys):
    solve_norm_svm(instances["teacher"], "spectral", progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "spectral-norm NTP-SVM" in err and "clarabel" in err and "checked relative gap" in err


def test_limits_use_the_direct_route(instances):
    lim = Limits.compute(instances["wide"], norms=("max", "spectral"))
    assert {n: s.solver.split("/")[0] for n, s in lim.norm_svms.items()} == {"max": "direct", "spectral": "direct"}
    js = lim.to_json()["norm_svms"]
    assert js["spectral"]["relative_gap"] <= GAP and js["max"]["gap"] >= 0.0


def test_bad_direct_solver_names(instances):
    inst = instances["wide"]
    with pytest.raises(InputError, match="solver"):
        solve_norm_svm(inst, "spectral", solver="direct:highs")
    with pytest.raises(InputError, match="solver"):
        solve_norm_svm(inst, "max", solver="direct:mosek")
    with pytest.raises(InputError, match="solver"):
        solve_norm_svm(inst, "fro", solver="direct")


def test_infeasible_data_through_the_direct_route():
    h = np.array([[1.0, 0.0], [-1.0, 0.0]])
    nonsep = NTPInstance.from_counts(h, [[1, 0, 0], [1, 0, 0]])  # +h and -h both want token 0 on top
    for norm in DIRECT_NORMS:
        with pytest.raises(InfeasibleError):
            solve_norm_svm(nonsep, norm, solver="direct")
        with pytest.raises(InfeasibleError):  # auto: the cvxpy fallback confirms it
            solve_norm_svm(nonsep, norm)


def test_trajectory_cli_reports_each_gap_and_shows_progress(instances, tmp_path, capsys):
    import json

    from ntpcert.cli.app import main

    inst = instances["wide"]
    data = tmp_path / "wide.npz"
    np.savez(data, embeddings=inst.embeddings, counts=inst.counts)
    out = tmp_path / "run"
    assert main(["trajectory", str(data), "--optimizer", "sign", "--steps", "20", "--norms", "max,spectral",
                 "--no-plot", "--no-checks", "--progress", "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    for n in ("max", "spectral"):
        assert f"{n}-norm NTP-SVM: norm" in stdout and "checked relative duality gap" in stdout
        assert f"{n}-norm NTP-SVM: direct/" in stderr  # progress: the route and its checked gap
    svms = json.loads((out / "trajectory.json").read_text())["limits"]["norm_svms"]
    assert set(svms) == {"max", "spectral"} and all(v["relative_gap"] <= GAP for v in svms.values())
