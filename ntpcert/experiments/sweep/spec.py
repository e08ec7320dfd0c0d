r"""Sweep specs: a TOML file naming a grid of random instances and the quantities to compute on each.

.. code-block:: toml

    name = "separability-threshold"
    seed = 0                          # base seed; each instance's seed derives from it and its grid point
    quantities = ["verdicts"]         # any of "verdicts", "svm", "trajectory", "geometry"

    [grid]
    m = [20, 40]                      # a list, one integer, or a range table
    d_over_m = { from = 0.05, to = 2.0, step = 0.05 }   # or d = {...}: exactly one of d, d_over_m
    V = [6]
    k = [1, 2, 3, 4]                  # support size of every context
    embedding = ["gaussian"]          # gaussian | integer | lowrank:R
    seeds = 20                        # replicates 0..19, or a list of seeds

    [instance]
    max_count = 10                    # counts on a support are uniform in 1..max_count

    [svm]
    solver = "structured"             # the default NTP-SVM solver

    [trajectory]
    steps = 1000                      # plain GD from W = 0
    step_size = 0.0                   # 0 means the paper's 1/(2L)

A range table ``{ from = a, to = b, step = s }`` is inclusive of both ends (``step`` defaults to 1).
With ``d_over_m`` the grid's d is ``max(1, round(ratio * m))``; repeated (m, d) pairs are kept once.
Grid points with ``k > V`` are skipped. Errors name the field and the value.

Sizes are checked before anything is enumerated or allocated: at most :data:`MAX_POINTS` grid points,
at every point at most ``max_entries`` (default :data:`~ntpcert.instance.embeddings.MAX_ENTRIES`)
entries in H (m·d) and in the counts (m·V), ``max_count`` at most :data:`MAX_COUNT`,
``trajectory.steps`` at most :data:`~ntpcert.dynamics.optimizers.MAX_STEPS` and ``step_size`` at most
:data:`~ntpcert.dynamics.optimizers.MAX_LR`.

Only the *settings* (seed, quantities, instance, svm, trajectory) fix the value computed at a grid
point; the grid only says which points exist. A results store remembers the settings' hash, so a
grid may grow between runs of the same store but the settings may not change.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tomllib
from dataclasses import dataclass
from typing import Any

from ntpcert.dynamics.optimizers import MAX_LR, MAX_STEPS
from ntpcert.errors import InputError
from ntpcert.instance.embeddings import MAX_ENTRIES
from ntpcert.util.validate import check_int, check_number

__all__ = ["MAX_COUNT", "MAX_POINTS", "QUANTITIES", "GridPoint", "SweepSpec", "load_spec", "parse_spec",
           "parse_embedding_family"]

QUANTITIES = ("verdicts", "svm", "trajectory", "geometry")
_TOP = {"name", "seed", "quantities", "grid", "instance", "svm", "trajectory"}
_GRID = {"m", "d", "d_over_m", "V", "k", "embedding", "seeds"}
#: Refuse grids larger than this (a typo such as ``step = 0.0001`` should not queue a billion tasks);
#: checked before the grid is enumerated. Raise it with ``parse_spec(..., max_points=N)``.
MAX_POINTS = 1_000_000
#: Largest ``instance.max_count``: the counts of a point then sum to at most MAX_ENTRIES · MAX_COUNT,
#: far inside int64.
MAX_COUNT = 1_000_000_000


@dataclass(frozen=True, order=True)
class GridPoint:
    """One instance of a sweep: sizes, support size, embedding family and replicate seed.

    Attributes
    ----------
    m, d, V, k : int
        Contexts, embedding dimension, vocabulary size, support size of every context.
    embedding : str
        Embedding family (see :func:`parse_embedding_family`).
    seed : int
        Replicate number.
    """

    m: int
    d: int
    V: int
    k: int
    embedding: str
    seed: int

    @property
    def key(self) -> str:
        """The unique, human-readable key of the point in a results store."""
        return f"m={self.m},d={self.d},V={self.V},k={self.k},embedding={self.embedding},seed={self.seed}"

    def to_json(self) -> dict[str, Any]:
        return {"m": self.m, "d": self.d, "V": self.V, "k": self.k, "embedding": self.embedding, "seed": self.seed}


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (see the module doc).

    Attributes
    ----------
    name : str
    seed : int
    quantities : tuple of str
    points : tuple of GridPoint
        Every grid point, sorted, without duplicates.
    skipped : int
        Grid combinations dropped because ``k > V``.
    settings : dict
        What fixes each point's value: seed, quantities and the instance/svm/trajectory tables.
    """

    name: str
    seed: int
    quantities: tuple[str, ...]
    points: tuple[GridPoint, ...]
    skipped: int
    settings: dict

    @property
    def settings_hash(self) -> str:
        """SHA-256 of the canonical JSON of :attr:`settings`."""
        text = json.dumps(self.settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------- field readers
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(field: str, v: Any, low: int) -> int:
    if not _is_int(v) or v < low:
        raise InputError(f"{field}: value {v!r} is not an integer >= {low}")
    return v


def _number(field: str, v: Any, low_exclusive: float) -> float:
    return check_number(field, v, minimum=low_exclusive, exclusive_minimum=True)


def _range(field: str, v: dict, *, integer: bool, low: int = 1, max_points: int = MAX_POINTS) -> list:
    unknown = set(v) - {"from", "to", "step"}
    if unknown or "from" not in v or "to" not in v:
        raise InputError(f"{field}: value {v!r} is not a range table {{ from = a, to = b, step = s }}")
    if integer:
        lo, hi = _int(f"{field}.from", v["from"], low), _int(f"{field}.to", v["to"], low)
        step = _int(f"{field}.step", v.get("step", 1), 1)
        if hi < lo:
            raise InputError(f"{field}: value {v!r} has to < from")
        n = (hi - lo) // step + 1
        if n > max_points:
            raise InputError(f"{field}: value {v!r} has {n:,} entries, more than the {max_points:,} grid points allowed")
        return list(range(lo, hi + 1, step))
    lo, hi = _number(f"{field}.from", v["from"], 0.0), _number(f"{field}.to", v["to"], 0.0)
    step = _number(f"{field}.step", v.get("step", 1), 0.0)
    if hi < lo:
        raise InputError(f"{field}: value {v!r} has to < from")
    q = (hi - lo) / step + 1e-9
    if not math.isfinite(q) or q + 1 > max_points:
        raise InputError(f"{field}: value {v!r} has more than the {max_points:,} grid points allowed")
    n = int(math.floor(q)) + 1
    return [round(lo + i * step, 12) for i in range(n)]


def _ints(field: str, v: Any, low: int, max_points: int = MAX_POINTS) -> list[int]:
    if isinstance(v, dict):
        return _range(field, v, integer=True, low=low, max_points=max_points)
    vals = v if isinstance(v, list) else [v]
    if not vals:
        raise InputError(f"{field}: value {v!r} is empty")
    return sorted({_int(field, x, low) for x in vals})


def _ratios(field: str, v: Any, max_points: int = MAX_POINTS) -> list[float]:
    if isinstance(v, dict):
        return _range(field, v, integer=False, max_points=max_points)
    vals = v if isinstance(v, list) else [v]
    if not vals:
        raise InputError(f"{field}: value {v!r} is empty")
    return sorted({_number(field, x, 0.0) for x in vals})


def parse_embedding_family(field: str, v: Any) -> str:
    """Check an embedding family name: ``gaussian`` (entries N(0, 1/d)), ``integer`` (uniform in
    {-3, ..., 3}, no zero row) or ``lowrank:R`` (a Gaussian product of inner dimension R >= 1)."""
    if isinstance(v, str):
        if v in ("gaussian", "integer"):
            return v
        if v.startswith("lowrank:"):
            r = v.split(":", 1)[1]
            if r.isdigit() and int(r) >= 1:
                return f"lowrank:{int(r)}"
    raise InputError(f"{field}: value {v!r} is not an embedding family (gaussian, integer, lowrank:R with R >= 1)")


def _table(field: str, v: Any, allowed: set[str]) -> dict:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(f"{field}: value {v!r} is not a table")
    for key in v:
        if key not in allowed:
            raise InputError(f"{field}.{key}: unknown setting (known: {', '.join(sorted(allowed))})")
    return dict(v)


# ---------------------------------------------------------------------------- parsing
def parse_spec(doc: dict, *, default_name: str = "sweep", max_points: int | None = None,
               max_entries: int | None = MAX_ENTRIES) -> SweepSpec:
    """Validate a parsed TOML document and enumerate its grid.

    Every setting and every size is checked before the grid is enumerated: at most ``max_points``
    points (default :data:`MAX_POINTS`), and at every point at most ``max_entries`` entries in the
    embeddings (m·d) and in the counts (m·V) (None: no limit)."""
    if not isinstance(doc, dict):
        raise InputError(f"SPEC: expected a table, got {type(doc).__name__}")
    for key in doc:
        if key not in _TOP:
            raise InputError(f"{key}: unknown top-level field (known: {', '.join(sorted(_TOP))})")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not name or any(c in name for c in "/\\\0"):
        raise InputError(f"name: value {name!r} is not a plain non-empty name")
    seed = _int("seed", doc.get("seed", 0), 0)
    q = doc.get("quantities", ["verdicts"])
    q = [q] if isinstance(q, str) else q
    if not isinstance(q, list) or not q or any(x not in QUANTITIES for x in q):
        raise InputError(f"quantities: value {doc.get('quantities')!r} must list some of {', '.join(QUANTITIES)}")
    quantities = tuple(x for x in QUANTITIES if x in q)

    grid = doc.get("grid")
    if not isinstance(grid, dict):
        raise InputError(f"grid: value {grid!r} is not a table (need m, d or d_over_m, V, k)")
    for key in grid:
        if key not in _GRID:
            raise InputError(f"grid.{key}: unknown field (known: {', '.join(sorted(_GRID))})")
    for key in ("m", "V", "k"):
        if key not in grid:
            raise InputError(f"grid.{key}: missing")
    if ("d" in grid) == ("d_over_m" in grid):
        raise InputError("grid.d: give exactly one of grid.d and grid.d_over_m")
    settings = {"seed": seed, "quantities": list(quantities), **_settings(doc, quantities)}

    check_int("max_points", max_points, minimum=1, optional=True)
    cap = MAX_POINTS if max_points is None else max_points
    ms = _ints("grid.m", grid["m"], 1, cap)
    Vs = _ints("grid.V", grid["V"], 2, cap)
    ks = _ints("grid.k", grid["k"], 1, cap)
    fams = grid.get("embedding", ["gaussian"])
    fams = sorted({parse_embedding_family("grid.embedding", f) for f in (fams if isinstance(fams, list) else [fams])})
    if not fams:
        raise InputError("grid.embedding: value [] is empty")
    seeds_v = grid.get("seeds", 1)
    if _is_int(seeds_v):
        if _int("grid.seeds", seeds_v, 1) > cap:
            raise InputError(f"grid.seeds: value {seeds_v} is more than the {cap:,} grid points allowed")
        seeds = list(range(seeds_v))
    else:
        seeds = _ints("grid.seeds", seeds_v, 0, cap)
    if "d" in grid:
        ds = _ints("grid.d", grid["d"], 1, cap)
        n_md = len(ms) * len(ds)
    else:
        ratios = _ratios("grid.d_over_m", grid["d_over_m"], cap)
        n_md = len(ms) * len(ratios)
    n = n_md * len(Vs) * len(ks) * len(fams) * len(seeds)  # an upper bound: (m, d) pairs may repeat
    if n > cap:
        raise InputError(f"grid: {n:,} points, more than the {cap:,} allowed (MAX_POINTS)")
    if "d" in grid:
        md = [(m, d) for m in ms for d in ds]
    else:
        for m in ms:  # d = ratio·m must be a size before it is rounded
            _check_point_entries("grid.d_over_m", m, ratios[-1] * m, "d", max_entries)
        md = sorted({(m, max(1, round(r * m))) for m in ms for r in ratios})
    _check_point_entries("grid.d", *max(md, key=lambda p: p[0] * p[1]), "d", max_entries)
    _check_point_entries("grid.V", ms[-1], Vs[-1], "V", max_entries)
    points, skipped = [], 0
    for (m, d), V, k, fam, s in itertools.product(md, Vs, ks, fams, seeds):
        if k > V:
            skipped += 1
            continue
        points.append(GridPoint(m, d, V, k, fam, s))
    if not points:
        raise InputError(f"grid.k: every value {ks} exceeds every V {Vs}: no grid points")
    return SweepSpec(name, seed, quantities, tuple(sorted(set(points))), skipped, settings)


def _check_point_entries(field: str, m: int, cols: float, what: str, max_entries: int | None) -> None:
    if not math.isfinite(cols) or not math.isfinite(m * cols) or (max_entries is not None and m * cols > max_entries):
        shown = f"{cols:,.0f}" if math.isfinite(cols) and cols < 1e15 else f"{cols:.3g}"
        limit = "" if max_entries is None else f" of {max_entries:,} entries"
        raise InputError(f"{field}: a grid point with m = {m:,} and {what} = {shown} is above the size limit{limit} "
                         f"for its {'embeddings (m·d)' if what == 'd' else 'counts (m·V)'}")


def _settings(doc: dict, quantities: tuple[str, ...]) -> dict:
    """The instance, svm and trajectory tables, checked (before the grid is enumerated)."""
    inst = _table("instance", doc.get("instance"), {"max_count"})
    inst["max_count"] = _int("instance.max_count", inst.get("max_count", 10), 1)
    if inst["max_count"] > MAX_COUNT:
        raise InputError(f"instance.max_count: value {inst['max_count']} is above the limit {MAX_COUNT:,}")
    svm = _table("svm", doc.get("svm"), {"solver"})
    from ntpcert.solve.svm import BACKENDS, DEFAULT_SOLVER

    svm["solver"] = svm.get("solver", DEFAULT_SOLVER)

    if not isinstance(svm["solver"], str) or not (svm["solver"] in BACKENDS or svm["solver"].startswith("cvxpy:")):
        raise InputError(f"svm.solver: value {svm['solver']!r} is not an NTP-SVM solver "
                         f"(known: {', '.join(sorted(BACKENDS))}, cvxpy:NAME)")
    if svm["solver"].startswith("cvxpy:"):
        import cvxpy

        if svm["solver"].split(":", 1)[1].upper() not in cvxpy.installed_solvers():
            raise InputError(f"svm.solver: value {svm['solver']!r} is not an installed cvxpy solver "
                             f"(installed: {', '.join(cvxpy.installed_solvers())})")
    traj = _table("trajectory", doc.get("trajectory"), {"steps", "step_size"})
    traj["steps"] = _int("trajectory.steps", traj.get("steps", 1000), 1)
    if traj["steps"] > MAX_STEPS:
        raise InputError(f"trajectory.steps: value {traj['steps']} is above the limit {MAX_STEPS:,}")
    step = traj.get("step_size", 0.0)
    check_number("trajectory.step_size (0 means 1/(2L))", step, minimum=0, maximum=MAX_LR)
    traj["step_size"] = float(step)
    out = {"instance": inst, "svm": svm}
    if "trajectory" in quantities:
        out["trajectory"] = traj
    return out


def load_spec(path: str | os.PathLike, *, max_points: int | None = None,
              max_entries: int | None = MAX_ENTRIES) -> SweepSpec:
    """Read and validate a TOML sweep spec (see the module doc and :func:`parse_spec`)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"SPEC: file {path!r} not found") from None
    except IsADirectoryError:
        raise InputError(f"SPEC: {path!r} is a directory") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"SPEC: {path!r} is not valid TOML ({' '.join(str(err).split())})") from None
    except UnicodeDecodeError as err:
        raise InputError(f"SPEC: {path!r} is not UTF-8 text (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise InputError(f"SPEC: cannot read {path!r} ({' '.join(str(err).split()) or type(err).__name__})") from None
    stem = os.path.splitext(os.path.basename(path))[0] or "sweep"
    return parse_spec(doc, default_name=stem, max_points=max_points, max_entries=max_entries)
