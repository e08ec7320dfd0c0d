"""The NTP-SVM (Definition 3): problem build, backends, and a checked solution type.

``solve_svm(instance_or_system, solver=...)`` dispatches to one backend module per solver.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Callable

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVM_TOL as SVM_TOL
from ntpcert.solve.solution import SVMSolution as SVMSolution
from ntpcert.util.validate import check_number

#: Backend name -> (module, keyword arguments for its ``solve``).
BACKENDS: dict[str, tuple[str, dict]] = {
    "auto": ("ntpcert.solve.svm.auto", {}),
    "clarabel": ("ntpcert.solve.svm.clarabel_direct", {}),
    "active-set": ("ntpcert.solve.svm.active_set", {}),
    "cvxpy": ("ntpcert.solve.svm.cvxpy_backend", {}),
    "structured": ("ntpcert.solve.structured.solver", {}),
    "structured-float": ("ntpcert.solve.structured.solver", {"certificate": "float"}),
    "osqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "osqp"}),
    "scs": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "scs"}),
    "piqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "piqp"}),
    "proxqp": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "proxqp"}),
    "highs": ("ntpcert.solve.svm.qpsolvers_backend", {"solver": "highs"}),
}


#: The backends that solve on token classes and so read an instance's token multiplicities
#: (:meth:`~ntpcert.instance.NTPInstance.with_token_multiplicity`); the others refuse such an instance.
MULTIPLICITY_BACKENDS = ("ntpcert.solve.svm.auto", "ntpcert.solve.svm.active_set", "ntpcert.solve.structured.solver")
#: Backends that certify with scale-free exact bounds and solve H as it is (``auto`` scales its own fallback); every
#: other one runs on H scaled to unit size where H is far from it (:mod:`ntpcert.solve.svm.scaled`).
SCALE_FREE_BACKENDS = ("ntpcert.solve.svm.auto", "ntpcert.solve.structured.solver")


def register_backend(name: str, module: str, **kwargs) -> None:
    """Make ``solve_svm(..., solver=name)`` call ``module.solve(system, **kwargs)``; the module's
    ``solve`` takes the :data:`COMMON_OPTIONS` as keyword-only arguments."""
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


#: The default NTP-SVM solver of every entry point (``solve_svm``, ``certify``, ``exact_certify``,
#: ``Limits.compute``, the regularisation path and the command line).
DEFAULT_SOLVER = "auto"

#: Options every backend's ``solve`` takes: ``tol`` (its stopping tolerance), ``time_limit``
#: (seconds), ``verbose`` (the solver's own log) and ``progress`` (a bar on stderr, where the
#: backend has one). Backends add their own keyword-only options.
COMMON_OPTIONS = ("tol", "time_limit", "verbose", "progress")


def backend_options(solver: str) -> tuple[str, ...]:
    """The options ``solve_svm(..., solver=solver, **options)`` accepts for this backend."""
    module, fixed = resolve_backend(solver)
    fn = importlib.import_module(module).solve
    names = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return tuple(n for n in names if n not in fixed)


def _check_options(solver: str, options: dict) -> None:
    accepted = backend_options(solver)
    for key, value in options.items():
        if key not in accepted:
            raise InputError(f"{key}: not an option of the NTP-SVM backend {solver!r} "
                             f"(its options: {', '.join(accepted)})")
    for key in ("tol", "time_limit"):
        v = options.get(key)
        check_number(key, v, minimum=0, exclusive_minimum=True, optional=True)


def solve_svm(data: NTPInstance | KeslerSystem, *, solver: str = DEFAULT_SOLVER, **options) -> SVMSolution:
    """Solve the NTP-SVM of ``data`` with the named backend.

    Parameters
    ----------
    data : NTPInstance or KeslerSystem
    solver : str
        A key of :data:`BACKENDS` (``auto``, the default, is the structured solver of
        :mod:`ntpcert.solve.structured.solver` with a Clarabel fallback, see :mod:`ntpcert.solve.svm.auto`; ``osqp``, ``scs``, ``piqp``, ``proxqp``, ``highs`` go
        through qpsolvers), ``cvxpy:NAME`` or ``qpsolvers:NAME``.
    options
        The common options :data:`COMMON_OPTIONS` and the backend's own ones
        (:func:`backend_options` lists them). Any other name is an
        :class:`~ntpcert.errors.InputError` naming the option and the backend.

    Returns
    -------
    SVMSolution
        The backend's primal/dual pair, with its residuals and duality gap recomputed.

    Raises
    ------
    InfeasibleError
        When the data are not separable.
    SolverError
        When the backend fails.
    """
    _check_options(solver, options)
    system = data if isinstance(data, KeslerSystem) else KeslerSystem.build(data)
    if system.n_margin == 0:
        return _trivial(system)
    module, kwargs = resolve_backend(solver)
    if system.instance.token_multiplicity is not None and module not in MULTIPLICITY_BACKENDS:
        raise InputError(f"solver: {solver!r} does not weigh tokens by their multiplicity (the instance merges tokens); "
                         "use auto, structured, structured-float or active-set")
    fn: Callable[..., SVMSolution] = importlib.import_module(module).solve
    if module in SCALE_FREE_BACKENDS:
        return fn(system, **{**kwargs, **options})
    from ntpcert.solve.svm.scaled import solve_scaled

    return solve_scaled(fn, system, **{**kwargs, **options})  # absolute tolerances: H scaled to unit size


def solve_separable(data: NTPInstance | KeslerSystem, *, solver: str = DEFAULT_SOLVER, **options) -> SVMSolution:
    """:func:`solve_svm` of data already shown NTP-separable: backends that search for a Farkas ray while
    they solve (``auto``, ``structured``: the option ``separable``) are told not to."""
    module, _ = resolve_backend(solver)
    if "separable" in inspect.signature(importlib.import_module(module).solve).parameters:
        options = {**options, "separable": True}
    return solve_svm(data, solver=solver, **options)


__all__ = ["BACKENDS", "COMMON_OPTIONS", "DEFAULT_SOLVER", "MULTIPLICITY_BACKENDS", "SVMSolution", "SVM_TOL", "backend_options",
           "register_backend", "resolve_backend", "solve_separable", "solve_svm"]
