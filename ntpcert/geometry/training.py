r"""Training both the word embeddings W (V × d) and the context embeddings H (m × d) of the
unconstrained-features model, and how the logits :math:`L_k = W_kH_k^\top` approach the geometry of
:math:`L^{mm}`.

Objective (weights :math:`\pi_j`, optional weight decay :math:`\lambda_k`):

.. math:: \mathrm{CE}(WH^\top) + \tfrac{\lambda_k}{2}(\|W\|_F^2 + \|H\|_F^2), \qquad
   \nabla_W = GH + \lambda_kW,\ \nabla_H = G^\top W + \lambda_kH,\ G = (\mathbb S(L) - P^\top)\,\mathrm{diag}(\pi).

Steps: ``gd`` :math:`x \leftarrow x - \eta\nabla`; ``ngd`` :math:`x \leftarrow x - \eta\nabla/\|\nabla\|` (joint
Frobenius norm of both gradients); ``adam`` (β = (0.9, 0.99), ε = 1e-8). Weight decay vanishes as
:math:`\lambda_k = \lambda_0/(k+1)` (``wd0 = 0``: none). By the regularisation-path result of arXiv 2408.15417,
:math:`L \approx L^{in} + t\,L^{mm}` with t growing like :math:`\log(1/\lambda)`, so the direction of the part of
:math:`L_k` in :math:`\mathcal F^\perp` is what approaches :math:`L^{mm}`; :math:`\cos(L_k, L^{mm})` itself gets
there only as fast as :math:`\|L^{in}\|/t` falls, i.e. logarithmically in the number of steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.dynamics.trajectory import geometric_grid
from ntpcert.errors import InputError
from ntpcert.geometry.embeddings import check_centred, check_context_collapse, check_word_collapse
from ntpcert.geometry.pattern import SupportPattern, finite_part, ufm_excess_loss
from ntpcert.instance import NTPInstance

#: Optimisers of the joint training.
JOINT_OPTIMIZERS = ("gd", "ngd", "adam")
#: Metric columns, in order.
JOINT_METRICS = ("excess_loss", "norm_L", "cos_mm", "cos_mm_perp", "dist_in", "context_collapse", "word_collapse",
                 "centred")


def _cos(A: np.ndarray, B: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    return float((A * B).sum() / (na * nb)) if na > 0 and nb > 0 else 0.0


@dataclass(frozen=True, eq=False)
class JointTrajectory:
    """Metrics of joint training at the steps of a geometric grid.

    Attributes
    ----------
    optimizer : str
    steps : ndarray of int, shape (n,)
    metrics : dict of str to ndarray of shape (n,)
        Columns :data:`JOINT_METRICS`: CE − ℋ, ‖L_k‖_F, cos(L_k, L^mm), cos(P_F⊥ L_k, L^mm),
        ‖P_F L_k − L^in‖_F, and the relative defects of the collapse/centring checks on P_F⊥ L_k.
    L_final : ndarray of shape (V, m)
    lr : float or None
        The step size (figure keys name it).
    """

    optimizer: str
    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    L_final: np.ndarray
    lr: float | None = None

    def final(self) -> dict[str, float]:
        return {k: float(v[-1]) for k, v in self.metrics.items()}

    def to_json(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "steps": [int(s) for s in self.steps],
                "metrics": {k: [float(x) for x in v] for k, v in self.metrics.items()}}


def train_joint(instance: NTPInstance, L_mm: np.ndarray, *, optimizer: str = "gd", steps: int = 10_000,
                lr: float | None = None, d: int | None = None, init_scale: float = 1e-2, wd0: float = 0.0,
                rng: np.random.Generator | None = None) -> JointTrajectory:
    """Train W (V × d) and H (m × d) from ``init_scale`` · Gaussian; metrics on the grid of
    :func:`ntpcert.dynamics.trajectory.geometric_grid`. ``L_mm`` has shape (V, m); ``d`` defaults to V;
    ``lr`` defaults to 0.5 (gd), 0.05 (ngd), 0.01 (adam)."""
    name = str(optimizer).lower()
    if name not in JOINT_OPTIMIZERS:
        raise InputError(f"optimizer: value {optimizer!r} is not one of {', '.join(JOINT_OPTIMIZERS)}")
    pattern = SupportPattern.from_instance(instance)
    L_mm = pattern.check_logits(L_mm, "L_mm")
    V, m = pattern.V, pattern.m
    d = V if d is None else int(d)
    if d < 1:
        raise InputError(f"d: value {d!r} is not a positive integer")
    lr = {"gd": 0.5, "ngd": 0.05, "adam": 0.01}[name] if lr is None else float(lr)
    if not lr > 0:
        raise InputError(f"lr: value {lr!r} is not positive")
    rng = np.random.default_rng(0) if rng is None else rng
    W = init_scale * rng.standard_normal((V, d))
    H = init_scale * rng.standard_normal((m, d))
    P = instance.probs.T
    pi = instance.weights
    L_in = finite_part(instance)
    grid = geometric_grid(steps)
    rows: list[list[float]] = []
    mW = np.zeros_like(W); vW = np.zeros_like(W); mH = np.zeros_like(H); vH = np.zeros_like(H)
    b1, b2, eps = 0.9, 0.99, 1e-8
    gi = 0
    for k in range(steps + 1):
        L = W @ H.T
        if gi < grid.size and k == grid[gi]:
            perp = pattern.project_perp(L)
            rows.append([ufm_excess_loss(instance, L), float(np.linalg.norm(L)), _cos(L, L_mm), _cos(perp, L_mm),
                         float(np.linalg.norm(pattern.project_F(L) - L_in)),
                         check_context_collapse(perp, pattern).defect, check_word_collapse(perp, pattern).defect,
                         check_centred(perp, pattern).defect])
            gi += 1
        if k == steps:
            break
        Z = L - L.max(axis=0, keepdims=True)
        Sm = np.exp(Z)
        Sm /= Sm.sum(axis=0, keepdims=True)
        G = (Sm - P) * pi[None, :]
        lam = wd0 / (k + 1.0)
        gW = G @ H + lam * W
        gH = G.T @ W + lam * H
        if name == "gd":
            W, H = W - lr * gW, H - lr * gH
        elif name == "ngd":
            n = float(np.sqrt((gW * gW).sum() + (gH * gH).sum()))
            if n > 0:
                W, H = W - lr * gW / n, H - lr * gH / n
        else:
            t = k + 1
            mW = b1 * mW + (1 - b1) * gW; vW = b2 * vW + (1 - b2) * gW * gW
            mH = b1 * mH + (1 - b1) * gH; vH = b2 * vH + (1 - b2) * gH * gH
            W = W - lr * (mW / (1 - b1 ** t)) / (np.sqrt(vW / (1 - b2 ** t)) + eps)
            H = H - lr * (mH / (1 - b1 ** t)) / (np.sqrt(vH / (1 - b2 ** t)) + eps)
    arr = np.asarray(rows, dtype=np.float64)
    metrics = {name_: arr[:, i].copy() for i, name_ in enumerate(JOINT_METRICS)}
    return JointTrajectory(name, grid[: arr.shape[0]].copy(), metrics, W @ H.T, lr=lr)


def fit_rate(traj: JointTrajectory, metric: str = "cos_mm", *, from_step: int = 10) -> float:
    r"""Slope of :math:`\log(1 - \text{metric})` against :math:`\log k` over the grid steps from ``from_step``
    (a power law :math:`1 - \cos \sim k^{\text{slope}}`); nan with fewer than 3 points."""
    s = traj.steps.astype(np.float64)
    y = 1.0 - traj.metrics[metric]
    keep = (s >= from_step) & (y > 0)
    if keep.sum() < 3:
        return float("nan")
    return float(np.polyfit(np.log(s[keep]), np.log(y[keep]), 1)[0])


__all__ = ["JOINT_METRICS", "JOINT_OPTIMIZERS", "JointTrajectory", "fit_rate", "train_joint"]
