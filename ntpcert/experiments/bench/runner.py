r"""Run every backend on every benchmark instance, each run in its own process with a time limit.

A run **succeeds** the way the QP community counts it: the solver reports a solution *and* the
solution checks out, i.e. its primal residual, dual residual and relative duality gap
(recomputed by :class:`~ntpcert.solve.svm.SVMSolution` from the returned pair, never read from the solver)
are all at most ``tol``. On an instance that is not NTP-separable, a run succeeds when the backend
reports infeasibility. Whether an instance is separable is settled beforehand by a certificate
checked in exact arithmetic (the structured solver's exact duality gap or exact Farkas ray); when
neither comes, the HiGHS separability LP decides.

Each (instance, backend) pair runs in a fresh interpreter (:mod:`ntpcert.experiments.bench.worker`), so a crash, a
memory blow-up or a solver that ignores its time limit cannot take the benchmark down: the runner
kills it after the time limit plus ``GRACE`` seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ntpcert.experiments.bench.families import FamilyMember
from ntpcert.util.progress import iterate

#: Seconds a worker may run past its time limit (interpreter start, reading the file) before it is killed.
GRACE = 10.0

#: Default tolerance on residuals and relative gap for a run to count as a success.
DEFAULT_TOL = 1e-6

#: Time limit of the reference solve that settles separability.
REFERENCE_LIMIT = 600.0

WORKER = Path(__file__).with_name("worker.py")


@dataclass(frozen=True)
class Prepared:
    """An instance written to disk with its settled verdict.

    Attributes
    ----------
    family, name : str
    path : str
        The ``.npz`` file.
    m, d, V : int
    expected : str
        ``"separable"``, ``"not separable"`` or ``"unknown"``.
    how : str
        What settled it.
    """

    family: str
    name: str
    path: str
    m: int
    d: int
    V: int
    expected: str
    how: str


@dataclass(frozen=True)
class Run:
    """One (instance, backend) run; ``seconds`` is None when the run was killed."""

    family: str
    instance: str
    backend: str
    status: str
    success: bool
    seconds: float | None
    objective: float | None = None
    primal_residual: float | None = None
    dual_residual: float | None = None
    relative_gap: float | None = None
    certified_gap: float | None = None
    peak_mb: float | None = None
    message: str = ""
    expected: str = "unknown"

    def to_row(self) -> dict:
        return asdict(self)


def settle(inst) -> tuple[str, str]:
    """``(expected, how)`` for an instance: exact certificates first, the HiGHS LP otherwise."""
    from ntpcert.errors import InfeasibleError, NTPCertError
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.separability_lp import check_separability
    from ntpcert.solve.svm import solve_svm

    system = KeslerSystem.build(inst)
    if system.n_margin == 0:
        return "separable", "no margin constraints"
    try:
        sol = solve_svm(system, solver="structured", time_limit=REFERENCE_LIMIT)
        return "separable", f"exact duality gap {sol.info['certificate']['relative_gap']:.1e}"
    except InfeasibleError as err:
        cert = getattr(err, "certificate", None)
        if cert is not None and cert.exact:
            return "not separable", "exact Farkas ray"
    except NTPCertError:
        pass
    res = check_separability(system)
    if res.holds is None:
        return "unknown", f"HiGHS: {res.status}"
    return ("separable" if res.holds else "not separable"), "HiGHS separability LP"


def prepare(members: Sequence[FamilyMember], workdir: str | os.PathLike, *, progress: bool = False) -> list[Prepared]:
    """Build each instance, write it to ``workdir`` and settle its verdict."""
    from ntpcert.instance.io import write_npz

    out = []
    root = Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    for mem in _bar(members, progress, "instances"):
        inst = mem.build()
        path = root / f"{mem.family}__{mem.name}.npz"
        write_npz(inst, path)
        expected, how = settle(inst)
        out.append(Prepared(mem.family, mem.name, str(path), inst.m, inst.d, inst.V, expected, how))
    return out


def classify(raw: dict, expected: str, tol: float) -> bool:
    """Whether a worker's result counts as a success (see the module doc)."""
    status = raw.get("status")
    if expected == "not separable":
        return status == "infeasible"
    if status != "optimal":
        return False
    vals = [raw.get(k) for k in ("primal_residual", "dual_residual", "relative_gap")]
    return all(v is not None and v <= tol for v in vals)


def run_one(item: Prepared, backend: str, *, time_limit: float, tol: float = DEFAULT_TOL) -> Run:
    """Run ``backend`` on one prepared instance in a fresh process."""
    cmd = [sys.executable, str(WORKER), item.path, backend, repr(float(time_limit))]
    base = dict(family=item.family, instance=item.name, backend=backend, expected=item.expected)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=time_limit + GRACE)
    except subprocess.TimeoutExpired:
        return Run(**base, status="timeout", success=False, seconds=None, message=f"killed after {time_limit + GRACE:g} s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Run(**base, status="crash", success=False, seconds=None, message=f"exit {proc.returncode}: {tail}"[:300])
    raw = json.loads(lines[-1])
    seconds = float(raw["seconds"])
    ok = classify(raw, item.expected, tol) and seconds <= time_limit
    status = raw["status"] if seconds <= time_limit else "over time limit"
    keys = ("objective", "primal_residual", "dual_residual", "relative_gap", "certified_gap", "peak_mb")
    return Run(**base, status=status, success=ok, seconds=seconds, message=raw.get("message", ""),
               **{k: raw.get(k) for k in keys})


def run_all(items: Sequence[Prepared], backends: Sequence[str], *, time_limit: float, tol: float = DEFAULT_TOL,
            progress: bool = False) -> list[Run]:
    """Every backend on every instance (instances in order, backends inner)."""
    pairs = [(it, b) for it in items for b in backends]
    return [run_one(it, b, time_limit=time_limit, tol=tol) for it, b in _bar(pairs, progress, "runs")]


def _bar(items: Sequence, enabled: bool, desc: str) -> Iterable:
    return iterate(items, bool(enabled), desc=desc)
