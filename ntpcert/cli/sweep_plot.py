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


def _filter(rows: list[dict], where: list[str]) -> list[dict]:
    from ntpcert.errors import InputError

    for cond in where:
        field, sep, value = cond.partition("=")
        if not sep or not rows or field not in rows[0]:
            raise InputError(f"--where: value {cond!r} is not FIELD=VALUE with a field of the store")
        rows = [r for r in rows if str(r[field]) == value]
        if not rows:
            raise InputError(f"--where: value {cond!r} keeps no rows")
    return rows


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import InputError
    from ntpcert.util.files import check_output_file
    from ntpcert.experiments.sweep import ResultStore
    from ntpcert.experiments.sweep.plot import crossings, plot_phase

    if not args.out.lower().endswith(FIGURE_SUFFIXES):
        raise InputError(f"--out: value {args.out!r} does not end in {', '.join(FIGURE_SUFFIXES)}")
    check_output_file(args.out, "--out", overwrite=args.force, inputs=[args.store])
    with ResultStore(args.store) as db:
        rows = _filter(db.table(), args.where)
    quantities = args.quantity or ["separable", "reachable"]
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    tables = plot_phase(rows, args.out, quantities=quantities, by=by, x=args.x, kind=args.kind, title=args.title)
    half = {q: crossings(cells) for q, cells in tables.items()}
    if args.json:
        emit_json({"out": args.out, "rows": len(rows),
                    "cells": {q: [c.to_json() for c in cells] for q, cells in tables.items()},
                    "crossings": {q: [{"group": list(g), "x": x} for g, x in cr.items()] for q, cr in half.items()}})
    else:
        print(f"wrote {args.out}: {', '.join(quantities)} vs {args.x} by {','.join(by)} from {len(rows)} rows")
        for q, cr in half.items():
            where = "; ".join(f"{','.join(f'{b}={v}' for b, v in zip(by, g))}: "
                              f"{'never' if x is None else f'{x:.3g}'}" for g, x in cr.items())
            print(f"  {q} first reaches 1/2 at {args.x} = {where}")
    return 0
