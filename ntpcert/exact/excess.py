r"""Exact arithmetic of the excess-loss bracket :math:`\mathcal H \le L^* \in [\text{lower}, \text{upper}]`.

Weak duality (:mod:`ntpcert.solve.excess`): for every q with :math:`q_j \in \Delta_V` and
:math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0`, and every W,
:math:`\sum_j \pi_j H(q_j) \le L^* \le \mathrm{CE}(W)`. Both ends are certified here:

* **q exactly feasible.** :func:`repair` turns a float q (feasible up to ~1e-12, zero on the separable
  face; entries below ``adjust_min`` are set to 0) into rationals meeting the constraints exactly. The constraints split by token: column v of
  :math:`U = \Pi(Q - P)` must satisfy :math:`H^\top U_{:,v} = 0` (d equations), and the rows of Q must
  sum to 1, which couples the tokens. The coupling is removed by an *absorber*: every context j gets
  one entry :math:`a_j` (of the token ranked highest among its non-zero entries; tokens ranked by the
  number of rows they are non-zero in), and a
  correction :math:`x` of entry (j, v) is paid by entry (j, :math:`a_j`), so every row keeps its sum.
  Tokens are processed from the lowest rank up; token v's residual is cleared by contexts whose
  absorber ranks above v (an exact square solve on a basis of their embeddings, chosen in floats,
  checked on all d equations), and the payments move onto the absorbers' residuals, still to be
  processed. The top token's residual is then zero by itself (the residuals of all tokens sum to
  :math:`\sum_j \pi_j (\mathbf 1^\top q_j - 1) h_j = 0`), which is checked.
* **entropies and CE in interval arithmetic** (python-flint ``arb``, :data:`PREC` bits): the
  logits of a rational W are exact rationals, :math:`\mathrm{CE}(W) = \sum_j \pi_j (\max_v z_{j,v}
  - p_j^\top z_j) + \sum_j \pi_j \log \sum_v e^{z_{j,v} - \max z_j}` with the first sum exact; the
  entropy sums :math:`\sum_j \pi_j H(q_j)` and :math:`\mathcal H` as balls. The lower end of the
  bracket is the lower end of a ball, the upper end the upper end of one.

Everything is computed in integers with one common denominator: :math:`\pi_j = \varpi_j / D` and
:math:`\pi_j p_{j,v} = P_{j,v} / D` (D = n for counts), :math:`h_j = N_j / 2^s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np
import scipy.linalg as sla

from ntpcert.exact.rational import dyadic_int_rows
from ntpcert.instance import NTPInstance

#: Working precision (bits) of the ``arb`` balls.
PREC = 128
#: Bits of the dyadic grid the float q is rounded to before the exact repair.
Q_BITS = 64
#: Entries of the float q at least this large may be corrected by the exact repair (corrections are
#: about 2^-60, so they cannot turn such an entry negative; that is checked anyway).
ADJUST_MIN = 1e-9
#: Relative threshold of the pivots of the float basis selection.
PIVOT_TOL = 1e-9


# ---------------------------------------------------------------------------- exact data
@dataclass(frozen=True)
class ExactData:
    r"""The instance in integers: :math:`\pi_j = \varpi_j / D`, :math:`\pi_j p_{j,v} = P_{j,v}/D`,
    :math:`h_j = N_j / 2^s`."""

    D: int
    varpi: tuple[int, ...]
    P: dict  # (j, v) -> int, the non-zeros
    N: flint.fmpz_mat  # m x d
    s: int
    N_rows: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, instance: NTPInstance) -> ExactData:
        m, V = instance.m, instance.V
        if instance.has_counts:
            C = np.asarray(instance.counts)
            D = int(sum(int(x) for x in C.sum(axis=1)))
            varpi = tuple(int(x) for x in C.sum(axis=1))
            P = {(int(j), int(v)): int(C[j, v]) for j, v in zip(*np.nonzero(C))}
        else:
            w = [Fraction(x) for x in instance.exact_weights]
            rows = [[Fraction(x) for x in instance.exact_probs[j]] for j in range(m)]
            D = 1
            for j in range(m):
                D = math.lcm(D, w[j].denominator)
                for v in range(V):
                    if rows[j][v]:
                        D = math.lcm(D, (w[j] * rows[j][v]).denominator)
            varpi = tuple(int(w[j] * D) for j in range(m))
            P = {(j, v): int(w[j] * rows[j][v] * D) for j in range(m) for v in range(V) if rows[j][v]}
        N_rows = dyadic_int_rows(instance.embeddings)
        # dyadic_int_rows scales by the smallest power that makes every entry an integer: recover it
        s = _scale_of(np.asarray(instance.embeddings, dtype=np.float64), N_rows)
        return cls(D, varpi, P, flint.fmpz_mat([list(r) for r in N_rows]) if m and instance.d else flint.fmpz_mat(m, instance.d),
                   s, tuple(tuple(r) for r in N_rows))


    def row_off_simplex(self) -> int | None:
        r"""The first context whose exact probabilities do not sum to 1 (probabilities read from
        floats, such as 0.1 and 0.9, are the dyadic rationals they are), or None. Where one does, the
        duality of the module doc does not hold as written and nothing is certified."""
        sums = [0] * len(self.varpi)
        for (j, _), c in self.P.items():
            sums[j] += c
        for j, (t, w) in enumerate(zip(sums, self.varpi)):
            if t != w:
                return j
        return None


def _scale_of(H: np.ndarray, N_rows: list) -> int:
    """The s with ``H = N / 2^s`` (found from one non-zero entry)."""
    idx = np.argwhere(H != 0)
    if idx.size == 0:
        return 0
    i, k = (int(x) for x in idx[0])
    f = Fraction(float(H[i, k]))
    ratio = Fraction(N_rows[i][k]) / f  # = 2^s
    s = ratio.numerator.bit_length() - 1
    if ratio.denominator != 1 or ratio.numerator != 1 << s:
        raise AssertionError("embeddings are not N / 2^s")
    return s


# ---------------------------------------------------------------------------- residual
def residual(data: ExactData, q: dict[tuple[int, int], Fraction], m: int, V: int) -> flint.fmpq_mat:
    r""":math:`\sum_j \pi_j (q_j - p_j) h_j^\top` transposed: an exact ``fmpq_mat`` of shape (d, V)."""
    den = 1
    for x in q.values():
        den = math.lcm(den, x.denominator)
    U = flint.fmpz_mat(m, V)
    for (j, v), x in q.items():
        U[j, v] = data.varpi[j] * (x.numerator * (den // x.denominator))
    for (j, v), c in data.P.items():
        U[j, v] = int(U[j, v]) - c * den
    R = data.N.transpose() * U  # d x V integers
    return flint.fmpq_mat(R) / flint.fmpq(data.D * den * (1 << data.s))


def rows_sum_to_one(q: dict[tuple[int, int], Fraction], m: int) -> int | None:
    """The first context whose row does not sum to 1 exactly, or None."""
    sums = [Fraction(0)] * m
    for (j, _), x in q.items():
        sums[j] += x
    for j, t in enumerate(sums):
        if t != 1:
            return j
    return None


# ---------------------------------------------------------------------------- interval sums
def entropy_ball(data: ExactData, q: dict[tuple[int, int], Fraction]) -> flint.arb:
    r""":math:`\sum_j \pi_j H(q_j)` as an ``arb`` ball (entries 0 contribute 0)."""
    with _prec():
        per = {}
        for (j, _), x in q.items():
            if x:
                a = flint.arb(flint.fmpq(x.numerator, x.denominator))
                per[j] = per.get(j, flint.arb(0)) - a * a.log()
        tot = flint.arb(0)
        for j, h in per.items():
            tot += h * flint.arb(flint.fmpq(data.varpi[j], data.D))
        return tot


def entropy_bound_ball(data: ExactData) -> flint.arb:
    r""":math:`\mathcal H = \sum_j \pi_j H(p_j)` as an ``arb`` ball."""
    q = {(j, v): Fraction(c, data.varpi[j]) for (j, v), c in data.P.items()}
    return entropy_ball(data, q)


def ce_ball(data: ExactData, W_num: flint.fmpz_mat, W_den: int, m: int, V: int) -> flint.arb:
    r""":math:`\mathrm{CE}(W)` for the rational ``W = W_num / W_den`` (shape (V, d)) as an ``arb`` ball."""
    Z = data.N * W_num.transpose()  # m x V integers; logits = Z / (2^s W_den)
    scale = (1 << data.s) * W_den
    rows: dict[int, list[tuple[int, int]]] = {}
    for (j, v), c in data.P.items():
        rows.setdefault(j, []).append((v, c))
    exact = 0  # sum_j (varpi_j max_v Z_jv - sum_v P_jv Z_jv), over D * scale
    with _prec():
        logs = flint.arb(0)
        for j in range(m):
            row = [int(Z[j, v]) for v in range(V)]
            zmax = max(row)
            exact += data.varpi[j] * zmax - sum(c * row[v] for v, c in rows.get(j, ()))
            acc = flint.arb(0)
            for z in row:
                acc += flint.arb(flint.fmpq(z - zmax, scale)).exp()
            logs += flint.arb(flint.fmpq(data.varpi[j], data.D)) * acc.log()
        return logs + flint.arb(flint.fmpq(exact, data.D * scale))


class _prec:
    """``with _prec():`` runs at :data:`PREC` bits and restores flint's precision after."""

    def __enter__(self):
        self.old = flint.ctx.prec
        flint.ctx.prec = PREC

    def __exit__(self, *exc):
        flint.ctx.prec = self.old


@dataclass(frozen=True)
class Balls:
    r"""The bracket's balls: :math:`\sum_j\pi_jH(q_j)`, :math:`\mathrm{CE}(W)`, :math:`\mathcal H` and the
    two differences, each computed at :data:`PREC` bits."""

    entropy_q: flint.arb
    ce: flint.arb
    entropy_p: flint.arb
    excess_q: flint.arb
    excess_ce: flint.arb


def bracket_balls(data: ExactData, q: dict, W_num: flint.fmpz_mat, W_den: int, m: int, V: int) -> Balls:
    """All the balls of one bracket."""
    ent, ce, hp = entropy_ball(data, q), ce_ball(data, W_num, W_den, m, V), entropy_bound_ball(data)
    with _prec():
        return Balls(ent, ce, hp, ent - hp, ce - hp)


def lower_end(x: flint.arb) -> Fraction:
    """The exact lower end of a ball."""
    man, exp = x.lower().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def upper_end(x: flint.arb) -> Fraction:
    """The exact upper end of a ball."""
    man, exp = x.upper().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def rational_decoder(W: list[list[Fraction]]) -> tuple[flint.fmpz_mat, int]:
    """``W = num / den`` with one common denominator."""
    den = 1
    for row in W:
        for x in row:
            den = math.lcm(den, x.denominator)
    return flint.fmpz_mat([[x.numerator * (den // x.denominator) for x in row] for row in W]), den


# ---------------------------------------------------------------------------- the exact repair
@dataclass(frozen=True)
class Repair:
    """Outcome of :func:`repair`: ``q`` (the non-zeros, exact) or ``None`` with ``reason``."""

    q: dict | None
    reason: str
    solves: int = 0


def repair(instance: NTPInstance, Q: np.ndarray, data: ExactData | None = None, *,
           adjust_min: float = ADJUST_MIN) -> Repair:
    """An exactly feasible rational q near the float ``Q`` (module doc), or a reason why not."""
    data = ExactData.of(instance) if data is None else data
    m, V, d = instance.m, instance.V, instance.d
    Q = np.asarray(Q, dtype=np.float64)
    if Q.shape != (m, V) or not np.all(np.isfinite(Q)) or Q.min() < 0:
        return Repair(None, "the float q is not a non-negative (m, V) array")
    pos = Q >= adjust_min
    if not pos.any(axis=1).all():
        return Repair(None, "a row of q has no entry above adjust_min")
    rank_of = np.argsort(np.argsort(pos.sum(axis=0), kind="stable"), kind="stable")  # 0 = in fewest rows
    absorber = np.where(pos, rank_of[None, :], -1).argmax(axis=1)
    Q = np.where(pos, Q, 0.0)
    # q on the grid 2^-Q_BITS, each row closed by its absorber
    one = 1 << Q_BITS
    Qi = np.round(np.ldexp(Q, Q_BITS))
    q: dict[tuple[int, int], Fraction] = {}
    for j in range(m):
        nz = np.nonzero(Qi[j])[0]
        ints = {int(v): int(Qi[j, v]) for v in nz if v != absorber[j]}
        rest = one - sum(ints.values())
        if rest <= 0:
            return Repair(None, f"context {j}: the absorber entry would not be positive")
        ints[int(absorber[j])] = rest
        for v, x in ints.items():
            q[(j, v)] = Fraction(x, one)
    R = residual(data, q, m, V)
    adjustable = pos
    Hf = np.asarray(instance.embeddings, dtype=np.float64)
    solves = 0
    for v in np.argsort(rank_of, kind="stable"):
        v = int(v)
        f = [R[k, v] for k in range(d)]
        if not any(f):
            continue
        C = np.nonzero(adjustable[:, v] & (absorber != v) & (rank_of[absorber] > rank_of[v]))[0]
        if C.size == 0:
            return Repair(None, f"token {v}: a residual and no context to clear it")
        y = _solve_token(data, Hf, C, f)
        solves += 1
        if y is None:
            return Repair(None, f"token {v}: its residual is not in the span of the embeddings of the {C.size} "
                          "contexts that may clear it")
        for j, yj in y.items():
            x = yj * Fraction(data.D, data.varpi[j])  # y_j = pi_j x_j
            q[(j, v)] = q.get((j, v), Fraction(0)) + x
            a = int(absorber[j])
            q[(j, a)] -= x
            # token a's residual changes by -y_j h_j
            for k, hk in enumerate(data.N_rows[j]):
                if hk:
                    R[k, a] -= flint.fmpq(yj.numerator, yj.denominator) * flint.fmpq(hk, 1 << data.s)
    q = {k: x for k, x in q.items() if x != 0}
    if any(x < 0 for x in q.values()):
        return Repair(None, "a corrected entry came out negative")
    if rows_sum_to_one(q, m) is not None:
        return Repair(None, "a row does not sum to 1")  # pragma: no cover - the absorber keeps the sums
    if any(residual(data, q, m, V).entries()):
        return Repair(None, "the constraints are not met after the last token")
    return Repair(q, "", solves)


def _solve_token(data: ExactData, Hf: np.ndarray, C: np.ndarray, f: list) -> dict[int, Fraction] | None:
    r"""Rational :math:`y` on a basis B of the contexts C with :math:`\sum_{j \in B} y_j h_j = -f` exactly."""
    A = Hf[C].T  # d x |C|
    _, Rr, piv = sla.qr(A, mode="economic", pivoting=True)
    diag = np.abs(np.diag(Rr))
    if diag.size == 0 or diag[0] == 0:
        return None
    r = int(np.sum(diag > PIVOT_TOL * diag[0]))
    B = C[piv[:r]]
    _, R2, piv2 = sla.qr(Hf[B], mode="economic", pivoting=True)  # r x d: pick r independent features
    K = piv2[:r]
    M = flint.fmpq_mat(r, r, [data.N_rows[int(B[i])][int(K[k])] for k in range(r) for i in range(r)])
    scale = flint.fmpq(1 << data.s)
    rhs = flint.fmpq_mat(r, 1, [-f[int(K[k])] * scale for k in range(r)])
    try:
        sol = M.solve(rhs)
    except ZeroDivisionError:
        return None
    y = [sol[i, 0] for i in range(r)]
    # every one of the d equations, exactly
    for k in range(len(f)):
        tot = flint.fmpq(0)
        for i in range(r):
            n = data.N_rows[int(B[i])][k]
            if n:
                tot += y[i] * n
        if tot != -f[k] * scale:
            return None
    return {int(B[i]): Fraction(int(y[i].p), int(y[i].q)) for i in range(r) if y[i] != 0}
