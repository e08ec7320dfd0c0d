r"""Exact unique argmaxes of :math:`W g` for many integer vectors g at once, at BLAS speed.

Let :math:`W` (V, D) be a float64 matrix (exact dyadic rationals) and :math:`g \in \mathbb{Z}^D` with
:math:`\|g\|_1 = L`. With :math:`|W| < 2^E` entrywise, split

.. math:: 2^{b-E} W = \mathrm{hi} + R, \qquad \mathrm{hi} = \mathrm{trunc}(2^{b-E} W),\quad |R_{uj}| < 1,

so that :math:`2^{b-E} (Wg)_u = (\mathrm{hi}\, g)_u + (Rg)_u` with :math:`|(Rg)_u| < L`. When
:math:`2^b L \le 2^{m-2}` (m the mantissa bits of the float type used: 24 or 53), every partial sum of
:math:`\mathrm{hi}\, g` is an integer of magnitude below :math:`2^{m-2}`, so the BLAS product is exact in
whatever order it adds, and so are the differences and thresholds formed from it below. Hence, with
:math:`s = \mathrm{hi}\, g` and :math:`v = \arg\max_u s_u`,

.. math:: s_v - s_u \ge 2L \;\Longrightarrow\; (Wg)_v > (Wg)_u ,

exactly. A column whose only row within :math:`2L` of the top is v has v as its unique argmax; a column
with a few such rows (:data:`MAX_REFINE`) is settled by the exact values of those rows alone
(:func:`ntpcert.exact.dyadic.exact_matmul`), since every other row is below v. The scaling by
:math:`2^{b-E}` is exact (no bit of a row with :math:`|x\,2^{b-E}| \ge 1` is lost, and smaller values
truncate to 0 whether or not they underflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ntpcert.exact.dyadic import exact_matmul

__all__ = ["MAX_REFINE", "ArgmaxScreen", "exact_column_values", "unique_argmax"]

#: Most rows near the top of one column whose exact values are computed to settle it.
MAX_REFINE = 64

#: Mantissa bits of the float types the screen multiplies in.
_MANTISSA = {np.dtype(np.float32): 24, np.dtype(np.float64): 53}


@dataclass(frozen=True, eq=False)
class ArgmaxScreen:
    """W (V, D) prepared for exact argmax screens: the matrix itself and the exponent E with |W| < 2^E.

    Attributes
    ----------
    W : ndarray of shape (V, D)
        Float64, finite.
    E : int
        ``frexp`` exponent of ``max |W|`` (0 for a zero matrix).
    """

    W: np.ndarray
    E: int

    @classmethod
    def of(cls, W: np.ndarray) -> "ArgmaxScreen":
        W = np.ascontiguousarray(W, dtype=np.float64)
        amax = float(np.max(np.abs(W))) if W.size else 0.0
        return cls(W, math.frexp(amax)[1] if amax > 0 else 0)

    def hi(self, bits: int, dtype: np.dtype) -> np.ndarray:
        """:math:`\\mathrm{trunc}(2^{b-E} W)` in ``dtype`` (integers below 2^bits in magnitude)."""
        return np.trunc(np.ldexp(self.W, bits - self.E)).astype(dtype)

    def certify(self, G: np.ndarray, *, dtype: type = np.float64, refine: int = MAX_REFINE,
                block: int = 512) -> np.ndarray:
        """The exact unique argmax of each column of ``W @ G``, or -1 where it was not shown.

        Parameters
        ----------
        G : ndarray of shape (D, k)
            Integer-valued float64 columns, none zero.
        dtype : float32 or float64
            The type of the BLAS product (float32: twice as fast, coarser screen).
        refine : int
            Columns with at most this many rows near the top are settled from exact values.

        Returns
        -------
        ndarray of shape (k,), int64
            The row that is the unique argmax of each column (exactly), or -1.
        """
        G = np.asarray(G, dtype=np.float64)
        V, D = self.W.shape
        k = G.shape[1]
        if G.shape[0] != D or not np.array_equal(G, np.trunc(G)):
            raise ValueError("G must be integer-valued of shape (D, k)")
        out = np.full(k, -1, dtype=np.int64)
        if k == 0 or V == 0:
            return out
        L = np.abs(G).sum(axis=0)
        dt = np.dtype(dtype)
        bits = _MANTISSA[dt] - 2 - max(0, math.ceil(math.log2(max(1.0, float(L.max())))))
        if bits < 1:
            raise ValueError(f"witnesses too large for a {dt.name} screen (||g||_1 = {float(L.max()):g})")
        hi = self.hi(bits, dt)  # one split for every column: 2^bits * ||g||_1 <= 2^(m-2)
        for j0 in range(0, k, block):
            cols = np.arange(j0, min(k, j0 + block))
            cols = cols[L[cols] > 0]
            if cols.size == 0:
                continue
            S = np.asarray(G[:, cols].T.astype(dt) @ hi.T)  # (c, V), exact integers below 2^(m-2)
            top = S.argmax(axis=1)
            best = S[np.arange(cols.size), top]
            thr = best - (2 * L[cols]).astype(dt)  # exact: |.| < 2^(m-1)
            near = S > thr[:, None]
            counts = near.sum(axis=1)
            one = counts == 1
            out[cols[one]] = top[one]
            for i in np.flatnonzero((counts > 1) & (counts <= refine)):
                rows = np.flatnonzero(near[i])
                out[cols[i]] = _exact_top(self.W[rows], G[:, cols[i]], rows)
        return out


def exact_column_values(W: np.ndarray, g: np.ndarray) -> tuple[list[int], int]:
    """The exact values of ``W @ g`` (float64 W of shape (n, D), float64 g of shape (D,)) as integers N_u
    with value ``N_u * 2**exp``; returns ``(N, exp)``."""
    lm = exact_matmul(np.asarray(W, dtype=np.float64), np.asarray(g, dtype=np.float64).reshape(-1, 1))
    n = lm.shape[0]
    return lm.entries_int(np.arange(n), np.zeros(n, dtype=np.int64))


def _exact_top(Wrows: np.ndarray, g: np.ndarray, rows: np.ndarray) -> int:
    """The row (of ``rows``) with the unique largest exact value of ``Wrows @ g``, or -1 on a tie."""
    vals, _ = exact_column_values(Wrows, g)
    best = max(vals)
    where = [i for i, x in enumerate(vals) if x == best]
    return int(rows[where[0]]) if len(where) == 1 else -1


def unique_argmax(W: np.ndarray, x: np.ndarray, v: int) -> bool:
    """Whether row ``v`` of ``W @ x`` is exactly larger than every other row (float64 W (V, D), x (D,)),
    by exact values of the whole column."""
    vals, _ = exact_column_values(W, x)
    top = vals[v]
    return all(val < top for u, val in enumerate(vals) if u != v)
