"""NTP-SVM backend: cvxpy with any installed QP-capable solver (default Clarabel)."""

from __future__ import annotations

import time

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.qp import dual_from_cone_multipliers
from ntpcert.solve.svm.solution import SVMSolution


def solve(system: KeslerSystem, *, solver: str = "CLARABEL", verbose: bool = False, **solver_options) -> SVMSolution:
    """Model the NTP-SVM in cvxpy and solve it with ``solver``.

    cvxpy's multipliers: ``A_eq x == 0`` has ``nu`` with Lagrangian term :math:`+\\nu^\\top A_{eq}x`, and
    ``A_mar x >= 1`` has :math:`\\lambda \\ge 0` with term :math:`-\\lambda^\\top(A_{mar}x - 1)`, so
    :math:`x = -A_{eq}^\\top\\nu + A_{mar}^\\top\\lambda`, the same form as Clarabel's.
    """
    import cvxpy as cp

    t0 = time.perf_counter()
    x = cp.Variable(system.n_vars)
    cons = []
    if system.n_eq:
        cons.append(system.eq_matrix() @ x == 0)
    if system.n_margin:
        cons.append(system.margin_matrix() @ x >= 1)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(x)), cons)
    try:
        prob.solve(solver=solver, verbose=verbose, **solver_options)
    except cp.error.SolverError as err:
        raise SolverError(f"cvxpy/{solver}: {err}") from err
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
