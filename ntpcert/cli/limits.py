"""``ntpcert limits DATA --out DIR``: W*, W^mm and a basis of F as ``.npy`` files plus ``summary.json``,
written into DIR all at once (nothing half-written)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 load_data, progress_enabled, separability_option,
                                 solver_options)

#: The basis of F is written only when it has at most this many entries (dim F · V · d).
MAX_BASIS_ENTRIES = 50_000_000
#: Every file ``limits`` may write into DIR.
OUTPUT_NAMES = ("W_star.npy", "W_mm.npy", "F_basis.npy", "summary.json")


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(name, help="write W*, W^mm (and with --basis a basis of F) as .npy plus summary.json")
    data_options(p)
    p.add_argument("--out", metavar="DIR", required=True, help="output directory (created if missing)")
    p.add_argument("--basis", action="store_true",
                   help="also write an orthonormal basis of F (F_basis.npy, shape (dim F, V, d))")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    force_option(p)
    solver_options(p)
    separability_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ntpcert.pipeline.float_verdicts import certify
    from ntpcert.report.jsonout import dumps
    from ntpcert.report.text import float_report_lines
    from ntpcert.util.files import atomic_write_text, check_output_dir, save_npy_atomic, staged_directory

    check_solver(args.solver)
    names = OUTPUT_NAMES if args.basis else tuple(n for n in OUTPUT_NAMES if n != "F_basis.npy")
    out = check_output_dir(args.out, "--out", names=names, overwrite=args.force, inputs=data_inputs(args))
    inst = load_data(args)
    rep = certify(inst, svm=True, solver=args.solver, progress=progress_enabled(args),
                  separability_solver=args.separability_solver, use_lemma1=not args.no_lemma1)
    summary = rep.to_json()
    arrays: dict[str, Any] = {"W_star.npy": rep.compatible.W_star}
    if rep.svm is not None:
        arrays["W_mm.npy"] = rep.svm.W
    dimF = rep.subspace.dim
    if not args.basis:
        summary["F_basis_skipped"] = "not requested (give --basis)"
    else:
        sub = rep.subspace
        if dimF is None:  # the sparse (LSMR) path: F is known through projections only
            from ntpcert.rows.subspace import Subspace

            sub = Subspace.build(sub.system, method="eigh")
            dimF = sub.dim
        if dimF * inst.V * inst.d <= MAX_BASIS_ENTRIES:
            arrays["F_basis.npy"] = sub.basis()
        else:
            summary["F_basis_skipped"] = f"dim F * V * d = {dimF * inst.V * inst.d} > {MAX_BASIS_ENTRIES}"
    summary["files"] = {name: list(np.shape(arr)) for name, arr in arrays.items()}
    summary["W_star_shape_note"] = "W has shape (V, d); F_basis has shape (dim F, V, d)"
    with staged_directory(out, "--out") as stage:
        for name, arr in arrays.items():
            save_npy_atomic(os.path.join(stage, name), arr)
        atomic_write_text(os.path.join(stage, "summary.json"), dumps(summary, indent=2))
    if args.json:
        emit_json(summary)
    else:
        emit_lines(float_report_lines(rep) + [f"wrote {', '.join(sorted(summary['files']))} and summary.json to {out}"])
    return EXIT_OK
