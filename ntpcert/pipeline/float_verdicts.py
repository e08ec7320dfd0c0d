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
from typing import Any

from ntpcert.errors import InfeasibleError, InputError, SolverError
from ntpcert.exact.rank_witness import RankWitness
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import (
    DEFAULT_SEPARABILITY_SOLVER,
    SeparabilitySolve,
    decide_compatibility,
    decide_separability,
    lemma1,
    pair_separability,
)
from ntpcert.pipeline.float_witness import float_compatibility, residual_lower_bound
from ntpcert.pipeline.lemma1 import lemma1_json
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.onehot import onehot_fit
from ntpcert.rows.subspace import LeastSquaresFit, Subspace, dense_preferred, least_squares_fit
from ntpcert.solve.svm import DEFAULT_SOLVER, SVMSolution, solve_svm
from ntpcert.util.logic import and3
from ntpcert.util.progress import Stages
from ntpcert.util.summary import short_str
from ntpcert.verdict import FarkasRay, FeasiblePoint, Verdict, ViolatingNullVector


#: The budget of work of :func:`certify`'s NTP-SVM when the structured solver solves it (``auto`` on a QP
#: of more than ``SMALL_VARS`` variables, ``structured``, ``structured-float``), in the units of
#: :mod:`ntpcert.solve.structured.budget` (an epoch costs m·(C·min(m, d) + 50,000)); past it the NTP-SVM is
#: reported in ``svm_error``, not solved. It replaces a limit of 15 s (about 1.6e9 units a second on the
#: shared 2-core machine: 2.4e10 units). The most work an NTP-SVM of the default suite took was 6.4e8
#: units (85 epochs, m = 150); the benchmark instance V = 2000, m = 1000, d = 1024 (certify-large.md:
#: C = 1,126, 1.2e9 units an epoch) certifies after 6 epochs and gets 33. ``auto`` on a small QP keeps its own
#: first try and Clarabel's iteration cap. ``ntpcert svm`` and ``ntpcert limits`` have no such budget (the
#: solver's own, 100,000 epochs).
SVM_MAX_WORK = 40_000_000_000
#: ... and at most this many epochs (the structured solver's own default).
SVM_MAX_EPOCHS = 100_000

#: LSMR iterations for the least-squares point of (4) when an exact witness has already refuted (4) or (6)
#: and one is asked for (``fit_when_refuted``, as ``ntpcert limits`` does; on a word-level corpus with
#: r = 21,345 rows the default 1500 iterations took minutes).
REFUTED_LSMR_ITER = 100


@dataclass(frozen=True, eq=False)
class Report:
    """Verdicts on one instance.

    Attributes
    ----------
    instance : NTPInstance
    subspace : Subspace
    compatible, separable : Verdict
        Whether (4) and (6) hold, each with the witness that shows it (:mod:`ntpcert.verdict`).
    fit : LeastSquaresFit
        The least-squares solution of (4) in F: W* when (4) and (6) hold.
    svm : SVMSolution or None
        The NTP-SVM solution when separable and requested.
    svm_error : str or None
        Why the SVM was not solved, when it was not.
    seconds : float
    stages : dict
        Wall seconds of each stage (``kesler``, ``rank``, ``compatibility``, ``separability``, ``svm``).
    separability_parts : tuple of dict
        What each part of the instance gave (:func:`ntpcert.pipeline.parts.separability_on_parts`).
    lemma1_rank : RankWitness or None
        The certified lower bound on rank H (:mod:`ntpcert.exact.rank_witness`); Lemma 1 decided when
        it is full. None when Lemma 1 was not asked for.
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    instance: NTPInstance
    subspace: Subspace
    compatible: Verdict
    separable: Verdict
    fit: LeastSquaresFit
    svm: SVMSolution | None
    svm_error: str | None
    seconds: float
    stages: dict = dataclasses.field(default_factory=dict)
    separability_parts: tuple = ()
    lemma1_rank: RankWitness | None = None

    @property
    def lemma1_holds(self) -> bool:
        return self.lemma1_rank is not None and self.lemma1_rank.full

    @property
    def W_star(self):
        """W* (shape (V, d)) when (4) holds and it was fitted, else None."""
        return self.fit.W_star if self.compatible.holds is True else None

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        # Lemma 1's certificate is H's full row rank mod p, hence over Q: rank m, without an SVD
        out = dict(self.instance.describe(embedding_rank=self.instance.m if self.lemma1_holds else None))
        out["compatible"] = {**self.compatible.to_json(), **self.fit.to_json(self.compatible.holds)}
        sep = self.separable.to_json()
        if self.separability_parts:
            sep["parts"] = list(self.separability_parts)
        out["separable"] = sep
        out["lemma1"] = lemma1_json(self.lemma1_rank)
        out["entropy_bound_reachable"] = self.entropy_bound_reachable
        out["entropy_attained_at_finite_W"] = (bool(self.instance.support_sizes.min() == self.instance.V)
                                               and self.compatible.holds is True)
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


def _from_infeasible(sep: Verdict, err: InfeasibleError) -> Verdict:
    """False with an exactly checked Farkas ray carried by ``err``; otherwise ``sep``, saying why not."""
    cert = getattr(err, "certificate", None)
    if cert is not None and getattr(cert, "exact", False):
        return Verdict(False, FarkasRay(dict(cert.entries), "structured-farkas",
                                        f"Farkas ray with {cert.support} non-zero entries, verified exactly"))
    return Verdict.undetermined(f"a solver reports infeasibility ({err}), but no Farkas ray was checked; run "
                                "'ntpcert certify DATA --exact'")


def _from_svm_point(sep: Verdict, sol: SVMSolution, system: KeslerSystem) -> Verdict:
    """True when the NTP-SVM point passes the re-check (:func:`ntpcert.solve.point_check.check_point`)."""
    from ntpcert.solve.point_check import check_point

    chk = check_point(system, sol.W)
    if chk.ok:
        return Verdict(True, FeasiblePoint(sol.W, f"svm-point:{sol.solver}", f"the NTP-SVM point ({sol.solver}): "
                                           f"{chk.text}", min_margin=chk.min_margin, eq_violation=chk.eq_violation))
    return sep


def _witness_bounds(system: KeslerSystem, cdec: Verdict) -> dict:
    """The residual lower bounds a violating null vector that refuted (4) shows
    (:func:`~ntpcert.pipeline.float_witness.residual_lower_bound`), as :class:`LeastSquaresFit` fields; none
    for any other verdict."""
    if cdec.holds is not False or not isinstance(cdec.witness, ViolatingNullVector):
        return {}
    bound, relative = residual_lower_bound(system, cdec.witness.y)
    return {"residual_lower_bound": bound, "relative_residual_lower_bound": relative}


def _compatibility(system: KeslerSystem, cdec: Verdict, early: Verdict | None,
                   fit_when_refuted: bool) -> tuple[Subspace, LeastSquaresFit, Verdict]:
    """F, the least-squares fit of (4) and the verdict on (4), from the decision ``cdec`` of the structured
    engines (:func:`~ntpcert.pipeline.decide.decide_compatibility`) and an exact refutation of (6) found
    ``early`` (then W*, which needs both, is not fitted). The generic float route (F by eigh or LSMR, and
    :func:`~ntpcert.pipeline.float_witness.float_compatibility`) decides only what the engines left open."""
    rank = getattr(cdec.witness, "rank", None)
    closed = onehot_fit(system) if cdec.engine == "lemma1" else None
    if closed is not None:  # W* splits by context: no fit
        return Subspace.unsolved(system), closed, cdec
    if cdec.holds is True and early is not None:  # proved exactly, but W* (which needs (6) too) is moot
        return Subspace.unsolved(system), LeastSquaresFit.none(rank, "(6) refuted exactly first (" + early.engine +
                                                              "): the entropy bound is out of reach, so W* is not "
                                                              "fitted"), cdec
    bounds = _witness_bounds(system, cdec)
    if cdec.holds is False and not fit_when_refuted:  # W* does not exist: nothing to fit
        sub = Subspace.unsolved(system)
        return sub, dataclasses.replace(LeastSquaresFit.none(
            sub.dim, "(4) refuted exactly: W* does not exist, no least-squares point was computed" +
            ("; the witness bounds the residual of every W below (residual_lower_bound)" if bounds else "")),
            **bounds), cdec
    if early is not None and not fit_when_refuted:
        sub = Subspace.unsolved(system)
        return sub, LeastSquaresFit.none(sub.dim, "(6) refuted exactly first (" + early.engine + "): the entropy bound "
                                         "is out of reach and W* (which needs (4) and (6)) is not fitted"), cdec
    if early is not None:
        # the least-squares point is only reported (W* needs (4) and (6)): LSMR is cut short, and its
        # residual decides nothing (a fit stopped early says nothing about (4))
        sub = Subspace.build(system, lsmr_max_iter=REFUTED_LSMR_ITER)
        return sub, least_squares_fit(sub), Verdict.undetermined(
            f"{cdec.reason}; (6) refuted exactly first ({early.engine}): the least-squares point of (4) is reported "
            f"after at most {REFUTED_LSMR_ITER} LSMR iterations and decides nothing")
    # refuted exactly: W* does not exist, the least-squares point is only reported, so LSMR is cut short
    sub = Subspace.build(system, lsmr_max_iter=REFUTED_LSMR_ITER if cdec.holds is False else None)
    fit = least_squares_fit(sub)
    if cdec.holds is not None:  # dim F from the engine's exact rank when the float one is open
        return sub, dataclasses.replace(fit, dim_F=fit.dim_F if fit.dim_F is not None else rank, **bounds), cdec
    fl = float_compatibility(sub)
    return sub, fit, (fl if fl.holds is not None else Verdict.undetermined(f"{fl.reason}; {cdec.reason}"))


def certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    separability_time_limit: float | None = None,
    separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
    use_lemma1: bool = True,
    fit_when_refuted: bool = False,
    svm_certificate: str = "float",
    svm_time_limit: float | None = None,
    svm_work: int | None = SVM_MAX_WORK,
    separability_max_epochs: int | None = None,
) -> Report:
    """Run the float pipeline on ``instance``: Lemma 1's rank test, F and W* (compatibility),
    separability, and, unless ``svm`` is false or the data are not separable, the NTP-SVM with
    ``solver``.

    Every definite verdict carries its witness (see :mod:`ntpcert.pipeline.decide`): compatibility
    from a rank certified mod a prime or exact left null vectors, separability from Lemma 1, a
    re-checked feasible point or an exactly checked Farkas ray. ``separability_solver``: ``auto``
    (HiGHS on small instances, else the structured solver), ``structured`` or ``highs``
    (:data:`~ntpcert.pipeline.decide.SEPARABILITY_SOLVERS`); when the structured solver also solves the
    NTP-SVM (``solver`` auto, structured or structured-float) that one solve serves both. With
    ``use_lemma1`` false, Lemma 1 is not used, so the verdicts carry explicit witnesses. An NTP-SVM
    that fails or cannot be certified is reported in ``svm_error``; the verdicts stand. Compatibility
    is decided first by the structured engines of :func:`~ntpcert.pipeline.decide.decide_compatibility`
    (the ones ``--exact`` uses); F is factorised or solved (eigh or LSMR on :math:`A_{eq}`) only when W*
    may exist or they left (4) open. With ``fit_when_refuted`` false (the default, as ``ntpcert certify``
    and ``--exact``), no least-squares point of (4) is computed once an exact witness has refuted (4) or,
    first, (6) (W* does not exist or is moot; ``fit.W_star`` is then None, ``subspace`` holds the rows only,
    :meth:`~ntpcert.rows.subspace.Subspace.unsolved`, and a violating null vector's lower bound on every
    W's residual is in ``fit.residual_lower_bound``): on corpora with dense embeddings that fit was most
    of the float pipeline (``benchmarks/results/float-vs-exact.md``). ``ntpcert limits``
    (:func:`compute_limits`) sets it, to write a least-squares point
    (after at most :data:`REFUTED_LSMR_ITER` LSMR iterations). With ``svm_certificate="float"`` (the
    default, as ``ntpcert certify``) the structured solver (``auto``, ``structured``) reports the float gap
    recomputed from its primal/dual pair; ``"exact"`` has it build its exact gap bound as well (about 40 %
    of the solve at V = 2000, d = 1024), which the exact pipeline and ``ntpcert limits`` ask for.
    Every engine runs within a budget of work, so that the verdicts do not depend on the machine's load
    (docs/undetermined.md): ``svm_work`` is the NTP-SVM's (default :data:`SVM_MAX_WORK`, turned into
    epochs by the size; None: the solver's own budget), ``separability_max_epochs`` the separability
    decision's structured solver's (default
    :func:`~ntpcert.pipeline.decide.separability_epochs`). ``svm_time_limit`` and
    ``separability_time_limit`` are a user's caps in seconds, off by default; reaching one says so.
    """
    t0 = time.perf_counter()
    svm_options = _svm_options(solver, svm_certificate)
    if svm_time_limit is not None:
        svm_options["time_limit"] = float(svm_time_limit)
    budget_note = ""
    stages = Stages(5 if svm else 4, progress, desc="certify")
    try:
        with stages.stage("Kesler rows", key="kesler"):
            system = KeslerSystem.build(instance)
            if svm and svm_work is not None:
                budget_note = _svm_budget(system, solver, int(svm_work), svm_options)
        with stages.stage("rank of H (Lemma 1)", key="rank"):
            rank = lemma1(instance) if use_lemma1 else None
            p = rank if rank is not None and rank.full else None
        with stages.stage("subspace F and W*", key="compatibility"):
            cdec = decide_compatibility(system, lemma1_rank=p)
            early = None  # an exact Farkas ray from pairs, found before a costly fit
            if (cdec.holds is not False and p is None
                    and separability_solver != "highs" and not dense_preferred(system)):
                early = pair_separability(instance)
            subspace, fit, comp = _compatibility(system, cdec, early, fit_when_refuted)
        with stages.stage("separability", key="separability"):
            if early is not None:
                sep, run = early, SeparabilitySolve()
            else:
                sep, run = decide_separability(
                    system, separability_solver=separability_solver, lemma1_rank=p,
                    svm_solver=solver if svm else None, time_limit=separability_time_limit, progress=progress,
                    svm_options=svm_options, max_epochs=separability_max_epochs)
        sol: SVMSolution | None = run.svm
        err: str | None = run.svm_error if sol is None else None
        if svm:
            with stages.stage("NTP-SVM", key="svm"):
                if sep.holds is False:
                    err = "not separable: the NTP-SVM has no feasible point"
                elif sep.holds is None and run.svm_error:
                    err = (f"not attempted: the structured solver gave no answer on the separability question "
                           f"({run.svm_error}), and the NTP-SVM is the same solve run longer")
                elif sol is None and run.svm_error and sep.holds:
                    err = run.svm_error + budget_note  # tried with the deciding solve: not again
                elif sol is None:
                    try:
                        sol = solve_svm(system, solver=solver, **svm_options)
                    except InfeasibleError as e:
                        sep = _from_infeasible(sep, e) if sep.holds is None else sep
                        err = (f"not separable: {e}" if sep.holds is False
                               else f"the NTP-SVM solver reports infeasibility ({e}); not checked")
                    except SolverError as e:
                        err = f"NTP-SVM not certified: {e}" + budget_note
                    if sol is not None and sep.holds is None:
                        sep = _from_svm_point(sep, sol, system)
    finally:
        stages.close()
    return Report(instance, subspace, comp, sep, fit, sol, err, time.perf_counter() - t0, dict(stages.seconds),
                  run.parts, rank)


def _svm_budget(system: KeslerSystem, solver: str, work: int, svm_options: dict) -> str:
    """Put the NTP-SVM's budget (:data:`SVM_MAX_WORK` as epochs) into ``svm_options`` where the backend
    takes one; the note that an ``svm_error`` then ends with."""
    from ntpcert.solve.structured.budget import epochs_within
    from ntpcert.solve.svm import backend_options

    if "max_epochs" not in backend_options(solver):
        return ""
    epochs = epochs_within(system, work, SVM_MAX_EPOCHS)
    svm_options["max_epochs"] = epochs
    return (f" (certify gives it a budget of {epochs:,} epochs by its size; 'ntpcert svm DATA' gives it the "
            "solver's full budget)")


def _svm_options(solver: str, svm_certificate: str) -> dict:
    """``{"certificate": "float"}`` when asked for and the backend takes it, else nothing."""
    from ntpcert.solve.svm import backend_options

    if svm_certificate not in ("exact", "float"):
        raise InputError(f"svm_certificate: unknown value {svm_certificate!r} (expected exact or float)")
    if svm_certificate == "exact" or "certificate" not in backend_options(solver):
        return {}
    return {"certificate": svm_certificate}


def with_merged_svm(report: Report, merge: Any, *, solver: str = DEFAULT_SOLVER, svm_certificate: str = "float",
                    svm_work: int | None = SVM_MAX_WORK, svm_time_limit: float | None = None) -> Report:
    """``report`` (of an instance read through a model with its unseen tokens merged, computed without the
    NTP-SVM) with the NTP-SVM of the full vocabulary: the merged instance with its representative weighed by
    the number of tokens it stands for (:meth:`~ntpcert.instance.lm.merge.TokenMerge.weighted`), solved when
    the verdict on (6) is yes. ``report.svm.W`` has the instance's V' rows; ``merge.expand_rows`` gives the
    model's V. The verdicts are unchanged: merging keeps them exact. ``svm_work`` and ``svm_time_limit`` are
    as in :func:`certify` (a budget of work; a user's cap in seconds, off by default)."""
    from ntpcert.solve.svm import solve_separable

    sep = report.separable.holds
    if sep is not True:
        err = ("not separable: the NTP-SVM has no feasible point" if sep is False
               else "not attempted: the verdict on separability is undetermined")
        return dataclasses.replace(report, svm=None, svm_error=err)
    weighted = merge.weighted(report.instance)
    options = _svm_options(solver, svm_certificate)
    if svm_time_limit is not None:
        options["time_limit"] = float(svm_time_limit)
    note = "" if svm_work is None else _svm_budget(KeslerSystem.build(weighted), solver, int(svm_work), options)
    try:
        sol = solve_separable(weighted, solver=solver, **options)
    except (InfeasibleError, SolverError) as e:
        return dataclasses.replace(report, svm=None, svm_error=f"NTP-SVM not certified: {e}" + note)
    return dataclasses.replace(report, svm=sol, svm_error=None)


def compute_limits(instance: NTPInstance, *, solver: str = DEFAULT_SOLVER, progress: bool | None = None) -> Report:
    """Alias of :func:`certify` with the SVM solved and a least-squares point of (4) fitted where W* does
    not exist (``fit_when_refuted``): the report carries W* and W^mm."""
    return certify(instance, svm=True, solver=solver, progress=progress, svm_work=None, svm_certificate="exact",
                   fit_when_refuted=True)
