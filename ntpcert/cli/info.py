"""``ntpcert info DATA``: sizes, supports and entropy of a dataset."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import EXIT_OK, data_options, emit_json, emit_lines, json_option, load_data


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(name, help="sizes, supports and entropy of a dataset",
                              description="Print m, d, V, n, the support sizes and the entropy lower bound of DATA.")
    data_options(p)
    json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.report.text import fmt

    inst = load_data(args)
    info = inst.describe(fingerprint=True)
    if args.json:
        emit_json(info)
    else:
        emit_lines([f"{key:>20}: {fmt(val)}" for key, val in info.items()])
    return EXIT_OK
