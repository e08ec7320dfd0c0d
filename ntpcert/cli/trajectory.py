"""``ntpcert trajectory DATA --optimizer NAME --steps N --out DIR``: run one optimiser, log its
metrics against the limits, write CSV/JSON, the final iterate and figures."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from ntpcert.cli.options import (EXIT_OK, MAX_LR, check_solver, data_inputs, data_options, emit_json, float_in,
                                 force_option, int_in, json_option, load_data, out_dir_option, progress_enabled,
                                 solver_options)
from ntpcert.dynamics.optimizers import MAX_NS_STEPS, MAX_STEPS

#: Default number of steps.
DEFAULT_STEPS = 10_000
#: The files ``trajectory`` writes into DIR: always, with ``--snapshots``, and without ``--no-plot``.
OUTPUT_NAMES = ("metrics.csv", "trajectory.json", "W_final.npy")
SNAPSHOT_NAMES = ("snapshots.npy", "snapshot_steps.npy")
FIGURE_NAMES = ("trajectory.png", "alignment.png", "checks.png")
#: ``--path-check`` values.
PATH_CHECK = ("auto", "on", "off")


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
    p.add_argument("--points-per-decade", type=int_in(1), default=20, help="logged steps per decade (default 20)")
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


def parse_norms(text: str, steepest: str) -> tuple[str, ...]:
    """``--norms`` to a tuple of norm names."""
    from ntpcert.errors import InputError
    from ntpcert.dynamics.trajectory import OTHER_NORMS

    t = text.strip().lower()
    if t == "auto":
        return (steepest,) if steepest in OTHER_NORMS else ()
    if t == "none":
        return ()
    if t == "all":
        return OTHER_NORMS
    out = tuple(dict.fromkeys(x.strip() for x in t.split(",") if x.strip()))
    for n in out:
        if n not in OTHER_NORMS:
            raise InputError(f"--norms: unknown norm {n!r} (expected some of {', '.join(OTHER_NORMS)}, or all, none, auto)")
    return out


def text_writer(text: str) -> Callable[[str], None]:
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)

    return write


def json_writer(obj: Any) -> Callable[[str], None]:
    from ntpcert.report.jsonout import dumps

    return text_writer(dumps(obj, indent=2) + "\n")


def npy_writer(array: Any) -> Callable[[str], None]:
    def write(path: str) -> None:
        import numpy as np

        np.save(path, np.asarray(array))

    return write


def cmd_trajectory(args: argparse.Namespace) -> int:
    from ntpcert.util.files import check_output_dir, write_directory
    from ntpcert.errors import InputError
    from ntpcert.dynamics.optimizers import make_optimizer
    import numpy as np

    from ntpcert.dynamics.trajectory import Limits, decade_steps, geometric_grid, run
    from ntpcert.instance.embeddings import MAX_ENTRIES

    names = OUTPUT_NAMES + (SNAPSHOT_NAMES if args.snapshots else ()) + (() if args.no_plot else FIGURE_NAMES)
    check_output_dir(args.out_dir, "--out-dir", names=names, overwrite=args.force, inputs=data_inputs(args))
    try:
        logged = geometric_grid(args.steps, args.points_per_decade).size
    except InputError as err:  # the message names the library's argument; say the option instead
        raise InputError(f"--points-per-decade: {str(err).split(': ', 1)[-1]}") from None
    check_solver(args.solver)
    name = args.optimizer.strip().lower()
    opt = make_optimizer(
        name,
        lr=args.lr,
        schedule=args.schedule,
        beta1=args.beta1,
        beta2=args.beta2,
        eps=args.eps,
        momentum=args.momentum,
        ns_steps=args.ns_steps,
    )
    norms = parse_norms(args.norms, opt.steepest_norm)
    inst = load_data(args)
    cap = MAX_ENTRIES if args.max_entries is None else args.max_entries
    if args.snapshots and logged * inst.V * inst.d > cap:
        raise InputError(f"--snapshots: {logged:,} logged iterates of V × d = {inst.V:,} × {inst.d:,} would have "
                         f"{logged * inst.V * inst.d:,} entries, more than the limit of {cap:,} (fewer "
                         "--points-per-decade, or raise it with --max-entries)")
    path_check = args.path_check.strip().lower()
    if path_check not in PATH_CHECK:
        raise InputError(f"--path-check: unknown value {args.path_check!r} (expected one of {', '.join(PATH_CHECK)})")
    progress = progress_enabled(args)
    limits = Limits.compute(inst, norms=norms, solver=args.solver, progress=progress)
    checks_on = not args.no_checks
    grid = geometric_grid(args.steps, args.points_per_decade)
    if checks_on:
        grid = np.union1d(grid, decade_steps(args.steps))
    keep = True if args.snapshots else (decade_steps(args.steps) if checks_on else False)
    traj = run(inst, opt, args.steps, limits=limits, grid=grid, snapshots=keep, progress=progress)
    trust = traj.trust_warning()
    if trust is not None:  # never silently: float64 stopped resolving the iterates' numbers
        print(trust, file=sys.stderr)
    checks = None
    if checks_on:
        checks = run_checks(inst, limits, traj, path_check, progress=progress)
    summary = {
        "instance": {**inst.describe(), "fingerprint": inst.fingerprint()},
        "limits": limits.to_json(),
        **traj.to_json(),
        "convergence_checks": None if checks is None else checks.to_json(),
    }
    writers: dict[str, Callable[[str], None]] = {
        "metrics.csv": text_writer(traj.to_csv()),
        "trajectory.json": json_writer(summary),
        "W_final.npy": npy_writer(traj.W_final),
    }
    if args.snapshots:
        writers["snapshots.npy"] = npy_writer(traj.snapshots)
        writers["snapshot_steps.npy"] = npy_writer(traj.steps)
    if not args.no_plot:
        from ntpcert.report import plots

        title = short_title(inst, traj)
        writers["trajectory.png"] = lambda path: plots.plot_trajectory(traj, path, title=title)
        if limits.svm is not None:
            writers["alignment.png"] = lambda path: plots.plot_norm_alignment([traj], path, title=title)
        if checks is not None and limits.svm is not None:
            writers["checks.png"] = lambda path: plots.plot_checks(
                [checks], path, title=f"convergence checks per decade; {title}")
    files = write_directory(args.out_dir, writers)  # only now: a run that fails writes nothing
    if args.json:
        emit_json({"out": args.out_dir, "files": files, "final": traj.to_json()["final"],
                    "hyperparams": traj.hyperparams, "steps_per_second": traj.steps_per_second,
                    "checks": None if checks is None else {"verdicts": checks.verdicts,
                                                           "path_error": checks.path_error}})
    else:
        print(render_final(inst, limits, traj))
        if checks is not None:
            print("convergence checks (per decade of steps; Theorem 2 of arXiv 2402.18551 for GD):")
            print("\n".join(checks.lines()))
        print(f"wrote {', '.join(files)} to {args.out_dir}")
    return EXIT_OK


def run_checks(inst, limits, traj, path_check: str, *, progress: bool = False):
    """The convergence checks of ``traj`` (which holds the decade-step snapshots). ``path_check``
    ``auto`` runs the regularisation path only when its Newton solver applies (V·d at most
    ``NEWTON_MAX_VARS``); otherwise the path cosines are undetermined and the reason is given."""
    import dataclasses

    from ntpcert.dynamics.checks import convergence_checks
    from ntpcert.dynamics.regpath import NEWTON_MAX_VARS

    big = inst.V * inst.d > NEWTON_MAX_VARS
    path = path_check == "on" or (path_check == "auto" and not big)
    chk = convergence_checks(traj, limits, path=path and limits.svm is not None, progress=progress)
    if not path:
        why = (f"skipped: V*d = {inst.V * inst.d:,} is above {NEWTON_MAX_VARS:,}, where the path needs the slower "
               "projected solver (--path-check on forces it)" if path_check == "auto" else "skipped (--path-check off)")
        chk = dataclasses.replace(chk, path_error=why)
    return chk


def short_title(inst, traj) -> str:
    """One line naming the instance, the optimiser and its hyperparameters."""
    hp = {k: v for k, v in traj.hyperparams.items() if k not in ("optimizer", "start")}
    return f"{inst.name} (m={inst.m}, d={inst.d}, V={inst.V}): {traj.optimizer} " + hyperparam_text(hp)


#: Hyperparameters written with their symbols (mathtext) in figure titles.
SYMBOLS = {"lr": r"$\eta$", "beta1": r"$\beta_1$", "beta2": r"$\beta_2$", "eps": r"$\epsilon$"}


def hyperparam_text(hp: dict) -> str:
    """``η=0.5, steps=1000``: hyperparameters for a title, floats with ``:g``."""
    return ", ".join(f"{SYMBOLS.get(k, k)}={v:g}" if isinstance(v, float) else f"{SYMBOLS.get(k, k)}={v}"
                     for k, v in hp.items())


def render_final(inst, limits, traj) -> str:
    """A few lines: the run, the limits, and the final metrics."""
    import numpy as np

    f = traj.final()
    lines = [
        f"{traj.optimizer} on {inst.name} (m={inst.m}, d={inst.d}, V={inst.V}): {int(traj.steps[-1])} steps, "
        f"{traj.steps_per_second:,.0f} steps/s; {traj.hyperparams}",
        f"  H = {limits.entropy:.10g}; ||W*|| = {float(np.linalg.norm(limits.W_star)):.6g} "
        f"(NTP-compatible: {limits.compatible}); "
        + (f"||W^mm|| = {limits.svm.norm:.6g}" if limits.svm is not None else f"W^mm: {limits.svm_error}"),
    ]
    for key in ("excess_loss", "norm", "cos_mm", "cos_mm_centered", "rel_dist_F", "perp_fraction", "margin_ratio",
                "eq_violation"):
        lines.append(f"  {key:>22}: {f[key]:.6g}")
    for key in sorted(k for k in f if k.startswith(("cos_max", "cos_spectral", "cos_nuclear", "cos_l1", "margin_ratio_"))):
        lines.append(f"  {key:>22}: {f[key]:.6g}")
    for n, sol in limits.norm_svms.items():
        lines.append(f"  {n}-norm NTP-SVM: norm {sol.value:.8g}, checked relative duality gap {sol.relative_gap:.2e} "
                     f"({sol.solver}, {sol.seconds:.1f} s)")
    return "\n".join(lines)
