r"""The check a float point W must pass before a float pipeline calls the data NTP-separable.

A solver's point W (shape (V, d)) is evaluated in float64: the logits :math:`\hat Z = \mathrm{fl}(H W^\top)`
and the differences of the equality rows (6a) and margin rows (6b). Each of them carries a rigorous
bound on its rounding error (any summation order, fused or not, underflow included):

.. math:: |\hat r_i - r_i| \le \beta_i = (1+2^{-40})\Big(\gamma_{d+2}\,(S_{j,z} + S_{j,z'}) + u\,|\hat r_i|\Big)
          + 4d\,2^{-1074}, \qquad S = |H|\,|W|^\top,\ \gamma_n = \frac{nu}{1-nu},\ u = 2^{-53},

for a row of context j between tokens z and z'. The bound is relative to the scale of context j's own
row, :math:`\|W\|\|h_j\|`: a context whose embedding is 10^{-11} times another's has its own, small
bound. The point passes **at rounding level** when every (6a) residual is within its bound and every
margin minus its bound is at least :math:`1 - \text{SEP\_TOL}`.

A point whose (6a) residuals are larger than rounding is no evidence on its own: a W of norm
:math:`10^{10}` that violates :math:`(w_0-w_1)\cdot 3\cdot10^{-11} = 0` by :math:`10^{-11}` meets
:math:`(w_0-w_1)\cdot 3 \ge 1`, although the two together are infeasible. Such a point is checked
exactly instead, when the instance is small enough (:data:`EXACT_MAX_CELLS`): rationalised, repaired
onto :math:`F^\perp` in rational arithmetic and its margins bounded below exactly
(:func:`ntpcert.exact.separability.exact_feasible_point`, as ``--exact`` does). A point that passes
neither check leaves the verdict undetermined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ntpcert.rows.kesler import KeslerSystem

#: A float point's margins must be at least 1 - SEP_TOL after their rounding bound is taken off.
SEP_TOL = 1e-7
#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0 ** -53
#: Instances with at most this many cells (V·d + V·m) get the exact repair when the rounding-level
#: check fails: 0.03 s after a 5.4 s HiGHS solve at 2·10^3 cells (m = 105, V = 14, d = 35), 0.56 s after
#: a 7.5 s structured solve at 2.3·10^5 (m = 1000, V = 200, d = 150): well below the solve it follows.
EXACT_MAX_CELLS = 5_000_000


@dataclass(frozen=True)
class PointCheck:
    """Outcome of :func:`check_point`.

    Attributes
    ----------
    ok : bool
        The point proves (6) (at rounding level, or exactly repaired).
    min_margin : float
        Smallest float margin (``inf`` with no margin rows).
    eq_violation : float
        Largest float (6a) residual.
    eq_excess : float
        Largest ratio of a (6a) residual to its rounding bound (at most 1 at rounding level).
    how : str
        ``"rounding"``, ``"exact-repair"`` or ``""`` (failed).
    text : str
        One line saying what was checked (or why it failed).
    """

    ok: bool
    min_margin: float
    eq_violation: float
    eq_excess: float
    how: str
    text: str


def _gamma(n: int) -> float:
    return n * UNIT_ROUNDOFF / (1.0 - n * UNIT_ROUNDOFF)


def residual_bounds(system: KeslerSystem, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""``(eq, eq_bound, margin, margin_bound)``: the float (6a) residuals and (6b) margins of W
    (shapes (r,) and (q,)) and the rigorous bounds :math:`\beta_i` on their rounding errors (module doc)."""
    inst = system.instance
    H = inst.embeddings
    Z = H @ W.T  # (m, V)
    S = np.abs(H) @ np.abs(W).T
    g = _gamma(inst.d + 2)
    tiny = 4.0 * inst.d * 2.0 ** -1074
    safety = 1.0 + 2.0 ** -40

    def rows(ctx, plus, minus):
        r = Z[ctx, plus] - Z[ctx, minus]
        with np.errstate(over="ignore"):
            b = safety * (g * (S[ctx, plus] + S[ctx, minus]) + UNIT_ROUNDOFF * np.abs(r)) + tiny
        return r, b

    eq, eqb = rows(system.eq_context, system.eq_token, system.eq_anchor)
    mar, marb = rows(system.mar_context, system.mar_anchor, system.mar_token)
    return eq, eqb, mar, marb


def check_point(system: KeslerSystem, W: np.ndarray, *, exact: bool = True) -> PointCheck:
    """Whether the float point W (shape (V, d)) proves NTP-separability (module doc).

    With ``exact`` (default), a point that fails the rounding-level check of (6a) is repaired exactly
    when the instance has at most :data:`EXACT_MAX_CELLS` cells."""
    inst = system.instance
    W = np.asarray(W, dtype=np.float64)
    if W.shape != (inst.V, inst.d) or not np.all(np.isfinite(W)):
        return PointCheck(False, math.nan, math.nan, math.inf, "", "the point is not a finite (V, d) matrix")
    eq, eqb, mar, marb = residual_bounds(system, W)
    eqv = float(np.abs(eq).max()) if eq.size else 0.0
    margin = float(mar.min()) if mar.size else math.inf
    margin_low = float((mar - marb).min()) if mar.size else math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = float(np.max(np.abs(eq) / eqb)) if eq.size else 0.0
    if not np.isfinite(eqb).all() or not np.isfinite(marb).all():
        return PointCheck(False, margin, eqv, math.inf, "", "the point's logits overflow float64")
    if not margin_low >= 1.0 - SEP_TOL:
        return PointCheck(False, margin, eqv, excess, "",
                          f"smallest margin {margin:.6g} (at least {margin_low:.6g} after its rounding bound) is "
                          f"below 1 - {SEP_TOL:g}")
    if excess <= 1.0:
        return PointCheck(True, margin, eqv, excess, "rounding",
                          f"smallest margin {margin:.6g} >= 1 - {SEP_TOL:g} after its rounding bound, and every "
                          f"(6a) residual within its rounding bound relative to |W||h_j| (largest {eqv:.2e})")
    why = (f"(6a) residuals exceed their rounding bound (by a factor {excess:.3g}; largest residual {eqv:.2e}), "
           "so the float point proves nothing")
    cells = inst.V * (inst.d + inst.m)
    if not exact or cells > EXACT_MAX_CELLS:
        return PointCheck(False, margin, eqv, excess, "",
                          why + (f"; the exact repair is not tried above {EXACT_MAX_CELLS} cells (V(d + m) = "
                                 f"{cells}): run 'ntpcert certify DATA --exact'" if exact else ""))
    from ntpcert.exact.separability import exact_feasible_point

    point, ell, reason = exact_feasible_point(inst, W)
    if point is None:
        return PointCheck(False, margin, eqv, excess, "", f"{why}; the exact repair fails: {reason}")
    return PointCheck(True, margin, eqv, excess, "exact-repair",
                      f"{why} alone; repaired exactly onto F-perp, its smallest margin is at least {ell:.6g} > 0 "
                      "in rational arithmetic")


__all__ = ["EXACT_MAX_CELLS", "PointCheck", "SEP_TOL", "check_point", "residual_bounds"]
