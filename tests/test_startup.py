"""The CLI's start-up stays lean: heavy modules load only in the commands that use them.

The structured solver's whole-process time on small instances (issue: at least 100x faster than
cvxpy + Clarabel) is mostly start-up, so each check runs a real ``ntpcert`` process and asks
which modules it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from ntpcert.instance.io import write_npz

from .conftest import random_instance

PROBE = """
import runpy, sys, json
sys.argv = ["ntpcert"] + {argv!r}
try:
    runpy.run_module("ntpcert.cli", run_name="__main__")
except SystemExit:
    pass
roots = sorted({{m.split(".")[0] for m in sys.modules}})
sys.stderr.write("MODULES " + json.dumps(roots) + "\\n")
"""


def _imported(argv: list[str]) -> tuple[set[str], str]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          timeout=120)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")]
    assert line, proc.stderr
    return set(json.loads(line[-1][len("MODULES "):])), proc.stdout


def test_help_imports_no_heavy_module():
    mods, _ = _imported(["--help"])
    assert not mods & {"scipy", "cvxpy", "sympy", "clarabel", "matplotlib", "flint", "tqdm"}


def test_structured_svm_needs_neither_scipy_nor_cvxpy(tmp_path):
    path = tmp_path / "inst.npz"
    write_npz(random_instance(np.random.default_rng(3), m=12, d=16, V=6, kmax=3), path)
    mods, out = _imported(["svm", str(path), "--json"])
    j = json.loads(out)
    assert j["separable"] is True and j["relative_gap"] <= 1e-8
    assert not mods & {"scipy", "cvxpy", "sympy", "clarabel", "matplotlib"}, mods
    assert "flint" in mods  # the exact certificate ran
