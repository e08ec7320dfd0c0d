"""The NTP-SVM (Definition 3): problem build, backends, and a checked solution type.

``solve_svm(instance_or_system, solver=...)`` dispatches to one backend module per solver.
"""

from __future__ import annotations

import importlib
from typing import Callable

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.svm.solution import SVM_TOL as SVM_TOL
from ntpcert.solve.svm.solution import SVMSolution as SVMSolution

#: Backend name -> (module, keyword arguments for its ``solve``).
BACKENDS: dict[str, tuple[str, dict]] = {
    "clarabel": ("ntpcert.solve.svm.clarabel_direct", {}),
    "cvxpy": ("ntpcert.solve.svm.cvxpy_backend", {}),
    "structured": ("ntpcert.solve.structured.solver", {}),
    "structured-float": ("ntpcert.solve.structured.solver", {"certificate": "float"}),
    "osqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "osqp"}),
    "scs": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "scs"}),
    "piqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "piqp"}),
    "proxqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "proxqp"}),
    "highs": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "highs"}),
}


def register_backend(name: str, module: str, **kwargs) -> None:
    """Make ``solve_svm(..., solver=name)`` call ``module.solve(system, **kwargs)``."""
    BACKENDS[name] = (module, kwargs)


def _trivial(system: KeslerSystem) -> SVMSolution:
    inst = system.instance
    return SVMSolution.from_primal_dual(
        system, np.zeros((inst.V, inst.d)), np.zeros((inst.V, inst.m)),
        solver="none", status="trivial: no margin constraints", seconds=0.0,
    )


def resolve_backend(solver: str) -> tuple[str, dict]:
    """``(module, keyword arguments)`` of a solver name: a key of :data:`BACKENDS`, ``cvxpy:NAME``
    (a cvxpy solver) or ``qpsolvers:NAME`` (a qpsolvers solver)."""
    if not isinstance(solver, str):
        raise InputError(f"solver: expected a solver name, got {solver!r}")
    if solver.startswith("cvxpy:"):
        return BACKENDS["cvxpy"][0], {"solver": solver.split(":", 1)[1].upper()}
    if solver.startswith("qpsolvers:"):
        return "ntpcert.solve.svm.qpsolvers_backend", {"solver": solver.split(":", 1)[1].lower()}
    if solver in BACKENDS:
        return BACKENDS[solver]
    raise InputError(f"solver: unknown NTP-SVM solver {solver!r} "
                     f"(known: {', '.join(sorted(BACKENDS))}, cvxpy:NAME, qpsolvers:NAME)")


def solve_svm(data: NTPInstance | KeslerSystem, *, solver: str = "clarabel", **options) -> SVMSolution:
    """Solve the NTP-SVM of ``data`` with the named backend.

    ``solver`` is a key of :data:`BACKENDS` (``structured`` is the structured solver of
    :mod:`ntpcert.solve.structured.solver`; ``osqp``, ``scs``, ``piqp``, ``proxqp``, ``highs`` go through
    qpsolvers), ``cvxpy:NAME`` or ``qpsolvers:NAME``; ``options`` go to the backend's ``solve``.

    Raises :class:`~ntpcert.errors.InfeasibleError` when the data are not separable, and
    :class:`~ntpcert.errors.SolverError` when the backend fails.
    """
    system = data if isinstance(data, KeslerSystem) else KeslerSystem.build(data)
    if system.n_margin == 0:
        return _trivial(system)
    module, kwargs = resolve_backend(solver)
    fn: Callable[..., SVMSolution] = importlib.import_module(module).solve
    return fn(system, **{**kwargs, **options})


__all__ = ["BACKENDS", "SVMSolution", "SVM_TOL", "register_backend", "resolve_backend", "solve_svm"]
