r"""The problem of one budget on the regularisation path, :math:`\min_{\|W\|_F \le B}\mathrm{CE}(W)`, and
its check (:func:`kkt_residual`); :mod:`ntpcert.dynamics.regpath` walks the budgets.

Three methods:

* ``"newton"`` (default when :math:`Vd \le` ``NEWTON_MAX_VARS``): Newton's method on the KKT system
  of the sphere :math:`\|W\|_F = B` with the dense Hessian
  :math:`\sum_j\pi_j(\mathrm{diag}(s_j) - s_js_j^\top)\otimes h_jh_j^\top` (see :func:`solve_ball_newton`),
  warm-started from the previous budget's answer. Accurate far out on the path, where first-order
  methods crawl (the curvature along :math:`W^{mm}` decays like :math:`e^{-\text{margin}}`).
* ``"projected"``: accelerated projected gradient (FISTA with gradient-based restart) on the ball,
  step :math:`1/L` with :math:`L` of :meth:`NTPInstance.smoothness`, warm-started from the previous
  budget's answer scaled to the new radius. The projection onto the ball is a rescaling. It stops when the
  gradient mapping :math:`\mathcal G(W) = L\,(W - \Pi_B(W - \nabla\mathrm{CE}(W)/L))` is at most
  ``tol`` times :math:`\|\nabla\mathrm{CE}(W)\|` (a relative test: far out on the path the gradient
  itself is tiny, and only its direction carries information).
* ``"cvxpy"``: the same problem through cvxpy's ``log_sum_exp`` (exponential cones) and Clarabel,
  :math:`\min \sum_j\pi_j(\mathrm{lse}(Wh_j) - p_j^\top Wh_j)` s.t. :math:`\|W\|_F\le B`; accurate for
  moderate B, and slower.

At an optimum on the boundary, KKT reads :math:`\nabla\mathrm{CE}(\hat W_B) = -\mu\hat W_B` with
:math:`\mu\ge0`; :func:`kkt_residual` measures how far a point is from it, from the gradient alone.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance, ce
from ntpcert.instance.ce import CEKernel

#: Relative gradient-mapping tolerance of the projected method.
REGPATH_TOL = 1e-7
#: Iteration cap per budget of the projected method.
REGPATH_MAX_ITER = 200_000
#: The gradient mapping is evaluated every this many iterations (it costs one gradient).
CHECK_EVERY = 25

#: Newton's method is used up to this many entries of W (the Hessian is dense, (Vd)^2 entries).
NEWTON_MAX_VARS = 3000
#: Newton stops when :math:`\|\nabla\mathrm{CE} + \mu W\| \le` this times :math:`\|\nabla\mathrm{CE}\|`
#: and the norm is within ``BUDGET_RTOL`` of B.
NEWTON_TOL = 1e-10
NEWTON_MAX_ITER = 100
#: Newton continuation grows the radius by at most this factor per solve.
NEWTON_CONTINUATION = 2.0
#: First Levenberg-Marquardt damping (relative to L) when the Newton matrix is singular to rounding.
NEWTON_DAMP_REL = 1e-12
#: Relative accuracy of the attained norm against the requested budget.
BUDGET_RTOL = 1e-10
#: A path point is accepted when its :func:`kkt_residual` is at most this ...
REGPATH_KKT_MAX = 1e-6
#: ... and its norm is within this relative distance of the budget (the optimum of the ball lies on
#: its sphere: CE has no minimiser when the data are separable).
BUDGET_CHECK_RTOL = 1e-8
#: Newton continuation: failed radius tries (each splits the step) before giving up on a budget.
NEWTON_MAX_SPLITS = 12
#: ... or when the step ratio between radii falls below this.
NEWTON_MIN_RATIO = 1.0 + 1e-4
#: Softmax probabilities below this are set to 0 in the Hessian: their products would be
#: subnormal floats, far below any penalty in use, and slow the factorisation down enormously.
SOFTMAX_FLUSH = 1e-150


def _project_ball(W: np.ndarray, B: float) -> np.ndarray:
    n = float(np.linalg.norm(W))
    return W if n <= B else W * (B / n)


def gradient_mapping_ratio(instance: NTPInstance, W: np.ndarray, B: float, L: float) -> float:
    r""":math:`\|\mathcal G(W)\|/\|\nabla\mathrm{CE}(W)\|` for the ball of radius B (0 at a minimiser)."""
    g = instance.gradient(W)
    gn = float(np.linalg.norm(g))
    if gn == 0.0:
        return 0.0
    Gm = L * (W - _project_ball(W - g / L, B))
    return float(np.linalg.norm(Gm)) / gn


def solve_ball_projected(
    instance: NTPInstance,
    B: float,
    *,
    W0: np.ndarray | None = None,
    tol: float = REGPATH_TOL,
    max_iter: int = REGPATH_MAX_ITER,
) -> tuple[np.ndarray, int, float]:
    r"""FISTA with gradient restart for :math:`\min_{\|W\|_F\le B}\mathrm{CE}(W)`.

    Parameters
    ----------
    W0 : ndarray of shape (V, d), optional
        Start (projected onto the ball); default zeros.

    Returns
    -------
    W : ndarray of shape (V, d)
    iterations : int
    ratio : float
        The final relative gradient-mapping norm.
    """
    L = instance.smoothness()
    if not L > 0:
        raise InputError(f"instance: smoothness bound {L!r} is not positive")
    kernel = CEKernel(instance)
    X = np.zeros((instance.V, instance.d)) if W0 is None else _project_ball(np.array(W0, dtype=np.float64), B)
    Y = X.copy()
    G = np.empty_like(X)
    t = 1.0
    ratio = float("inf")
    it = 0
    for it in range(1, max_iter + 1):
        kernel.gradient_into(Y, G)
        Xn = _project_ball(Y - G / L, B)
        if float(np.vdot(Y - Xn, Xn - X)) > 0.0:  # gradient restart (O'Donoghue and Candes)
            Y = X.copy()
            t = 1.0
            kernel.gradient_into(Y, G)
            Xn = _project_ball(Y - G / L, B)
        tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        Y = Xn + ((t - 1.0) / tn) * (Xn - X)
        X, t = Xn, tn
        if it % CHECK_EVERY == 0:
            ratio = gradient_mapping_ratio(instance, X, B, L)
            if ratio <= tol:
                break
    else:
        ratio = gradient_mapping_ratio(instance, X, B, L)
    return X, it, ratio


def _hessian(instance: NTPInstance, W: np.ndarray) -> np.ndarray:
    r"""Dense Hessian of CE at W, shape (Vd, Vd) in the vec order of :mod:`ntpcert.rows.kesler`
    (:func:`ntpcert.instance.ce.hessian`, probabilities below ``SOFTMAX_FLUSH`` set to 0)."""
    return ce.hessian(instance.ce_layout, W, flush=SOFTMAX_FLUSH)


def _row_projector(instance: NTPInstance) -> np.ndarray:
    """Orthogonal projector of shape (d, d) onto the row space of H."""
    H = instance.embeddings
    U, sv, Vt = np.linalg.svd(H, full_matrices=False)
    k = int(np.count_nonzero(sv > sv[0] * max(H.shape) * np.finfo(float).eps)) if sv.size and sv[0] > 0 else 0
    return Vt[:k].T @ Vt[:k]


def _project_U(instance: NTPInstance, W: np.ndarray) -> np.ndarray:
    r"""Projection onto :math:`U = \{AH : \mathbf 1^\top A = 0\}`, the span of all gradients."""
    Wc = W - W.mean(axis=0, keepdims=True)
    return Wc @ _row_projector(instance)


def _null_shift(instance: NTPInstance) -> np.ndarray:
    r""":math:`L\,(I - P_U)` of shape (Vd, Vd), with :math:`P_U = (I_V - \mathbf 1\mathbf 1^\top/V)\otimes P_H`.

    CE is constant along :math:`U^\perp` (a constant added to every logit, or a direction that no
    :math:`h_j` sees), so its Hessian vanishes there; the shift makes the Newton matrix invertible
    without changing it on U, where every gradient, every iterate and the minimiser live."""
    V, d = instance.V, instance.d
    C = np.eye(V) - 1.0 / V
    PU = np.kron(C, _row_projector(instance))
    return instance.smoothness() * (np.eye(V * d) - PU)


def solve_ball_newton(
    instance: NTPInstance,
    B: float,
    *,
    W0: np.ndarray | None = None,
    tol: float = NEWTON_TOL,
    max_iter: int = NEWTON_MAX_ITER,
    kkt_max: float = REGPATH_KKT_MAX,
) -> tuple[np.ndarray, int, float, float]:
    r"""The minimiser of CE on the sphere of radius B by Newton continuation, checked at every radius.

    From ``W0`` (default: a short step along :math:`-\nabla\mathrm{CE}(0)`, where the logits move by
    less than 1) the radius grows by factors of at most ``NEWTON_CONTINUATION`` up to B, each radius
    solved by :func:`newton_sphere` from the previous answer. Far-away cold starts overshoot into
    regions where CE is flat to rounding, and Newton's model is useless there.

    Every radius r is accepted only when its answer passes :func:`kkt_residual` (residual at most
    ``kkt_max``, :math:`\big|\|W\|-r\big|\le` ``BUDGET_CHECK_RTOL``·r). A radius that fails is not
    used as a start: the step from the last accepted radius is split geometrically (its ratio
    square-rooted) and retried, and the ratio grows again after each success. After
    ``NEWTON_MAX_SPLITS`` failed tries, or when the ratio falls below ``NEWTON_MIN_RATIO``, a
    :class:`~ntpcert.errors.SolverError` names the last accepted radius and the residual reached.

    Returns W of shape (V, d), the Newton iterations in all, the residual of :func:`kkt_residual` at
    B and its multiplier :math:`\mu`.
    """
    V, d = instance.V, instance.d
    if W0 is None or not np.any(W0):
        g0 = instance.gradient(np.zeros((V, d)))
        n0 = float(np.linalg.norm(g0))
        if n0 == 0.0:
            return np.zeros((V, d)), 0, 0.0, 0.0
        hmax = float(np.linalg.norm(instance.embeddings, axis=1).max())
        r = min(B, 1.0 / max(hmax, np.finfo(float).tiny))
        W = -r * g0 / n0
    else:
        W = np.array(W0, dtype=np.float64)
        r = min(B, float(np.linalg.norm(W)))
    total = 0
    failures = 0
    ratio = NEWTON_CONTINUATION
    last: tuple[float, float, float] | None = None  # (radius, residual, norm) of the last failed try
    accepted = False
    with _lapack_one_thread():
        target = r
        while True:
            Wn, it, _, _ = newton_sphere(instance, target, W, tol=tol, max_iter=max_iter)
            total += it
            res, mu = kkt_residual(instance, Wn, target)
            nrm = float(np.linalg.norm(Wn))
            if res <= kkt_max and abs(nrm - target) <= BUDGET_CHECK_RTOL * target:
                W, r, accepted = Wn, target, True
                if r >= B:
                    return W, total, res, mu
                ratio = min(NEWTON_CONTINUATION, ratio * ratio)
            else:
                failures += 1
                last = (target, res, nrm)
                ratio = math.sqrt(target / r) if target > r else 1.0
                if failures > NEWTON_MAX_SPLITS or ratio < NEWTON_MIN_RATIO or not accepted:
                    where = f"last checked radius {r:.6g}" if accepted else "no radius passed"
                    raise SolverError(
                        f"newton (B = {B:.6g}): no KKT point found; {where}, and the try at radius {last[0]:.6g} "
                        f"gave residual {last[1]:.2g} (limit {kkt_max:g}) with ||W|| = {last[2]:.6g} after "
                        f"{failures} tries (float64 may no longer resolve the gradient this far out on the path)")
            target = min(B, ratio * r)


def _lapack_one_thread() -> Any:
    """BLAS/LAPACK on one thread, scipy's included: a (Vd)^2 Cholesky of a few hundred rows runs
    20-50 times slower on several threads of a loaded machine. scipy's BLAS is loaded first, so that
    the thread-pool controller sees it (one made before it was loaded does not)."""
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS)

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is optional
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def kkt_residual(instance: NTPInstance, W: np.ndarray, B: float) -> tuple[float, float]:
    r"""The KKT residual of :math:`\min\mathrm{CE}(W)` s.t. :math:`\|W\|_F\le B` at W, from the
    gradient alone (whatever method produced W).

    KKT: :math:`\nabla\mathrm{CE}(W) + \mu W = 0` with :math:`\mu\ge0`, and :math:`\mu = 0` unless
    :math:`\|W\| = B`. The multiplier is the least-squares one,
    :math:`\mu = \max(0, -\langle g, W\rangle/\|W\|^2)` on the sphere (within
    ``BUDGET_CHECK_RTOL``) and 0 inside; the residual is :math:`\|g + \mu W\|/\|g\|` (0 at an exact
    optimum, 1 when the gradient does not point inwards). A gradient that is exactly 0 at
    :math:`W\ne0` has underflowed, and the residual is NaN (undetermined), never 0.

    Returns
    -------
    residual, mu : float
    """
    W = np.asarray(W, dtype=np.float64)
    if not np.all(np.isfinite(W)):
        return math.inf, math.nan
    g = instance.gradient(W)
    gn = float(np.linalg.norm(g))
    nw = float(np.linalg.norm(W))
    if gn == 0.0:  # at W != 0 the gradient underflowed (it vanishes nowhere on separable data)
        return (0.0, 0.0) if nw == 0.0 else (math.nan, math.nan)
    mu = 0.0
    if nw > 0 and abs(nw - B) <= BUDGET_CHECK_RTOL * B:
        mu = max(0.0, -float(np.vdot(g, W)) / (nw * nw))
    return float(np.linalg.norm(g + mu * W)) / gn, mu


def newton_sphere(
    instance: NTPInstance,
    B: float,
    W0: np.ndarray,
    *,
    tol: float = NEWTON_TOL,
    max_iter: int = NEWTON_MAX_ITER,
) -> tuple[np.ndarray, int, float, float]:
    r"""Newton's method on the KKT system of :math:`\min\mathrm{CE}(W)` s.t. :math:`\|W\|_F = B`.

    With :math:`g = \nabla\mathrm{CE}(W)` and :math:`K = \nabla^2\mathrm{CE}(W) + \mu I`, each step solves

    .. math:: \begin{bmatrix} K & W \\ W^\top & 0\end{bmatrix}
              \begin{bmatrix}\Delta W\\ \Delta\mu\end{bmatrix}
              = -\begin{bmatrix} g + \mu W \\ (\|W\|^2 - B^2)/2\end{bmatrix}

    through a Cholesky factor of K (two solves and a Schur complement), with backtracking on the
    scaled residual norm and :math:`\mu` clipped at 0. Iterates stay in the span U of the gradients
    (``W0`` is projected onto it), and K is shifted by :math:`L` on :math:`U^\perp`, where CE is
    flat. The sphere's linearisation removes the radial direction, along which CE is nearly flat far
    out on the path. The start is ``W0`` projected onto U and rescaled to norm B.

    Returns
    -------
    W : ndarray of shape (V, d)
    iterations : int
    residual : float
        :math:`\|g + \mu W\|/\|g\|`.
    mu : float
        The multiplier (positive when the constraint is active, as it is for separable data).

    Far out on the path the gradient itself is of the order of :math:`e^{-\text{margin}}` and its
    F-part is resolved only to about machine epsilon over that size, so the residual cannot be
    driven below roughly :math:`10^{-16}/\|\nabla\mathrm{CE}\|`; the iteration then stops when the
    line search makes no progress and reports the residual it reached.
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    V, d = instance.V, instance.d
    W = _project_U(instance, np.array(W0, dtype=np.float64))
    nw = float(np.linalg.norm(W))
    if nw == 0.0:
        raise InputError("W0: its part in the span of the gradients is zero; give a nonzero start")
    W *= B / nw
    L = instance.smoothness()
    shift = _null_shift(instance)
    g = instance.gradient(W)
    mu = max(0.0, -float(np.vdot(g, W)) / B**2)
    gscale = max(float(np.linalg.norm(g)), np.finfo(float).tiny)

    def residual(X: np.ndarray, m: float) -> tuple[np.ndarray, float, float]:
        gx = instance.gradient(X)
        r1 = gx + m * X
        r2 = (float(np.linalg.norm(X)) - B) / B
        return gx, float(np.linalg.norm(r1)) / gscale, r2

    g, r1n, r2 = residual(W, mu)
    res = float("inf")
    it = 0
    for it in range(1, max_iter + 1):
        gn = float(np.linalg.norm(g))
        res = float(np.linalg.norm(g + mu * W)) / gn if gn > 0 else 0.0
        if res <= tol and abs(r2) <= BUDGET_RTOL:
            break
        K = _hessian(instance, W) + shift
        K[np.diag_indices_from(K)] += mu
        fac = None
        damp = 0.0
        while fac is None:  # Levenberg-Marquardt damping where CE is flat to rounding on U
            try:
                fac = cho_factor(K, check_finite=False)
            except LinAlgError as err:
                new = max(100.0 * damp, NEWTON_DAMP_REL * L)
                if new > L:
                    raise SolverError(f"newton (B = {B:g}): Hessian not positive definite ({err})") from err
                K[np.diag_indices_from(K)] += new - damp
                damp = new
        w = W.reshape(-1)
        x1 = cho_solve(fac, (g + mu * W).reshape(-1), check_finite=False)
        xw = cho_solve(fac, w, check_finite=False)
        rr = 0.5 * (float(w @ w) - B * B)
        dmu = (rr - float(w @ x1)) / float(w @ xw)
        dW = (-x1 - xw * dmu).reshape(V, d)
        merit = r1n**2 + r2**2
        a = 1.0
        accepted = False
        while a >= 1e-10:
            mu_n = max(0.0, mu + a * dmu)  # the multiplier of an inequality stays non-negative
            Wn = W + a * dW
            gn_, r1n_, r2_ = residual(Wn, mu_n)
            if r1n_**2 + r2_**2 <= (1.0 - 1e-4 * a) * merit:
                accepted = True
                break
            a *= 0.5
        if not accepted:
            break
        W, mu, g, r1n, r2 = Wn, mu_n, gn_, r1n_, r2_
    gn = float(np.linalg.norm(g))
    res = float(np.linalg.norm(g + mu * W)) / gn if gn > 0 else 0.0
    return W, it, res, mu


def solve_ball_cvxpy(instance: NTPInstance, B: float, *, solver: str = "CLARABEL") -> np.ndarray:
    """The same problem through cvxpy (exponential cones). Returns W of shape (V, d)."""
    import cvxpy as cp

    X = cp.Variable((instance.V, instance.d))
    Z = instance.embeddings @ X.T  # (m, V)
    pi = instance.weights
    lin = cp.sum(cp.multiply(instance.probs * pi[:, None], Z))
    obj = pi @ cp.log_sum_exp(Z, axis=1) - lin
    prob = cp.Problem(cp.Minimize(obj), [cp.norm(X, "fro") <= B])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=solver)
    except (cp.error.SolverError, ValueError) as err:
        raise SolverError(f"cvxpy/{solver} (regularisation path, B = {B:g}): {err}") from err
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or X.value is None:
        raise SolverError(f"cvxpy/{solver} (regularisation path, B = {B:g}): status {prob.status}")
    return np.asarray(X.value)


__all__ = [
    "BUDGET_CHECK_RTOL",
    "NEWTON_MAX_VARS",
    "REGPATH_KKT_MAX",
    "REGPATH_MAX_ITER",
    "REGPATH_TOL",
    "gradient_mapping_ratio",
    "kkt_residual",
    "newton_sphere",
    "solve_ball_cvxpy",
    "solve_ball_newton",
    "solve_ball_projected",
]
