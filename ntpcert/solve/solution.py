r"""The result of an NTP-SVM solve, checked against the optimality conditions of the instance.

Primal: :math:`\min \tfrac12\|W\|_F^2` s.t. (6a) :math:`A_{eq}\mathrm{vec}(W) = 0`, (6b) :math:`A_{mar}\mathrm{vec}(W) \ge 1`.

Dual (see ``math.md``): :math:`a \in \mathbb{R}^{V\times m}` with :math:`\mathbf 1^\top a_j = 0` and
:math:`a_{j,v} \le 0` for :math:`v \notin S_j`, objective
:math:`D(a) = \sum_j\sum_{v\notin S_j} (-a_{j,v}) - \tfrac12\|a H\|_F^2`, and stationarity :math:`W = aH`
(``a`` has one column per context, so :math:`aH = \sum_j a_j h_j^\top`).

Every number below is recomputed from ``(W, a)`` and the instance, never taken from a solver:

* primal residual: :math:`\max(\|A_{eq}\mathrm{vec}(W)\|_\infty, \max(0, 1 - \min A_{mar}\mathrm{vec}(W)))`;
* dual residual: :math:`\max(\|W - aH\|_\infty, \max_j |\mathbf 1^\top a_j|, \max_{v\notin S_j} (a_{j,v})_+)`;
* gap: :math:`\tfrac12\|W\|_F^2 - D(a)` (non-negative up to rounding when both points are feasible);
* complementarity: :math:`\max_{v \notin S_j} |a_{j,v}|\,|m_{j,v} - 1|` with the margins :math:`m_{j,v}`.

With token multiplicities :math:`\nu` (:meth:`~ntpcert.instance.NTPInstance.with_token_multiplicity`: token v
stands for :math:`\nu_v` tokens of equal rows) the problem is that of the larger vocabulary: the objective is
:math:`\tfrac12\sum_v\nu_v\|w_v\|^2` (so ``norm`` is the larger vocabulary's :math:`\|W\|_F`), the column sums
:math:`\sum_v\nu_v a_{j,v}`, and :math:`D(a) = \sum_j\sum_{v\notin S_j}\nu_v(-a_{j,v}) - \tfrac12\sum_v\nu_v\|(aH)_v\|^2`;
stationarity stays :math:`W = aH` row by row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.rows.kesler import KeslerSystem

#: Default tolerance of :meth:`SVMSolution.is_optimal` on residuals and relative gap.
SVM_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class SVMSolution:
    """A primal-dual pair for the NTP-SVM with its residuals.

    Attributes
    ----------
    W : ndarray of shape (V, d)
        Primal point (the candidate :math:`W^{mm}`).
    dual : ndarray of shape (V, m)
        Dual point ``a`` (column j is :math:`a_j`).
    objective : float
        :math:`\\tfrac12\\|W\\|_F^2`.
    dual_objective : float
        :math:`D(a)`.
    primal_residual, dual_residual, gap, complementarity : float
        See the module doc.
    min_margin : float
        Smallest (6b) margin of W.
    solver, status : str
    seconds : float
        Wall time of the solve.
    iterations : int or None
    info : dict
        Solver-specific records (JSON-ready).
    exact_bound : object or None
        The exact gap bound (:class:`ntpcert.exact.svm_gap.SVMBound`) this pair was certified with,
        when the solver computed one; later exact stages reuse it instead of repeating it.
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    W: np.ndarray
    dual: np.ndarray
    objective: float
    dual_objective: float
    primal_residual: float
    dual_residual: float
    gap: float
    complementarity: float
    min_margin: float
    solver: str
    status: str
    seconds: float
    iterations: int | None = None
    info: dict = field(default_factory=dict)
    exact_bound: Any = None

    @classmethod
    def from_primal_dual(
        cls,
        system: KeslerSystem,
        W: np.ndarray,
        dual: np.ndarray,
        *,
        solver: str,
        status: str,
        seconds: float,
        iterations: int | None = None,
        info: dict | None = None,
    ) -> "SVMSolution":
        inst = system.instance
        W = np.asarray(W, dtype=np.float64).reshape(inst.V, inst.d)
        a = np.asarray(dual, dtype=np.float64).reshape(inst.V, inst.m)
        H = inst.embeddings
        eq = system.apply_eq(W)
        mar = system.apply_margin(W)
        eq_viol = float(np.abs(eq).max()) if eq.size else 0.0
        min_margin = float(mar.min()) if mar.size else float("inf")
        prim = max(eq_viol, max(0.0, 1.0 - min_margin) if mar.size else 0.0)
        Wa = a @ H
        off = a[system.mar_token, system.mar_context]
        nu = inst.token_multiplicity
        if nu is None:
            colsum = a.sum(axis=0)
            obj = 0.5 * float(np.sum(W * W))
            dobj = float(-off.sum()) - 0.5 * float(np.sum(Wa * Wa))
        else:
            w = nu.astype(np.float64)
            colsum = w @ a
            obj = 0.5 * float(w @ np.sum(W * W, axis=1))
            dobj = float(-(w[system.mar_token] @ off)) - 0.5 * float(w @ np.sum(Wa * Wa, axis=1))
        dres = max(
            float(np.abs(W - Wa).max()) if W.size else 0.0,
            float(np.abs(colsum).max()),
            float(max(0.0, off.max())) if off.size else 0.0,
        )
        comp = float(np.max(np.abs(off) * np.abs(mar - 1.0))) if off.size else 0.0
        return cls(
            W=W,
            dual=a,
            objective=obj,
            dual_objective=dobj,
            primal_residual=prim,
            dual_residual=dres,
            gap=obj - dobj,
            complementarity=comp,
            min_margin=min_margin,
            solver=solver,
            status=status,
            seconds=seconds,
            iterations=iterations,
            info=dict(info or {}),
        )

    @property
    def norm(self) -> float:
        """:math:`\\|W\\|_F`."""
        return float(np.sqrt(2.0 * self.objective))

    @property
    def relative_gap(self) -> float:
        """:math:`|\\text{gap}| / \\tfrac12\\|W\\|_F^2`, scale-free (with :math:`\\max(1, \\cdot)` in the
        denominator, teacher data scaled by 1e8, whose objective is 1e-13, passed as optimal with W at four times
        the optimum's norm); 0 when W and the gap are 0, inf when only W is."""
        obj = abs(self.objective)
        if obj > 0:
            return abs(self.gap) / obj
        return 0.0 if self.gap == 0 else float("inf")

    def is_optimal(self, eps: float = SVM_TOL) -> bool:
        """True when primal and dual residuals and the relative gap are all at most ``eps``."""
        return self.primal_residual <= eps and self.dual_residual <= eps and self.relative_gap <= eps

    def to_json(self) -> dict:
        return {
            "solver": self.solver,
            "status": self.status,
            "norm": self.norm,
            "objective": self.objective,
            "dual_objective": self.dual_objective,
            "primal_residual": self.primal_residual,
            "dual_residual": self.dual_residual,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "complementarity": self.complementarity,
            "min_margin": self.min_margin,
            "seconds": self.seconds,
            "iterations": self.iterations,
        }
