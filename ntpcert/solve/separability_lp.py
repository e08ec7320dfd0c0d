r"""NTP-separability (6) as a linear-programming feasibility problem, solved in floating point.

Find :math:`W` with :math:`A_{eq}\,\mathrm{vec}(W) = 0` (6a) and :math:`A_{mar}\,\mathrm{vec}(W) \ge 1` (6b).
The LP goes to HiGHS through :func:`scipy.optimize.linprog`. A reported feasible point is re-checked
here (:func:`ntpcert.solve.point_check.check_point`): it counts only when its margins clear
``1 - SEP_TOL`` by more than their rounding-error bound and its (6a) residuals are within theirs, each
relative to its own context's scale, or when it is repaired exactly onto F-perp; otherwise the verdict
is undetermined. HiGHS reporting
infeasibility is **not** a verdict (ill-conditioned data fool it): the result is undetermined with
``lp_infeasible`` set, and :func:`ntpcert.pipeline.decide.decide_separability` looks for an
exactly checked Farkas ray. ``ntpcert certify --exact`` turns the answer into a certificate checked
in rational arithmetic. HiGHS runs through :func:`ntpcert.util.interrupt.interruptible` (in a
forked child process on Linux when the LP is large), so that Ctrl-C stops it within a fraction of a
second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.point_check import check_point  # one tolerance for every float point
from ntpcert.util.budget import highs_budget, highs_options, highs_stop
from ntpcert.util.interrupt import interruptible

#: HiGHS methods tried in turn until one answers "feasible" or "infeasible".
LP_METHODS = ("highs", "highs-ipm")

#: The largest LP handed to HiGHS, in non-zeros of its constraint matrix (at most 2d per row, r + q rows;
#: building it takes about 40 bytes a non-zero, 2 GB here). A larger LP is not built: the result says it
#: is too large to try, decided from m, V, d and the supports alone, before anything is allocated.
LP_MAX_NONZEROS = 50_000_000


@dataclass(frozen=True)
class LPResult:
    """What the HiGHS separability LP gave (not a verdict: :mod:`ntpcert.pipeline.decide` makes one).

    Attributes
    ----------
    feasible : bool
        A point was found and passed the re-check (:func:`ntpcert.solve.point_check.check_point`).
    W : ndarray of shape (V, d) or None
        The point found, when there is one.
    min_margin : float or None
        :math:`\\min A_{mar}\\mathrm{vec}(W)` of that point.
    eq_violation : float or None
        :math:`\\|A_{eq}\\mathrm{vec}(W)\\|_\\infty` of that point.
    status : str
        HiGHS' message.
    seconds : float
    lp_infeasible : bool
        HiGHS reported the LP infeasible (a hint, not a witness).
    text : str
        The outcome in words.
    """

    feasible: bool
    W: np.ndarray | None
    min_margin: float | None
    eq_violation: float | None
    status: str
    seconds: float
    lp_infeasible: bool = False
    text: str = ""


def check_separability(system: KeslerSystem, *, time_limit: float | None = None,
                       max_iterations: int | None = None) -> LPResult:
    """The separability LP (6) in floating point with HiGHS (see the module doc for the acceptance test).

    ``max_iterations`` is the budget of HiGHS iterations of each method tried (default
    :func:`ntpcert.util.budget.highs_budget` of the LP's size); ``time_limit`` a user's cap in seconds, off
    by default. Either one stopping HiGHS leaves the result unsettled, its text naming which."""
    from scipy.optimize import linprog

    inst = system.instance
    t0 = time.perf_counter()
    if system.n_margin == 0:
        W = np.zeros((inst.V, inst.d))
        return LPResult(True, W, None, 0.0, "no off-support tokens: (6b) is vacuous", 0.0,
                        text="no off-support tokens: (6b) is vacuous")
    nnz = 2 * inst.d * (system.n_eq + system.n_margin)
    if nnz > LP_MAX_NONZEROS:
        why = (f"the separability LP is too large to try here: {system.n_eq + system.n_margin} rows of up to "
               f"2d = {2 * inst.d} non-zeros ({nnz} in all), more than LP_MAX_NONZEROS = {LP_MAX_NONZEROS}")
        return LPResult(False, None, None, None, why, 0.0, text=why)
    A_eq = system.eq_matrix()
    A_mar = system.margin_matrix()
    n = system.n_vars
    budget = highs_budget(A_eq.shape[0] + A_mar.shape[0], n) if max_iterations is None else int(max_iterations)
    options = highs_options(budget, time_limit)
    # off the main thread, so that Ctrl-C stops HiGHS at once (ntpcert.util.interrupt)
    solve = interruptible(linprog, size=A_eq.nnz + A_mar.nnz)
    # HiGHS' default (dual simplex) sometimes ends with status "unknown" near the separability
    # threshold; its interior-point method then usually settles the question.
    for method in LP_METHODS:
        try:
            res = solve(
                c=np.zeros(n),
                A_ub=-A_mar,
                b_ub=-np.ones(system.n_margin),
                A_eq=A_eq if A_eq.shape[0] else None,
                b_eq=np.zeros(A_eq.shape[0]) if A_eq.shape[0] else None,
                bounds=(None, None),
                method=method,
                options=options,
            )
        except (ValueError, MemoryError) as err:
            raise SolverError(f"separability LP: HiGHS failed ({err})") from err
        if res.status in (0, 2):
            break
    seconds = time.perf_counter() - t0
    if res.status == 2:
        return LPResult(False, None, None, None, str(res.message), seconds, lp_infeasible=True,
                        text="HiGHS reports the LP infeasible; no Farkas ray checked yet")
    if res.status != 0 or res.x is None:
        stop = highs_stop(res, budget, time_limit, "a larger max_iterations may settle it")
        return LPResult(False, None, None, None, str(res.message), seconds,
                        text=f"HiGHS did not settle the LP ({stop or res.message})")
    W = np.asarray(res.x, dtype=np.float64).reshape(inst.V, inst.d)
    chk = check_point(system, W)
    text = (f"feasible LP point: {chk.text}" if chk.ok else f"the LP point fails the re-check: {chk.text}")
    return LPResult(chk.ok, W, chk.min_margin, chk.eq_violation, str(res.message), seconds, text=text)
