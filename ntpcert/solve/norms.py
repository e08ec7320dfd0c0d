r"""The NTP-SVM in other norms: candidate limits of sign descent, Adam, spectral descent and Muon.

For a norm :math:`\|\cdot\|` on :math:`\mathbb R^{V\times d}`,

.. math:: W^{\|\cdot\|} \in \arg\min \|W\| \quad\text{s.t.}\quad
          \text{(6a)}\ A_{eq}\mathrm{vec}(W) = 0,\qquad \text{(6b)}\ A_{mar}\mathrm{vec}(W) \ge 1 .

Norms (``norm=``): ``fro`` (Frobenius, the paper's :math:`W^{mm}`), ``max`` (entrywise
:math:`\max_{v,i}|W_{vi}|`), ``spectral`` (largest singular value), ``nuclear`` (sum of singular
values), ``l1`` (entrywise :math:`\sum|W_{vi}|`). Normalised steepest descent in a norm is known to
converge in direction to the max-margin solution in the same norm on one-hot data; whether it does
under (6a, 6b) is an open question, so these are *candidate* limits.

Unlike the Frobenius problem, these minimisers need not be unique (the norms are not strictly
convex). ``canonical=True`` picks the minimum-Frobenius-norm point among the (near-)minimisers by a
second solve; the margin ratio of :mod:`ntpcert.dynamics.trajectory` does not depend on that choice.

**Routes.** By default (``solver="auto"``) the program goes to Clarabel, SCS or HiGHS directly, as
sparse matrices built from the Kesler rows in its max-margin form (:mod:`ntpcert.solve.norm_programs`);
the cvxpy model, which canonicalises the same program (slowly: 107 s for the spectral norm at
V = 34, d = 105, where the direct route takes 6 s), is the fallback and is used when a cvxpy
solver is named. Progress goes to stderr when asked for.

**Checked answer.** Nothing of the solver's is trusted, whichever route. With the multipliers :math:`\lambda \ge 0` of (6b) and :math:`\nu` of (6a),
weak duality gives for every feasible W (our derivation)

.. math:: \textstyle\sum_i \lambda_i \le \lambda^\top A_{mar}w - \nu^\top A_{eq}w
          = \langle aH, W\rangle \le \|aH\|_\star\,\|W\|,
          \qquad a = \texttt{margin\_coefficients}(\lambda) + \texttt{eq\_coefficients}(-\nu),

so :math:`\sum_i\lambda_i/\|aH\|_\star` is a lower bound on the optimum (:math:`\|\cdot\|_\star` the dual
norm: fro↔fro, max↔l1, spectral↔nuclear). The returned W is repaired to exact feasibility up to
rounding (projected onto :math:`F^\perp`, then divided by its smallest margin), and its norm is
the upper bound. ``gap`` is their difference.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InfeasibleError, InputError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.solve import norm_programs
from ntpcert.util.progress import progress_note

#: ``solver`` names of the direct route: ``direct`` (backend by norm and size) or ``direct:BACKEND``.
DIRECT = "direct"

#: Norm names, and the dual norm of each.
NORMS = ("fro", "max", "spectral", "nuclear", "l1")
DUAL_NORM = {"fro": "fro", "max": "l1", "l1": "max", "spectral": "nuclear", "nuclear": "spectral"}

#: Default tolerance of :meth:`NormSVMSolution.is_optimal` on the relative gap and residuals.
NORM_SVM_TOL = 1e-5

#: The canonical (minimum-Frobenius) point may exceed the optimal norm by this relative slack,
#: or by the first solve's checked relative gap if that is larger.
CANONICAL_SLACK = 1e-6

#: Accuracy asked of SCS (absolute and relative), and its iteration cap.
SCS_EPS = 1e-9
SCS_MAX_ITERS = 200_000

#: The cvxpy solver tried after the direct route for each norm under ``solver="auto"``; SCS is the last
#: fallback for all.
#: (Clarabel's interior point handles the LPs and the spectral SDP well, and is slow or fails on
#: the nuclear-norm SDP as cvxpy writes it.)
AUTO_SOLVER = {"fro": "CLARABEL", "max": "CLARABEL", "l1": "CLARABEL", "spectral": "CLARABEL", "nuclear": "SCS"}


def matrix_norm(W: np.ndarray, norm: str) -> float:
    """The norm ``norm`` (one of :data:`NORMS`) of W, shape (V, d)."""
    W = np.asarray(W, dtype=np.float64)
    if norm == "fro":
        return float(np.linalg.norm(W))
    if norm == "max":
        return float(np.abs(W).max()) if W.size else 0.0
    if norm == "l1":
        return float(np.abs(W).sum())
    if norm == "spectral":
        return float(np.linalg.norm(W, 2)) if W.size else 0.0
    if norm == "nuclear":
        return float(np.linalg.norm(W, "nuc")) if W.size else 0.0
    raise InputError(f"norm: unknown value {norm!r} (expected one of {', '.join(NORMS)})")


def _cvx_norm(X, norm: str):
    import cvxpy as cp

    return {
        "fro": lambda: cp.norm(X, "fro"),
        "max": lambda: cp.max(cp.abs(X)),
        "l1": lambda: cp.sum(cp.abs(X)),
        "spectral": lambda: cp.sigma_max(X),
        "nuclear": lambda: cp.normNuc(X),
    }[norm]()


@dataclass(frozen=True, eq=False)
class NormSVMSolution:
    """A checked solution of the NTP-SVM in one norm.

    Attributes
    ----------
    W : ndarray of shape (V, d)
        The repaired primal point: (6a) holds up to rounding and the smallest (6b) margin is 1.
    norm : str
    value : float
        ``matrix_norm(W, norm)``, an upper bound on the optimum.
    lower_bound : float
        :math:`\\sum\\lambda/\\|aH\\|_\\star` from the solver's multipliers (see the module doc).
    dual : ndarray of shape (V, m)
        The dual coefficients ``a`` (column j is :math:`a_j`), so that :math:`aH` certifies the bound.
    gap, relative_gap : float
        ``value - lower_bound`` and ``gap / value``.
    eq_residual : float
        :math:`\\|A_{eq}\\mathrm{vec}(W)\\|_\\infty` of the repaired point.
    repair : float
        :math:`\\|W_{repaired} - W_{solver}\\|_F / \\|W_{solver}\\|_F`: how far the solver's point was from feasible.
    canonical : bool
        Whether W is the minimum-Frobenius point among near-minimisers.
    solver, status : str
    seconds : float
    """

    W: np.ndarray
    norm: str
    value: float
    lower_bound: float
    dual: np.ndarray
    gap: float
    relative_gap: float
    eq_residual: float
    repair: float
    canonical: bool
    solver: str
    status: str
    seconds: float

    def is_optimal(self, eps: float = NORM_SVM_TOL) -> bool:
        """True when the relative gap and the equality residual (relative to ‖W‖_F) are at most eps."""
        scale = max(1.0, float(np.linalg.norm(self.W)))
        return self.relative_gap <= eps and self.eq_residual <= eps * scale

    def to_json(self) -> dict:
        return {
            "norm": self.norm,
            "value": self.value,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "eq_residual": self.eq_residual,
            "repair": self.repair,
            "canonical": self.canonical,
            "frobenius_norm": float(np.linalg.norm(self.W)),
            "solver": self.solver,
            "status": self.status,
            "seconds": self.seconds,
        }


def lower_bound(system: KeslerSystem, lam: np.ndarray, nu: np.ndarray, norm: str) -> tuple[float, np.ndarray]:
    r"""The weak-duality bound :math:`\sum\lambda_+/\|aH\|_\star` and the coefficients ``a`` (V, m).

    Parameters
    ----------
    lam : ndarray of shape (q,)
        Multipliers of (6b); negative entries are clipped to 0 (any :math:`\lambda\ge0` is valid).
    nu : ndarray of shape (r,)
        Multipliers of (6a), free.
    """
    lam = np.maximum(np.asarray(lam, dtype=np.float64).reshape(-1), 0.0)
    nu = np.asarray(nu, dtype=np.float64).reshape(-1)
    a = system.margin_coefficients(lam)
    if nu.size:
        a = a + system.eq_coefficients(-nu)
    G = a @ system.instance.embeddings
    dn = matrix_norm(G, DUAL_NORM[norm])
    if dn <= 0.0:
        return 0.0, a
    return float(lam.sum()) / dn, a


def repair(subspace: Subspace, W: np.ndarray) -> np.ndarray:
    """Project W onto :math:`F^\\perp` and divide by its smallest (6b) margin (shape (V, d)).

    Raises SolverError when the projected point has no positive margin.
    """
    P = subspace.project_perp(W)
    mar = subspace.system.apply_margin(P)
    if mar.size == 0:
        return P
    mn = float(mar.min())
    if not mn > 0.0:
        raise SolverError(f"the solver's point has smallest margin {mn:.3g} after projection onto F-perp")
    return P / mn


def _solve_once(system: KeslerSystem, norm: str, solver: str, objective: str, bound: float | None, verbose: bool):
    """One cvxpy solve: ``objective='norm'`` minimises the norm; ``'fro'`` minimises ‖W‖_F² with the
    norm at most ``bound``. Returns the raw W, the (6b) and (6a) multipliers and the status."""
    import cvxpy as cp

    inst = system.instance
    X = cp.Variable((inst.V, inst.d))
    x = cp.vec(X, order="C")
    cons = []
    if system.n_eq:
        cons.append(system.eq_matrix() @ x == 0)
    cons.append(system.margin_matrix() @ x >= 1)
    if objective == "norm":
        obj = cp.Minimize(_cvx_norm(X, norm))
    else:
        obj = cp.Minimize(cp.sum_squares(X))
        cons.append(_cvx_norm(X, norm) <= bound)
    prob = cp.Problem(obj, cons)
    opts = {"eps_abs": SCS_EPS, "eps_rel": SCS_EPS, "max_iters": SCS_MAX_ITERS} if solver == "SCS" else {}
    try:
        with warnings.catch_warnings():  # "solution may be inaccurate": the answer is checked below
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=solver, verbose=verbose, **opts)
    except (cp.error.SolverError, ValueError) as err:
        raise SolverError(f"cvxpy/{solver} ({norm}-norm NTP-SVM): {err}") from err
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError(f"cvxpy/{solver}: {prob.status} (the data are not NTP-separable)")
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or X.value is None:
        raise SolverError(f"cvxpy/{solver} ({norm}-norm NTP-SVM): status {prob.status}")
    nu = np.asarray(cons[0].dual_value).reshape(-1) if system.n_eq else np.zeros(0)
    lam = np.asarray(cons[1 if system.n_eq else 0].dual_value).reshape(-1)
    return np.asarray(X.value), lam, nu, prob.status


def solve_norm_svm(
    data: NTPInstance | KeslerSystem,
    norm: str,
    *,
    solver: str = "auto",
    canonical: bool = False,
    subspace: Subspace | None = None,
    tol: float = NORM_SVM_TOL,
    verbose: bool = False,
    progress: bool = False,
) -> NormSVMSolution:
    """Solve the NTP-SVM in ``norm`` and check the answer (see the module doc).

    Parameters
    ----------
    data : NTPInstance or KeslerSystem
    norm : {"fro", "max", "spectral", "nuclear", "l1"}
    solver : str
        ``auto``: the direct route (:mod:`ntpcert.solve.norm_programs`; ``fro`` has none), then cvxpy with
        :data:`AUTO_SOLVER`, then cvxpy with SCS, stopping at the first whose checked relative gap is
        at most ``tol``. ``direct`` or ``direct:clarabel`` / ``direct:scs`` / ``direct:highs``: the direct
        route only. Any other name is a cvxpy solver (``CLARABEL``, ``SCS``, ``HIGHS`` for the LP norms, ...).
    canonical : bool
        Re-solve for the minimum-Frobenius point with norm at most the optimum times
        ``1 + max(CANONICAL_SLACK, relative gap)``.
    subspace : Subspace, optional
        F of the instance (built when not given) for the repair step.
    progress : bool
        Lines on stderr: the program's size, the direct backends' iterations, each route's checked gap.

    Raises
    ------
    InputError
        For an unknown norm.
    InfeasibleError
        When the data are not NTP-separable.
    SolverError
        When no solver returns a usable point.
    """
    if norm not in NORMS:
        raise InputError(f"norm: unknown value {norm!r} (expected one of {', '.join(NORMS)})")
    system = data if isinstance(data, KeslerSystem) else KeslerSystem.build(data)
    if system.n_margin == 0:
        raise InputError("data: no margin constraints (every k_j = V), so there is no NTP-SVM to solve")
    sub = subspace if subspace is not None else Subspace.build(system)
    t0 = time.perf_counter()
    key = solver.strip().lower()
    if key == "auto":
        tries = ([DIRECT] if norm in norm_programs.DIRECT_NORMS else []) + [AUTO_SOLVER[norm], "SCS"]
    elif key == DIRECT or key.startswith(DIRECT + ":"):
        tries = [key]
    else:
        tries = [solver.upper()]
    tries = list(dict.fromkeys(tries))
    last_err: Exception | None = None
    best = None
    for name in tries:
        try:
            if name.startswith(DIRECT):
                backend = name.partition(":")[2] or "auto"
                if norm not in norm_programs.DIRECT_NORMS or backend not in norm_programs.BACKENDS:
                    raise InputError(f"solver: {solver!r} has no direct program for the {norm} norm "
                                     f"(direct backends: {', '.join(norm_programs.BACKENDS[1:])})")
                try:
                    raw = norm_programs.solve_direct(system, norm, backend=backend, progress=progress)
                except ValueError as err:
                    raise InputError(f"solver: {solver!r}: {err}") from None
                Wraw, lam, nu, status = raw.W, raw.lam, raw.nu, raw.status
                label = f"direct/{raw.backend}"
            else:
                if progress:
                    progress_note(f"{norm}-norm NTP-SVM: cvxpy/{name.lower()}", True)
                Wraw, lam, nu, status = _solve_once(system, norm, name, "norm", None, verbose)
                label = f"cvxpy/{name.lower()}"
        except InfeasibleError as err:
            if not (name.startswith(DIRECT) and len(tries) > 1):
                raise
            last_err = err  # unchecked; the cvxpy fallback decides
            if progress:
                progress_note(f"{norm}-norm NTP-SVM: {err}; trying cvxpy", True)
            continue
        except SolverError as err:
            last_err = err
            if progress:
                progress_note(f"{norm}-norm NTP-SVM: {err}", True)
            continue
        W = repair(sub, Wraw)
        value = matrix_norm(W, norm)
        lb, a = lower_bound(system, lam, nu, norm)
        rel = (value - lb) / value if value > 0 else 0.0
        if progress:
            progress_note(f"{norm}-norm NTP-SVM: {label} gives norm {value:.10g}, checked relative gap {rel:.2e} "
                          f"({time.perf_counter() - t0:.1f} s)", True)
        cand = (W, Wraw, value, lb, a, rel, name, status, label)
        if best is None or rel < best[5]:
            best = cand
        if rel <= tol:
            break
    if best is None:
        raise SolverError(f"{norm}-norm NTP-SVM: no solver succeeded ({last_err})") from last_err
    W, Wraw, value, lb, a, rel, name, status, label = best
    if canonical:
        slack = max(CANONICAL_SLACK, rel)
        cvx = AUTO_SOLVER[norm] if name.startswith(DIRECT) else name  # the second solve is a cvxpy model
        Wc, _, _, status_c = _solve_once(system, norm, cvx, "fro", value * (1.0 + slack), verbose)
        W = repair(sub, Wc)
        Wraw = Wc
        value = matrix_norm(W, norm)
        status = f"{status}; canonical: {status_c}"
    eq = system.apply_eq(W)
    rep = float(np.linalg.norm(W - Wraw) / max(np.linalg.norm(Wraw), np.finfo(float).tiny))
    return NormSVMSolution(
        W=W,
        norm=norm,
        value=value,
        lower_bound=lb,
        dual=a,
        gap=value - lb,
        relative_gap=(value - lb) / value if value > 0 else 0.0,
        eq_residual=float(np.abs(eq).max()) if eq.size else 0.0,
        repair=rep,
        canonical=canonical,
        solver=label,
        status=status,
        seconds=time.perf_counter() - t0,
    )


__all__ = ["DIRECT", "DUAL_NORM", "NORMS", "NormSVMSolution", "lower_bound", "matrix_norm", "repair", "solve_norm_svm"]
