r"""A backend whose tolerances are absolute, run on H scaled to unit size (:mod:`ntpcert.rows.scaling`).

Clarabel called the separable data of H·1e-20 infeasible: its feasibility and gap tolerances are absolute, and
there :math:`\|W^{mm}\|` is 1e20 times that of H. :func:`solve_scaled` solves the NTP-SVM of :math:`2^eH` with
its largest entry in [1, 2) and maps the pair back exactly, :math:`W = 2^eW'` and :math:`a = 2^{2e}a'`
(:math:`W' = a'(2^eH)`), then checks it on H as every pair is checked. A Farkas ray of :math:`2^eH` is one of
H. The structured solver (and ``auto``'s first stage) certify with scale-free exact bounds and are not wrapped.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution


def solve_scaled(fn: Callable[..., SVMSolution], system: KeslerSystem, **options) -> SVMSolution:
    """``fn(system, **options)``, on H scaled by a power of two where H is far from unit size (module doc)."""
    from ntpcert.rows.scaling import unit_scaled

    scaled, e = unit_scaled(system.instance)
    if not e:
        return fn(system, **options)
    sol = fn(KeslerSystem.build(scaled), **options)
    info = {**sol.info, "scaled": f"solved on H·2^{e} (H far from unit size), W and the dual mapped back"}
    return SVMSolution.from_primal_dual(system, np.ldexp(sol.W, e), np.ldexp(sol.dual, 2 * e), solver=sol.solver,
                                        status=sol.status, seconds=sol.seconds, iterations=sol.iterations, info=info)
