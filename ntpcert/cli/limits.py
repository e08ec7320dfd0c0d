"""``ntpcert limits DATA --out DIR``: W*, W^mm and a basis of F as ``.npy`` files plus ``summary.json``,
written into DIR all at once (nothing half-written)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 json_option, load_merged, out_dir_option, progress_enabled, separability_option,
                                 solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name, help="write W*, W^mm, W_fin (and with --basis a basis of F) as .npy plus summary.json",
        description="Compute the limits gradient descent is proven to pick, W* (on F) and W^mm (the NTP-SVM), "
        "and write them into DIR all at once, with the verdicts in summary.json. On data that are not separable, "
        "W_fin (the finite part) and W^mm_P (the direction of the separable pairs), with L* and the split under "
        "'limit'.")
    data_options(p)
    out_dir_option(p, "output directory (created if missing)", required=True)
    p.add_argument("--basis", action="store_true",
                   help="also write an orthonormal basis of F (F_basis.npy, shape (dim F, V, d))")
    json_option(p, "print the summary as one JSON object")
    force_option(p)
    solver_options(p)
    separability_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.pipeline.float_verdicts import certify, with_merged_svm
    from ntpcert.pipeline.limits import limit_files, output_names, with_fit
    from ntpcert.util.jsonout import dumps
    from ntpcert.report.text import float_report_lines
    from ntpcert.util.files import atomic_write_text, check_output_dir, save_npy_atomic, staged_directory

    check_solver(args.solver)
    out = check_output_dir(args.out_dir, "--out-dir", names=output_names(args.basis), overwrite=args.force,
                           inputs=data_inputs(args))
    inst, merge = load_merged(args)  # through --model: the unseen tokens merged, the NTP-SVMs weighted
    rep = certify(inst, svm=merge is None, solver=args.solver, progress=progress_enabled(args),
                  separability_solver=args.separability_solver, use_lemma1=not args.no_lemma1,
                  svm_certificate="exact", svm_work=None,  # W^mm is written out: its gap bounded exactly, and
                  # the solver's full budget (not certify's), as in the docs
                  fit_when_refuted=True)  # W_star.npy: a least-squares point where W* does not exist
    rep = with_fit(rep)  # W* where certify left it out (a pair ray decided (6) first)
    if merge is not None:
        rep = with_merged_svm(rep, merge, solver=args.solver, svm_certificate="exact", svm_work=None)
    from ntpcert.pipeline.nonseparable import nonseparable_limits

    sep = rep.separable.holds
    general = nonseparable_limits(inst if merge is None else merge.weighted(inst), separable=sep,
                                  solver=args.solver, svm=sep is not True)
    files = limit_files(rep, basis=args.basis, general=general, merge=merge)
    with staged_directory(out, "--out-dir") as stage:
        for name, arr in files.arrays.items():
            save_npy_atomic(os.path.join(stage, name), arr)
        atomic_write_text(os.path.join(stage, "summary.json"), dumps(files.summary, indent=2))
    if args.json:
        emit_json(files.summary)
    else:
        written = ", ".join(sorted(files.summary["files"]))
        emit_lines(float_report_lines(rep) + [f"wrote {written} and summary.json to {out}"])
    return EXIT_OK
