"""The figure of a checkpoint series (:mod:`ntpcert.dynamics.checkpoints`; drawing only): four panels
against the step."""

from __future__ import annotations

from typing import Any

import numpy as np

from ntpcert.report.plots import save_figure, subplots


def _column(series: Any, key: str) -> np.ndarray:
    """The column ``key`` as float64, NaN where null (a gap in the line)."""
    return np.array([np.nan if r.values()[key] is None else float(r.values()[key]) for r in series.rows])


def _log_if_wide(ax: Any, *columns: np.ndarray) -> None:
    """A log y axis where the finite values are positive and span more than a decade."""
    v = np.concatenate(columns)
    v = v[np.isfinite(v)]
    if v.size and v.min() > 0 and v.max() / v.min() > 10:
        ax.set_yscale("log")


def _step_axis(ax: Any, t: np.ndarray) -> None:
    """Linear, or symmetric-log when the positive steps span two decades or more (log-spaced checkpoints)."""
    pos = t[t > 0]
    if pos.size and t.min() >= 0 and pos.max() / pos.min() >= 100:
        ax.set_xscale("symlog", linthresh=float(pos.min()))
    ax.set_xlabel("step")


def _shade_nonseparable(ax: Any, t: np.ndarray, separable: list) -> None:
    """A grey band over each checkpoint whose data are not separable (verdict False), hatched where undetermined."""
    half = 0.5 * float(np.min(np.diff(np.sort(t)))) if t.size > 1 else 0.5
    for x, s in zip(t, separable):
        if s is False:
            ax.axvspan(x - half, x + half, facecolor="0.85", edgecolor="none", zorder=0)
        elif s is None:
            ax.axvspan(x - half, x + half, facecolor="none", edgecolor="0.75", hatch="//", lw=0, zorder=0)


def plot_checkpoints(series: Any, path: str, *, title: str = "") -> str:
    """Four panels against the step: CE − H (and CE − L* where the data are not separable) with the verdicts;
    the decoder's distance from its checkpoint's limits; how far H and W moved from the previous checkpoint;
    the supports' margins."""
    t = np.array([r.step for r in series.rows], dtype=np.float64)
    sep = [r.values()["separable"] for r in series.rows]
    comp = [r.values()["compatible"] for r in series.rows]
    fig, axes = subplots(2, 2, figsize=(13, 8.5))
    a, b, c, d = axes.ravel()
    _shade_nonseparable(a, t, sep)
    a.plot(t, _column(series, "excess_loss"), "o-", label="CE(W_t) − H_t")
    lo = _column(series, "loss_over_L_star")
    if np.isfinite(lo).any():
        a.plot(t, lo, "s--", color="tab:purple", label="CE(W_t) − L*_t (not separable)")
    _log_if_wide(a, _column(series, "excess_loss"), lo)
    a.set_ylabel("nats")
    n = len(series.rows)
    a.set_title(f"loss above its limit; compatible {sum(x is True for x in comp)}/{n}, separable "
                f"{sum(x is True for x in sep)}/{n} (grey: not separable; hatched: undetermined)", fontsize=9)
    b.plot(t, _column(series, "rel_dist_F"), "o-", color="tab:blue", label=r"$\|P_F W_t - W^*_t\|/\|W^*_t\|$")
    b.set_ylabel("relative distance in F")
    b2 = b.twinx()
    b2.plot(t, _column(series, "cos_perp_mm"), "s-", color="tab:red", label=r"$\cos(P_{F^\perp}W_t, W^{mm}_t)$")
    b2.set_ylim(-1.05, 1.05)
    b2.set_ylabel("cosine", color="tab:red")
    lines = b.get_lines() + b2.get_lines()
    b.legend(lines, [ln.get_label() for ln in lines], fontsize=8)
    b.set_title("the decoder against its checkpoint's own limits", fontsize=9)
    c.plot(t, _column(series, "h_change_rel"), "o-", color="tab:green", label=r"$\|H_t - H_{t-1}\|/\|H_{t-1}\|$")
    c.plot(t, _column(series, "raw_W_change_rel"), "s--", color="tab:orange", label=r"$\|W_t - W_{t-1}\|/\|W_{t-1}\|$")
    _log_if_wide(c, _column(series, "h_change_rel"), _column(series, "raw_W_change_rel"))
    c.set_title("how far the instance and the decoder moved since the previous checkpoint", fontsize=9)
    d.plot(t, _column(series, "margin_min"), "o-", color="tab:brown", label=r"$\min_j \mu_j$")
    d.plot(t, _column(series, "margin_median"), "^-", color="tab:pink", label=r"median$_j\, \mu_j$")
    d.axhline(0.0, color="0.6", lw=0.8)
    d.set_ylabel("support margin (logits)")
    d2 = d.twinx()
    d2.plot(t, _column(series, "margin_positive"), "s:", color="tab:gray", label="fraction with $\\mu_j > 0$")
    d2.set_ylim(-0.02, 1.02)
    d2.set_ylabel("fraction of contexts")
    lines = d.get_lines()[:2] + d2.get_lines()
    d.legend(lines, [ln.get_label() for ln in lines], fontsize=8)
    d.set_title(r"supports' margins $\mu_j = \min_{z\in S_j}(Wh_j)_z - \max_{v\notin S_j}(Wh_j)_v$", fontsize=9)
    for ax in (a, c):
        ax.legend(fontsize=8)
    for ax in (a, b, c, d):
        _step_axis(ax, t)
    whose = f"{n} checkpoints, each against the limits of its own h (steps from {series.steps_from})"
    fig.suptitle(f"{title}: {whose}" if title else whose)
    return save_figure(fig, path, field="--figure")
