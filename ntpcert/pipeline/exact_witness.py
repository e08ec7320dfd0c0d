r"""Exact verdicts from scratch: the whole-system exact test of (4), and an exact witness of (6) from a
float candidate or the HiGHS Farkas LP.

:func:`compatibility_exact` decides (4) by the exact left null space of :math:`A_{eq}`
(:func:`ntpcert.exact.compatibility.exact_null_space`): a basis vector with :math:`y^\top E \ne 0`
refutes it, and a basis with every :math:`y^\top E = 0` proves it. :func:`separability_exact` repairs a
float point exactly (:func:`ntpcert.exact.separability.exact_feasible_point`) or makes a Farkas ray of
the HiGHS LP exact (:func:`ntpcert.exact.separability.farkas_ray_lp`); neither: undetermined.
"""

from __future__ import annotations

import numpy as np

from ntpcert.exact.compatibility import exact_null_space
from ntpcert.exact.separability import farkas_ray_lp
from ntpcert.exact.svm_gap import DEFAULT_BITS, ExactSVMBounder
from ntpcert.instance import NTPInstance
from ntpcert.verdict import FarkasRay, FeasiblePoint, NullSpaceBasis, Verdict, ViolatingNullVector


def compatibility_exact(instance: NTPInstance) -> Verdict:
    """(4) decided exactly on the whole system (module doc); engine ``exact-null-space``."""
    ns = exact_null_space(instance)
    if ns.violating is not None:
        return Verdict(False, ViolatingNullVector({k: int(v) for k, v in ns.violating.items()}, "exact-null-space",
                                                  f"exact: null vector y with y^T b != 0 (rank A_eq = {ns.rank})",
                                                  rank=ns.rank))
    return Verdict(True, NullSpaceBasis(tuple({k: int(v) for k, v in y.items()} for y in ns.null_basis), ns.rank, None,
                                        "exact-null-space", f"exact: null(A_eq^T) has dimension {ns.null_dim}, "
                                        "every y^T E = 0"))


def separability_exact(instance: NTPInstance, candidate: np.ndarray | None, *, try_ray: bool = True,
                       bits: int = DEFAULT_BITS, time_limit: float | None = None,
                       bounder: ExactSVMBounder | None = None) -> Verdict:
    """(6) with an exact witness: ``candidate`` (shape (V, d), a float point believed feasible, or None)
    repaired exactly, else, with ``try_ray``, a Farkas ray of the HiGHS LP made exact (within its default
    budget of HiGHS iterations, :func:`ntpcert.util.budget.highs_budget`); else undetermined. ``time_limit``
    is a user's cap in seconds on that LP, off by default. ``bounder``: the instance's exact
    precomputation, shared with other calls."""
    notes = []
    if candidate is not None:
        made = Verdict(True, FeasiblePoint(candidate, "structured-point", "a float point")).exact(
            instance, bits=bits, bounder=bounder)
        if made.holds:
            return made
        notes.append(made.reason)
    if try_ray:
        ray, why = farkas_ray_lp(instance, time_limit=time_limit)
        if ray is not None:
            return Verdict(False, FarkasRay(ray, "highs-farkas", f"exact Farkas ray with {len(ray)} nonzeros"))
        notes.append(why)
    return Verdict.undetermined("; ".join(notes) or "nothing to check")


__all__ = ["compatibility_exact", "separability_exact"]
