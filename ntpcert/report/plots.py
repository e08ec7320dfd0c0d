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


__all__ = ["plot_comparison", "plot_norm_alignment", "plot_regpath", "plot_trajectory"]
