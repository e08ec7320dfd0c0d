r"""NTP-SVM backend: any solver of the ``qpsolvers`` package (OSQP, SCS, PIQP, HiGHS, ProxQP, Clarabel, ...).

qpsolvers' form is :math:`\min \tfrac12 x^\top P x + q^\top x` s.t. :math:`Gx \le h`, :math:`Ax = b`, with the
Lagrangian :math:`\tfrac12 x^\top Px + q^\top x + z^\top(Gx - h) + y^\top(Ax - b)`, :math:`z \ge 0`. Here
:math:`P = I`, :math:`q = 0`, :math:`G = -A_{mar}`, :math:`h = -\mathbf 1`, :math:`A = A_{eq}`, :math:`b = 0`,
so stationarity reads
:math:`x = A_{mar}^\top z - A_{eq}^\top y`: the same form as Clarabel's cone multipliers, and the dual of
``math.md`` is ``dual_from_cone_multipliers(system, y, z)``.

Each solver gets tolerances near ``tol`` and, where it has one, a time limit (the options below);
qpsolvers reports no infeasibility status, so a solver that finds nothing raises
:class:`~ntpcert.errors.SolverError`.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from ntpcert.errors import MissingExtraError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.qp import build_qp, dual_from_cone_multipliers
from ntpcert.solve.solution import SVMSolution
from ntpcert.util.extras import require

_BANNER_LOCK = threading.Lock()
_BANNER_DONE: list[bool] = []


def _highs_banner_to_stderr() -> None:
    """HiGHS prints its banner on stdout when the first ``highspy.Highs()`` of a process is built,
    whatever its options; ``--json`` output on stdout must stay one JSON object. So the first
    instance is built once, early, with file descriptor 1 pointed at stderr for the constructor
    alone; later ones print nothing."""
    with _BANNER_LOCK:
        if _BANNER_DONE:
            return
        _BANNER_DONE.append(True)
        import highspy

        try:
            sys.stdout.flush()
            saved = os.dup(1)
        except (OSError, ValueError, AttributeError):  # no real stdout (e.g. captured)
            highspy.Highs()
            return
        try:
            os.dup2(2, 1)
            highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def _accuracy_options(solver: str, tol: float) -> dict:
    """Solver options for an accurate solve with tolerance ``tol`` (absolute; relative ones off)."""
    return {
        "osqp": {"eps_abs": tol, "eps_rel": 0.0, "polish": True, "max_iter": 1_000_000},
        "scs": {"eps_abs": tol, "eps_rel": 0.0, "max_iters": 1_000_000},
        "piqp": {"eps_abs": tol, "eps_rel": 0.0},
        "proxqp": {"eps_abs": tol, "eps_rel": 0.0},
        "clarabel": {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol},
        "highs": {"primal_feasibility_tolerance": tol, "dual_feasibility_tolerance": tol},
    }.get(solver, {})


def _time_limit_options(solver: str, seconds: float) -> dict:
    """The solver's own time-limit option, for the solvers that have one."""
    key = {"osqp": "time_limit", "scs": "time_limit_secs", "clarabel": "time_limit", "highs": "time_limit"}.get(solver)
    return {key: float(seconds)} if key else {}


def solve(system: KeslerSystem, *, solver: str = "osqp", tol: float = 1e-9, time_limit: float | None = None,
          verbose: bool = False, progress: bool = False, solver_options: dict | None = None) -> SVMSolution:
    """Solve the NTP-SVM with ``qpsolvers.solve_problem(..., solver=solver)``.

    Parameters
    ----------
    system : KeslerSystem
    solver : str
        A name in ``qpsolvers.available_solvers``.
    tol : float
        Absolute feasibility/optimality tolerance handed to the solver.
    time_limit : float, optional
        Seconds, for the solvers that take a time limit (OSQP, SCS, Clarabel, HiGHS).
    verbose : bool
        The solver's own log (on stderr).
    progress : bool
        Accepted for the common backend API; qpsolvers reports no progress.
    solver_options : dict, optional
        Further solver options; they override the defaults.
    """
    qpsolvers = require("qpsolvers", "bench", f"the NTP-SVM backend {solver!r}")
    if solver not in qpsolvers.available_solvers:
        raise MissingExtraError(f"the NTP-SVM backend {solver!r} needs the QP solver {solver!r}, which qpsolvers does "
                                f"not find (installed: {', '.join(qpsolvers.available_solvers) or 'none'}): "
                                "pip install 'ntpcert[bench]'")
    t0 = time.perf_counter()
    qp = build_qp(system)
    G = qp.A[qp.n_eq :]  # build_qp stores -A_mar
    h = -np.ones(qp.n_ineq)
    A = qp.A[: qp.n_eq] if qp.n_eq else None
    b = np.zeros(qp.n_eq) if qp.n_eq else None
    problem = qpsolvers.Problem(qp.P, qp.q, G, h, A, b)
    limit = _time_limit_options(solver, time_limit) if time_limit else {}
    opts = {**_accuracy_options(solver, tol), **limit, **(solver_options or {})}
    if solver == "proxqp":
        opts.setdefault("backend", "sparse")
    if solver == "highs":
        _highs_banner_to_stderr()
    try:
        sol = qpsolvers.solve_problem(problem, solver=solver, verbose=verbose, **opts)
    except Exception as err:  # noqa: BLE001 - each solver raises its own types
        raise SolverError(f"qpsolvers/{solver}: {type(err).__name__}: {err}") from err
    if not sol.found or sol.x is None or not np.all(np.isfinite(sol.x)):
        raise SolverError(f"qpsolvers/{solver}: no solution found")
    y = np.zeros(system.n_eq) if sol.y is None else np.asarray(sol.y, dtype=np.float64)
    z = np.zeros(system.n_margin) if sol.z is None else np.asarray(sol.z, dtype=np.float64)
    a = dual_from_cone_multipliers(system, y, z)
    return SVMSolution.from_primal_dual(
        system, np.asarray(sol.x), a, solver=f"qpsolvers/{solver}", status="found",
        seconds=time.perf_counter() - t0,
    )
