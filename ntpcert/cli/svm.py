"""``ntpcert svm DATA [--out W.npy] [--json]``: the NTP-SVM W^mm with its residuals and duality gap,
or, on data that are not separable, the Farkas certificate that says so."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 load_data, progress_enabled, solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(name, help="solve the NTP-SVM for W^mm")
    data_options(p)
    p.add_argument("--out", metavar="W.npy", default=None, help="write W^mm (shape (V, d)) here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    force_option(p)
    solver_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import InfeasibleError
    from ntpcert.solve.svm import solve_svm
    from ntpcert.util.files import check_output_file, save_npy_atomic

    check_solver(args.solver)
    if args.out is not None:
        check_output_file(args.out, "--out", overwrite=args.force, inputs=data_inputs(args))
    inst = load_data(args)
    try:
        sol = solve_svm(inst, solver=args.solver, progress=progress_enabled(args))
    except InfeasibleError as err:
        out = {"m": inst.m, "d": inst.d, "V": inst.V, "separable": False, "message": str(err)}
        cert = getattr(err, "certificate", None)
        if cert is not None and hasattr(cert, "to_json"):
            out["certificate"] = cert.to_json()
        if args.json:
            emit_json(out)
        else:
            emit_lines([f"not separable: {err}"])
        return EXIT_OK
    if args.out is not None:
        save_npy_atomic(args.out, sol.W)
    j = sol.to_json()
    if args.json:
        emit_json({"m": inst.m, "d": inst.d, "V": inst.V, "separable": True, **j, "out": args.out})
        return EXIT_OK
    lines = [f"NTP-SVM on {inst.name} (m={inst.m}, d={inst.d}, V={inst.V}) with {j['solver']}: {j['status']}"]
    for key in ("norm", "objective", "dual_objective", "primal_residual", "dual_residual", "gap", "min_margin", "seconds"):
        lines.append(f"  {key:>16}: {j[key]:.10g}")
    if args.out:
        lines.append(f"  W^mm written to {args.out} (shape {sol.W.shape})")
    emit_lines(lines)
    return EXIT_OK
