r"""``ntpcert certify DATA --exact``: float answers turned into a certificate, checked, reported.

Stages: the float pipeline (:func:`ntpcert.pipeline.float_verdicts.certify`), exact compatibility
(:mod:`~ntpcert.exact.compatibility`), an exact separability witness
(:mod:`~ntpcert.exact.separability`), the exact NTP-SVM gap (:mod:`~ntpcert.exact.svm_gap`), then the
certificate is assembled and checked by the independent checker (:mod:`~ntpcert.certificate.checker`).
**Every reported verdict is the checked one**: a section that fails the check, or a witness that
could not be made exact, is reported as undetermined.

Without ``--certificate-out`` the certificate is built and checked in memory only and the JSON
field ``certificate`` is null; with it, the file is written atomically (nothing half-written).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.certificate.checker import CheckResult, verify_certificate
from ntpcert.certificate.encode import build_certificate, certificate_body
from ntpcert.certificate.jsonio import save, seal_canonical
from ntpcert.certificate.schema import check_produced
from ntpcert.exact.compatibility import (
    ExactCompatibility,
    WStarClosedForm,
    check_compatibility_by_columns,
    check_compatibility_exact,
    w_star_closed_form,
)
from ntpcert.exact.separability import (
    ExactSeparability,
    check_separability_exact,
)
from ntpcert.exact.svm_gap import ExactSVMBounder, SVMBound, exact_svm_bound
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import DEFAULT_SEPARABILITY_ENGINE
from ntpcert.pipeline.float_verdicts import Report, certify
from ntpcert.solve.svm import DEFAULT_SOLVER
from ntpcert.util.files import check_output_file
from ntpcert.util.logic import and3
from ntpcert.util.progress import Stages

#: W* is put in closed form automatically only when the equality system is this small (rows) and
#: rows × primes stays below ``W_STAR_MAX_WORK``: its rationals grow with the size of the system.
W_STAR_MAX_ROWS = 60
W_STAR_MAX_WORK = 600

#: Digits of the closed-form W* norm in the report.
W_STAR_DIGITS = 30


@dataclass(frozen=True, eq=False)
class ExactReport:
    """Checked exact verdicts on one instance.

    Attributes
    ----------
    float_report : Report
        The float pipeline's report (its verdicts are not the ones reported).
    compatibility : ExactCompatibility
    w_star : WStarClosedForm or None
    w_star_note : str
        Why W* is not in closed form, when it is not.
    separability : ExactSeparability
    svm : SVMBound or None
    certificate : dict
        The certificate (sealed).
    verdict : CheckResult
        The independent checker's verdict on it.
    path : str or None
        Where it was written.
    seconds : float
    stages : dict
        Wall seconds of the exact stages (the float stages are in ``float_report.stages``).
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    float_report: Report
    compatibility: ExactCompatibility
    w_star: WStarClosedForm | None
    w_star_note: str
    separability: ExactSeparability
    svm: SVMBound | None
    certificate: dict
    verdict: CheckResult
    path: str | None
    seconds: float
    stages: dict = field(default_factory=dict)
    #: The ``excess_loss`` key (:func:`ntpcert.pipeline.excess_certificate.excess_key`), or None.
    excess: dict | None = None
    #: The keys ``why_not_separable`` / ``why_not_compatible`` made by the ``why_not`` hook, or None.
    why_not: dict | None = None

    @property
    def compatible(self) -> bool | None:
        return self.compatibility.holds if self.verdict.valid else None

    @property
    def separable(self) -> bool | None:
        return self.separability.holds if self.verdict.valid else None

    @property
    def svm_certified(self) -> bool:
        return self.verdict.valid and self.svm is not None and self.svm.primal_feasible

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible, self.separable)

    def to_json(self) -> dict:
        out = self.float_report.to_json()
        comp = dict(out["compatible"])
        comp["float_holds"] = comp["holds"]
        comp["holds"] = self.compatible
        comp["exact"] = self.compatibility.to_json()
        if self.w_star is not None:
            comp["W_star_closed_form"] = {
                "expression": " + ".join(f"log({p})*R_{p}" for p in self.w_star.terms) or "0",
                "primes": list(self.w_star.terms),
                "norm": str(self.w_star.norm(W_STAR_DIGITS)),
            }
        else:
            comp["W_star_closed_form"] = None
            comp["W_star_note"] = self.w_star_note
        out["compatible"] = comp
        sep = dict(out["separable"])
        sep["float_holds"] = sep["holds"]
        sep["holds"] = self.separable
        sep["exact"] = self.separability.to_json()
        out["separable"] = sep
        out["entropy_bound_reachable"] = self.entropy_bound_reachable
        if out.get("svm"):
            svm = dict(out["svm"])
            svm["exact"] = self.svm.to_json() if (self.svm is not None and self.verdict.valid) else None
            out["svm"] = svm
        out["exact"] = True
        out["certificate"] = self.path
        out["certificate_valid"] = self.verdict.valid
        out["certificate_reason"] = self.verdict.reason
        out["certificate_checks"] = list(self.verdict.checks)
        out["probabilities_exact_from_floats"] = bool(self.float_report.instance.probs_exact_from_floats)
        out["seconds"] = self.seconds
        out["stages"] = {**out.get("stages", {}), **self.stages}
        if self.excess is not None:
            out["excess_loss"] = dict(self.excess, certificate_checked=self.verdict.valid and "q_nonzeros" in self.excess)
        if self.why_not is not None:
            out.update(self.why_not)
        return out


def _w_star(instance: NTPInstance, compat: ExactCompatibility, mode: str) -> tuple[WStarClosedForm | None, str]:
    if not compat.holds:
        return None, "not compatible: W* does not exist"
    if compat.E is not None and not any(compat.E.ravel()):  # b = 0: W* = 0, whatever the size
        return WStarClosedForm(instance, compat.primes, {p: {} for p in compat.primes}), ""
    work = compat.n_eq * max(1, len(compat.primes))
    if mode == "never":
        return None, "not requested"
    if mode == "auto" and (compat.n_eq > W_STAR_MAX_ROWS or work > W_STAR_MAX_WORK):
        return None, (f"skipped: r = {compat.n_eq} equality rows and {len(compat.primes)} primes exceed the automatic "
                      f"limit (r <= {W_STAR_MAX_ROWS}, r * primes <= {W_STAR_MAX_WORK}); call "
                      "ntpcert.exact.compatibility.w_star_closed_form(instance)")
    return w_star_closed_form(instance, compat if compat.gram is not None else None), ""


def exact_certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    certificate_out: str | None = None,
    w_star: str = "auto",
    separability_solver: str = DEFAULT_SEPARABILITY_ENGINE,
    use_lemma1: bool = True,
    excess: bool = True,
    why_not: Callable[..., tuple[dict, dict]] | None = None,
    source: dict | None = None,
) -> ExactReport:
    """Run the float pipeline, make every answer exact, check the certificate, optionally write it.

    Parameters
    ----------
    instance : NTPInstance
    svm : bool
        Also bound the NTP-SVM exactly (when separable).
    solver : str
        NTP-SVM backend of the float stage.
    certificate_out : str, optional
        Write the certificate here (atomically), once the independent check accepts it; a certificate it
        refuses is not written (the report says INVALID and why, and ``path`` is None).
    w_star : {"auto", "always", "never"}
        Closed form of W* (``auto``: small systems only, see ``W_STAR_MAX_ROWS``).
    separability_solver : {"structured", "highs"}
        The engine that decides separability in the float stage (:mod:`ntpcert.pipeline.decide`).
    use_lemma1 : bool
        Decide by Lemma 1 when it applies (default); false: explicit witnesses (a feasible W, null vectors).
    excess : bool
        Also certify the excess-loss bracket (section ``excess``; instances up to
        :data:`~ntpcert.pipeline.excess_certificate.AUTO_MAX_CELLS` cells).
    why_not : callable, optional
        Explains negative verdicts: called as ``why_not(instance, compatible=, violating=, separable=,
        ray=, system=)`` with the exact verdicts and witnesses, it returns ``(keys, sections)``: JSON
        keys for the report and certificate sections, which are written and checked with the rest
        (:func:`ntpcert.pipeline.explain.why_not_with_sections`, passed in by ``certify --exact``).
    source : dict, optional
        The certificate's ``source`` section (:mod:`ntpcert.certificate.provenance`): the model files the
        instance was read from, by SHA-256.
    """
    t0 = time.perf_counter()
    if certificate_out is not None:
        check_output_file(certificate_out, "certificate_out")  # fail before the work, not after it
    # no least-squares point once (4) is refuted exactly: W* does not exist, and the fit is the float
    # stage's costliest part on large corpora
    rep = certify(instance, svm=svm, solver=solver, progress=progress, separability_solver=separability_solver,
                  use_lemma1=use_lemma1, fit_when_refuted=False, svm_time_limit=None)
    stages = Stages(4, progress, desc="exact")
    try:
        with stages.stage("exact compatibility", key="exact_compatibility"):
            compat = _compatibility(instance, rep)
            wstar, note = _w_star(instance, compat, w_star)
        bounder = None
        with stages.stage("exact separability", key="exact_separability"):
            sep, bounder = _separability(instance, rep)
        with stages.stage("exact NTP-SVM gap", key="exact_svm_gap"):
            bound = None
            if sep.holds and rep.svm is not None:
                bound = rep.svm.exact_bound  # the structured solver's own exact bound, if it made one
                if bound is None or not bound.primal_feasible:
                    bounder = bounder if bounder is not None else ExactSVMBounder(instance)
                    bound = exact_svm_bound(instance, rep.svm.W, rep.svm.dual, bounder=bounder)
        ex_key, ex_obj = None, None
        if excess:  # the excess-loss bracket, certified (ntpcert.pipeline.excess_certificate)
            from ntpcert.pipeline.excess_certificate import excess_key

            te = time.perf_counter()
            ex_key, ex_obj = excess_key(instance, exact=True, check=False)
            stages.seconds["excess_bracket"] = time.perf_counter() - te
        why_keys, why_sections = None, {}
        if why_not is not None and (compat.holds is False or sep.holds is False):
            tw = time.perf_counter()
            why_keys, why_sections = why_not(instance, compatible=compat.holds, violating=compat.violating,
                                             separable=sep.holds, ray=sep.ray, system=rep.subspace.system)
            stages.seconds["why_not"] = time.perf_counter() - tw
        with stages.stage("independent check", key="independent_check"):
            # one encoding of the (large) certificate serves its checksum and the file
            body = certificate_body(instance, compat, sep, bound, wstar)
            if ex_obj is not None and hasattr(ex_obj, "section"):  # certified (not the float fallback)
                body["excess"] = ex_obj.section
            body.update(why_sections)
            if source is not None:
                body["source"] = source
            cert, text = seal_canonical(body)
            check_produced(cert)  # the table verify reads: a field it would refuse is never written
            # the checksum over the text to be written, not a second encoding of cert
            verdict = verify_certificate(cert, sealed_text=text if text.startswith('{"checksum":') else None)
            if certificate_out is not None and verdict.valid:  # its checksum checked just now
                save(cert, certificate_out, reseal=False, canonical=text)
            written = certificate_out if verdict.valid else None  # a certificate its checker refuses is not written
    finally:
        stages.close()
    return ExactReport(rep, compat, wstar, note, sep, bound, cert, verdict, written, time.perf_counter() - t0,
                       dict(stages.seconds), ex_key, why_keys)


#: The whole-system exact test (fraction-free null space of G) is run only up to this many rows.
EXACT_FULL_MAX_ROWS = 2500


def _compatibility(instance: NTPInstance, rep: Report) -> ExactCompatibility:
    """The float stage's exact witness (:mod:`ntpcert.pipeline.decide`) as an exact verdict, or the
    whole-system exact test when the float stage had none and the system is small enough."""
    from fractions import Fraction

    from ntpcert.exact.compatibility import prime_exponents

    t0 = time.perf_counter()
    dec = rep.compat_decision
    r = rep.subspace.system.n_eq
    if dec is not None and dec.engine == "particular-solutions" and dec.exact is not None:
        return dec.exact  # the decision engine's own exact verdict (checked with the certificate)
    if dec is None or (dec.holds is not False and dec.engine not in ("no-equations", "lemma1")):
        # a tall system: one solve per prime in the column space, instead of a null-space basis of
        # about r vectors that the certificate would list and the checker re-check
        tall = check_compatibility_by_columns(instance)
        if tall is not None:
            return tall
    if dec is not None and dec.engine in ("no-equations", "lemma1", "gram-rank-mod-p", "null-space", "null-vector",
                                          "part-null-vector", "pair-null-vector",
                                          "frequent-tokens-null-vector", "frequent-tokens"):
        primes, E = prime_exponents(instance)
        common = {"n_eq": r, "primes": primes, "probabilities_from_floats": bool(instance.probs_exact_from_floats),
                      "method": dec.engine, "E": E}
        if dec.holds is False:
            rows = {(int(j), int(z)): i for i, (j, z) in
                    enumerate(zip(rep.subspace.system.eq_context, rep.subspace.system.eq_token))}
            yE: dict[int, Fraction] = {}
            for key, v in dec.violating.items():
                for pi, p in enumerate(primes):
                    e = int(E[rows[key], pi])
                    if e:
                        yE[p] = yE.get(p, Fraction(0)) + v * e
            yE = {p: v for p, v in yE.items() if v}
            return ExactCompatibility(holds=False, rank=dec.rank, null_basis=(),
                                      violating={k: Fraction(v) for k, v in dec.violating.items()},
                                      violating_exponents=yE, seconds=time.perf_counter() - t0, **common)
        basis = tuple({k: Fraction(v) for k, v in y.items()} for y in (dec.null_basis or []))
        return ExactCompatibility(holds=True, rank=dec.rank, null_basis=basis, violating=None,
                                  violating_exponents=None, seconds=time.perf_counter() - t0,
                                  modulus=dec.modulus if dec.engine != "no-equations" else None,
                                  embeddings_modulus=dec.engine == "lemma1",
                                  rank_witness=dec.rank_witness if dec.engine == "lemma1" else None, **common)
    if r <= EXACT_FULL_MAX_ROWS:
        return check_compatibility_exact(instance)
    primes, _ = prime_exponents(instance)
    why = (dec.witness if dec is not None else "") + f"; the whole-system exact test is limited to r <= " \
        f"{EXACT_FULL_MAX_ROWS} equality rows (r = {r})"
    return ExactCompatibility(holds=None, n_eq=r, rank=None, primes=primes, null_basis=(), violating=None,
                              violating_exponents=None, probabilities_from_floats=bool(instance.probs_exact_from_floats),
                              seconds=time.perf_counter() - t0, method="undetermined", reason=why)


def _separability(instance: NTPInstance, rep: Report) -> tuple[ExactSeparability, ExactSVMBounder | None]:
    """Lemma 1's rank certificate, the float stage's Farkas ray (checked again here), a feasible point
    from the NTP-SVM or the float stage made exact, else the HiGHS ray LP on small instances."""
    from ntpcert.pipeline.decide import check_ray_sparse

    t0 = time.perf_counter()
    dec = rep.sep_decision
    if dec is not None and dec.engine == "lemma1":
        return ExactSeparability(True, None, None, None, "", time.perf_counter() - t0, modulus=dec.modulus,
                                 rank_witness=dec.rank_witness), None
    if dec is not None and dec.engine == "vacuous":
        return check_separability_exact(instance, np.zeros((instance.V, instance.d)), try_ray=False), None
    if rep.separable.ray:
        # pair and part rays were checked exactly on the whole instance by check_ray_sparse when found
        # (ntpcert.pipeline.decide); other rays are checked here
        checked = dec is not None and dec.engine in RAYS_CHECKED_BY_DECIDE and dec.ray is rep.separable.ray
        why = "" if checked else check_ray_sparse(instance, rep.separable.ray)
        if not why:
            return ExactSeparability(False, None, rep.separable.ray, None, "", time.perf_counter() - t0), None
    candidates = [W for W in ((rep.svm.W if rep.svm is not None else None), rep.separable.W) if W is not None]
    notes = []
    bounder = ExactSVMBounder(instance) if candidates else None
    for W in candidates:
        sep = check_separability_exact(instance, W, try_ray=False, bounder=bounder)
        if sep.holds:
            return sep, bounder
        notes.append(sep.reason)
    if instance.V * instance.m <= RAY_LP_MAX_ENTRIES:
        ray = check_separability_exact(instance, None, try_ray=True)
        if ray.holds is False or not notes:
            return ray, bounder
        notes.append(ray.reason)
    else:
        notes.append(f"{rep.separable.by}; the HiGHS ray LP is not tried on V * m > {RAY_LP_MAX_ENTRIES}")
    return ExactSeparability(None, None, None, None, "; ".join(notes), time.perf_counter() - t0), bounder


#: Deciding engines whose Farkas ray :func:`ntpcert.pipeline.decide.check_ray_sparse` has already
#: checked exactly on the whole instance (not checked a second time here; the certificate checker
#: checks it again independently).
RAYS_CHECKED_BY_DECIDE = ("pair-farkas", "part-farkas")

#: The HiGHS Farkas-ray LP has V * m variables; it is tried only up to this many.
RAY_LP_MAX_ENTRIES = 200_000


__all__ = ["ExactReport", "build_certificate", "exact_certify"]
