r"""The float pipeline: instance → Kesler rows → {F, W*} and {separability LP, NTP-SVM} → verdicts.

"The dataset admits the entropy bound" means NTP-compatible **and** NTP-separable (Proposition 1).
Each verdict is True, False or None (undetermined within the stated tolerances); the combined
verdict is True when both hold, False when either fails, and None otherwise.
For verdicts checked in exact arithmetic see :mod:`ntpcert.exact`.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ntpcert.errors import InfeasibleError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.separability_lp import SeparabilityResult, check_separability
from ntpcert.rows.subspace import CompatibilityResult, Subspace, check_compatibility
from ntpcert.solve.svm import SVMSolution, solve_svm


class Stages:
    """Progress over named stages, on stderr (a tqdm bar when enabled)."""

    def __init__(self, total: int, enabled: bool | None = None, desc: str = "ntpcert") -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False,
                             bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._bar is not None:
            self._bar.set_postfix_str(name)
        try:
            yield
        finally:
            if self._bar is not None:
                self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is True and b is True:
        return True
    return None


@dataclass(frozen=True, eq=False)
class Report:
    """Verdicts on one instance.

    Attributes
    ----------
    instance : NTPInstance
    subspace : Subspace
    compatible : CompatibilityResult
    separable : SeparabilityResult
    svm : SVMSolution or None
        The NTP-SVM solution when separable and requested.
    svm_error : str or None
        Why the SVM was not solved, when it was not.
    seconds : float
    """

    instance: NTPInstance
    subspace: Subspace
    compatible: CompatibilityResult
    separable: SeparabilityResult
    svm: SVMSolution | None
    svm_error: str | None
    seconds: float

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return _and(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        out = dict(self.instance.describe())
        out["compatible"] = self.compatible.to_json()
        out["separable"] = self.separable.to_json()
        out["entropy_bound_reachable"] = self.entropy_bound_reachable
        out["entropy_attained_at_finite_W"] = bool(self.instance.support_sizes.min() == self.instance.V) and bool(
            self.compatible.holds
        )
        if self.svm is not None:
            out["svm"] = self.svm.to_json()
            out["W_mm_norm"] = self.svm.norm
        else:
            out["svm"] = None
            if self.svm_error:
                out["svm_error"] = self.svm_error
        out["exact"] = False
        out["seconds"] = self.seconds
        return out


def certify(
    instance: NTPInstance,
    *,
    svm: bool = True,
    solver: str = "structured",
    progress: bool | None = None,
    lp_time_limit: float | None = None,
) -> Report:
    """Run the float pipeline on ``instance``: F and W* (compatibility), the separability LP, and,
    when separable and ``svm`` is true, the NTP-SVM with ``solver``."""
    t0 = time.perf_counter()
    stages = Stages(4 if svm else 3, progress, desc="certify")
    try:
        with stages.stage("Kesler rows"):
            system = KeslerSystem.build(instance)
        with stages.stage("subspace F and W*"):
            subspace = Subspace.build(system)
            comp = check_compatibility(subspace)
        with stages.stage("separability LP"):
            sep = check_separability(system, time_limit=lp_time_limit)
        sol: SVMSolution | None = None
        err: str | None = None
        if svm:
            with stages.stage("NTP-SVM"):
                if sep.holds is False:
                    err = "not separable: the NTP-SVM has no feasible point"
                else:
                    try:
                        sol = solve_svm(system, solver=solver)
                    except InfeasibleError as e:
                        err = str(e)
    finally:
        stages.close()
    return Report(instance, subspace, comp, sep, sol, err, time.perf_counter() - t0)


def compute_limits(instance: NTPInstance, *, solver: str = "structured", progress: bool | None = None) -> Report:
    """Alias of :func:`certify` with the SVM solved: the report carries W* and W^mm."""
    return certify(instance, svm=True, solver=solver, progress=progress)


def cosine(A: np.ndarray, B: np.ndarray) -> float:
    """Frobenius cosine :math:`\\langle A, B\\rangle / (\\|A\\|\\|B\\|)` (0 when either is 0)."""
    na, nb = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.sum(A * B) / (na * nb))
