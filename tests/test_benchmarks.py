"""Benchmark results name the versions they were measured with."""

from __future__ import annotations

from pathlib import Path

import pytest

from ntpcert.util.versions import PREFIX, stamp_versions, versions_line

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.md")), ids=lambda p: p.name)
def test_every_results_file_names_its_versions(path: Path) -> None:
    head = path.read_text(encoding="utf-8").splitlines()[:6]
    assert any(line.startswith(PREFIX) for line in head), f"{path.name}: no '{PREFIX}' line near the top"


def test_versions_line_names_numpy_scipy_and_the_solvers() -> None:
    line = versions_line()
    import numpy
    import scipy

    assert line.startswith(f"{PREFIX} python ")
    assert f"numpy {numpy.__version__}" in line and f"scipy {scipy.__version__}" in line
    assert "clarabel " in line and "python-flint " in line


def test_stamp_puts_one_line_under_the_heading() -> None:
    once = stamp_versions("# title\n\nbody\n")
    twice = stamp_versions(once)
    assert once.splitlines()[0] == "# title" and once.splitlines()[2].startswith(PREFIX)
    assert sum(line.startswith(PREFIX) for line in twice.splitlines()) == 1
    assert once.rstrip("\n").endswith("body")
