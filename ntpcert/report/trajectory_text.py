"""Plain-text renderings of a trajectory run: the hyperparameters in a title, the final metrics against
the limits (the caller prints them)."""

from __future__ import annotations

import numpy as np


def short_title(inst, traj) -> str:
    """One line naming the instance, the optimiser and its hyperparameters."""
    hp = {k: v for k, v in traj.hyperparams.items() if k not in ("optimizer", "start")}
    return f"{inst.name} (m={inst.m}, d={inst.d}, V={inst.V}): {traj.optimizer} " + hyperparam_text(hp)


#: Hyperparameters written with their symbols (mathtext) in figure titles.
SYMBOLS = {"lr": r"$\eta$", "beta1": r"$\beta_1$", "beta2": r"$\beta_2$", "eps": r"$\epsilon$"}


def hyperparam_text(hp: dict) -> str:
    """``η=0.5, steps=1000``: hyperparameters for a title, floats with ``:g``."""
    return ", ".join(f"{SYMBOLS.get(k, k)}={v:g}" if isinstance(v, float) else f"{SYMBOLS.get(k, k)}={v}"
                     for k, v in hp.items())


def render_final(inst, limits, traj) -> str:
    """A few lines: the run, the limits, and the final metrics."""
    f = traj.final()
    lines = [
        f"{traj.optimizer} on {inst.name} (m={inst.m}, d={inst.d}, V={inst.V}): {int(traj.steps[-1])} steps, "
        f"{traj.steps_per_second:,.0f} steps/s; {traj.hyperparams}",
        f"  H = {limits.entropy:.10g}; ||W*|| = {float(np.linalg.norm(limits.W_star)):.6g} "
        f"(NTP-compatible: {limits.compatible}); "
        + (f"||W^mm|| = {limits.svm.norm:.6g}" if limits.svm is not None else f"W^mm: {limits.svm_error}"),
    ]
    split = getattr(limits, "split", None)
    if split is not None and split.limit is not None:
        lines.append(f"  not separable: {len(split.nonseparable)} non-separable pair(s); W* above is W_fin, "
                     f"L* = {split.limit.L_star:.10g}, dim F_N = {split.limit.dim_F_N}; W^mm above is W^mm_P")
    for key in ("excess_loss", "norm", "cos_mm", "cos_mm_centered", "rel_dist_F", "perp_fraction", "margin_ratio",
                "eq_violation"):
        lines.append(f"  {key:>22}: {f[key]:.6g}")
    for key in sorted(k for k in f if k.startswith(("cos_max", "cos_spectral", "cos_nuclear", "cos_l1", "margin_ratio_"))):
        lines.append(f"  {key:>22}: {f[key]:.6g}")
    for n, sol in limits.norm_svms.items():
        lines.append(f"  {n}-norm NTP-SVM: norm {sol.value:.8g}, checked relative duality gap {sol.relative_gap:.2e} "
                     f"({sol.solver}, {sol.seconds:.1f} s)")
    return "\n".join(lines)


__all__ = ["SYMBOLS", "hyperparam_text", "render_final", "short_title"]
