"""NTP-SVM backend ``auto``, the default of every entry point: the structured solver, and Clarabel's
interior-point method where the structured solver does not certify.

The structured solver (:mod:`ntpcert.solve.structured.solver`) is 100-1000x faster than a generic
QP solver at size, and settles non-separable data with an exactly checked Farkas ray. Its
coordinate ascent converges linearly, though, and on ill-conditioned data (nearly parallel
embeddings, huge ``||W^mm||``) it may need more epochs than are worth waiting for. On a QP small
enough for an interior-point method to take a moment (at most :data:`SMALL_VARS` variables V·d),
``auto`` gives the structured solver :data:`SMALL_EPOCHS` epochs, fewer where :data:`SMALL_WORK`
(:data:`WIDE_WORK` past :data:`SMALL_MARGINS` margin rows; the work and the cap both grow with the rows past
:data:`WIDE_MARGINS`) buys fewer (:func:`small_epochs`, a function of the size alone: which backend answers never
depends on the machine's load), and then solves with Clarabel, saying so in ``solver`` and ``info["fallback"]``; a
larger QP gets the structured solver with its full budget (``max_epochs``), and its error if it has one.
Either way the returned pair is checked as every :class:`~ntpcert.solve.solution.SVMSolution` is.
An instance with token multiplicities (a model's merged vocabulary) falls back to the working-set QP on
the token classes (``active-set``), which weighs them, in place of Clarabel on every token; so does a QP of at
most :data:`~ntpcert.solve.structured.working_set.DENSE_MAX_VARS` variables, whose working set DAQP solves densely
(2.7-22x Clarabel on V = 10, d = 64, m = 500-2,000, ``benchmarks/results/active-set-dense.md``).
"""

from __future__ import annotations

import dataclasses
import time

from ntpcert.errors import InfeasibleError, SolverError, TimeLimitReached
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution

#: Largest QP (variables V·d) that ``auto`` hands to Clarabel when the structured solver stops.
SMALL_VARS = 5_000

#: Epochs of the structured solver on a small QP before ``auto`` falls back to Clarabel, at most.
SMALL_EPOCHS = 300

#: ... and its budget of work (units of :mod:`ntpcert.solve.structured.budget`: an epoch costs
#: m·(C·min(m, d) + 50,000)). It replaces a limit of 3 s (on m = 214 contexts 300 epochs had taken 39 s,
#: longer than Clarabel's whole solve, ``benchmarks/bench_auto_fallback.py``). The small QP of the
#: default suite that needs the most work (m = 139, d = 24, C = 5: 7.0e6 units an epoch) certifies after
#: 60 epochs, 4.2e8 units, and gets 143 (2.4x); ``paper`` (55 epochs) keeps all 300; the mid-sized
#: benchmark instances (m = 127 and 214) get 153 and 90. The bound only hands the QP on; it decides nothing.
SMALL_WORK = 1_000_000_000


#: A small QP with more margin rows (out-of-support pairs) than this gets :data:`WIDE_WORK` in place of
#: :data:`SMALL_WORK`: where d < m Clarabel's cost grows with the rows while the structured solver's
#: epochs stay cheap (teacher data, V = 10, m = 500, d = 64, 4,500 rows: Clarabel 3.9 s, the structured
#: solver 1.7 s in 150 epochs, where SMALL_WORK bought 39; ``benchmarks/bench_d_below_m.py``).
SMALL_MARGINS = 2_000
WIDE_WORK = 10_000_000_000
#: Past this many margin rows :data:`WIDE_WORK` and the cap of :data:`SMALL_EPOCHS` grow in proportion to them,
#: as Clarabel's solve does at a fixed d (teacher data, d = 64: 4,500 rows 3.9 s, 98,000 rows 100 s, 196,000 rows
#: 268 s), where the structured solver needed 240 epochs (V = 50, m = 2,000: 7 s with its certificate; WIDE_WORK
#: alone bought 94) and 810 (m = 4,000: 34 s; 300 epochs were the cap).
WIDE_MARGINS = 4_500


def small_epochs(system: KeslerSystem) -> int:
    """The structured solver's epochs on a small QP before the fallback (module doc)."""
    from ntpcert.solve.structured.budget import epochs_within

    q = system.n_margin
    grow = max(1.0, q / WIDE_MARGINS)
    work = WIDE_WORK * grow if q > SMALL_MARGINS else SMALL_WORK
    return epochs_within(system, int(work), int(SMALL_EPOCHS * grow))


def solve(system: KeslerSystem, *, tol: float | None = None, time_limit: float | None = None, verbose: bool = False,
          progress: bool = False, certificate: str = "exact", separable: bool = False,
          max_epochs: int | None = None) -> SVMSolution:
    """Solve the NTP-SVM with the structured solver, falling back to Clarabel (see the module doc).

    Parameters
    ----------
    system : KeslerSystem
    tol : float, optional
        The structured solver's certified relative gap (default its ``DEFAULT_TOL``) and Clarabel's
        tolerances.
    time_limit : float, optional
        A user's cap in seconds for both stages together, off by default
        (:class:`~ntpcert.errors.TimeLimitReached` when reached; no fallback then).
    max_epochs : int, optional
        The structured solver's budget on a QP larger than :data:`SMALL_VARS` (default its own); a small
        QP's first try stays :func:`small_epochs`, and Clarabel's is its iteration cap.
    verbose, progress : bool
        Clarabel's log; the structured solver's progress bar.
    certificate : {"exact", "float"}
        How the structured solver certifies its gap (its ``certificate`` option): an exact bound, or
        the float gap recomputed from the primal/dual pair, as every other backend reports it.
    separable : bool
        The data are known to be NTP-separable: the structured solver searches no Farkas ray.
    """
    from ntpcert.solve.structured import solver as structured

    t0 = time.perf_counter()
    opts = {} if tol is None else {"tol": tol}
    hint = {"separable": True} if separable else {}
    if system.n_vars > SMALL_VARS:
        budget = {} if max_epochs is None else {"max_epochs": int(max_epochs)}
        return structured.solve(system, time_limit=time_limit, progress=progress, certificate=certificate, **opts,
                                **hint, **budget)
    try:
        return structured.solve(system, time_limit=time_limit, max_epochs=small_epochs(system), progress=progress,
                                certificate=certificate, **opts, **hint)
    except (InfeasibleError, TimeLimitReached):
        raise
    except SolverError as err:
        why, start = str(err), getattr(err, "active", None)
    left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t0))
    from ntpcert.solve.structured import working_set
    from ntpcert.solve.svm.scaled import solve_scaled

    if system.instance.token_multiplicity is not None or system.n_vars <= working_set.DENSE_MAX_VARS:
        fallback, name = working_set, "active-set"  # the dense working set: 2.7-22x Clarabel at V·d <= 1,000
    else:
        from ntpcert.solve.svm import clarabel_direct as fallback
        name = "clarabel"
    try:
        ws_start = {} if start is None or name != "active-set" else {"start": start}
        sol = solve_scaled(fallback.solve, system, time_limit=left, verbose=verbose, **opts, **ws_start)
    except SolverError as err:
        if name != "active-set" or system.instance.token_multiplicity is not None:
            raise
        from ntpcert.solve.svm import clarabel_direct as fallback
        why, name = f"{why}; the dense working set stopped ({err})", "clarabel"
        left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t0))
        sol = solve_scaled(fallback.solve, system, time_limit=left, verbose=verbose, **opts)
    info = {**sol.info, "fallback": f"structured solver stopped ({why}); solved by {name}"}
    return dataclasses.replace(sol, solver=f"auto/{name}", seconds=time.perf_counter() - t0, info=info)
