r"""The nuclear-norm NTP-SVM as a cvxpy problem: the reference formulation for small instances.

Written the way the program reads, independently of the structured solver: one variable
:math:`L \in \mathbb R^{V\times m}`, objective ``cp.normNuc(L)``, and per context j with anchor
:math:`z_j = \min S_j` the rows

.. math:: L_{z,j} - L_{z_j,j} = 0\ (z \in S_j\setminus\{z_j\}), \qquad L_{z_j,j} - L_{v,j} \ge 1\ (v \notin S_j),

stacked as sparse matrices acting on ``vec(L)`` (column-major). No grouping of equal supports, no
centring: the solver sees the program as stated. cvxpy turns the nuclear norm into a semidefinite cone
(:math:`\|L\|_* = \min \tfrac12(\mathrm{tr}P + \mathrm{tr}Q)` over
:math:`\begin{psmallmatrix}P & L\\ L^\top & Q\end{psmallmatrix} \succeq 0`), so it needs an SDP-capable solver:
Clarabel (default) or SCS. The SDP has a :math:`(V+m)\times(V+m)` matrix variable, so this path is for small
instances only (:data:`CVXPY_MAX_SIDE`).

The dual point for the gap comes from the margin rows' multipliers :math:`\mu \ge 0`: stationarity gives
:math:`\Lambda_{v,j} = -\mu_{j,v}` off the supports and the equality multipliers on them, whose sign
convention is cvxpy's; both signs are tried and the better certified bound kept (each is a valid bound,
see :func:`ntpcert.geometry.certificate.certify_pair`).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ntpcert.errors import InputError, SolverError
from ntpcert.geometry.certificate import NuclearSVMSolution, certify_pair, dual_value
from ntpcert.geometry.pattern import SupportPattern

#: Largest V + m the cvxpy path accepts: the SDP matrix is (V + m) × (V + m).
CVXPY_MAX_SIDE = 400

#: cvxpy solvers that accept the nuclear norm (a semidefinite cone).
SDP_SOLVERS = ("CLARABEL", "SCS")

#: Tight tolerances passed to the solvers (their defaults stop around 1e-8 relative).
SOLVER_OPTIONS = {
    "CLARABEL": {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "tol_ktratio": 1e-9,
                 "max_iter": 500},
    "SCS": {"eps_abs": 1e-10, "eps_rel": 1e-10, "max_iters": 200_000},
}


def _rows(pattern: SupportPattern) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Equality and margin rows on vec(L) (column-major: entry (z, j) is z + V j)."""
    V, m = pattern.V, pattern.m
    eq_r, eq_c, eq_v, mar_r, mar_c, mar_v = [], [], [], [], [], []
    ne = nm = 0
    for j in range(m):
        S = np.flatnonzero(pattern.mask[:, j])
        a = int(S[0])
        for z in S[1:]:
            eq_r += [ne, ne]
            eq_c += [int(z) + V * j, a + V * j]
            eq_v += [1.0, -1.0]
            ne += 1
        for v in np.flatnonzero(~pattern.mask[:, j]):
            mar_r += [nm, nm]
            mar_c += [a + V * j, int(v) + V * j]
            mar_v += [1.0, -1.0]
            nm += 1
    A_eq = sp.csr_matrix((eq_v, (eq_r, eq_c)), shape=(ne, V * m))
    A_mar = sp.csr_matrix((mar_v, (mar_r, mar_c)), shape=(nm, V * m))
    return A_eq, A_mar


def solve_nuclear_cvxpy(pattern: SupportPattern, *, solver: str = "CLARABEL", verbose: bool = False) -> NuclearSVMSolution:
    """Solve the nuclear-norm NTP-SVM with cvxpy and ``solver`` (``CLARABEL`` or ``SCS``).

    Raises
    ------
    InputError
        For another solver, or an instance with V + m above :data:`CVXPY_MAX_SIDE`.
    SolverError
        When the solver fails or reports a status other than optimal.
    """
    import cvxpy as cp

    name = str(solver).upper()
    if name not in SDP_SOLVERS:
        raise InputError(f"solver: value {solver!r} cannot solve the nuclear norm (SDP); use one of "
                         f"{', '.join(SDP_SOLVERS)}")
    if pattern.V + pattern.m > CVXPY_MAX_SIDE:
        raise InputError(f"cvxpy: V + m = {pattern.V + pattern.m} is above the limit of {CVXPY_MAX_SIDE} for the "
                         "SDP formulation; use the structured solver")
    V, m = pattern.V, pattern.m
    t0 = time.perf_counter()
    A_eq, A_mar = _rows(pattern)
    L = cp.Variable((V, m))
    x = cp.vec(L, order="F")
    cons = []
    if A_eq.shape[0]:
        cons.append(A_eq @ x == 0)
    mar = None
    if A_mar.shape[0]:
        mar = A_mar @ x >= 1
        cons.append(mar)
    prob = cp.Problem(cp.Minimize(cp.normNuc(L)), cons)
    try:
        prob.solve(solver=name, verbose=verbose, **SOLVER_OPTIONS[name])
    except cp.error.SolverError as err:
        raise SolverError(f"cvxpy:{name}: {err}") from err
    seconds = time.perf_counter() - t0
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or L.value is None:
        raise SolverError(f"cvxpy:{name}: status {prob.status}")
    Lval = np.asarray(L.value, dtype=np.float64)
    Lam = np.zeros((V, m))
    if mar is not None:  # A_mar^T mu: -mu at (v, j), +sum of mu at the anchor of j
        mu = np.asarray(mar.dual_value, dtype=np.float64).reshape(-1)
        Lam = np.asarray(A_mar.T @ mu).reshape(m, V).T
    best = None
    eq_dual = None if not A_eq.shape[0] else np.asarray(cons[0].dual_value, dtype=np.float64).reshape(-1)
    for sign in (1.0, -1.0):
        cand = Lam.copy()
        if eq_dual is not None:
            cand += sign * np.asarray(A_eq.T @ eq_dual).reshape(m, V).T
        value, _ = dual_value(cand, pattern)
        if best is None or value > best[0]:
            best = (value, cand)
    iters = int(getattr(prob.solver_stats, "num_iters", 0) or 0)
    return certify_pair(Lval, best[1], pattern, solver=f"cvxpy:{name}", status=str(prob.status), seconds=seconds,
                        iterations=iters)


__all__ = ["CVXPY_MAX_SIDE", "SDP_SOLVERS", "solve_nuclear_cvxpy"]
