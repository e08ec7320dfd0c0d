"""The answer of ``ntpcert svm``: the NTP-SVM solution, or the Farkas certificate that the data are not
separable, as one value with its JSON object and its text lines (the command renders them).

Through a model with its unseen tokens merged (:mod:`ntpcert.instance.lm.merge`), the NTP-SVM is solved on the
merged instance with the representative weighed by the number of tokens it stands for
(:meth:`~ntpcert.instance.lm.merge.TokenMerge.weighted`), and :meth:`SVMOutcome.W` expands it to the model's
V rows: that is the full vocabulary's W^mm, and ``norm`` its norm.

**Not separable first.** Where m > d + 1 a Farkas ray on one pair of tokens is looked for before any
solver runs, as ``certify`` does: the pairs with more than d shared contexts
(:func:`ntpcert.pipeline.decide.pair_separability`), then, on large instances (:data:`SCREEN_FIRST_CELLS`),
the pair screen (:mod:`ntpcert.pipeline.pair_screen`, a bounded budget of small LPs). A model's data (m much larger than d) are almost never separable, and a
solver that meets an NTP-SVM without a solution spends its whole budget before it can say so (the whole
pydoc text through a GPT-2-shaped model: more than 10 minutes). A ray found is checked exactly on the
whole instance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ntpcert.errors import InfeasibleError
from ntpcert.instance import NTPInstance

#: The pair screen runs before the solver only on instances past this many cells m·d·V: its budget costs
#: 0.6-1.6 s where no pair has a ray (teacher data at d = 64, m = 500), about what the solver takes to settle
#: separable data there, while at a model's scale (1.4·10^11 cells) the solver meets a missing NTP-SVM for minutes.
SCREEN_FIRST_CELLS = 1_000_000_000

#: The solution's keys the text report lists, in order.
TEXT_KEYS = ("norm", "objective", "dual_objective", "primal_residual", "dual_residual", "gap", "min_margin",
             "seconds")


@dataclass(frozen=True)
class PairRayCertificate:
    """A Farkas ray of (6) on a pair of tokens (:class:`~ntpcert.verdict.FarkasRay`), checked exactly."""

    witness: Any

    def to_json(self) -> dict[str, Any]:
        return {"kind": "farkas_ray", "engine": self.witness.engine, "verified_exactly": True,
                "support": len(self.witness.ray)}


@dataclass(frozen=True)
class SVMOutcome:
    """``solution`` (an :class:`~ntpcert.solve.solution.SVMSolution`) when the data are separable; else
    ``message`` and the solver's infeasibility ``certificate`` (or None)."""

    instance: NTPInstance
    solution: Any = None
    message: str = ""
    certificate: Any = None
    merge: Any = None

    @property
    def separable(self) -> bool:
        return self.solution is not None

    def W(self) -> Any:
        """W^mm of shape (V, d): the solution's, with a merged representative's row copied to every unseen
        token (the model's full vocabulary)."""
        W = self.solution.W
        return W if self.merge is None else self.merge.expand_rows(W)

    def _vocabulary(self) -> dict[str, Any]:
        if self.merge is None:
            return {}
        out = {"V": self.merge.V, "V_instance": self.instance.V, "vocabulary": self.merge.to_json()}
        if self.separable:
            out["weighted"] = ("the representative of the unseen tokens weighs as the tokens it stands for: W^mm, its "
                               "norm and its gap are the full vocabulary's")
        return out

    def to_json(self, *, out: str | None = None) -> dict[str, Any]:
        """One JSON object: m, d, V, ``separable``, then the solution's keys and ``out`` (the W file or
        null), or ``message`` and ``certificate``."""
        inst = self.instance
        head: dict[str, Any] = {"m": inst.m, "d": inst.d, "V": inst.V, "separable": self.separable,
                                **self._vocabulary()}
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
        V = inst.V if self.merge is None else self.merge.V
        lines = [f"NTP-SVM on {inst.name} (m={inst.m}, d={inst.d}, V={V}) with {j['solver']}: {j['status']}"]
        if self.merge is not None:
            lines.append(f"  solved on {inst.V} tokens: {self.merge.merged} unseen ones merged into one row that "
                         "weighs as all of them (W^mm is the full vocabulary's)")
        lines += [f"  {key:>16}: {j[key]:.10g}" for key in TEXT_KEYS]
        if out:
            lines.append(f"  W^mm written to {out} (shape {self.W().shape})")
        return lines


def solve_or_refute(instance: NTPInstance, *, solver: str, progress: bool | None = None,
                    merge: Any = None) -> SVMOutcome:
    """The NTP-SVM of ``instance`` with the named backend, or the outcome that says it is not separable.
    ``merge`` (a :class:`~ntpcert.instance.lm.merge.TokenMerge` of ``instance``): solve with the representative
    weighted (module doc)."""
    from ntpcert.solve.svm import solve_svm

    if merge is not None and not merge.merged:
        merge = None
    from ntpcert.pipeline import pair_screen
    from ntpcert.pipeline.decide import pair_separability

    if pair_screen.applies(instance):  # separability does not depend on the token multiplicities
        verdict = pair_separability(instance)
        if verdict is None and instance.m * instance.d * instance.V > SCREEN_FIRST_CELLS:
            verdict = pair_screen.separability_verdict(instance)
        if verdict is not None and verdict.holds is False:
            return SVMOutcome(instance, message=verdict.witness.text, certificate=PairRayCertificate(verdict.witness),
                              merge=merge)
    data = instance if merge is None else merge.weighted(instance)
    try:
        return SVMOutcome(instance, solve_svm(data, solver=solver, progress=progress), merge=merge)
    except InfeasibleError as err:
        certificate = getattr(err, "certificate", None)
        if certificate is None:  # a backend's float status, no witness: not a verdict
            from ntpcert.errors import SolverError

            raise SolverError(f"{err}; no Farkas ray came with it, so separability is undetermined here "
                              "(ntpcert certify --exact decides it)") from err
        return SVMOutcome(instance, message=str(err), certificate=certificate, merge=merge)
