"""A plain (non-editable) ``pip install .`` into a fresh virtual environment: every command of
``ntpcert --help`` runs, and a missing optional extra is one line naming it. Slow (it installs the
dependencies): ``pytest -m slow tests/test_install.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

SPEC = 'name = "tiny"\nquantities = ["verdicts"]\n[grid]\nm = 3\nd = [1, 4]\nV = 3\nk = [1, 2]\nseeds = 1\n'


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv with ntpcert installed from a copy of the source tree (no extras)."""
    base = tmp_path_factory.mktemp("plain")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".ci-venv", "build", "*.egg-info",
                                                             "__pycache__", ".pytest_cache", ".hypothesis"))
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(src), "-c", str(src / "constraints" / "tested.txt")],
                   check=True, timeout=1800)
    return env_dir


def _run(venv: Path, *args: str, cwd: Path, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if check_rc is not None:
        assert proc.returncode == check_rc, f"{args}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def _commands(venv: Path, cwd: Path) -> list[str]:
    """The command names listed under COMMAND by ``ntpcert --help`` (indented by four spaces)."""
    import re

    out = _run(venv, "ntpcert", "--help", cwd=cwd).stdout
    block = out.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^    (\S+)", block, re.M)]


def test_the_installed_package_is_not_the_source_tree(venv, tmp_path):
    proc = _run(venv, str(venv / "bin" / "python"), "-c", "import ntpcert, sys; print(ntpcert.__file__)", cwd=tmp_path)
    assert str(venv) in proc.stdout and str(ROOT) not in proc.stdout
    assert _run(venv, str(venv / "bin" / "python"), "-c",
                "import importlib.resources as r; print(r.files('ntpcert').joinpath('py.typed').is_file())",
                cwd=tmp_path).stdout.strip() == "True"


def test_every_command_has_help(venv, tmp_path):
    commands = _commands(venv, tmp_path)
    assert {"info", "certify", "svm", "limits", "verify", "bench", "trajectory", "reproduce", "sweep",
            "sweep-plot"} <= set(commands)
    for name in commands:
        assert "usage: ntpcert " + name in _run(venv, "ntpcert", name, "--help", cwd=tmp_path).stdout


def test_every_command_runs_once(venv, tmp_path):
    """One real call of every command in ``ntpcert --help``, from a plain install."""
    calls = {
        "info": ["ntpcert", "info", "paper", "--json"],
        "certify": ["ntpcert", "certify", "paper", "--exact", "--certificate-out", "cert.json", "--json"],
        "verify": ["ntpcert", "verify", "cert.json", "--json"],
        "svm": ["ntpcert", "svm", "paper", "--out", "W.npy", "--json"],
        "limits": ["ntpcert", "limits", "paper", "--out", "limits", "--json"],
        "bench": ["ntpcert", "bench", "--scale", "tiny", "--families", "paper", "--backends", "structured,clarabel",
                  "--seeds", "1", "--time-limit", "60", "--json"],
        "trajectory": ["ntpcert", "trajectory", "paper", "--steps", "50", "--out", "traj", "--json"],
        "reproduce": ["ntpcert", "reproduce", "paper", "--steps", "30", "--no-extras", "--out", "repro", "--json"],
        "sweep": ["ntpcert", "sweep", "tiny.toml", "--serial", "--store", "tiny.sqlite", "--json"],
        "sweep-plot": ["ntpcert", "sweep-plot", "tiny.sqlite", "--out", "phase.png", "--json"],
        "explain": ["ntpcert", "explain", "paper", "--json"],
        "geometry": ["ntpcert", "geometry", "dyck", "--out", "geo", "--json"],
        "compare": ["ntpcert", "compare", "paper", "--W", "W.npy", "--json"],
    }
    assert set(calls) == set(_commands(venv, tmp_path)), "a command without a call here"
    (tmp_path / "tiny.toml").write_text(SPEC)
    for name in ("info", "certify", "verify", "svm", "limits", "bench", "trajectory", "reproduce", "sweep",
                 "sweep-plot", "explain", "geometry", "compare"):  # compare reads svm's W.npy
        out = json.loads(_run(venv, *calls[name], cwd=tmp_path).stdout)
        assert isinstance(out, dict), name
    assert json.loads(_run(venv, *calls["verify"], cwd=tmp_path).stdout)["valid"] is True
    for f in ("cert.json", "W.npy", "limits/W_star.npy", "traj/metrics.csv", "repro/summary.md", "phase.png",
              "geo/summary.json"):
        assert (tmp_path / f).is_file(), f


@pytest.mark.parametrize("argv, extra", [
    (["ntpcert", "svm", "paper", "--solver", "osqp"], "bench"),
    (["ntpcert", "sweep", "tiny.toml"], "dist"),
    (["python", "-c", "import ntpcert.experiments.strategies"], "strategies"),
])
def test_a_missing_extra_is_one_line_naming_it(venv, tmp_path, argv, extra):
    (tmp_path / "tiny.toml").write_text(SPEC)
    if argv[0] == "python":
        proc = _run(venv, str(venv / "bin" / "python"), *argv[1:], cwd=tmp_path, check_rc=None)
        assert proc.returncode != 0
        assert f"pip install 'ntpcert[{extra}]'" in proc.stderr.strip().splitlines()[-1]
        return
    proc = _run(venv, *argv, cwd=tmp_path, check_rc=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'ntpcert[{extra}]'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "tiny.sqlite").exists()
