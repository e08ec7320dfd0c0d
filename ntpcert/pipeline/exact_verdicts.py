r"""``ntpcert certify DATA --exact``: float answers turned into a certificate, checked, reported.

Stages: the float pipeline (:func:`ntpcert.pipeline.float_verdicts.certify`), exact compatibility
(:mod:`~ntpcert.exact.compatibility`), an exact separability witness
(:mod:`~ntpcert.exact.separability`), the exact NTP-SVM gap (:mod:`~ntpcert.exact.svm_gap`), then the
certificate is assembled (:mod:`~ntpcert.certificate.encode`) and checked by the independent checker
(:mod:`~ntpcert.certificate.checker`).
**Every reported verdict is the checked one**: a section that fails the check, or a witness that
could not be made exact, is reported as undetermined.

Without ``--certificate-out`` the certificate is built and checked in memory only and the JSON
field ``certificate`` is null; with it, the file is written atomically (nothing half-written).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from ntpcert.exact.compatibility import (
    WStarClosedForm,
    check_compatibility_by_columns,
    prime_exponents,
    w_star_closed_form,
)
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import CheckResult, verify_certificate
from ntpcert.certificate.encode import (MULTIPLICITY_REFUSED, build_certificate, certificate_body,
                                        record_size_lower_bound)
from ntpcert.certificate.jsonio import check_size, save, seal_canonical
from ntpcert.certificate.schema import check_produced
from ntpcert.errors import CertificateTooLarge, InputError
from ntpcert.exact.rational import fraction_str
from ntpcert.exact.svm_gap import ExactSVMBounder, SVMBound, exact_svm_bound
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import DEFAULT_SEPARABILITY_SOLVER
from ntpcert.pipeline.exact_witness import compatibility_exact, separability_exact
from ntpcert.pipeline.float_verdicts import Report, certify
from ntpcert.solve.svm import DEFAULT_SOLVER
from ntpcert.util.files import check_output_file
from ntpcert.util.logic import and3
from ntpcert.util.progress import Stages
from ntpcert.util.summary import short_str
from ntpcert.verdict import (EmbeddingsFullRank, FarkasRay, NoEquations, ParticularSolutions, Verdict, ViolatingNullVector)

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
    compatibility, separability : Verdict
        The exact verdicts as made, each with an exact witness (:mod:`ntpcert.verdict`), before the
        independent check; :attr:`compatible` and :attr:`separable` are the reported ones.
    primes : tuple of int
        The primes of the count ratios; ``E`` their exponent matrix (one row per equality row).
    w_star : WStarClosedForm or None
    w_star_note : str
        Why W* is not in closed form, when it is not.
    svm : SVMBound or None
    certificate : dict
        The certificate (sealed).
    check : CheckResult
        The independent checker's result on it.
    path : str or None
        Where it was written.
    seconds : float
    stages : dict
        Wall seconds of the exact stages (the float stages are in ``float_report.stages``).
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    float_report: Report
    compatibility: Verdict
    separability: Verdict
    primes: tuple
    E: np.ndarray | None
    w_star: WStarClosedForm | None
    w_star_note: str
    svm: SVMBound | None
    certificate: dict
    check: CheckResult
    path: str | None
    seconds: float
    stages: dict = field(default_factory=dict)
    #: The ``excess_loss`` key (:func:`ntpcert.pipeline.excess_certificate.excess_key`), or None.
    excess: dict | None = None
    #: The keys ``why_not_separable`` / ``why_not_compatible`` made by the ``why_not`` hook, or None.
    why_not: dict | None = None
    #: The ``split`` key (:func:`ntpcert.pipeline.split_section.exact_split_section`), or None.
    split: dict | None = None
    #: How the NTP-SVM's gap was closed to 0 (:mod:`ntpcert.exact.svm_kkt`), or why it was not; "" when the
    #: bound came with gap 0 or there is no NTP-SVM.
    svm_zero_gap: str = ""

    def _checked(self, verdict: Verdict) -> Verdict:
        if self.check.valid:
            return verdict
        return Verdict.undetermined(f"the independent check refused the certificate ({self.check.reason})")

    @property
    def compatible(self) -> Verdict:
        """The verdict on (4) the independently checked certificate holds (undetermined when it was refused)."""
        return self._checked(self.compatibility)

    @property
    def separable(self) -> Verdict:
        """The verdict on (6) the independently checked certificate holds (undetermined when it was refused)."""
        return self._checked(self.separability)

    @property
    def svm_certified(self) -> bool:
        return self.check.valid and self.svm is not None and self.svm.primal_feasible

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        out = self.float_report.to_json()
        comp = dict(out["compatible"])
        comp["float_holds"] = comp["holds"]
        comp.update(self.compatible.to_json())
        comp["exact"] = self._compat_json()
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
        sep.update(self.separable.to_json())
        sep["exact"] = self.separability.to_json()
        out["separable"] = sep
        out["entropy_bound_reachable"] = self.entropy_bound_reachable
        if out.get("svm"):
            svm = dict(out["svm"])
            svm["exact"] = self.svm.to_json() if (self.svm is not None and self.check.valid) else None
            if svm["exact"] is not None:
                svm["exact"]["zero_gap"] = self.svm_zero_gap or None
            out["svm"] = svm
        out["exact"] = True
        out["certificate"] = self.path
        out["certificate_valid"] = self.check.valid
        out["certificate_reason"] = self.check.reason
        out["certificate_checks"] = list(self.check.checks)
        out["probabilities_exact_from_floats"] = bool(self.float_report.instance.probs_exact_from_floats)
        out["seconds"] = self.seconds
        out["stages"] = {**out.get("stages", {}), **self.stages}
        if self.excess is not None:
            out["excess_loss"] = dict(self.excess, certificate_checked=self.check.valid and "q_nonzeros" in self.excess)
        if self.why_not is not None:
            out.update(self.why_not)
        if self.split is not None:
            out["split"] = dict(self.split, certificate_checked=self.check.valid and "split" in self.certificate)
        return out

    def _compat_json(self) -> dict:
        """The exact verdict on (4) with the system's size, rank and primes, and y^T E of a violation."""
        v = self.compatibility
        rank = getattr(v.witness, "rank", None)
        n_eq = self.float_report.subspace.system.n_eq
        out = {**v.to_json(), "n_eq": n_eq, "dim_F": rank, "null_space_dim": None if rank is None else n_eq - rank,
               "primes": list(self.primes),
               "probabilities_exact_from_floats": bool(self.float_report.instance.probs_exact_from_floats)}
        if isinstance(v.witness, ViolatingNullVector) and self.E is not None:
            yE = violation_exponents(self.float_report.subspace.system, v.witness.y, self.primes, self.E)
            out["violation"] = " + ".join(f"({fraction_str(x)})*log({p})" for p, x in yE.items())
        return out


def violation_exponents(system, y: dict, primes: tuple, E: np.ndarray) -> dict:
    r""":math:`y^\top E` as ``{p: Fraction}`` (its nonzero entries): :math:`y^\top b = \sum_p \log p\,(y^\top E)_p`."""
    from fractions import Fraction

    rows = {(int(j), int(z)): i for i, (j, z) in enumerate(zip(system.eq_context, system.eq_token))}
    yE: dict[int, Fraction] = {}
    for key, val in y.items():
        for pi, p in enumerate(primes):
            e = int(E[rows[key], pi])
            if e:
                yE[p] = yE.get(p, Fraction(0)) + Fraction(val) * e
    return {p: x for p, x in yE.items() if x}


def _w_star(instance: NTPInstance, compat: Verdict, primes: tuple, E: np.ndarray,
            mode: str) -> tuple[WStarClosedForm | None, str]:
    if compat.holds is not True:
        return None, "not compatible: W* does not exist"
    n_eq = len(E)
    if not any(E.ravel()):  # b = 0: W* = 0, whatever the size
        return WStarClosedForm(instance, primes, {p: {} for p in primes}), ""
    work = n_eq * max(1, len(primes))
    if mode == "never":
        return None, "not requested"
    if mode == "auto" and (n_eq > W_STAR_MAX_ROWS or work > W_STAR_MAX_WORK):
        return None, (f"skipped: r = {n_eq} equality rows and {len(primes)} primes exceed the automatic "
                      f"limit (r <= {W_STAR_MAX_ROWS}, r * primes <= {W_STAR_MAX_WORK}); call "
                      "ntpcert.exact.compatibility.w_star_closed_form(instance)")
    return w_star_closed_form(instance), ""


def exact_certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = DEFAULT_SOLVER,
    progress: bool | None = None,
    certificate_out: str | None = None,
    w_star: str = "auto",
    separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
    use_lemma1: bool = True,
    excess: bool = False,
    why_not: Callable[..., tuple[dict, dict]] | None = None,
    source: dict | None = None,
    split: bool = False,
    zero_gap: bool = False,
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
        refuses is not written (the report says INVALID and why, and ``path`` is None). A certificate over
        :data:`~ntpcert.certificate.format.MAX_CERTIFICATE_BYTES`, which ``ntpcert verify`` and
        ``tools/ntpcert_check.py`` would refuse as too large, is not written either: :class:`InputError`
        says so, naming the size and the cap (``certify`` exits 2), before the independent check runs.
    w_star : {"auto", "always", "never"}
        Closed form of W* (``auto``: small systems only, see ``W_STAR_MAX_ROWS``).
    separability_solver : {"auto", "structured", "highs"}
        The solver that decides separability in the float stage (:mod:`ntpcert.pipeline.decide`).
    use_lemma1 : bool
        Decide by Lemma 1 when it applies (default); false: explicit witnesses (a feasible W, null vectors).
    excess : bool
        Also certify the excess-loss bracket (section ``excess``; instances up to
        :data:`~ntpcert.pipeline.excess_certificate.AUTO_MAX_CELLS` cells). Off by default, as
        ``ntpcert certify --exact`` without ``--excess``: the bracket can cost more than the verdicts.
    why_not : callable, optional
        Explains negative verdicts: called as ``why_not(instance, compatible=, violating=, separable=,
        ray=, system=)`` with the exact verdicts and witnesses, it returns ``(keys, sections)``: JSON
        keys for the report and certificate sections, which are written and checked with the rest
        (:func:`ntpcert.pipeline.explain.why_not_with_sections`, passed in by ``certify --exact``).
    split : bool
        When the data are not separable, also make the split of the out-of-support pairs exact and write it
        as the optional section ``split`` (:mod:`ntpcert.pipeline.split_section`; ``certify --exact`` does).
    zero_gap : bool
        Close the NTP-SVM's gap to exactly 0 with a rational KKT pair where the active set's system is small
        enough (:mod:`ntpcert.exact.svm_kkt`; ``certify --exact --zero-gap``): W^mm itself, its rationals
        often far longer than the positive gap's dyadics; where that fails, the positive gap stands and
        ``svm_zero_gap`` says why.
    source : dict, optional
        The certificate's ``source`` section (:mod:`ntpcert.certificate.provenance`): the model files the
        instance was read from, by SHA-256.
    """
    t0 = time.perf_counter()
    if instance.token_multiplicity is not None:
        raise InputError(MULTIPLICITY_REFUSED)
    if certificate_out is not None:
        check_output_file(certificate_out, "certificate_out")  # fail before the work, not after it
        _check_writable_sizes(instance, certificate_out)
    # no least-squares point once (4) is refuted exactly: W* does not exist, and the fit is the float
    # stage's costliest part on large corpora
    rep = certify(instance, svm=svm, solver=solver, progress=progress, separability_solver=separability_solver,
                  use_lemma1=use_lemma1, fit_when_refuted=False, svm_work=None,
                  svm_certificate="exact")  # the exact SVM stage reuses the solver's exact gap bound
    stages = Stages(4, progress, desc="exact")
    primes, E = prime_exponents(instance)
    try:
        with stages.stage("exact compatibility", key="exact_compatibility"):
            compat = _compatibility(instance, rep)
            wstar, note = _w_star(instance, compat, primes, E, w_star)
        bounder = None
        zero_gap_note = ""
        with stages.stage("exact separability", key="exact_separability"):
            sep, bounder = _separability(instance, rep)
        with stages.stage("exact NTP-SVM gap", key="exact_svm_gap"):
            bound = None
            if sep.holds and rep.svm is not None:
                bound = rep.svm.exact_bound  # the structured solver's own exact bound, if it made one
                if bound is None or not bound.primal_feasible:
                    bounder = bounder if bounder is not None else ExactSVMBounder(instance)
                    bound = exact_svm_bound(instance, rep.svm.W, rep.svm.dual, bounder=bounder)
                if zero_gap and bound is not None and bound.primal_feasible and bound.gap != 0:
                    from ntpcert.exact.svm_kkt import zero_gap_bound

                    exact_pair, zero_gap_note = zero_gap_bound(instance, rep.svm.dual)
                    if exact_pair is not None:
                        bound = exact_pair
                    else:
                        zero_gap_note = f"no exact KKT pair ({zero_gap_note}): the positive gap stands"
        ex_key, ex_obj = None, None
        if excess:  # the excess-loss bracket, certified (ntpcert.pipeline.excess_certificate)
            from ntpcert.pipeline.excess_certificate import excess_key

            te = time.perf_counter()
            ex_key, ex_obj = excess_key(instance, exact=True, check=False, separable=sep.holds)
            stages.seconds["excess_bracket"] = time.perf_counter() - te
        why_keys, why_sections = None, {}
        if why_not is not None and (compat.holds is False or sep.holds is False):
            tw = time.perf_counter()
            why_keys, why_sections = why_not(
                instance, compatible=compat.holds,
                violating=compat.witness.y if isinstance(compat.witness, ViolatingNullVector) else None,
                separable=sep.holds, ray=sep.witness.ray if isinstance(sep.witness, FarkasRay) else None,
                system=rep.subspace.system)
            stages.seconds["why_not"] = time.perf_counter() - tw
        split_key, split_sec = None, None
        if split and sep.holds is not True:  # the split of the pairs, exact (ntpcert.pipeline.split_section)
            from ntpcert.pipeline.split_section import exact_split_section

            ts = time.perf_counter()
            split_key, split_sec = exact_split_section(instance)
            stages.seconds["split"] = time.perf_counter() - ts
        with stages.stage("independent check", key="independent_check"):
            # one encoding of the (large) certificate serves its checksum and the file
            body = certificate_body(instance, compat, sep, bound, wstar, primes, E)
            if ex_obj is not None and hasattr(ex_obj, "section"):  # certified (not the float fallback)
                body["excess"] = ex_obj.section
            body.update(why_sections)
            if split_sec is not None:
                body["split"] = split_sec
            if source is not None:
                body["source"] = source
            cert, text = seal_canonical(body)
            if certificate_out is not None:  # a file no checker would read is never written
                _check_writable(text, certificate_out)
            check_produced(cert)  # the table verify reads: a field it would refuse is never written
            # the checksum over the text to be written, not a second encoding of cert
            check = verify_certificate(cert, sealed_text=text if text.startswith('{"checksum":') else None)
            if certificate_out is not None and check.valid:  # its checksum checked just now
                try:
                    save(cert, certificate_out, reseal=False, canonical=text)
                except CertificateTooLarge as err:  # the indented form of a small one, in principle
                    raise InputError(f"certificate_out: {err}; nothing written") from None
            written = certificate_out if check.valid else None  # a certificate its checker refuses is not written
    finally:
        stages.close()
    return ExactReport(rep, compat, sep, primes, E, wstar, note, bound, cert, check, written,
                       time.perf_counter() - t0, dict(stages.seconds), ex_key, why_keys, split_key, zero_gap_note)


def _check_writable_sizes(instance: NTPInstance, path: str) -> None:
    """:class:`InputError` before any work when the instance alone takes more than the size cap of a
    certificate (:func:`~ntpcert.certificate.encode.record_size_lower_bound`)."""
    least, cap = record_size_lower_bound(instance), jsonio.MAX_CERTIFICATE_BYTES
    if least > cap:
        raise InputError(f"certificate_out: the certificate for {path!r} would take at least {least} bytes for the "
                         f"instance alone (m = {instance.m}, d = {instance.d}, V = {instance.V}), over the cap of "
                         f"{cap} bytes (MAX_CERTIFICATE_BYTES) that ntpcert verify and tools/ntpcert_check.py read; "
                         "nothing written")


def _check_writable(text: str, path: str) -> None:
    """:class:`InputError` when the canonical text of a certificate is over the size cap of its readers."""
    try:
        check_size(text, f"the certificate for {path!r}")
    except CertificateTooLarge as err:
        raise InputError(f"certificate_out: {err}, which ntpcert verify and tools/ntpcert_check.py refuse as too "
                         "large to check; nothing written") from None


#: The whole-system exact test (fraction-free null space of G) is run only up to this many rows.
EXACT_FULL_MAX_ROWS = 2500


def _compatibility(instance: NTPInstance, rep: Report) -> Verdict:
    """The float stage's verdict on (4) with an exact witness, or, when it had none, a tall system's
    particular solutions or the whole-system exact test (when the system is small enough)."""
    dec = rep.compatible
    r = rep.subspace.system.n_eq
    if dec.is_exact and dec.holds is not None and isinstance(dec.witness, (ParticularSolutions, ViolatingNullVector,
                                                                           NoEquations, EmbeddingsFullRank)):
        return dec
    if dec.holds is not False:
        # a tall system: one solve per prime in the column space, instead of a null-space basis of
        # about r vectors that the certificate would list and the checker re-check
        tall = check_compatibility_by_columns(instance)
        if tall is not None:
            rank, particular = tall
            w = ParticularSolutions(particular, rank)
            return Verdict(True, dataclasses.replace(w, text=f"exact: {w.describe()}"))
    if dec.is_exact and dec.holds is not None:
        return dec
    if r <= EXACT_FULL_MAX_ROWS:
        return compatibility_exact(instance)
    return Verdict.undetermined(f"{dec.reason}; the whole-system exact test is limited to r <= {EXACT_FULL_MAX_ROWS} "
                                f"equality rows (r = {r})")


def _separability(instance: NTPInstance, rep: Report) -> tuple[Verdict, ExactSVMBounder | None]:
    """Lemma 1's rank certificate or the float stage's Farkas ray (both exact as found; the checker checks
    them again), a feasible point from the NTP-SVM or the float stage made exact, else the HiGHS ray LP
    on small instances."""
    dec = rep.separable
    if dec.is_exact and dec.holds is not None:
        return dec, None
    candidates = [W for W in (rep.svm.W if rep.svm is not None else None, getattr(dec.witness, "W", None))
                  if W is not None]
    notes = []
    bounder = ExactSVMBounder(instance) if candidates else None
    for W in candidates:
        made = separability_exact(instance, W, try_ray=False, bounder=bounder)
        if made.holds:
            return made, bounder
        notes.append(made.reason)
    if instance.V * instance.m <= RAY_LP_MAX_ENTRIES:
        made = separability_exact(instance, None)
        if made.holds is False or not notes:
            return made, bounder
        notes.append(made.reason)
    else:
        notes.append(f"{dec.reason}; the HiGHS ray LP is not tried on V * m > {RAY_LP_MAX_ENTRIES}")
    return Verdict.undetermined("; ".join(notes)), bounder


#: The HiGHS Farkas-ray LP has V * m variables; it is tried only up to this many.
RAY_LP_MAX_ENTRIES = 200_000


__all__ = ["ExactReport", "build_certificate", "exact_certify"]
