r"""Exact arithmetic on float64 matrices, which are dyadic rationals, at BLAS speed.

Every finite float is :math:`M 2^e` with an integer :math:`|M| < 2^{53}`, so a float matrix is an exact
rational matrix. A product :math:`XY` of two float matrices is computed exactly by splitting

.. math:: X = \sum_s X_s\, 2^{E_X - b(s+1)}, \qquad Y = \sum_t Y_t\, 2^{E_Y - b(t+1)},

with integer-valued slices :math:`|X_s|, |Y_t| < 2^b`. If :math:`n\,2^{2b} \le 2^{53}` (n the inner
dimension), every entry of every partial sum of :math:`X_s Y_t` is an integer below :math:`2^{53}`, hence
represented exactly whatever order the BLAS adds in, so each slice product is exact. The slice
products are then gathered into base-:math:`2^b` limbs in int64 (:class:`LimbMatrix`), from which
squared norms, single entries and two-sided float enclosures are read off exactly.

The slicing itself is exact: scaling by a power of two is exact away from underflow (checked), and
:math:`R - \mathrm{trunc}(R)` is exact for every float R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ntpcert.errors import ExactArithmeticError, InputError

#: Largest number of slices a matrix may need before the exact product gives up (a float matrix
#: spanning more than ``MAX_SLICES * b`` binary orders of magnitude).
MAX_SLICES = 120

#: Widest slice, in bits; keeps products of two limbs and their chunked sums inside int64.
MAX_SLICE_BITS = 21


#: Slice width used for exact squared norms: limb products (42 bits) sum in int64 chunks of 2**18.
NORM_SLICE_BITS = 21

#: Limbs whose unit is below 2**ENCLOSURE_MIN_EXP are not added one by one in :meth:`LimbMatrix.enclosure`
#: (their floats could underflow); their total is bounded instead.
ENCLOSURE_MIN_EXP = -1000

#: Absolute width of :meth:`LimbMatrix.enclosure`, in bits below the largest entry.
ENCLOSURE_BITS = 80

#: Most slice products that may be accumulated into one int64 level (each below 2**53).
MAX_LEVEL_TERMS = 64

#: A left slice with at most this fraction of nonzero entries is multiplied as a sparse (CSR)
#: matrix: the repaired dual of V = 2000, m = 1000 has 4.7 % nonzeros, and its eight slice products
#: with H took 1.5 s dense against 0.5 s sparse. The sparse product is exact for the same reason
#: as the dense one: every partial sum is an integer below 2**53, whatever the order of the sums.
SPARSE_SLICE_MAX_FILL = 0.15


def left_factor(X: np.ndarray):
    """``X`` as a factor of slice products: a CSR copy when it is sparse
    (:data:`SPARSE_SLICE_MAX_FILL`), else ``X`` itself; ``_dense(left_factor(X) @ left_factor(Y))``
    is exact whenever ``X @ Y`` is."""
    if X.size and np.count_nonzero(X) <= SPARSE_SLICE_MAX_FILL * X.size:
        import scipy.sparse as sp

        return sp.csr_matrix(X)
    return X


def _dense(P) -> np.ndarray:
    """A product of slices (dense, sparse times dense, or sparse times sparse) as a float64 array."""
    return np.asarray(P.toarray() if hasattr(P, "toarray") else P, dtype=np.float64)


def slice_bits(inner: int) -> int:
    """Slice width b with ``inner * 2**(2b) <= 2**53``, capped at ``MAX_SLICE_BITS``."""
    need = (max(1, int(inner)) - 1).bit_length()  # ceil(log2(inner))
    return max(1, min(MAX_SLICE_BITS, (53 - need) // 2))


def split_slices(X: np.ndarray, b: int) -> tuple[list[np.ndarray], int]:
    """Split a float matrix exactly into integer-valued slices.

    Returns ``(slices, E)`` with ``X == sum(slices[s] * 2**(E - b*(s+1)))`` exactly and every
    ``|slices[s]| < 2**b``. An all-zero X gives ``([], 0)``.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0 or not np.any(X):
        return [], 0
    if not np.all(np.isfinite(X)):
        raise ExactArithmeticError("cannot split a matrix with non-finite entries")
    amax = float(np.max(np.abs(X)))
    _, E = math.frexp(amax)  # amax = f 2^E, f in [1/2, 1): |X| < 2^E
    Y = np.ldexp(X, b - E)
    if b - E < 0 and not np.array_equal(np.ldexp(Y, E - b), X):
        raise ExactArithmeticError("scaling lost bits to underflow; the matrix spans too many magnitudes")
    slices: list[np.ndarray] = []
    R = Y
    while True:
        S = np.trunc(R)
        slices.append(S)
        R = np.ldexp(R - S, b)
        if not np.any(R):
            break
        if len(slices) >= MAX_SLICES:
            raise ExactArithmeticError(f"matrix needs more than {MAX_SLICES} slices of {b} bits")
    return slices, E


@dataclass(frozen=True, eq=False)
class LimbMatrix:
    r"""An exact dyadic matrix in base-:math:`2^b` limbs.

    The value is :math:`\sum_i \mathrm{limbs}[i]\, 2^{\mathrm{exp} + b(n-1-i)}` (n limbs, most
    significant first) with int64 limbs; ``limbs[1:]`` lie in :math:`[0, 2^b)` and ``limbs[0]`` in
    :math:`[-2^b, 2^b)`, so the representation is unique and comparisons are lexicographic.
    """

    limbs: tuple[np.ndarray, ...]
    exp: int
    b: int
    shape: tuple[int, ...]

    @classmethod
    def zeros(cls, shape: tuple[int, ...], b: int) -> "LimbMatrix":
        return cls((np.zeros(shape, dtype=np.int64),), 0, b, tuple(shape))

    @classmethod
    def from_levels(cls, levels: list[np.ndarray], exp_last: int, b: int) -> "LimbMatrix":
        """Normalise ``sum(levels[l] * 2**(exp_last + b*(L-1-l)))`` (int64 levels, |.| < 2**60;
        the arrays are taken over and modified)."""
        lv = [np.asarray(x, dtype=np.int64) for x in levels]
        mask = (1 << b) - 1
        for i in range(len(lv) - 1, 0, -1):
            carry = lv[i] >> b
            lv[i] &= mask
            lv[i - 1] += carry
        lo, hi = -(1 << b), 1 << b
        while np.any(lv[0] < lo) or np.any(lv[0] >= hi):
            carry = lv[0] >> b
            lv[0] &= mask
            lv.insert(0, carry)
        while len(lv) > 1 and not np.any(lv[0]):  # drop all-zero leading limbs
            lv.pop(0)
        return cls(tuple(lv), exp_last, b, tuple(lv[0].shape))

    @property
    def n(self) -> int:
        return len(self.limbs)

    def unit_exp(self, i: int) -> int:
        """Binary exponent of limb ``i``."""
        return self.exp + self.b * (self.n - 1 - i)

    def entry(self, idx) -> Fraction:
        """One entry as an exact Fraction."""
        v = 0
        for L in self.limbs:
            v = (v << self.b) + int(L[idx])
        return _ldexp_fraction(v, self.exp)

    def entries_int(self, rows: np.ndarray, cols: np.ndarray) -> tuple[list[int], int]:
        """Selected entries as exact integers ``N`` with value ``N * 2**exp``."""
        out = [0] * len(rows)
        for L in self.limbs:
            vals = L[rows, cols].tolist()
            out = [(o << self.b) + v for o, v in zip(out, vals)]
        return out, self.exp

    def to_fractions(self) -> np.ndarray:
        """All entries as an object array of Fractions (small matrices only)."""
        acc = np.zeros(self.shape, dtype=object)
        for L in self.limbs:
            acc = acc * (1 << self.b) + L.astype(object)
        f = np.vectorize(lambda v: _ldexp_fraction(int(v), self.exp), otypes=[object])
        return f(acc) if acc.size else acc

    def enclosure(self) -> tuple[np.ndarray, np.ndarray]:
        """Float arrays with ``lo <= value <= hi`` exactly, each within a few ulps of the value.

        Limbs are added most significant first with every sum rounded outwards (``down``/``up``
        after a correctly rounded float addition); limbs more than ``ENCLOSURE_BITS`` below the
        largest possible entry (or below ``2**ENCLOSURE_MIN_EXP``) are covered by one outward step
        of their largest possible total, so ``hi - lo`` is at most about ``2**-ENCLOSURE_BITS``
        times the largest entry.
        """
        with np.errstate(over="ignore", invalid="ignore"):  # past float64's range: refused below, by name
            return self._enclosure()

    def _enclosure(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.ldexp(self.limbs[0].astype(np.float64), self.unit_exp(0))
        hi = lo.copy()
        top = self.unit_exp(0) + self.b  # every |value| < 2^top
        for i in range(1, self.n):
            u = self.unit_exp(i)
            if u < ENCLOSURE_MIN_EXP or u + self.b < top - ENCLOSURE_BITS:
                if u + self.b > 1023:  # math.ldexp raises OverflowError past float64's range
                    raise ExactArithmeticError("values too large for a float enclosure")
                hi = up(hi + math.ldexp(1.0, u + self.b))  # the rest lies in [0, 2^(u+b))
                break
            term = np.ldexp(self.limbs[i].astype(np.float64), u)
            lo = down(lo + term)
            hi = up(hi + term)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ExactArithmeticError("values too large for a float enclosure")
        return lo, hi

    def take_rows(self, rows: np.ndarray) -> "LimbMatrix":
        """The rows ``rows`` (an index array) of a 2-d limb matrix, in that order (repeats allowed)."""
        limbs = tuple(L[rows] for L in self.limbs)
        return LimbMatrix(limbs, self.exp, self.b, tuple(limbs[0].shape))

    def sq_norm(self, weights: np.ndarray | None = None) -> Fraction:
        r""":math:`\|X\|_F^2` exactly; with positive integer ``weights`` (one per row),
        :math:`\sum_i w_i \|x_i\|^2`."""
        if weights is not None:
            w = np.asarray(weights, dtype=np.int64)
            return sum((int(v) * self.take_rows(np.flatnonzero(w == v)).sq_norm() for v in np.unique(w)),
                       Fraction(0))
        total = 0
        n = self.n
        for i in range(n):
            for k in range(i, n):
                dot = exact_int_dot(self.limbs[i], self.limbs[k])
                if dot:
                    w = self.b * ((n - 1 - i) + (n - 1 - k))
                    total += (dot << w) * (1 if i == k else 2)
        return _ldexp_fraction(total, 2 * self.exp)

    def approx(self) -> np.ndarray:
        """Nearest-ish float values (not exact)."""
        lo, _ = self.enclosure()
        return lo


def _ldexp_fraction(v: int, e: int) -> Fraction:
    return Fraction(v << e) if e >= 0 else Fraction(v, 1 << -e)


def exact_int_dot(x: np.ndarray, y: np.ndarray) -> int:
    """Exact :math:`\\sum_i x_i y_i` of two int64 arrays (entries of magnitude at most ``2**26``)."""
    x = np.ascontiguousarray(x, dtype=np.int64).ravel()
    y = np.ascontiguousarray(y, dtype=np.int64).ravel()
    if x.size == 0:
        return 0
    mx = int(np.max(np.abs(x))) if x.size else 0
    my = int(np.max(np.abs(y))) if y.size else 0
    if mx == 0 or my == 0:
        return 0
    bits = mx.bit_length() + my.bit_length()
    if bits > 62:
        return int(np.dot(x.astype(object), y.astype(object)))
    chunk = 1 << max(0, 62 - bits)
    if chunk >= x.size:
        return int(np.dot(x, y))
    total = 0
    for s in range(0, x.size, chunk):
        total += int(np.dot(x[s : s + chunk], y[s : s + chunk]))
    return total


def exact_int_sum(x: np.ndarray) -> int:
    """Exact sum of an int64 array, in chunks that cannot overflow."""
    x = np.ascontiguousarray(x, dtype=np.int64).ravel()
    if x.size == 0:
        return 0
    mx = int(np.max(np.abs(x)))
    if mx == 0:
        return 0
    chunk = 1 << max(0, 62 - mx.bit_length())
    return sum(int(x[s : s + chunk].sum()) for s in range(0, x.size, chunk))


@dataclass(frozen=True, eq=False)
class Split:
    """A float matrix split by :func:`split_slices` for products with inner dimension ``inner``
    (reuse it when one factor is multiplied many times)."""

    slices: tuple[np.ndarray, ...]
    E: int
    b: int
    shape: tuple[int, int]

    @classmethod
    def of(cls, X: np.ndarray, inner: int) -> "Split":
        X = np.asarray(X, dtype=np.float64)
        b = slice_bits(inner)
        slices, E = split_slices(X, b)
        return cls(tuple(slices), E, b, tuple(X.shape))


def exact_matmul(X: np.ndarray | Split, Y: np.ndarray | Split) -> LimbMatrix:
    """The exact product of two float64 matrices, ``X`` of shape (p, n) and ``Y`` of shape (n, q)
    (either may be given already split for inner dimension n)."""
    p, n = X.shape
    n2, q = Y.shape
    if n != n2:
        raise InputError(f"exact_matmul: inner dimensions differ ({n} vs {n2})")
    Xs = X if isinstance(X, Split) else Split.of(X, n)
    Ys = Y if isinstance(Y, Split) else Split.of(Y, n)
    b = slice_bits(n)
    if Xs.b != b or Ys.b != b:
        raise InputError(f"exact_matmul: a factor was split for another inner dimension (b = {Xs.b}, {Ys.b}, need {b})")
    xs, ex = Xs.slices, Xs.E
    ys, ey = Ys.slices, Ys.E
    if not xs or not ys:
        return LimbMatrix.zeros((p, q), b)
    if min(len(xs), len(ys)) > MAX_LEVEL_TERMS:
        raise ExactArithmeticError("both factors span too many magnitudes for int64 accumulation")
    nl = len(xs) + len(ys) - 1
    bound = n * ((1 << b) - 1) ** 2  # largest |entry| of one slice product
    group = max(1, (1 << 53) // bound)  # slice products whose float sum is still exact
    # only the rows of X with a nonzero entry: the others give zero rows of the product
    live = np.zeros(p, dtype=bool)
    for x in xs:
        live |= x.any(axis=1)
    rows = None if live.all() else np.flatnonzero(live)
    xs = tuple(left_factor(x if rows is None else x[rows]) for x in xs)
    ys = tuple(left_factor(y) for y in ys)  # a sparse right slice too (H's last slice: 0.2 % nonzeros)
    levels = []
    for lev in range(nl):
        pairs = [(s, lev - s) for s in range(max(0, lev - len(ys) + 1), min(len(xs), lev + 1))]
        acc = np.zeros((p if rows is None else rows.size, q), dtype=np.int64)
        for g0 in range(0, len(pairs), group):
            part = None
            for s, t in pairs[g0 : g0 + group]:
                prod = _dense(xs[s] @ ys[t])
                part = prod if part is None else part + prod
            acc += part.astype(np.int64)
        if rows is not None:
            full = np.zeros((p, q), dtype=np.int64)
            full[rows] = acc
            acc = full
        levels.append(acc)
    # slice product (s, t) has unit 2^(ex + ey - b(s + t + 2)); level l = s + t, the last is nl - 1
    exp_last = ex + ey - b * (nl + 1)
    return LimbMatrix.from_levels(levels, exp_last, b)


def unique_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(first, inverse, counts)`` of the rows of a 2-d array that are bitwise identical, so that
    ``X[first][inverse] == X``; None when fewer than half the rows repeat (nothing to save).

    Vocabularies are mostly tokens with identical support patterns, whose rows of W and of the dual
    coincide: the exact products then run on about a thousand distinct rows instead of V.
    """
    X = np.ascontiguousarray(X)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] == 0:
        return None
    keys = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    if 2 * first.size > X.shape[0]:
        return None
    return first, inverse.ravel(), counts


def exact_sq_norm(X: np.ndarray, weights: np.ndarray | None = None) -> Fraction:
    """:math:`\\|X\\|_F^2` of a float matrix, exactly (repeated rows are summed once, weighted); with
    positive integer ``weights`` of shape (rows,), :math:`\\sum_i w_i\\|x_i\\|^2`."""
    X = np.asarray(X, dtype=np.float64)
    u = unique_rows(X) if X.ndim == 2 else None
    if u is not None:
        first, inverse, counts = u
        if weights is not None:
            counts = np.bincount(inverse, weights=np.asarray(weights), minlength=first.size).astype(np.int64)
        return _sq_norm_plain(X[first], counts)
    return _sq_norm_plain(X, weights)


def _sq_norm_plain(X: np.ndarray, weights: np.ndarray | None) -> Fraction:
    b = NORM_SLICE_BITS
    xs, ex = split_slices(X, b)
    if not xs:
        return Fraction(0)
    lm = LimbMatrix.from_levels([s.astype(np.int64) for s in xs], ex - b * len(xs), b)
    return lm.sq_norm(weights)


def down(x: np.ndarray | float) -> np.ndarray | float:
    """One float step towards -inf: after a correctly rounded operation giving ``x``, the exact
    result is at least ``down(x)``."""
    return np.nextafter(x, -np.inf)


def up(x: np.ndarray | float) -> np.ndarray | float:
    """One float step towards +inf (an upper bound of the exact result that rounded to ``x``)."""
    return np.nextafter(x, np.inf)


def fraction_up(f: Fraction) -> float:
    """A float ``>= f``."""
    x = float(f)
    return x if Fraction(x) >= f else float(np.nextafter(x, np.inf))


def fraction_down(f: Fraction) -> float:
    """A float ``<= f``."""
    x = float(f)
    return x if Fraction(x) <= f else float(np.nextafter(x, -np.inf))
