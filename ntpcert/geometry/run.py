"""The ``ntpcert geometry`` run: :func:`~ntpcert.geometry.analysis.analyse`, optionally W and H trained
jointly from small random factors (:mod:`ntpcert.geometry.training`), the summary JSON and the files
(arrays, figures, ``summary.json``). The command only writes and prints what :class:`GeometryRun` gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ntpcert.geometry.analysis import GeometryReport, analyse

#: Every file a run may write (``training.*`` only with training).
OUTPUT_NAMES = ("L_mm.npy", "W.npy", "H.npy", "L_in.npy", "summary.json", "word_gram.png", "embeddings.png",
                "singular_values.png", "training.png", "training.json")
#: Default joint-training steps.
TRAIN_STEPS = 10_000


@dataclass(frozen=True, eq=False)
class GeometryRun:
    """The analysis of one instance and, when asked for, its joint training runs.

    Attributes
    ----------
    instance : NTPInstance
    report : GeometryReport
    training : tuple of JointTrajectory
        One per optimiser of :data:`~ntpcert.geometry.training.JOINT_OPTIMIZERS`; empty without training.
    steps : int
        Training steps (used in the figure's title).
    """

    instance: Any
    report: GeometryReport
    training: tuple = ()
    steps: int = TRAIN_STEPS

    def rates(self) -> dict[str, float]:
        """Per optimiser, the fitted power of 1 - cos(L_k, L^mm) in k (:func:`~ntpcert.geometry.training.fit_rate`)."""
        from ntpcert.geometry.training import fit_rate

        return {t.optimizer: fit_rate(t) for t in self.training}

    def to_json(self, *, out: str | None = None) -> dict[str, Any]:
        """:meth:`GeometryReport.to_json`, with ``training`` (final values and rates) when trained, and ``out``
        (the folder the files went to) when given."""
        summary = self.report.to_json()
        if self.training:
            rates = self.rates()
            summary["training"] = {t.optimizer: {"final": t.final(), "rate_one_minus_cos": rates[t.optimizer]}
                               for t in self.training}
        if out is not None:
            summary["out"] = out
        return summary

    def writers(self, summary: dict[str, Any] | None = None) -> dict[str, Callable[[str], None]]:
        """The files, as writers for :func:`ntpcert.util.files.write_directory` (``summary``: :meth:`to_json`,
        when the caller has it already)."""
        from ntpcert.geometry.figures import (embedding_projection_figure, singular_values_figure, training_figure,
                                              word_gram_figure)
        from ntpcert.util.files import npy_writer, text_writer
        from ntpcert.util.jsonout import dumps

        rep, inst = self.report, self.instance
        names, title = inst.token_names, inst.name
        summary = self.to_json() if summary is None else summary
        writers: dict[str, Callable[[str], None]] = {
            "L_mm.npy": npy_writer(rep.solution.L), "W.npy": npy_writer(rep.embeddings.W),
            "H.npy": npy_writer(rep.embeddings.H), "L_in.npy": npy_writer(rep.finite_part),
            "word_gram.png": lambda p: word_gram_figure(rep.embeddings, rep.pattern, p, names, title=title),
            "embeddings.png": lambda p: embedding_projection_figure(rep.embeddings, rep.pattern, p, names, title=title),
            "singular_values.png": lambda p: singular_values_figure(rep.embeddings, p, title=title),
        }
        if self.training:
            trajs = list(self.training)
            writers["training.png"] = lambda p: training_figure(
                trajs, p, title=f"{title} (V={rep.pattern.V}, m={rep.pattern.m}): W and H trained jointly, "
                f"{self.steps:,} steps")
            writers["training.json"] = text_writer(dumps({t.optimizer: t.to_json() for t in trajs}, indent=2))
        writers["summary.json"] = text_writer(dumps(summary, indent=2))
        return writers


def run_geometry(instance: Any, *, solver: str = "structured", gap_tol: float | None = None, train: bool = False,
                 steps: int = TRAIN_STEPS, weight_decay: float = 0.0) -> GeometryRun:
    """Analyse ``instance`` and, with ``train``, train W and H jointly with each optimiser for ``steps``
    steps (vanishing weight decay ``weight_decay``/(k+1))."""
    rep = analyse(instance, solver=solver, gap_tol=gap_tol)
    trajs: tuple = ()
    if train:
        from ntpcert.geometry.training import JOINT_OPTIMIZERS, train_joint

        trajs = tuple(train_joint(instance, rep.solution.L, optimizer=o, steps=steps, wd0=weight_decay)
                      for o in JOINT_OPTIMIZERS)
    return GeometryRun(instance, rep, trajs, steps)


__all__ = ["GeometryRun", "OUTPUT_NAMES", "TRAIN_STEPS", "run_geometry"]
