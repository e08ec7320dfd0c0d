r"""The independent checker of certificate files: its entry points and its result.

It re-derives every claim from the instance and the certificate alone, in exact integer and
rational arithmetic (python-flint), with no tolerance, and imports nothing that produced the
certificate (no solver, no LP, no float pipeline, no encoder): only the data model, the file format,
the decoders and exact arithmetic. An import-linter ``forbidden`` contract (``pyproject.toml``) keeps it
so: ``ntpcert.certificate.checker`` imports nothing from ``ntpcert.solve``, ``ntpcert.rows``,
``ntpcert.pipeline``, :mod:`ntpcert.certificate.encode` or the producing modules of ``ntpcert.exact``.
Large integer matrix products are computed exactly with float64 BLAS on limbs
small enough that every product and partial sum is an integer below :math:`2^{52}` (so no
rounding can occur); they only screen the margins (6b), each of which is then proven from an
exact integer lower bound or settled in Python integers. What it checks:

* **schema** (first, before anything else): :func:`ntpcert.certificate.structure.check_schema`,
  every key of every section known and present, every value of its kind *type-exactly* (``1`` is
  not ``true``), canonical rationals, shapes that agree with the header. Parsing a file has already
  refused repeated keys, non-finite numbers, oversized integer literals and files over
  :data:`~ntpcert.certificate.format.MAX_CERTIFICATE_BYTES`.
* **checksum**: SHA-256 of the canonical JSON.
* **instance**: the embedded instance has the recorded fingerprint; with DATA, DATA has it too and
  the same ``name``, ``token_names`` and ``context_names``; the header ``m``, ``d``, ``V`` and
  ``probabilities_exact_from_floats`` are those of the instance checked against. The verdict says
  which one that is (:attr:`CheckResult.instance_source`).
* **compatibility, header**: ``n_eq`` is the number r of equality rows and ``primes`` the primes of
  the count ratios, both recomputed, whatever the claim.
* **compatibility, claim true**: the listed vectors y satisfy :math:`A_{eq}^\top y = 0` exactly
  (checked token by token on the contexts they touch), are independent, and with ``dim_F``
  account for all of :math:`\mathrm{null}(A_{eq}^\top)`; and :math:`Y^\top E = 0` for the prime-exponent
  matrix E recomputed from the exact probabilities. ``dim_F`` is checked as the exact rank of
  :math:`G = A_{eq}A_{eq}^\top`, or, with ``rank_modulus`` p, as the rank of G mod p (a lower bound on
  rank G, while the independent null vectors bound it above, so both are exact). With
  ``embeddings_rank_modulus`` p (Lemma 1): :math:`d \ge m` and H has rank m mod p, so H and hence
  :math:`A_{eq}` have full row rank. Optional ``W_star``: :math:`G g_p = E_{:,p}` for every prime.
* **compatibility, claim true, tall systems** (``particular_solutions``): for every prime whose
  exponents move, a rational :math:`R_p` with :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}` exactly, so
  :math:`W = \sum_p \log(p) R_p` solves (4); ``dim_F`` is the exact integer rank of :math:`A_{eq}`
  (on the columns its rows use), and the null-space basis is empty.
* **compatibility, claim false**: :math:`A_{eq}^\top y = 0` and :math:`y^\top E \ne 0`, so
  :math:`y^\top b \ne 0`; ``dim_F``, when given, is checked as rank G.
* **separability, claim true**: the rational W satisfies (6a) and every margin of (6b) is :math:`\ge 1`;
  or, with ``embeddings_rank_modulus`` p, :math:`d \ge m` and H has rank m mod p (Lemma 1).
* **separability, claim false**: the Farkas conditions of :mod:`ntpcert.exact.separability`.
* **svm**: W primal feasible, a dual feasible, the gap :math:`\tfrac12\|W\|^2 - D(a) \ge 0` equals
  the claimed one, and each float bound is its exact quantity rounded outward:

  .. math::

     2\,\mathrm{gap} \le \text{distance\_bound}^2,\quad
     0 \le \text{norm\_lower}^2 \le 2D(a),\quad
     \|W\|_F^2 \le \text{norm\_upper}^2,\quad \text{norm\_lower} \le \text{norm\_upper},

  each also within a relative :data:`BOUND_RELATIVE_SLACK` of its quantity (so a bound is never
  looser than the rounding of the quantity it names).
* **excess** (optional): the excess-loss bracket, by :mod:`ntpcert.certificate.checker.excess` (q exactly
  dual feasible, the entropy and CE re-evaluated in ``arb`` balls of the checker's own against the
  claimed ends).
* **nuclear enclosure** (a file of the other kind, ``format`` ``ntpcert-nuclear-enclosure``): by
  :mod:`ntpcert.certificate.checker.nuclear`, whose notes become the checks (no claims).
* **why_not_separable / why_not_compatible** (optional): an irreducible non-separable set of contexts
  and an irreducible cycle of log-odds, by :mod:`ntpcert.certificate.checker.why_not` (the Farkas ray on
  exactly the set and an exact separating W for each one-context deletion; a null vector whose rows
  have rank one less than their number, with :math:`y^\top E \ne 0`).
* **split** (optional): which out-of-support pairs are implicit equalities of the recession cone (N) and
  which are separable (P), by :mod:`ntpcert.certificate.checker.split` (a rational D_P in the cone,
  positive on P; a rational vanishing combination negative on N).
* **source** (optional): ``source.vocabulary`` against the instance, by
  :mod:`ntpcert.certificate.checker.source` (V' is the instance's V, the observed tokens follow contexts,
  the representative follows none).
* **claims**: the summary claims equal (type-exactly, ``is``) the sections they summarise, and
  ``entropy_bound_reachable`` is their Kleene conjunction.

A certificate is INVALID at the first failed check, with a one-line reason that names the field. A
certificate over a size limit of the format (:data:`~ntpcert.certificate.format.LIMITS`: the file's bytes,
the cells of a sparse record) is neither valid nor invalid but too large to check here
(:attr:`CheckResult.too_large`, ``TOO LARGE`` from ``ntpcert verify``, its own exit status).
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field

from ntpcert.certificate.checker.common import Invalid, need
from ntpcert.certificate.checker.compatibility import check_compatibility
from ntpcert.certificate.checker.excess import check_excess
from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.certificate.checker.sections import check_claims, check_instance, check_separability, check_svm
from ntpcert.certificate.checker.nuclear import check_nuclear_enclosure, is_nuclear_enclosure
from ntpcert.certificate.checker.source import check_source
from ntpcert.certificate.checker.split import check_split_section
from ntpcert.certificate.checker.why_not import check_why_not
from ntpcert.certificate.jsonio import checksum, load, loads, sealed_text_matches, unlimited_int_digits
from ntpcert.certificate.schema import show
from ntpcert.certificate.structure import check_schema
from ntpcert.errors import CertificateError, CertificateTooLarge
from ntpcert.instance import NTPInstance

#: :attr:`CheckResult.instance_source` when the instance embedded in the certificate was checked against.
INSTANCE_EMBEDDED = "embedded"
#: :attr:`CheckResult.instance_source` when an instance given by the caller (``--data DATA``) was.
INSTANCE_DATA = "data"
#: ... and when a nuclear enclosure was checked against the support pattern it holds (no DATA given).
INSTANCE_PATTERN = "pattern"
#: How a report names each source.
INSTANCE_SOURCE_TEXT = {INSTANCE_EMBEDDED: "the embedded data (no DATA given)", INSTANCE_DATA: "the DATA given",
                        INSTANCE_PATTERN: "the support pattern it holds (no DATA given)"}


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`verify_certificate`.

    Attributes
    ----------
    valid : bool
    reason : str
        Why it is invalid (the first failed check, one line naming the field), or ``""``.
    checks : tuple of str
        The checks that passed, in order.
    claims : dict
        The certificate's claims, all checked, when it is valid; empty when it is not (the claims
        of an invalid certificate mean nothing, and are not handed on).
    seconds : float
    instance_source : {"embedded", "data", "pattern"}
        Which instance the certificate was checked against: the one embedded in it
        (:data:`INSTANCE_EMBEDDED`) or the one given by the caller (:data:`INSTANCE_DATA`); a nuclear
        enclosure without DATA, the support pattern it holds (:data:`INSTANCE_PATTERN`).
    too_large : bool
        Whether it was refused for a size limit of the format
        (:data:`~ntpcert.certificate.format.LIMITS`) before its claims were checked: ``valid`` is
        False then, and ``reason`` says which limit; its claims are neither confirmed nor refuted.
    """

    valid: bool
    reason: str
    checks: tuple[str, ...] = ()
    claims: dict = field(default_factory=dict)
    seconds: float = 0.0
    instance_source: str = INSTANCE_EMBEDDED
    too_large: bool = False

    @property
    def against(self) -> str:
        """The instance source in words: ``"the embedded data (no DATA given)"`` or ``"the DATA given"``."""
        return INSTANCE_SOURCE_TEXT[self.instance_source]




def _source(instance: NTPInstance | None) -> str:
    return INSTANCE_EMBEDDED if instance is None else INSTANCE_DATA


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@unlimited_int_digits()  # witnesses hold integers of any length; the limit is restored after
def verify_certificate(cert: dict, instance: NTPInstance | None = None, *,
                       sealed_text: str | None = None) -> CheckResult:
    """Check a parsed certificate against ``instance`` (default: the one embedded in it).

    The schema first (:func:`~ntpcert.certificate.structure.check_schema`), then the checksum, the
    instance and every section; INVALID at the first failure, with a one-line reason.

    ``sealed_text``: the canonical text ``cert`` was just sealed from and is about to be written
    (:func:`~ntpcert.certificate.jsonio.seal_canonical`, as ``certify --exact`` does). The checksum
    is then taken over those bytes, the file's own, instead of encoding ``cert`` a second time (about
    2 s on a 43 MB certificate); the text must begin with that checksum field. Every section is still
    checked on ``cert`` itself. A file read back is checked without it (:func:`verify_file`)."""
    t0 = time.perf_counter()
    source = _source(instance)
    checks: list[str] = []

    def invalid(reason: str) -> CheckResult:
        return CheckResult(False, _one_line(reason), tuple(checks), {}, time.perf_counter() - t0, source)

    if is_nuclear_enclosure(cert):  # the other file kind: a nuclear-norm enclosure (checker.nuclear)
        source = INSTANCE_PATTERN if instance is None else source
        try:
            checks.extend(check_nuclear_enclosure(cert, None if instance is None else instance.support_mask().T.tolist()))
        except Invalid as err:
            return invalid(str(err))
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as err:
            return invalid(f"malformed enclosure: {type(err).__name__}: {err}")
        return CheckResult(True, "", tuple(checks), {}, time.perf_counter() - t0, source)
    try:
        need(type(cert) is dict, "not a certificate object")
        check_schema(cert)
        checks.append("schema")
        if sealed_text is None:
            need(cert["checksum"] == checksum(cert), "checksum mismatch: the file was altered or truncated")
        else:
            need(sealed_text_matches(cert, sealed_text), "checksum mismatch: the sealed text is not this certificate's")
        checks.append("checksum")
        inst = check_instance(cert, instance)
        checks.append(f"instance {show(inst.name)} {inst.fingerprint()[:16]}...: fingerprint, header and names "
                      f"agree with {'the embedded data' if instance is None else 'DATA'}")
        check_source(cert.get("source"), inst, checks)
        ex = ExactInstance(inst)
        compat = check_compatibility(cert["compatibility"], ex, checks)
        sep = check_separability(cert["separability"], ex, checks)
        svm = check_svm(cert["svm"], ex, checks)
        why = check_excess(cert.get("excess"), inst, checks, ex)
        need(not why, why)
        why = check_why_not(cert, ex, compat, sep, checks)
        need(not why, why)
        why = check_split_section(cert, ex, sep, checks)
        need(not why, why)
        check_claims(cert["claims"], compat, sep, svm)
        checks.append("claims agree with the witnesses")
    except Invalid as err:
        return invalid(str(err))
    except CertificateTooLarge as err:
        return _too_large(err, source)
    except CertificateError as err:
        return invalid(f"malformed certificate: {err}")
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, OverflowError,
            RecursionError) as err:
        return invalid(f"malformed certificate: {type(err).__name__}: {err}")
    return CheckResult(True, "", tuple(checks), copy.deepcopy(cert["claims"]), time.perf_counter() - t0, source)


def _too_large(err: CertificateTooLarge, source: str) -> CheckResult:
    return CheckResult(False, _one_line(str(err)), instance_source=source, too_large=True)


def verify_text(text: str, instance: NTPInstance | None = None) -> CheckResult:
    """Parse and check certificate text; an unreadable text is an invalid certificate, one over a size
    limit too large (:attr:`CheckResult.too_large`)."""
    try:
        cert = loads(text)
    except CertificateTooLarge as err:
        return _too_large(err, _source(instance))
    except CertificateError as err:
        return CheckResult(False, _one_line(str(err)), instance_source=_source(instance))
    return verify_certificate(cert, instance)


def verify_file(path, instance: NTPInstance | None = None) -> CheckResult:
    """Read and check a certificate file (raises InputError only when the file cannot be read; a file
    over :data:`~ntpcert.certificate.format.MAX_CERTIFICATE_BYTES` is refused unread as too large,
    :attr:`CheckResult.too_large`)."""
    try:
        cert = load(path)
    except CertificateTooLarge as err:
        return _too_large(err, _source(instance))
    except CertificateError as err:
        return CheckResult(False, _one_line(str(err)), instance_source=_source(instance))
    return verify_certificate(cert, instance)


def verify(certificate: dict | str | os.PathLike, instance: NTPInstance | None = None) -> CheckResult:
    """Check a certificate, given as a parsed object or a file path, against ``instance``
    (default: the instance embedded in the certificate; :attr:`CheckResult.instance_source` says which).

    >>> from ntpcert import verify
    >>> verify("cert.json").valid        # doctest: +SKIP
    True
    """
    if isinstance(certificate, dict):
        return verify_certificate(certificate, instance)
    return verify_file(certificate, instance)


__all__ = ["INSTANCE_DATA", "INSTANCE_EMBEDDED", "INSTANCE_SOURCE_TEXT", "CheckResult", "verify", "verify_certificate",
           "verify_file", "verify_text"]
