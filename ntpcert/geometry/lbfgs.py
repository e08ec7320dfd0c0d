r"""Unconstrained L-BFGS for the structured nuclear-norm solver's inner problems.

Written out because those problems are unconstrained and large (tens of thousands of variables): scipy's
L-BFGS-B spends most of its time in its bound-constraint bookkeeping, several times the cost of the
objective itself.

The direction is the two-loop recursion over the last ``memory`` pairs :math:`(s_i, y_i)`, scaled by
:math:`s^\top y / y^\top y`. The step starts at 1 and is halved until it is accepted by either

- the Armijo condition :math:`\varphi(t) \le \varphi(0) + \delta t \varphi'(0)`, or
- Hager and Zhang's *approximate* Armijo condition (CG_DESCENT, SIAM J. Optim. 16, 2005), for when the
  decrease is below the objective's rounding level :math:`\epsilon_f = 16\,\mathrm{eps}\max(|f|, 1)`:
  :math:`\varphi(t) \le \varphi(0) + \epsilon_f` and :math:`\varphi'(t) \le (1 - 2\delta)\,|\varphi'(0)|`.
  On a quadratic :math:`\varphi(t) - \varphi(0) = \tfrac t2(\varphi'(0) + \varphi'(t))`, so the second
  condition is the Armijo condition written with derivatives, which stay accurate where differences of
  :math:`\varphi` are lost to rounding.

When no halving passes, or the step falls below the resolution of x, the memory is dropped and the search
is tried once more along :math:`-\nabla f`; noise in the pairs :math:`y_i` at the rounding level can make
the two-loop direction useless there while the gradient is still well above ``gtol``. Only when that
fails too does it stop, with reason ``"line search"``.

Here :math:`\varphi(t) = f(x + t d)` and :math:`\varphi'(t) = \nabla f(x + td)^\top d`, both from the one
call of ``fun`` per trial step.

An earlier version accepted a rounding-level step only when it lowered the largest gradient entry. That
entry is not monotone along a descent direction, so the search could fail with the gradient still far
above ``gtol``: on a 40-variable quadratic of condition number 1e3 it stopped at a relative residual of
1.8e-7 with OpenBLAS's SkylakeX kernels and 1.2e-8 with its Haswell ones, while the derivative test goes
on to ``gtol`` under both (and, with the restart, under the Sandybridge kernels, where the memory's
direction stalled at 3.9e-10).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

#: Armijo's sufficient-decrease constant δ.
ARMIJO = 1e-4
#: Halvings of the step before the line search gives up.
MAX_HALVINGS = 40

StopReason = Literal["gtol", "maxiter", "line search"]


@dataclass(frozen=True)
class LBFGSResult:
    """The last point of :func:`lbfgs` and why it stopped.

    x : ndarray of shape (n,)
    iterations : the L-BFGS steps taken.
    evaluations : the calls of ``fun``.
    reason : ``"gtol"`` (largest gradient entry at most ``gtol``), ``"maxiter"``, or ``"line search"``
        (no step passed either decrease test: the objective is flat to rounding along the direction).
    gmax : the largest gradient entry at ``x``.
    """

    x: np.ndarray
    iterations: int
    evaluations: int
    reason: StopReason
    gmax: float


def lbfgs(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, *, maxiter: int, memory: int,
          gtol: float) -> LBFGSResult:
    r"""Minimise a smooth ``fun`` by L-BFGS from ``x0``.

    Parameters
    ----------
    fun : callable returning ``(f(x), grad f(x))`` for x of shape (n,)
    x0 : ndarray of shape (n,), the start
    maxiter : the most L-BFGS steps
    memory : the number of correction pairs kept
    gtol : stop once :math:`\|\nabla f(x)\|_\infty \le` ``gtol``

    Examples
    --------
    >>> A = np.diag([1.0, 10.0]); b = np.array([1.0, 1.0])
    >>> res = lbfgs(lambda v: (0.5 * v @ A @ v - b @ v, A @ v - b), np.zeros(2), maxiter=100, memory=5, gtol=1e-12)
    >>> res.reason, np.allclose(res.x, [1.0, 0.1])
    ('gtol', True)
    """
    x = np.asarray(x0, dtype=np.float64)
    f, g = fun(x)
    evaluations = 1
    S: list[np.ndarray] = []
    Yl: list[np.ndarray] = []
    rhos: list[float] = []
    reason: StopReason = "maxiter"
    it = 0
    for it in range(maxiter + 1):
        if float(np.abs(g).max(initial=0.0)) <= gtol:
            reason = "gtol"
            break
        if it == maxiter:
            break
        d = -_two_loop(g, S, Yl, rhos)
        slope = float(g @ d)
        if not slope < 0:  # not a descent direction: restart from the gradient
            S.clear(), Yl.clear(), rhos.clear()
            d, slope = -g, -float(g @ g)
        step = _line_search(fun, x, f, d, slope)
        evaluations += step[3]
        if step[0] is None and S:  # the memory misleads at the rounding level: restart from the gradient
            S.clear(), Yl.clear(), rhos.clear()
            d, slope = -g, -float(g @ g)
            step = _line_search(fun, x, f, d, slope)
            evaluations += step[3]
        if step[0] is None:
            reason = "line search"
            break
        x_new, f_new, g_new = step[0], step[1], step[2]
        sv, yv = x_new - x, g_new - g
        sy = float(sv @ yv)
        if sy > 1e-12 * float(np.linalg.norm(sv)) * float(np.linalg.norm(yv)):
            S.append(sv), Yl.append(yv), rhos.append(1.0 / sy)
            if len(S) > memory:
                S.pop(0), Yl.pop(0), rhos.pop(0)
        x, f, g = x_new, f_new, g_new
    return LBFGSResult(x=x, iterations=it, evaluations=evaluations, reason=reason,
                       gmax=float(np.abs(g).max(initial=0.0)))


def _line_search(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x: np.ndarray, f: float, d: np.ndarray,
                 slope: float) -> tuple[np.ndarray | None, float, np.ndarray | None, int]:
    """Halve the step from 1 until the Armijo or the approximate Armijo condition holds at a point other
    than x; return (x_new, f_new, g_new, evaluations), with x_new None where no step passed."""
    flat = 16 * np.finfo(float).eps * max(abs(f), 1.0)  # the objective's rounding level
    t = 1.0
    for k in range(MAX_HALVINGS):
        x_new = x + t * d
        if np.array_equal(x_new, x):  # the step is below x's resolution
            return None, f, None, k
        f_new, g_new = fun(x_new)
        if f_new <= f + ARMIJO * t * slope:
            return x_new, f_new, g_new, k + 1
        if f_new <= f + flat and float(g_new @ d) <= (1.0 - 2.0 * ARMIJO) * -slope:
            return x_new, f_new, g_new, k + 1
        t *= 0.5
    return None, f, None, MAX_HALVINGS


def _two_loop(g: np.ndarray, S: list[np.ndarray], Yl: list[np.ndarray], rhos: list[float]) -> np.ndarray:
    """The L-BFGS approximation of the inverse Hessian applied to g (Nocedal and Wright, Algorithm 7.4)."""
    q = g.copy()
    alphas = []
    for sv, yv, rh in zip(reversed(S), reversed(Yl), reversed(rhos)):
        a = rh * float(sv @ q)
        alphas.append(a)
        q -= a * yv
    if S:
        q *= float(S[-1] @ Yl[-1]) / float(Yl[-1] @ Yl[-1])
    else:
        q *= 1.0 / max(float(np.linalg.norm(g)), 1.0)
    for sv, yv, rh, a in zip(S, Yl, rhos, reversed(alphas)):
        b = rh * float(yv @ q)
        q += (a - b) * sv
    return q
