r"""Run every backend on every benchmark instance, in one worker process per backend, with a time limit.

A run **succeeds** the way the QP community counts it: the solver reports a solution *and* the
solution checks out, i.e. its primal residual, dual residual and relative duality gap
(recomputed by :class:`~ntpcert.solve.svm.SVMSolution` from the returned pair, never read from the solver)
are all at most ``tol``. On an instance that is not NTP-separable, a run succeeds when the backend
reports infeasibility; backends that cannot are not run there (see
:mod:`ntpcert.experiments.bench.status`, which maps every outcome onto one status vocabulary).
Whether an instance is separable is settled beforehand by a certificate checked in exact arithmetic
(the structured solver's exact duality gap or exact Farkas ray); when neither comes, the HiGHS
separability LP decides.

Each backend runs in its own long-lived process (:mod:`ntpcert.experiments.bench.pool`), so a crash, a
memory blow-up or a solver that ignores its time limit cannot take the benchmark down: the runner
kills the process after the time limit plus ``GRACE`` seconds and starts a fresh one.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from ntpcert.experiments.bench.families import FamilyMember
from ntpcert.experiments.bench.pool import GRACE, Answer, Worker
from ntpcert.experiments.bench.status import SUCCESS, certifies_infeasibility, outcome

#: Default tolerance on residuals and relative gap for a run to count as a success.
DEFAULT_TOL = 1e-6

#: Time limit of the reference solve that settles separability.
REFERENCE_LIMIT = 600.0

#: A callback that receives one progress line (the CLI writes it on stderr).
Note = Callable[[str], None]


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
    """One (instance, backend) run; ``seconds`` is None when the run was killed or not run.

    ``status`` is one of :data:`ntpcert.experiments.bench.status.STATUSES`; ``raw`` is what the
    worker said (``optimal/accurate``, ``infeasible``, ``error``, ...); ``gap`` is the absolute
    duality gap and ``relative_gap`` the gap over ``max(1, objective)``."""

    family: str
    instance: str
    backend: str
    status: str
    success: bool
    seconds: float | None
    objective: float | None = None
    primal_residual: float | None = None
    dual_residual: float | None = None
    gap: float | None = None
    relative_gap: float | None = None
    certified_gap: float | None = None
    peak_mb: float | None = None
    message: str = ""
    expected: str = "unknown"
    raw: str = ""

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


def prepare(members: Sequence[FamilyMember], workdir: str | os.PathLike, *, note: Note | None = None) -> list[Prepared]:
    """Build each instance, write it to ``workdir`` and settle its verdict (one ``note`` line each)."""
    from ntpcert.instance.io import write_npz

    out = []
    root = Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    for i, mem in enumerate(members, 1):
        t0 = time.perf_counter()
        inst = mem.build()
        path = root / f"{mem.family}__{mem.name}.npz"
        write_npz(inst, path)
        expected, how = settle(inst)
        out.append(Prepared(mem.family, mem.name, str(path), inst.m, inst.d, inst.V, expected, how))
        if note is not None:
            note(f"instance {i}/{len(members)} {mem.key} (m={inst.m}, d={inst.d}, V={inst.V}): {expected}, "
                 f"by {how} ({time.perf_counter() - t0:.2f} s)")
    return out


def raw_status(raw: dict, tol: float) -> str:
    """The worker's status in the table's terms: ``optimal/accurate`` when the primal residual, dual
    residual and relative gap are all at most ``tol``, ``optimal/inaccurate`` otherwise."""
    status = raw.get("status")
    if status != "optimal":
        return str(status)
    vals = [raw.get(k) for k in ("primal_residual", "dual_residual", "relative_gap")]
    return "optimal/accurate" if all(v is not None and v <= tol for v in vals) else "optimal/inaccurate"


def score(item: Prepared, backend: str, answer: Answer | None, *, time_limit: float, tol: float) -> Run:
    """The :class:`Run` of one answer (None: not run, the backend cannot certify infeasibility)."""
    base = dict(family=item.family, instance=item.name, backend=backend, expected=item.expected)
    if answer is None:
        raw, got = "not run", {}
    elif answer.raw is None:
        raw, got = ("killed" if answer.killed else "crash"), {}
    else:
        got = answer.raw
        raw = raw_status(got, tol)
        if float(got["seconds"]) > time_limit:
            raw = "late"
    status = outcome(raw, item.expected)
    keys = ("objective", "primal_residual", "dual_residual", "gap", "relative_gap", "certified_gap", "peak_mb")
    seconds = got.get("seconds")
    return Run(**base, status=status, success=status in SUCCESS, seconds=None if seconds is None else float(seconds),
               message=(answer.message if answer is not None and answer.raw is None else got.get("message", "")),
               raw=raw, **{k: got.get(k) for k in keys})


def run_one(item: Prepared, backend: str, *, time_limit: float, tol: float = DEFAULT_TOL) -> Run:
    """Run ``backend`` on one prepared instance in a worker process of its own."""
    return run_all([item], [backend], time_limit=time_limit, tol=tol)[0]


def run_all(items: Sequence[Prepared], backends: Sequence[str], *, time_limit: float, tol: float = DEFAULT_TOL,
            note: Note | None = None) -> list[Run]:
    """Every backend on every instance (instances in order, backends inner), one ``note`` line per
    instance when all backends have run on it."""
    workers = {b: Worker(b) for b in backends}
    runs: list[Run] = []
    try:
        for i, it in enumerate(items, 1):
            mine = []
            for b in backends:
                skip = it.expected == "not separable" and not certifies_infeasibility(b)
                answer = None if skip else workers[b].solve(it.path, time_limit)
                mine.append(score(it, b, answer, time_limit=time_limit, tol=tol))
            runs += mine
            if note is not None:
                note(f"run {i}/{len(items)} {it.family}/{it.name} ({it.expected}): " + ", ".join(
                    f"{r.backend} {r.status}" + ("" if r.seconds is None else f" {r.seconds:.3g} s") for r in mine))
    finally:
        for w in workers.values():
            w.close()
    return runs


#: Backends run by default, those of them whose solver is installed (:func:`available_backends`).
DEFAULT_BACKENDS = ("structured", "clarabel", "cvxpy", "osqp", "scs", "piqp", "proxqp", "highs")


def available_backends() -> list[str]:
    """The backends of :data:`DEFAULT_BACKENDS` that can run here: the three of the core install, and the
    qpsolvers ones whose solver qpsolvers finds (``ntpcert[bench]``)."""
    try:
        import qpsolvers

        have = set(qpsolvers.available_solvers)
    except ImportError:
        have = set()
    return [b for b in DEFAULT_BACKENDS if b in ("structured", "clarabel", "cvxpy") or b in have]


__all__ = ["DEFAULT_BACKENDS", "DEFAULT_TOL", "GRACE", "Prepared", "Run", "available_backends", "prepare", "raw_status",
           "run_all", "run_one", "score", "settle"]
