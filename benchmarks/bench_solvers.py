#!/usr/bin/env python3
"""The backend benchmark on the instance families, written to ``benchmarks/results/``.

Same harness as ``ntpcert bench`` (:mod:`ntpcert.experiments.bench`), with the instances kept in a temporary
directory. Writes ``solvers-families.md`` (report) and ``solvers-families.csv`` (one row per run, every field).

Usage: ``python benchmarks/bench_solvers.py --scale small --seeds 1 --time-limit 60``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ntpcert.util.versions import stamp_versions  # noqa: E402
from ntpcert.experiments.bench import families, report, runner  # noqa: E402
from ntpcert.experiments.bench.timing import load_average  # noqa: E402

BACKENDS = ["structured", "structured-float", "clarabel", "cvxpy", "osqp", "scs", "piqp", "proxqp", "highs"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="small", choices=list(families.SCALES))
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--tol", type=float, default=runner.DEFAULT_TOL)
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--name", default="families")
    args = p.parse_args()
    members = [m for fam in families.families(args.scale, seeds=args.seeds).values() for m in fam]
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        items = runner.prepare(members, tmp, note=print)
        runs = runner.run_all(items, args.backends.split(","), time_limit=args.time_limit, tol=args.tol, note=print)
    notes = [f"scale {args.scale}, {args.seeds} seed(s) per setting; load average before {load_before}, "
             f"after {load_average()}"]
    text = report.markdown(runs, items, time_limit=args.time_limit, tol=args.tol, notes=notes,
                           title=f"NTP-SVM backends on the instance families ({args.scale})")
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    for suffix, body in ((".md", text), (".csv", report.csv_text(runs))):
        target = res / f"solvers-{args.name}{suffix}"
        tmp = res / f".solvers-{args.name}{suffix}.tmp"
        tmp.write_text(stamp_versions(body), encoding="utf-8")
        os.replace(tmp, target)
    print(text)


if __name__ == "__main__":
    main()
