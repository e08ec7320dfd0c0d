r"""The independent check of a certificate's ``excess`` section (the excess-loss bracket).

Called by :func:`ntpcert.certificate.checker.verify_certificate`; it imports no solver, only the file
format and exact arithmetic (:mod:`ntpcert.exact.excess`). It re-derives, from the instance alone:

* **the instance's exact probabilities lie in the simplex** (not so for some read from floats);
* **q is exactly feasible**: every entry a non-negative rational at a valid index, every row summing
  to 1 exactly, and :math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0` exactly (integer matrix product);
* **lower ends**: ``lower`` is at most the lower end of the ``arb`` ball of :math:`\sum_j \pi_j H(q_j)`
  (so :math:`\text{lower} \le L^*` by weak duality), and ``excess_lower`` at most that of
  :math:`\sum_j \pi_j H(q_j) - \mathcal H`, or at most 0 (q = p is always feasible);
* **upper ends**: ``upper`` is at least the upper end of the ball of :math:`\mathrm{CE}(W)` for the
  rational W given, and ``excess_upper`` at least that of :math:`\mathrm{CE}(W) - \mathcal H`.
"""

from __future__ import annotations

from fractions import Fraction

from ntpcert.certificate.decode import matrix_fractions, sparse_dict
from ntpcert.certificate.schema import show
from ntpcert.exact import excess as xe
from ntpcert.instance import NTPInstance


def check_excess(sec: dict | None, inst: NTPInstance, checks: list[str]) -> str:
    """Check the section (absent or null: nothing to check). Returns ``""`` when it holds, else the
    reason (one line naming the field); appends the checks that passed to ``checks``."""
    if sec is None:
        return ""
    m, V, d = inst.m, inst.V, inst.d
    q = sparse_dict(sec["q"], "excess.q")
    for (j, v), x in q.items():
        if not (j < m and v < V):
            return f"excess.q: index ({j}, {v}) is outside the (m, V) = ({m}, {V}) table"
        if x < 0:
            return f"excess.q: entry ({j}, {v}) is negative ({show(str(x))})"
    data = xe.ExactData.of(inst)
    off = data.row_off_simplex()
    if off is not None:
        return (f"excess: the exact probabilities of context {off} do not sum to 1 (read from floats): "
                "the duality behind the bracket does not hold as written")
    bad = xe.rows_sum_to_one(q, m)
    if bad is not None:
        return f"excess.q: row {bad} does not sum to 1"
    if any(xe.residual(data, q, m, V).entries()):
        return "excess.q: sum_j pi_j (q_j - p_j) h_j^T is not 0: q is not dual feasible"
    checks.append(f"excess: q exactly dual feasible ({len(q)} non-zeros in the simplex, sum_j pi_j (q_j - p_j) h_j^T = 0)")
    W = matrix_fractions(sec["W"], (V, d), "excess.W")
    num, den = xe.rational_decoder(W)
    balls = xe.bracket_balls(data, q, num, den, m, V)
    if Fraction(sec["lower"]) > xe.lower_end(balls.entropy_q):
        return (f"excess.lower: {sec['lower']!r} exceeds sum_j pi_j H(q_j) >= "
                f"{float(xe.lower_end(balls.entropy_q))!r} (arb, {xe.PREC} bits)")
    if Fraction(sec["excess_lower"]) > max(xe.lower_end(balls.excess_q), Fraction(0)):
        return (f"excess.excess_lower: {sec['excess_lower']!r} exceeds sum_j pi_j H(q_j) - H >= "
                f"{float(xe.lower_end(balls.excess_q))!r}")
    checks.append(f"excess: lower end {sec['lower']!r} <= sum_j pi_j H(q_j) <= L* (weak duality; arb, {xe.PREC} bits), "
                  f"excess_lower {sec['excess_lower']!r}")
    if Fraction(sec["upper"]) < xe.upper_end(balls.ce):
        return f"excess.upper: {sec['upper']!r} is below CE(W) <= {float(xe.upper_end(balls.ce))!r}"
    if Fraction(sec["excess_upper"]) < xe.upper_end(balls.excess_ce):
        return f"excess.excess_upper: {sec['excess_upper']!r} is below CE(W) - H <= {float(xe.upper_end(balls.excess_ce))!r}"
    checks.append(f"excess: upper end {sec['upper']!r} >= CE(W) >= L* for the rational W given, "
                  f"excess_upper {sec['excess_upper']!r}")
    return ""
