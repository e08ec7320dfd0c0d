"""Nuclear-norm NTP-SVM of the unconstrained-features model: the structured solver's time against cvxpy +
Clarabel on the same support patterns, as a ratio measured in this one script.

    python benchmarks/bench_geometry.py [--repeat R] [--sizes 8x12,20x60,40x150]

Patterns are random (density 0.3, seed 0) with a few contexts sharing supports. Prints a markdown table: V, m,
distinct supports, both times (best of R), the ratio structured/cvxpy, both certified relative gaps and the
relative difference of the objectives."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ntpcert.geometry.cvx import solve_nuclear_cvxpy
from ntpcert.geometry.pattern import SupportPattern
from ntpcert.geometry.structured import solve_nuclear_structured


def pattern(rng: np.random.Generator, V: int, m: int) -> SupportPattern:
    r = max(1, (2 * m) // 3)
    base = rng.random((V, r)) < 0.3
    base[rng.integers(V, size=r), np.arange(r)] = True
    S = base[:, np.concatenate([np.arange(r), rng.integers(r, size=m - r)])]
    return SupportPattern.from_mask(S)


def best(fn, repeat: int):
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--sizes", default="8x12,20x60,40x150")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    print("| V | m | r | structured s | cvxpy+Clarabel s | ratio | gap structured | gap cvxpy | objective rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        V, m = (int(x) for x in size.split("x"))
        p = pattern(rng, V, m)
        a, ta = best(lambda: solve_nuclear_structured(p), args.repeat)
        b, tb = best(lambda: solve_nuclear_cvxpy(p), args.repeat)
        diff = abs(a.objective - b.objective) / b.objective
        print(f"| {V} | {m} | {p.r} | {ta:.2f} | {tb:.2f} | {ta / tb:.2f} | {a.relative_gap:.1e} | "
              f"{b.relative_gap:.1e} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
