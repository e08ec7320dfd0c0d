"""NTP-SVM backend: Clarabel's direct sparse API (no modelling layer).

The KKT systems are factored with faer's supernodal LDL (:data:`KKT_METHOD`) where the installed
Clarabel has it, else with its default QDLDL. The margin rows of the NTP-SVM all touch the V·d
columns of W, so eliminating them fills that block in densely: QDLDL, column by column, took 7-11
times as long as faer on mid-sized instances (m = 214, V = 55, d = 35: ``benchmarks/bench_auto_fallback.py``).
"""

from __future__ import annotations

import time

import numpy as np

from ntpcert.errors import BudgetSpent, InfeasibleError, SolverError, TimeLimitReached
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.qp import build_qp, dual_from_cone_multipliers
from ntpcert.solve.solution import SVMSolution
from ntpcert.util.budget import budget_text, cap_text

#: Clarabel's ``direct_solve_method``, tried first; ``None`` keeps Clarabel's default.
KKT_METHOD: str | None = "faer"


def solve(system: KeslerSystem, *, tol: float = 1e-9, time_limit: float | None = None, verbose: bool = False,
          progress: bool = False) -> SVMSolution:
    """Solve the NTP-SVM with Clarabel's interior-point method.

    ``tol`` sets Clarabel's absolute/relative gap and feasibility tolerances; ``progress`` is
    accepted for the common backend API (Clarabel reports per iteration with ``verbose``). Its budget of
    work is Clarabel's iteration cap (``max_iter``, 200 by default): :class:`~ntpcert.errors.BudgetSpent`
    when spent; ``time_limit`` is a user's cap in seconds, off by default
    (:class:`~ntpcert.errors.TimeLimitReached`). Raises :class:`InfeasibleError` when Clarabel reports
    primal infeasibility.
    """
    import clarabel

    t0 = time.perf_counter()
    qp = build_qp(system)
    settings = clarabel.DefaultSettings()
    settings.verbose = verbose
    settings.tol_gap_abs = tol
    settings.tol_gap_rel = tol
    settings.tol_feas = tol
    if time_limit is not None:
        settings.time_limit = float(time_limit)
    cones = []
    if qp.n_eq:
        cones.append(clarabel.ZeroConeT(qp.n_eq))
    if qp.n_ineq:
        cones.append(clarabel.NonnegativeConeT(qp.n_ineq))
    try:
        solver = _solver(clarabel, qp, cones, settings)
        sol = solver.solve()
    except BaseException as err:  # the Rust extension raises PanicException (a BaseException)
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        raise SolverError(f"clarabel: {err}") from err
    status = str(sol.status)
    if "PrimalInfeasible" in status:
        raise InfeasibleError(f"clarabel: {status} (the data are not NTP-separable)")
    if status == "MaxTime" and time_limit is not None:
        raise TimeLimitReached(f"clarabel: {cap_text(time_limit)} after {sol.iterations} iterations",
                               seconds=float(time_limit))
    if status == "MaxIterations":
        raise BudgetSpent(f"clarabel: {budget_text(settings.max_iter, 'interior-point iterations')}",
                          spent=int(settings.max_iter), units="interior-point iterations")
    if status not in ("Solved", "AlmostSolved"):
        raise SolverError(f"clarabel: stopped with status {status} after {sol.iterations} iterations")
    x = np.asarray(sol.x)
    z = np.asarray(sol.z)
    a = dual_from_cone_multipliers(system, z[: qp.n_eq], z[qp.n_eq :])
    return SVMSolution.from_primal_dual(
        system, x, a, solver="clarabel", status=status, seconds=time.perf_counter() - t0, iterations=int(sol.iterations)
    )


def _solver(clarabel, qp, cones, settings):
    """``clarabel.DefaultSolver`` with :data:`KKT_METHOD`, or with Clarabel's default where it has none."""
    if KKT_METHOD is not None:
        settings.direct_solve_method = KKT_METHOD
        try:
            return clarabel.DefaultSolver(qp.P, qp.q, qp.A, qp.b, cones, settings)
        except BaseException as err:  # an older Clarabel without faer: the default solver
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            settings.direct_solve_method = clarabel.DefaultSettings().direct_solve_method
    return clarabel.DefaultSolver(qp.P, qp.q, qp.A, qp.b, cones, settings)
