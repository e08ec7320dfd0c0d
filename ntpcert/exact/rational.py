r"""Exact rationals: conversions between floats, Fractions, strings and python-flint matrices.

A finite float is the dyadic rational :math:`M 2^e` it stores (``float.as_integer_ratio``), so
embeddings convert exactly; counts are integers. Integer matrices are built fraction-free by
scaling each row by the least common multiple of its denominators.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import flint
import numpy as np

from ntpcert.errors import CertificateError, InputError


def frac(x) -> Fraction:
    """An exact Fraction from an int, a float (its dyadic value), a Fraction, a flint ``fmpq`` or
    ``fmpz``, or a string ``"p/q"``."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, flint.fmpq):
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, flint.fmpz):
        return Fraction(int(x))
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(float(x)):
            raise InputError(f"not a finite number: {x!r}")
        return Fraction(*float(x).as_integer_ratio())
    if isinstance(x, str):
        return parse_fraction(x)
    raise TypeError(f"cannot read {type(x).__name__} as an exact rational")


def fmpq(x) -> flint.fmpq:
    """A flint ``fmpq`` from anything :func:`frac` reads."""
    if type(x) is float and math.isfinite(x):  # the common case, without a Fraction in between
        return flint.fmpq(*x.as_integer_ratio())
    f = frac(x)
    return flint.fmpq(f.numerator, f.denominator)


def fmpq_list(values: np.ndarray) -> list[flint.fmpq]:
    """The entries of a finite float array, flattened in C order, as exact ``fmpq`` (their dyadic
    values); raises InputError on NaN/inf."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(arr)):
        raise InputError("not a finite number in the array")
    return [flint.fmpq(*x.as_integer_ratio()) for x in arr.tolist()]


def parse_fraction(text: str) -> Fraction:
    """Read ``"p"`` or ``"p/q"`` (integers, q > 0 written without sign; no decimals, spaces or
    exponents; any length)."""
    if not isinstance(text, str):
        raise CertificateError(f"expected a rational as a string, got {type(text).__name__} {text!r:.40}")
    num, sep, den = text.partition("/")
    try:
        if not _is_int(num) or (sep and not (den.isascii() and den.isdigit())):
            raise ValueError
        f = Fraction(_int(num), _int(den)) if sep else Fraction(_int(num))
    except (ValueError, ZeroDivisionError):
        raise CertificateError(f"not a rational 'p/q': {text!r:.60}") from None
    return f


def _int(digits: str) -> int:
    """Decimal digits to int without Python's length limit (flint parses in quasi-linear time)."""
    return int(flint.fmpz(digits)) if len(digits) > 1000 else int(digits)


def int_str(n: int) -> str:
    """Decimal digits of an int of any length."""
    return flint.fmpz(n).str() if n.bit_length() > 3000 else str(n)


def _is_int(s: str) -> bool:
    t = s[1:] if s[:1] == "-" else s
    return t.isascii() and t.isdigit()


def fraction_str(f) -> str:
    """``"p/q"`` (or ``"p"`` when q = 1) of an exact rational."""
    f = frac(f)
    num = int_str(f.numerator)
    return num if f.denominator == 1 else f"{num}/{int_str(f.denominator)}"


def float_matrix_to_fmpz_rows(A: np.ndarray) -> tuple[flint.fmpz_mat, list[int]]:
    """Exact fraction-free form of a float matrix: integer matrix ``N`` and per-row denominators
    ``D`` (powers of two) with ``A[i] = N[i] / D[i]`` exactly."""
    A = np.asarray(A, dtype=np.float64)
    rows, dens = [], []
    for row in A:
        ratios = [float(x).as_integer_ratio() for x in row]
        den = 1
        for _, q in ratios:
            den = max(den, q)  # all denominators are powers of two
        rows.append([p * (den // q) for p, q in ratios])
        dens.append(den)
    return flint.fmpz_mat(rows) if rows and rows[0] else flint.fmpz_mat(len(rows), A.shape[1] if A.ndim == 2 else 0), dens


def fmpq_mat_from(rows: Sequence[Sequence]) -> flint.fmpq_mat:
    """A flint ``fmpq_mat`` from nested sequences of exact-rational-like entries."""
    rows = list(rows)
    if not rows:
        return flint.fmpq_mat(0, 0)
    ncols = len(rows[0])
    return flint.fmpq_mat(len(rows), ncols, [fmpq(x) for r in rows for x in r])


def fmpq_mat_to_fractions(M: flint.fmpq_mat) -> list[list[Fraction]]:
    """Rows of a flint ``fmpq_mat`` as Fractions."""
    return [[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]


def dyadic_int_rows(H: np.ndarray) -> list[list[int]]:
    """Rows of the finite float matrix H (shape (n, d)) times one common power of 2, as exact
    Python ints: ``H = N / 2^s`` with the smallest s >= 0 that makes every entry an integer."""
    H = np.asarray(H, dtype=np.float64)
    if not np.all(np.isfinite(H)):
        raise InputError("not a finite number in the array")
    frac_, expo = np.frexp(H)
    M = (frac_ * 2.0**53).astype(np.int64)  # exact: |M| < 2^53
    e = expo.astype(np.int64) - 53
    nz = M != 0
    s = max(0, int(-e[nz].min())) if nz.any() else 0
    k = np.where(nz, e + s, 0)
    return [list(map(int.__lshift__, Mr, kr)) for Mr, kr in zip(M.tolist(), k.tolist())]


def combinations_vanish(H: np.ndarray, coeffs: dict[int, dict[int, int | Fraction]]) -> bool:
    r"""Whether :math:`\sum_j c_{t,j} h_j = 0` exactly for every t, with ``coeffs = {t: {j: c_tj}}``
    (rational c, rows :math:`h_j` of the float matrix H taken as the dyadic rationals they are).

    One integer matrix product (python-flint) over the rows that occur: the coefficients are
    scaled by the lcm of their denominators and the rows by one power of 2, neither of which changes
    whether a combination is zero."""
    ts = [t for t, row in coeffs.items() if any(row.values())]
    ctxs = sorted({int(j) for t in ts for j, c in coeffs[t].items() if c})
    if not ctxs:
        return True
    den = 1
    for t in ts:
        for c in coeffs[t].values():
            q = c.denominator if isinstance(c, Fraction) else 1
            if q != 1:
                den = den * q // math.gcd(den, q)
    ci = {j: i for i, j in enumerate(ctxs)}
    C = flint.fmpz_mat(len(ts), len(ctxs))
    for r, t in enumerate(ts):
        for j, c in coeffs[t].items():
            if c:
                C[r, ci[int(j)]] = int(c * den) if den != 1 else int(c)
    rows = dyadic_int_rows(np.asarray(H)[ctxs])
    return bool((C * flint.fmpz_mat(rows)).is_zero())

