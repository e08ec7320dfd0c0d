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


#: Pages whose console lines docs/samples.py runs and checks with their outputs (not run twice).
SAMPLE_PAGES = {"certificates.md", "explain.md"}


@pytest.mark.parametrize("page", [p for p in RUNNABLE if p not in PYTHON_ONLY | SAMPLE_PAGES
                                  and "```console" in (DOCS / p).read_text()])
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


def _samples_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_samples", DOCS / "samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("page", _samples_module().PAGES)
def test_sample_outputs_match_the_commands(page, tmp_path, monkeypatch):
    """The outputs printed in the docs are what the commands print (docs/samples.py --write regenerates them)."""
    samples = _samples_module()
    monkeypatch.chdir(tmp_path)
    assert samples.samples(page), f"{page} has no console samples"
    bad = samples.check(page)
    assert not bad, "\n\n".join(bad)


def test_sample_pages_are_the_scripts():
    assert set(_samples_module().PAGES) == SAMPLE_PAGES


def test_sample_matching_is_strict_outside_the_ellipses():
    samples = _samples_module()
    assert samples.matches(["a ...", "...", "z"], ["a b c", "x", "y", "z"])
    assert not samples.matches(["a ...", "z"], ["a b", "y"])
    assert not samples.matches(["exact gap 1.5e-08"], ["exact gap 1.6e-08"])
    assert not samples.matches(["one line"], ["one line", "and more"])


def test_certify_json_keys_are_documented(capsys):
    import json

    assert main(["certify", "paper", "--json"]) == 0
    keys = set(json.loads(capsys.readouterr().out))
    text = (DOCS / "cli.md").read_text()
    section = text[text.index("## `ntpcert certify"):text.index("## `ntpcert explain")]
    documented = {k for row in section.splitlines() if row.startswith("| `")
                  for k in re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", row.split("|")[1])}
    assert keys - documented == set(), f"certify --json keys missing from docs/cli.md: {sorted(keys - documented)}"


def test_every_extra_is_named_once_and_listed():
    import tomllib

    from ntpcert.util.extras import EXTRAS

    extras = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(extras)
    for page in ("architecture.md", "strategies.md", "cli.md"):
        assert "[test]` (hypothesis" not in (DOCS / page).read_text()  # the strategies extra is [strategies]
