"""``ntpcert trajectory DATA --optimizer NAME --steps N --out-dir DIR``: run one optimiser, log its
metrics against the limits, write CSV/JSON, the final iterate and figures
(:mod:`ntpcert.experiments.trajectory` runs it and owns its JSON and files)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ntpcert.cli.options import (EXIT_OK, MAX_LR, check_solver, data_inputs, data_options, emit_json, float_in,
                                 force_option, int_in, json_option, load_data, out_dir_option, progress_enabled,
                                 solver_options)
from ntpcert.dynamics.optimizers import MAX_NS_STEPS, MAX_STEPS
from ntpcert.experiments.trajectory import DEFAULT_STEPS, POINTS_PER_DECADE


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="run GD / NGD / Adam / sign / spectral / Muon and compare the iterates with W*, W^mm and other-norm limits",
        description="Run one optimiser on the cross-entropy of DATA from W = 0 and log, on a geometric grid of "
        "steps, CE - H, ||W_k||, cos(W_k, W^mm), cos(W_k - W*, W^mm), ||P_F(W_k) - W*||, margins, and the "
        "alignment with the NTP-SVM in other norms. Writes metrics.csv, trajectory.json, W_final.npy and figures.",
    )
    data_options(p)
    p.add_argument("--optimizer", default="gd", metavar="NAME",
                   help="gd | ngd | adam | sign | signum | spectral | muon (default gd)")
    p.add_argument("--lr", type=float_in(0.0, MAX_LR), default=None,
                   help=f"step size, at most {MAX_LR:g} (default: gd 1/(2L); others 0.01)")
    p.add_argument("--schedule", default="constant", help="constant | inv-sqrt (lr/sqrt(t)); default constant")
    p.add_argument("--beta1", type=float_in(0.0, 1.0, low_open=False), default=None, help="adam: beta1 in [0, 1) (default 0.9)")
    p.add_argument("--beta2", type=float_in(0.0, 1.0, low_open=False), default=None, help="adam: beta2 in [0, 1) (default 0.99)")
    p.add_argument("--eps", type=float_in(0.0, low_open=False), default=None, help="adam: epsilon, 0 allowed (default 1e-8)")
    p.add_argument("--momentum", type=float_in(0.0, 1.0, low_open=False), default=None,
                   help="sign / spectral / muon: momentum in [0, 1) (defaults 0, 0, 0.95; signum 0.9)")
    p.add_argument("--ns-steps", type=int_in(1, MAX_NS_STEPS), default=None,
                   help=f"muon: Newton-Schulz iterations, at most {MAX_NS_STEPS} (default 5)")
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=DEFAULT_STEPS,
                   help=f"number of steps, at most {MAX_STEPS:,} (default {DEFAULT_STEPS})")
    p.add_argument("--points-per-decade", type=int_in(1), default=POINTS_PER_DECADE,
                   help=f"logged steps per decade (default {POINTS_PER_DECADE})")
    p.add_argument("--norms", default="auto", metavar="LIST",
                   help="other-norm NTP-SVMs to compare with: comma list of max,spectral,nuclear,l1, or all, none, "
                   "auto (the optimiser's own norm when it is not Frobenius; default)")
    out_dir_option(p, "output directory (created if missing)", required=True)
    p.add_argument("--snapshots", action="store_true", help="also write the iterates at the logged steps (snapshots.npy)")
    p.add_argument("--no-plot", action="store_true", help="skip the figures")
    p.add_argument("--no-checks", action="store_true",
                   help="skip the convergence checks (per decade of steps: ||P_F W_k - W*||/||W*||, the decade "
                   "increment against ln(10) W^mm, cos(W_k, regularisation path at ||W_k||), own-norm margin ratio)")
    p.add_argument("--path-check", default="auto", metavar="WHEN",
                   help="auto | on | off: the norm-matched regularisation-path check (auto: when V*d is small "
                   "enough for its Newton solver; default auto)")
    json_option(p, "print the summary as one JSON object")
    force_option(p)
    solver_options(p)
    p.set_defaults(func=cmd_trajectory)


def cmd_trajectory(args: argparse.Namespace) -> int:
    from ntpcert.dynamics.optimizers import make_optimizer
    from ntpcert.dynamics.trajectory import geometric_grid
    from ntpcert.errors import InputError
    from ntpcert.experiments.trajectory import check_path_check, output_names, resolve_norms, run_trajectory
    from ntpcert.instance.embeddings import MAX_ENTRIES
    from ntpcert.report.trajectory_text import render_final
    from ntpcert.util.files import check_output_dir, write_directory

    names = output_names(snapshots=args.snapshots, figures=not args.no_plot)
    check_output_dir(args.out_dir, "--out-dir", names=names, overwrite=args.force, inputs=data_inputs(args))
    try:
        logged = geometric_grid(args.steps, args.points_per_decade).size
    except InputError as err:  # the message names the library's argument; say the option instead
        raise InputError(f"--points-per-decade: {str(err).split(': ', 1)[-1]}") from None
    check_solver(args.solver)
    opt = make_optimizer(args.optimizer.strip().lower(), lr=args.lr, schedule=args.schedule, beta1=args.beta1,
                         beta2=args.beta2, eps=args.eps, momentum=args.momentum, ns_steps=args.ns_steps)
    norms = resolve_norms(args.norms, opt.steepest_norm, field="--norms")
    path_check = check_path_check(args.path_check, field="--path-check")
    inst = load_data(args)
    cap = MAX_ENTRIES if args.max_entries is None else args.max_entries
    if args.snapshots and logged * inst.V * inst.d > cap:
        raise InputError(f"--snapshots: {logged:,} logged iterates of V × d = {inst.V:,} × {inst.d:,} would have "
                         f"{logged * inst.V * inst.d:,} entries, more than the limit of {cap:,} (fewer "
                         "--points-per-decade, or raise it with --max-entries)")
    res = run_trajectory(inst, opt, args.steps, norms=norms, solver=args.solver, points_per_decade=args.points_per_decade,
                         checks=not args.no_checks, path_check=path_check, snapshots=args.snapshots,
                         progress=progress_enabled(args))
    trust = res.trajectory.trust_warning()
    if trust is not None:  # never silently: float64 stopped resolving the iterates' numbers
        print(trust, file=sys.stderr)
    files = write_directory(args.out_dir, res.writers(snapshots=args.snapshots, figures=not args.no_plot), "--out-dir")
    if args.json:
        emit_json(res.brief_json(out=args.out_dir, files=files))
    else:
        print(render_final(inst, res.limits, res.trajectory))
        if res.checks is not None:
            print("convergence checks (per decade of steps; Theorem 2 of arXiv 2402.18551 for GD):")
            print("\n".join(res.checks.lines()))
        print(f"wrote {', '.join(files)} to {args.out_dir}")
    return EXIT_OK
