r"""The finite part of the limit of CE with fixed logit offsets: the minimiser over F_E of the reduced loss.

Given an instance, offsets :math:`c\in\mathbb R^V` (zero for plain CE) and sets :math:`E_j\supseteq S_j`
(:math:`E_j = S_j` on separable data; :math:`S_j\cup N_j` given the split of
:mod:`ntpcert.solve.finite_limit`; all of [V] when every token is in every support, as under label
smoothing), the reduced loss is

.. math:: L_{E,c}(W) = \sum_j\pi_j\sum_{z\in S_j}p_{j,z}\Big(\log\sum_{u\in E_j}e^{w_u^\top h_j + c_u}
          - w_z^\top h_j - c_z\Big).

It depends on W only through :math:`P_{F_E}W` (the logit differences inside each :math:`E_j`), it is
strictly convex on :math:`F_E` (its Hessian there is :math:`\sum_j\pi_j\mathrm{Var}_{s_j}(Dh_j)` in a
direction D, with :math:`s_j` the softmax over :math:`E_j`, positive on :math:`E_j`: zero only when every
:math:`Dh_j` is constant on :math:`E_j`, i.e. :math:`D\perp F_E`) and coercive on :math:`F_E` (proof in
``docs/math.md``, "Losses other than plain CE"), so it has one minimiser :math:`W_{E,c}\in F_E`. When the
shifted system :math:`(w_z - w_{z'})^\top h_j = \log(p_{j,z}/p_{j,z'}) - (c_z - c_{z'})` on
:math:`E_j = S_j` is solvable, :math:`W_{E,c}` is its minimum-norm solution.

:func:`offset_limit` finds it by damped Newton in the coordinates of an orthonormal basis of
:math:`F_E`, as :func:`ntpcert.solve.finite_limit.finite_limit` does with c = 0 (the same gradient and
Hessian with the softmax of :math:`Wh_j + c`). A float64 measurement, stopping at :data:`GRAD_TOL`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.solve.finite_limit import (GRAD_TOL, MAX_DENSE_ROWS, MAX_LOGIT_ENTRIES, MAX_NEWTON_STEPS,
                                        check_nonseparable, extended_pattern)

_ARMIJO = 1e-4
_MIN_STEP = 2.0 ** -40
_NOISE = 64 * float(np.finfo(np.float64).eps)


@dataclass(frozen=True, eq=False)
class OffsetLimit:
    r"""The minimiser :math:`W_{E,c}` of the reduced loss (module doc).

    Attributes
    ----------
    W : ndarray of shape (V, d)
        :math:`W_{E,c}\in F_E`.
    value : float
        :math:`L_{E,c}(W)`.
    grad_norm : float
        :math:`\|\nabla L_{E,c}(W)\|_F`; ``converged`` when at most ``tol``.
    iterations : int
    system, subspace
        The Kesler rows of the pattern E and :math:`F_E`.
    seconds : float
    """

    W: np.ndarray
    value: float
    grad_norm: float
    converged: bool
    iterations: int
    system: KeslerSystem
    subspace: Subspace
    seconds: float
    tol: float = GRAD_TOL


def _log_softmax(instance: NTPInstance, W: np.ndarray, c: np.ndarray, ext: np.ndarray) -> np.ndarray:
    Z = instance.embeddings @ W.T + c
    Z = np.where(ext, Z, -np.inf)
    Z = Z - Z.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        return Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))


def reduced_value(instance: NTPInstance, W: np.ndarray, offsets: np.ndarray, ext: np.ndarray) -> float:
    r""":math:`L_{E,c}(W)` with E given by the (m, V) mask ``ext``."""
    L = _log_softmax(instance, np.asarray(W, dtype=np.float64), offsets, ext)
    P = instance.probs
    S = P > 0
    return float(instance.weights @ np.where(S, -P * np.where(S, L, 0.0), 0.0).sum(axis=1))


def reduced_gradient(instance: NTPInstance, W: np.ndarray, offsets: np.ndarray, ext: np.ndarray) -> np.ndarray:
    r""":math:`\nabla L_{E,c}(W) = \sum_j\pi_j(s_j - p_j)h_j^\top`, shape (V, d)."""
    s = np.exp(_log_softmax(instance, np.asarray(W, dtype=np.float64), offsets, ext))
    return ((s - instance.probs) * instance.weights[:, None]).T @ instance.embeddings


def offset_limit(instance: NTPInstance, offsets: Any = None, nonseparable: Any = (), *,
                 tol: float = GRAD_TOL, max_steps: int = MAX_NEWTON_STEPS) -> OffsetLimit:
    r""":math:`W_{E,c}` with :math:`E_j = S_j\cup N_j` (N = ``nonseparable``, rows (j, v); empty: E = S) by
    damped Newton on :math:`F_E` (module doc).

    Raises
    ------
    InputError
        For offsets of the wrong shape or not finite, or a malformed ``nonseparable``.
    SolverError
        Past :data:`~ntpcert.solve.finite_limit.MAX_DENSE_ROWS` equality rows or
        :data:`~ntpcert.solve.finite_limit.MAX_LOGIT_ENTRIES` logits.
    """
    t0 = time.perf_counter()
    V, d = instance.V, instance.d
    c = np.zeros(V) if offsets is None else np.asarray(offsets, dtype=np.float64)
    if c.shape != (V,) or not np.all(np.isfinite(c)):
        raise InputError(f"offsets: expected {V} finite numbers, got shape {c.shape}")
    N = check_nonseparable(instance, nonseparable)
    if instance.m * V > MAX_LOGIT_ENTRIES:
        raise SolverError(f"offset limit: m·V = {instance.m * V:,} is more than {MAX_LOGIT_ENTRIES:,} logits")
    pattern = extended_pattern(instance, N) if len(N) else instance
    system = KeslerSystem.build(pattern)
    if system.n_eq > MAX_DENSE_ROWS:
        raise SolverError(f"offset limit: {system.n_eq} equality rows, more than the {MAX_DENSE_ROWS} of the dense "
                          "Newton solve")
    sub = Subspace.build(system, method="eigh")
    ext = pattern.support_mask()
    lam, Q = sub.eigvals, sub.eigvecs
    k = int(lam.size)
    W = np.zeros((V, d))
    f = reduced_value(instance, W, c, ext)
    steps = 0
    if k:
        M = Q * np.sqrt(lam)
        to_y = Q / np.sqrt(lam)
        ctx, tok = system.eq_context, system.eq_token
        pi, P = instance.weights, instance.probs
        coef = np.zeros(k)
        prev = np.inf
        for steps in range(1, max_steps + 1):
            s = np.exp(_log_softmax(instance, W, c, ext))
            sp = s[ctx, tok]
            grad = M.T @ (pi[ctx] * (sp - P[ctx, tok]))
            gnorm = float(np.linalg.norm(grad))
            if gnorm <= tol * 1e-2 or (gnorm <= tol and gnorm >= 0.5 * prev):
                steps -= 1
                break
            prev = gnorm
            Hc = (M * (pi[ctx] * sp)[:, None]).T @ M
            v = np.zeros((instance.m, k))
            np.add.at(v, ctx, sp[:, None] * M)
            Hc -= (v * pi[:, None]).T @ v
            Hc = 0.5 * (Hc + Hc.T) + 1e-300 * np.eye(k)
            try:
                step = -np.linalg.solve(Hc, grad)
            except np.linalg.LinAlgError:
                step = -np.linalg.lstsq(Hc, grad, rcond=None)[0]
            slope = float(grad @ step)
            if not slope < 0:
                step, slope = -grad, -gnorm * gnorm
            noise = _NOISE * max(1.0, abs(f))
            t = 1.0
            while True:
                c_new = coef + t * step
                W_new = system.apply_eq_T(to_y @ c_new)
                f_new = reduced_value(instance, W_new, c, ext)
                if f_new <= f + _ARMIJO * t * slope or (t == 1.0 and -slope <= noise and f_new <= f + noise):
                    break
                t *= 0.5
                if t < _MIN_STEP:
                    break
            if t < _MIN_STEP:
                steps -= 1
                break
            coef, W, f = c_new, W_new, f_new
    gnorm = float(np.linalg.norm(reduced_gradient(instance, W, c, ext)))
    return OffsetLimit(W, reduced_value(instance, W, c, ext), gnorm, bool(gnorm <= tol), int(steps), system, sub,
                       time.perf_counter() - t0, tol)


__all__ = ["OffsetLimit", "offset_limit", "reduced_gradient", "reduced_value"]
