"""The figure of per-context excess loss (figures only: the numbers come from an ``excess_loss`` key,
:func:`ntpcert.pipeline.excess_certificate.excess_key`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ntpcert.report.plots import save_figure, subplots

#: Contexts named in the bar panel.
BARS = 25


def plot_excess(key: dict, context_names: list[str], path: str, *, title: str = "") -> str:
    """Two panels: the contexts carrying the most excess loss at the optimum (bars, nats), and the
    share of the total excess carried by the top n contexts against n (all contexts)."""
    per = np.asarray(key["per_context_excess"], dtype=np.float64)
    order = np.argsort(-per, kind="stable")
    fig, (ax1, ax2) = subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [1.6, 1]})
    top = order[:BARS]
    ax1.barh(np.arange(len(top))[::-1], per[top], color="tab:red")
    ax1.set_yticks(np.arange(len(top))[::-1])
    ax1.set_yticklabels(['"' + context_names[j] + '"' for j in top], family="monospace", fontsize=8)
    ax1.set_xlabel(r"excess loss at the optimum, $\pi_j\,\mathrm{KL}(p_j\,\|\,\mathbb{S}(Wh_j))$ (nats)")
    ax1.set_title(f"the {len(top)} contexts with the most excess loss")
    cum = np.cumsum(per[order]) / max(per.sum(), 1e-300)
    ax2.plot(np.arange(1, per.size + 1), cum, color="tab:blue")
    ax2.set_xscale("log")
    ax2.set_xlabel("number of contexts (largest excess first)")
    ax2.set_ylabel("share of the total excess loss")
    ax2.set_ylim(0, 1.02)
    ax2.grid(alpha=0.3)
    for share in (0.5, 0.9):
        n = int(np.searchsorted(cum, share) + 1)
        ax2.axhline(share, color="0.6", lw=0.8, ls=":")
        ax2.annotate(f"{share:.0%} of it: {n} contexts", (n, share), textcoords="offset points", xytext=(-110, 6),
                     fontsize=9)
    ax2.set_title(f"L* - H in [{key['excess_lower']:.9g}, {key['excess_upper']:.9g}] nats")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def context_labels(instance: Any) -> list[str]:
    """The contexts' text, as ``explain`` prints it."""
    from ntpcert.pipeline.explain.names import context_text

    return [context_text(instance, j) for j in range(instance.m)]
