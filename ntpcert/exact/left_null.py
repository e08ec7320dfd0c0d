r"""Exact checks of a left null vector y of the equality rows: :math:`A_{eq}^\top y = 0` and the sign of
:math:`y^\top b`.

A violating null vector (:math:`A_{eq}^\top y = 0` with :math:`y^\top b \ne 0`) refutes (4) (Farkas'
lemma for linear equations); every engine that finds one (pairs, parts, the Gram matrix mod p, the
frequent-token reduction, the float null space) checks it here, in integers and ball arithmetic, before
it is reported.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ntpcert.exact.logsum import log_combination_sign
from ntpcert.rows.kesler import KeslerSystem

#: The exact products of count ratios are formed only up to this many bits.
PRODUCT_MAX_BITS = 1 << 22


def is_exact_left_null(system: KeslerSystem, y: np.ndarray) -> bool:
    """Whether :math:`A_{eq}^\\top y = 0` exactly, for an integer vector y of shape (r,)."""
    from ntpcert.errors import ExactArithmeticError
    from ntpcert.exact.dyadic import exact_matmul

    U = system.eq_coefficients(y.astype(np.float64))  # integers well below 2**53: exact
    try:
        return exact_matmul(U, system.instance.embeddings).sq_norm() == 0
    except ExactArithmeticError:
        return False


def exact_left_null(system: KeslerSystem, y: np.ndarray) -> bool:
    r""":math:`A_{eq}^\top y = 0` exactly, for an integer vector y of shape (r,), touching only its rows:
    for every token, the combination of the embeddings of the contexts whose rows name it vanishes
    (one integer matrix product, :func:`ntpcert.exact.rational.combinations_vanish`)."""
    from ntpcert.exact.rational import combinations_vanish

    acc: dict[int, dict[int, int]] = {}  # token -> context -> coefficient
    for i in np.flatnonzero(y):
        j, z, a, e = int(system.eq_context[i]), int(system.eq_token[i]), int(system.eq_anchor[i]), int(y[i])
        acc.setdefault(z, {})[j] = acc.setdefault(z, {}).get(j, 0) + e
        acc.setdefault(a, {})[j] = acc.setdefault(a, {}).get(j, 0) - e
    return combinations_vanish(system.instance.embeddings, acc)


def log_odds_sign(system: KeslerSystem, y: np.ndarray) -> int | None:
    r"""The sign of :math:`y^\top b` (0 exactly when it vanishes), or None when undecided.

    :math:`y^\top b = \sum_i y_i(\log c_{z_i} - \log c_{a_i})` is first evaluated in floats; with
    at most one rounding in each logarithm and :math:`n` terms summed, its error is below
    :math:`\beta = 4(n + 2)\,\epsilon \sum_i |y_i|(|\log c_{z_i}| + |\log c_{a_i}|)`, so
    :math:`|y^\top b| > \beta` decides the sign. Otherwise the prime exponents
    :math:`e = \sum_i y_i(\nu(c_{z_i}) - \nu(c_{a_i}))` are summed (:func:`log_odds_exponents`):
    :math:`y^\top b = \sum_p e_p \log p` is 0 iff e = 0 (logarithms of primes are independent over
    :math:`\mathbb Q`), and its sign otherwise comes from that short sum evaluated in ball arithmetic
    (:func:`ntpcert.exact.logsum.log_combination_sign`: exponents of any size). Only when a count does not
    factor is the product of the ratios themselves formed (:func:`log_odds_product`): with many
    terms that product has millions of bits, and forming it is quadratic (95 s for 1,052 null
    vectors of a compatible corpus of 13,861 rows before the exponents were summed)."""
    inst = system.instance
    ratios: dict[int, dict[int, int]] = {}
    value, scale, n = 0.0, 0.0, 0
    for i in np.flatnonzero(y):
        j, z, a, e = int(system.eq_context[i]), int(system.eq_token[i]), int(system.eq_anchor[i]), int(y[i])
        c = ratios.get(j)
        if c is None:
            c = ratios[j] = inst.ratio_integers(j)
        lz, la = math.log(c[z]), math.log(c[a])
        value += e * (lz - la)
        scale += abs(e) * (abs(lz) + abs(la))
        n += 1
    beta = 4 * (n + 2) * float(np.finfo(np.float64).eps) * scale
    if abs(value) > beta:
        return 1 if value > 0 else -1
    exps = log_odds_exponents(system, y)
    if exps is not None:
        return log_combination_sign(exps)
    prod = log_odds_product(system, y)
    if prod is None:
        return None
    return (prod[0] > prod[1]) - (prod[0] < prod[1])


@functools.lru_cache(maxsize=1 << 16)
def _factors(n: int) -> tuple[tuple[int, int], ...] | None:
    """``factorise(n)`` as sorted pairs, cached (counts repeat across contexts and null vectors);
    None when n has a composite factor too large to factor."""
    from ntpcert.errors import InputError
    from ntpcert.util.numbers import factorise

    try:
        return tuple(sorted(factorise(n).items()))
    except InputError:
        return None


def log_odds_exponents(system: KeslerSystem, y: np.ndarray) -> dict[int, int] | None:
    r"""``{p: e_p}`` (non-zero only) with :math:`\prod_i (c_{j_i,z_i}/c_{j_i,a_i})^{y_i} = \prod_p p^{e_p}`
    exactly, from the factorised counts; None when some count does not factor."""
    inst = system.instance
    ratios: dict[int, dict[int, int]] = {}
    out: dict[int, int] = {}
    for i in np.flatnonzero(y):
        j, z, a, e = int(system.eq_context[i]), int(system.eq_token[i]), int(system.eq_anchor[i]), int(y[i])
        c = ratios.get(j)
        if c is None:
            c = ratios[j] = inst.ratio_integers(j)
        for count, sign in ((c[z], e), (c[a], -e)):
            f = _factors(int(count))
            if f is None:
                return None
            for p, k in f:
                out[p] = out.get(p, 0) + sign * k
    return {p: e for p, e in out.items() if e}


def log_odds_product(system: KeslerSystem, y: np.ndarray) -> tuple[int, int] | None:
    r"""``(num, den)`` with :math:`\prod_i (c_{j_i,z_i}/c_{j_i,a_i})^{y_i} = num/den` exactly
    (equal iff :math:`y^\top b = 0`); None when the integers would exceed ``PRODUCT_MAX_BITS``."""
    inst = system.instance
    ratios: dict[int, dict[int, int]] = {}
    factors = []
    bits = 0
    for i in np.flatnonzero(y):
        j, z, a, e = int(system.eq_context[i]), int(system.eq_token[i]), int(system.eq_anchor[i]), int(y[i])
        c = ratios.get(j)
        if c is None:
            c = ratios[j] = inst.ratio_integers(j)
        top, bottom = (c[z], c[a]) if e > 0 else (c[a], c[z])
        bits += abs(e) * (top.bit_length() + bottom.bit_length())
        if bits > PRODUCT_MAX_BITS:
            return None
        factors.append((top, bottom, abs(e)))
    num, den = 1, 1
    for top, bottom, e in factors:
        num *= top ** e
        den *= bottom ** e
    return num, den


__all__ = ["exact_left_null", "is_exact_left_null", "log_odds_exponents", "log_odds_product", "log_odds_sign"]
