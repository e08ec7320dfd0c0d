"""NTP-SVM backend: cvxpy with any installed QP-capable solver (default Clarabel)."""

from __future__ import annotations

import time

import numpy as np

from ntpcert.errors import InfeasibleError, InputError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.qp import dual_from_cone_multipliers
from ntpcert.solve.solution import SVMSolution


#: cvxpy solver name -> its options for tolerance ``tol`` (the solvers ``tol`` is mapped for).
TOLERANCE_OPTIONS = {
    "CLARABEL": lambda tol: {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol},
    "OSQP": lambda tol: {"eps_abs": tol, "eps_rel": 0.0},
    "SCS": lambda tol: {"eps_abs": tol, "eps_rel": 0.0},
    "ECOS": lambda tol: {"abstol": tol, "reltol": tol, "feastol": tol},
    "PIQP": lambda tol: {"eps_abs": tol, "eps_rel": 0.0},
}

#: cvxpy solver name -> its time-limit option.
TIME_LIMIT_OPTIONS = {"CLARABEL": "time_limit", "OSQP": "time_limit", "SCS": "time_limit_secs"}


def solve(system: KeslerSystem, *, solver: str = "CLARABEL", tol: float | None = None, time_limit: float | None = None,
          verbose: bool = False, progress: bool = False, solver_options: dict | None = None) -> SVMSolution:
    """Model the NTP-SVM in cvxpy and solve it with ``solver``.

    ``tol`` and ``time_limit`` are translated into the solver's own options for the solvers in
    :data:`TOLERANCE_OPTIONS` and :data:`TIME_LIMIT_OPTIONS` (an :class:`~ntpcert.errors.InputError`
    for the others); ``solver_options`` go to ``Problem.solve`` unchanged and override them.
    ``progress`` is accepted for the common backend API (cvxpy reports with ``verbose``).

    cvxpy's multipliers: ``A_eq x == 0`` has ``nu`` with Lagrangian term :math:`+\\nu^\\top A_{eq}x`, and
    ``A_mar x >= 1`` has :math:`\\lambda \\ge 0` with term :math:`-\\lambda^\\top(A_{mar}x - 1)`, so
    :math:`x = -A_{eq}^\\top\\nu + A_{mar}^\\top\\lambda`, the same form as Clarabel's.
    """
    import cvxpy as cp

    name = solver.upper()
    if name not in cp.installed_solvers():
        raise InputError(f"solver: cvxpy:{solver} is not an installed cvxpy solver "
                         f"(installed: {', '.join(cp.installed_solvers())})")
    options: dict = {}
    if tol is not None:
        if name not in TOLERANCE_OPTIONS:
            raise InputError(f"tol: backend cvxpy:{solver} has no tolerance mapping (known for "
                             f"{', '.join(TOLERANCE_OPTIONS)}); pass solver_options instead")
        options.update(TOLERANCE_OPTIONS[name](float(tol)))
    if time_limit is not None:
        if name not in TIME_LIMIT_OPTIONS:
            raise InputError(f"time_limit: backend cvxpy:{solver} has no time-limit option here "
                             f"(known for {', '.join(TIME_LIMIT_OPTIONS)})")
        options[TIME_LIMIT_OPTIONS[name]] = float(time_limit)
    options.update(solver_options or {})
    solver = name
    t0 = time.perf_counter()
    x = cp.Variable(system.n_vars)
    cons = []
    if system.n_eq:
        cons.append(system.eq_matrix() @ x == 0)
    if system.n_margin:
        cons.append(system.margin_matrix() @ x >= 1)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(x)), cons)
    try:
        prob.solve(solver=solver, verbose=verbose, **options)
    except cp.error.SolverError as err:
        raise SolverError(f"cvxpy/{solver}: {err}") from err
    except TypeError as err:  # an option the solver does not take
        raise InputError(f"solver_options: cvxpy/{solver} refused them ({err})") from err
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError(f"cvxpy/{solver}: {prob.status} (the data are not NTP-separable)")
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise SolverError(f"cvxpy/{solver}: status {prob.status}")
    z_eq = np.asarray(cons[0].dual_value) if system.n_eq else np.zeros(0)
    z_mar = np.asarray(cons[-1].dual_value) if system.n_margin else np.zeros(0)
    a = dual_from_cone_multipliers(system, z_eq, z_mar)
    return SVMSolution.from_primal_dual(
        system, np.asarray(x.value), a, solver=f"cvxpy/{solver.lower()}", status=prob.status,
        seconds=time.perf_counter() - t0,
    )
