#!/usr/bin/env python3
"""The sample outputs in the docs, checked against the commands (in the spirit of doctest).

A ``console`` block of a page in :data:`PAGES` holds ``$ ntpcert ...`` lines, each followed by the output
the command prints (a line with nothing below it is only run). ``tests/test_docs.py`` runs the lines in
order in an empty directory and compares each output with the text below its line: exactly, except that ``...`` stands for any text (at the
end of a line: the rest of the line; alone on a line: any number of lines), as doctest's ELLIPSIS.

Regenerate the samples after a change of the output with ``python docs/samples.py --write`` (from the
repository root); lines holding ``...`` keep their placeholder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
#: Pages whose console blocks carry sample outputs.
PAGES = ("certificates.md", "explain.md")
FENCE = re.compile(r"```console\n(.*?)```", re.S)


def samples(page: str) -> list[tuple[str, list[str]]]:
    """``[(command line, expected output lines)]`` of the page's console blocks, in order."""
    out: list[tuple[str, list[str]]] = []
    for body in FENCE.findall((DOCS / page).read_text(encoding="utf-8")):
        for line in body.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    for _, expected in out:
        while expected and not expected[-1].strip():
            expected.pop()
    return out


def run(command: str) -> list[str]:
    """The stdout lines of one ``ntpcert ...`` command line, run in this process."""
    from ntpcert.cli.app import main

    argv = shlex.split(command)
    assert argv[0] == "ntpcert", command
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv[1:])
    assert code in (0, 3), f"{command}: exit {code}"
    return buf.getvalue().rstrip("\n").splitlines()


def _line_matches(want: str, got: str) -> bool:
    parts = want.split("...")
    pattern = ".*".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, got) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` fits ``expected`` (``...`` alone on a line matches any lines)."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and _line_matches(head, actual[0]) and matches(rest, actual[1:])


def check(page: str) -> list[str]:
    """One message per sample of ``page`` whose output differs (run in the current directory)."""
    bad = []
    for command, expected in samples(page):
        actual = run(command)
        if expected and not matches(expected, actual):
            bad.append(f"{page}: $ {command}\n--- documented\n" + "\n".join(expected)
                       + "\n--- printed\n" + "\n".join(actual))
    return bad


def write(page: str) -> None:
    """Replace each sample of ``page`` by the command's output (lines with ``...`` kept as written
    when they still match)."""
    path = DOCS / page
    text = path.read_text(encoding="utf-8")
    results = {}
    for command, expected in samples(page):
        actual = run(command)
        if not expected:
            results[command] = []
            continue
        keep = [w if ("..." in w and any(_line_matches(w, a) for a in actual)) else None for w in expected]
        results[command] = actual if not any(keep) else [
            next((w for w in keep if w and _line_matches(w, a)), a) for a in actual]

    def block(mo: re.Match) -> str:
        lines = []
        for line in mo.group(1).splitlines():
            if line.startswith("$ "):
                if lines:
                    lines.append("")
                lines.append(line)
                lines += results[line[2:]]
        return "```console\n" + "\n".join(lines) + "\n```"

    path.write_text(FENCE.sub(block, text), encoding="utf-8")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help="regenerate the samples in the pages")
    args = p.parse_args()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the commands' files (certificates) land here
        try:
            if args.write:
                for page in PAGES:
                    write(page)
                return 0
            bad = [msg for page in PAGES for msg in check(page)]
        finally:
            os.chdir(here)
    print("\n\n".join(bad) or "samples match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
