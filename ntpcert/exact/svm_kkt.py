r"""The NTP-SVM's optimum itself, exactly: a rational primal/dual pair with exact KKT, so the gap is 0.

The NTP-SVM has rational data (float embeddings are dyadic rationals), so its optimum :math:`W^{mm}` is
rational. With the dual of ``math.md`` (:math:`W = \sum_j a_j h_j^\top`, :math:`\mathbf 1^\top a_j = 0`,
:math:`a_{j,v}\le 0` off the support), a pair is optimal iff (KKT)

* **stationarity** :math:`W = \sum_j a_j h_j^\top` (by construction here);
* **primal feasibility**: on every support the logits :math:`(Wh_j)_z` are equal (6a), and
  :math:`(Wh_j)_{z_j} - (Wh_j)_v \ge 1` for every :math:`v\notin S_j` (6b);
* **dual feasibility**: :math:`\mathbf 1^\top a_j = 0`, :math:`a_{j,v} \le 0` off :math:`S_j`;
* **complementarity**: :math:`a_{j,v} = 0` wherever the margin exceeds 1.

Then :math:`\tfrac12\|W\|^2 - D(a) = \|W\|^2 - \sum_{j,v\notin S_j}(-a_{j,v}) = \sum_j a_j^\top Wh_j +
\sum(a_{j,v}) = 0` (the in-support logits are one value :math:`c_j`, :math:`\sum_{z\in S_j}a_{j,z} =
-\sum_{v\notin S_j}a_{j,v}`, and an active margin is exactly 1).

**Active-set refinement** (our implementation of the idea of Weber, Sager and Gleixner 2019 for QPs): take
the active set :math:`A_j = \{v\notin S_j : a_{j,v} < 0\}` of a float solution; the unknowns are
:math:`a_{j,u}` for :math:`u\in S_j\cup A_j`, and the equations are, for each j, :math:`\mathbf 1^\top a_j = 0`,
the tight margins :math:`\sum_{j'}(a_{j',z_j} - a_{j',v})\,h_{j'}^\top h_j = 1` for :math:`v\in A_j` and the
equalities :math:`\sum_{j'}(a_{j',z} - a_{j',z_j})\,h_{j'}^\top h_j = 0` for :math:`z\in S_j`: as many equations
as unknowns, solved in rational arithmetic (python-flint ``fmpq_mat``). The solution is then checked
exactly: a positive active dual leaves the set, a violated inactive margin joins it, and the system is
solved again, at most :data:`KKT_ROUNDS` times. A singular system (a degenerate optimum), a budget of
unknowns passed (:data:`KKT_MAX_UNKNOWNS`: the solve is cubic) or no convergence gives no pair, with the
reason; the caller keeps its positive gap. Nothing here is trusted by the checkers: they recompute the gap of
the written pair from the instance.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import flint
import numpy as np

from ntpcert.instance import NTPInstance

__all__ = ["KKT_MAX_UNKNOWNS", "KKT_ROUNDS", "zero_gap_bound"]

#: Largest exact KKT system (unknowns, the entries of a on the supports and the active set) solved. The solve
#: is cubic and the pair's rationals grow with it: on ``paper`` (435 unknowns) their denominators have
#: thousands of digits, 19 s and a 29 MB certificate against 0.5 MB with the positive gap.
KKT_MAX_UNKNOWNS = 200
#: Rounds of the active set's correction.
KKT_ROUNDS = 6
#: A float dual entry below minus this fraction of the largest |a| starts in the active set.
ACTIVE_FRACTION = 1e-7


def _q(x: float) -> flint.fmpq:
    f = Fraction(float(x))
    return flint.fmpq(f.numerator, f.denominator)


def _frac(x: flint.fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


def zero_gap_bound(instance: NTPInstance, a: np.ndarray, *, max_unknowns: int = KKT_MAX_UNKNOWNS):
    """The exact optimum of the NTP-SVM from a float dual ``a`` (V, m) near it (module doc):
    ``(bound, note)`` with ``bound`` an :class:`~ntpcert.exact.svm_gap.SVMBound` of gap exactly 0 (W and a
    rational: ``W_delta`` and ``a_exact``), or ``(None, why)``."""
    from ntpcert.exact.svm_gap import DEFAULT_BITS, SVMBound

    t0 = time.perf_counter()
    if instance.token_multiplicity is not None:
        return None, "tokens with multiplicities: the exact KKT pair is not built for them"
    m, d, V = instance.m, instance.d, instance.V
    a = np.asarray(a, dtype=np.float64).reshape(V, m)
    supports = [set(int(z) for z in s) for s in instance.supports]
    anchors = [int(s[0]) for s in instance.supports]
    scale = float(np.abs(a).max()) if a.size else 0.0
    active = [set(int(v) for v in np.flatnonzero(a[:, j] < -ACTIVE_FRACTION * scale)) - supports[j] for j in range(m)]
    H = flint.fmpq_mat(m, d, [_q(x) for x in instance.embeddings.ravel()])
    G = H * H.transpose()
    g = [[G[i, k] for k in range(m)] for i in range(m)]
    for _round in range(KKT_ROUNDS):
        unknowns = [(j, u) for j in range(m) for u in sorted(supports[j] | active[j])]
        n = len(unknowns)
        if n > max_unknowns:
            return None, (f"the exact KKT system has {n} unknowns, more than {max_unknowns} (KKT_MAX_UNKNOWNS: a cubic "
                          "solve whose rationals grow with it)")
        where = {ju: i for i, ju in enumerate(unknowns)}
        by_token: dict[int, list[tuple[int, int]]] = {}  # token u -> (context j', unknown index)
        for (j, u), i in where.items():
            by_token.setdefault(u, []).append((j, i))
        rows: list[dict[int, flint.fmpq]] = []
        rhs: list[int] = []

        def logit_row(j: int, plus: int, minus: int) -> dict[int, flint.fmpq]:
            """(W h_j)_plus - (W h_j)_minus as a row over the unknowns."""
            row: dict[int, flint.fmpq] = {}
            for sign, u in ((1, plus), (-1, minus)):
                for jj, i in by_token.get(u, ()):
                    row[i] = row.get(i, flint.fmpq(0)) + sign * g[jj][j]
            return row

        for j in range(m):
            rows.append({where[(j, u)]: flint.fmpq(1) for u in supports[j] | active[j]})
            rhs.append(0)
            for v in sorted(active[j]):
                rows.append(logit_row(j, anchors[j], v))
                rhs.append(1)
            for z in sorted(supports[j] - {anchors[j]}):
                rows.append(logit_row(j, z, anchors[j]))
                rhs.append(0)
        M = flint.fmpq_mat(n, n)
        for r, row in enumerate(rows):
            for c, x in row.items():
                M[r, c] = x
        try:
            sol = M.solve(flint.fmpq_mat(n, 1, rhs))
        except ZeroDivisionError:
            return None, (f"the exact KKT system of the active set ({sum(map(len, active))} tight margins) is "
                          "singular: a degenerate optimum")
        A = flint.fmpq_mat(V, m)
        for (j, u), i in where.items():
            A[u, j] = sol[i, 0]
        leave = [(j, u) for (j, u) in unknowns if u in active[j] and A[u, j] > 0]
        W = A * H  # (V, d): stationarity by construction
        L = W * H.transpose()  # (V, m) exact logits
        join = []
        for j in range(m):
            top = L[anchors[j], j]
            for v in range(V):
                if v not in supports[j] and v not in active[j] and top - L[v, j] < 1:
                    join.append((j, v))
        if not leave and not join:
            break
        for j, u in leave:
            active[j].discard(u)
        for j, v in join:
            active[j].add(v)
    else:
        return None, f"the active set did not settle in {KKT_ROUNDS} rounds"
    # the checks of the module doc, exactly (the checkers repeat them from the written pair)
    for j in range(m):
        if sum((A[u, j] for u in supports[j] | active[j]), flint.fmpq(0)) != 0:
            return None, f"context {j}: the dual's column sum is not 0"
        c = L[anchors[j], j]
        if any(L[z, j] != c for z in supports[j]):
            return None, f"context {j}: the in-support logits differ"
    sq = sum((W[v, i] ** 2 for v in range(V) for i in range(d)), flint.fmpq(0))
    mass = -sum((A[v, j] for j in range(m) for v in active[j]), flint.fmpq(0))
    primal, dual = _frac(sq) / 2, _frac(mass) - _frac(sq) / 2
    if primal != dual:
        return None, f"the pair's gap is {float(primal - dual):.3g}, not 0"
    deltas = tuple((v, i, _frac(W[v, i])) for v in range(V) for i in range(d) if W[v, i] != 0)
    a_exact = {(v, j): _frac(A[v, j]) for j in range(m) for v in supports[j] | active[j] if A[v, j] != 0}
    a_float = np.zeros((V, m))
    for (v, j), x in a_exact.items():
        a_float[v, j] = float(x)
    norm = math.sqrt(float(2 * primal))
    lo, hi = math.nextafter(norm, 0.0), math.nextafter(norm, math.inf)
    while lo > 0 and Fraction(lo) ** 2 > 2 * primal:
        lo = math.nextafter(lo, 0.0)
    while Fraction(hi) ** 2 < 2 * primal:
        hi = math.nextafter(hi, math.inf)
    bound = SVMBound(primal_feasible=True, primal_objective=primal, dual_objective=dual, gap=Fraction(0),
                     gap_float=0.0, relative_gap=0.0, distance_bound=0.0, norm_lower=lo, norm_upper=hi,
                     scale=Fraction(1), margin_lower=1.0, W_base=np.zeros((V, d)), W_delta=deltas, a=a_float,
                     reason="", bits=DEFAULT_BITS, seconds=time.perf_counter() - t0, a_exact=a_exact)
    return bound, f"exact KKT: {sum(map(len, active))} tight margins, {len(unknowns)} unknowns, {_round + 1} round(s)"
