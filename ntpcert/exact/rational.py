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



