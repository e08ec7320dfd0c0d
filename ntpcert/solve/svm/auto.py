"""NTP-SVM backend ``auto``, the default of every entry point: the structured solver, and Clarabel's
interior-point method where the structured solver does not certify.

The structured solver (:mod:`ntpcert.solve.structured.solver`) is 100-1000x faster than a generic
QP solver at size, and settles non-separable data with an exactly checked Farkas ray. Its
coordinate ascent converges linearly, though, and on ill-conditioned data (nearly parallel
embeddings, huge ``||W^mm||``) it may need more epochs than are worth waiting for. On a QP small
enough for an interior-point method to take a moment (at most :data:`SMALL_VARS` variables V·d),
``auto`` gives the structured solver :data:`SMALL_EPOCHS` epochs and then solves with Clarabel,
(or :data:`SMALL_SECONDS` seconds, whichever ends first), saying so in ``solver`` and ``info["fallback"]``; a larger QP gets the structured solver with its
full budget, and its error if it has one. Either way the returned pair is checked as every
:class:`~ntpcert.solve.solution.SVMSolution` is. An instance with token multiplicities (a model's merged
vocabulary) falls back to the working-set QP on the token classes (``active-set``), which weighs them, in
place of Clarabel on every token.
"""

from __future__ import annotations

import dataclasses
import time

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution

#: Largest QP (variables V·d) that ``auto`` hands to Clarabel when the structured solver stops.
SMALL_VARS = 5_000

#: Epochs of the structured solver on a small QP before ``auto`` falls back to Clarabel.
SMALL_EPOCHS = 300

#: ... and seconds: on m = 214 contexts 300 epochs took 39 s, longer than Clarabel's whole solve
#: (``benchmarks/bench_auto_fallback.py``). Either bound only hands the QP on; it decides nothing.
SMALL_SECONDS = 3.0


def solve(system: KeslerSystem, *, tol: float | None = None, time_limit: float | None = None, verbose: bool = False,
          progress: bool = False, certificate: str = "exact", separable: bool = False) -> SVMSolution:
    """Solve the NTP-SVM with the structured solver, falling back to Clarabel (see the module doc).

    Parameters
    ----------
    system : KeslerSystem
    tol : float, optional
        The structured solver's certified relative gap (default its ``DEFAULT_TOL``) and Clarabel's
        tolerances.
    time_limit : float, optional
        Seconds for both stages together.
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
        return structured.solve(system, time_limit=time_limit, progress=progress, certificate=certificate, **opts,
                                **hint)
    first = SMALL_SECONDS if time_limit is None else min(SMALL_SECONDS, time_limit)
    try:
        return structured.solve(system, time_limit=first, max_epochs=SMALL_EPOCHS, progress=progress,
                                certificate=certificate, **opts, **hint)
    except InfeasibleError:
        raise
    except SolverError as err:
        why = str(err)
    left = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t0))
    if system.instance.token_multiplicity is not None:
        from ntpcert.solve.structured import working_set as fallback
        name = "active-set"
    else:
        from ntpcert.solve.svm import clarabel_direct as fallback
        name = "clarabel"
    sol = fallback.solve(system, time_limit=left, verbose=verbose, **opts)
    info = {**sol.info, "fallback": f"structured solver stopped ({why}); solved by {name}"}
    return dataclasses.replace(sol, solver=f"auto/{name}", seconds=time.perf_counter() - t0, info=info)
