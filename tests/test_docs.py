"""The documentation runs: python blocks execute in order; `$ ntpcert ...` console lines exit 0."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ntpcert.cli.app import main

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
RUNNABLE = ["tutorial.md", "strategies.md", "architecture.md", "explain.md", "lm-tutorial.md", "../README.md"]
#: Pages whose console lines are illustrations (files of the reader's own), not runnable as written.
PYTHON_ONLY = {"../README.md"}


def blocks(page: str, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall((DOCS / page).read_text()) if kind == lang]


@pytest.mark.parametrize("page", RUNNABLE)
def test_python_blocks_run(page, capsys):
    namespace: dict = {}
    code = blocks(page, "python")
    assert code, f"{page} has no python blocks"
    for body in code:
        exec(compile(body, f"{page}", "exec"), namespace)  # noqa: S102


@pytest.mark.parametrize("page", [p for p in RUNNABLE if p not in PYTHON_ONLY and "```console" in (DOCS / p).read_text()])
def test_console_lines_run(page, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files the lines write (certificates, figures) land here
    lines = [ln[2:] for body in blocks(page, "console") for ln in body.splitlines() if ln.startswith("$ ntpcert ")]
    assert lines
    for line in lines:
        argv = shlex.split(line)[1:]
        assert main(argv) == 0, line


def test_every_command_is_documented():
    from ntpcert.cli.app import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = (DOCS / "cli.md").read_text()
    missing = [name for name in sub.choices if f"## `ntpcert {name}" not in text]
    assert not missing, f"commands without a section in docs/cli.md: {missing}"
