r"""The regularisation path :math:`\hat W_B = \arg\min_{\|W\|_F \le B}\mathrm{CE}(W)` (Theorem 1).

The paper's Theorem 1: under NTP-compatibility and separability, :math:`\hat W_B/\|\hat W_B\|\to
W^{mm}/\|W^{mm}\|` and :math:`P_F(\hat W_B)\to W^*` as :math:`B\to\infty`. :func:`regularization_path`
solves the constrained problem for a growing sequence of budgets and logs the metrics of
:mod:`ntpcert.dynamics.trajectory` at each :math:`\hat W_B`.

Three methods solve each budget's problem (:mod:`ntpcert.dynamics.ball`: Newton on the sphere,
accelerated projected gradient, cvxpy); ``"newton"`` is the default when :math:`Vd \le`
``NEWTON_MAX_VARS``.

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

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.util.progress import progress_bar
from ntpcert.dynamics.ball import (BUDGET_CHECK_RTOL, NEWTON_MAX_VARS, REGPATH_KKT_MAX, REGPATH_MAX_ITER, REGPATH_TOL,
                                   kkt_residual, solve_ball_cvxpy, solve_ball_newton, solve_ball_projected)
from ntpcert.dynamics.trajectory import Limits, metric_names, metrics

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
    "BUDGET_CHECK_RTOL",
    "METHODS",
    "NEWTON_MAX_VARS",
    "ON_FAILURE",
    "REGPATH_KKT_MAX",
    "RegPath",
    "regularization_path",
]
