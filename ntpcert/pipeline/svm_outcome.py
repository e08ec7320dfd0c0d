"""The answer of ``ntpcert svm``: the NTP-SVM solution, or the Farkas certificate that the data are not
separable, as one value with its JSON object and its text lines (the command renders them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ntpcert.errors import InfeasibleError
from ntpcert.instance import NTPInstance

#: The solution's keys the text report lists, in order.
TEXT_KEYS = ("norm", "objective", "dual_objective", "primal_residual", "dual_residual", "gap", "min_margin",
             "seconds")


@dataclass(frozen=True)
class SVMOutcome:
    """``solution`` (an :class:`~ntpcert.solve.solution.SVMSolution`) when the data are separable; else
    ``message`` and the solver's infeasibility ``certificate`` (or None)."""

    instance: NTPInstance
    solution: Any = None
    message: str = ""
    certificate: Any = None

    @property
    def separable(self) -> bool:
        return self.solution is not None

    def to_json(self, *, out: str | None = None) -> dict[str, Any]:
        """One JSON object: m, d, V, ``separable``, then the solution's keys and ``out`` (the W file or
        null), or ``message`` and ``certificate``."""
        inst = self.instance
        head: dict[str, Any] = {"m": inst.m, "d": inst.d, "V": inst.V, "separable": self.separable}
        if self.separable:
            return {**head, **self.solution.to_json(), "out": out}
        head["message"] = self.message
        if self.certificate is not None and hasattr(self.certificate, "to_json"):
            head["certificate"] = self.certificate.to_json()
        return head

    def lines(self, *, out: str | None = None) -> list[str]:
        """The text report."""
        if not self.separable:
            return [f"not separable: {self.message}"]
        inst, j = self.instance, self.solution.to_json()
        lines = [f"NTP-SVM on {inst.name} (m={inst.m}, d={inst.d}, V={inst.V}) with {j['solver']}: {j['status']}"]
        lines += [f"  {key:>16}: {j[key]:.10g}" for key in TEXT_KEYS]
        if out:
            lines.append(f"  W^mm written to {out} (shape {self.solution.W.shape})")
        return lines


def solve_or_refute(instance: NTPInstance, *, solver: str, progress: bool | None = None) -> SVMOutcome:
    """The NTP-SVM of ``instance`` with the named backend, or the outcome that says it is not separable."""
    from ntpcert.solve.svm import solve_svm

    try:
        return SVMOutcome(instance, solve_svm(instance, solver=solver, progress=progress))
    except InfeasibleError as err:
        return SVMOutcome(instance, message=str(err), certificate=getattr(err, "certificate", None))
