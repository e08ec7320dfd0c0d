r"""Budgets of work and a user's wall-clock cap: the two ways an engine may stop short, in one vocabulary.

A verdict never depends on wall-clock time or on the machine's load. Every engine's default bound is a
**budget of work**, counted in the engine's own units (epochs of the structured solver, HiGHS
iterations, pairs of tokens, sub-problems decided, Newton steps): the same input stops at the same point
on a quiet and on a loaded machine, and an engine that spends its budget leaves the verdict
undetermined with ``budget of N <units> spent`` and what would settle it (:func:`budget_text`).

A **user's cap** in seconds (``time_limit=`` in the API, ``--time-limit`` on the command line) stays
available and is off by default. Reaching it ends the run as undetermined with
``time limit of X s reached (a user's cap)`` (:func:`cap_text`), so that a reader knows the verdict is
one of this run on this machine, not of the data. docs/undetermined.md lists every budget and size
limit in one table.

HiGHS (through :func:`scipy.optimize.linprog`) counts its work in iterations: scipy's ``maxiter`` sets
both HiGHS' ``simplex_iteration_limit`` and its ``ipm_iteration_limit``; :func:`highs_options` builds the
options and :func:`highs_stop` words a run that stopped at either bound.
"""

from __future__ import annotations

import time
from typing import Any

from ntpcert.util.validate import check_number

#: HiGHS iterations an LP may spend by default (:func:`highs_budget`): this many per row and column of its
#: constraint matrix, and never fewer than :data:`HIGHS_MIN_ITERATIONS`. Measured over the 6,091 LPs of the
#: default suite: at most 1.6 iterations per row and column, so 20 leaves 12x headroom. Before, these LPs
#: had no bound at all unless a caller gave seconds.
HIGHS_ITERATIONS_PER_DIMENSION = 20
#: ... and the floor of that budget (the most iterations an LP of the default suite took: 10,151, the
#: split LP of 2,196 x 86,864 in the explain docs' sample, which has its own budget).
HIGHS_MIN_ITERATIONS = 100_000


def highs_budget(rows: int, cols: int) -> int:
    """The default iteration budget of a HiGHS LP with ``rows`` constraints and ``cols`` variables
    (:data:`HIGHS_ITERATIONS_PER_DIMENSION` per row and column, at least :data:`HIGHS_MIN_ITERATIONS`)."""
    return max(HIGHS_MIN_ITERATIONS, HIGHS_ITERATIONS_PER_DIMENSION * (int(rows) + int(cols)))


def budget_text(spent: int, units: str, settle: str = "") -> str:
    """``budget of 2,000 epochs spent``, then ``; `` and ``settle`` (what would settle it) when given."""
    text = f"budget of {int(spent):,} {units} spent"
    return f"{text}; {settle}" if settle else text


def stop_note(deadline: Any, used: int, budget: int, units: str, unfinished: str, option: str) -> str:
    """Why a loop of decisions stops now, or "": a user's cap reached (``deadline``, before ``unfinished``),
    or its budget of work spent (``used`` of ``budget`` ``units``; a larger ``option`` may settle it)."""
    if deadline.passed():
        return f"{deadline.text()} before {unfinished}"
    if used >= budget:
        return budget_text(budget, units, f"not {unfinished}; a larger {option} may settle it")
    return ""


def cap_text(seconds: float) -> str:
    """``time limit of 5 s reached (a user's cap)``."""
    return f"time limit of {float(seconds):g} s reached (a user's cap)"


def highs_options(max_iterations: int, time_limit: float | None = None, **extra: Any) -> dict:
    """``linprog`` options for HiGHS: presolve, the iteration budget and, when given, a user's cap."""
    options = {"presolve": True, "maxiter": int(max_iterations), **extra}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    return options


def highs_stop(res: Any, max_iterations: int, time_limit: float | None, settle: str = "") -> str | None:
    """The words for a HiGHS run that stopped at its iteration budget or at the user's cap (scipy's status
    1); None for any other outcome."""
    if getattr(res, "status", None) != 1:
        return None
    if time_limit is not None and "time" in str(getattr(res, "message", "")).lower():
        return cap_text(time_limit)
    return budget_text(max_iterations, "HiGHS iterations", settle)


class Deadline:
    """A user's cap as a deadline that starts now; ``Deadline(None)`` (the default everywhere) never
    passes.

    >>> Deadline(None).passed(), Deadline(None).left()
    (False, None)
    """

    def __init__(self, seconds: float | None) -> None:
        check_number("time_limit", seconds, minimum=0, exclusive_minimum=True, optional=True)
        self.seconds = None if seconds is None else float(seconds)
        self.start = time.perf_counter()

    def left(self) -> float | None:
        """Seconds left (at least a millisecond, so that a solver given it still starts), or None."""
        if self.seconds is None:
            return None
        return max(1e-3, self.seconds - (time.perf_counter() - self.start))

    def passed(self) -> bool:
        return self.seconds is not None and time.perf_counter() - self.start > self.seconds

    def text(self) -> str:
        """:func:`cap_text` of the cap."""
        return cap_text(self.seconds if self.seconds is not None else float("inf"))


__all__ = ["Deadline", "HIGHS_ITERATIONS_PER_DIMENSION", "HIGHS_MIN_ITERATIONS", "budget_text", "cap_text", "stop_note",
           "highs_budget", "highs_options", "highs_stop"]
