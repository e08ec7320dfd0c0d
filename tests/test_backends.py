"""Every NTP-SVM backend behind solve_svm, and the solver benchmark's harness."""

import json
import math

import numpy as np
import pytest

from ntpcert import InfeasibleError, InputError, NTPInstance
from ntpcert.cli.app import main
from ntpcert.solve.svm import BACKENDS, resolve_backend, solve_svm

from .conftest import TOL, random_instance
from .test_svm import assert_kkt

qpsolvers = pytest.importorskip("qpsolvers")

QP_BACKENDS = [b for b in ("osqp", "scs", "piqp", "proxqp", "highs") if b in qpsolvers.available_solvers]


# ---------------------------------------------------------------------------- backends
@pytest.mark.parametrize("backend", QP_BACKENDS + ["qpsolvers:clarabel", "structured", "structured-float"])
def test_backend_satisfies_kkt_and_agrees_with_clarabel(backend):
    rng = np.random.default_rng(3)
    inst = random_instance(rng, 8, 11, 5, kmin=1, kmax=3)
    ref = solve_svm(inst, solver="clarabel")
    sol = solve_svm(inst, solver=backend)
    assert_kkt(inst, sol, TOL["kkt"])
    assert abs(sol.objective - ref.objective) <= TOL["solver_agreement"] * max(1.0, ref.objective)


@pytest.mark.parametrize("name, module", [
    ("structured", "ntpcert.solve.structured.solver"),
    ("osqp", "ntpcert.solve.svm.qpsolvers_backend"),
    ("qpsolvers:PIQP", "ntpcert.solve.svm.qpsolvers_backend"),
    ("cvxpy:scs", "ntpcert.solve.svm.cvxpy_backend"),
])
def test_resolve_backend_names(name, module):
    mod, kwargs = resolve_backend(name)
    assert mod == module
    if ":" in name:
        assert kwargs["solver"].lower() == name.split(":", 1)[1].lower()


@pytest.mark.parametrize("name", ["nope", "", "qp", 3])
def test_unknown_backend_is_input_error(name):
    with pytest.raises(InputError, match="solver"):
        resolve_backend(name)


def test_every_registered_backend_module_imports():
    import importlib

    for name, (module, _) in BACKENDS.items():
        assert callable(importlib.import_module(module).solve), name


def test_qpsolvers_backend_reports_no_solution_on_non_separable_data():
    from ntpcert import SolverError

    h = np.array([1.0, -2.0, 0.5])
    inst = NTPInstance.from_counts(np.vstack([h, h, [0.0, 1.0, 1.0]]), [[3, 0, 0], [0, 2, 0], [0, 0, 1]])
    with pytest.raises((SolverError, InfeasibleError)):
        solve_svm(inst, solver=QP_BACKENDS[0] if QP_BACKENDS else "clarabel")


# ---------------------------------------------------------------------------- benchmark harness
def test_shifted_geometric_mean():
    from ntpcert.experiments.bench.report import shifted_geometric_mean

    assert shifted_geometric_mean([3.0, 3.0], shift=10) == pytest.approx(3.0)
    # with shift s: exp(mean log(t + s)) - s
    ts = [0.5, 20.0, 3.0]
    want = math.exp(sum(math.log(t + 10) for t in ts) / 3) - 10
    assert shifted_geometric_mean(ts) == pytest.approx(want)
    assert shifted_geometric_mean(ts) < sum(ts) / 3  # below the arithmetic mean
    with pytest.raises(ValueError, match="times"):
        shifted_geometric_mean([-1.0])


def test_success_needs_residuals_within_tolerance_and_the_right_verdict():
    from ntpcert.experiments.bench.runner import Prepared, raw_status, score
    from ntpcert.experiments.bench.pool import Answer

    good = {"status": "optimal", "primal_residual": 1e-9, "dual_residual": 1e-9, "relative_gap": 1e-9, "seconds": 0.1}
    assert raw_status(good, 1e-6) == "optimal/accurate"
    assert raw_status({**good, "dual_residual": 1e-3}, 1e-6) == "optimal/inaccurate"
    sep = Prepared("f", "a", "a.npz", 2, 2, 2, "separable", "test")
    non = Prepared("f", "b", "b.npz", 2, 2, 2, "not separable", "test")

    def status(item, answer, backend="clarabel"):
        run = score(item, backend, answer, time_limit=1.0, tol=1e-6)
        return run.status, run.success

    assert status(sep, Answer(good)) == ("solved", True)
    assert status(sep, Answer({**good, "dual_residual": 1e-3})) == ("inaccurate", False)
    assert status(non, Answer(good)) == ("wrong verdict", False)
    assert status(non, Answer({"status": "infeasible", "seconds": 0.1})) == ("infeasible", True)
    assert status(sep, Answer({"status": "infeasible", "seconds": 0.1})) == ("wrong verdict", False)
    assert status(sep, Answer({**good, "seconds": 2.0})) == ("time limit", False)  # returned after the limit
    assert status(sep, Answer(None, killed=True)) == ("time limit", False)  # killed: the same status
    assert status(sep, Answer(None, message="exit -11")) == ("crash", False)
    assert status(non, None, "osqp") == ("cannot certify infeasibility", False)


def test_status_table_is_closed():
    from ntpcert.experiments.bench.status import STATUSES, TABLE, certifies_infeasibility, outcome

    assert set(TABLE.values()) <= set(STATUSES)
    with pytest.raises(ValueError, match="raw status"):
        outcome("not run", "separable")  # every backend runs on separable data
    with pytest.raises(ValueError, match="raw status"):
        outcome("timeout", "separable")  # not a raw status: killed runs are "killed"
    assert certifies_infeasibility("structured-float") and certifies_infeasibility("cvxpy:SCS")
    assert not certifies_infeasibility("osqp") and not certifies_infeasibility("qpsolvers:clarabel")


def test_summary_counts_failures_at_the_time_limit():
    from ntpcert.experiments.bench.report import infeasible_summary, summarize
    from ntpcert.experiments.bench.runner import Run

    runs = [Run("f", "a", "fast", "solved", True, 1.0), Run("f", "b", "fast", "time limit", False, None),
            Run("f", "a", "slow", "solved", True, 4.0), Run("f", "b", "slow", "solved", True, 4.0)]
    s = summarize(runs, time_limit=100.0)
    assert s["f"]["fast"]["success_rate"] == 0.5
    assert s["f"]["fast"]["sgm"] == pytest.approx(math.sqrt(11 * 110) - 10)
    assert s["f"]["slow"]["sgm_ratio"] == 1.0  # the slow but reliable backend wins
    assert s["all"]["slow"]["runs"] == 2
    # not separable: scored apart, never in the ranking
    apart = [Run("g", "c", "fast", "cannot certify infeasibility", False, None, expected="not separable"),
             Run("g", "c", "slow", "infeasible", True, 0.5, expected="not separable")]
    s2 = summarize(runs + apart, time_limit=100.0)
    assert "g" not in s2 and s2["all"]["fast"]["runs"] == 2
    inf = infeasible_summary(runs + apart, time_limit=100.0)
    assert inf["slow"]["certified"] == 1 and inf["fast"]["sgm"] is None
    assert inf["fast"]["statuses"] == {"cannot certify infeasibility": 1}


def test_drivers_split_the_gap_to_the_leader_by_family():
    from ntpcert.experiments.bench.report import SHIFT, drivers
    from ntpcert.experiments.bench.runner import Run

    runs = [Run("f", "a", "A", "solved", True, 1.0), Run("f", "a", "B", "solved", True, 1.0),
            Run("g", "b", "A", "solved", True, 1.0), Run("g", "b", "B", "solved", True, 9.0),
            Run("h", "c", "A", "solved", True, 2.0), Run("h", "c", "B", "solved", True, 1.0)]
    d = drivers(runs, time_limit=100.0)
    assert d["A"] == {}  # the leader
    gap_g, gap_h = math.log(19 / 11), math.log(11 / 12)
    assert d["B"]["g"] == pytest.approx(gap_g / (gap_g + gap_h)) and d["B"]["g"] > 1  # h goes the other way
    assert sum(d["B"].values()) == pytest.approx(1.0) and SHIFT == 10.0


def test_families_are_seeded_and_sized():
    from ntpcert.experiments.bench.families import families

    fams = families("tiny", seeds=1)
    assert {"paper", "growing_V", "growing_m", "d_below_m", "d_above_m", "onehot", "corpus"} <= set(fams)
    a, b = fams["growing_V"][0].build(), fams["growing_V"][0].build()
    assert a.fingerprint() == b.fingerprint()
    one = fams["onehot"][0].build()
    assert np.all(one.support_sizes == 1) and np.all(one.support_mask().any(axis=0))
    with pytest.raises(ValueError, match="scale"):
        families("huge")


def test_runner_and_qpbenchmark_export(tmp_path):
    from ntpcert.experiments.bench.families import families
    from ntpcert.experiments.bench.qpbench_export import export, load_problem
    from ntpcert.experiments.bench.qpbench_results import COLUMNS, results_csv
    from ntpcert.experiments.bench.runner import prepare, run_all

    member = families("tiny", seeds=1)["d_above_m"][0]
    lines = []
    (item,) = prepare([member], tmp_path / "inst", note=lines.append)
    assert item.expected == "separable"
    (run, again) = run_all([item, item], ["clarabel"], time_limit=60, note=lines.append)
    assert run.success and run.status == "solved" and run.seconds > 0 and again.status == "solved"
    assert len(lines) == 3 and lines[1].startswith("run 1/2 d_above_m/") and "clarabel solved" in lines[1]
    (path,) = export([item], tmp_path / "qpb", tol=1e-6, time_limit=30.0)
    script = (tmp_path / "qpb" / "ntp_svm.py").read_text()
    assert script.count("class NtpSvm(TestSet)") == 1 and "SETTINGS = 'mid_accuracy'" in script
    compile(script, "ntp_svm.py", "exec")
    assert (tmp_path / "qpb" / "results").is_dir()
    P, q, G, h, A, b = load_problem(path)
    sol = qpsolvers.solve_qp(P, q, G, h, A, b, solver="clarabel")
    assert 0.5 * float(sol @ sol) == pytest.approx(run.objective, rel=1e-6)
    head, row = results_csv([run], tol=1e-6, time_limit=60).splitlines()[:2]
    assert tuple(head.split(",")) == COLUMNS
    assert row.startswith(f"d_above_m__{item.name},clarabel,mid_accuracy,") and ",True," in row


def test_a_killed_worker_is_replaced(tmp_path):
    from ntpcert.experiments.bench.families import families
    from ntpcert.experiments.bench.pool import Worker
    from ntpcert.experiments.bench.runner import prepare

    (item,) = prepare(families("tiny", seeds=1)["d_above_m"][:1], tmp_path)
    w = Worker("clarabel")
    try:
        bad = w.solve(str(tmp_path / "missing.npz"), 10.0)
        assert bad.raw is not None and bad.raw["status"] == "error"  # an unreadable file is one failed run
        w._proc.kill()  # the process dies between two requests
        w._proc.wait()
        dead = w.solve(item.path, 10.0)
        assert dead.raw is None and not dead.killed  # a crash
        assert w.solve(item.path, 10.0).raw["status"] == "optimal"  # and a fresh worker takes over
    finally:
        w.close()


def test_bench_command_writes_report_and_csv(tmp_path, capsys):
    out = tmp_path / "bench"
    code = main(["bench", "--scale", "tiny", "--seeds", "1", "--families", "d_above_m,d_below_m",
                 "--backends", "structured-float,osqp", "--time-limit", "60", "--out", str(out), "--json",
                 "--progress"])  # the per-instance lines: on a terminal, or with --progress
    assert code == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["summary"]["d_above_m"]["structured-float"]["success_rate"] == 1.0
    assert summary["infeasible"]["osqp"]["statuses"] == {"cannot certify infeasibility": 1}
    assert summary["infeasible"]["structured-float"]["certified"] == 1
    assert [ln.split(" ")[0] for ln in captured.err.splitlines()] == ["instance", "instance", "run", "run"]
    text = (out / "report.md").read_text()
    assert "shift 10" in text and "structured-float" in text and "scored apart" in text
    assert (out / "results.csv").read_text().splitlines()[0] == ",".join(
        ["problem", "solver", "settings", "runtime", "found", "primal_residual", "dual_residual", "duality_gap"])
    assert (out / "runs.csv").read_text().splitlines()[0].startswith("family,instance,backend,status")


@pytest.mark.parametrize("argv, field", [
    (["--time-limit", "0"], "--time-limit"),
    (["--backends", "nope"], "solver"),
    (["--families", "nope"], "--families"),
    (["--seeds", "0"], "--seeds"),
    (["--out", "/nonexistent/dir/x"], "--out"),
])
def test_bench_bad_options_exit_2(argv, field, capsys):
    assert main(["bench", "--scale", "tiny", *argv]) == 2
    assert field in capsys.readouterr().err


# ---------------------------------------------------------------------------- one backend API
ALL_BACKENDS = sorted(BACKENDS) + ["cvxpy:CLARABEL", "qpsolvers:clarabel"]


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_unknown_option_is_an_input_error_naming_it_and_the_backend(backend):
    inst = random_instance(np.random.default_rng(0), 4, 3, 3, kmin=1, kmax=2)
    with pytest.raises(InputError, match=r"bogus.*" + backend.split(":")[0]):
        solve_svm(inst, solver=backend, bogus=1)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_every_backend_takes_the_common_options(backend):
    from ntpcert.solve.svm import COMMON_OPTIONS, backend_options

    assert set(COMMON_OPTIONS) <= set(backend_options(backend))


@pytest.mark.parametrize("backend", ["cvxpy", "clarabel", "auto", "structured"])
def test_tol_reaches_the_backend(backend):
    """The common ``tol`` is translated for each backend (it used to reach Clarabel raw through cvxpy)."""
    inst = random_instance(np.random.default_rng(1), 4, 5, 3, kmin=1, kmax=2)  # d > m: separable (Lemma 1)
    sol = solve_svm(inst, solver=backend, tol=1e-8)
    assert sol.gap <= 1e-6 * max(1.0, sol.objective)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "1e-8", True])
def test_bad_tol_and_time_limit_are_input_errors(value):
    inst = random_instance(np.random.default_rng(0), 4, 3, 3, kmin=1, kmax=2)
    for key in ("tol", "time_limit"):
        with pytest.raises(InputError, match=key):
            solve_svm(inst, solver="clarabel", **{key: value})


def test_unknown_cvxpy_solver_is_an_input_error():
    inst = random_instance(np.random.default_rng(0), 4, 3, 3, kmin=1, kmax=2)
    with pytest.raises(InputError, match="NOPE"):
        solve_svm(inst, solver="cvxpy:NOPE")


def test_every_entry_point_has_the_same_default_solver():
    import inspect

    from ntpcert.cli.app import build_parser
    from ntpcert.dynamics.trajectory import Limits
    from ntpcert.experiments.sweep import parse_spec
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.float_verdicts import certify, compute_limits
    from ntpcert.solve.svm import DEFAULT_SOLVER

    for fn in (solve_svm, certify, compute_limits, exact_certify, Limits.compute):
        assert inspect.signature(fn).parameters["solver"].default == DEFAULT_SOLVER, fn.__qualname__
    parser = build_parser()
    for command in ("certify", "svm", "limits", "trajectory"):
        args = parser.parse_args([command, "paper"] + (["--out", "x"] if command in ("limits", "trajectory") else []))
        assert args.solver == DEFAULT_SOLVER, command
    spec = parse_spec({"name": "s", "grid": {"m": 2, "d": 2, "V": 3, "k": 1}})
    assert spec.settings["svm"]["solver"] == DEFAULT_SOLVER


@pytest.mark.parametrize("dense", [True, False])
def test_auto_falls_back_where_the_structured_solver_does_not_certify(dense, monkeypatch):
    """An ill-conditioned sweep instance (||W^mm||^2/2 = 190): the structured solver needs about 575 epochs,
    more than the 300 ``auto`` gives it on a small QP (a budget of work, not seconds), so the dense working set
    (V·d = 16 unknowns, DAQP) solves it, or Clarabel where the QP is larger than DENSE_MAX_VARS (set to 0 here).
    (Seed 0, ||W^mm||^2/2 = 3903, served here until the polish where d < m certified it in 2 epochs.)"""
    from ntpcert.experiments.sweep import GridPoint, point_instance
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.structured import working_set
    from ntpcert.solve.svm import auto

    if not dense:
        monkeypatch.setattr(working_set, "DENSE_MAX_VARS", 0)
    inst = point_instance(GridPoint(6, 4, 4, 2, "gaussian", 2), 0)
    assert auto.small_epochs(KeslerSystem.build(inst)) == auto.SMALL_EPOCHS == 300
    sol = solve_svm(inst)
    ref = solve_svm(inst, solver="clarabel")
    assert sol.solver == ("auto/active-set" if dense else "auto/clarabel")
    assert "structured solver stopped" in sol.info["fallback"]
    assert "budget of 300 epochs spent" in sol.info["fallback"]
    if dense:  # started from the margins coordinate ascent found active
        assert sol.info["engine"] == "daqp" and sol.info["working_set"] < KeslerSystem.build(inst).n_margin
    assert_kkt(inst, sol, TOL["kkt"])
    assert sol.objective == pytest.approx(ref.objective, rel=1e-8)


def test_auto_budget_grows_with_the_margin_rows_past_wide_margins():
    """``auto``'s first try on a small QP with many margin rows: WIDE_WORK and the epoch cap grow with the rows
    past WIDE_MARGINS (Clarabel's cost does), so teacher data with V = 50, m = 2,000, d = 64 (98,000 rows) get
    the 240 epochs the structured solver needs (WIDE_WORK alone bought 94, and Clarabel then took 100 s); the
    budget depends on the sizes alone."""
    from ntpcert.instance.datasets.teacher import teacher
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.structured.budget import epochs_within
    from ntpcert.solve.svm import auto

    def teacher_cell(V, m, d):  # the benchmark's cell: tokens that are some context's label
        inst = teacher(m=m, d=d, V=V, seed=0)
        counts = np.asarray(inst.counts)
        return NTPInstance.from_counts(inst.embeddings, counts[:, counts.sum(axis=0) > 0])

    system = KeslerSystem.build(teacher_cell(50, 2000, 64))
    grow = system.n_margin / auto.WIDE_MARGINS
    assert grow > 20
    assert epochs_within(system, auto.WIDE_WORK, auto.SMALL_EPOCHS) < 100
    assert auto.small_epochs(system) == epochs_within(system, int(auto.WIDE_WORK * grow),
                                                      int(auto.SMALL_EPOCHS * grow)) >= 1000
    # a QP just past SMALL_MARGINS keeps WIDE_WORK itself
    small = KeslerSystem.build(teacher_cell(10, 300, 8))
    assert auto.SMALL_MARGINS < small.n_margin <= auto.WIDE_MARGINS
    assert auto.small_epochs(small) == epochs_within(small, auto.WIDE_WORK, auto.SMALL_EPOCHS)


def test_an_unchecked_infeasible_status_is_no_verdict(monkeypatch, tmp_path, capsys):
    """An interior-point method's "infeasible" is a float status, not a witness (Clarabel reports it on teacher
    data scaled by 1e-8, which are separable as all positive scalings are): ``ntpcert svm`` says undetermined
    where no Farkas ray came with it, and prints no "not separable"."""
    from ntpcert.instance.io import write_npz
    import ntpcert.solve.svm as svm_pkg

    def infeasible(*args, **kwargs):
        raise InfeasibleError("clarabel: PrimalInfeasible (the data are not NTP-separable)")

    inst = random_instance(np.random.default_rng(3), 5, 7, 4, kmin=1, kmax=1)  # m <= d + 1: no pair screen
    monkeypatch.setattr(svm_pkg, "solve_svm", infeasible)
    path = tmp_path / "d.npz"
    write_npz(inst, path)
    rc = main(["svm", str(path), "--solver", "clarabel"])
    err = capsys.readouterr()
    assert rc != 0 and "not separable" not in err.out and "undetermined" in err.err
