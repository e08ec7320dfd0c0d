r"""The float pipeline: instance → Kesler rows → {F, W*} and {separability LP, NTP-SVM} → verdicts.

"The dataset admits the entropy bound" means NTP-compatible **and** NTP-separable (Proposition 1).
Each verdict is True, False or None (undetermined within the stated tolerances); the combined
verdict is True when both hold, False when either fails, and None otherwise.
For verdicts checked in exact arithmetic see :mod:`ntpcert.exact`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.separability_lp import SeparabilityResult, check_separability
from ntpcert.rows.subspace import CompatibilityResult, Subspace, check_compatibility
from ntpcert.solve.svm import DEFAULT_SOLVER, SVMSolution, solve_svm
from ntpcert.pipeline.float_witness import settle_compatibility
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
    stages : dict
        Wall seconds of each stage (``kesler``, ``compatibility``, ``separability``, ``svm``).
    """

    instance: NTPInstance
    subspace: Subspace
    compatible: CompatibilityResult
    separable: SeparabilityResult
    svm: SVMSolution | None
    svm_error: str | None
    seconds: float
    stages: dict = dataclasses.field(default_factory=dict)

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
        out["stages"] = dict(self.stages)
        return out


#: Epochs the structured solver gets to find a Farkas ray once HiGHS reports infeasibility.
RAY_SEARCH_EPOCHS = 1000


def decide_separability(system: KeslerSystem, *, time_limit: float | None = None) -> SeparabilityResult:
    """Separability (6) with a witness: the HiGHS LP's feasible point (margins re-checked), or, when
    HiGHS reports infeasibility, an exactly checked Farkas ray: from the dual LP, else from the
    structured solver's diverging iterates (or that solver's feasible point, if it finds one).
    Anything else is undetermined."""
    sep = check_separability(system, time_limit=time_limit)
    if not sep.lp_infeasible:
        return sep
    from ntpcert.exact.separability import check_separability_exact
    from ntpcert.solve.structured.solver import solve as structured

    lp_ray = check_separability_exact(system.instance, None, try_ray=True, time_limit=time_limit)
    if lp_ray.holds is False:
        return dataclasses.replace(sep, holds=False, W=None, ray=lp_ray.ray,
                                   by=f"Farkas ray of the dual LP with {len(lp_ray.ray)} non-zero entries, "
                                      "verified exactly")

    try:
        sol = structured(system, certificate="float", time_limit=time_limit, max_epochs=RAY_SEARCH_EPOCHS)
    except InfeasibleError as e:
        return _from_infeasible(sep, e)
    except SolverError as e:
        return dataclasses.replace(sep, by=f"HiGHS reports the LP infeasible, and the structured solver found no "
                                           f"Farkas ray ({e}); run 'ntpcert certify DATA --exact'")
    return _from_svm_point(sep, sol, system, "HiGHS reported the LP infeasible, but")


def _from_infeasible(sep: SeparabilityResult, err: InfeasibleError) -> SeparabilityResult:
    """False with an exactly checked Farkas ray carried by ``err``; otherwise undetermined."""
    cert = getattr(err, "certificate", None)
    if cert is not None and getattr(cert, "exact", False):
        return dataclasses.replace(sep, holds=False, W=None, ray=cert.entries,
                                   by=f"Farkas ray with {cert.support} non-zero entries, verified exactly")
    return dataclasses.replace(sep, holds=None, by=f"a solver reports infeasibility ({err}), but no Farkas ray was "
                                                   "checked; run 'ntpcert certify DATA --exact'")


def _from_svm_point(sep: SeparabilityResult, sol: SVMSolution, system: KeslerSystem,
                    prefix: str = "") -> SeparabilityResult:
    """True when the NTP-SVM point passes the LP's own re-check (margins >= 1 - SEP_TOL, small (6a))."""
    from ntpcert.solve.separability_lp import SEP_TOL

    inst = system.instance
    eqv = float(np.abs(system.apply_eq(sol.W)).max()) if system.n_eq else 0.0
    scale = max(1.0, float(np.abs(sol.W).max()) * float(np.abs(inst.embeddings).sum(axis=1).max()))
    margin = float(sol.min_margin)
    if margin >= 1.0 - SEP_TOL and eqv <= SEP_TOL * scale:
        lead = f"{prefix} the " if prefix else "the "
        return dataclasses.replace(sep, holds=True, W=sol.W, min_margin=margin, eq_violation=eqv,
                                   by=f"{lead}NTP-SVM point ({sol.solver}) has smallest margin {margin:.6g} >= "
                                      f"1 - {SEP_TOL:g} and (6a) violation {eqv:.2e}")
    return sep


def certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    lp_time_limit: float | None = None,
) -> Report:
    """Run the float pipeline on ``instance``: F and W* (compatibility), separability, and, unless
    ``svm`` is false or the data are not separable, the NTP-SVM with ``solver``.

    Every definite verdict carries its witness in ``by`` (see :mod:`ntpcert.pipeline.float_witness`):
    compatibility from a certified full row rank or exact left null vectors, separability from a
    re-checked feasible point or an exactly checked Farkas ray. An NTP-SVM that fails or cannot be
    certified is reported in ``svm_error``; the verdicts stand.
    """
    t0 = time.perf_counter()
    stages = Stages(4 if svm else 3, progress, desc="certify")
    try:
        with stages.stage("Kesler rows", key="kesler"):
            system = KeslerSystem.build(instance)
        with stages.stage("subspace F and W*", key="compatibility"):
            subspace = Subspace.build(system)
            comp = settle_compatibility(subspace, check_compatibility(subspace))
        with stages.stage("separability", key="separability"):
            sep = decide_separability(system, time_limit=lp_time_limit)
        sol: SVMSolution | None = None
        err: str | None = None
        if svm:
            with stages.stage("NTP-SVM", key="svm"):
                if sep.holds is False:
                    err = "not separable: the NTP-SVM has no feasible point"
                else:
                    try:
                        sol = solve_svm(system, solver=solver)
                    except InfeasibleError as e:
                        sep = _from_infeasible(sep, e) if sep.holds is None else sep
                        err = (f"not separable: {e}" if sep.holds is False
                               else f"the NTP-SVM solver reports infeasibility ({e}); not checked")
                    except SolverError as e:
                        err = f"NTP-SVM not certified: {e}"
                    if sol is not None and sep.holds is None:
                        sep = _from_svm_point(sep, sol, system)
    finally:
        stages.close()
    return Report(instance, subspace, comp, sep, sol, err, time.perf_counter() - t0, dict(stages.seconds))


def compute_limits(instance: NTPInstance, *, solver: str = DEFAULT_SOLVER, progress: bool | None = None) -> Report:
    """Alias of :func:`certify` with the SVM solved: the report carries W* and W^mm."""
    return certify(instance, svm=True, solver=solver, progress=progress)
