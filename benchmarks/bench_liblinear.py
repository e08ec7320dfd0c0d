#!/usr/bin/env python3
"""One-hot supports: the structured solver against LIBLINEAR's Crammer–Singer SVM (no bias, large C).

For each size (V, m, d) a one-hot instance (Gaussian embeddings, every token a label) is solved
by ``solve_svm(..., solver="structured")`` (exact certificate), by ``structured-float`` and by
:func:`ntpcert.experiments.liblinear_cs.crammer_singer` (scikit-learn's LinearSVC, C = 1e4, tol = 1e-8),
in one process, interleaved, ``--repeat`` times. Reported: median times, the time ratio, the
largest entry of :math:`|W_{\\mathrm{LIBLINEAR}} - W_{\\mathrm{structured}}|` relative to
:math:`\\max|W|`, and whether LIBLINEAR's solution has all margins at least 1 (C large enough).

Usage: ``python benchmarks/bench_liblinear.py``; writes ``benchmarks/results/solvers-liblinear.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_svm_cli import _write  # noqa: E402
from ntpcert.experiments.bench.families import onehot_instance  # noqa: E402
from ntpcert.experiments.bench.timing import load_average, median  # noqa: E402

SIZES = [(10, 60, 40), (50, 400, 300), (100, 1000, 500), (300, 3000, 256), (1000, 2000, 1024)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm
    from ntpcert.experiments.liblinear_cs import crammer_singer

    rows = []
    for V, m, d in SIZES:
        inst = onehot_instance(np.random.default_rng(0), V=V, m=m, d=d)
        system = KeslerSystem.build(inst)
        times = {"structured": [], "structured-float": [], "liblinear": []}
        for _ in range(args.repeat):
            for s in ("structured", "structured-float"):
                t0 = time.perf_counter()
                sol = solve_svm(system, solver=s)
                times[s].append(time.perf_counter() - t0)
            cs = crammer_singer(inst)
            times["liblinear"].append(cs.seconds)
        diff = float(np.abs(cs.W - sol.W).max() / np.abs(sol.W).max())
        rows.append((V, m, d, {k: median(v) for k, v in times.items()}, diff, cs, load_average()))
        print(f"V={V} m={m} d={d}: {rows[-1][3]} diff {diff:.1e}", file=sys.stderr)
    lines = ["# One-hot supports: structured solver vs LIBLINEAR Crammer–Singer", "",
             f"Gaussian embeddings, one label per context, every token a label (seed 0). In-process times, "
             f"medians of {args.repeat}. LIBLINEAR through scikit-learn `LinearSVC(multi_class=\"crammer_singer\", "
             "fit_intercept=False, C=1e4, tol=1e-8)`.", "",
             "| V | m | d | structured (s) | structured-float (s) | LIBLINEAR (s) | LIBLINEAR / structured | "
             "LIBLINEAR / structured-float | max abs W diff / max abs W | LIBLINEAR hard margin | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for V, m, d, t, diff, cs, load in rows:
        lines.append(f"| {V} | {m} | {d} | {t['structured']:.2f} | {t['structured-float']:.2f} | {t['liblinear']:.2f} | "
                     f"{t['liblinear'] / t['structured']:.2f} | {t['liblinear'] / t['structured-float']:.2f} | "
                     f"{diff:.1e} | {'yes' if cs.hard_margin else 'no'} (min margin {cs.min_margin:.9f}) | {load} |")
    _write("liblinear", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
