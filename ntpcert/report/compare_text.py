"""Text and CSV renderings of :mod:`ntpcert.dynamics.compare` results (no computation)."""

from __future__ import annotations

from typing import Any, Sequence

from ntpcert.dynamics.compare import BIN_METRICS, COMPARE_METRICS


def comparison_lines(cmp: Any) -> list[str]:
    """The headline numbers, the bracket, then one line per frequency bin."""
    v = cmp.values
    b = cmp.bracket
    lines = [f"  {k:>22}: {v[k]:.6g}" for k in COMPARE_METRICS]
    lines += [f"  {k:>22}: {v[k]:.6g}" for k in ("L_star", "loss_over_L_star") if k in v]  # data not separable
    if "excess_upper" in b:
        lines.append(f"  {'bracket on L* - H':>22}: [{b['excess_lower']:.6g}, {b['excess_upper']:.6g}] (float)")
    else:
        lines.append(f"  {'bracket on L* - H':>22}: {b.get('skipped', 'not computed')}")
    lines.append("  per token-frequency bin: " + ", ".join(("frequency", "tokens") + BIN_METRICS))
    for row in cmp.bins:
        lines.append(f"    {row['label']:>11} {row['tokens']:>6}  " + "  ".join(f"{row[k]:10.4g}" for k in BIN_METRICS))
    return lines


def series_csv(series: Sequence[tuple[int, Any]]) -> str:
    """One row per snapshot: t and :data:`COMPARE_METRICS`."""
    rows = ["t," + ",".join(COMPARE_METRICS)]
    rows += [f"{t}," + ",".join(repr(float(c.values[k])) for k in COMPARE_METRICS) for t, c in series]
    return "\n".join(rows) + "\n"


def series_lines(series: Sequence[tuple[int, Any]]) -> list[str]:
    keys = ("excess_loss", "rel_dist_F", "cos_perp_mm", "norm_matched_distance", "norm")
    out = ["  " + f"{'t':>8} " + " ".join(f"{k:>22}" for k in keys)]
    out += ["  " + f"{t:>8} " + " ".join(f"{c.values[k]:22.6g}" for k in keys) for t, c in series]
    return out


def report_lines(rep: Any) -> list[str]:
    """A :class:`~ntpcert.dynamics.compare.DecoderReport`: the instance's sizes and verdicts, then the
    comparison or the series."""
    inst, lim, merge = rep.instance, rep.limits, rep.merge
    if merge is None:
        head = (f"{inst.name}: m={inst.m}, d={inst.d}, V={inst.V}; compatible {lim.compatible}, "
                f"separable {lim.separable}")
    else:
        head = (f"{inst.name}: m={inst.m}, d={inst.d}, V={merge.V} ({inst.V} after merging the {merge.merged} "
                f"unseen tokens); compatible {lim.compatible}, separable {rep.separable}")
    if rep.comparison is not None:
        body = comparison_lines(rep.comparison) + [f"  {k}: {v}" for k, v in rep.comparison.notes.items()]
    else:
        body = series_lines(rep.series)
    if getattr(rep, "nc", None) is not None:
        body += collapse_lines(rep.nc)
    return [head] + body


def collapse_lines(nc: Any) -> list[str]:
    """A :class:`~ntpcert.geometry.collapse.CollapseReport`: the headline NC numbers of the decoder beside W*'s,
    W^mm's and the UFM's, then the head's ranks against the limits'."""
    f, c = nc.features, nc.classes
    ufm = nc.ufm or {}
    cols = [("decoder", nc.decoder), ("W*", nc.W_star), ("W^mm", nc.W_mm), ("UFM", ufm.get("decoder"))]
    lines = [f"  neural collapse over {c['count']} token classes ({c['excluded']} tokens without samples "
             "left out):",
             f"    nc1 CDNV {f['cdnv']:.4g} over {f['cdnv_pairs']} pairs ({f['coincident_pairs']} with coincident "
             f"means left out); Tr(S_W S_B^+)/C {f['within_ratio']:.4g}",
             f"    nc2 ETF error {f['etf_error']:.4g} (least possible in R^d: {f['etf_error_floor']:.4g}); norm CV "
             f"{f['norm_cv']:.4g}; cosines {f['interference_mean']:.4g} +- {f['interference_std']:.4g}; "
             f"log-kernel variance {f['log_kernel_var']:.4g}",
             "    " + f"{'':>28}" + "".join(f"{name:>12}" for name, _ in cols)]
    rows = (("self_duality_error", "nc3 self-duality error"), ("self_duality_error_centred", "  rows centred"),
            ("duality_cos_var", "  var cos(w_c, mu_c)"), ("w_norm_cv", "  CV of ||w_c||"),
            ("ncc_agreement", "nc4 NCC agreement"))
    for key, label in rows:
        cells = "".join(f"{'-' if v is None else format(v[key], '.4g'):>12}" for _, v in cols)
        lines.append(f"    {label:>28}" + cells)
    h = nc.head
    lim = ", ".join(f"{k} {h[k]}" for k in ("W_star_rank", "W_mm_rank", "limit_rank", "dim_F", "embedding_rank")
                    if h.get(k) is not None)
    lines.append(f"    head: rank {h['rank']} (effective {h['effective_rank']:.4g}, 99% of the energy in "
                 f"{h['rank_99']}); the limits: {lim}")
    return lines

