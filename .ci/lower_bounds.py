"""Print a pip constraints file that pins every `name>=X` bound of pyproject.toml to `name==X`.

Used by `.ci/lower-bounds`, which installs the package and its test extras at those versions and runs the
suite, so that the lower bounds pyproject.toml promises are checked rather than guessed.
Usage: python .ci/lower_bounds.py [pyproject.toml]
"""

from __future__ import annotations

import re
import sys
import tomllib

#: Bounds the check cannot install here, and what it pins instead: torch's older releases on the package
#: registry are CUDA builds of several GB; 2.13.0 is the CPU build these machines hold (the constraints
#: file's pin), so the check runs torch at 2.13.0 and the torch bound itself stays untested.
INSTEAD = {"torch": "2.13.0"}

BOUND = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][^,;\s]*)\s*$")


def lower_bounds(pyproject: dict) -> dict[str, str]:
    """Name -> version of each plain `>=` requirement in the dependencies and the optional extras."""
    project = pyproject["project"]
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs.extend(extra)
    out: dict[str, str] = {}
    for req in reqs:
        m = BOUND.match(req.split(";")[0])
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"
    with open(path, "rb") as fh:
        bounds = lower_bounds(tomllib.load(fh))
    for name, version in sorted(bounds.items()):
        print(f"{name}=={INSTEAD.get(name, version)}")
