"""``ntpcert bench``: the NTP-SVM solver benchmark (instance families × backends, with time limits).

The benchmark harness is :mod:`ntpcert.experiments.bench` (see ``docs/solvers.md``); this command
runs it with one progress line per instance on stderr (on a terminal, or with ``--progress``), writing
``report.md``, ``results.csv`` (qpbenchmark's results format) and ``runs.csv`` (every field of every run),
and optionally a qpbenchmark test set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from ntpcert.cli.options import (check_solver, emit_json, float_in, force_option, int_in, json_option, out_dir_option,
                                 progress_enabled, progress_option, time_limit_option)
from ntpcert.experiments.bench.runner import DEFAULT_BACKENDS

#: Largest ``--seeds`` (instances per size setting).
MAX_SEEDS = 100
#: What ``--out-dir DIR`` receives, and what ``--export-qpbenchmark DIR`` receives.
OUTPUT_NAMES = ("report.md", "results.csv", "runs.csv", "instances")
EXPORT_NAMES = ("data", "results", "ntp_svm.py")


def register(subparsers, name: str) -> None:
    p = subparsers.add_parser(name, help="benchmark the NTP-SVM backends on instance families",
                              description="Run every backend on NTP-SVM instance families with a time limit and "
                              "report success rates and shifted geometric means of solve time.")
    p.add_argument("--scale", choices=["tiny", "small", "medium"], default="small",
                   help="instance sizes (default small)")
    p.add_argument("--families", default=None, metavar="F,...",
                   help="comma-separated families (default all: paper, growing_V, growing_m, d_below_m, "
                   "d_above_m, onehot, corpus)")
    p.add_argument("--backends", default=None, metavar="B,...",
                   help=f"comma-separated solvers (default the installed ones of {','.join(DEFAULT_BACKENDS)})")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=2,
                   help=f"instances per size setting, at most {MAX_SEEDS} (default 2)")
    time_limit_option(p, "seconds per run", default=60.0)
    p.add_argument("--tol", type=float_in(0.0, 1.0), default=1e-6,
                   help="residual and gap tolerance of a success, in (0, 1] (default 1e-6)")
    out_dir_option(p, "write report.md, results.csv (qpbenchmark's format), runs.csv and the instances here "
                   "(default: print the report)")
    out_dir_option(p, "also write the instances as a qpbenchmark test set into DIR", flag="--export-qpbenchmark")
    json_option(p, "print the summary as one JSON object")
    force_option(p)
    progress_option(p)
    p.set_defaults(func=cmd_bench)


def _bench_package():
    """The benchmark harness :mod:`ntpcert.experiments.bench` (its backends need ``ntpcert[bench]``)."""
    import ntpcert.experiments.bench.families
    import ntpcert.experiments.bench.qpbench_export
    import ntpcert.experiments.bench.qpbench_results
    import ntpcert.experiments.bench.report
    import ntpcert.experiments.bench.runner

    return ntpcert.experiments.bench


def _split(text: str | None, field: str, known=None) -> list[str] | None:
    from ntpcert.errors import InputError

    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise InputError(f"{field}: empty list {text!r}")
    if known is not None:
        bad = [x for x in items if x not in known]
        if bad:
            raise InputError(f"{field}: unknown value {bad[0]!r} (known: {', '.join(known)})")
    return items


def cmd_bench(args: argparse.Namespace) -> int:
    from ntpcert.util.files import atomic_write_text, check_output_dir, staged_directory

    for opt, path, names in (("--out-dir", args.out_dir, OUTPUT_NAMES),
                             ("--export-qpbenchmark", args.export_qpbenchmark, EXPORT_NAMES)):
        if path is not None:
            check_output_dir(path, opt, names=names, overwrite=args.force)
    nb = _bench_package()
    backends = _split(args.backends, "--backends") or nb.runner.available_backends()
    for b in backends:
        check_solver(b, "--backends")
    fams = nb.families.families(args.scale, seeds=args.seeds)
    chosen = _split(args.families, "--families", known=list(fams)) or list(fams)
    members = [m for f in chosen for m in fams[f]]
    import tempfile

    show = progress_enabled(args)

    def note(line: str) -> None:  # one line per instance: on a terminal, or anywhere with --progress
        if show:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    # every output is staged and moved into place only when the whole benchmark has run
    with contextlib.ExitStack() as stack:
        out_stage = stack.enter_context(staged_directory(args.out_dir, "--out-dir")) if args.out_dir else None
        qpb_stage = (stack.enter_context(staged_directory(args.export_qpbenchmark, "--export-qpbenchmark"))
                     if args.export_qpbenchmark else None)
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="ntpcert-bench-"))
        workdir = os.path.join(out_stage, "instances") if out_stage else scratch
        items = nb.runner.prepare(members, workdir, note=note)
        runs = nb.runner.run_all(items, backends, time_limit=args.time_limit, tol=args.tol, note=note)
        report = nb.report.markdown(runs, items, time_limit=args.time_limit, tol=args.tol,
                                    notes=[f"scale {args.scale}, {args.seeds} seed(s) per setting"])
        if qpb_stage is not None:
            nb.qpbench_export.export(items, qpb_stage, tol=args.tol, time_limit=args.time_limit)
        if out_stage is not None:
            atomic_write_text(os.path.join(out_stage, "report.md"), report)
            atomic_write_text(os.path.join(out_stage, "results.csv"),
                              nb.qpbench_results.results_csv(runs, tol=args.tol, time_limit=args.time_limit))
            atomic_write_text(os.path.join(out_stage, "runs.csv"), nb.report.csv_text(runs))
    if args.json:
        emit_json(nb.report.summary_json(runs, args.time_limit, out=args.out_dir, qpbenchmark=args.export_qpbenchmark))
    elif args.out_dir:
        print(f"wrote {os.path.join(args.out_dir, 'report.md')}, results.csv and runs.csv ({len(runs)} runs, "
              f"{len(items)} instances)")
    else:
        sys.stdout.write(report)
    return 0
