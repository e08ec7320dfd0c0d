"""``ntpcert geometry DATA [--out-dir DIR] [--json]``: the nuclear-norm NTP-SVM of the unconstrained-features model
(W and H both trained), L^mm with its certified gap, the word/context embeddings read off its SVD, the checks
of the statements about them, and figures (:mod:`ntpcert.geometry.run` computes them and owns the files)."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, data_inputs, data_options, emit_json, emit_lines, float_in, force_option,
                                 int_in, json_option, load_data, out_dir_option)
from ntpcert.geometry.run import OUTPUT_NAMES, TRAIN_STEPS


def register(subparsers: Any, name: str) -> None:
    from ntpcert.geometry.analysis import GEOMETRY_SOLVERS

    p = subparsers.add_parser(
        name, help="L^mm of the unconstrained-features model, its embeddings and figures",
        description="Solve the nuclear-norm NTP-SVM of the unconstrained-features model (W and H both trained) "
        "with a certified gap, and write L^mm, its factors W and H, the geometry checks and the figures.")
    data_options(p)
    out_dir_option(p, "write arrays, summary.json and figures here")
    p.add_argument("--solver", default="structured", choices=GEOMETRY_SOLVERS,
                   help="structured (default) or an SDP solver through cvxpy (small instances)")
    p.add_argument("--gap-tol", type=float_in(0.0, 1.0), default=None, metavar="TOL",
                   help="structured solver: stop at this certified relative gap (default 1e-10, or 1e-6 when "
                        "V times the number of distinct supports exceeds 10,000)")
    json_option(p, "print the summary as one JSON object")
    p.add_argument("--train", action="store_true",
                   help="also train W and H jointly (GD, NGD, Adam) and write training.png and training.json")
    p.add_argument("--steps", type=int_in(1, 1_000_000), default=TRAIN_STEPS,
                   help=f"training steps (default {TRAIN_STEPS})")
    p.add_argument("--weight-decay", type=float_in(0.0, low_open=False), default=0.0, metavar="L0",
                   help="vanishing weight decay L0/(k+1) (default 0: none)")
    p.add_argument("--enclosure-out", metavar="FILE", default=None,
                   help="write an exact rational enclosure lower <= ||L^mm||_* <= upper of L^mm's value "
                        "(ntpcert-nuclear-enclosure; ntpcert verify and tools/ntpcert_check.py check it); "
                        "solve with a small --gap-tol (e.g. 1e-15) for a narrow one")
    force_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.geometry.run import run_geometry
    from ntpcert.report.geometry_text import geometry_lines
    from ntpcert.util.files import atomic_write_text, check_output_dir, check_output_file, write_directory

    if args.enclosure_out is not None:  # before the work
        check_output_file(args.enclosure_out, "--enclosure-out", overwrite=args.force, inputs=data_inputs(args))
    out = None
    if args.out_dir is not None:
        out = check_output_dir(args.out_dir, "--out-dir", names=OUTPUT_NAMES, overwrite=args.force,
                               inputs=data_inputs(args))
    res = run_geometry(load_data(args), solver=args.solver, gap_tol=args.gap_tol, train=args.train, steps=args.steps,
                       weight_decay=args.weight_decay)
    summary = res.to_json()
    enclosure = None
    if args.enclosure_out is not None:
        import json

        from ntpcert.geometry.enclosure import nuclear_enclosure

        rep = res.report
        enclosure = nuclear_enclosure(rep.pattern, rep.solution.L, rep.solution.dual)
        atomic_write_text(args.enclosure_out, json.dumps(enclosure.to_json()) + "\n")
        summary["enclosure"] = {"file": args.enclosure_out, "lower": float(enclosure.lower),
                                "upper": float(enclosure.upper), "relative_width": float(enclosure.relative_width)}
    files = write_directory(out, res.writers(summary), "--out-dir") if out is not None else None
    if args.json:
        emit_json({**res.to_json(out=out), **({"enclosure": summary["enclosure"]} if enclosure is not None else {})})
    else:
        extra = [] if enclosure is None else [
            f"L^mm exactly enclosed: {float(enclosure.lower):.15g} <= ||L^mm||_* <= {float(enclosure.upper):.15g} "
            f"(relative width {float(enclosure.relative_width):.2e}), written to {args.enclosure_out}"]
        emit_lines(geometry_lines(res, summary) + extra + ([f"wrote {', '.join(files)} to {out}"] if files else []))
    return EXIT_OK
