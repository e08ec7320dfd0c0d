"""The versions a result was measured with, as one line (read from the installed distributions' metadata,
without importing them)."""

from __future__ import annotations

import platform
from importlib import metadata

#: The distributions whose versions a benchmark result names, in this order; absent ones are left out.
MEASURED_WITH = ("numpy", "scipy", "python-flint", "cvxpy", "clarabel", "highspy", "qpsolvers", "osqp", "scs",
                 "piqp", "proxsuite", "torch")

#: The prefix of the line, which ``tests/test_benchmarks.py`` looks for in every results file.
PREFIX = "versions:"


def versions_line(names: tuple[str, ...] = MEASURED_WITH) -> str:
    """``"versions: python 3.11.7, numpy 2.4.6, scipy 1.17.1, ..."`` for the distributions installed here.

    >>> versions_line(("numpy",)).startswith("versions: python ")
    True
    """
    parts = [f"python {platform.python_version()}"]
    for name in names:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return f"{PREFIX} " + ", ".join(parts)


def stamp_versions(text: str) -> str:
    """``text`` with :func:`versions_line` after its first line (a results file's heading), once.

    >>> stamp_versions("# title\\nbody\\n").splitlines()[2].startswith("versions:")
    True
    """
    lines = text.split("\n")
    lines = [ln for ln in lines if not ln.startswith(PREFIX)]
    head, rest = lines[:1], lines[1:]
    return "\n".join(head + ["", versions_line()] + rest)
