"""Figures of trajectories and regularisation paths (matplotlib's object API on the Agg canvas,
imported lazily; no pyplot, so no global backend is set and no figure is kept alive).

Only drawing happens here: every number comes from a :class:`~ntpcert.dynamics.trajectory.Trajectory` or a
:class:`~ntpcert.dynamics.regpath.RegPath`. Each function writes one PNG and returns its path.
"""

from __future__ import annotations

import io
import os
from typing import Any, Sequence

import numpy as np

#: Figure resolution; with the sizes below a figure stays well under 300 KB.
DPI = 100
#: Colours by optimiser, so the same optimiser looks the same in every figure.
COLORS = {"gd": "C0", "ngd": "C1", "adam": "C2", "sign": "C3", "spectral": "C4", "muon": "C5"}
#: Line styles by norm in the other-norm figure.
NORM_STYLES = {"fro": "-", "max": "--", "spectral": "-.", "nuclear": ":", "l1": (0, (3, 1, 1, 1, 1, 1))}


def subplots(nrows: int, ncols: int, **options: Any) -> tuple[Any, Any]:
    """A figure on matplotlib's Agg canvas and its axes (``options`` as for
    :meth:`matplotlib.figure.Figure.subplots`, plus ``figsize``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=options.pop("figsize", None))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **options)


def save_figure(fig: Any, path: str, *, dpi: int = DPI, field: str = "--out", tight: str = "layout") -> str:
    """Write ``fig`` to ``path`` atomically, in the format its suffix names (png, pdf or svg).

    ``tight="layout"`` runs :meth:`~matplotlib.figure.Figure.tight_layout` first; ``tight="bbox"``
    crops to the drawn area instead.
    """
    from ntpcert.errors import InputError
    from ntpcert.util.files import atomic_write_bytes

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in ("png", "pdf", "svg"):
        raise InputError(f"{field}: value {path!r} must end in .png, .pdf or .svg")
    buf = io.BytesIO()
    if tight == "layout":
        fig.tight_layout()
        fig.savefig(buf, format=ext, dpi=dpi)
    else:
        fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return path


def _label(traj) -> str:
    hp = traj.hyperparams
    lr = hp.get("lr")
    sched = "" if hp.get("schedule", "constant") == "constant" else r"$/\sqrt{t}$"
    return f"{traj.optimizer} ($\\eta$={lr:g}{sched})" if lr is not None else traj.optimizer


def _color(traj, i: int) -> str:
    return COLORS.get(traj.optimizer, f"C{i % 10}")


def _positive(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop step 0 (log axis) and non-finite or non-positive values (log y)."""
    keep = (steps > 0) & np.isfinite(values) & (values > 0)
    return steps[keep], values[keep]


#: Below this, a y axis of ratios turns symmetric-logarithmic (linear within ±1), so that early, very
#: negative margins and the approach to 1 both stay visible.
SYMLOG_BELOW = -3.0


def fit_ylim(ax, series: Sequence[np.ndarray], top: float) -> None:
    """A y range that shows every point of ``series`` (never clipped): from their minimum to ``top``,
    on a symmetric-log scale when the minimum is below :data:`SYMLOG_BELOW`."""
    vals = [np.asarray(v, dtype=float) for v in series if np.size(v)]
    vals = [v[np.isfinite(v)] for v in vals]
    low = min((float(v.min()) for v in vals if v.size), default=0.0)
    high = max([top] + [float(v.max()) for v in vals if v.size])
    if low < SYMLOG_BELOW:
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(1.2 * low, high)
    else:
        ax.set_ylim(min(low, 0.0) - 0.05 * (high - min(low, 0.0)), high)


def suptitle(fig, title: str | None, fontsize: int = 11) -> None:
    """The figure's title, wrapped to the figure's width (about 11 characters per inch at 11 pt), never
    inside a ``$...$`` formula."""
    if not title:
        return
    import re
    import textwrap

    chars = max(30, int(fig.get_figwidth() * 11 * 11 / fontsize))
    held = re.sub(r"\$[^$]*\$", lambda mo: mo.group(0).replace(" ", "\x00"), title)
    lines = textwrap.wrap(held, chars, break_on_hyphens=False, break_long_words=False)
    fig.suptitle("\n".join(ln.replace("\x00", " ") for ln in lines), fontsize=fontsize)


def _save(fig, path: str) -> str:
    return save_figure(fig, path)


def _panels(axes, trajs: Sequence, entropy_note: bool = True) -> None:
    (a, b), (c, e) = axes
    shared = len({tr.optimizer for tr in trajs}) < len(trajs)  # one optimiser twice: colour by run instead
    for i, tr in enumerate(trajs):
        col = f"C{i % 10}" if shared else _color(tr, i)
        lab = _label(tr) + (f", {int(tr.steps[-1]):,} steps" if shared else "")
        s = tr.steps
        x, y = _positive(s, tr["excess_loss"])
        a.loglog(x, y, color=col, label=lab)
        x, y = _positive(s, tr["norm"])
        b.loglog(x, y, color=col, label=lab)
        keep = (s > 0) & np.isfinite(tr["cos_mm"])
        c.semilogx(s[keep], tr["cos_mm"][keep], color=col, label=f"{lab}: " + r"$\cos(W_k, W^{\mathrm{mm}})$")
        keep = (s > 0) & np.isfinite(tr["cos_mm_centered"])
        c.semilogx(s[keep], tr["cos_mm_centered"][keep], color=col, ls="--",
                   label=f"{lab}: " + r"$\cos(W_k - W^*, W^{\mathrm{mm}})$")
        x, y = _positive(s, tr["rel_dist_F"])
        e.loglog(x, y, color=col, label=lab)
    a.set_title(r"(a) $\mathrm{CE}(W_k) - \mathcal{H}$")
    b.set_title(r"(b) $\|W_k\|_F$")
    c.set_title(r"(c) alignment with $W^{\mathrm{mm}}$ (solid: $W_k$, dashed: $W_k - W^*$)")
    c.axhline(0.99, color="grey", lw=0.7, ls=":")
    c.set_ylim(min(0.0, c.get_ylim()[0]), 1.02)
    e.set_title(r"(d) $\|P_F(W_k) - W^*\| \,/\, \|W^*\|$")
    e.axhline(1e-2, color="grey", lw=0.7, ls=":")
    for ax in (a, b, c, e):
        ax.set_xlabel("step $k$")
        ax.grid(True, which="major", alpha=0.3)
    a.legend(fontsize=8)


def plot_trajectory(traj, path: str, *, title: str | None = None) -> str:
    """Four panels for one trajectory: excess loss, norm, both cosines with W^mm, distance to W* in F."""
    return plot_comparison([traj], path, title=title)


def plot_comparison(trajs: Sequence, path: str, *, title: str | None = None) -> str:
    """The four panels of :func:`plot_trajectory` with several optimisers overlaid."""
    fig, axes = subplots(2, 2, figsize=(10, 7))
    _panels(axes, trajs)
    suptitle(fig, title)
    return _save(fig, path)


def plot_norm_alignment(trajs: Sequence, path: str, *, title: str | None = None) -> str:
    """For each trajectory: the normalised margin relative to the best possible in each norm
    (``margin_ratio`` and ``margin_ratio_N``, top) and :math:`\\cos(W_k - W^*, W^N)` (bottom)."""
    n = len(trajs)
    fig, axes = subplots(2, n, figsize=(3.6 * n + 0.6, 6.4), squeeze=False, sharey="row")
    tops: list[np.ndarray] = []
    bots: list[np.ndarray] = []
    for i, tr in enumerate(trajs):
        top, bot = axes[0][i], axes[1][i]
        s = tr.steps
        norms = ["fro"] + [k[len("margin_ratio_"):] for k in tr.metrics if k.startswith("margin_ratio_")]
        for nm in norms:
            mr = tr["margin_ratio"] if nm == "fro" else tr[f"margin_ratio_{nm}"]
            cs = tr["cos_mm_centered"] if nm == "fro" else tr[f"cos_{nm}_centered"]
            keep = (s > 0) & np.isfinite(mr)
            top.semilogx(s[keep], mr[keep], ls=NORM_STYLES.get(nm, "-"), label=nm)
            tops.append(mr[keep])
            keep = (s > 0) & np.isfinite(cs)
            bot.semilogx(s[keep], cs[keep], ls=NORM_STYLES.get(nm, "-"), label=nm)
            bots.append(cs[keep])
        top.set_title(_label(tr), fontsize=10)
    for i in range(n):
        top, bot = axes[0][i], axes[1][i]
        fit_ylim(top, tops, 1.05)
        fit_ylim(bot, bots, 1.01)
        for ax in (top, bot):
            ax.grid(True, alpha=0.3)
            ax.axhline(1.0, color="grey", lw=0.7, ls=":")
        bot.set_xlabel("step $k$")
        top.axhline(0.0, color="grey", lw=0.5)
    axes[0][0].set_ylabel("margin in norm $N$ / max margin in $N$")
    axes[1][0].set_ylabel(r"$\cos(W_k - W^*, W^N)$")
    axes[0][0].legend(fontsize=8, title="norm N")
    suptitle(fig, title)
    return _save(fig, path)


def plot_regpath(rp, path: str, *, title: str | None = None) -> str:
    """Theorem 1 along the regularisation path: excess loss, both cosines with W^mm, and the
    distance of :math:`P_F(\\hat W_B)` to W*, against the budget B."""
    fig, (a, c, e) = subplots(1, 3, figsize=(12, 3.8))
    B = rp.budgets
    y = rp["excess_loss"]
    keep = np.isfinite(y) & (y > 0)
    a.loglog(B[keep], y[keep], color="C0")
    a.set_title(r"$\mathrm{CE}(\hat W_B) - \mathcal{H}$")
    c.semilogx(B, rp["cos_mm"], color="C0", label=r"$\cos(\hat W_B, W^{\mathrm{mm}})$")
    c.semilogx(B, rp["cos_mm_centered"], color="C0", ls="--", label=r"$\cos(\hat W_B - W^*, W^{\mathrm{mm}})$")
    c.axhline(0.99, color="grey", lw=0.7, ls=":")
    c.set_ylim(min(0.0, c.get_ylim()[0]), 1.02)
    c.legend(fontsize=8)
    c.set_title(r"alignment with $W^{\mathrm{mm}}$")
    y = rp["rel_dist_F"]
    keep = np.isfinite(y) & (y > 0)
    e.loglog(B[keep], y[keep], color="C0")
    e.set_title(r"$\|P_F(\hat W_B) - W^*\| \,/\, \|W^*\|$")
    for ax in (a, c, e):
        ax.set_xlabel(r"budget $B = \|\hat W_B\|_F$")
        ax.grid(True, alpha=0.3)
    suptitle(fig, title)
    return _save(fig, path)


def plot_checks(checks: Sequence, path: str, *, title: str | None = None,
                labels: Sequence[str] | None = None) -> str:
    """The convergence checks of :mod:`ntpcert.dynamics.checks`, decade by decade, for one or more runs.

    Six panels: (a) :math:`\\|P_FW_k - W^*\\|/\\|W^*\\|`; (b) the decade increment's relative residual
    :math:`\\|D_k - \\ln 10\\,W^{mm}\\|/\\|\\ln10\\,W^{mm}\\|` (solid) and :math:`1-\\cos(D_k, W^{mm})`
    (dashed), against the decade's last step; (c) :math:`\\|D_k\\|/(\\ln 10\\|W^{mm}\\|)`;
    (d) :math:`1-\\cos(W_k, \\hat W(\\|W_k\\|))`; (e) the margin ratio in each run's own norm; (f) the
    verdicts. Dotted grey lines are the verdicts' thresholds.
    """
    from ntpcert.dynamics.checks import thresholds

    th = thresholds()
    names = list(labels) if labels is not None else [c.optimizer for c in checks]
    fig, axes = subplots(2, 3, figsize=(15, 8.2))
    (a, b, c), (d, e, f) = axes
    for i, (chk, lab) in enumerate(zip(checks, names)):
        col = COLORS.get(chk.optimizer, f"C{i % 10}")
        if len(set(c_.optimizer for c_ in checks)) < len(checks):
            col = f"C{i % 10}"
        s = chk.steps.astype(float)
        x, y = _positive(s, chk.rel_dist_F)
        a.loglog(x, y, "o-", color=col, label=lab)
        ends = s[1:]
        x, y = _positive(ends, chk.increment_residual)
        b.loglog(x, y, "o-", color=col, label=f"{lab}: residual")
        x, y = _positive(ends, chk.increment_one_minus_cos)
        b.loglog(x, y, "s--", color=col, alpha=0.7, label=f"{lab}: " + r"$1 - \cos(D_k, W^{\mathrm{mm}})$")
        keep = np.isfinite(chk.increment_ratio)
        c.semilogx(ends[keep], chk.increment_ratio[keep], "o-", color=col, label=lab)
        x, y = _positive(s, 1.0 - chk.path_cosine)
        d.loglog(x, y, "o-", color=col, label=lab)
        keep = (s > 0) & np.isfinite(chk.own_margin_ratio)
        e.semilogx(s[keep], chk.own_margin_ratio[keep], "o-", color=col, label=f"{lab} ({chk.own_norm})")
    a.axhline(th["F_distance_max"], color="grey", lw=0.8, ls=":")
    a.set_title(r"(a) $F$-convergence $\|P_F W_k - W^*\| \,/\, \|W^*\|$")
    b.axhline(th["decade_residual_max"], color="grey", lw=0.8, ls=":")
    b.set_title("(b) decade increment " + r"$D_k = P_\perp W_{10k} - P_\perp W_k$:" + "\n"
                + r"$\|D_k - \ln 10\, W^{\mathrm{mm}}\| \,/\, \|\ln 10\, W^{\mathrm{mm}}\|$ and $1 - \cos$", fontsize=10)
    c.axhline(1.0, color="grey", lw=0.8, ls=":")
    c.set_title(r"(c) $\|D_k\| \,/\, (\ln 10\, \|W^{\mathrm{mm}}\|)$")
    d.axhline(1.0 - th["path_cosine_min"], color="grey", lw=0.8, ls=":")
    d.set_title(r"(d) $1 - \cos(W_k, \hat W(\|W_k\|))$, $\hat W$ the regularisation path", fontsize=10)
    e.axhline(th["own_norm_ratio_min"], color="grey", lw=0.8, ls=":")
    e.axhline(0.0, color="grey", lw=0.5)
    e.set_title("(e) margin ratio in the run's own norm")
    fit_ylim(e, [ch.own_margin_ratio[ch.steps > 0] for ch in checks], 1.05)
    for ax in (a, d, e):
        ax.set_xlabel("step $k$")
    for ax in (b, c):
        ax.set_xlabel("decade end $10k$")
    for ax in (a, b, c, d, e):
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    f.axis("off")
    words = {True: "passes", False: "fails", None: "undetermined"}
    rows = [[lab] + [words[chk.verdicts.get(v)] for v in ("decade_increment", "F_convergence", "path_cosine",
                                                           "own_norm_margin")]
            for chk, lab in zip(checks, names)]
    table = f.table(cellText=rows, colLabels=["run", "decade\nincrement", "F-conv.", "path\ncosine", "own-norm\nmargin"],
                    loc="upper center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1.0, 2.0)
    for (r, _), cell in table.get_celld().items():
        txt = cell.get_text().get_text()
        if r > 0 and txt in ("passes", "fails"):
            cell.set_facecolor("#d8f0d8" if txt == "passes" else "#f6d6d6")
    f.text(0.5, 0.12, f"thresholds: last residual ≤ {th['decade_residual_max']:g} after "
           f"{th['decade_trend_count']} falling decades;\nF-distance ≤ {th['F_distance_max']:g}; "
           f"path cosine ≥ {th['path_cosine_min']:g}; own-norm ratio ≥ {th['own_norm_ratio_min']:g}\n"
           "(set for 10⁶ GD steps at the default step on paper)", ha="center", va="center", fontsize=8,
           transform=f.transAxes)
    f.set_title("(f) verdicts at the last decade")
    suptitle(fig, title)
    return _save(fig, path)


__all__ = ["fit_ylim", "suptitle", "plot_checks", "plot_comparison", "plot_norm_alignment", "plot_regpath", "plot_trajectory"]
