"""``ntpcert geometry``: files, JSON, and bad input."""

from __future__ import annotations

import json
import os
import time

import pytest

from ntpcert.cli.app import main
from ntpcert.cli.geometry import OUTPUT_NAMES


def test_geometry_dyck_writes_everything(tmp_path, capsys) -> None:
    out = tmp_path / "geo"
    assert main(["geometry", "dyck", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(out)) == sorted(n for n in OUTPUT_NAMES if not n.startswith("training"))
    assert summary["nuclear_svm"]["relative_gap"] <= 1e-8
    assert all(c["defect"] <= 1e-6 for c in summary["checks"])
    assert summary["distinct_supports"] < summary["m"]


def test_geometry_bad_solver_exits_2(capsys) -> None:
    assert main(["geometry", "dyck", "--solver", "osqp"]) == 2
    assert "--solver" in capsys.readouterr().err


def test_geometry_bad_gap_tol_exits_2(capsys) -> None:
    assert main(["geometry", "dyck", "--gap-tol", "0"]) == 2
    assert "--gap-tol" in capsys.readouterr().err


@pytest.mark.slow
def test_geometry_pydoc_finishes_with_a_stated_gap(tmp_path, capsys) -> None:
    """The built-in pydoc (V = 86, 454 distinct supports): the default target there is 1e-6 (a large merged
    program), reached in well under the 200-300 s the solver needed before; every check holds to 1e-6."""
    out = tmp_path / "geo"
    t0 = time.perf_counter()
    assert main(["geometry", "pydoc", "--out", str(out), "--json"]) == 0
    seconds = time.perf_counter() - t0
    summary = json.loads(capsys.readouterr().out)
    svm = summary["nuclear_svm"]
    assert svm["gap_tol"] == 1e-6 and svm["status"] == "gap_tol" and svm["relative_gap"] <= 1e-6
    assert all(c["defect"] <= 1e-6 for c in summary["checks"])
    assert (out / "word_gram.png").exists() and (out / "embeddings.png").exists()
    print(f"pydoc geometry: {seconds:.1f} s, gap {svm['relative_gap']:.2e}")
