r"""One call from an instance to its UFM geometry: :math:`L^{mm}` with its certified gap, the balanced
embeddings, the checks, and the centred-support proxy :math:`\tilde S = (I - \mathbf 1\mathbf 1^\top/V)S`
compared with :math:`L^{mm}` (its cosine, and its own certified gap as a candidate optimum)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.errors import InputError
from ntpcert.geometry.certificate import NuclearSVMSolution, certify_pair
from ntpcert.geometry.embeddings import Check, Embeddings, all_checks
from ntpcert.geometry.pattern import SupportPattern, finite_part
from ntpcert.instance import NTPInstance

#: Solvers of the nuclear-norm NTP-SVM.
GEOMETRY_SOLVERS = ("structured", "clarabel", "scs")


@dataclass(frozen=True, eq=False)
class GeometryReport:
    """The geometry of an instance in the unconstrained-features model.

    Attributes
    ----------
    pattern : SupportPattern
    solution : NuclearSVMSolution
        :math:`L^{mm}`, shape (V, m), with its certified gap.
    embeddings : Embeddings
        Balanced factors of :math:`L^{mm}`.
    checks : list of Check
    finite_part : ndarray of shape (V, m)
        :math:`L^{in}`, the in-support part (log-probabilities centred on each support, 0 off it).
    proxy_cosine : float
        Cosine between :math:`\\tilde S` and :math:`L^{mm}`.
    proxy_relative_gap : float
        Certified relative suboptimality of :math:`\\tilde S` itself (dual from its polar factor).
    gap_tol : float or None
        The target gap asked of the structured solver (None: its size-dependent default).
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    pattern: SupportPattern
    solution: NuclearSVMSolution
    embeddings: Embeddings
    checks: list[Check]
    finite_part: np.ndarray
    proxy_cosine: float
    proxy_relative_gap: float
    gap_tol: float | None = None

    def to_json(self) -> dict[str, Any]:
        p = self.pattern
        from ntpcert.geometry.structured import default_gap_tol

        svm = self.solution.to_json()
        if self.solution.solver == "structured":
            svm["gap_tol"] = self.gap_tol if self.gap_tol is not None else default_gap_tol(p)
        return {
            "V": p.V, "m": p.m, "distinct_supports": p.r, "margins": p.n_margins,
            "nuclear_svm": svm,
            "singular_values": [float(x) for x in self.embeddings.singular_values],
            "checks": [c.to_json() for c in self.checks],
            "proxy_centred_support": {"cosine": self.proxy_cosine, "relative_gap": self.proxy_relative_gap},
            "finite_part_norm": float(np.linalg.norm(self.finite_part)),
        }


def solve_geometry(pattern: SupportPattern, solver: str = "structured", gap_tol: float | None = None) -> NuclearSVMSolution:
    """:math:`L^{mm}` by ``solver`` (``structured``, or ``clarabel``/``scs`` through cvxpy); ``gap_tol`` is the
    structured solver's target relative gap (default :func:`~ntpcert.geometry.structured.default_gap_tol`)."""
    name = str(solver).lower()
    if name not in GEOMETRY_SOLVERS:
        raise InputError(f"--solver: value {solver!r} is not one of {', '.join(GEOMETRY_SOLVERS)}")
    if gap_tol is not None and not (0.0 < gap_tol < 1.0):
        raise InputError(f"--gap-tol: value {gap_tol!r} is not in (0, 1)")
    if name == "structured":
        from ntpcert.geometry.structured import solve_nuclear_structured

        return solve_nuclear_structured(pattern, gap_tol=gap_tol)
    from ntpcert.geometry.cvx import solve_nuclear_cvxpy

    return solve_nuclear_cvxpy(pattern, solver=name.upper())


def analyse(instance: NTPInstance, solver: str = "structured", gap_tol: float | None = None) -> GeometryReport:
    """The :class:`GeometryReport` of ``instance`` (its embeddings play no role: only supports and probabilities)."""
    pattern = SupportPattern.from_instance(instance)
    sol = solve_geometry(pattern, solver, gap_tol)
    emb = Embeddings.from_logits(sol.L)
    St = pattern.centered_support()
    nL, nS = float(np.linalg.norm(sol.L)), float(np.linalg.norm(St))
    cos = float((St * sol.L).sum() / (nL * nS)) if nL > 0 and nS > 0 else 0.0
    U, s, Qt = np.linalg.svd(St, full_matrices=False)
    k = int(np.sum(s > 1e-10 * s[0])) if s.size and s[0] > 0 else 0
    proxy = certify_pair(St, U[:, :k] @ Qt[:k], pattern, solver="proxy", status="", seconds=0.0, iterations=0)
    return GeometryReport(pattern, sol, emb, all_checks(sol.L, pattern, emb), finite_part(instance), cos,
                          proxy.relative_gap, gap_tol)


#: The centred support matrix counts as L^mm in :func:`sweep_values` when its own certified relative gap is
#: at most this.
PROXY_OPTIMAL_GAP = 1e-8


def sweep_values(instance: NTPInstance, solver: str = "structured") -> dict[str, Any]:
    r"""The geometry of ``instance`` as the flat JSON scalars a sweep stores (the ``geometry`` quantity):

    ``geo_r`` (distinct supports), ``geo_nuclear_norm`` :math:`\|L^{mm}\|_*`, ``geo_relative_gap`` (its
    certified relative gap), ``geo_rank``, ``geo_max_defect`` (the largest defect of the checks on
    :math:`L^{mm}`), ``geo_proxy_cosine`` and ``geo_proxy_gap`` (cosine with, and certified relative gap of,
    the centred support matrix), and ``geo_proxy_optimal``: True when that gap is at most
    :data:`PROXY_OPTIMAL_GAP` (the centred support matrix is optimal to that relative accuracy, by its own
    dual point), False when the feasible :math:`L^{mm}` has a nuclear norm smaller by more than that
    fraction (a better feasible point is the witness), None otherwise."""
    from ntpcert.geometry.certificate import nuclear_norm

    rep = analyse(instance, solver)
    sol = rep.solution
    proxy_norm = nuclear_norm(rep.pattern.centered_support())
    if rep.proxy_relative_gap <= PROXY_OPTIMAL_GAP:
        proxy_optimal: bool | None = True
    elif proxy_norm - sol.objective > PROXY_OPTIMAL_GAP * proxy_norm:
        proxy_optimal = False
    else:
        proxy_optimal = None
    return {
        "geo_r": rep.pattern.r,
        "geo_nuclear_norm": sol.objective,
        "geo_relative_gap": sol.relative_gap,
        "geo_rank": sol.rank,
        "geo_max_defect": max(c.defect for c in rep.checks),
        "geo_proxy_cosine": rep.proxy_cosine,
        "geo_proxy_gap": rep.proxy_relative_gap,
        "geo_proxy_optimal": proxy_optimal,
    }


__all__ = ["GEOMETRY_SOLVERS", "GeometryReport", "PROXY_OPTIMAL_GAP", "analyse", "solve_geometry", "sweep_values"]
