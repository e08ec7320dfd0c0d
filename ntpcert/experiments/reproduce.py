"""The paper's experiment (``ntpcert reproduce paper``): Figures 3-5 analogues and a summary table.

GD, normalised GD and Adam with the paper's hyperparameters run from W = 0 on the built-in
``paper`` instance; the figures show CE - H, the norm growth, cos(W_k, W^mm), cos(W_k - W*, W^mm)
and ||P_F(W_k) - W*||. The summary states every hyperparameter used and the final values, and
checks them against the paper's reported outcome. With extras (default), sign descent, spectral
descent and Muon are compared with the NTP-SVM in the max / spectral / nuclear / l1 norms, the
regularisation path of Theorem 1 is traced, and the convergence checks of Theorem 2 run on GD at its
default step 1/(2L) and on Adam, the control.

:func:`reproduce_paper` runs it and returns a :class:`Reproduction`, whose :meth:`~Reproduction.to_json`
is the summary and :meth:`~Reproduction.writers` the files; the command only writes and prints them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

#: The paper's hyperparameters (Thrampoulidis, arXiv 2402.18551, Sec. 6).
PAPER_GD_LR = 0.5
PAPER_NGD_LR = 0.01
PAPER_ADAM_LR = 0.01
PAPER_ADAM_BETAS = (0.9, 0.99)
PAPER_ADAM_EPS = 1e-8
PAPER_STEPS = 10_000

#: The paper's reported outcome for NGD and Adam after 10^4 steps, checked in the summary.
TARGET_COS = 0.99
TARGET_REL_DIST_F = 1e-2

#: Extras: steepest-descent methods in other norms, with decaying steps so that the iterate does
#: not stall in an oscillation of size lr around W* in F (see docs/trajectories.md).
EXTRA_SIGN_LR = 0.1
EXTRA_SPECTRAL_LR = 1.0
EXTRA_MUON_LR = 0.01
EXTRA_NORMS = ("max", "spectral", "nuclear", "l1")
#: Regularisation path budgets: geometric from 1 to this many times ||W^mm|| (beyond, the gradient
#: falls below what float64 resolves on this instance).
REGPATH_MAX_FACTOR = 20.0
REGPATH_POINTS = 15

EXPERIMENTS = ("paper",)

#: Steps of the two runs behind the Theorem 2 checks (GD at its default step 1/(2L), and Adam, the control).
CHECK_STEPS = 1_000_000

#: Largest embedding scale: beyond it the paper's step sizes overflow float64.
MAX_EMBEDDING_SCALE = 1e3

#: Logged steps per decade (default).
POINTS_PER_DECADE = 20


def output_names(extras: bool) -> tuple[str, ...]:
    """Every file the experiment writes (with or without the extras)."""
    names = ["summary.md", "summary.json", "metrics_gd.csv", "metrics_ngd.csv", "metrics_adam.csv", "fig3_gd.png",
             "fig4_ngd.png", "fig5_adam.png", "fig_compare.png"]
    if extras:
        names += ["metrics_sign.csv", "metrics_spectral.csv", "metrics_muon.csv", "regpath.csv", "fig_norms.png",
                  "fig_regpath.png", "fig_checks.png", "metrics_check_gd.csv", "metrics_check_adam.csv"]
    return tuple(names)


def paper_instance(seed: int = 0, embedding_scale: float = 1.0):
    """The built-in ``paper`` instance of ``seed``, its embeddings multiplied by ``embedding_scale``."""
    from ntpcert.errors import InputError
    from ntpcert.instance import NTPInstance
    from ntpcert.instance.load import load_instance

    if not (math.isfinite(embedding_scale) and 0 < embedding_scale <= MAX_EMBEDDING_SCALE):
        raise InputError(f"embedding_scale: value {embedding_scale!r} is not a finite number in "
                         f"(0, {MAX_EMBEDDING_SCALE:g}]")
    inst = load_instance("paper", seed=seed)
    if embedding_scale != 1.0:
        inst = NTPInstance.from_counts(inst.embeddings * embedding_scale, inst.counts, token_names=inst.token_names,
                                       context_names=inst.context_names,
                                       name=f"paper (embeddings x {embedding_scale:g})")
    return inst


@dataclass(frozen=True, eq=False)
class Reproduction:
    """Every run of the experiment, its limits and checks.

    Attributes
    ----------
    instance : NTPInstance
    limits : Limits
    trajectories : dict of str to Trajectory
        ``gd``, ``ngd``, ``adam`` with the paper's hyperparameters.
    extra_trajectories : dict of str to Trajectory
        ``sign``, ``spectral``, ``muon`` (empty without extras).
    check_trajectories : dict of str to Trajectory
        ``gd`` at 1/(2L) and ``adam`` for ``check_steps`` steps (empty without extras).
    regpath : RegPath or None
    run_checks, theorem2 : dict of str to ConvergenceChecks
        The checks of every run at its own length (no path check), and of the two long runs.
    settings : dict
        ``steps``, ``check_steps``, ``seed``, ``embedding_scale``, ``extras``.
    """

    instance: Any
    limits: Any
    trajectories: dict
    extra_trajectories: dict
    check_trajectories: dict
    regpath: Any
    run_checks: dict
    theorem2: dict
    settings: dict

    def to_json(self, *, out: str | None = None, files: list[str] | None = None) -> dict[str, Any]:
        """Everything ``summary.md`` and ``summary.json`` report, as one JSON-ready dict; with ``out``, also
        where the files went (``out``, ``files``: what ``ntpcert reproduce --json`` prints)."""
        inst, limits, trajs, s = self.instance, self.limits, self.trajectories, self.settings
        runs = {**trajs, **self.extra_trajectories}
        checks = {}
        for k in ("ngd", "adam", "gd"):
            f = trajs[k].final()
            checks[k] = {
                "cos_mm": f["cos_mm"],
                "cos_mm_at_least_target": bool(f["cos_mm"] >= TARGET_COS),
                "rel_dist_F": f["rel_dist_F"],
                "rel_dist_F_below_target": bool(f["rel_dist_F"] < TARGET_REL_DIST_F),
            }
        ngd = trajs["ngd"]
        ws = float(np.linalg.norm(limits.W_star))
        reach = ngd.hyperparams["lr"] * int(ngd.steps[-1])
        summary: dict[str, Any] = {
            "experiment": "paper",
            "instance": {**inst.describe(fingerprint=True), "seed": s["seed"], "embedding_scale": s["embedding_scale"]},
            "limits": limits.to_json(),
            "steps": int(s["steps"]),
            "hyperparams": {k: tr.hyperparams for k, tr in runs.items()},
            "final": {k: tr.final() for k, tr in runs.items()},
            "steps_per_second": {k: tr.steps_per_second for k, tr in runs.items()},
            "targets": {"cos_mm": TARGET_COS, "rel_dist_F": TARGET_REL_DIST_F},
            "checks": checks,
            "ngd_norm_reach": reach,
            "ngd_cos_ceiling": math.sqrt(max(0.0, 1.0 - (ws / reach) ** 2)) if reach > ws else 0.0,
        }
        rp = self.regpath
        if rp is not None:
            def fin(x: float) -> float | None:  # JSON has no NaN: an uncertified budget's values are null
                return float(x) if math.isfinite(float(x)) else None

            summary["regpath"] = {"budgets": [float(b) for b in rp.budgets],
                              **{k: [fin(x) for x in rp[k]] for k in ("excess_loss", "cos_mm", "cos_mm_centered",
                                                                      "rel_dist_F", "margin_ratio")},
                              "kkt": [fin(x) for x in rp.kkt], "method": rp.method,
                              "certified": [bool(x) for x in rp.certified], "failures": list(rp.failures),
                              "kkt_max": rp.kkt_max}
        summary["convergence_checks"] = {
            "runs": {k: c.to_json() for k, c in self.run_checks.items()},
            "theorem2": {k: {"hyperparams": self.check_trajectories[k].hyperparams, **c.to_json()}
                         for k, c in self.theorem2.items()},
            "check_steps": int(s["check_steps"]) if s["extras"] else None,
        }
        if out is not None:
            return {**summary, "out": out, "files": files}
        return summary

    def writers(self, summary: dict[str, Any] | None = None) -> dict[str, Callable[[str], None]]:
        """The files of :func:`output_names`, as writers for :func:`ntpcert.util.files.write_directory`
        (``summary``: :meth:`to_json`, when the caller has it already)."""
        from ntpcert.report import plots
        from ntpcert.util.jsonout import dumps
        from ntpcert.report.reproduce_text import render_markdown
        from ntpcert.report.trajectory_text import hyperparam_text
        from ntpcert.util.files import text_writer

        summary = self.to_json() if summary is None else summary
        inst, trajs, extra, check = self.instance, self.trajectories, self.extra_trajectories, self.check_trajectories
        steps, check_steps, extras = self.settings["steps"], self.settings["check_steps"], self.settings["extras"]
        writers: dict[str, Callable[[str], None]] = {
            "summary.md": text_writer(render_markdown(summary)),
            "summary.json": text_writer(dumps(summary, indent=2) + "\n"),
        }
        for k, tr in {**trajs, **extra}.items():
            writers[f"metrics_{k}.csv"] = text_writer(tr.to_csv())
        for k, tr in check.items():
            writers[f"metrics_check_{k}.csv"] = text_writer(tr.to_csv())
        if self.regpath is not None:
            writers["regpath.csv"] = text_writer(self.regpath.to_csv())

        def describe(tr) -> str:
            hp = {k: v for k, v in tr.hyperparams.items() if k not in ("optimizer", "start", "steps")}
            return f"{tr.optimizer} ({hyperparam_text(hp)})"

        fig_names = {"gd": "fig3_gd.png", "ngd": "fig4_ngd.png", "adam": "fig5_adam.png"}
        for k, tr in trajs.items():
            title = f"{inst.name}: {describe(tr)}, {steps:,} steps" + (
                f" (fig_compare.png adds GD for {check_steps:,} steps: the limit approached)" if k == "gd" and extras
                else "")
            writers[fig_names[k]] = (lambda tr_, t_: lambda path: plots.plot_trajectory(tr_, path, title=t_))(tr, title)
        long_gd = [check["gd"]] if "gd" in check else []  # the limit being approached: 10^6 GD steps
        writers["fig_compare.png"] = lambda path: plots.plot_comparison(
            [*trajs.values(), *long_gd], path, title=f"{inst.name}: GD, NGD and Adam with the paper's hyperparameters "
            f"({steps:,} steps)" + ("; GD at " + r"$\eta = 1/(2L)$" + f" for {check_steps:,} steps" if long_gd else ""))
        if extras:
            writers["fig_norms.png"] = lambda path: plots.plot_norm_alignment(
                [*trajs.values(), *extra.values()], path,
                title=f"{inst.name}: margin and alignment in each norm (open question: which limit does each optimiser "
                "pick?)")
            writers["fig_checks.png"] = lambda path: plots.plot_checks(
                list(self.theorem2.values()), path, labels=[r"gd ($\eta = 1/(2L)$)", "adam (control)"],
                title=f"{inst.name}: convergence checks per decade, {check_steps:,} steps (Theorem 2: "
                r"$W_k = W^* + \ln(k)\, W^{\mathrm{mm}} + o(\ln k)$ for GD; Adam is the control)")
            writers["fig_regpath.png"] = lambda path: plots.plot_regpath(
                self.regpath, path, title=f"{inst.name}: regularisation path "
                + r"$\hat W_B = \arg\min_{\|W\| \leq B} \mathrm{CE}(W)$" + " (Theorem 1)")
        return writers


def reproduce_paper(*, steps: int = PAPER_STEPS, seed: int = 0, embedding_scale: float = 1.0,
                    gd_lr: float = PAPER_GD_LR, ngd_lr: float = PAPER_NGD_LR, adam_lr: float = PAPER_ADAM_LR,
                    adam_eps: float = PAPER_ADAM_EPS, extras: bool = True, points_per_decade: int = POINTS_PER_DECADE,
                    check_steps: int = CHECK_STEPS, progress: bool = False) -> Reproduction:
    """Run the paper's experiment (module doc). Raises :class:`~ntpcert.errors.InputError` when the
    paper instance of ``seed`` is not NTP-separable (there is no W^mm to compare with)."""
    import ntpcert.dynamics.optimizers as O
    from ntpcert.dynamics.checks import convergence_checks
    from ntpcert.dynamics.trajectory import Limits, decade_steps, geometric_grid, run
    from ntpcert.errors import InputError

    geometric_grid(steps, points_per_decade)  # checks points_per_decade before any work
    main = {
        "gd": O.gd(gd_lr),
        "ngd": O.ngd(ngd_lr),
        "adam": O.adam(adam_lr, beta1=PAPER_ADAM_BETAS[0], beta2=PAPER_ADAM_BETAS[1], eps=adam_eps),
    }
    inst = paper_instance(seed, embedding_scale)
    limits = Limits.compute(inst, norms=EXTRA_NORMS if extras else ())
    if limits.svm is None:
        raise InputError(f"seed: the paper instance for seed {seed} is not NTP-separable ({limits.svm_error})")

    def go(opt, n):
        grid = np.union1d(geometric_grid(n, points_per_decade), decade_steps(n))
        return run(inst, opt, n, limits=limits, grid=grid, snapshots=decade_steps(n), progress=progress)

    trajs = {k: go(opt, steps) for k, opt in main.items()}
    extra_trajs: dict[str, Any] = {}
    check_trajs: dict[str, Any] = {}
    rp = None
    if extras:
        others = {
            "sign": O.sign(EXTRA_SIGN_LR, schedule="inv-sqrt"),
            "spectral": O.spectral(EXTRA_SPECTRAL_LR, schedule="inv-sqrt"),
            "muon": O.muon(EXTRA_MUON_LR),
        }
        extra_trajs = {k: go(opt, steps) for k, opt in others.items()}
        check_trajs = {"gd": go(O.gd(), check_steps), "adam": go(main["adam"], check_steps)}
        from ntpcert.dynamics.regpath import regularization_path

        budgets = np.geomspace(1.0, REGPATH_MAX_FACTOR * limits.svm.norm, REGPATH_POINTS)
        rp = regularization_path(inst, budgets, limits=limits, on_failure="mark", progress=progress)
    run_checks = {k: convergence_checks(tr, limits, path=False) for k, tr in {**trajs, **extra_trajs}.items()}
    theorem2 = {k: convergence_checks(tr, limits, progress=progress) for k, tr in check_trajs.items()}
    settings = {"steps": int(steps), "check_steps": int(check_steps), "seed": seed, "embedding_scale": embedding_scale,
                "extras": extras}
    return Reproduction(inst, limits, trajs, extra_trajs, check_trajs, rp, run_checks, theorem2, settings)


__all__ = [
    "CHECK_STEPS",
    "EXPERIMENTS",
    "MAX_EMBEDDING_SCALE",
    "PAPER_ADAM_EPS",
    "PAPER_ADAM_LR",
    "PAPER_GD_LR",
    "PAPER_NGD_LR",
    "PAPER_STEPS",
    "POINTS_PER_DECADE",
    "Reproduction",
    "output_names",
    "paper_instance",
    "reproduce_paper",
]
