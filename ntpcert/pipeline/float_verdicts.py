r"""The float pipeline: instance → Kesler rows → {F, W*} and {separability LP, NTP-SVM} → verdicts.

"The dataset admits the entropy bound" means NTP-compatible **and** NTP-separable (Proposition 1).
Each verdict is True, False or None (undetermined within the stated tolerances); the combined
verdict is True when both hold, False when either fails, and None otherwise.
For verdicts checked in exact arithmetic see :mod:`ntpcert.exact`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ntpcert.errors import InfeasibleError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.separability_lp import SeparabilityResult, check_separability
from ntpcert.rows.subspace import CompatibilityResult, Subspace, check_compatibility
from ntpcert.solve.svm import DEFAULT_SOLVER, SVMSolution, solve_svm
from ntpcert.util.logic import and3
from ntpcert.util.progress import Stages




@dataclass(frozen=True, eq=False)
class Report:
    """Verdicts on one instance.

    Attributes
    ----------
    instance : NTPInstance
    subspace : Subspace
    compatible : CompatibilityResult
    separable : SeparabilityResult
    svm : SVMSolution or None
        The NTP-SVM solution when separable and requested.
    svm_error : str or None
        Why the SVM was not solved, when it was not.
    seconds : float
    """

    instance: NTPInstance
    subspace: Subspace
    compatible: CompatibilityResult
    separable: SeparabilityResult
    svm: SVMSolution | None
    svm_error: str | None
    seconds: float

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        out = dict(self.instance.describe())
        out["compatible"] = self.compatible.to_json()
        out["separable"] = self.separable.to_json()
        out["entropy_bound_reachable"] = self.entropy_bound_reachable
        out["entropy_attained_at_finite_W"] = bool(self.instance.support_sizes.min() == self.instance.V) and bool(
            self.compatible.holds
        )
        if self.svm is not None:
            out["svm"] = self.svm.to_json()
            out["W_mm_norm"] = self.svm.norm
        else:
            out["svm"] = None
            if self.svm_error:
                out["svm_error"] = self.svm_error
        out["exact"] = False
        out["seconds"] = self.seconds
        return out


def certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    lp_time_limit: float | None = None,
) -> Report:
    """Run the float pipeline on ``instance``: F and W* (compatibility), the separability LP, and,
    when separable and ``svm`` is true, the NTP-SVM with ``solver``."""
    t0 = time.perf_counter()
    stages = Stages(4 if svm else 3, progress, desc="certify")
    try:
        with stages.stage("Kesler rows"):
            system = KeslerSystem.build(instance)
        with stages.stage("subspace F and W*"):
            subspace = Subspace.build(system)
            comp = check_compatibility(subspace)
        with stages.stage("separability LP"):
            sep = check_separability(system, time_limit=lp_time_limit)
        sol: SVMSolution | None = None
        err: str | None = None
        if svm:
            with stages.stage("NTP-SVM"):
                if sep.holds is False:
                    err = "not separable: the NTP-SVM has no feasible point"
                else:
                    try:
                        sol = solve_svm(system, solver=solver)
                    except InfeasibleError as e:
                        err = str(e)
    finally:
        stages.close()
    return Report(instance, subspace, comp, sep, sol, err, time.perf_counter() - t0)


def compute_limits(instance: NTPInstance, *, solver: str = DEFAULT_SOLVER, progress: bool | None = None) -> Report:
    """Alias of :func:`certify` with the SVM solved: the report carries W* and W^mm."""
    return certify(instance, svm=True, solver=solver, progress=progress)
