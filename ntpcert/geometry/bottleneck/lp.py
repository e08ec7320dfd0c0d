r"""One token's argmaxability by a margin LP on a growing set of rows (cutting planes), made exact.

With the lifted rows :math:`a_u = (w_v - w_u,\ b_v - b_u)` (the last entry only with a bias) and
:math:`x = (h, s)`, the LP over a set U of other tokens is

.. math:: \max\ t \quad\text{s.t.}\quad a_u^\top x \ge t\ (u \in U),\quad -1 \le h \le 1,\ 0 \le s \le 1,\ t \le 1 .

Its optimum :math:`t^*` is positive iff some x has :math:`a_u^\top x > 0` on U; by LP duality it is 0 iff
some :math:`\lambda \ge 0` on U with :math:`\sum \lambda = 1` has :math:`\sum_u \lambda_u (w_v - w_u) = 0` and
:math:`\sum_u \lambda_u (b_v - b_u) \le 0` (docs/math.md). Both outcomes are sound for the whole vocabulary
once made exact: a point is checked against **every** row in exact arithmetic, and a certificate on a
subset U is one on the whole vocabulary. When the LP's point is beaten in float by rows outside U, the
most violated ones join U and the LP is solved again (at most ``max_rounds`` times).

The rows are centred and scaled first (:math:`(w - \mu)/\sigma_W`, :math:`b/\sigma_b`): differences of rows do
not see the centre, and positive scalings of h and s keep every sign.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ntpcert.exact.argmax import unique_argmax
from ntpcert.geometry.bottleneck.farkas import exact_combination
from ntpcert.util.budget import budget_text, highs_budget, highs_options, highs_stop

__all__ = ["LP_MAX_ROUNDS", "LPOutcome", "solve_token"]

#: Cutting-plane rounds one token may take (LPs solved) before it is left undetermined.
LP_MAX_ROUNDS = 40

#: Rows of the first LP: the tokens that score highest under the starting direction.
START_ROWS = 64

#: Rows added per round, at most: the most violated in float.
ADD_ROWS = 256

#: An LP optimum at most this counts as t* = 0 (the rows are scaled to at most 1).
T_TOL = 1e-9


@dataclass(frozen=True)
class LPOutcome:
    """What the LP showed for one token.

    Attributes
    ----------
    verdict : bool or None
        True: argmaxable (``point`` checked exactly); False: not (``support``, ``weights`` checked
        exactly); None: undetermined (``why``).
    point : ndarray of shape (D,) or None
        x = (h, s) in the decoder's own units, s > 0 with a bias.
    support, weights : list
        The exact convex combination.
    rounds : int
        LPs solved.
    why : str
    """

    verdict: bool | None
    point: np.ndarray | None = None
    support: tuple[int, ...] = ()
    weights: tuple[Fraction, ...] = ()
    rounds: int = 0
    why: str = ""


class Scaled:
    """The centred, scaled lifted rows the LPs are built on (shared by every token)."""

    def __init__(self, W: np.ndarray, b: np.ndarray | None) -> None:
        mu = W.mean(axis=0)
        Wc = W - mu
        self.sw = float(np.abs(Wc).max()) or 1.0
        cols = [Wc / self.sw]
        self.sb = 1.0
        if b is not None:
            bc = b - b.mean()
            self.sb = float(np.abs(bc).max()) or 1.0
            cols.append((bc / self.sb).reshape(-1, 1))
        self.A = np.ascontiguousarray(np.hstack(cols))
        self.bias = b is not None

    def original(self, x: np.ndarray) -> np.ndarray:
        """The same witness in the decoder's units: s scaled by sigma_W / sigma_b."""
        out = np.array(x, dtype=np.float64)
        if self.bias:
            out[-1] = out[-1] * self.sw / self.sb
        return out


def solve_token(W_aug: np.ndarray, W: np.ndarray, b: np.ndarray | None, scaled: Scaled, v: int, x0: np.ndarray,
                max_rounds: int = LP_MAX_ROUNDS) -> LPOutcome:
    """Decide token v by cutting-plane LPs (module doc); ``x0`` (D,) is a starting direction in the scaled
    rows' units, whose top-scoring rows start U."""
    from scipy.optimize import linprog

    A = scaled.A
    V, D = A.shape
    margins = (A[v] - A) @ x0
    margins[v] = np.inf
    U = np.argsort(margins, kind="stable")[: min(V - 1, START_ROWS)]
    bounds = [(-1.0, 1.0)] * (D - 1) + [(0.0, 1.0) if scaled.bias else (-1.0, 1.0)] + [(None, 1.0)]
    cost = np.zeros(D + 1)
    cost[-1] = -1.0
    for rnd in range(1, max_rounds + 1):
        rows = A[v] - A[U]
        A_ub = np.hstack([-rows, np.ones((U.size, 1))])
        budget = highs_budget(*A_ub.shape)
        res = linprog(cost, A_ub=A_ub, b_ub=np.zeros(U.size), bounds=bounds, method="highs-ds",
                      options=highs_options(budget))
        stop = highs_stop(res, budget, None, "the LP of this token")
        if stop is not None:
            return LPOutcome(None, rounds=rnd, why=stop)
        if res.status != 0:
            return LPOutcome(None, rounds=rnd, why=f"HiGHS: {res.message}")
        t = -float(res.fun)
        if t <= T_TOL:
            lam = -np.asarray(res.ineqlin.marginals, dtype=np.float64)
            sup = U[lam > 1e-12 * max(float(lam.max()), 1e-300)]
            comb = exact_combination(W, b, v, sup)
            if comb is None:
                return LPOutcome(None, rounds=rnd, why=f"the LP's margin is {t:.3g} (about 0), but the {sup.size} "
                                 "tokens of its dual give no exact convex combination (a degenerate hull near "
                                 "this row)")
            return LPOutcome(False, support=tuple(comb[0]), weights=tuple(comb[1]), rounds=rnd)
        x = np.asarray(res.x[:D], dtype=np.float64)
        if scaled.bias and x[-1] <= 0:  # a direction at infinity: any small s > 0 keeps the margins
            x[-1] = t / (4.0 * max(1.0, float(np.abs(A[:, -1]).max())))
        m = (A[v] - A) @ x
        m[v] = np.inf
        low = np.flatnonzero(m <= 0.5 * t)
        low = low[~np.isin(low, U)]
        if low.size == 0:
            point = scaled.original(x)
            if unique_argmax(W_aug, point, v):
                return LPOutcome(True, point=point, rounds=rnd)
            low = np.argsort(m, kind="stable")[: ADD_ROWS]
            low = low[~np.isin(low, U)]
            if low.size == 0:
                return LPOutcome(None, rounds=rnd, why=f"the LP's point (margin {t:.3g}) fails the exact check on "
                                 "rows the LP already holds (rounding)")
        add = low[np.argsort(m[low], kind="stable")[:ADD_ROWS]]
        U = np.concatenate([U, add])
    return LPOutcome(None, rounds=max_rounds,
                     why=budget_text(max_rounds, "cutting-plane LP rounds", "a larger --max-lp-rounds may settle it"))
