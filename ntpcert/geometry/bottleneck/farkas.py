r"""An exact certificate that token v is never the unique argmax, from the support of a float one.

The certificate is :math:`\lambda \ge 0` on a set S of other tokens with

.. math:: \sum_{u\in S}\lambda_u = 1,\qquad \sum_{u \in S} \lambda_u w_u = w_v,\qquad
          \sum_{u \in S} \lambda_u b_u \ge b_v ,

so that :math:`w_v^\top h + b_v \le \sum_u \lambda_u (w_u^\top h + b_u) \le \max_{u \in S} (w_u^\top h + b_u)` for
every h (docs/math.md, the softmax bottleneck). Given S from an LP's duals, :func:`exact_combination`
picks columns of S and rows of the system that are independent in float, solves that square system in
exact rationals (python-flint), and keeps the answer only if it satisfies the whole system exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["MAX_SUPPORT", "exact_combination", "float_ints"]

#: Largest support solved exactly (a square rational system of this order: about 30 s at 770).
MAX_SUPPORT = 1_000


def float_ints(X: np.ndarray) -> tuple[np.ndarray, int]:
    """``(N, e)``: an object array of Python ints with ``X == N * 2**e`` exactly (X float64, finite)."""
    X = np.asarray(X, dtype=np.float64)
    m, ex = np.frexp(X)
    mant = np.ldexp(m, 53).astype(np.int64)  # exact: |m| < 1, 53 bits
    ex = ex.astype(np.int64) - 53
    nz = mant != 0
    e = int(ex[nz].min()) if nz.any() else 0
    shift = np.where(nz, ex - e, 0)
    N = np.empty(X.shape, dtype=object)
    flat_m, flat_s = mant.ravel().tolist(), shift.ravel().tolist()
    N.ravel()[:] = [mm << s if mm >= 0 else -((-mm) << s) for mm, s in zip(flat_m, flat_s)]
    return N, e


def exact_combination(W: np.ndarray, b: np.ndarray | None, v: int, support: np.ndarray
                      ) -> tuple[list[int], list[Fraction]] | None:
    """Exact weights :math:`\\lambda` on (part of) ``support`` certifying that v is not argmaxable, or None.

    Parameters
    ----------
    W : ndarray of shape (V, d)
    b : ndarray of shape (V,) or None
    v : int
    support : ndarray of int
        Candidate tokens (v excluded), e.g. where an LP's dual is positive.

    Returns
    -------
    (tokens, weights) or None
        Tokens with positive exact weights that satisfy the system of the module doc exactly.
    """
    import scipy.linalg as sla

    S = np.asarray([u for u in np.unique(support) if u != v], dtype=np.int64)
    if S.size == 0 or S.size > MAX_SUPPORT:
        return None
    rows_idx = np.concatenate([S, [v]])
    Wi, _ = float_ints(W[rows_idx])
    Dw = (Wi[:-1] - Wi[-1]).T  # (d, k): w_u - w_v, exact ints (common scale)
    Mf = (W[S] - W[v]).T
    tries = [False] if b is None else [False, True]
    for bias_equation in tries:
        blocks, fblocks, rhs = [Dw], [Mf], [0] * Dw.shape[0]
        if bias_equation:
            Bi, _ = float_ints(b[rows_idx])
            blocks.append((Bi[:-1] - Bi[-1]).reshape(1, -1))
            fblocks.append((b[S] - b[v]).reshape(1, -1))
            rhs.append(0)
        ones = np.ones((1, S.size), dtype=object)
        M = np.vstack(blocks + [ones])
        Mfl = np.vstack(fblocks + [np.ones((1, S.size))])
        rhs.append(1)
        scale = np.abs(Mfl[:-1]).max() if Mfl.shape[0] > 1 else 1.0
        Mfl = Mfl / max(scale, 1e-300)
        Mfl[-1] *= 1e3  # the normalising row first among the rows chosen below
        cols = _independent(sla.qr(Mfl, pivoting=True, mode="r"))
        rows = _independent(sla.qr(Mfl[:, cols].T, pivoting=True, mode="r"))
        lam = _solve(M[np.ix_(rows, cols)], [rhs[i] for i in rows])
        if lam is None:
            continue
        full = np.zeros(S.size, dtype=object)
        full[:] = Fraction(0)
        full[cols] = lam
        if not _satisfies(M, rhs, full):
            continue
        if any(x < 0 for x in full):
            continue
        if b is not None and not bias_equation:
            Bi, _ = float_ints(b[rows_idx])
            if sum((Bi[i] - Bi[-1]) * full[i] for i in range(S.size)) < 0:
                continue
        keep = [i for i in range(S.size) if full[i] > 0]
        return [int(S[i]) for i in keep], [full[i] for i in keep]
    return None


def _independent(qr: tuple) -> np.ndarray:
    """The pivot columns of a column-pivoted QR whose R diagonal is not negligible."""
    R, piv = qr
    diag = np.abs(np.diag(R))
    if diag.size == 0 or diag[0] == 0:
        return piv[:0]
    r = int(np.sum(diag > diag[0] * 1e-11))
    return np.sort(piv[:r])


def _solve(M: np.ndarray, rhs: list[int]) -> list[Fraction] | None:
    """The exact solution of the square integer system ``M x = rhs``, or None if it is singular."""
    import flint

    n = M.shape[0]
    if n == 0 or M.shape[1] != n:
        return None
    A = flint.fmpz_mat([[int(x) for x in row] for row in M.tolist()])
    B = flint.fmpz_mat([[int(x)] for x in rhs])
    try:
        X = A.solve(B)
    except ZeroDivisionError:
        return None
    return [Fraction(int(X[i, 0].p), int(X[i, 0].q)) for i in range(n)]


def _satisfies(M: np.ndarray, rhs: list[int], lam: np.ndarray) -> bool:
    """Whether ``M @ lam == rhs`` exactly (M ints, lam Fractions), with a common denominator."""
    import math

    den = 1
    for x in lam:
        den = den * x.denominator // math.gcd(den, x.denominator)
    nums = [int(x * den) for x in lam]
    nz = [i for i, x in enumerate(nums) if x]
    for j in range(M.shape[0]):
        row = M[j]
        if sum(row[i] * nums[i] for i in nz) != rhs[j] * den:
            return False
    return True
