r"""The quantities a sweep computes at one grid point: a pure function of (settings, point).

``verdicts``
    ``compatible``, ``separable``, ``reachable`` (True / False / None for undetermined, as in
    :mod:`ntpcert.pipeline.float_verdicts`), ``dim_F``, ``rank_H`` and the relative residual of (4).
``svm``
    When separable: ``w_mm_norm`` :math:`= \|W^{mm}\|_F`, ``margin`` :math:`= 1/\|W^{mm}\|_F` (the
    largest smallest margin of a unit-norm W satisfying (6a)), ``svm_optimal``; when compatible,
    ``w_star_norm`` :math:`= \|W^*\|_F`.
``trajectory``
    Plain gradient descent :math:`W_{t+1} = W_t - \eta\nabla\mathrm{CE}(W_t)` from :math:`W_0 = 0` for
    ``steps`` steps with :math:`\eta = 1/(2L)` (or the spec's ``step_size``); the endpoint's
    ``gd_excess`` :math:`= \mathrm{CE}(W_T) - \mathcal H`, ``gd_norm`` :math:`= \|W_T\|_F`,
    ``gd_cos_mm`` :math:`= \cos(W_T, W^{mm})` (when separable) and ``gd_dist_w_star``
    :math:`= \|P_F(W_T) - W^*\|_F` (when compatible).
``geometry``
    The unconstrained-features model (W and H both trained) on the instance's supports: the ``geo_*``
    values of :func:`ntpcert.geometry.analysis.sweep_values` (:math:`L^{mm}` with its certified gap and
    rank, the largest check defect, and whether the centred support matrix is :math:`L^{mm}`).

Every value is a JSON scalar (non-finite floats become None), so a row round-trips through the store
bit for bit. A failure of the package's own numerics (an :class:`~ntpcert.errors.NTPCertError`) is
recorded as the row's ``error``; anything else propagates.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ntpcert.errors import InfeasibleError, NTPCertError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.decide import decide_separability
from ntpcert.pipeline.float_witness import float_compatibility
from ntpcert.rows.subspace import Subspace, least_squares_fit
from ntpcert.solve.svm import SVM_TOL, solve_svm
from ntpcert.experiments.sweep.generate import point_instance
from ntpcert.experiments.sweep.spec import GridPoint
from ntpcert.util.logic import and3
from ntpcert.util.numbers import cosine

__all__ = ["compute_point", "compute_chunk"]


def _f(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _gd(inst, steps: int, step_size: float) -> np.ndarray:
    eta = step_size if step_size > 0 else 0.5 / max(inst.smoothness(), np.finfo(float).tiny)
    W = np.zeros((inst.V, inst.d))
    for _ in range(steps):
        W -= eta * inst.gradient(W)
    return W


def _values(settings: dict, point: GridPoint) -> dict[str, Any]:
    inst = point_instance(point, settings["seed"], max_count=settings["instance"]["max_count"])
    q = settings["quantities"]
    system = KeslerSystem.build(inst)
    sub = Subspace.build(system)
    comp, fit = float_compatibility(sub), least_squares_fit(sub)
    sep, _ = decide_separability(system)
    out: dict[str, Any] = {}
    if "verdicts" in q:
        out.update(
            compatible=comp.holds,
            separable=sep.holds,
            reachable=and3(comp.holds, sep.holds),
            dim_F=sub.dim,
            rank_H=int(np.linalg.matrix_rank(inst.embeddings)),
            compat_residual=_f(fit.relative_residual),
        )
    W_mm = None
    if "svm" in q or "trajectory" in q:
        if sep.holds is not False:
            try:
                sol = solve_svm(system, solver=settings["svm"]["solver"])
                W_mm = sol.W
            except InfeasibleError:
                sol = None
        else:
            sol = None
        if "svm" in q:
            out.update(
                w_mm_norm=None if sol is None else _f(sol.norm),
                margin=None if sol is None or sol.norm == 0 else _f(1.0 / sol.norm),
                svm_optimal=None if sol is None else bool(sol.is_optimal(SVM_TOL)),
                w_star_norm=_f(float(np.linalg.norm(fit.W_star))) if comp.holds else None,
            )
    if "trajectory" in q:
        t = settings["trajectory"]
        W = _gd(inst, t["steps"], t["step_size"])
        out.update(
            gd_steps=t["steps"],
            gd_excess=_f(inst.excess_loss(W)),
            gd_norm=_f(float(np.linalg.norm(W))),
            gd_cos_mm=None if W_mm is None or not np.any(W_mm) else _f(cosine(W, W_mm)),
            gd_dist_w_star=_f(float(np.linalg.norm(sub.project(W) - fit.W_star))) if comp.holds else None,
        )
    if "geometry" in q:
        from ntpcert.geometry.analysis import sweep_values

        out.update(sweep_values(inst))
    return out


def compute_point(settings: dict, point: GridPoint) -> dict[str, Any]:
    """Compute the spec's quantities at ``point``.

    Returns
    -------
    dict
        ``{"values": {...}, "error": str or None, "seconds": float}``.
    """
    t0 = time.perf_counter()
    try:
        values, error = _values(settings, point), None
    except NTPCertError as err:
        values, error = {}, f"{type(err).__name__}: {err}"
    return {"values": values, "error": error, "seconds": time.perf_counter() - t0}


def compute_chunk(settings: dict, points: list[GridPoint]) -> list[tuple[GridPoint, dict[str, Any]]]:
    """:func:`compute_point` on each of ``points`` (one task of the distributed runner)."""
    return [(p, compute_point(settings, p)) for p in points]
