"""``ntpcert sweep-plot STORE --out FIG.png``: phase diagrams from a sweep store.

Yes/no quantities (``separable``, ``reachable``, ``compatible``) are drawn as the fraction of instances
for which they hold, with 95% Wilson intervals; numeric ones (``margin``, ``w_mm_norm``, ...) as
medians with interquartile ranges; one curve per group (``--by k``) against ``--x`` (default d/m), or
a heatmap over (x, group).
"""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import emit_json, force_option, json_option, out_file_option

#: The figure formats ``--out`` may name.
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="draw phase diagrams (probability of separability / of reaching H vs d/m and k) from a sweep store",
        description="Draw phase diagrams from the SQLite store of `ntpcert sweep`.",
    )
    p.add_argument("store", metavar="STORE", help="the SQLite store written by `ntpcert sweep`")
    out_file_option(p, "figure file (.png, .pdf or .svg)", required=True)
    p.add_argument("--quantity", action="append", default=None, metavar="Q",
                   help="a quantity to draw, repeatable (default: separable and reachable)")
    p.add_argument("--by", default="k", metavar="FIELDS", help="comma-separated grouping fields (default k)")
    p.add_argument("--x", default="d_over_m", metavar="FIELD", help="x axis (default d_over_m)")
    p.add_argument("--kind", choices=["curves", "heatmap"], default="curves")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="keep only rows with FIELD equal to VALUE, repeatable (e.g. --where m=40)")
    p.add_argument("--title", default=None)
    json_option(p, "print the cells drawn as one JSON object")
    force_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import InputError
    from ntpcert.experiments.sweep import ResultStore
    from ntpcert.experiments.sweep.plot import filter_rows, phase_diagram
    from ntpcert.util.files import check_output_file

    if not args.out.lower().endswith(FIGURE_SUFFIXES):
        raise InputError(f"--out: value {args.out!r} does not end in {', '.join(FIGURE_SUFFIXES)}")
    check_output_file(args.out, "--out", overwrite=args.force, inputs=[args.store])
    with ResultStore(args.store) as db:
        rows = filter_rows(db.table(), args.where, field="--where")
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    diagram = phase_diagram(rows, args.out, quantities=args.quantity, by=by, x=args.x, kind=args.kind, title=args.title)
    if args.json:
        emit_json(diagram.to_json())
    else:
        print(f"wrote {args.out}: {', '.join(diagram.cells)} vs {args.x} by {','.join(by)} from {diagram.rows} rows")
        for q, cr in diagram.crossings.items():
            where = "; ".join(f"{','.join(f'{b}={v}' for b, v in zip(by, g))}: "
                              f"{'never' if x is None else f'{x:.3g}'}" for g, x in cr.items())
            print(f"  {q} first reaches 1/2 at {args.x} = {where}")
    return 0
