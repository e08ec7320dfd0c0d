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

from ntpcert.util.summary import short_str
from ntpcert.errors import InfeasibleError, InputError, SolverError
from ntpcert.exact.rank_witness import RankWitness
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import (
    DEFAULT_SEPARABILITY_SOLVER,
    CompatibilityDecision,
    SeparabilityDecision,
    decide_compatibility,
    lemma1,
    pair_separability,
)
from ntpcert.pipeline.decide import decide_separability as _decide_sep
from ntpcert.pipeline.float_witness import settle_compatibility
from ntpcert.pipeline.lemma1 import lemma1_json
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.onehot import onehot_compatibility
from ntpcert.rows.subspace import (CompatibilityResult, Subspace, check_compatibility, dense_preferred,
                                   proved_without_fit, refuted_without_fit, unsettled_without_fit)
from ntpcert.solve.separability_lp import SeparabilityResult
from ntpcert.solve.svm import DEFAULT_SOLVER, SVMSolution, solve_svm
from ntpcert.util.logic import and3
from ntpcert.util.progress import Stages


#: Seconds the NTP-SVM of :func:`certify` may take (the verdicts do not depend on it): past them it is
#: reported in ``svm_error``, not solved. Mid-sized instances on which ``auto`` fell back to Clarabel
#: made float certify take minutes (``benchmarks/bench_auto_fallback.py``). ``ntpcert svm`` and
#: ``ntpcert limits`` have no such bound.
SVM_TIME_LIMIT = 15.0

#: LSMR iterations for the least-squares W* when (4) is already refuted by an exact witness (on a
#: word-level corpus with r = 21,345 rows the default 1500 iterations took minutes).
REFUTED_LSMR_ITER = 100


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
        Wall seconds of each stage (``kesler``, ``rank``, ``compatibility``, ``separability``, ``svm``).
    compat_decision, sep_decision : CompatibilityDecision, SeparabilityDecision or None
        How each verdict was settled (:mod:`ntpcert.pipeline.decide`), with the exact witnesses.
    lemma1_rank : RankWitness or None
        The certified lower bound on rank H (:mod:`ntpcert.exact.rank_witness`); Lemma 1 decided when
        it is full. None when Lemma 1 was not asked for.
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    instance: NTPInstance
    subspace: Subspace
    compatible: CompatibilityResult
    separable: SeparabilityResult
    svm: SVMSolution | None
    svm_error: str | None
    seconds: float
    stages: dict = dataclasses.field(default_factory=dict)
    compat_decision: CompatibilityDecision | None = None
    sep_decision: SeparabilityDecision | None = None
    lemma1_rank: RankWitness | None = None

    @property
    def lemma1_modulus(self) -> int | None:
        """The prime of Lemma 1's rank certificate, when it holds and one was used."""
        return self.lemma1_rank.modulus if self.lemma1_rank is not None and self.lemma1_rank.full else None

    @property
    def lemma1_holds(self) -> bool:
        return self.lemma1_rank is not None and self.lemma1_rank.full

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        # Lemma 1's certificate is H's full row rank mod p, hence over Q: rank m, without an SVD
        out = dict(self.instance.describe(embedding_rank=self.instance.m if self.lemma1_holds else None))
        comp = self.compatible.to_json()
        comp["witness"] = comp.pop("by")
        comp["by"] = self.compat_decision.engine if self.compat_decision is not None else None
        out["compatible"] = comp
        sep = self.separable.to_json()
        sep["witness"] = sep.pop("by")
        sep["by"] = self.separable.status if self.separable.holds is not None else None
        if self.sep_decision is not None and self.sep_decision.parts:
            sep["parts"] = list(self.sep_decision.parts)
        out["separable"] = sep
        out["lemma1"] = lemma1_json(self.lemma1_rank)
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


def decide_separability(system: KeslerSystem, *, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
                        time_limit: float | None = None, lemma1_rank: RankWitness | None = None) -> SeparabilityResult:
    """Separability (6) with a witness (:func:`ntpcert.pipeline.decide.decide_separability`), as a
    :class:`~ntpcert.solve.separability_lp.SeparabilityResult` (``status`` holds the deciding engine)."""
    t0 = time.perf_counter()
    dec = _decide_sep(system, separability_solver=separability_solver, lemma1_rank=lemma1_rank, time_limit=time_limit)
    return _sep_result(dec, time.perf_counter() - t0)


def _sep_result(dec: SeparabilityDecision, seconds: float) -> SeparabilityResult:
    return SeparabilityResult(dec.holds, dec.W, dec.min_margin, dec.eq_violation, dec.engine or "undetermined",
                              seconds, by=dec.witness, ray=dec.ray)


def _from_infeasible(sep: SeparabilityResult, err: InfeasibleError) -> SeparabilityResult:
    """False with an exactly checked Farkas ray carried by ``err``; otherwise undetermined."""
    cert = getattr(err, "certificate", None)
    if cert is not None and getattr(cert, "exact", False):
        return dataclasses.replace(sep, holds=False, W=None, ray=cert.entries, status="structured-farkas",
                                   by=f"Farkas ray with {cert.support} non-zero entries, verified exactly")
    return dataclasses.replace(sep, holds=None, by=f"a solver reports infeasibility ({err}), but no Farkas ray was "
                                                   "checked; run 'ntpcert certify DATA --exact'")


def _from_svm_point(sep: SeparabilityResult, sol: SVMSolution, system: KeslerSystem) -> SeparabilityResult:
    """True when the NTP-SVM point passes the re-check (:func:`ntpcert.solve.point_check.check_point`)."""
    from ntpcert.solve.point_check import check_point

    chk = check_point(system, sol.W)
    if chk.ok:
        return dataclasses.replace(sep, holds=True, W=sol.W, min_margin=chk.min_margin, eq_violation=chk.eq_violation,
                                   status=f"svm-point:{sol.solver}", by=f"the NTP-SVM point ({sol.solver}): {chk.text}")
    return sep


def certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    separability_time_limit: float | None = None,
    separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
    use_lemma1: bool = True,
    fit_when_refuted: bool = True,
    svm_certificate: str = "float",
    svm_time_limit: float | None = SVM_TIME_LIMIT,
) -> Report:
    """Run the float pipeline on ``instance``: Lemma 1's rank test, F and W* (compatibility),
    separability, and, unless ``svm`` is false or the data are not separable, the NTP-SVM with
    ``solver``.

    Every definite verdict carries its witness (see :mod:`ntpcert.pipeline.decide`): compatibility
    from a rank certified mod a prime or exact left null vectors, separability from Lemma 1, a
    re-checked feasible point or an exactly checked Farkas ray. The structured solver decides
    separability (``separability_solver="highs"`` for the HiGHS LP); when it also solves the
    NTP-SVM (``solver`` auto, structured or structured-float) that one solve serves both. With
    ``use_lemma1`` false, Lemma 1 is not used, so the verdicts carry explicit witnesses. An NTP-SVM
    that fails or cannot be certified is reported in ``svm_error``; the verdicts stand. With
    ``fit_when_refuted`` false, no least-squares point of (4) is computed once an exact witness has
    refuted (4) (W* does not exist; ``compatible.W_star`` is then None and ``subspace`` holds the
    rows only, :meth:`~ntpcert.rows.subspace.Subspace.unsolved`). With ``svm_certificate="float"`` (the
    default, as ``ntpcert certify``) the structured solver (``auto``, ``structured``) reports the float gap
    recomputed from its primal/dual pair; ``"exact"`` has it build its exact gap bound as well (about 40 %
    of the solve at V = 2000, d = 1024), which the exact pipeline and ``ntpcert limits`` ask for. ``svm_time_limit`` bounds the NTP-SVM's
    seconds (default :data:`SVM_TIME_LIMIT`; None: no bound); the separability decision has its own.
    """
    t0 = time.perf_counter()
    svm_options = _svm_options(solver, svm_certificate)
    if svm_time_limit is not None:
        svm_options["time_limit"] = float(svm_time_limit)
    stages = Stages(5 if svm else 4, progress, desc="certify")
    try:
        with stages.stage("Kesler rows", key="kesler"):
            system = KeslerSystem.build(instance)
        with stages.stage("rank of H (Lemma 1)", key="rank"):
            rank = lemma1(instance) if use_lemma1 else None
            p = rank if rank is not None and rank.full else None
        with stages.stage("subspace F and W*", key="compatibility"):
            cdec = decide_compatibility(system, lemma1_rank=p)
            early = None  # an exact Farkas ray from pairs, found before a costly fit
            if (cdec.holds is not False and p is None
                    and separability_solver == DEFAULT_SEPARABILITY_SOLVER and not dense_preferred(system)):
                early = pair_separability(instance)
            closed = onehot_compatibility(system, cdec.witness) if cdec.engine == "lemma1" else None
            if closed is not None:  # W* splits by context: no fit
                subspace, comp = Subspace.unsolved(system), closed
            elif cdec.holds is True and early is not None:  # proved exactly, but W* (which needs (6) too) is moot
                subspace = Subspace.unsolved(system)
                comp = proved_without_fit(subspace, cdec, "(6) refuted exactly first (" + early.engine + "): the "
                                          "entropy bound is out of reach, so W* is not fitted")
            elif cdec.holds is False and not fit_when_refuted:  # W* does not exist: nothing to fit
                subspace = Subspace.unsolved(system)
                comp = refuted_without_fit(subspace, cdec.witness)
            elif early is not None and not fit_when_refuted:
                subspace = Subspace.unsolved(system)
                comp = unsettled_without_fit(subspace, cdec.witness,
                                             "(6) refuted exactly first (" + early.engine + "): the entropy bound is "
                                             "out of reach and W* (which needs (4) and (6)) is not fitted")
            elif early is not None:
                # the least-squares point is only reported (W* needs (4) and (6)): LSMR is cut short, and
                # its residual decides nothing (a fit stopped early says nothing about (4))
                subspace = Subspace.build(system, lsmr_max_iter=REFUTED_LSMR_ITER)
                comp = dataclasses.replace(
                    check_compatibility(subspace), holds=None,
                    by=f"{cdec.witness}; (6) refuted exactly first ({early.engine}): the least-squares point of (4) "
                       f"is reported after at most {REFUTED_LSMR_ITER} LSMR iterations and decides nothing")
            else:
                # refuted exactly: W* does not exist, the least-squares point is only reported, so LSMR is cut short
                subspace = Subspace.build(system, lsmr_max_iter=REFUTED_LSMR_ITER if cdec.holds is False else None)
                comp = check_compatibility(subspace)
                if cdec.holds is not None:  # dim F from the engine's exact rank when the float one is open
                    comp = dataclasses.replace(comp, holds=cdec.holds, by=cdec.witness,
                                               dim_F=comp.dim_F if comp.dim_F is not None else cdec.rank)
                elif comp.holds is None:
                    comp = settle_compatibility(subspace, dataclasses.replace(comp, by=comp.by + "; " + cdec.witness))
                    if comp.holds is not None:
                        cdec = CompatibilityDecision(comp.holds, "float-null-vectors", comp.by)
                else:
                    cdec = CompatibilityDecision(comp.holds, "float-rank", comp.by)
        with stages.stage("separability", key="separability"):
            ts = time.perf_counter()
            sdec = early if early is not None else _decide_sep(
                system, separability_solver=separability_solver, lemma1_rank=p, svm_solver=solver if svm else None,
                time_limit=separability_time_limit, progress=progress, svm_options=svm_options)
            sep = _sep_result(sdec, time.perf_counter() - ts)
        sol: SVMSolution | None = sdec.svm
        err: str | None = sdec.svm_error if sol is None else None
        if svm:
            with stages.stage("NTP-SVM", key="svm"):
                if sep.holds is False:
                    err = "not separable: the NTP-SVM has no feasible point"
                elif sep.holds is None and sdec.svm_error:
                    err = (f"not attempted: the structured solver gave no answer on the separability question "
                           f"({sdec.svm_error}), and the NTP-SVM is the same solve run longer")
                elif sol is None and sdec.svm_error and sep.holds:
                    err = sdec.svm_error + _budget_note(svm_time_limit)  # tried with the deciding solve: not again
                elif sol is None:
                    try:
                        sol = solve_svm(system, solver=solver, **svm_options)
                    except InfeasibleError as e:
                        sep = _from_infeasible(sep, e) if sep.holds is None else sep
                        err = (f"not separable: {e}" if sep.holds is False
                               else f"the NTP-SVM solver reports infeasibility ({e}); not checked")
                    except SolverError as e:
                        err = f"NTP-SVM not certified: {e}" + _budget_note(svm_time_limit)
                    if sol is not None and sep.holds is None:
                        sep = _from_svm_point(sep, sol, system)
    finally:
        stages.close()
    return Report(instance, subspace, comp, sep, sol, err, time.perf_counter() - t0, dict(stages.seconds),
                  cdec, sdec, rank)


def _budget_note(limit: float | None) -> str:
    return "" if limit is None else f" (certify gives it {limit:g} s; 'ntpcert svm DATA' solves it without a bound)"


def _svm_options(solver: str, svm_certificate: str) -> dict:
    """``{"certificate": "float"}`` when asked for and the backend takes it, else nothing."""
    from ntpcert.solve.svm import backend_options

    if svm_certificate not in ("exact", "float"):
        raise InputError(f"svm_certificate: unknown value {svm_certificate!r} (expected exact or float)")
    if svm_certificate == "exact" or "certificate" not in backend_options(solver):
        return {}
    return {"certificate": svm_certificate}


def compute_limits(instance: NTPInstance, *, solver: str = DEFAULT_SOLVER, progress: bool | None = None) -> Report:
    """Alias of :func:`certify` with the SVM solved: the report carries W* and W^mm."""
    return certify(instance, svm=True, solver=solver, progress=progress, svm_time_limit=None, svm_certificate="exact")
