"""Text and CSV renderings of a checkpoint series (:mod:`ntpcert.dynamics.checkpoints`; no computation)."""

from __future__ import annotations

from typing import Any

from ntpcert.dynamics.checkpoints import CHECKPOINT_COLUMNS

#: The columns of the text report (the CSV has every one of :data:`CHECKPOINT_COLUMNS`).
TEXT_COLUMNS = (("step", "step"), ("compatible", "comp"), ("separable", "sep"), ("excess_loss", "CE-H"),
                ("rel_dist_F", "rel_dist_F"), ("cos_perp_mm", "cos_perp_mm"), ("margin_min", "margin_min"),
                ("margin_median", "margin_med"), ("margin_positive", "margin>0"), ("h_change_rel", "dH/H"),
                ("raw_W_change_rel", "dW/W"))


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n') else v
    return str(v)


def checkpoint_csv(series: Any) -> str:
    """One row per checkpoint: :data:`CHECKPOINT_COLUMNS` then ``path``; an empty cell is null (undefined:
    no W^mm, no previous checkpoint, ...)."""
    cols = CHECKPOINT_COLUMNS + ("path",)
    rows = [",".join(cols)]
    rows += [",".join(_csv_cell(r.values()[k]) for k in cols) for r in series.rows]
    return "\n".join(rows) + "\n"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}"


def checkpoint_lines(series: Any, *, name: str = "") -> list[str]:
    """The sizes, where the steps come from, one line per checkpoint and the notes."""
    n = len(series.rows)
    head = (f"{name + ': ' if name else ''}a series of {n} checkpoint{'s' * (n != 1)} on m={series.m} contexts, "
            f"d={series.d}, V={series.V}; each row against the limits of that checkpoint's own h")
    widths = [max(8, len(label)) for _, label in TEXT_COLUMNS]
    lines = [head, "  " + " ".join(f"{label:>{w}}" for (_, label), w in zip(TEXT_COLUMNS, widths))]
    for r in series.rows:
        v = r.values()
        lines.append("  " + " ".join(f"{_cell(v[k]):>{w}}" for (k, _), w in zip(TEXT_COLUMNS, widths)))
    lines += [f"  {k}: {v}" for k, v in series.notes.items()]
    return lines
