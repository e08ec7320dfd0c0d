"""The figure of ``ntpcert compare`` (figures only: the numbers come from
:func:`ntpcert.dynamics.compare.compare` / :func:`~ntpcert.dynamics.compare.compare_series`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ntpcert.report.plots import save_figure, subplots


def _zipf_panel(ax: Any, bins: list[dict]) -> None:
    """Distances on the left axis, the cosine on its own axis in [-1, 1] on the right (a distance and a
    cosine share no scale); a bin whose number is null (NaN) leaves a gap."""
    x = np.arange(len(bins))
    ax.plot(x, [b["rel_dist_F"] for b in bins], "o-", color="tab:blue", label=r"$\|P_F W - W^*\|/\|W^*\|$ (bin's rows)")
    ax.plot(x, [b.get("dist_F_share", np.nan) for b in bins], "^--", color="tab:cyan",
            label=r"$\|P_F W - W^*\|_{bin}/\|W^*\|$")
    ax.set_ylabel("relative distance in F")
    ax.set_xticks(x)
    ax.set_xticklabels([b["label"] for b in bins], rotation=45, fontsize=7)
    ax.set_xlabel("token frequency in the corpus (bins of powers of 2; rare on the left)")
    ax.axhline(0.0, color="0.7", lw=0.8)
    ax2 = ax.twinx()
    ax2.plot(x, [b["cos_perp_mm"] for b in bins], "s-", color="tab:red", label=r"$\cos(P_{F^\perp}W, W^{mm})$ (rows)")
    ax2.set_ylim(-1.05, 1.05)
    ax2.set_ylabel("cosine", color="tab:red")
    lines = ax.get_lines()[:2] + ax2.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], fontsize=8)
    ax.set_title("per frequency bin")


def plot_comparison(cmp: Any, path: str, *, title: str = "") -> str:
    """Two panels for one decoder: the per-bin distances (a Zipf axis), and each bin's share of the
    excess loss CE(W) − H."""
    fig, (ax1, ax2) = subplots(1, 2, figsize=(12, 4.8))
    _zipf_panel(ax1, cmp.bins)
    ax2.bar(np.arange(len(cmp.bins)), [b["excess_nats"] for b in cmp.bins], color="tab:purple")
    ax2.set_xticks(np.arange(len(cmp.bins)))
    ax2.set_xticklabels([b["label"] for b in cmp.bins], rotation=45, fontsize=7)
    ax2.set_ylabel("part of CE(W) − H (nats)")
    v = cmp.values
    ax2.set_title(f"CE − H = {v['excess_loss']:.4g}, bracket on L* − H ≤ {cmp.bracket.get('excess_upper', float('nan')):.3g}")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_series(series: Sequence[tuple[int, Any]], path: str, *, title: str = "") -> str:
    """Metrics of snapshots W_t against t: a log axis, symmetric-log when W_0 is among them (log-spaced
    snapshots on a linear axis crowd into its left end); the title says the limits are one instance's."""
    t = np.array([s for s, _ in series], dtype=np.float64)
    fig, axes = subplots(1, 3, figsize=(15, 4.5))
    val = lambda k: np.array([c.values[k] for _, c in series], dtype=np.float64)  # noqa: E731
    axes[0].plot(t, val("excess_loss"), "o-", label="CE(W_t) − H")
    axes[0].plot(t, np.full(t.size, series[0][1].bracket.get("excess_upper", np.nan)), "--", label="bracket upper")
    axes[0].set_yscale("log")
    axes[1].plot(t, val("rel_dist_F"), "o-", color="tab:blue", label=r"$\|P_F W_t - W^*\|/\|W^*\|$")
    axes[2].plot(t, val("cos_perp_mm"), "o-", color="tab:red", label=r"$\cos(P_{F^\perp}W_t, W^{mm})$")
    axes[2].plot(t, val("norm_matched_distance"), "s-", color="tab:orange", label="norm-matched distance")
    for ax in axes:
        if np.all(t > 0):
            ax.set_xscale("log")
        elif np.all(t >= 0) and np.any(t > 0):  # W_0 too: logarithmic past the first positive t
            ax.set_xscale("symlog", linthresh=float(t[t > 0].min()))
            ax.set_xlim(left=0.0, right=float(t.max()) * 1.3)
        ax.set_xlabel("t (step of the snapshot)")
        ax.legend(fontsize=8)
    whose = "the limits (W*, F, W^mm) of one instance: the same h for every W_t"
    fig.suptitle(f"{title}: {whose}" if title else whose)
    return save_figure(fig, path)
