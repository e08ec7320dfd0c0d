"""``ntpcert sweep SPEC``: compute a grid of random instances on dask.distributed into a crash-safe store.

A LocalCluster (2 worker processes, 1 thread each) by default, ``--scheduler ADDRESS`` for a running
cluster, ``--serial`` for this process alone (no dask needed). Each finished instance is committed once to the SQLite store; rerunning the same command after
a crash (or Ctrl-C, or SIGKILL) computes only the missing instances.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import emit_json, progress_enabled, progress_option


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="run an experiment grid (TOML spec) on dask into a crash-safe SQLite store",
        description="Compute verdicts, margins, norms or GD endpoints for every grid point of a TOML spec, "
        "on a dask LocalCluster or --scheduler ADDRESS; reruns resume where a run stopped.",
    )
    p.add_argument("spec", metavar="SPEC", help="the TOML sweep spec (see docs/conjecture-lab.md)")
    p.add_argument("--store", metavar="PATH", default=None,
                   help="SQLite results store (default: NAME.sqlite in the current directory, NAME from the spec)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a running dask scheduler (default: start a LocalCluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="LocalCluster worker processes, 1 thread each (default 2)")
    p.add_argument("--serial", action="store_true",
                   help="compute in this process, without dask (works without the [dist] extra)")
    p.add_argument("--chunk-size", type=int, default=4, metavar="N", help="grid points per dask task (default 4)")
    p.add_argument("--csv", metavar="PATH", default=None, help="afterwards, write the whole table here as CSV")
    p.add_argument("--json", action="store_true", help="print a one-object JSON summary")
    progress_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.util.extras import require
    from ntpcert.util.files import check_output_file
    from ntpcert.errors import InputError
    from ntpcert.experiments.sweep import ResultStore, dask_client, load_spec, run_sweep
    from ntpcert.experiments.sweep.runner import DEFAULT_WORKERS

    spec = load_spec(args.spec)
    store = args.store or f"{spec.name}.sqlite"
    if args.csv:
        check_output_file(args.csv, "--csv")
    if args.scheduler and args.workers is not None:
        raise InputError(f"--workers: value {args.workers} applies to the LocalCluster, not to --scheduler {args.scheduler!r}")
    if args.chunk_size < 1:
        raise InputError(f"--chunk-size: value {args.chunk_size} is not a positive integer")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers: value {args.workers} is not a positive integer")
    if args.serial and (args.scheduler or args.workers is not None):
        raise InputError("--serial: computes in this process; it does not go with --scheduler or --workers")
    if not args.serial:
        require("distributed", "dist", "ntpcert sweep on dask (or run it with --serial)")
    ResultStore(store, spec).close()  # refuse a store of other settings before starting a cluster
    if args.serial:
        summary = run_sweep(spec, store, chunk_size=args.chunk_size, progress=progress_enabled(args))
    else:
        with dask_client(args.scheduler, workers=DEFAULT_WORKERS if args.workers is None else args.workers) as client:
            summary = run_sweep(spec, store, client=client, chunk_size=args.chunk_size, progress=progress_enabled(args))
    if args.csv:
        with ResultStore(store) as db:
            db.write_csv(args.csv)
    if args.json:
        emit_json({**summary.to_json(), "csv": args.csv})
    else:
        s = summary
        print(f"sweep {s.name}: {s.total} instances in {os.path.abspath(s.store)}; {s.already_done} were done, "
              f"{s.computed} computed now ({s.errors} failed) in {s.seconds:.1f} s on {s.executor}")
        if s.skipped:
            print(f"  skipped {s.skipped} grid combinations with k > V")
        if args.csv:
            print(f"  table written to {args.csv}")
    return 0
