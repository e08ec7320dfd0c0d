"""``ntpcert svm DATA [--out W.npy] [--json]``: the NTP-SVM W^mm with its residuals and duality gap,
or, on data that are not separable, the Farkas certificate that says so."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 json_option, load_merged, out_file_option, progress_enabled, solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(name, help="solve the NTP-SVM for W^mm",
                              description="Solve the NTP-SVM for W^mm and report its residuals and duality gap, "
                              "or the Farkas certificate that the data are not separable.")
    data_options(p)
    out_file_option(p, "write W^mm (shape (V, d)) here, as .npy")
    json_option(p)
    force_option(p)
    solver_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.pipeline.svm_outcome import solve_or_refute
    from ntpcert.util.files import check_output_file, save_npy_atomic

    check_solver(args.solver)
    if args.out is not None:
        check_output_file(args.out, "--out", overwrite=args.force, inputs=data_inputs(args))
    inst, merge = load_merged(args)
    outcome = solve_or_refute(inst, solver=args.solver, progress=progress_enabled(args), merge=merge)
    out = args.out if outcome.separable else None
    if out is not None:
        save_npy_atomic(out, outcome.W())
    if args.json:
        emit_json(outcome.to_json(out=out))
    else:
        emit_lines(outcome.lines(out=out))
    return EXIT_OK
