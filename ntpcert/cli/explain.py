"""``ntpcert explain DATA [--json] [--exact]``: when the entropy bound is out of reach, which contexts are
to blame (an irreducible non-separable set, an irreducible cycle of log-odds)."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, SEPARABILITY_SOLVERS, data_options, emit_json, emit_lines, json_option,
                                 load_data, progress_option, time_limit_option)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="explain a negative verdict: an irreducible non-separable set of contexts, a cycle of log-odds",
        description="Decide compatibility and separability, and shrink the exact witness of each negative "
        "verdict to an irreducible culprit: contexts that no linear decoder separates (each one-context "
        "deletion certified separable), and a cycle of log-odds equations no W satisfies, with its mismatch "
        "in nats; and how far the best linear decoder stays from the entropy bound (a bracket on inf_W CE(W), "
        "certified with --exact) with the contexts that carry the excess.",
    )
    data_options(p)
    json_option(p)
    p.add_argument("--exact", action="store_true",
                   help="take the verdicts from 'certify --exact' (a certificate checked by the independent checker)")
    p.add_argument("--separability-solver", choices=SEPARABILITY_SOLVERS, default=SEPARABILITY_SOLVERS[0],
                   help="what decides separability, on the whole instance and on every sub-problem of the shrinking "
                   "(default auto)")
    time_limit_option(p, "a cap in seconds on each shrinking, off by default (each has a budget of work either "
                      "way); when reached the culprit is reported not proved irreducible, naming the cap", default=None)
    progress_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.pipeline.explain import explain
    from ntpcert.report.explain import explanation_lines

    inst = load_data(args)
    limit = {} if args.time_limit is None else {"time_limit": args.time_limit}
    exp = explain(inst, separability_solver=args.separability_solver, exact=args.exact, **limit)
    if args.json:
        emit_json(exp.to_json())
    else:
        emit_lines(explanation_lines(exp))
    return EXIT_OK
