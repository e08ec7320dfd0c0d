"""``ntpcert sweep SPEC``: compute a grid of random instances on dask.distributed into a crash-safe store.

A LocalCluster (2 worker processes, 1 thread each) by default, ``--scheduler ADDRESS`` for a running
cluster, ``--serial`` for this process alone (no dask needed). Each finished instance is committed once
to the SQLite store; rerunning the same command after a crash (or Ctrl-C, or SIGKILL) computes only the
missing instances.

Everything is checked before the store is created or a cluster started: the spec (with its size
limits), every option, the ``--csv`` path, and an existing ``--store`` (it must be a store of the same
settings, which is then resumed). A command that fails leaves no store behind.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (
    emit_json,
    force_option,
    int_in,
    json_option,
    out_file_option,
    progress_enabled,
    progress_option,
)
from ntpcert.experiments.distributed import check_scheduler


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
    p.add_argument("--workers", type=int_in(1), default=None, metavar="N",
                   help="LocalCluster worker processes, 1 thread each (default 2)")
    p.add_argument("--serial", action="store_true",
                   help="compute in this process, without dask (works without the [dist] extra)")
    p.add_argument("--chunk-size", type=int_in(1), default=4, metavar="N", help="grid points per dask task (default 4)")
    out_file_option(p, "afterwards, write the whole table here as CSV", flag="--csv")
    json_option(p, "print a one-object JSON summary")
    force_option(p)
    progress_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import InputError
    from ntpcert.experiments.sweep import ResultStore, dask_client, load_spec, run_sweep
    from ntpcert.experiments.sweep.runner import DEFAULT_WORKERS, MAX_WORKERS
    from ntpcert.experiments.sweep.store import check_store
    from ntpcert.util.extras import require
    from ntpcert.util.files import check_output_file

    # every check first: a command that fails creates no store and starts no cluster
    if args.scheduler is not None and args.workers is not None:
        raise InputError(f"--workers: value {args.workers} applies to the LocalCluster, not to --scheduler {args.scheduler!r}")
    if args.serial and (args.scheduler is not None or args.workers is not None):
        raise InputError("--serial: computes in this process; it does not go with --scheduler or --workers")
    if args.workers is not None and args.workers > MAX_WORKERS:
        raise InputError(f"--workers: value {args.workers} is above the limit of {MAX_WORKERS} worker processes")
    scheduler = check_scheduler(args.scheduler) if args.scheduler is not None else None
    spec = load_spec(args.spec)
    store = args.store or f"{spec.name}.sqlite"
    check_store(store, spec, "--store")
    if args.csv is not None:
        check_output_file(args.csv, "--csv", overwrite=args.force, inputs=[args.spec, store])
    if not args.serial:
        require("distributed", "dist", "ntpcert sweep on dask (or run it with --serial)")
    if args.serial:
        summary = run_sweep(spec, store, chunk_size=args.chunk_size, progress=progress_enabled(args))
    else:
        with dask_client(scheduler, workers=DEFAULT_WORKERS if args.workers is None else args.workers) as client:
            summary = run_sweep(spec, store, client=client, chunk_size=args.chunk_size, progress=progress_enabled(args))
    if args.csv is not None:
        with ResultStore(store) as db:
            db.write_csv(args.csv)
    if args.json:
        emit_json(summary.to_json(csv=args.csv))
    else:
        s = summary
        print(f"sweep {s.name}: {s.total} instances in {os.path.abspath(s.store)}; {s.already_done} were done, "
              f"{s.computed} computed now ({s.errors} failed) in {s.seconds:.1f} s on {s.executor}")
        if s.skipped:
            print(f"  skipped {s.skipped} grid combinations with k > V")
        if args.csv is not None:
            print(f"  table written to {args.csv}")
    return 0
