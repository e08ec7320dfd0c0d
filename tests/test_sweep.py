"""Sweeps: spec parsing, deterministic instances, the crash-safe store, dask runs, SIGKILL and resume."""

from __future__ import annotations

import glob
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ntpcert import InputError
from ntpcert.pipeline.float_verdicts import certify
from ntpcert.cli.app import main
from ntpcert.experiments.sweep import (GridPoint, ResultStore, compute_point, load_spec, parse_spec, point_instance,
                           run_sweep)
from ntpcert.experiments.sweep.plot import phase_table

from .conftest import TOL

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(glob.glob(str(ROOT / "examples" / "sweeps" / "*.toml")))
#: A small grid whose instances each take ~0.05 s (the GD trajectory), so a run can be killed midway.
KILL_SPEC = """
name = "kill"
quantities = ["verdicts", "svm", "trajectory"]
[grid]
m = [6]
d = { from = 2, to = 9 }
V = [4]
k = [1, 2, 3]
seeds = 2
[trajectory]
steps = 2500
"""
#: Seconds to wait for a subprocess sweep before failing the test.
SUBPROCESS_TIMEOUT_S = 240


def _spec(**grid) -> dict:
    base = {"m": [3], "d": [2, 4], "V": [3], "k": [1, 2], "seeds": 2}
    base.update(grid)
    return {"name": "t", "grid": base}


# ---------------------------------------------------------------------------- specs
@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_example_specs_parse(path):
    spec = load_spec(path)
    assert spec.points and len(set(spec.points)) == len(spec.points)
    assert all(p.k <= p.V for p in spec.points)


def test_grid_is_the_product_with_inclusive_ranges_and_k_above_V_skipped():
    spec = parse_spec(_spec(d={"from": 1, "to": 5, "step": 2}, k=[1, 2, 4], seeds=3))
    assert sorted({p.d for p in spec.points}) == [1, 3, 5]
    assert len(spec.points) == 3 * 2 * 3 and spec.skipped == 3 * 3
    ratio = parse_spec({"grid": {"m": [10, 20], "d_over_m": {"from": 0.5, "to": 1.0, "step": 0.25}, "V": 3, "k": 1}})
    assert {(p.m, p.d) for p in ratio.points} == {(10, 5), (10, 8), (10, 10), (20, 10), (20, 15), (20, 20)}


def test_settings_hash_ignores_the_grid_but_not_the_settings():
    a, b = parse_spec(_spec()), parse_spec(_spec(seeds=5))
    c = parse_spec({**_spec(), "instance": {"max_count": 3}})
    assert a.settings_hash == b.settings_hash != c.settings_hash


BAD_SPECS = [
    ({"grid": {"m": [3], "d": [2], "V": [3]}}, "grid.k"),
    ({"grid": {"m": [0], "d": [2], "V": [3], "k": [1]}}, "grid.m"),
    ({"grid": {"m": [3], "V": [3], "k": [1]}}, "grid.d"),
    ({"grid": {"m": [3], "d": [2], "d_over_m": [1.0], "V": [3], "k": [1]}}, "grid.d"),
    ({"grid": {"m": [3], "d": {"from": 4, "to": 2}, "V": [3], "k": [1]}}, "grid.d"),
    ({"grid": {"m": [3], "d": [2], "V": [1], "k": [1]}}, "grid.V"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [5]}}, "grid.k"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1], "embedding": "sphere"}}, "grid.embedding"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1], "seeds": 0}}, "grid.seeds"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1], "n": 4}}, "grid.n"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1]}, "quantities": ["loss"]}, "quantities"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1]}, "svm": {"solver": "nope"}}, "svm.solver"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1]}, "trajectory": {"steps": -1}}, "trajectory.steps"),
    ({"grid": {"m": [3], "d": [2], "V": [3], "k": [1]}, "colour": "red"}, "colour"),
    ({"grid": [1, 2]}, "grid"),
]


@pytest.mark.parametrize(("doc", "field"), BAD_SPECS, ids=[f for _, f in BAD_SPECS])
def test_bad_specs_name_the_field(doc, field):
    with pytest.raises(InputError) as info:
        parse_spec(doc)
    assert str(info.value).startswith(field + ":") or str(info.value).startswith(field + " ")


# ---------------------------------------------------------------------------- instances and quantities
def test_point_instances_are_deterministic_and_have_the_requested_shape():
    p = GridPoint(5, 3, 6, 2, "gaussian", 7)
    a, b = point_instance(p, 0), point_instance(p, 0)
    assert a.fingerprint() == b.fingerprint()
    assert point_instance(p, 1).fingerprint() != a.fingerprint()
    assert point_instance(GridPoint(5, 3, 6, 2, "gaussian", 8), 0).fingerprint() != a.fingerprint()
    assert (a.m, a.d, a.V) == (5, 3, 6) and np.all(a.support_sizes == 2)
    H = point_instance(GridPoint(5, 3, 6, 2, "integer", 0), 0).embeddings
    assert np.array_equal(H, np.round(H)) and np.all(H.any(axis=1))
    assert np.linalg.matrix_rank(point_instance(GridPoint(6, 5, 4, 1, "lowrank:2", 0), 0).embeddings) == 2


@pytest.mark.parametrize("point", [GridPoint(4, 6, 5, 2, "gaussian", 0), GridPoint(6, 2, 4, 1, "integer", 3),
                                   GridPoint(5, 4, 4, 3, "gaussian", 1)])
def test_quantities_agree_with_the_certify_pipeline(point):
    settings = parse_spec({"quantities": ["verdicts", "svm", "trajectory"], "grid": {"m": 1, "d": 1, "V": 2, "k": 1},
                           "trajectory": {"steps": 300}}).settings
    out = compute_point(settings, point)
    v = out["values"]
    rep = certify(point_instance(point, settings["seed"]), progress=False)
    assert out["error"] is None
    assert (v["compatible"], v["separable"], v["reachable"]) == (
        rep.compatible.holds, rep.separable.holds, rep.entropy_bound_reachable)
    assert v["dim_F"] == rep.subspace.dim
    if rep.svm is not None:
        assert v["w_mm_norm"] == pytest.approx(rep.svm.norm, rel=TOL["solver_agreement"])
        assert v["margin"] == pytest.approx(1 / rep.svm.norm, rel=TOL["solver_agreement"])
    assert v["gd_steps"] == 300 and v["gd_excess"] > 0
    if point.d > point.m:  # Lemma 1
        assert v["reachable"] is True


# ---------------------------------------------------------------------------- the store
def test_store_commits_each_point_once_and_refuses_other_settings(tmp_path):
    spec = parse_spec(_spec())
    path = str(tmp_path / "s.sqlite")
    p = spec.points[0]
    res = {"values": {"x": 0.1 + 0.2, "ok": True, "none": None}, "error": None, "seconds": 0.5}
    with ResultStore(path, spec) as db:
        assert db.add(p, res) is True
        assert db.add(p, {**res, "values": {"x": 9.0}}) is False
        assert db.add_many([(p, res), (spec.points[1], res)]) == [False, True]
        assert len(db) == 2
    with ResultStore(path, spec) as db:
        row = db.table()[0]
        assert row["x"] == 0.1 + 0.2 and row["ok"] is True and row["none"] is None and "seconds" not in row
        assert db.table(timing=True)[0]["seconds"] == 0.5
    other = parse_spec({**_spec(), "seed": 1})
    with pytest.raises(InputError, match="--store"):
        ResultStore(path, other)
    with pytest.raises(InputError, match="STORE"):
        ResultStore(str(tmp_path / "missing.sqlite"))


def test_rerun_computes_exactly_the_missing_points(tmp_path):
    spec = parse_spec(_spec(d=[1, 2, 3, 4], seeds=3))
    full, part = str(tmp_path / "full.sqlite"), str(tmp_path / "part.sqlite")
    first = run_sweep(spec, full)
    assert first.computed == first.total == len(spec.points) and first.complete
    assert run_sweep(spec, full).computed == 0
    run_sweep(spec, part)
    with sqlite3.connect(part) as db:  # lose a third of the rows, as a crash before their commit would
        db.execute("DELETE FROM results WHERE seed = 1")
    again = run_sweep(spec, part)
    assert again.computed == sum(p.seed == 1 for p in spec.points)
    with ResultStore(full) as a, ResultStore(part) as b:
        assert a.table() == b.table() and len(a) == len(spec.points)
    csv = tmp_path / "t.csv"
    with ResultStore(full) as a:
        assert a.write_csv(csv) == len(spec.points)
    assert csv.read_text().splitlines()[0].startswith("m,d,V,k,embedding,seed,d_over_m")


def test_phase_table_counts_verdicts(tmp_path):
    spec = parse_spec(_spec(d=[1, 6], seeds=4))
    path = str(tmp_path / "p.sqlite")
    run_sweep(spec, path)
    with ResultStore(path) as db:
        rows = db.table()
    cells = phase_table(rows, "separable", by=["k"])
    assert sum(c.n for c in cells) == len(rows)
    for c in cells:
        assert c.n_yes + c.n_no + c.n_undetermined == c.n
        assert c.n_yes + c.n_no == 0 or c.low <= c.value <= c.high
    # d = 6 > m = 3 with Gaussian embeddings: Lemma 1 says always separable
    assert all(c.value == 1.0 for c in cells if c.x == 2.0)
    with pytest.raises(InputError, match="--quantity"):
        phase_table(rows, "colour")


# ---------------------------------------------------------------------------- command line
def _sweep(args: list[str], cwd: Path, **kw) -> subprocess.Popen:
    """`ntpcert sweep ARGS` in a child process."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "ntpcert.cli", "sweep", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_sigkill_midway_then_rerun_gives_the_uninterrupted_table(tmp_path):
    """`ntpcert sweep` on a 2-worker LocalCluster: kill the whole process group with SIGKILL after a
    quarter of the rows are committed, rerun, and compare with an uninterrupted run (in-process and
    serial here, so the check also says that dask workers compute the same bits; the slow test below
    compares two CLI runs)."""
    spec_path = tmp_path / "kill.toml"
    spec_path.write_text(KILL_SPEC)
    total = len(load_spec(spec_path).points)
    common = [str(spec_path), "--workers", "2", "--chunk-size", "1", "--json"]

    killed = tmp_path / "killed.sqlite"
    proc = _sweep([*common[:1], "--store", str(killed), *common[1:]], tmp_path, start_new_session=True)
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    while _rows(killed) < total // 4:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the sweep committed nothing"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL
    at_kill = _rows(killed)
    assert total // 4 <= at_kill < total, "the run was not interrupted midway"

    resumed = _finish(_sweep([*common[:1], "--store", str(killed), *common[1:]], tmp_path))
    assert resumed["already_done"] == at_kill and resumed["computed"] == total - at_kill and resumed["complete"]

    clean = tmp_path / "clean.sqlite"  # the uninterrupted reference, computed here without dask
    assert run_sweep(load_spec(spec_path), str(clean)).computed == total
    with ResultStore(killed) as a, ResultStore(clean) as b:
        assert len(a) == len(b) == total
        assert a.table() == b.table()


def test_sweep_plot_writes_a_figure(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "p"\nquantities = ["verdicts", "svm"]\n[grid]\nm = 3\nd = [1, 2, 4]\nV = 3\nk = [1, 2]\nseeds = 3\n')
    store = tmp_path / "p.sqlite"
    run_sweep(load_spec(spec), str(store))
    out = tmp_path / "fig.png"
    assert main(["sweep-plot", str(store), "--out", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert payload["rows"] == 18 and set(payload["cells"]) == {"separable", "reachable"}
    heat = tmp_path / "heat.png"
    assert main(["sweep-plot", str(store), "--out", str(heat), "--kind", "heatmap", "--quantity", "margin",
                 "--where", "V=3"]) == 0
    assert heat.exists()


@pytest.mark.parametrize(("argv", "needle"), [
    (["sweep", "missing.toml"], "SPEC"),
    (["sweep", "bad.toml"], "grid.k"),
    (["sweep", "good.toml", "--chunk-size", "0"], "--chunk-size"),
    (["sweep", "good.toml", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"], "--workers"),
    (["sweep", "good.toml", "--store", "nodir/x.sqlite"], "--store"),
    (["sweep", "good.toml", "--store", "other.sqlite"], "--store"),
    (["sweep-plot", "missing.sqlite", "--out", "f.png"], "STORE"),
    (["sweep-plot", "other.sqlite", "--out", "f.png", "--quantity", "colour"], "--quantity"),
    (["sweep-plot", "other.sqlite", "--out", "f.txt"], "--out"),
    (["sweep-plot", "other.sqlite", "--out", "f.png", "--where", "m=99"], "--where"),
])
def test_bad_input_exits_2_with_one_line(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.toml").write_text('[grid]\nm = 2\nd = 1\nV = 2\nk = 1\n')
    (tmp_path / "bad.toml").write_text('[grid]\nm = 2\nd = 1\nV = 2\n')
    other = parse_spec({"seed": 5, "grid": {"m": 2, "d": 1, "V": 2, "k": 1}})
    run_sweep(other, "other.sqlite")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not (tmp_path / "f.png").exists() and not (tmp_path / "f.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("spec_name", ["phase_separability.toml"])
def test_sigkill_resume_on_the_2000_instance_study(spec_name, tmp_path):
    """The done-when run: the docs' phase study (>= 2,000 instances) from the CLI, killed midway with
    SIGKILL, rerun, and compared with an uninterrupted run."""
    spec_path = ROOT / "examples" / "sweeps" / spec_name
    total = len(load_spec(spec_path).points)
    assert total >= 2000
    killed, clean = tmp_path / "killed.sqlite", tmp_path / "clean.sqlite"
    t0 = time.monotonic()
    proc = _sweep([str(spec_path), "--store", str(killed), "--json"], tmp_path, start_new_session=True)
    while _rows(killed) < total // 2:
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    at_kill = _rows(killed)
    t_kill = time.monotonic() - t0
    resumed = _finish(_sweep([str(spec_path), "--store", str(killed), "--json"], tmp_path))
    t_resume = time.monotonic() - t0 - t_kill
    clean_run = _finish(_sweep([str(spec_path), "--store", str(clean), "--json"], tmp_path))
    print(f"{total} instances: killed after {t_kill:.1f} s with {at_kill} rows; resume computed "
          f"{resumed['computed']} in {t_resume:.1f} s; uninterrupted run {clean_run['seconds']:.1f} s")
    assert at_kill < total and resumed["computed"] == total - at_kill
    with ResultStore(killed) as a, ResultStore(clean) as b:
        assert a.table() == b.table() and len(a) == total
