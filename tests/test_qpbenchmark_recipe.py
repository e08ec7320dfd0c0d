"""The qpbenchmark recipe of docs/solvers.md runs as written on an exported tiny family, and ntpcert's
results.csv is read by qpbenchmark's own results reader and reported on by its own `report`."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # three qpbenchmark processes (pandas, PyTorch imports): about 40 s

DOCS = Path(__file__).resolve().parent.parent / "docs" / "solvers.md"
AUTHOR = "ntpcert-tests"


def recipe() -> list[list[str]]:
    """The command lines of the recipe block in docs/solvers.md (the fence holding ``qpbenchmark ntp_svm.py``)."""
    fences = re.findall(r"```\w*\n(.*?)```", DOCS.read_text(), re.S)
    (body,) = [b for b in fences if "qpbenchmark ntp_svm.py" in b]
    return [shlex.split(ln.replace("NAME", AUTHOR)) for ln in body.splitlines() if ln.strip()]


def qpbenchmark_program() -> str:
    """The ``qpbenchmark`` console script of the running interpreter's environment."""
    path = Path(sys.executable).with_name("qpbenchmark")
    assert path.exists(), "qpbenchmark is in the [bench] extra"
    return str(path)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny family exported as a test set, and ntpcert's own runs of two backends on it."""
    from ntpcert.experiments.bench.families import families
    from ntpcert.experiments.bench.qpbench_export import export
    from ntpcert.experiments.bench.qpbench_results import results_csv
    from ntpcert.experiments.bench.runner import prepare, run_all

    root = tmp_path_factory.mktemp("qpb")
    items = prepare(families("tiny", seeds=1)["d_above_m"], root / "instances")
    assert all(it.expected == "separable" for it in items)
    written = export(items, root / "testset", tol=1e-6, time_limit=20.0)
    assert len(written) == len(items)
    runs = run_all(items, ["structured", "clarabel"], time_limit=20.0, tol=1e-6)
    (root / "ours").mkdir()
    (root / "ours" / "results.csv").write_text(results_csv(runs, tol=1e-6, time_limit=20.0))
    return root, items, runs


def test_docs_recipe_runs_to_the_report(exported):
    root, items, _ = exported
    lines = recipe()
    assert lines[0][0] == "cd" and all(ln[0] == "qpbenchmark" for ln in lines[1:])
    assert {ln[ln.index("--results-path") + 2] for ln in lines[1:]} == {"run", "report"}
    cwd = root / "testset"
    for argv in lines[1:]:
        proc = subprocess.run([qpbenchmark_program(), *argv[1:]], cwd=cwd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    report = (cwd / "results" / "ntp_svm.md").read_text()
    assert "NTP-SVM test set" in report and f"@{AUTHOR}" in report and "mid_accuracy" in report
    csv = (cwd / "results" / "ntp_svm.csv").read_text().splitlines()
    assert csv[0] == "problem,solver,settings,runtime,found,primal_residual,dual_residual,duality_gap"
    assert len({ln.split(",")[0] for ln in csv[1:]}) == len(items)


def test_results_csv_loads_with_qpbenchmarks_reader_and_report(exported):
    from qpbenchmark.benchmark import load_test_set
    from qpbenchmark.results import Results

    root, items, runs = exported
    test_set = load_test_set(str(root / "testset" / "ntp_svm.py"))
    results = Results(root / "ours" / "results.csv", test_set)
    assert results.nb_rows == len(runs) == 2 * len(items)
    assert set(results.df["solver"]) == {"structured", "clarabel"}
    assert results.df["found"].all()
    assert (results.df["primal_residual"] <= 1e-6).all() and (results.df["duality_gap"] >= 0).all()
    proc = subprocess.run([qpbenchmark_program(), "ntp_svm.py", "--results-path", str(root / "ours" / "results.csv"),
                           "report", "--author", AUTHOR], cwd=root / "testset", capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "structured" in (root / "ours" / "ntp_svm.md").read_text()
