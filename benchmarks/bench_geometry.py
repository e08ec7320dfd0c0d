"""Nuclear-norm NTP-SVM of the unconstrained-features model: the structured solver's time against cvxpy +
Clarabel on the same support patterns, as a ratio measured in this one script.

    python benchmarks/bench_geometry.py [--repeat R] [--sizes 8x12,12x30,20x60,24x80]

Patterns are random (density 0.3, seed 0) with a third of the contexts sharing supports. Prints a markdown
table: V, m, distinct supports, both wall times (best of R) and CPU times (user + sys of this process, for
the same best run), the wall ratio structured/cvxpy, both certified relative gaps and the relative difference
of the objectives, with the load average before and after each row. cvxpy's SDP has a (V + m) × (V + m)
matrix variable; at V = 40, m = 150 it did not finish in 500 s, so the default sizes stop at V + m = 104."""

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
    """The result and the (wall, cpu) seconds of the fastest of ``repeat`` runs."""
    out, times = None, []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append((time.perf_counter() - t, time.process_time() - c))
    return out, min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--sizes", default="8x12,12x30,20x60,24x80")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs\n")
    print("| V | m | r | structured wall s (cpu) | cvxpy+Clarabel wall s (cpu) | ratio wall (cpu) | gap structured | "
          "gap cvxpy | objective rel. diff | load before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        V, m = (int(x) for x in size.split("x"))
        p = pattern(rng, V, m)
        load0 = os.getloadavg()[0]
        a, (ta, ca) = best(lambda: solve_nuclear_structured(p), args.repeat)
        b, (tb, cb) = best(lambda: solve_nuclear_cvxpy(p), args.repeat)
        diff = abs(a.objective - b.objective) / b.objective
        print(f"| {V} | {m} | {p.r} | {ta:.2f} ({ca:.2f}) | {tb:.2f} ({cb:.2f}) | {ta / tb:.3f} ({ca / cb:.3f}) | {a.relative_gap:.1e} | "
              f"{b.relative_gap:.1e} | {diff:.1e} | {load0:.1f}/{os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
