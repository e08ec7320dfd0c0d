r"""The primal and dual points of the NTP-SVM and of separability, checked exactly.

:func:`check_primal` proves (6a) and every margin of (6b) for a rational W: the margins are screened
with an exact integer lower bound (the limb products of :mod:`ntpcert.certificate.checker.limbs`), and
what the screen does not prove is settled in Python integers, in the order of the direct check
:func:`check_primal_exact`, so the first failure named is the same. :func:`dual_terms` checks a dual
point a of the NTP-SVM (columns summing to 0, non-positive off the supports) and returns its mass and
:math:`\|aH\|^2`, exactly.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from ntpcert.certificate.checker.common import need
from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.certificate.checker.limbs import (
    fixed_point_limbs, int_limbs, int_of_limbs, limb_product, limb_width, limbs_needed, normalise, sum_fractions,
    sum_of_products,
)
from ntpcert.certificate.decode import RationalMatrix

#: Bits of the integer screen of the margins (6b): before a margin is settled exactly, it is known
#: to within :math:`2^{-\text{FILTER\_BITS}}` (the margin asked for is 1), and it is proven when its
#: lower bound is already at least 1 (:func:`check_primal`).
FILTER_BITS = 52
#: Bytes of int64 limbs the blocked exact products hold at once.
BLOCK_BYTES = 1 << 28


class Mismatch(Exception):
    """The exact spot checks disagree with the blocked integer product: the checker falls back to
    its direct exact computation (never expected; a guard against a faulty BLAS)."""


def rows_int(ex: ExactInstance, W: list[list[Fraction]]) -> tuple[flint.fmpz_mat, list[int]]:
    """``(N, D)``: row v of W is ``N[v] / D[v]`` with integers (one denominator per row)."""
    dens, ints = [], []
    for row in W:
        den = 1
        for x in row:
            den = den * x.denominator // math.gcd(den, x.denominator)
        dens.append(den)
        ints.extend(x.numerator * (den // x.denominator) for x in row)
    return flint.fmpz_mat(len(W), ex.d, ints), dens

def check_primal(ex: ExactInstance, W: RationalMatrix, field_name: str) -> Fraction:
    r"""Check (6a) and (6b) exactly; return :math:`\tfrac12\|W\|_F^2`.

    Every margin of (6b) is first bounded below with integers: with :math:`F = \mathrm{trunc}(2^K W)`
    (entrywise, so :math:`2^K W = F + E`, :math:`|E| < 1`) and the exact integer product
    :math:`X = F\,\mathrm{Hint}^\top`, the scaled margin :math:`2^K (w_{a_j} - w_v)^\top \mathrm{Hint}_j`
    is at least :math:`X_{a_j j} - X_{vj} - 2\|\mathrm{Hint}_j\|_1`. Where that bound already
    reaches :math:`2^K 2^s` the margin is at least 1, proven. Every other entry, and every equality
    of (6a), is then settled exactly in Python integers, in the order of the direct check
    (:func:`check_primal_exact`, context by context, token by token), so the first failure is
    the one it reports. K makes the bound tight to :math:`2^{-\text{FILTER\_BITS}}`."""
    try:
        return _check_primal_screened(ex, W, field_name)
    except Mismatch:
        return check_primal_exact(ex, W.fractions(), field_name)

def _check_primal_screened(ex: ExactInstance, W: RationalMatrix, field_name: str) -> Fraction:
    V, m, d = ex.V, ex.m, ex.d
    num, den = W.num, W.den
    big_rows: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for (v, i), (p, q) in W.big.items():
        big_rows[v].append((i, p, q))
    nzrow = num.any(axis=1)
    nzrow[list(big_rows)] = True
    rows = np.flatnonzero(nzrow)
    norms = ex.hint_l1
    s = ex.hden.bit_length() - 1
    c = limb_width(d)

    # F = trunc(2^K W) in c-bit limbs, on the nonzero rows; |W| < 2^eW
    F: list[np.ndarray] = []
    K = 0
    if rows.size:
        ap, q = np.abs(num[rows]), den[rows]
        r = float((ap / q).max())
        eW = max([math.frexp(r)[1] + 1 if r > 0 else -(1 << 30)]
                 + [abs(p).bit_length() - q.bit_length() + 1 for _, p, q in
                    (t for ts in big_rows.values() for t in ts)])
        K0 = max(0, FILTER_BITS + max(norms).bit_length() - s)
        nF = limbs_needed(K0 + eW, c)
        while True:
            K = max(0, c * nF - eW)
            mags = fixed_point_limbs(ap, q, K, c, nF)
            if mags is not None:
                mags = _big_fixed_point(mags, big_rows, rows, K, c)
            if mags is not None:
                break
            nF += 1
        sign = np.sign(num[rows])
        for (v, i), (p, q) in W.big.items():
            sign[np.searchsorted(rows, v), i] = 1 if p > 0 else -1
        F = [(sign * x).astype(np.float64) for x in mags]

    H = ex.hint_limbs(c)
    nQ = len(F) + len(H) - 1 if F else 1
    T = [2 * n + (ex.hden << K) for n in norms]  # a proven margin has X_a - X_v >= T_j
    U = max(nQ, limbs_needed(max(T).bit_length(), c)) + limbs_needed(d.bit_length(), c) + 2
    mask = (1 << c) - 1
    T_limbs = [np.array([(t >> (c * u)) & mask for t in T], dtype=np.int64) for u in range(U)]
    anchors = np.array(ex.anchor, dtype=np.int64)
    on = ex.support_mask
    exact = _ExactLogits(ex, W, big_rows, K, norms)
    block = max(1, BLOCK_BYTES // (8 * V * (nQ + U)))
    for j0 in range(0, m, block):
        J = np.arange(j0, min(m, j0 + block))
        if F:
            Qr = limb_product(F, [Ht[J].T for Ht in H])
            Q = [np.zeros((V, J.size), dtype=np.int64) for _ in Qr]
            for u, q in enumerate(Qr):
                Q[u][rows] = q
        else:
            Q = [np.zeros((V, J.size), dtype=np.int64)]
        cols = np.arange(J.size)
        anc = anchors[J]
        Z = [(Q[u][anc, cols] - T_limbs[u][J])[None, :] - Q[u] if u < len(Q)
             else np.broadcast_to(-T_limbs[u][J], (V, J.size)).copy() for u in range(U)]
        normalise(Z, c)
        todo = (on[:, J] | (Z[-1] < 0)).T  # (6a) everywhere on the support, (6b) where not proven
        todo[cols, anc] = False  # the anchor against itself
        jj, vv = np.nonzero(todo)  # context by context, token by token
        exact.prepare(vv.tolist() + anc[np.unique(jj)].tolist())
        Xv = [Q[u][vv, jj].tolist() for u in range(len(Q))]
        Xa = [Q[u][anc, cols].tolist() for u in range(len(Q))]
        for n_, (jl, v) in enumerate(zip(jj.tolist(), vv.tolist())):
            j = int(J[jl])
            a = ex.anchor[j]
            la, da = exact.logit(a, j, int_of_limbs([x[jl] for x in Xa], c), c)
            lv, dv = exact.logit(v, j, int_of_limbs([x[n_] for x in Xv], c), c)
            if on[v, j]:
                need(la * dv == lv * da, f"{field_name}: (6a) fails, logits of tokens {a} and {v} differ in context {j}")
            else:
                need(la * dv - lv * da >= da * dv * ex.hden,
                      f"{field_name}: (6b) fails, margin of token {v} in context {j} is below 1")
    return sq_norm(W) / 2

def _big_fixed_point(mags: list[np.ndarray], big_rows: dict, rows: np.ndarray, K: int, c: int
                     ) -> list[np.ndarray] | None:
    r"""Put :math:`\lfloor |p| 2^K / q\rfloor` of the entries too long for int64 into the limbs."""
    mask, n = (1 << c) - 1, len(mags)
    for v, ts in big_rows.items():
        r = int(np.searchsorted(rows, v))
        for i, p, q in ts:
            f = (abs(p) << K) // q
            if f >> (c * n):
                return None
            for t in range(n):
                mags[t][r, i] = (f >> (c * t)) & mask
    return mags

def check_primal_exact(ex: ExactInstance, W: list[list[Fraction]], field_name: str) -> Fraction:
    r"""Check (6a) and (6b) exactly, directly (every logit in exact integers); return
    :math:`\tfrac12\|W\|_F^2`. The reference of :meth:`check_primal`, which reaches the same
    verdict and message faster."""
    N, D = rows_int(ex, W)
    L = N * ex.Hint.transpose()  # row v: logits * D[v] * hden
    for j in range(ex.m):
        a = ex.anchor[j]
        la, da = L[a, j], D[a]
        for v in range(ex.V):
            lv, dv = L[v, j], D[v]
            if v in ex.in_S[j]:
                need(la * dv == lv * da, f"{field_name}: (6a) fails, logits of tokens {a} and {v} differ in context {j}")
            else:
                need(la * dv - lv * da >= da * dv * ex.hden,
                      f"{field_name}: (6b) fails, margin of token {v} in context {j} is below 1")
    sq = Fraction(0)
    for v in range(ex.V):
        sq += Fraction(sum(int(N[v, i]) ** 2 for i in range(ex.d)), D[v] ** 2)
    return sq / 2

def dual_terms(ex: ExactInstance, A: RationalMatrix, field_name: str) -> tuple[Fraction, Fraction]:
    """:meth:`~ntpcert.certificate.checker.exact.ExactInstance.aH_zero_and_sums` of a dense dual point (``require_zero_aH=False``): the same checks
    and values, in integer arrays when its entries have a common denominator below 2^62 (their
    product with Hint in exact limbs); any failure, or anything else, goes through
    :meth:`~ntpcert.certificate.checker.exact.ExactInstance.aH_zero_and_sums` itself, which names the first failing entry."""
    got = _dual_terms_arrays(ex, A)
    return got if got is not None else ex.aH_zero_and_sums(A.nonzero(), field_name, require_zero_aH=False)

def _dual_terms_arrays(ex: ExactInstance, A: RationalMatrix) -> tuple[Fraction, Fraction] | None:
    num, den = A.num, A.den
    if A.big:
        return None
    nz = num != 0
    if not nz.any():
        return Fraction(0), Fraction(0)
    dens = np.unique(den[nz]).tolist()
    D = math.lcm(*dens)
    amax = int(np.abs(num).max())
    if D >= 1 << 62 or amax * (D // dens[0]) >= 1 << 62:
        return None
    Aint = num * np.where(nz, D // den, 0)  # a D, exact
    off = ~ex.support_mask
    if (Aint[off] > 0).any():
        return None
    big = amax * (D // dens[0])
    if ex.V * big < 1 << 63:
        colsum_zero = not Aint.sum(axis=0).any()
    else:
        colsum_zero = not any(sum(col) for col in Aint.T.tolist())
    if not colsum_zero:
        return None
    mass = -sum(Aint[off & nz].tolist())
    # ||a Hint||^2 in limbs: P = Aint Hint (V, d), row blocks
    c = limb_width(ex.m)
    Al = int_limbs(Aint, c, limbs_needed(big.bit_length(), c))
    H = ex.hint_limbs(c)
    U = len(Al) + len(H) + limbs_needed(ex.m.bit_length(), c) + 1
    rows = np.flatnonzero(nz.any(axis=1))
    block = max(1, BLOCK_BYTES // (8 * ex.d * U))
    total = 0
    for r0 in range(0, rows.size, block):
        R = rows[r0:r0 + block]
        Q = limb_product([x[R] for x in Al], H)
        Q += [np.zeros_like(Q[0]) for _ in range(U - len(Q))]
        normalise(Q, c)
        if np.abs(Q[-1]).max() > 1:  # pragma: no cover - U leaves room for every value
            return None
        for u in range(U):
            total += sum_of_products(Q[u], Q[u], c) << (2 * c * u)
            for u2 in range(u + 1, U):
                total += sum_of_products(Q[u], Q[u2], c) << (c * (u + u2) + 1)
    return Fraction(mass, D), Fraction(total, (D * ex.hden) ** 2)


#: Entries of a row of W that share a denominator, below which :class:`_ExactLogits` scales them apart.
_GROUP_MIN = 16


class _ExactLogits:
    r"""Exact logits of single entries for :func:`check_primal`: row v of W as
    :math:`\sum_g N_g / q_g` over its distinct denominators, :math:`D_v = \mathrm{lcm}_g q_g`, and
    :math:`l_{vj} = D_v\, w_v^\top \mathrm{Hint}_j = \sum_g (D_v/q_g)\, N_g^\top \mathrm{Hint}_{j,g}` (integers),
    each checked against its screened value X (:math:`|2^K l_{vj} - X D_v| \le \|\mathrm{Hint}_j\|_1 D_v`)."""

    def __init__(self, ex: ExactInstance, W: RationalMatrix, big_rows: dict, K: int, norms: list[int]) -> None:
        self.ex, self.W, self.big_rows, self.K, self.norms = ex, W, big_rows, K, norms
        self.rows: dict[int, tuple[list[tuple[int, Any, list[int]]], int]] = {}
        self.done: dict[tuple[int, int], tuple[int, int]] = {}

    def prepare(self, rows: list[int]) -> None:
        """Split the given rows of W by denominator, all at once: groups ``(D_v / q, columns,
        numerators)`` of the denominators shared by at least ``_GROUP_MIN`` entries, and one group
        of the rest with their numerators times ``D_v / q``."""
        R = np.array(sorted(set(rows) - self.rows.keys()), dtype=np.int64)
        if not R.size:
            return
        num, den = self.W.num[R], self.W.den[R]
        r, col = np.nonzero(num)
        q = den[r, col]
        order = np.lexsort((q, r))
        r, col, q = r[order], col[order], q[order]
        p = num[r, col].tolist()
        starts = np.flatnonzero((np.diff(r, prepend=-1) != 0) | (np.diff(q, prepend=0) != 0))
        spans: dict[int, list[tuple[int, int, int]]] = {v: [] for v in R.tolist()}
        for v, qg, a, b in zip(R[r[starts]].tolist(), q[starts].tolist(), starts.tolist(),
                               starts[1:].tolist() + [r.size]):
            spans[v].append((qg, a, b))
        col = col.tolist()
        for v, parts in spans.items():
            bigs = self.big_rows.get(v, ())
            D = math.lcm(*(qg for qg, _, _ in parts), *(qb for _, _, qb in bigs))
            groups, rest_cols, rest_nums = [], [], []
            for qg, a, b in parts:
                mult = D // qg
                if b - a >= _GROUP_MIN:
                    groups.append((mult, operator.itemgetter(*col[a:b]), p[a:b]))
                else:
                    rest_cols += col[a:b]
                    rest_nums += [x * mult for x in p[a:b]]
            for i, pb, qb in bigs:
                rest_cols.append(i)
                rest_nums.append(pb * (D // qb))
            if rest_cols:
                groups.append((1, lambda h, cols=rest_cols: [h[i] for i in cols], rest_nums))
            self.rows[v] = (groups, D)

    def logit(self, v: int, j: int, X: int, c: int) -> tuple[int, int]:
        """``(l_vj, D_v)``, checked against the screened ``X``."""
        key = (v, j)
        if key not in self.done:
            if v not in self.rows:
                self.prepare([v])
            groups, D = self.rows[v]
            h = self.ex.hint_row(j)
            lv = sum(mult * sum(map(operator.mul, ps, gather(h))) for mult, gather, ps in groups)
            if abs((lv << self.K) - X * D) > self.norms[j] * D:
                raise Mismatch(f"logit ({v}, {j})")
            self.done[key] = (lv, D)
        return self.done[key]


def sq_norm(W: RationalMatrix) -> Fraction:
    r""":math:`\|W\|_F^2` exactly: the squares of the numerators summed per denominator (in 20-bit limbs
    of int64, whose products summed over fewer than 2^22 entries stay below 2^62)."""
    nz = W.num != 0
    p, q = W.num[nz], W.den[nz]
    sums: dict[int, int] = {}
    if p.size:
        order = np.argsort(q, kind="stable")
        p, q = np.abs(p[order]), q[order]
        starts = np.flatnonzero(np.diff(q, prepend=0))
        dens = q[starts].tolist()
        if p.size < 1 << 22:
            c = 20
            limbs = [(p >> (c * t)) & ((1 << c) - 1) for t in range(3)]  # |p| < 2^60
            totals = [0] * len(dens)
            for t in range(3):
                for t2 in range(t, 3):
                    part = np.add.reduceat(limbs[t] * limbs[t2], starts).tolist()
                    w = c * (t + t2) + (t != t2)
                    totals = [x + (y << w) for x, y in zip(totals, part)]
        else:
            ps = p.tolist()
            ends = starts.tolist()[1:] + [p.size]
            totals = [sum(map(operator.mul, ps[a:b], ps[a:b])) for a, b in zip(starts.tolist(), ends)]
        sums = dict(zip(dens, totals))
    for pb, qb in W.big.values():
        sums[qb] = sums.get(qb, 0) + pb * pb
    return sum_fractions([(total, g * g) for g, total in sums.items()])


__all__ = ["BLOCK_BYTES", "FILTER_BITS", "Mismatch", "check_primal", "check_primal_exact", "dual_terms", "rows_int",
           "sq_norm"]
