r"""The checker's ``excess`` section: the excess-loss bracket, re-evaluated from the instance alone.

The section claims :math:`\text{lower} \le L^* \le \text{upper}` for the least cross-entropy
:math:`L^*`, and the same of :math:`L^* - \mathcal H`, by weak duality: for every q with
:math:`q_j \in \Delta_V` and :math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0`, and every W,
:math:`\sum_j \pi_j H(q_j) \le L^* \le \mathrm{CE}(W)`. This module re-derives, without the producer's
code (:mod:`ntpcert.exact.excess` is out of the checker's reach, by the import contract):

* **the instance's exact probabilities lie in the simplex** (not so for some read from floats);
* **q is exactly feasible**: every entry a non-negative rational at a valid index, every row summing
  to 1 exactly, and :math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0` exactly, as the integer product
  :math:`\mathrm{Hint}^\top U` of the checker's integer embeddings with the scaled rational
  :math:`U = \Pi(Q - P)`;
* **the ends**: balls of python-flint's ``arb`` at :data:`PREC` bits (wider than the producer's,
  so a genuine end is inside them with room) of :math:`\sum_j \pi_j H(q_j)`, :math:`\mathcal H =
  \sum_j \pi_j H(p_j)` and :math:`\mathrm{CE}(W) = \sum_j \pi_j (\mathrm{lse}(z_j) - p_j^\top z_j)` for
  the logits :math:`z_j = W h_j` of the rational W given (exact rationals; the log-sum-exp is taken
  after its largest logit is set apart exactly). ``lower`` and ``excess_lower`` must not exceed the
  lower ends of the first and of its difference with :math:`\mathcal H` (or 0: q = p is feasible),
  ``upper`` and ``excess_upper`` must reach the upper ends of the last and of its difference.
"""

from __future__ import annotations

from fractions import Fraction

import flint

from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.certificate.decode import matrix_fractions, sparse_dict
from ntpcert.certificate.schema import show
from ntpcert.instance import NTPInstance
from ntpcert.util.numbers import lcm_all

#: Working precision (bits) of the checker's ``arb`` balls.
PREC = 192


def check_excess(sec: dict | None, inst: NTPInstance, checks: list[str], ex: ExactInstance | None = None) -> str:
    """Check the section (absent or null: nothing to check). Returns ``""`` when it holds, else the
    reason (one line naming the field); appends the checks that passed to ``checks``. ``ex``: the
    checker's exact form of ``inst``, when it has one already."""
    if sec is None:
        return ""
    m, V, d = inst.m, inst.V, inst.d
    q = sparse_dict(sec["q"], "excess.q")
    for (j, v), x in q.items():
        if not (j < m and v < V):
            return f"excess.q: index ({j}, {v}) is outside the (m, V) = ({m}, {V}) table"
        if x < 0:
            return f"excess.q: entry ({j}, {v}) is negative ({show(str(x))})"
    A, a, b = _weights_and_laws(inst)
    for j, (aj, row) in enumerate(zip(a, b)):
        if sum(row.values()) != aj:
            return (f"excess: the exact probabilities of context {j} do not sum to 1 (read from floats): "
                    "the duality behind the bracket does not hold as written")
    row_sums = [Fraction(0)] * m
    for (j, _), x in q.items():
        row_sums[j] += x
    short = next((j for j, t in enumerate(row_sums) if t != 1), None)
    if short is not None:
        return f"excess.q: row {short} does not sum to 1"
    ex = ex if ex is not None else ExactInstance(inst)
    if not _moment_matches(ex, a, b, q):
        return "excess.q: sum_j pi_j (q_j - p_j) h_j^T is not 0: q is not dual feasible"
    checks.append(f"excess: q exactly dual feasible ({len(q)} non-zeros in the simplex, "
                  "sum_j pi_j (q_j - p_j) h_j^T = 0)")
    W = matrix_fractions(sec["W"], (V, d), "excess.W")
    pi = [Fraction(aj, A) for aj in a]
    p = [{v: Fraction(c, aj) for v, c in row.items()} for aj, row in zip(a, b)]
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    try:
        ent_q = _entropy(pi, _rows_of(q, m))
        ent_p = _entropy(pi, p)
        ce = _cross_entropy(ex, pi, p, W)
        lo_q, _ = _ends(ent_q)
        lo_gap, _ = _ends(ent_q - ent_p)
        _, hi_ce = _ends(ce)
        _, hi_gap = _ends(ce - ent_p)
    finally:
        flint.ctx.prec = old
    if Fraction(sec["lower"]) > lo_q:
        return (f"excess.lower: {sec['lower']!r} exceeds sum_j pi_j H(q_j) >= {float(lo_q)!r} (arb, {PREC} bits)")
    if Fraction(sec["excess_lower"]) > max(lo_gap, Fraction(0)):
        return f"excess.excess_lower: {sec['excess_lower']!r} exceeds sum_j pi_j H(q_j) - H >= {float(lo_gap)!r}"
    checks.append(f"excess: lower end {sec['lower']!r} <= sum_j pi_j H(q_j) <= L* (weak duality; arb, {PREC} bits), "
                  f"excess_lower {sec['excess_lower']!r}")
    if Fraction(sec["upper"]) < hi_ce:
        return f"excess.upper: {sec['upper']!r} is below CE(W) <= {float(hi_ce)!r}"
    if Fraction(sec["excess_upper"]) < hi_gap:
        return f"excess.excess_upper: {sec['excess_upper']!r} is below CE(W) - H <= {float(hi_gap)!r}"
    checks.append(f"excess: upper end {sec['upper']!r} >= CE(W) >= L* for the rational W given, "
                  f"excess_upper {sec['excess_upper']!r}")
    return ""


def _weights_and_laws(inst: NTPInstance) -> tuple[int, list[int], list[dict[int, int]]]:
    r"""The instance's law in integers over one denominator A: :math:`\pi_j = a_j / A` and
    :math:`\pi_j p_{j,v} = b_{j,v} / A` (the non-zero ones); with counts, :math:`a_j = n_j`,
    :math:`b_{j,v} = c_{j,v}` and :math:`A = n`."""
    if inst.has_counts:
        b = [{v: c for v, c in enumerate(row) if c} for row in inst.counts.tolist()]
        a = [sum(row.values()) for row in b]
        return sum(a), a, b
    w = [Fraction(x) for x in inst.exact_weights]
    mass = [{v: wj * Fraction(x) for v, x in enumerate(row) if x} for wj, row in zip(w, inst.exact_probs)]
    A = lcm_all([x.denominator for x in w] + [x.denominator for row in mass for x in row.values()])
    return A, [int(x * A) for x in w], [{v: int(x * A) for v, x in row.items()} for row in mass]


def _rows_of(q: dict[tuple[int, int], Fraction], m: int) -> list[dict[int, Fraction]]:
    rows: list[dict[int, Fraction]] = [{} for _ in range(m)]
    for (j, v), x in q.items():
        rows[j][v] = x
    return rows


def _moment_matches(ex: ExactInstance, a: list[int], b: list[dict[int, int]],
                    q: dict[tuple[int, int], Fraction]) -> bool:
    r""":math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0` exactly: :math:`\mathrm{Hint}^\top U = 0` for the
    integers :math:`U_{j,v} = a_j\,(L q_{j,v}) - L\,b_{j,v}` (:math:`A L` times the rational, L the lcm of
    the denominators of q)."""
    L = lcm_all(x.denominator for x in q.values())
    cols = sorted({v for _, v in q} | {v for row in b for v in row})
    at = {v: k for k, v in enumerate(cols)}
    U = [[0] * len(cols) for _ in range(ex.m)]
    for j, row in enumerate(b):
        for v, c in row.items():
            U[j][at[v]] = -c * L
    for (j, v), x in q.items():
        U[j][at[v]] += a[j] * x.numerator * (L // x.denominator)
    if not cols or not any(map(any, U)):
        return True
    return (ex.Hint.transpose() * flint.fmpz_mat(U)).is_zero()


def _entropy(pi: list[Fraction], rows: list[dict[int, Fraction]]) -> flint.arb:
    r""":math:`\sum_j \pi_j H(r_j) = -\sum_{j,v} \pi_j r_{j,v} \log r_{j,v}` as a ball (zeros add nothing)."""
    total = flint.arb(0)
    for w, row in zip(pi, rows):
        for x in row.values():
            if x:
                t = flint.fmpq(x.numerator, x.denominator)
                total -= flint.arb(flint.fmpq(w.numerator, w.denominator) * t) * flint.arb(t).log()
    return total


def _cross_entropy(ex: ExactInstance, pi: list[Fraction], p: list[dict[int, Fraction]],
                   W: list[list[Fraction]]) -> flint.arb:
    r""":math:`\mathrm{CE}(W) = \sum_j \pi_j (\max_v z_{j,v} - p_j^\top z_j) + \sum_j \pi_j \log \sum_v
    e^{z_{j,v} - \max_v z_{j,v}}`, the first sum exact, for the logits :math:`z = \mathrm{Hint}\,(DW)^\top
    / (2^s D)` of the rational W (D the lcm of its denominators)."""
    D = lcm_all(x.denominator for row in W for x in row)
    Wint = flint.fmpz_mat([[int(x * D) for x in row] for row in W]) if W and W[0] else flint.fmpz_mat(len(W), ex.d)
    Z = ex.Hint * Wint.transpose()  # (m, V) integers: z = Z / (2^s D)
    unit = ex.hden * D
    exact = Fraction(0)
    logs = flint.arb(0)
    for j in range(ex.m):
        z = [int(Z[j, v]) for v in range(ex.V)]
        top = max(z)
        exact += pi[j] * Fraction(top - sum(x * z[v] for v, x in p[j].items()), unit)
        spread = sum((flint.arb(flint.fmpq(zv - top, unit)).exp() for zv in z), flint.arb(0))
        logs += flint.arb(flint.fmpq(pi[j].numerator, pi[j].denominator)) * spread.log()
    return logs + flint.arb(flint.fmpq(exact.numerator, exact.denominator))


def _ends(ball: flint.arb) -> tuple[Fraction, Fraction]:
    """The exact lower and upper ends of a ball."""
    out = []
    for end in (ball.lower(), ball.upper()):
        man, exp = end.man_exp()
        out.append(Fraction(int(man)) * Fraction(2) ** int(exp))
    return out[0], out[1]


__all__ = ["PREC", "check_excess"]
