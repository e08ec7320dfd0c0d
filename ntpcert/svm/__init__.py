"""The NTP-SVM (Definition 3): problem build, backends, and a checked solution type.

``solve_svm(instance_or_system, solver=...)`` dispatches to one backend module per solver.
"""

from __future__ import annotations

import importlib
from typing import Callable

import numpy as np

from ..errors import InputError
from ..instance import NTPInstance
from ..kesler import KeslerSystem
from .solution import SVM_TOL as SVM_TOL
from .solution import SVMSolution as SVMSolution

#: Backend name -> (module, keyword arguments for its ``solve``).
BACKENDS: dict[str, tuple[str, dict]] = {
    "clarabel": ("ntpcert.svm.clarabel_direct", {}),
    "cvxpy": ("ntpcert.svm.cvxpy_backend", {}),
    "structured": ("ntpcert.svm.structured", {}),
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


def solve_svm(data: NTPInstance | KeslerSystem, *, solver: str = "clarabel", **options) -> SVMSolution:
    """Solve the NTP-SVM of ``data`` with the named backend.

    Raises :class:`~ntpcert.errors.InfeasibleError` when the data are not separable, and
    :class:`~ntpcert.errors.SolverError` when the backend fails.
    """
    system = data if isinstance(data, KeslerSystem) else KeslerSystem.build(data)
    if system.n_margin == 0:
        return _trivial(system)
    if solver.startswith("cvxpy:"):
        module, kwargs = BACKENDS["cvxpy"][0], {"solver": solver.split(":", 1)[1].upper()}
    elif solver in BACKENDS:
        module, kwargs = BACKENDS[solver]
    else:
        raise InputError(f"solver: unknown NTP-SVM solver {solver!r} (known: {', '.join(sorted(BACKENDS))}, cvxpy:NAME)")
    fn: Callable[..., SVMSolution] = importlib.import_module(module).solve
    return fn(system, **{**kwargs, **options})


__all__ = ["BACKENDS", "SVMSolution", "SVM_TOL", "register_backend", "solve_svm"]
