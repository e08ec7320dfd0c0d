r"""Witnesses that make float verdicts definite, each checked exactly (or with a stated error bound).

The float pipeline answers "yes" or "no" only with a witness; everything else is undetermined.

**Compatibility, rank-deficient case.** When :math:`A_{eq}` may be rank deficient
(:class:`~ntpcert.rows.subspace.Subspace` certifies rank at least :math:`\rho`; :math:`k = r - \rho`
directions are in doubt), the near-null eigenvectors :math:`N` (shape (r, k)) are turned into a
rational basis: :math:`N^\top` is brought to reduced row-echelon form on :math:`k` pivot columns
chosen by pivoted QR, each entry is rounded to a fraction with denominator at most
``NULL_MAX_DENOMINATOR``, and each row is scaled to integers :math:`y`. A row counts only when
:math:`A_{eq}^\top y = 0` holds **exactly** (integer coefficients times the dyadic embeddings, in
exact arithmetic). For such y, :math:`y^\top b = \log \prod_i (c_{j_i,z_i}/c_{j_i,a_i})^{y_i}` with the
exact integer count ratios, so :math:`y^\top b = 0` iff that product of rationals is exactly 1:

* a null vector whose product is not 1 proves "not compatible";
* :math:`k` independent exact null vectors span the whole left null space (the rank is at least
  :math:`\rho`), so when all their products are 1 the data are compatible.

Otherwise the verdict stays undetermined, and ``ntpcert certify --exact`` settles it.

**Separability "no".** HiGHS reporting infeasibility is not a witness. A "no" needs a Farkas ray
verified exactly; the structured solver extracts one from its diverging dual iterates
(:mod:`ntpcert.solve.structured.farkas`).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ntpcert.exact.logsum import log_combination_sign
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import CompatibilityResult, Subspace
from ntpcert.util.numbers import lcm_all

#: Largest denominator of a rounded null-vector entry.
NULL_MAX_DENOMINATOR = 1 << 16
#: A rounded entry must agree with the float one to this, relative to the row's largest entry (loose is
#: safe: every rounded vector is checked exactly).
NULL_ROUNDING_TOL = 1e-6
#: Null vectors with an integer entry above this, or more near-null directions than this, are not tried.
NULL_MAX_ENTRY = 1 << 20
NULL_MAX_DIRECTIONS = 2000
#: ... and not on a near-null basis with more than this many entries (r·k): rounding it costs seconds.
NULL_MAX_WORK = 200_000
#: The exact products of count ratios are formed only up to this many bits.
PRODUCT_MAX_BITS = 1 << 22


def rational_null_candidates(N: np.ndarray) -> list[np.ndarray | None] | None:
    """Integer vectors (int64 arrays of shape (r,)), one per row of the reduced echelon form of
    ``N.T`` (N of shape (r, k)), or None for a row that does not round cleanly; None when the
    echelon form cannot be formed."""
    from scipy.linalg import qr, solve

    r, k = N.shape
    if k == 0:
        return []
    _, _, piv = qr(N.T, mode="economic", pivoting=True)
    cols = np.sort(piv[:k])
    B = N.T[:, cols]  # (k, k)
    try:
        R = solve(B, N.T)  # identity at the pivot columns
    except (np.linalg.LinAlgError, ValueError):
        return None
    out: list[np.ndarray | None] = []
    for row in R:
        out.append(_integer_row(row))
    return out


def _integer_row(row: np.ndarray) -> np.ndarray | None:
    scale = float(np.abs(row).max())
    if not np.isfinite(scale) or scale == 0.0:
        return None
    row = row / scale
    nz = np.flatnonzero(np.abs(row) > NULL_ROUNDING_TOL)
    fr = {int(i): Fraction(float(row[i])).limit_denominator(NULL_MAX_DENOMINATOR) for i in nz}
    if any(abs(float(f) - float(row[i])) > NULL_ROUNDING_TOL for i, f in fr.items()):
        return None
    den = lcm_all(f.denominator for f in fr.values())
    ints = np.zeros(row.size, dtype=np.int64)
    for i, f in fr.items():
        v = f.numerator * (den // f.denominator)
        if abs(v) > NULL_MAX_ENTRY:
            return None
        ints[i] = v
    return ints


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


def settle_compatibility(subspace: Subspace, comp: CompatibilityResult) -> CompatibilityResult:
    """Turn an undetermined float compatibility verdict into a definite one where an exact null-vector
    witness exists (see the module doc); otherwise return it unchanged, saying what would settle it."""
    import dataclasses

    if comp.holds is not None:
        return comp
    N = subspace.near_null
    system = subspace.system
    if N is None or N.shape[1] > NULL_MAX_DIRECTIONS or N.size > NULL_MAX_WORK:
        return dataclasses.replace(comp, by=comp.by + "; too many directions to make exact here: run "
                                                      "'ntpcert certify DATA --exact' to decide it")
    cands = rational_null_candidates(N)
    exact_null = [] if cands is None else [y for y in cands if y is not None and is_exact_left_null(system, y)]
    signs = []
    for y in exact_null:
        s = log_odds_sign(system, y)
        if s:
            b = system.log_odds()
            return dataclasses.replace(
                comp, holds=False,
                by=f"exact left null vector y of A_eq ({int(np.count_nonzero(y))} non-zeros) with "
                   f"y^T b = {float(y @ b):.6g} != 0 (sign checked against its rounding bound)")
        signs.append(s)
    if cands is not None and len(exact_null) == N.shape[1] and all(s == 0 for s in signs):
        return dataclasses.replace(
            comp, holds=True,
            by=f"the {N.shape[1]} exact left null vectors of A_eq span its null space (rank certified "
               f"{subspace.certified_rank}) and every y^T b is exactly 0")
    found = 0 if cands is None else len(exact_null)
    return dataclasses.replace(
        comp, by=comp.by + f"; {found} of {N.shape[1]} directions made exact null vectors, all with y^T b = 0; "
                           "run 'ntpcert certify DATA --exact' to decide it")


__all__ = ["exact_left_null", "is_exact_left_null", "log_odds_product", "log_odds_sign", "rational_null_candidates",
           "settle_compatibility"]
