r"""An exact duality-gap bound for the NTP-SVM from any approximate primal/dual pair.

Primal (Definition 3): :math:`\min \tfrac12\|W\|_F^2` subject to (6a) :math:`W \in F^\perp` and (6b)
margins :math:`(e_{z_j} - e_v)^\top W h_j \ge 1` for :math:`v \notin S_j`. Dual (``math.md``):
:math:`D(a) = \sum_j \sum_{v \notin S_j} (-a_{j,v}) - \tfrac12 \|\sum_j a_j h_j^\top\|_F^2` over
:math:`a_j` with :math:`\mathbf 1^\top a_j = 0` and :math:`a_{j,v} \le 0` off the support.

:func:`exact_svm_bound` turns a float pair ``(W, a)`` into an **exactly** feasible pair and returns
the exact gap :math:`\tfrac12\|W_c\|^2 - D(a_c)`, a Fraction. For every primal-feasible :math:`W_c`,
strong convexity gives

.. math:: \tfrac12 \|W_c - W^{mm}\|_F^2 \le \tfrac12\|W_c\|_F^2 - \tfrac12\|W^{mm}\|_F^2
          \le \tfrac12\|W_c\|_F^2 - D(a_c) = \mathrm{gap},

so :math:`\|W_c - W^{mm}\|_F \le \sqrt{2\,\mathrm{gap}}`.

**Dual repair** (exact, integer arithmetic): clip positive off-support entries to 0, spread each
column sum over the support, round to ``bits`` significant bits (a dyadic grid), then move the exact
integer remainder of each column sum onto the anchor :math:`z_j`.

**Primal repair.** Round W to ``bits`` significant bits (:math:`W_q`). :math:`W \in F^\perp` means that the
logits of context j agree on :math:`S_j`: :math:`w_v^\top h_j = t_j` for all :math:`v \in S_j`. Pick
:math:`t_j` (the mean of the in-support logits, made consistent exactly when some
:math:`H_{J_v}` is rank deficient), and for each token v with :math:`J_v = \{j : v \in S_j, k_j \ge 2\}`
solve :math:`H_{J_v}(w_v + \delta_v) = t_{J_v}` exactly with :math:`\delta_v` supported on a few pivot
coordinates (chosen once per instance, with their nonsingularity checked exactly). Rows are independent, so the
cost is tiny. The logits of :math:`W_q` are computed exactly (:mod:`ntpcert.exact.dyadic`);
the repair moves logit :math:`(v, j)` by at most :math:`\|\delta_v\|_1 \max_i |h_{j,i}|`, which gives an exact
lower bound :math:`\ell` on every margin of :math:`W' = W_q + \Delta` (floats rounded outwards). Finally
:math:`W_c = W'/\ell`, whose margins are all at least 1.

**Token multiplicities** (:meth:`~ntpcert.instance.NTPInstance.with_token_multiplicity`: token v stands for
:math:`\nu_v` tokens with equal rows). The objectives become :math:`\tfrac12\sum_v\nu_v\|w_v\|^2` and
:math:`D(a) = \sum_j\sum_{v\notin S_j}\nu_v(-a_{j,v}) - \tfrac12\sum_v\nu_v\|(aH)_v\|^2`, and dual feasibility
:math:`\sum_v\nu_v a_{j,v} = 0`: the column sum is weighted, spread over the support in proportion to
:math:`\sum_{v\in S_j}\nu_v`, and its exact integer remainder goes onto the first support token of multiplicity
1 (every support has one). The repair of W is row by row and does not change. These are the NTP-SVM of the
vocabulary with every token repeated :math:`\nu_v` times, restricted to equal rows on the repetitions, so the
gap bounds the distance of the expanded :math:`W_c` to that vocabulary's :math:`W^{mm}`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from ntpcert.errors import ExactArithmeticError, InputError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.exact.dyadic import (
    Split,
    down,
    exact_int_sum,
    exact_matmul,
    exact_sq_norm,
    fraction_down,
    fraction_up,
    unique_rows,
    up,
)
from ntpcert.exact.rational import fmpq, fmpq_list, frac, fraction_str
from ntpcert.util.validate import check_int

#: Pivot blocks up to this size keep an exact inverse; larger ones are solved with on each call.
INVERSE_MAX_SIZE = 8

#: Significant bits kept when W and a are rounded onto a dyadic grid (relative to their largest entry).
DEFAULT_BITS = 40


@dataclass(frozen=True)
class RowRepair:
    """Exact repair data of one row :math:`w_v` of W.

    Attributes
    ----------
    token : int
        The row v.
    contexts : ndarray of shape (rho,)
        Contexts :math:`R_v \\subseteq J_v` whose equations are solved (independent rows of :math:`H_{J_v}`).
    pivots : ndarray of shape (rho,)
        Coordinates of :math:`w_v` that move.
    matrix : flint.fmpq_mat of shape (rho, rho)
        :math:`H_{R_v, P_v}`, exact and nonsingular (each call solves with it; an explicit
        inverse would cost far more for large :math:`|J_v|`).
    """

    token: int
    contexts: np.ndarray
    pivots: np.ndarray
    matrix: flint.fmpq_mat
    inverse: flint.fmpq_mat | None = None

    @classmethod
    def make(cls, token: int, contexts: np.ndarray, pivots: np.ndarray, matrix: flint.fmpq_mat) -> "RowRepair":
        """Keep the exact inverse too when the block is small (a product is cheaper than a solve)."""
        inv = matrix.inv() if matrix.nrows() <= INVERSE_MAX_SIZE else None
        return cls(token, contexts, pivots, matrix, inv)

    def solve(self, rhs: flint.fmpq_mat) -> flint.fmpq_mat:
        return self.inverse * rhs if self.inverse is not None else self.matrix.solve(rhs)


@dataclass(frozen=True, eq=False)
class SVMBound:
    r"""An exactly feasible NTP-SVM primal/dual pair and the bounds it proves.

    Attributes
    ----------
    primal_feasible : bool
        Whether W could be repaired into an exactly feasible :math:`W_c`; when False the gap is None.
    primal_objective : Fraction or None
        :math:`\tfrac12\|W_c\|_F^2`, an upper bound on :math:`\tfrac12\|W^{mm}\|_F^2`.
    dual_objective : Fraction
        :math:`D(a_c)`, a lower bound on :math:`\tfrac12\|W^{mm}\|_F^2`.
    gap : Fraction or None
        ``primal_objective - dual_objective`` (non-negative).
    gap_float : float
        ``gap`` rounded up (``inf`` when None).
    relative_gap : float
        ``gap / primal_objective`` rounded up (0 when both are 0, ``inf`` when no gap).
    distance_bound : float
        A float :math:`\ge \sqrt{2\,\mathrm{gap}} \ge \|W_c - W^{mm}\|_F` (``inf`` when no gap).
    norm_lower, norm_upper : float
        Floats with :math:`\text{norm\_lower} \le \|W^{mm}\|_F \le \text{norm\_upper}`.
    scale : Fraction or None
        :math:`1/\ell`: :math:`W_c = \text{scale}\cdot(W_q + \Delta)`.
    margin_lower : float or None
        :math:`\ell`, a proven lower bound on every margin of :math:`W_q + \Delta`.
    W_base : ndarray of shape (V, d) or None
        :math:`W_q`, exact dyadic floats.
    W_delta : tuple of (int, int, Fraction)
        The entries ``(v, i, delta)`` of :math:`\Delta`.
    a : ndarray of shape (V, m)
        :math:`a_c`, exact dyadic floats, exactly dual feasible.
    reason : str
        Why the primal is not certified, or ``""``.
    bits : int
    seconds : float
    a_exact : dict or None
        ``{(v, j): Fraction}``, the non-zeros of a rational dual that is not dyadic (the exact KKT pair of
        :mod:`ntpcert.exact.svm_kkt`); ``a`` is then its rounding. None: ``a`` is exact.
    """

    primal_feasible: bool
    primal_objective: Fraction | None
    dual_objective: Fraction
    gap: Fraction | None
    gap_float: float
    relative_gap: float
    distance_bound: float
    norm_lower: float
    norm_upper: float
    scale: Fraction | None
    margin_lower: float | None
    W_base: np.ndarray | None
    W_delta: tuple = ()
    a: np.ndarray | None = None
    reason: str = ""
    bits: int = DEFAULT_BITS
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    a_exact: dict | None = None

    def W(self) -> np.ndarray:
        """:math:`W_c` rounded to float64, shape (V, d)."""
        if self.W_base is None:
            raise ValueError("no certified primal point")
        W = self.W_base.copy()
        for v, i, dl in self.W_delta:
            W[v, i] += float(dl)
        return W * float(self.scale)

    def W_fractions(self) -> np.ndarray:
        """:math:`W_c` as an object array of Fractions, shape (V, d) (small instances)."""
        if self.W_base is None:
            raise ValueError("no certified primal point")
        out = np.vectorize(frac, otypes=[object])(self.W_base) if self.W_base.size else np.zeros(self.W_base.shape, object)
        for v, i, dl in self.W_delta:
            out[v, i] += dl
        return out * self.scale

    def to_json(self) -> dict:
        return {
            "primal_feasible": self.primal_feasible,
            "gap": None if self.gap is None else _short(self.gap),
            "gap_float": self.gap_float,
            "relative_gap": self.relative_gap,
            "distance_bound": self.distance_bound,
            "norm_lower": self.norm_lower,
            "norm_upper": self.norm_upper,
            "primal_objective": None if self.primal_objective is None else float(self.primal_objective),
            "dual_objective": float(self.dual_objective),
            "margin_lower": self.margin_lower,
            "reason": self.reason,
            "bits": self.bits,
            "seconds": self.seconds,
        }


#: Largest ``bits``: quantised integers and their column sums must stay exact in int64 and float64.
MAX_BITS = 50


def _check_shape(name: str, X, shape: tuple[int, int]) -> None:
    got = np.shape(X)
    if got != shape:
        raise InputError(f"{name}: expected shape {shape}, got {got}")


#: Exact rationals longer than this many characters are summarised in reports (the certificate has them).
REPORT_MAX_CHARS = 120


def _short(f: Fraction) -> str:
    text = fraction_str(f)
    return text if len(text) <= REPORT_MAX_CHARS else f"<exact rational, {len(text)} characters; see the certificate>"


def _quantise(X: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """``(N, k)`` with int64 ``N = rint(X * 2**k)``, ``|N| <= 2**bits`` (k from the largest entry)."""
    amax = float(np.max(np.abs(X))) if X.size else 0.0
    if amax == 0.0:
        return np.zeros(X.shape, dtype=np.int64), 0
    _, E = math.frexp(amax)
    k = bits - E
    return np.rint(np.ldexp(X, k)).astype(np.int64), k


def _ldexp_frac(n: int, k: int) -> Fraction:
    """:math:`n 2^{-k}`."""
    return Fraction(n, 1 << k) if k >= 0 else Fraction(n << -k)


#: The consistency rows of the exact repair are reduced to a basis by the rows independent modulo this prime (an
#: rref in flint's nmod_mat) in place of an exact rref (5.1 s of a 9.1 s certificate on soft supports, V = 10,
#: m = 500, d = 64); the projected t is then checked against every row exactly.
BASIS_PRIME = (1 << 61) - 1


def _independent_rows(constraints: list[dict[int, Fraction]], pos: dict[int, int]) -> list[int] | None:
    """Indices of rows of C independent modulo :data:`BASIS_PRIME` (hence over Q), as many as C's rank mod p; None
    where a denominator vanishes mod p."""
    p = BASIS_PRIME
    M = flint.nmod_mat(len(pos), len(constraints), p)  # C transposed: its pivot columns are C's independent rows
    for r, y in enumerate(constraints):
        for j, val in y.items():
            den = val.denominator % p
            if den == 0:
                return None
            M[pos[j], r] = val.numerator % p * pow(den, -1, p) % p
    R = M.rref()[0]
    out, c = [], 0
    for i in range(R.nrows()):
        while c < R.ncols() and int(R[i, c]) == 0:
            c += 1
        if c == R.ncols():
            break
        out.append(c)
        c += 1
    return out


def _rational_rows(constraints: list[dict[int, Fraction]], pos: dict[int, int]):
    """The rows ``constraints`` (sparse, by column) as an exact ``fmpq_mat`` of ``len(pos)`` columns."""
    C = flint.fmpq_mat(len(constraints), len(pos))
    for r, y in enumerate(constraints):
        for j, val in y.items():
            C[r, pos[j]] = fmpq(val)
    return C


class ExactSVMBounder:
    """Per-instance precomputation for :func:`exact_svm_bound` (pivots, exact pivot blocks, masks).

    Build it once per instance and call :meth:`bound` on each iterate.
    """

    def __init__(self, data: NTPInstance | KeslerSystem) -> None:
        system = data if isinstance(data, KeslerSystem) else KeslerSystem.build(data)
        inst = system.instance
        self.system = system
        self.instance = inst
        self.H = np.ascontiguousarray(inst.embeddings, dtype=np.float64)
        self.Ht = np.ascontiguousarray(self.H.T)
        mask = inst.support_mask()  # (m, V)
        self.in_support = np.ascontiguousarray(mask.T)  # (V, m)
        self.off = ~self.in_support
        self.k = inst.support_sizes
        self.anchors = inst.anchors()
        # token multiplicities (module doc): None, or the weights, the heavy rows and each column's fix token
        self.nu = inst.token_multiplicity
        if self.nu is not None:
            self.heavy = np.flatnonzero(self.nu > 1)
            self.k_weight = self.nu.astype(np.float64) @ self.in_support.astype(np.float64)
            self.fix = np.array([int(s[np.flatnonzero(self.nu[s] == 1)[0]]) for s in inst.supports], dtype=np.int64)
        self.multi = self.k >= 2
        self.eta = np.max(np.abs(self.H), axis=1) if inst.d else np.zeros(inst.m)
        self._H_split = Split.of(self.H, inst.m)  # for a H (inner dimension m)
        self._Ht_split = Split.of(self.Ht, inst.d)  # for W H^T (inner dimension d)
        self._build_repairs()

    # ------------------------------------------------------------------ precomputation
    def _build_repairs(self) -> None:
        inst = self.instance
        H = self.H
        J: dict[int, list[int]] = {}
        for j in np.flatnonzero(self.multi):
            for v in inst.support(int(j)):
                J.setdefault(int(v), []).append(int(j))
        repairs: list[RowRepair] = []
        constraints: list[dict[int, Fraction]] = []
        for v in sorted(J):
            ctx = np.array(J[v], dtype=np.int64)
            HJ = H[ctx]
            rep = None
            if ctx.size <= inst.d:
                P = np.sort(pivot_columns(HJ))
                M = flint.fmpq_mat(ctx.size, ctx.size, fmpq_list(HJ[:, P]))
                rep = RowRepair.make(v, ctx, P, M) if M.rank() == ctx.size else None
            if rep is None:
                rep, null_rows = self._rank_deficient_repair(v, ctx, HJ)
                constraints.extend(null_rows)
            repairs.append(rep)
        self.repairs = tuple(repairs)
        self._build_projector(constraints)

    @staticmethod
    def _rank_deficient_repair(v: int, ctx: np.ndarray, HJ: np.ndarray) -> tuple[RowRepair, list[dict[int, Fraction]]]:
        """Independent rows, pivot columns and left null vectors of :math:`H_{J_v}`, exactly."""
        Q = flint.fmpq_mat(HJ.shape[0], HJ.shape[1], fmpq_list(HJ))
        R, rank = Q.rref()
        cols = []
        for i in range(rank):
            for c in range(R.ncols()):
                if R[i, c] != 0:
                    cols.append(c)
                    break
        RT, rankT = Q.transpose().rref()
        rows = []
        for i in range(rankT):
            for c in range(RT.ncols()):
                if RT[i, c] != 0:
                    rows.append(c)
                    break
        M = flint.fmpq_mat(rank, rank, [Q[r, c] for r in rows for c in cols])
        rep = RowRepair.make(v, ctx[rows], np.array(cols, dtype=np.int64), M)
        # left null space of H_J: y with y^T H_J = 0, from the rref of H_J^T (free columns)
        null: list[dict[int, Fraction]] = []
        pivset = set(rows)
        for f in range(HJ.shape[0]):
            if f in pivset:
                continue
            y = {int(ctx[f]): Fraction(1)}
            for i, pc in enumerate(rows):
                val = RT[i, f]
                if val != 0:
                    y[int(ctx[pc])] = -frac(val)
            null.append(y)
        return rep, null

    def _build_projector(self, constraints: list[dict[int, Fraction]], exact_basis: bool = False) -> None:
        """Exact projector data onto :math:`\\{t : C t = 0\\}` for the consistency rows C: a basis of C's rows and
        its Gram. The basis is the rows independent modulo :data:`BASIS_PRIME` (independent over Q too); whether
        they span C over Q is not known until a projected t is checked against every row (:meth:`_project_t`),
        which falls back to ``exact_basis``: the exact rref of C."""
        self.t_columns: np.ndarray = np.zeros(0, dtype=np.int64)
        self.C = None
        self.constraints = constraints
        self.exact_basis = exact_basis
        self.C_all = None  # all of C, for the check of a projected t (built on first use)
        if not constraints:
            return
        cols = sorted({j for y in constraints for j in y})
        pos = {j: i for i, j in enumerate(cols)}
        rows = None if exact_basis else _independent_rows(constraints, pos)
        if rows is None:
            self.exact_basis = True
            R, rank = _rational_rows(constraints, pos).rref()
            Ci = flint.fmpq_mat(rank, len(cols), [R[i, c] for i in range(rank) for c in range(len(cols))])
        else:
            Ci = _rational_rows([constraints[k] for k in rows], pos)
        self.t_columns = np.array(cols, dtype=np.int64)
        self.C = Ci
        self.CCt = Ci * Ci.transpose()

    # ------------------------------------------------------------------ dual
    def dual_point(self, a: np.ndarray, bits: int = DEFAULT_BITS) -> tuple[np.ndarray, np.ndarray, int]:
        """Exactly dual-feasible ``(a_c, N, k)``: floats ``a_c = N * 2**-k`` of shape (V, m)."""
        inst = self.instance
        af = np.array(a, dtype=np.float64, copy=True).reshape(inst.V, inst.m)
        if not np.all(np.isfinite(af)):
            raise ExactArithmeticError("dual point a has non-finite entries")
        af[self.off & (af > 0)] = 0.0
        if self.nu is None:
            colsum = af.sum(axis=0)
            af -= np.where(self.in_support, (colsum / self.k)[None, :], 0.0)
        else:
            colsum = self.nu.astype(np.float64) @ af
            af -= np.where(self.in_support, (colsum / self.k_weight)[None, :], 0.0)
        af[self.off & (af > 0)] = 0.0
        N, k = _quantise(af, bits)
        if self.nu is None:
            s = N.sum(axis=0)
            N[self.anchors, np.arange(inst.m)] -= s
        else:  # exact weighted column sums: the heavy rows in Python integers
            s = N.sum(axis=0).astype(object) + sum(
                (int(self.nu[v]) - 1) * N[v].astype(object) for v in self.heavy)
            N[self.fix, np.arange(inst.m)] -= np.array([int(x) for x in s], dtype=np.int64)
        return np.ldexp(N.astype(np.float64), -k), N, k

    def dual_objective(self, a_c: np.ndarray, N: np.ndarray, k: int) -> Fraction:
        """:math:`D(a_c)` exactly (weighted by the token multiplicities, when there are)."""
        off_sum = exact_int_sum(N[self.off])
        if self.nu is not None:
            off_sum += sum((int(self.nu[v]) - 1) * exact_int_sum(N[v][self.off[v]]) for v in self.heavy)
        lin = _ldexp_frac(-off_sum, k)
        u = unique_rows(a_c)  # tokens with identical dual rows: their products coincide
        if u is None:
            return lin - exact_matmul(a_c, self._H_split).sq_norm(self.nu) / 2
        first, inverse, counts = u
        if self.nu is not None:
            counts = np.bincount(inverse, weights=self.nu, minlength=first.size).astype(np.int64)
        return lin - exact_matmul(a_c[first], self._H_split).sq_norm(counts) / 2

    # ------------------------------------------------------------------ primal
    def _project_t(self, t: dict[int, Fraction]) -> dict[int, Fraction]:
        if self.C is None:
            return t
        cols = self.t_columns
        t0 = flint.fmpq_mat(len(cols), 1, [fmpq(t[int(j)]) for j in cols])
        corr = self.C.transpose() * self.CCt.solve(self.C * t0)
        out = dict(t)
        for i, j in enumerate(cols):
            out[int(j)] = t[int(j)] - frac(corr[i, 0])
        if not self.exact_basis:  # every row of C, exactly: the rows mod p may not span C over Q
            if self.C_all is None:
                self.C_all = _rational_rows(self.constraints, {int(j): i for i, j in enumerate(cols)})
            t1 = flint.fmpq_mat(len(cols), 1, [fmpq(out[int(j)]) for j in cols])
            res = self.C_all * t1
            if any(res[i, 0] != 0 for i in range(res.nrows())):
                self._build_projector(self.constraints, exact_basis=True)
                return self._project_t(t)
        return out

    def primal_point(self, W: np.ndarray, bits: int = DEFAULT_BITS):
        """Repair W exactly; returns ``(W_q, delta, ell, reason)`` (see the module doc)."""
        inst = self.instance
        Wf = np.asarray(W, dtype=np.float64).reshape(inst.V, inst.d)
        if not np.all(np.isfinite(Wf)):
            return None, (), None, "W has non-finite entries"
        N, k = _quantise(Wf, bits)
        Wq = np.ldexp(N.astype(np.float64), -k)
        if not np.any(N):
            return Wq, (), None, "W rounds to zero, which has no positive margin"
        # exact logits W_q H^T (V, m), computed on the distinct rows of W_q (tokens of one support
        # pattern share their row) and indexed back with ``rowmap``
        u = unique_rows(Wq)
        rowmap = np.arange(inst.V) if u is None else u[1]
        L = exact_matmul(Wq if u is None else Wq[u[0]], self._Ht_split)
        lo, hi = L.enclosure()
        if u is not None:
            lo, hi = lo[rowmap], hi[rowmap]
        # common in-support logit t_j of each context with k_j >= 2
        tmean = (np.where(self.in_support, lo, 0.0).sum(axis=0)) / self.k
        t = {int(j): frac(tmean[j]) for j in np.flatnonzero(self.multi)}
        t = self._project_t(t)
        beta = np.zeros(inst.V)
        delta: list[tuple[int, int, Fraction]] = []
        if self.repairs:
            rows = np.concatenate([np.full(r.contexts.size, r.token) for r in self.repairs])
            cols = np.concatenate([r.contexts for r in self.repairs])
            vals, e = L.entries_int(rowmap[rows], cols)
            unit = flint.fmpq(1 << e) if e >= 0 else flint.fmpq(1, 1 << -e)
            pos = 0
            for r in self.repairs:
                rho = r.contexts.size
                rhs = flint.fmpq_mat(rho, 1, [fmpq(t[int(j)]) - vals[pos + i] * unit for i, j in enumerate(r.contexts)])
                pos += rho
                sol = r.solve(rhs)
                l1 = flint.fmpq(0)
                for i, c in enumerate(r.pivots):
                    dl = sol[i, 0]
                    if dl != 0:
                        delta.append((int(r.token), int(c), frac(dl)))
                        l1 += dl if dl > 0 else -dl
                beta[r.token] = fraction_up(frac(l1))
        shift = up(beta[:, None] * self.eta[None, :])  # >= |logit change| of entry (v, j)
        tlo = np.empty(inst.m)
        for j, tj in t.items():
            tlo[j] = fraction_down(tj)
        single = np.flatnonzero(~self.multi)
        if single.size:
            z = self.anchors[single]
            tlo[single] = down(lo[z, single] - shift[z, single])
        lower = down(down(tlo[None, :] - hi) - shift)
        ell = float(np.min(lower[self.off])) if np.any(self.off) else math.inf
        if not ell > 0.0:
            return Wq, tuple(delta), ell, f"after the exact repair the smallest margin is not certified positive (lower bound {ell:.3g})"
        return Wq, tuple(delta), ell, ""

    # ------------------------------------------------------------------ both
    def bound(self, W: np.ndarray | None, a: np.ndarray, *, bits: int = DEFAULT_BITS) -> SVMBound:
        """The exact bound of the pair ``(W, a)``; see :func:`exact_svm_bound`."""
        t0 = time.perf_counter()
        timings = {}
        inst = self.instance
        _check_shape("a", a, (inst.V, inst.m))
        if W is not None:
            _check_shape("W", W, (inst.V, inst.d))
        check_int("bits", bits, minimum=1, maximum=MAX_BITS)
        a_c, N, k = self.dual_point(a, bits)
        dual = self.dual_objective(a_c, N, k)
        timings["dual"] = time.perf_counter() - t0
        norm_lower = math.sqrt(max(0.0, fraction_down(2 * dual))) if dual > 0 else 0.0
        norm_lower = float(down(norm_lower)) if norm_lower > 0 else 0.0
        none = dict(gap=None, gap_float=math.inf, relative_gap=math.inf, distance_bound=math.inf,
                    norm_lower=norm_lower, norm_upper=math.inf, a=a_c, bits=bits, timings=timings)
        if not np.any(self.off):
            Wq, delta, ell, reason = np.zeros((inst.V, inst.d)), (), math.inf, ""
            scale = Fraction(1)
            primal = Fraction(0)
        elif W is None:
            return SVMBound(False, None, dual, scale=None, margin_lower=None, W_base=None,
                            reason="no primal point given", seconds=time.perf_counter() - t0, **none)
        else:
            t1 = time.perf_counter()
            try:
                Wq, delta, ell, reason = self.primal_point(W, bits)
            except ExactArithmeticError as err:  # logits past float64's range: no float enclosure of them
                return SVMBound(False, None, dual, scale=None, margin_lower=None, W_base=None,
                                reason=f"the primal point is not certified: {err}", seconds=time.perf_counter() - t0,
                                **none)
            timings["primal"] = time.perf_counter() - t1
            if reason:
                return SVMBound(False, None, dual, scale=None, margin_lower=ell, W_base=Wq, W_delta=delta,
                                reason=reason, seconds=time.perf_counter() - t0, **none)
            scale = 1 / Fraction(ell)
            sq = exact_sq_norm(Wq, self.nu)
            extra = flint.fmpq(0)  # 2<W_q, Delta> + ||Delta||^2 (each row times its multiplicity)
            for v, i, dl in delta:
                q = fmpq(dl)
                term = (2 * fmpq(float(Wq[v, i])) + q) * q
                extra += term if self.nu is None else int(self.nu[v]) * term
            primal = scale * scale * (sq + frac(extra)) / 2
        gap = primal - dual
        if gap < 0:
            raise ExactArithmeticError(f"weak duality violated (gap {float(gap):.3g}): a repaired point is not feasible")
        gap_up = fraction_up(gap)
        dist = float(up(math.sqrt(fraction_up(2 * gap)))) if gap > 0 else 0.0
        rel = fraction_up(gap / primal) if primal > 0 else (0.0 if gap == 0 else math.inf)
        norm_upper = float(up(math.sqrt(fraction_up(2 * primal)))) if primal > 0 else 0.0
        timings["total"] = time.perf_counter() - t0
        return SVMBound(
            primal_feasible=True,
            primal_objective=primal,
            dual_objective=dual,
            gap=gap,
            gap_float=gap_up,
            relative_gap=rel,
            distance_bound=dist,
            norm_lower=norm_lower,
            norm_upper=norm_upper,
            scale=scale,
            margin_lower=ell,
            W_base=Wq,
            W_delta=tuple(delta),
            a=a_c,
            reason="",
            bits=bits,
            seconds=time.perf_counter() - t0,
            timings=timings,
        )


def exact_svm_bound(data: NTPInstance | KeslerSystem, W: np.ndarray | None, a: np.ndarray, *,
                    bits: int = DEFAULT_BITS, bounder: ExactSVMBounder | None = None) -> SVMBound:
    r"""Exact duality gap of the NTP-SVM from an approximate primal/dual pair.

    Parameters
    ----------
    data : NTPInstance or KeslerSystem
    W : ndarray of shape (V, d), or None
        Approximate primal point (e.g. a solver iterate). It is rounded to ``bits`` significant
        bits, repaired exactly onto :math:`F^\perp` and rescaled so that every margin is at least 1.
        None: only the dual bound is computed.
    a : ndarray of shape (V, m)
        Approximate dual point (column j is :math:`a_j`); made exactly dual feasible.
    bits : int
        Significant bits of the dyadic grids W and a are rounded to.
    bounder : ExactSVMBounder, optional
        The instance's exact precomputation; pass one to repeated calls on one instance so that
        they pay it once (default: built for this call).

    Returns
    -------
    SVMBound
        With ``gap`` (a Fraction) and ``distance_bound`` :math:`\ge \|W_c - W^{mm}\|_F`, where
        :math:`W_c` (``bound.W()``) is the repaired primal point.

    Examples
    --------
    >>> from ntpcert.solve.svm import solve_svm
    >>> sol = solve_svm(inst)                       # doctest: +SKIP
    >>> b = exact_svm_bound(inst, sol.W, sol.dual)  # doctest: +SKIP
    >>> b.relative_gap < 1e-6, b.distance_bound     # doctest: +SKIP
    """
    return (bounder if bounder is not None else ExactSVMBounder(data)).bound(W, a, bits=bits)


#: Above this many flops (k²·d) the column pivots come from LAPACK's pivoted QR (scipy); below it
#: a numpy loop is faster than importing scipy.linalg (about 0.15 s of a small solve's start-up).
PIVOT_NUMPY_FLOPS = 2e7


def pivot_columns(A: np.ndarray) -> np.ndarray:
    r"""The first k column pivots of a QR factorisation with column pivoting (Businger–Golub) of
    A (shape (k, n), k ≤ n): k columns chosen greedily to be well conditioned. Only a heuristic:
    the caller checks the chosen k×k block's rank exactly.
    """
    k, n = A.shape
    if k * k * n > PIVOT_NUMPY_FLOPS:
        from scipy.linalg import qr

        return qr(A, mode="economic", pivoting=True)[2][:k]
    R = np.array(A, dtype=np.float64, copy=True)
    norms = np.einsum("ij,ij->j", R, R)
    piv = np.empty(k, dtype=np.int64)
    for i in range(k):
        c = int(np.argmax(norms))
        piv[i] = c
        nc = math.sqrt(norms[c])
        if nc == 0.0:  # rank deficient: the rest is arbitrary, the exact check will say so
            piv[i:] = np.setdiff1d(np.arange(n), piv[:i])[: k - i]
            break
        q = R[:, c] / nc
        R -= np.outer(q, q @ R)
        norms = np.einsum("ij,ij->j", R, R)
        norms[piv[: i + 1]] = -1.0
    return piv
