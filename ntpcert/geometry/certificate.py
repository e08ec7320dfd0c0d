r"""The nuclear-norm NTP-SVM on the logits, its dual, and the duality gap of any candidate pair.

Primal (the logit-domain NTP-SVM of the unconstrained-features model, arXiv 2408.15417):

.. math::

    L^{mm} = \arg\min_{L \in \mathbb R^{V\times m}} \|L\|_* \quad\text{s.t.}\quad
    L_{z,j} = L_{z',j}\ (z, z' \in S_j), \qquad L_{z,j} - L_{v,j} \ge 1\ (z \in S_j,\ v \notin S_j).

Dual (our derivation; Lagrangian with a free level :math:`c_j` per context, :math:`L_{z,j} = c_j` on
:math:`S_j` and :math:`L_{v,j} \le c_j - 1` off it): the nuclear norm's dual norm is the spectral norm, so

.. math::

    \max_{\Lambda \in \mathbb R^{V\times m}} \ -\sum_j \sum_{v \notin S_j} \Lambda_{v,j}
    \quad\text{s.t.}\quad \|\Lambda\|_2 \le 1,\quad \mathbf 1^\top\Lambda_{:,j} = 0,\quad
    \Lambda_{v,j} \le 0\ (v \notin S_j),

in-support entries free. At an optimum :math:`\Lambda \in \partial\|L^{mm}\|_*` (so
:math:`\Lambda = U V^\top + Z` on the SVD of :math:`L^{mm}`) and :math:`\Lambda_{v,j} < 0` only where the margin
is exactly 1.

**Gap of any pair** (:func:`certify_pair`). Any :math:`\Lambda` is made dual feasible by clipping its
off-support entries to :math:`\le 0`, shifting its in-support entries so that each column sums to 0, and
dividing by its spectral norm; its objective is then a lower bound :math:`D` on :math:`\|L^{mm}\|_*`.
Any L is made primal feasible by setting each support to its mean c and clipping the other entries to
:math:`\le c - 1`, then centring the columns (:math:`(I - \mathbf 1\mathbf 1^\top/V)L` is feasible and no
larger in nuclear norm, since the projection has spectral norm 1). The structured solver first averages the
rows of tokens with the same row of the support matrix (:func:`average_token_rows`: feasible, since such
tokens are in or out of every support together, and no larger in nuclear norm, being a projection). The reported gap is
:math:`\|L\|_* - D \ge 0`; it bounds the suboptimality of L, whichever solver produced the pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.geometry.pattern import SupportPattern

#: Singular values below this fraction of the largest count as zero in the reported rank.
RANK_RTOL = 1e-6


def repair_primal(L: np.ndarray, pattern: SupportPattern) -> np.ndarray:
    """A feasible L close to ``L`` (shape (V, m)): supports set to their mean c, other entries clipped to
    at most c - 1, columns centred (see the module doc)."""
    L = pattern.check_logits(L)
    S = pattern.mask
    c = np.where(S, L, 0.0).sum(axis=0) / S.sum(axis=0)
    out = np.where(S, c[None, :], np.minimum(L, c[None, :] - 1.0))
    return out - out.mean(axis=0, keepdims=True)


def average_token_rows(L: np.ndarray, pattern: SupportPattern) -> np.ndarray:
    """``L`` (shape (V, m)) with the rows of tokens that have the same row of the support matrix replaced by
    their mean: an orthogonal projection on the rows, so never a larger nuclear norm, and it keeps feasibility
    (such tokens are in or out of every support together) and the column means. :func:`repair_primal` keeps
    equal rows equal. Used by the structured solver; the cvxpy path does not average, so that the
    word-collapse statement is tested on its solutions independently."""
    L = pattern.check_logits(L)
    labels = pattern.token_groups()
    if labels.max() + 1 == labels.size:  # every token has its own row of S
        return L
    sums = np.zeros((int(labels.max()) + 1, L.shape[1]))
    np.add.at(sums, labels, L)
    return (sums / np.bincount(labels)[:, None])[labels]


def project_dual(Lam: np.ndarray, pattern: SupportPattern) -> np.ndarray:
    r"""``Lam`` made to satisfy the sign and column-sum constraints of the dual (not the norm bound):
    off-support entries clipped to :math:`\le 0`, in-support entries shifted by a constant per column."""
    Lam = np.asarray(Lam, dtype=np.float64)
    S = pattern.mask
    out = np.where(S, Lam, np.minimum(Lam, 0.0))
    shift = out.sum(axis=0) / S.sum(axis=0)
    return np.where(S, out - shift[None, :], out)


def dual_value(Lam: np.ndarray, pattern: SupportPattern) -> tuple[float, np.ndarray]:
    r"""The lower bound of a dual candidate and the feasible dual point it gives:
    :math:`D = -\sum_{v\notin S_j}\Lambda_{v,j}/\|\Lambda\|_2` after :func:`project_dual`. ``(0, 0)`` for 0."""
    P = project_dual(Lam, pattern)
    sigma = float(np.linalg.norm(P, ord=2)) if P.size else 0.0
    if not sigma > 0.0:
        return 0.0, np.zeros_like(P)
    P = P / sigma
    return float(-np.where(pattern.mask, 0.0, P).sum()), P


def nuclear_norm(L: np.ndarray) -> float:
    """:math:`\\|L\\|_*`, the sum of the singular values."""
    return float(np.linalg.svd(np.asarray(L, dtype=np.float64), compute_uv=False).sum())


@dataclass(frozen=True, eq=False)
class NuclearSVMSolution:
    r"""A primal-dual pair for the nuclear-norm NTP-SVM with its certified gap.

    Attributes
    ----------
    L : ndarray of shape (V, m)
        The primal point (feasible by construction, :func:`repair_primal`), the candidate :math:`L^{mm}`.
    dual : ndarray of shape (V, m)
        A feasible dual point :math:`\Lambda` (:math:`\|\Lambda\|_2 \le 1`).
    objective : float
        :math:`\|L\|_*`.
    dual_objective : float
        The dual value of ``dual``, a lower bound on the optimum.
    gap : float
        ``objective - dual_objective``.
    equality_violation, min_margin : float
        Of ``L``: largest in-support logit difference (0 up to rounding) and smallest margin (1 up to rounding).
    rank : int
        Singular values of L above :data:`RANK_RTOL` times the largest.
    solver, status : str
    seconds : float
    iterations : int
        The solver's own count (outer iterations for the structured solver).
    """

    L: np.ndarray
    dual: np.ndarray
    objective: float
    dual_objective: float
    gap: float
    equality_violation: float
    min_margin: float
    rank: int
    solver: str
    status: str
    seconds: float
    iterations: int

    @property
    def relative_gap(self) -> float:
        """``gap / objective`` (0 when the objective is 0)."""
        return self.gap / self.objective if self.objective > 0 else 0.0

    def is_optimal(self, rtol: float) -> bool:
        """Whether the certified relative gap is at most ``rtol`` and L is feasible to ``rtol``."""
        return self.relative_gap <= rtol and self.equality_violation <= rtol and self.min_margin >= 1.0 - rtol

    def singular_values(self) -> np.ndarray:
        return np.linalg.svd(self.L, compute_uv=False)

    def to_json(self) -> dict[str, Any]:
        def clean(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "solver": self.solver,
            "status": self.status,
            "objective": self.objective,
            "dual_objective": self.dual_objective,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "equality_violation": self.equality_violation,
            "min_margin": clean(self.min_margin),
            "rank": self.rank,
            "seconds": self.seconds,
            "iterations": self.iterations,
            "shape": list(self.L.shape),
        }


def certify_pair(L: np.ndarray, Lam: np.ndarray, pattern: SupportPattern, *, solver: str, status: str,
                 seconds: float, iterations: int) -> NuclearSVMSolution:
    """Repair ``L`` to feasibility and ``Lam`` to dual feasibility, and return the pair with its gap."""
    Lf = repair_primal(L, pattern)
    sv = np.linalg.svd(Lf, compute_uv=False)
    primal = float(sv.sum())
    dual, Lam_f = dual_value(Lam, pattern)
    rank = int(np.sum(sv > RANK_RTOL * sv[0])) if sv.size and sv[0] > 0 else 0
    gap = primal - dual  # >= 0 up to rounding, by weak duality
    return NuclearSVMSolution(Lf, Lam_f, primal, dual, gap, pattern.equality_violation(Lf), pattern.min_margin(Lf),
                              rank, solver, status, float(seconds), int(iterations))


__all__ = ["NuclearSVMSolution", "RANK_RTOL", "average_token_rows", "certify_pair", "dual_value", "nuclear_norm", "project_dual",
           "repair_primal"]
