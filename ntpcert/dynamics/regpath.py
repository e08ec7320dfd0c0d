r"""The regularisation path :math:`\hat W_B = \arg\min_{\|W\|_F \le B}\mathrm{CE}(W)` (Theorem 1).

The paper's Theorem 1: under NTP-compatibility and separability, :math:`\hat W_B/\|\hat W_B\|\to
W^{mm}/\|W^{mm}\|` and :math:`P_F(\hat W_B)\to W^*` as :math:`B\to\infty`. :func:`regularization_path`
solves the constrained problem for a growing sequence of budgets and logs the metrics of
:mod:`ntpcert.dynamics.trajectory` at each :math:`\hat W_B`.

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
:math:`\mu\ge0`. Every answer, whatever the method, is checked from the gradient alone
(:func:`kkt_residual`: :math:`\|\nabla\mathrm{CE} + \mu W\|/\|\nabla\mathrm{CE}\|` with the
least-squares :math:`\mu`, at most ``REGPATH_KKT_MAX``) and against its budget
(:math:`\big|\|W\|-B\big|\le` ``BUDGET_CHECK_RTOL``·B). The path never warm-starts from an answer that
failed: Newton continuation splits the step instead, and a budget that still fails raises
:class:`~ntpcert.errors.SolverError` (or is marked, with ``on_failure="mark"``). Far out on the path
the gradient is of the order of :math:`e^{-\text{margin}}` and float64 stops resolving it; there the
check fails and says so, rather than returning a wrong point.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance, ce
from ntpcert.util.progress import progress_bar
from ntpcert.instance.ce import CEKernel
from ntpcert.dynamics.trajectory import Limits, metric_names, metrics

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

METHODS = ("newton", "projected", "cvxpy")
ON_FAILURE = ("raise", "mark")


@dataclass(frozen=True, eq=False)
class RegPath:
    """Solutions along the regularisation path, their checks and their metrics.

    Attributes
    ----------
    budgets : ndarray of shape (n,)
        The radii B, increasing.
    W : ndarray of shape (n, V, d)
        :math:`\\hat W_B` for each budget (NaN where ``certified`` is False).
    metrics : dict of str to ndarray of shape (n,)
        The metrics of :func:`ntpcert.dynamics.trajectory.metrics` at each :math:`\\hat W_B` (NaN where
        not certified).
    kkt : ndarray of shape (n,)
        The KKT residual of :func:`kkt_residual` (0 at an exact optimum; NaN where the solver gave
        no answer).
    iterations : ndarray of shape (n,)
        Iterations used (Newton steps in all, or projected-gradient steps; 0 for cvxpy).
    method : str
    seconds : float
    certified : ndarray of shape (n,), bool
        The answer passed the check: KKT residual at most ``kkt_max`` and
        :math:`|\\,\\|W\\|-B\\,|\\le` ``BUDGET_CHECK_RTOL``·B.
    mu : ndarray of shape (n,)
        The KKT multiplier (:math:`\\nabla\\mathrm{CE} = -\\mu W`).
    failures : tuple of str
        Why the budgets that are not certified failed (``on_failure="mark"``).
    kkt_max : float
        The acceptance limit used.
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    budgets: np.ndarray
    W: np.ndarray
    metrics: dict[str, np.ndarray]
    kkt: np.ndarray
    iterations: np.ndarray
    method: str
    seconds: float
    certified: np.ndarray | None = None
    mu: np.ndarray | None = None
    failures: tuple[str, ...] = ()
    kkt_max: float = REGPATH_KKT_MAX

    def __getitem__(self, name: str) -> np.ndarray:
        return self.metrics[name]

    @property
    def all_certified(self) -> bool:
        """Every budget passed its check."""
        return self.certified is not None and bool(np.all(self.certified))

    def to_csv(self) -> str:
        names = list(self.metrics)
        ok = self.certified if self.certified is not None else np.ones(self.budgets.size, dtype=bool)
        lines = [",".join(["budget", *names, "kkt", "iterations", "certified"])]
        for i, b in enumerate(self.budgets):
            vals = [repr(float(self.metrics[n][i])) for n in names]
            lines.append(",".join([repr(float(b)), *vals, repr(float(self.kkt[i])), str(int(self.iterations[i])),
                                   str(bool(ok[i])).lower()]))
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        def clean(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "method": self.method,
            "seconds": self.seconds,
            "budgets": [float(b) for b in self.budgets],
            "metrics": {k: [clean(float(x)) for x in v] for k, v in self.metrics.items()},
            "kkt": [clean(float(x)) for x in self.kkt],
            "kkt_max": self.kkt_max,
            "certified": None if self.certified is None else [bool(x) for x in self.certified],
            "failures": list(self.failures),
            "iterations": [int(x) for x in self.iterations],
        }


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


def regularization_path(
    instance: NTPInstance,
    budgets: Sequence[float],
    *,
    method: str | None = None,
    limits: Limits | None = None,
    tol: float = REGPATH_TOL,
    max_iter: int = REGPATH_MAX_ITER,
    kkt_max: float = REGPATH_KKT_MAX,
    on_failure: str = "raise",
    progress: bool = False,
) -> RegPath:
    """Solve :math:`\\min_{\\|W\\|_F\\le B}\\mathrm{CE}(W)` for each B in ``budgets`` (sorted increasing),
    and check every answer.

    Each answer is accepted only when :func:`kkt_residual` is at most ``kkt_max`` and its norm is
    within ``BUDGET_CHECK_RTOL`` of B, so that :math:`\\|W\\|\\le B\\,(1+\\epsilon)` with that tolerance;
    the next budget starts from the last accepted answer. The Newton method refines by itself: it
    splits any step between radii whose answer fails the check (see :func:`solve_ball_newton`), so
    budgets far apart cost more iterations, not accuracy.

    Parameters
    ----------
    instance : NTPInstance
    budgets : sequence of float
        Positive radii.
    method : {"newton", "projected", "cvxpy"}, optional
        Default ``newton`` when V·d is at most ``NEWTON_MAX_VARS``, else ``projected``.
    limits : Limits, optional
        For the metrics; computed (no other norms) when not given.
    tol, max_iter : float, int
        Stopping rule of the projected method.
    kkt_max : float
        The acceptance limit on the KKT residual.
    on_failure : {"raise", "mark"}
        ``raise`` (default): a budget that cannot be solved to the check raises
        :class:`~ntpcert.errors.SolverError` naming it. ``mark``: its row of ``W`` and its metrics
        are NaN, ``certified`` is False there, the reason goes to ``failures``, and the path goes on
        from the last accepted answer.
    progress : bool
        A progress bar on stderr.
    """
    if method is None:
        method = "newton" if instance.V * instance.d <= NEWTON_MAX_VARS else "projected"
    if method not in METHODS:
        raise InputError(f"method: unknown value {method!r} (expected one of {', '.join(METHODS)})")
    if on_failure not in ON_FAILURE:
        raise InputError(f"on_failure: unknown value {on_failure!r} (expected one of {', '.join(ON_FAILURE)})")
    if not (isinstance(kkt_max, (int, float)) and math.isfinite(kkt_max) and kkt_max > 0):
        raise InputError(f"kkt_max: value {kkt_max!r} is not a positive finite number")
    b = np.asarray(budgets, dtype=np.float64).reshape(-1)
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise InputError(f"budgets: expected positive finite radii, got {list(budgets)!r}")
    b = np.sort(b)
    lim = limits if limits is not None else Limits.compute(instance)
    names = metric_names(lim)
    cols = {n: np.full(b.size, math.nan) for n in names}
    Ws = np.full((b.size, instance.V, instance.d), math.nan)
    kkt = np.full(b.size, math.nan)
    mus = np.full(b.size, math.nan)
    ok = np.zeros(b.size, dtype=bool)
    iters = np.zeros(b.size, dtype=np.int64)
    failures: list[str] = []
    t0 = time.perf_counter()
    bar = progress_bar(bool(progress), total=b.size, desc=f"regpath ({method})")
    prev: np.ndarray | None = None
    try:
        for i, B in enumerate(b):
            B = float(B)
            try:
                if method == "newton":
                    W, it, _, _ = solve_ball_newton(instance, B, W0=prev, kkt_max=kkt_max)
                    iters[i] = it
                elif method == "projected":
                    start = None if prev is None else prev * (B / max(float(np.linalg.norm(prev)), 1e-300))
                    W, it, _ = solve_ball_projected(instance, B, W0=start, tol=tol, max_iter=max_iter)
                    iters[i] = it
                else:
                    W = solve_ball_cvxpy(instance, B)
                res, mu = kkt_residual(instance, W, B)
                kkt[i], mus[i] = res, mu
                nrm = float(np.linalg.norm(W))
                if not (res <= kkt_max and abs(nrm - B) <= BUDGET_CHECK_RTOL * B):
                    raise SolverError(f"{method} (B = {B:.6g}): the answer fails its check: KKT residual {res:.2g} "
                                      f"(limit {kkt_max:g}), ||W|| = {nrm:.10g}")
            except SolverError as err:
                if on_failure == "raise":
                    raise
                failures.append(str(err))
            else:
                ok[i] = True
                prev = W
                Ws[i] = W
                row = metrics(W, lim)
                for n in names:
                    cols[n][i] = row[n]
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return RegPath(b, Ws, cols, kkt, iters, method, time.perf_counter() - t0, ok, mus, tuple(failures), kkt_max)


__all__ = [
    "RegPath",
    "gradient_mapping_ratio",
    "kkt_residual",
    "regularization_path",
    "solve_ball_cvxpy",
    "solve_ball_newton",
    "solve_ball_projected",
    "newton_sphere",
]
