r"""The checker's other sections: the instance, ``separability``, ``svm`` and the summary ``claims``.

* the instance checked against is the embedded one (its fingerprint recomputed) or the caller's, which
  must be the same instance with the same names;
* separability: a rational W with (6a) and every margin >= 1 (:mod:`ntpcert.certificate.checker.primal`),
  Lemma 1's rank of H, or a Farkas ray;
* svm: the primal-dual pair, its exact gap, and each float bound its exact quantity rounded outward
  (within :data:`BOUND_RELATIVE_SLACK`);
* claims: type-exactly the sections they summarise, and their Kleene conjunction.
"""

from __future__ import annotations

from fractions import Fraction

from ntpcert.certificate.checker.common import json_text, need, num_text, sqrt_text
from ntpcert.certificate.checker.compatibility import check_embeddings_rank_witness
from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.certificate.checker.primal import check_primal, dual_terms
from ntpcert.certificate.decode import (
    factored_rationals, instance_from_record, matrix_rationals, sparse_dict, sparse_rationals,
)
from ntpcert.certificate.schema import parse_rational, show
from ntpcert.exact.modular import is_modulus
from ntpcert.instance import NTPInstance
from ntpcert.util.logic import and3

#: Relative slack of the float bounds: a bound ``x`` of an exact :math:`\sqrt Q` must satisfy
#: :math:`x^2 \le Q(1+\epsilon)^2 + \delta` (upper bounds) or :math:`x^2 \ge Q(1-\epsilon)^2 - \delta`
#: (lower bounds). The writer rounds outward by a few ulps (:math:`2^{-50}` relative).
BOUND_RELATIVE_SLACK = Fraction(1, 2**40)
#: The absolute slack :math:`\delta` on the squares (covers subnormal quantities).
BOUND_ABSOLUTE_SLACK = Fraction(1, 2**1000)


def check_instance(cert: dict, given: NTPInstance | None) -> NTPInstance:
    """The instance checked against: the embedded one, or ``given``, which must equal it."""
    rec = cert["instance"]
    fp = rec["fingerprint"]
    embedded = instance_from_record(rec["embedded"])
    need(embedded.fingerprint() == fp,
          f"instance.fingerprint: names {fp[:16]}..., the embedded instance has {embedded.fingerprint()[:16]}...")
    if given is not None:
        need(given.fingerprint() == fp,
              f"the certificate speaks of instance {fp[:16]}..., but DATA is instance {given.fingerprint()[:16]}...")
        for key in ("name", "token_names", "context_names"):
            mine, theirs = getattr(embedded, key), getattr(given, key)
            need(mine == theirs, f"instance.embedded.{key}: {show(mine)} differs from DATA's {show(theirs)}")
        inst = given
    else:
        inst = embedded
    for key in ("m", "d", "V"):
        need(rec[key] == getattr(inst, key), f"instance.{key}: claims {show(rec[key])}, the instance has {getattr(inst, key)}")
    flag = bool(inst.probs_exact_from_floats)
    need(cert["probabilities_exact_from_floats"] is flag,
          f"probabilities_exact_from_floats: {show(cert['probabilities_exact_from_floats'])}, the instance has {flag}")
    return inst



def check_separability(sec: dict, ex: ExactInstance, checks: list[str]) -> bool | None:
    claim = sec["claim"]  # True, False or None: the schema chose this section's variant by it
    if claim is True and "embeddings_rank_witness" in sec:
        check_embeddings_rank_witness(sec, "separability", ex)
        checks.append(f"separable: H has rank m = {ex.m} (peeled triangular pivots and a core mod p, re-checked), "
                      "so every logit matrix is reachable (Lemma 1)")
    elif claim is True and "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        need(is_modulus(p), f"separability.embeddings_rank_modulus: {show(p)} is not a prime 2 <= p < 2^63")
        need(ex.m <= ex.d and ex.rank_H_mod(p) == ex.m,
              f"separability.embeddings_rank_modulus: H does not have rank m = {ex.m} mod {p}")
        checks.append(f"separable: H has full row rank (rank m = {ex.m} mod {p}, d >= m), so every logit matrix "
                      "is reachable (Lemma 1)")
    elif claim is True:
        W = matrix_rationals(sec["W"], (ex.V, ex.d), "separability.W")
        check_primal(ex, W, "separability.W")
        checks.append("separable: W satisfies (6a) exactly and every margin is >= 1")
    elif claim is False:
        a = sparse_dict(sec["ray"], "separability.ray")
        mass, _ = ex.aH_zero_and_sums(a, "separability.ray", require_zero_aH=True)
        need(mass > 0, "separability.ray: no mass off the supports")
        checks.append("not separable: Farkas ray verified (aH = 0, 1^T a_j = 0, a <= 0 off support, mass > 0)")
    else:
        checks.append("separability undetermined (nothing to check)")
    return claim


def _check_upper(x: float, Q: Fraction, name: str, what: str) -> None:
    r"""``x`` is :math:`\sqrt Q` rounded up: :math:`x \ge 0`, :math:`Q \le x^2 \le Q(1+\epsilon)^2 + \delta`."""
    need(x >= 0, f"{name}: {x!r} is negative")
    X = Fraction(x) ** 2
    need(X >= Q, f"{name}: {x!r} is below {what} = {sqrt_text(Q)}")
    need(X <= Q * (1 + BOUND_RELATIVE_SLACK) ** 2 + BOUND_ABSOLUTE_SLACK,
          f"{name}: {x!r} is not {what} = {sqrt_text(Q)} rounded up (relative slack 2^-40)")


def _check_lower(x: float, Q: Fraction, name: str, what: str) -> None:
    r"""``x`` is :math:`\sqrt{\max(Q, 0)}` rounded down: :math:`x \ge 0`,
    :math:`Q(1-\epsilon)^2 - \delta \le x^2 \le \max(Q, 0)`."""
    need(x >= 0, f"{name}: {x!r} is negative")
    X = Fraction(x) ** 2
    need(X <= max(Q, Fraction(0)), f"{name}: {x!r} is above {what} = {sqrt_text(max(Q, Fraction(0)))}")
    need(X >= Q * (1 - BOUND_RELATIVE_SLACK) ** 2 - BOUND_ABSOLUTE_SLACK,
          f"{name}: {x!r} is not {what} = {sqrt_text(Q)} rounded down (relative slack 2^-40)")


def check_svm(sec: dict | None, ex: ExactInstance, checks: list[str]) -> dict | None:
    r"""The NTP-SVM pair. With :math:`P = \tfrac12\|W\|_F^2` and :math:`D(a)` recomputed exactly,
    :math:`\mathrm{gap} = P - D(a) \ge 0` must equal the claimed one and
    :math:`\sqrt{2\,\mathrm{gap}} \le` distance_bound, :math:`0 \le` norm_lower :math:`\le \sqrt{2D(a)}`,
    :math:`\sqrt{2P} \le` norm_upper (each within the slack of its quantity)."""
    if sec is None:
        return None
    if "W" in sec:
        W = matrix_rationals(sec["W"], (ex.V, ex.d), "svm.W")
    else:
        W = factored_rationals(sec["W_factored"], (ex.V, ex.d), "svm.W_factored")
    primal = check_primal(ex, W, "svm.W")
    if "a" in sec:
        A = matrix_rationals(sec["a"], (ex.V, ex.m), "svm.a")
    else:
        A = sparse_rationals(sec["a_sparse"], (ex.V, ex.m), "svm.a_sparse")
    mass, sq = dual_terms(ex, A, "svm.a")
    dual = mass - sq / 2
    gap = primal - dual
    claimed = parse_rational(sec["gap"], "svm.gap")
    need(gap >= 0, f"svm: the pair gives a negative gap {num_text(gap)}, it cannot be feasible")
    need(gap == claimed, f"svm.gap: claimed {num_text(claimed)}, the pair gives {num_text(gap)}")
    dist, lo, hi = sec["distance_bound"], sec["norm_lower"], sec["norm_upper"]
    _check_upper(dist, 2 * gap, "svm.distance_bound", "sqrt(2 gap)")
    _check_lower(lo, 2 * dual, "svm.norm_lower", "sqrt(2 D(a))")
    _check_upper(hi, 2 * primal, "svm.norm_upper", "||W||_F")
    need(lo <= hi, f"svm.norm_upper: {hi!r} is below svm.norm_lower = {lo!r}")
    checks.append(f"NTP-SVM: exact gap {num_text(gap)}, ||W - W^mm||_F <= {dist:.3e}, ||W^mm||_F in [{lo:.12g}, {hi:.12g}]")
    return {"gap": sec["gap"], "distance_bound": dist, "norm_lower": lo, "norm_upper": hi}


def check_claims(claims: dict, compat: bool | None, sep: bool | None, svm: dict | None) -> None:
    """The summary claims equal the checked sections, type-exactly (``is``, never ``==``)."""
    need(claims["compatible"] is compat,
          f"claims.compatible: {show(claims['compatible'])} disagrees with the witness ({json_text(compat)})")
    need(claims["separable"] is sep,
          f"claims.separable: {show(claims['separable'])} disagrees with the witness ({json_text(sep)})")
    reach = and3(compat, sep)
    need(claims["entropy_bound_reachable"] is reach,
          f"claims.entropy_bound_reachable: {show(claims['entropy_bound_reachable'])}, but the compatibility and "
          f"separability claims give {json_text(reach)}")
    cs = claims["svm"]
    if svm is None:
        need(cs is None, "claims.svm: an object, but there is no svm section to support it")
        return
    need(sep is True, "svm: an NTP-SVM pair is only meaningful for separable data")
    need(cs is not None, "claims.svm: null, but the svm section certifies a bound")
    for key in ("gap", "distance_bound", "norm_lower", "norm_upper"):
        # same kinds by the schema (canonical strings or floats), so == is exact here
        need(cs[key] == svm[key], f"claims.svm.{key}: {show(cs[key])} differs from svm.{key} = {show(svm[key])}")


__all__ = ["BOUND_ABSOLUTE_SLACK", "BOUND_RELATIVE_SLACK", "check_claims", "check_instance", "check_separability",
           "check_svm"]
