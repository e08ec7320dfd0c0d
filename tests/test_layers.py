"""The package's layers are enforced: import-linter's contracts (pyproject.toml) hold, and they fail
when a library module imports the CLI; no module imports another's private names; library code
neither prints nor reads argparse objects."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ntpcert"
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())", "--no-cache", "--no-logo"]

pytest.importorskip("importlinter")


def _modules() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        out.append((name, path, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _lint(cwd: Path, env_path: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "PYTHONPATH": str(env_path)}
    return subprocess.run(LINT, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_import_contracts_hold():
    proc = _lint(ROOT, ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout
    assert f"{CHECKER_CONTRACT} KEPT" in proc.stdout


@pytest.mark.parametrize("module, line", [
    ("ntpcert/rows/kesler.py", "from ntpcert.cli.options import emit_json  # noqa: F401\n"),
    ("ntpcert/instance/model.py", "import ntpcert.solve.svm  # noqa: F401\n"),
    ("ntpcert/instance/io/arrays.py", "from ntpcert.instance.load import load_instance  # noqa: F401\n"),
])
def test_contracts_fail_on_an_upward_import_or_a_cycle(tmp_path, module, line):
    """A copy of the package with one import that breaks the layering makes lint-imports fail."""
    shutil.copytree(PACKAGE, tmp_path / "ntpcert", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    text = target.read_text(encoding="utf-8")
    head, sep, rest = text.partition("from __future__ import annotations\n")
    target.write_text(head + sep + line + rest if sep else line + text, encoding="utf-8")
    proc = _lint(tmp_path, tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert "BROKEN" in proc.stdout


#: The name of the forbidden contract that keeps the certificate checker away from the producer.
CHECKER_CONTRACT = "The certificate checker is independent of the producer"


@pytest.mark.parametrize("module, line", [
    ("ntpcert/certificate/checker/primal.py", "import ntpcert.solve  # noqa: F401\n"),
    ("ntpcert/certificate/checker/sections.py", "from ntpcert.solve.svm import solve_svm  # noqa: F401\n"),
    ("ntpcert/certificate/checker/excess.py", "from ntpcert.certificate.encode import sparse_list  # noqa: F401\n"),
    ("ntpcert/certificate/checker/limbs.py", "from ntpcert.exact.dyadic import LimbMatrix  # noqa: F401\n"),
    ("ntpcert/certificate/checker/excess.py", "from ntpcert.exact.excess import bracket_balls  # noqa: F401\n"),
    ("ntpcert/certificate/checker/compatibility.py", "import ntpcert.rows.kesler  # noqa: F401\n"),
    ("ntpcert/certificate/checker/api.py", "from ntpcert.pipeline.frequent_tokens import MAX_KERNEL  # noqa: F401\n"),
    ("ntpcert/certificate/checker/sections.py", "from ntpcert.verdict import FarkasRay  # noqa: F401\n"),
    ("ntpcert/certificate/checker/compatibility.py", "from ntpcert.exact.left_null import exact_left_null  # noqa: F401\n"),
    # indirectly: a module the checker reads (the decoders) importing an encoder breaks it too
    ("ntpcert/certificate/decode.py", "import ntpcert.certificate.encode  # noqa: F401\n"),
])
def test_the_checker_contract_fails_when_the_checker_imports_the_producer(tmp_path, module, line):
    """The checker's independence is a test: a copy of the package in which a checker module (or one it
    imports) imports a solver, the Kesler rows, the pipeline, an encoder or a producing module of
    ntpcert.exact breaks the forbidden contract (an import of the pipeline breaks the layers as well)."""
    shutil.copytree(PACKAGE, tmp_path / "ntpcert", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    text = target.read_text(encoding="utf-8")
    head, sep, rest = text.partition("from __future__ import annotations\n")
    assert sep, module
    target.write_text(head + sep + line + rest, encoding="utf-8")
    proc = _lint(tmp_path, tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert f"{CHECKER_CONTRACT} BROKEN" in proc.stdout


def test_no_module_imports_a_private_name_of_another():
    bad = []
    for name, path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ntpcert"):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


#: Library modules allowed to touch stdout, and why.
STDOUT_ALLOWED = {
    "ntpcert.experiments.bench.worker": "the benchmark's worker is a program of its own, run in a subprocess",
    "ntpcert.solve.svm.qpsolvers_backend": "flushes stdout before HiGHS's one-time banner is sent to stderr",
}


def test_library_code_neither_prints_nor_reads_argparse():
    bad = []
    for name, path, tree in _modules():
        if name.startswith("ntpcert.cli") or name in ("ntpcert.__main__", *STDOUT_ALLOWED):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} print()")
            if isinstance(node, ast.Attribute) and node.attr == "stdout" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} sys.stdout")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if "argparse" in mods:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports argparse")
    assert not bad, bad


def test_nothing_outside_cli_imports_cli():
    bad = []
    for name, path, tree in _modules():
        if name.startswith("ntpcert.cli") or name == "ntpcert.__main__":
            continue
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}" for m in mods if m == "ntpcert.cli" or m.startswith("ntpcert.cli.")]
    assert not bad, bad


def test_figures_leave_the_backend_alone():
    """No global state changes: figures use matplotlib's object API, never ``matplotlib.use`` or pyplot
    (pyplot's figure manager is process state; the backend is the caller's choice)."""
    bad = []
    for name, path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "use" and isinstance(node.value, ast.Name) \
                    and node.value.id == "matplotlib":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} matplotlib.use")
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} {m}" for m in mods if m == "matplotlib.pyplot"]
    assert not bad, bad
