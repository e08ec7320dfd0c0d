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
    sched = "" if hp.get("schedule", "constant") == "constant" else "/√t"
    return f"{traj.optimizer} (η={lr:g}{sched})" if lr is not None else traj.optimizer


def _color(traj, i: int) -> str:
    return COLORS.get(traj.optimizer, f"C{i % 10}")


def _positive(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop step 0 (log axis) and non-finite or non-positive values (log y)."""
    keep = (steps > 0) & np.isfinite(values) & (values > 0)
    return steps[keep], values[keep]


def _save(fig, path: str) -> str:
    return save_figure(fig, path)


def _panels(axes, trajs: Sequence, entropy_note: bool = True) -> None:
    (a, b), (c, e) = axes
    for i, tr in enumerate(trajs):
        col, lab = _color(tr, i), _label(tr)
        s = tr.steps
        x, y = _positive(s, tr["excess_loss"])
        a.loglog(x, y, color=col, label=lab)
        x, y = _positive(s, tr["norm"])
        b.loglog(x, y, color=col, label=lab)
        keep = (s > 0) & np.isfinite(tr["cos_mm"])
        c.semilogx(s[keep], tr["cos_mm"][keep], color=col, label=f"{lab}: cos(W, W^mm)")
        keep = (s > 0) & np.isfinite(tr["cos_mm_centered"])
        c.semilogx(s[keep], tr["cos_mm_centered"][keep], color=col, ls="--", label=f"{lab}: cos(W−W*, W^mm)")
        x, y = _positive(s, tr["rel_dist_F"])
        e.loglog(x, y, color=col, label=lab)
    a.set_title("(a) CE(W_k) − ℋ")
    b.set_title("(b) ‖W_k‖_F")
    c.set_title("(c) alignment with W^mm (solid: W_k, dashed: W_k − W*)")
    c.axhline(0.99, color="grey", lw=0.7, ls=":")
    c.set_ylim(min(0.0, c.get_ylim()[0]), 1.02)
    e.set_title("(d) ‖P_F(W_k) − W*‖ / ‖W*‖")
    e.axhline(1e-2, color="grey", lw=0.7, ls=":")
    for ax in (a, b, c, e):
        ax.set_xlabel("step k")
        ax.grid(True, which="major", alpha=0.3)
    a.legend(fontsize=8)


def plot_trajectory(traj, path: str, *, title: str | None = None) -> str:
    """Four panels for one trajectory: excess loss, norm, both cosines with W^mm, distance to W* in F."""
    return plot_comparison([traj], path, title=title)


def plot_comparison(trajs: Sequence, path: str, *, title: str | None = None) -> str:
    """The four panels of :func:`plot_trajectory` with several optimisers overlaid."""
    fig, axes = subplots(2, 2, figsize=(10, 7))
    _panels(axes, trajs)
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def plot_norm_alignment(trajs: Sequence, path: str, *, title: str | None = None) -> str:
    """For each trajectory: the normalised margin relative to the best possible in each norm
    (``margin_ratio`` and ``margin_ratio_N``, top) and :math:`\\cos(W_k - W^*, W^N)` (bottom)."""
    n = len(trajs)
    fig, axes = subplots(2, n, figsize=(3.6 * n + 0.6, 6.4), squeeze=False, sharey="row")
    lows_top, lows_bot = [0.0], [0.5]
    for i, tr in enumerate(trajs):
        top, bot = axes[0][i], axes[1][i]
        s = tr.steps
        norms = ["fro"] + [k[len("margin_ratio_"):] for k in tr.metrics if k.startswith("margin_ratio_")]
        for nm in norms:
            mr = tr["margin_ratio"] if nm == "fro" else tr[f"margin_ratio_{nm}"]
            cs = tr["cos_mm_centered"] if nm == "fro" else tr[f"cos_{nm}_centered"]
            keep = (s > 0) & np.isfinite(mr)
            top.semilogx(s[keep], mr[keep], ls=NORM_STYLES.get(nm, "-"), label=nm)
            late = s >= max(1, int(s[-1]) // 100)  # the y range follows the last two decades
            if np.any(late & np.isfinite(mr)):
                lows_top.append(float(np.nanmin(mr[late])))
            keep = (s > 0) & np.isfinite(cs)
            bot.semilogx(s[keep], cs[keep], ls=NORM_STYLES.get(nm, "-"), label=nm)
            if np.any(late & np.isfinite(cs)):
                lows_bot.append(float(np.nanmin(cs[late])))
        top.set_title(_label(tr), fontsize=10)
    for i in range(n):
        top, bot = axes[0][i], axes[1][i]
        top.set_ylim(max(-1.0, min(lows_top) - 0.05), 1.05)
        bot.set_ylim(max(-1.0, min(lows_bot) - 0.02), 1.01)
        for ax in (top, bot):
            ax.grid(True, alpha=0.3)
            ax.axhline(1.0, color="grey", lw=0.7, ls=":")
        bot.set_xlabel("step k")
        top.axhline(0.0, color="grey", lw=0.5)
    axes[0][0].set_ylabel("margin in norm N / max margin in N")
    axes[1][0].set_ylabel("cos(W_k − W*, W^N)")
    axes[0][0].legend(fontsize=8, title="norm N")
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def plot_regpath(rp, path: str, *, title: str | None = None) -> str:
    """Theorem 1 along the regularisation path: excess loss, both cosines with W^mm, and the
    distance of :math:`P_F(\\hat W_B)` to W*, against the budget B."""
    fig, (a, c, e) = subplots(1, 3, figsize=(12, 3.8))
    B = rp.budgets
    y = rp["excess_loss"]
    keep = np.isfinite(y) & (y > 0)
    a.loglog(B[keep], y[keep], color="C0")
    a.set_title("CE(Ŵ_B) − ℋ")
    c.semilogx(B, rp["cos_mm"], color="C0", label="cos(Ŵ_B, W^mm)")
    c.semilogx(B, rp["cos_mm_centered"], color="C0", ls="--", label="cos(Ŵ_B − W*, W^mm)")
    c.axhline(0.99, color="grey", lw=0.7, ls=":")
    c.set_ylim(min(0.0, c.get_ylim()[0]), 1.02)
    c.legend(fontsize=8)
    c.set_title("alignment with W^mm")
    y = rp["rel_dist_F"]
    keep = np.isfinite(y) & (y > 0)
    e.loglog(B[keep], y[keep], color="C0")
    e.set_title("‖P_F(Ŵ_B) − W*‖ / ‖W*‖")
    for ax in (a, c, e):
        ax.set_xlabel("budget B = ‖Ŵ_B‖_F")
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
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
        b.loglog(x, y, "s--", color=col, alpha=0.7, label=f"{lab}: 1 − cos(D, W^mm)")
        keep = np.isfinite(chk.increment_ratio)
        c.semilogx(ends[keep], chk.increment_ratio[keep], "o-", color=col, label=lab)
        x, y = _positive(s, 1.0 - chk.path_cosine)
        d.loglog(x, y, "o-", color=col, label=lab)
        keep = (s > 0) & np.isfinite(chk.own_margin_ratio)
        e.semilogx(s[keep], chk.own_margin_ratio[keep], "o-", color=col, label=f"{lab} ({chk.own_norm})")
    a.axhline(th["F_distance_max"], color="grey", lw=0.8, ls=":")
    a.set_title("(a) F-convergence ‖P_F W_k − W*‖ / ‖W*‖")
    b.axhline(th["decade_residual_max"], color="grey", lw=0.8, ls=":")
    b.set_title("(b) decade increment D_k = P_⊥W_10k − P_⊥W_k:\n‖D_k − ln10·W^mm‖/‖ln10·W^mm‖ and 1 − cos", fontsize=10)
    c.axhline(1.0, color="grey", lw=0.8, ls=":")
    c.set_title("(c) ‖D_k‖ / (ln10 ‖W^mm‖)")
    d.axhline(1.0 - th["path_cosine_min"], color="grey", lw=0.8, ls=":")
    d.set_title("(d) 1 − cos(W_k, Ŵ(‖W_k‖)), Ŵ the regularisation path", fontsize=10)
    e.axhline(th["own_norm_ratio_min"], color="grey", lw=0.8, ls=":")
    e.axhline(0.0, color="grey", lw=0.5)
    e.set_title("(e) margin ratio in the run's own norm")
    tails = [ch.own_margin_ratio[ch.own_margin_ratio.size // 2:] for ch in checks]  # the y range follows the later half
    lo = [float(np.nanmin(t)) for t in tails if np.any(np.isfinite(t))]
    if lo:
        e.set_ylim(max(-1.0, min(lo + [0.0]) - 0.1), 1.05)
    for ax in (a, d, e):
        ax.set_xlabel("step k")
    for ax in (b, c):
        ax.set_xlabel("decade end 10k")
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
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)


__all__ = ["plot_checks", "plot_comparison", "plot_norm_alignment", "plot_regpath", "plot_trajectory"]
