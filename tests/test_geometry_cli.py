"""``ntpcert geometry``: files, JSON, and bad input."""

from __future__ import annotations

import json
import os

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
