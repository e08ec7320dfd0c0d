r"""The split P / N made exact: a rational :math:`D_P` and a rational N-certificate a.

The float split (:func:`ntpcert.solve.split.nonseparable_split`) comes on one token per class of
interchangeable tokens (``of_token``, class sizes :math:`n_c`). Both certificates are made exact there
and read on the whole vocabulary through the class map.

**D_P.** :math:`D_P \in K` with every P-margin > 0 is a point of :math:`F_N^\perp` (the in-support
equalities and the N margins, all = 0) with every remaining margin > 0: an NTP-separating point of the
instance whose supports are extended to :math:`S_j \cup N_j`. The float D is rounded to a dyadic grid,
repaired exactly onto that instance's :math:`F^\perp`, with an exact positive lower bound on every P margin
(:func:`ntpcert.exact.separability.exact_feasible_point`; its last rescaling is not applied). Its N margins are
then exactly 0. When the rounded point already satisfies all of this exactly (checked in integers), it is
kept as it is, with its small dyadic entries.

**a.** The float dual is first rounded entry by entry to the nearest rationals of small denominator
(:data:`ROUND_DENOMINATORS`; a basic dual on small integer data is one already) and checked exactly;
failing that, it is solved again in rationals on its own support: unknowns :math:`a_{c,j}` where the
float one is non-zero, equations :math:`\sum_j a_{c,j} h_j = 0` (each class, each feature, H taken as the
dyadic rationals it is) and :math:`\sum_c a_{c,j} = 0` (each context). The in-support unknowns come first, so
that the row reduction takes them as pivots and the off-support multipliers (about -1 or less on N) keep
their rationalised float values when they are free. On the whole vocabulary :math:`a_{v,j} = a_{c(v),j}/n_{c(v)}`,
which keeps both families of equations. It counts only when it is < 0 on every N pair and 0 on every
P pair, checked exactly.

Either step failing leaves the split undetermined, naming why; nothing is guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np

from ntpcert.exact.rational import combinations_vanish, frac
from ntpcert.instance import NTPInstance

#: Float multipliers below this (relative to the largest) are outside the support solved on.
DUAL_SUPPORT_TOL = 1e-9
#: Free multipliers are rationalised with denominators at most this.
FREE_DENOMINATOR = 1 << 20
#: Denominators tried, in turn, for rounding the whole float dual before solving on its support.
ROUND_DENOMINATORS = (1, 64, 4096)
#: Largest exact system (rows times unknowns) the dual step reduces.
MAX_DUAL_CELLS = 4_000_000


@dataclass(frozen=True, eq=False)
class ExactSplit:
    r"""An exact split (module doc), on the whole vocabulary through ``of_token``.

    Attributes
    ----------
    status : str
        ``"exact"`` (both certificates hold exactly) or ``"undetermined"`` (``reason``).
    reason : str
    nonseparable : ndarray of int64, shape (n_N, 2)
        N as sorted pairs (j, v).
    n_separable : int
    of_token : ndarray of int64, shape (V,)
        A class per token.
    D_rows : tuple of tuple of Fraction, shape (C, d), or None
        :math:`D_P`: token v's row is ``D_rows[of_token[v]]``. In K, every P margin > 0, every N margin 0.
    dual : dict {(c, j): Fraction} or None
        The N-certificate: :math:`a_{v,j} = \text{dual}[(c(v), j)]` (0 when absent), with
        :math:`\sum_j a_{v,j} h_j = 0` for every v, :math:`\sum_v a_{v,j} = 0` for every j, and
        :math:`a_{v,j} < 0` exactly on the N pairs off the supports.
    """

    status: str
    reason: str
    nonseparable: np.ndarray
    n_separable: int
    of_token: np.ndarray
    D_rows: tuple | None
    dual: dict | None

    @property
    def ok(self) -> bool:
        return self.status == "exact"


def _undetermined(split, why: str) -> ExactSplit:
    return ExactSplit("undetermined", why, split.nonseparable, int(split.n_separable), split.of_token, None, None)


def _class_masks(instance: NTPInstance, split) -> tuple[np.ndarray, np.ndarray]:
    """``(mask, nmask)`` on one token per class, shape (m, C): the supports and N."""
    of = np.asarray(split.of_token)
    C = int(np.asarray(split.class_sizes).size)
    rep = np.full(C, -1, dtype=np.int64)
    for v in range(of.size - 1, -1, -1):
        rep[of[v]] = v
    mask = instance.support_mask()[:, rep]
    nmask = np.zeros_like(mask)
    if split.nonseparable.size:
        nm = split.nonseparable_mask(instance.m, instance.V)
        nmask = nm[:, rep]
    return mask, nmask


def _rounded_D(instance: NTPInstance, ext: np.ndarray, D: np.ndarray, bits: int = 30):
    r"""D rounded to ``bits`` significant bits of its largest entry (a dyadic grid), when that point is
    already exactly in :math:`F_N^\perp` with every P margin > 0 (the common case: a basic LP point on
    small integer data): its class rows as Fractions, else None. The logits are one exact integer product
    :math:`N\,\mathrm{Hint}^\top` (D = N / 2^k, H = Hint / 2^s), compared in integers."""
    from ntpcert.exact.rational import dyadic_int_rows

    amax = float(np.abs(D).max(initial=0.0))
    if amax == 0.0 or not np.isfinite(amax):
        return None
    k = bits - int(np.frexp(amax)[1])
    N = np.rint(np.ldexp(D, k)).astype(np.int64)
    C, d = N.shape
    Hint = dyadic_int_rows(instance.embeddings)
    L = (flint.fmpz_mat(N.tolist()) * flint.fmpz_mat(Hint).transpose()).tolist()  # (C, m)
    for j in range(instance.m):
        cols = np.flatnonzero(ext[j])
        t = L[cols[0]][j]
        if any(L[c][j] != t for c in cols[1:]):
            return None
        if any(L[c][j] >= t for c in np.flatnonzero(~ext[j])):
            return None
    scale = Fraction(1, 1 << k) if k >= 0 else Fraction(1 << -k)
    return tuple(tuple(int(x) * scale for x in row) for row in N.tolist())


def _exact_D(instance: NTPInstance, mask: np.ndarray, nmask: np.ndarray, D: np.ndarray):
    """Rational class rows of :math:`D_P`, or ``(None, why)``."""
    from ntpcert.exact.separability import exact_feasible_point

    ext = mask | nmask
    C, d = mask.shape[1], instance.d
    if ext.all():  # P is empty: D_P = 0
        return tuple(tuple(Fraction(0) for _ in range(d)) for _ in range(C)), ""
    rows = _rounded_D(instance, ext, D)
    if rows is not None:
        return rows, ""
    ext_inst = NTPInstance.from_counts(instance.embeddings, ext.astype(np.int64), name=instance.name)
    point, _ell, why = exact_feasible_point(ext_inst, D)
    if point is None:
        return None, f"D_P is not exactly in K with positive P margins ({why})"
    # W' = base + delta has every P margin >= ell > 0 already; the rescaling by 1/ell (margins >= 1) is left
    # out, so that the rows keep the dyadic denominators of the grid
    rows = [[frac(x) for x in row] for row in point.base.tolist()]
    for v, i, dl in point.delta:
        rows[v][i] += dl
    return tuple(tuple(row) for row in rows), ""


def _exact_dual(instance: NTPInstance, mask: np.ndarray, nmask: np.ndarray, a: np.ndarray):
    """The class-level N-certificate as ``{(c, j): Fraction}``, or ``(None, why)``."""
    if not nmask.any():
        return {}, ""
    if a is None:
        return None, "the float split carries no N-certificate to make exact (glued tokens: per-test weights)"
    H = instance.embeddings
    amax = float(np.abs(a).max(initial=0.0))
    if amax == 0.0:
        return None, "the split LP's dual is zero"
    supp = [(int(c), int(j)) for c, j in np.argwhere(np.abs(a) > DUAL_SUPPORT_TOL * amax)]
    for den in ROUND_DENOMINATORS:  # a basic dual on small integer data is often a small rational already
        guess = {cj: Fraction(float(a[cj])).limit_denominator(den) for cj in supp}
        why = _check_class_dual(H, mask, nmask, {k: v for k, v in guess.items() if v != 0})
        if not why:
            return {k: v for k, v in guess.items() if v != 0}, ""
    supp.sort(key=lambda cj: (not mask[cj[1], cj[0]], cj))  # in-support unknowns first (pivots)
    n = len(supp)
    Hi = np.asarray(H)
    from ntpcert.exact.rational import dyadic_int_rows

    rows_int = dyadic_int_rows(Hi)
    by_c: dict[int, list[tuple[int, int]]] = {}
    by_j: dict[int, list[int]] = {}
    for k, (c, j) in enumerate(supp):
        by_c.setdefault(c, []).append((j, k))
        by_j.setdefault(j, []).append(k)
    eqs: list[list[tuple[int, int]]] = []
    for c, items in by_c.items():
        for i in range(instance.d):
            row = [(k, rows_int[j][i]) for j, k in items if rows_int[j][i]]
            if row:
                eqs.append(row)
    for j, ks in by_j.items():
        eqs.append([(k, 1) for k in ks])
    if len(eqs) * n > MAX_DUAL_CELLS:
        return None, (f"the exact system of the N-certificate is too large: {len(eqs)} equations in {n} unknowns, "
                      f"more than MAX_DUAL_CELLS = {MAX_DUAL_CELLS} cells")
    M = flint.fmpz_mat(len(eqs), n)
    for r, row in enumerate(eqs):
        for k, val in row:
            M[r, k] = val
    x = _kernel_point(M, n, [Fraction(float(a[supp[cc]])).limit_denominator(FREE_DENOMINATOR) for cc in range(n)])
    if x is None:
        return None, "the exact system of the N-certificate is singular on the pivots found mod p"
    dual = {supp[cc]: v for cc, v in x.items() if v != 0}
    why = _check_class_dual(Hi, mask, nmask, dual)
    return (None, why) if why else (dual, "")


def _pivots(R, rank: int, n: int) -> list[int]:
    """The pivot columns of a reduced row echelon form ``R`` of rank ``rank`` with ``n`` columns."""
    out: list[int] = []
    for c in range(n):
        if len(out) < rank and int(R[len(out), c]) != 0:
            out.append(c)
    return out


def _kernel_point(M, n: int, guess: list[Fraction]) -> dict[int, Fraction] | None:
    r"""A rational x with :math:`Mx = 0` that equals ``guess`` on the free columns: pivot columns and rows
    are read off the reduced row echelon forms of M and of :math:`M^\top` modulo a word-size prime
    (a square submatrix that is invertible mod p is invertible over Q), and the pivot unknowns are solved
    exactly from that square system (``fmpz_mat.solve``, Dixon's p-adic lifting). The rows left out are
    not used: the caller checks the whole certificate exactly. Replaces a fraction-free RREF over the
    integers, whose entries grow (273 x 4,094 of a model's dyadic h: 37 s; this: well under a second).
    None when the square system is singular over Q after all."""
    from ntpcert.exact.modular import PRIMES

    p = PRIMES[0]
    rows_m = M.nrows()
    Mp = flint.nmod_mat(M, p)
    cols = _pivots(*Mp.rref(), n)
    rows = _pivots(*Mp.transpose().rref(), rows_m)
    if len(cols) != len(rows):
        return None
    piv = set(cols)
    free = [cc for cc in range(n) if cc not in piv]
    x: dict[int, Fraction] = {cc: guess[cc] for cc in free}
    if not cols:
        return x
    den = 1
    for cc in free:
        den = den * x[cc].denominator // math.gcd(den, x[cc].denominator)
    A = flint.fmpz_mat([[M[i, cc] for cc in cols] for i in rows])
    B = flint.fmpz_mat([[-sum((int(M[i, cc]) * (x[cc] * den).numerator for cc in free if x[cc]), 0)]
                        for i in rows])
    try:
        X = A.solve(B)
    except (ZeroDivisionError, ValueError):
        return None
    for k, cc in enumerate(cols):
        q = X[k, 0]
        x[cc] = Fraction(int(q.p), int(q.q) * den)
    return x


def _check_class_dual(Hi: np.ndarray, mask: np.ndarray, nmask: np.ndarray, dual: dict) -> str:
    r"""Exact checks of a class-level N-certificate (one token per class): signs, column sums,
    :math:`\sum_j a_{c,j} h_j = 0`; ``""`` or the first failure."""
    for (c, j), v in dual.items():
        if not mask[j, c] and v > 0:
            return f"the exact N-certificate is positive off the support at class {c}, context {j}"
        if not mask[j, c] and not nmask[j, c]:
            return f"the exact N-certificate is non-zero on a separable pair (class {c}, context {j})"
    for j, c in zip(*np.nonzero(nmask)):
        if not dual.get((int(c), int(j)), 0) < 0:
            return f"the exact N-certificate is not negative on the non-separable pair (class {c}, context {j})"
    colsum: dict[int, Fraction] = {}
    for (c, j), v in dual.items():
        colsum[j] = colsum.get(j, Fraction(0)) + v
    if any(s != 0 for s in colsum.values()):
        return "a column of the exact N-certificate does not sum to 0"
    coeffs: dict[int, dict[int, Fraction]] = {}
    for (c, j), v in dual.items():
        coeffs.setdefault(c, {})[j] = v
    if not combinations_vanish(Hi, coeffs):
        return "sum_j a_cj h_j is not 0 for some class of the exact N-certificate"
    return ""


def exact_split(instance: NTPInstance, split) -> ExactSplit:
    """Make the float ``split`` (a :class:`ntpcert.solve.split.Split`) exact (module doc)."""
    if not split.ok:
        return _undetermined(split, f"the float split is undetermined ({split.reason})")
    mask, nmask = _class_masks(instance, split)
    D_rows, why = _exact_D(instance, mask, nmask, split.D_classes)
    if D_rows is None:
        return _undetermined(split, why)
    dual_c, why = _exact_dual(instance, mask, nmask, split.dual_classes)
    if dual_c is None:
        return _undetermined(split, why)
    sizes = np.asarray(split.class_sizes)
    dual = {(c, j): v / int(sizes[c]) for (c, j), v in dual_c.items()}
    return ExactSplit("exact", "", split.nonseparable, int(split.n_separable), np.asarray(split.of_token, dtype=np.int64),
                      D_rows, dual)


def check_exact_split(instance: NTPInstance, es: ExactSplit) -> str:
    """Exact check of both certificates of ``es`` on the whole vocabulary (module doc): ``""`` or the
    first failure. The same conditions as the certificate section's check, on the values themselves."""
    if not es.ok or es.D_rows is None or es.dual is None:
        return f"the split is not exact ({es.reason})"
    m, V, d = instance.m, instance.V, instance.d
    of = [int(c) for c in np.asarray(es.of_token).tolist()]
    C = len(es.D_rows)
    if len(of) != V or any(not 0 <= c < C for c in of):
        return "of_token does not map the V tokens onto the rows of D_P"
    S = instance.support_mask()
    N = {(int(j), int(v)) for j, v in np.asarray(es.nonseparable).tolist()}
    if any(not (0 <= j < m and 0 <= v < V) or S[j, v] for j, v in N):
        return "a non-separable pair is out of range or in its support"
    Hq = flint.fmpq_mat(m, d, [flint.fmpq(*float(x).as_integer_ratio()) for x in instance.embeddings.ravel().tolist()])
    Dq = flint.fmpq_mat(C, d, [flint.fmpq(x.numerator, x.denominator) for row in es.D_rows for x in row])
    L = Dq * Hq.transpose()
    for j in range(m):
        sj = np.flatnonzero(S[j])
        t = L[of[sj[0]], j]
        if any(L[of[z], j] != t for z in sj[1:]):
            return f"D_P h_{j} is not constant on the support of context {j}"
        for v in np.flatnonzero(~S[j]):
            mar = t - L[of[v], j]
            if mar < 0 or (mar == 0 and (j, int(v)) not in N):
                return f"D_P's margin at the pair ({j}, {int(v)}) is {mar}"
    sizes = np.bincount(np.asarray(of), minlength=C)
    colsum: dict[int, Fraction] = {}
    coeffs: dict[int, dict[int, Fraction]] = {}
    for (c, j), val in es.dual.items():
        if not (0 <= c < C and 0 <= j < m):
            return f"dual entry ({c}, {j}) out of range"
        colsum[j] = colsum.get(j, Fraction(0)) + int(sizes[c]) * val
        coeffs.setdefault(c, {})[j] = val
    if any(x != 0 for x in colsum.values()):
        return "a column of the N-certificate does not sum to 0"
    if not combinations_vanish(instance.embeddings, coeffs):
        return "sum_j a_vj h_j is not 0 for some token"
    for j in range(m):
        for v in np.flatnonzero(~S[j]):
            val = es.dual.get((of[v], j), Fraction(0))
            if val > 0 or ((j, int(v)) in N and not val < 0):
                return f"the N-certificate is {val} at the pair ({j}, {int(v)})"
    return ""


def exact_nonseparable_ray(instance: NTPInstance, split) -> tuple[dict | None, str]:
    r"""The N-certificate of the float ``split`` alone, made exact (module doc, **a**) and read on the whole
    vocabulary as a Farkas ray ``{(v, j): Fraction}`` of (6): :math:`a_{v,j} = a_{c(v),j}/n_{c(v)}`. It is
    negative on every pair of N, so (6) has no solution whatever D_P is. ``(ray, "")`` or ``(None, why)``;
    the caller checks the ray (:func:`ntpcert.exact.separability.check_ray`)."""
    if not split.ok or not len(split.nonseparable):
        return None, "no non-separable pair to certify"
    mask, nmask = _class_masks(instance, split)
    dual_c, why = _exact_dual(instance, mask, nmask, split.dual_classes)
    if dual_c is None:
        return None, why
    of = np.asarray(split.of_token)
    sizes = np.asarray(split.class_sizes)
    members: dict[int, np.ndarray] = {}
    ray: dict = {}
    for (c, j), val in dual_c.items():
        toks = members.setdefault(c, np.flatnonzero(of == c))
        share = val / int(sizes[c])
        for v in toks:
            ray[(int(v), int(j))] = share
    return ray, ""
