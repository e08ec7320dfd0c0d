r"""Exact integer matrix products computed with float64 BLAS: the checker's one limb kernel.

Each factor is split into limbs of c bits (sign and magnitude), small enough that every product of two
limbs and every partial sum over the inner dimension is an integer below :math:`2^{52}`, which float64
holds exactly whatever the order of the sums; the limb products are summed in int64 and carried,
compared or squared in limbs. :mod:`ntpcert.certificate.checker.primal` screens the margins (6b) with
it, and squares the dual's :math:`aH`.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np


# An integer matrix product computed exactly with float64 BLAS. Each factor is split into limbs of c
# bits (sign and magnitude: every limb an integer below 2^c in magnitude), so that every product of
# two limbs is below 2^(2c) and every partial sum over the inner dimension n below n 2^(2c) <= 2^52:
# integers that float64 holds exactly, so each limb product is exact whatever the order of the
# sums, fused or not. The limb products are then summed in int64, and compared or squared in limbs.
def limb_width(inner: int) -> int:
    """Bits c of the limbs of an exact product over an inner dimension ``inner <= 2^b``: limbs below
    2^c make products below 2^(2c) and sums of ``inner`` of them below 2^(2c+b) <= 2^52."""
    c = (52 - (max(inner, 1) - 1).bit_length()) // 2
    if c < 1:  # pragma: no cover - an inner dimension of 2^50
        raise ValueError(f"an inner dimension of {inner} is too large for exact limb products")
    return c


def bit_lengths(x: np.ndarray) -> np.ndarray:
    """Bit lengths of non-negative int64 entries below 2^53 (exact: they convert to float64 exactly)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def int_limbs(x: np.ndarray, c: int, n: int) -> list[np.ndarray]:
    r"""Limbs of int64 ``x`` with :math:`|x| < 2^{cn}`: float64 arrays :math:`L_t`, :math:`|L_t| < 2^c`,
    :math:`x = \sum_t L_t 2^{ct}`."""
    sign, ax, mask = np.sign(x), np.abs(x), (1 << c) - 1
    return [(sign * ((ax >> (c * t)) & mask)).astype(np.float64) for t in range(n)]


#: A left limb with at most this fraction of nonzero entries is multiplied as a CSR matrix (the
#: dual of V = 2000, m = 1000 has 4.7 % nonzeros). Exact for the reason the dense product is: every
#: partial sum is an integer below 2^53, whatever the order of the sums.
SPARSE_LIMB_MAX_FILL = 0.15


def limb_product(X: list[np.ndarray], Y: list[np.ndarray]) -> list[np.ndarray]:
    r""":math:`Q_u = \sum_{s+t=u} X_s Y_t` (int64) for limbs of two factors; :math:`XY = \sum_u Q_u 2^{cu}`."""
    Q: list[np.ndarray | None] = [None] * (len(X) + len(Y) - 1)
    for s_, Xs in enumerate(X):
        nnz = np.count_nonzero(Xs)
        if not nnz:
            continue
        if nnz <= SPARSE_LIMB_MAX_FILL * Xs.size:
            import scipy.sparse as sp

            Xs = sp.csr_matrix(Xs)
        for t, Yt in enumerate(Y):
            P = np.asarray(Xs @ Yt).astype(np.int64)
            Q[s_ + t] = P if Q[s_ + t] is None else Q[s_ + t] + P
    shape = (X[0].shape[0], Y[0].shape[1])
    return [np.zeros(shape, dtype=np.int64) if q is None else q for q in Q]


def normalise(Z: list[np.ndarray], c: int) -> None:
    r"""Carry int64 limbs (value :math:`\sum_u Z_u 2^{cu}`) in place: every limb but the last then lies
    in :math:`[0, 2^c)`, so the value is :math:`\ge 0` exactly when the last limb is, and 0 exactly
    when every limb is."""
    mask = (1 << c) - 1
    for u in range(len(Z) - 1):
        carry = Z[u] >> c  # floor division by 2^c (numpy shifts signed integers arithmetically)
        Z[u] &= mask
        Z[u + 1] += carry


def limbs_needed(bits: int, c: int) -> int:
    return max(1, -(-bits // c))


def int_of_limbs(values: list[int], c: int) -> int:
    return sum(v << (c * u) for u, v in enumerate(values))


def _add_shifted(acc: list[np.ndarray], v: np.ndarray, pos: int, bits: int, c: int) -> bool:
    """``acc += v 2^pos`` in c-bit limbs for int64 ``0 <= v < 2^bits`` (limbs may exceed c bits until
    normalised); False when ``v`` reaches past the last limb."""
    t, off = divmod(pos, c)
    while bits > 0:
        if t >= len(acc):
            return not v.any()
        take = c - off
        acc[t] += (v & ((1 << take) - 1)) << off
        v = v >> take
        bits -= take
        t, off = t + 1, 0
    return True


def fixed_point_limbs(ap: np.ndarray, q: np.ndarray, K: int, c: int, n: int) -> list[np.ndarray] | None:
    r"""c-bit limbs (int64, in :math:`[0, 2^c)`) of :math:`\lfloor ap\,2^K / q\rfloor` for int64
    ``0 <= ap < 2^62`` and ``1 <= q < 2^61``, by long division, or None when it needs more than n limbs."""
    acc = [np.zeros(ap.shape, dtype=np.int64) for _ in range(n + 1)]
    whole = ap // q
    rem = ap - whole * q
    ok = _add_shifted(acc, whole, K, 62, c)
    step_max = 62 - int(q.max()).bit_length()  # rem < q, so rem 2^step < 2^62
    pos = K
    while ok and pos > 0:
        step = min(step_max, pos)
        pos -= step
        rem <<= step
        digit = rem // q
        rem -= digit * q
        ok = _add_shifted(acc, digit, pos, step, c)
    if not ok:
        return None
    normalise(acc, c)
    return None if acc[n].any() else acc[:n]


def sum_of_products(x: np.ndarray, y: np.ndarray, c: int) -> int:
    r""":math:`\sum x_i y_i` exactly, for int64 arrays with entries at most :math:`2^c` in magnitude."""
    x, y = x.ravel(), y.ravel()
    step = 1 << max(0, 61 - 2 * c)  # step 2^(2c) <= 2^61: no int64 overflow within a chunk
    return sum(int(np.dot(x[i:i + step], y[i:i + step])) for i in range(0, x.size, step))


def sum_fractions(terms: list[tuple[int, int]]) -> Fraction:
    r""":math:`\sum a/b` of ``(a, b)`` pairs (b > 0), by a balanced tree in python-flint integers
    (each node over the lcm of its denominators), reduced once at the end."""
    items = [(flint.fmpz(a), flint.fmpz(b)) for a, b in terms]
    if not items:
        return Fraction(0)
    while len(items) > 1:
        nxt = []
        for i in range(0, len(items) - 1, 2):
            (a, b), (c, e) = items[i], items[i + 1]
            g = b.gcd(e)
            nxt.append((a * (e // g) + c * (b // g), b * (e // g)))
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    a, b = items[0]
    g = a.gcd(b)
    return Fraction(int(a // g), int(b // g))


__all__ = ["SPARSE_LIMB_MAX_FILL", "bit_lengths", "fixed_point_limbs", "int_limbs", "int_of_limbs", "limb_product",
           "limb_width", "limbs_needed", "normalise", "sum_fractions", "sum_of_products"]
