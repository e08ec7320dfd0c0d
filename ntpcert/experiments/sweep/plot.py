r"""Phase diagrams from a sweep store: how often a verdict holds as a function of d/m, per support size.

For a yes/no quantity (``compatible``, ``separable``, ``reachable``) a cell of the diagram is the set of
rows with the same group (e.g. the same k) and the same x (e.g. the same d/m); its value is the
fraction :math:`\hat p = n_{yes}/(n_{yes} + n_{no})` of decided rows that say yes, drawn with the 95%
Wilson interval. Undetermined verdicts and failed rows are counted but left out of :math:`\hat p`.
For a numeric quantity (``margin``, ``w_mm_norm``, ``gd_cos_mm``, ...) the cell's value is the median,
drawn with the interquartile range.

Only this module draws; it computes nothing but these summaries. Figures are rendered with
matplotlib's Agg canvas (no display needed) and written atomically.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError

__all__ = ["PhaseCell", "PhaseDiagram", "phase_table", "crossings", "filter_rows", "phase_diagram", "plot_phase",
           "BOOLEAN_QUANTITIES", "AXES"]

BOOLEAN_QUANTITIES = ("compatible", "separable", "reachable", "svm_optimal", "geo_proxy_optimal")
#: Fields a diagram can use as x or as a grouping.
AXES = ("d_over_m", "d", "m", "V", "k", "embedding", "seed")
#: z-value of the two-sided 95% Wilson interval.
_Z95 = 1.959963984540054
_MARKERS = ("o", "s", "^", "D")
_LINESTYLES = ("-", "--", ":", "-.")
_LABELS = {
    "compatible": "P(NTP-compatible)",
    "separable": "P(NTP-separable)",
    "reachable": r"P(CE reaches $\mathcal{H}$)",
    "geo_proxy_optimal": r"P(centred support is $L^{\mathrm{mm}}$)",
    "geo_rank": r"median rank of $L^{\mathrm{mm}}$",
    "d_over_m": "d / m",
}


@dataclass(frozen=True)
class PhaseCell:
    """One cell of a phase diagram.

    Attributes
    ----------
    group : tuple
        Values of the grouping fields.
    x : float
    n : int
        Rows in the cell.
    n_yes, n_no, n_undetermined : int
        For yes/no quantities (0 otherwise); rows with an error or no value count as undetermined.
    value : float
        :math:`\\hat p` for yes/no quantities, the median for numeric ones (NaN when nothing decided).
    low, high : float
        95% Wilson interval, or the interquartile range.
    """

    group: tuple
    x: float
    n: int
    n_yes: int
    n_no: int
    n_undetermined: int
    value: float
    low: float
    high: float

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["group"] = list(self.group)
        for key in ("value", "low", "high"):
            out[key] = None if math.isnan(out[key]) else out[key]
        return out


def _wilson(yes: int, n: int) -> tuple[float, float, float]:
    if n == 0:
        return math.nan, math.nan, math.nan
    p = yes / n
    z2 = _Z95 * _Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def phase_table(rows: Sequence[dict], quantity: str, *, by: Sequence[str] = ("k",), x: str = "d_over_m") -> list[PhaseCell]:
    """Summarise ``rows`` (from :meth:`ResultStore.table`) into cells, sorted by (group, x).

    Raises :class:`InputError` naming ``--quantity``, ``--by`` or ``--x`` when a field is missing.
    """
    if not rows:
        raise InputError("STORE: no finished rows to plot")
    if x not in AXES:
        raise InputError(f"--x: value {x!r} is not one of {', '.join(AXES)}")
    for b in by:
        if b not in AXES:
            raise InputError(f"--by: value {b!r} is not one of {', '.join(AXES)}")
    if not any(quantity in r for r in rows):
        known = sorted({k for r in rows for k, v in r.items() if isinstance(v, (bool, int, float)) or v is None}
                       - set(AXES) - {"error"})
        raise InputError(f"--quantity: value {quantity!r} is not in the store (known: {', '.join(known)})")
    cells: dict[tuple, list] = defaultdict(list)
    for r in rows:
        cells[(tuple(r[b] for b in by), r[x])].append(None if r.get("error") else r.get(quantity))
    boolean = quantity in BOOLEAN_QUANTITIES
    out = []
    for (group, xv), vals in sorted(cells.items()):
        if boolean:
            yes = sum(v is True for v in vals)
            no = sum(v is False for v in vals)
            und = len(vals) - yes - no
            p, lo, hi = _wilson(yes, yes + no)
            out.append(PhaseCell(group, xv, len(vals), yes, no, und, p, lo, hi))
        else:
            num = np.array([v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)], dtype=float)
            if num.size:
                q1, med, q3 = (float(v) for v in np.percentile(num, [25, 50, 75]))
            else:
                q1 = med = q3 = math.nan
            out.append(PhaseCell(group, xv, len(vals), 0, 0, len(vals) - num.size, med, q1, q3))
    return out


def crossings(cells: Sequence[PhaseCell], level: float = 0.5) -> dict[tuple, float | None]:
    r"""Per group, the first x at which the cell value reaches ``level``, interpolated linearly between
    the two cells around it (the empirical threshold, e.g. where :math:`\hat p` = 1/2); None when the
    value never reaches ``level``, and the first x when it starts at or above it."""
    out: dict[tuple, float | None] = {}
    for g in sorted({c.group for c in cells}):
        pts = [(c.x, c.value) for c in cells if c.group == g and not math.isnan(c.value)]
        out[g] = None
        for i, (xv, yv) in enumerate(pts):
            if yv >= level:
                if i == 0:
                    out[g] = float(xv)
                else:
                    x0, y0 = pts[i - 1]
                    out[g] = float(x0 + (level - y0) * (xv - x0) / (yv - y0))
                break
    return out


def _group_label(by: Sequence[str], group: tuple) -> str:
    return ", ".join(f"{b}={g}" for b, g in zip(by, group))


def _save_atomic(fig: Any, out: str) -> None:
    from ntpcert.report.plots import save_figure

    save_figure(fig, out, dpi=150, tight="bbox")


def plot_phase(
    rows: Sequence[dict],
    out: str,
    *,
    quantities: Sequence[str] = ("separable", "reachable"),
    by: Sequence[str] = ("k",),
    x: str = "d_over_m",
    kind: str = "curves",
    title: str | None = None,
) -> dict[str, list[PhaseCell]]:
    """Draw one panel per quantity and write the figure to ``out`` (.png, .pdf or .svg).

    Parameters
    ----------
    rows : sequence of dict
        :meth:`ResultStore.table` rows.
    out : str
    quantities : sequence of str
        Fields to draw; yes/no fields as probabilities, numeric ones as medians.
    by : sequence of str
        Grouping fields: one curve per group (``kind="curves"``), or the y axis (``kind="heatmap"``,
        one field).
    x : str
        The x axis (default d/m).
    kind : {"curves", "heatmap"}
    title : str, optional

    Returns
    -------
    dict
        The cells drawn, per quantity.
    """
    if kind not in ("curves", "heatmap"):
        raise InputError(f"--kind: value {kind!r} is not curves or heatmap")
    if kind == "heatmap" and len(by) != 1:
        raise InputError(f"--by: value {','.join(by)!r} must be one field for a heatmap")
    if not quantities:
        raise InputError("--quantity: value [] is empty")
    tables = {q: phase_table(rows, q, by=by, x=x) for q in quantities}
    from matplotlib.colors import to_rgba
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * len(quantities), 4.0), layout="constrained")
    axes = fig.subplots(1, len(quantities), squeeze=False)[0]
    for ax, (q, cells) in zip(axes, tables.items()):
        boolean = q in BOOLEAN_QUANTITIES
        if kind == "curves":
            groups = sorted({c.group for c in cells})
            # colour by the first grouping field, line style and marker by the others
            firsts = sorted({g[:1] for g in groups})
            rests = sorted({g[1:] for g in groups})
            for g in groups:
                cs = [c for c in cells if c.group == g]
                xs = np.array([c.x for c in cs], dtype=float)
                ys = np.array([c.value for c in cs], dtype=float)
                color = _color(firsts.index(g[:1]), len(firsts))
                style = rests.index(g[1:])
                err = np.array([[c.value - c.low for c in cs], [c.high - c.value for c in cs]], dtype=float)
                err = np.clip(np.nan_to_num(err), 0.0, None)  # rounding at p = 0 or 1; no bar without data
                # curves at the same x would hide each other's bars: each is shifted by at most 0.4% of the x range
                dx = _dodge(groups.index(g), len(groups)) * (np.ptp(xs) if xs.size > 1 else 1.0)
                ax.errorbar(xs + dx, ys, yerr=err, marker=_MARKERS[style % len(_MARKERS)], ms=4, lw=1.6,
                            ls=_LINESTYLES[style % len(_LINESTYLES)], elinewidth=1.3, capsize=3, capthick=1.1,
                            color=color, ecolor=to_rgba(color, 0.6), label=_group_label(by, g))
            if boolean:
                ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=8, frameon=False)
            ax.grid(alpha=0.3)
            ax.set_ylabel(_LABELS.get(q, f"median {q}"))
        else:
            ys_ = sorted({c.group[0] for c in cells})
            xs_ = sorted({c.x for c in cells})
            grid = np.full((len(ys_), len(xs_)), np.nan)
            for c in cells:
                grid[ys_.index(c.group[0]), xs_.index(c.x)] = c.value
            im = ax.pcolormesh(_edges(xs_), _edges(list(range(len(ys_)))), grid, cmap="viridis",
                               vmin=0 if boolean else None, vmax=1 if boolean else None, shading="flat")
            ax.set_yticks(range(len(ys_)), [str(v) for v in ys_])
            ax.set_ylabel(by[0])
            fig.colorbar(im, ax=ax, label=_LABELS.get(q, f"median {q}"))
        ax.set_xlabel(_LABELS.get(x, x))
        ax.set_title(_LABELS.get(q, q), fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    _save_atomic(fig, out)
    return tables


#: A qualitative palette readable on white (matplotlib's tab10 without its grey, olive and cyan).
PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink")


def _color(i: int, n: int):
    """The colour of the i-th of n groups: distinct hues, none pale on white."""
    return PALETTE[i % len(PALETTE)]


def _dodge(i: int, n: int) -> float:
    """Horizontal offset of the i-th of n curves sharing a colour, as a fraction of the x range."""
    return 0.0 if n <= 1 else 0.008 * (i - (n - 1) / 2) / max(1, n - 1)


def _edges(centres: Sequence[float]) -> np.ndarray:
    c = np.asarray(centres, dtype=float)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def filter_rows(rows: list[dict], where: Sequence[str], *, field: str = "where") -> list[dict]:
    """The rows whose field equals the value of every ``FIELD=VALUE`` in ``where`` (compared as text)."""
    for cond in where:
        name, sep, value = cond.partition("=")
        if not sep or not rows or name not in rows[0]:
            raise InputError(f"{field}: value {cond!r} is not FIELD=VALUE with a field of the store")
        rows = [r for r in rows if str(r[name]) == value]
        if not rows:
            raise InputError(f"{field}: value {cond!r} keeps no rows")
    return rows


@dataclass(frozen=True)
class PhaseDiagram:
    """What :func:`phase_diagram` drew: the cells per quantity and where each group's curve first reaches 1/2.

    Attributes
    ----------
    out : str
    rows : int
        Rows of the store drawn (after the filters).
    cells : dict of str to list of PhaseCell
    crossings : dict of str to dict of tuple to float or None
        Per quantity, per group: the first x where the value reaches 1/2 (:func:`crossings`).
    x : str
    by : tuple of str
    """

    out: str
    rows: int
    cells: dict
    crossings: dict
    x: str
    by: tuple

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "rows": self.rows,
                "cells": {q: [c.to_json() for c in cells] for q, cells in self.cells.items()},
                "crossings": {q: [{"group": list(g), "x": x} for g, x in cr.items()] for q, cr in self.crossings.items()}}


def phase_diagram(rows: list[dict], out: str, *, where: Sequence[str] = (), quantities: Sequence[str] | None = None,
                  by: Sequence[str] = ("k",), x: str = "d_over_m", kind: str = "curves",
                  title: str | None = None) -> PhaseDiagram:
    """:func:`filter_rows`, then :func:`plot_phase` (default quantities ``separable`` and ``reachable``),
    with the 1/2 crossings of each group."""
    kept = filter_rows(rows, where)
    tables = plot_phase(kept, out, quantities=list(quantities or ("separable", "reachable")), by=by, x=x, kind=kind,
                        title=title)
    return PhaseDiagram(out, len(kept), tables, {q: crossings(cells) for q, cells in tables.items()}, x, tuple(by))

