#!/usr/bin/env python3
"""Whole-process timings of ``ntpcert svm`` with the structured solver against generic QP tooling.

Parts (each writes ``benchmarks/results/solvers-<part>.md``):

``small``
    V = 50, m = 200, d = 250, Gaussian embeddings, supports of size 1..5 (seed 0), written as a
    ``.npz``; ``ntpcert svm FILE --solver S`` for S in structured, structured-float, clarabel, cvxpy,
    interleaved, ``--repeat`` times; medians, the ratio to cvxpy + Clarabel, agreement of the
    objectives with Clarabel's, and the structured solver's certified relative gap.
``large``
    V = 2000, m = 1000, d = 1024, supports of size 1..3: structured only; wall time, peak memory
    and certified gap, ``--repeat`` times.
``vocab``
    m = 1000, d = 1024, supports 1..3, V doubling from 2000 while one whole process stays under
    ``--budget`` seconds (default 120): the largest vocabulary solved in the budget.

Usage: ``python benchmarks/bench_svm_cli.py small --repeat 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ntpcert.util.versions import stamp_versions  # noqa: E402
from ntpcert.experiments.bench.families import gaussian_instance  # noqa: E402
from ntpcert.experiments.bench.timing import load_average, median, run_process  # noqa: E402


def _ntpcert() -> list[str]:
    exe = Path(sys.executable).with_name("ntpcert")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ntpcert.cli"]


def write_instance(path: Path, *, V: int, m: int, d: int, kmax: int, seed: int = 0) -> None:
    from ntpcert.instance.io import write_npz

    write_npz(gaussian_instance(np.random.default_rng(seed), V=V, m=m, d=d, kmin=1, kmax=kmax), path)


def svm_run(path: Path, solver: str, timeout: float | None = None) -> dict:
    """One ``ntpcert svm PATH --solver SOLVER --json`` process."""
    pt = run_process(_ntpcert() + ["svm", str(path), "--solver", solver, "--json"], timeout=timeout)
    out = {"solver": solver, "wall": pt.seconds, "peak_mb": pt.peak_mb, "rc": pt.returncode}
    lines = [ln for ln in pt.stdout.splitlines() if ln.startswith("{")]
    if pt.returncode == 0 and lines:
        out.update(json.loads(lines[-1]))
    else:
        out["error"] = (pt.stderr.strip().splitlines() or ["no output"])[-1]
    return out


def _write(part: str, text: str) -> None:
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    target = res / f"solvers-{part}.md"
    tmp = res / f".solvers-{part}.md.tmp"
    tmp.write_text(stamp_versions(text), encoding="utf-8")
    os.replace(tmp, target)
    print(text)


def part_small(args) -> None:
    solvers = ["structured", "structured-float", "clarabel", "cvxpy"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gauss-V50-m200-d250.npz"
        write_instance(path, V=50, m=200, d=250, kmax=5)
        load_before = load_average()
        runs: dict[str, list[dict]] = {s: [] for s in solvers}
        for r in range(args.repeat):
            for s in solvers:
                runs[s].append(svm_run(path, s))
                print(f"repeat {r} {s}: {runs[s][-1]['wall']:.2f} s", file=sys.stderr)
        load_after = load_average()
    ref = median([x.get("objective", np.nan) for x in runs["clarabel"]])
    t_cvx = median([x["wall"] for x in runs["cvxpy"]])
    lines = ["# `ntpcert svm` on V = 50, m = 200, d = 250 (whole processes)", "",
             f"Gaussian embeddings, supports of size 1..5, seed 0; {args.repeat} interleaved repeats, medians. "
             f"Load average before: {load_before}; after: {load_after}.", "",
             "| solver | median wall (s) | ratio to cvxpy | peak MB | objective | rel. diff to Clarabel | relative gap of the returned pair |",
             "|---|---|---|---|---|---|---|"]
    for s in solvers:
        xs = runs[s]
        wall = median([x["wall"] for x in xs])
        obj = median([x.get("objective", np.nan) for x in xs])
        gaps = [x.get("relative_gap", np.nan) for x in xs]
        lines.append(f"| {s} | {wall:.2f} | {t_cvx / wall:.0f}x | {median([x['peak_mb'] for x in xs]):.0f} | "
                     f"{obj:.12g} | {abs(obj - ref) / ref:.1e} | {max(gaps):.1e} |")
    lines += ["", "All times: `time ntpcert svm FILE --solver S --json`, start-up and reading included. "
              "`structured` returns the exactly feasible pair certified by `ntpcert.exact.svm_gap.exact_svm_bound` "
              "(its exact relative gap is at most 1e-9 by construction); `structured-float` stops on the float "
              "gap of the rescaled pair. The gap column is `SVMSolution.relative_gap` recomputed from the returned pair.", ""]
    _write("small", "\n".join(lines))


def part_large(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gauss-V2000-m1000-d1024.npz"
        write_instance(path, V=2000, m=1000, d=1024, kmax=3)
        load_before = load_average()
        runs = {s: [svm_run(path, s) for _ in range(args.repeat)] for s in ("structured", "structured-float")}
        load_after = load_average()
    lines = ["# `ntpcert svm` on V = 2000, m = 1000, d = 1024, k_j <= 3 (whole processes)", "",
             f"2,048,000 variables, {1000 * 2000:,} constraints less the supports. {args.repeat} repeats each. "
             f"Load average before: {load_before}; after: {load_after}.", "",
             "| solver | walls (s) | median wall (s) | solver seconds (median) | peak MB | certified rel. gap |",
             "|---|---|---|---|---|---|"]
    for s, xs in runs.items():
        walls = ", ".join(f"{x['wall']:.1f}" for x in xs)
        lines.append(f"| {s} | {walls} | {median([x['wall'] for x in xs]):.1f} | "
                     f"{median([x.get('seconds', np.nan) for x in xs]):.1f} | {max(x['peak_mb'] for x in xs):.0f} | "
                     f"{max(x.get('relative_gap', np.nan) for x in xs):.1e} |")
    _write("large", "\n".join(lines) + "\n")


def worker_run(path: Path, solver: str, timeout: float) -> dict:
    """One benchmark worker process (:mod:`ntpcert.experiments.bench.worker`): wall time and peak memory measured
    here, solver details (epochs, token classes, exact-certificate seconds) reported by it."""
    pt = run_process([sys.executable, str(HERE / "ntpcert.experiments.bench" / "worker.py"), str(path), solver, repr(timeout)],
                     timeout=timeout + 60)
    out = {"wall": pt.seconds, "peak_mb": pt.peak_mb, "rc": pt.returncode}
    lines = [ln for ln in pt.stdout.splitlines() if ln.startswith("{")]
    if lines:
        out.update(json.loads(lines[-1]))
    return out


def part_vocab(args) -> None:
    rows = []
    V = 2000
    with tempfile.TemporaryDirectory() as tmp:
        while True:
            path = Path(tmp) / f"gauss-V{V}.npz"
            write_instance(path, V=V, m=1000, d=1024, kmax=3)
            x = worker_run(path, args.solver, args.budget)
            os.unlink(path)
            rows.append((V, x, load_average()))
            print(f"V={V}: {x['wall']:.1f} s, {x['peak_mb']:.0f} MB, {x.get('status')}", file=sys.stderr)
            if x.get("status") != "optimal" or x["wall"] > args.budget or V >= args.max_V:
                break
            V *= 2
    lines = [f"# Largest vocabulary solved in one process ({args.solver})", "",
             f"m = 1000, d = 1024, Gaussian embeddings, supports of size 1..3 (seed 0); budget {args.budget:g} s. "
             "One worker process per V (reads the .npz, builds the Kesler rows, solves, certifies exactly); "
             "wall time and peak memory of that process.", "",
             "| V | variables V·d | status | wall (s) | solve (s) | exact certificate (s) | epochs | token classes | peak MB | certified rel. gap | load average |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for V, x, load in rows:
        info = x.get("info", {})
        cert = x.get("certified_gap")
        lines.append(f"| {V} | {V * 1024:,} | {x.get('status', 'killed')} | {x['wall']:.1f} | {x.get('seconds', float('nan')):.1f} | "
                     f"{info.get('exact_seconds', float('nan')):.1f} | {info.get('epochs', '-')} | {info.get('classes', '-')} | "
                     f"{x['peak_mb']:.0f} | {'-' if cert is None else f'{cert:.1e}'} | {load} |")
    _write("vocab" if args.solver == "structured" else f"vocab-{args.solver}", "\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["small", "large", "vocab"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--budget", type=float, default=120.0)
    p.add_argument("--max-V", type=int, default=256_000)
    p.add_argument("--solver", default="structured", help="vocab part: structured or structured-float")
    args = p.parse_args()
    {"small": part_small, "large": part_large, "vocab": part_vocab}[args.part](args)


if __name__ == "__main__":
    main()
