"""The exact duality-gap bound (``ntpcert.exact.svm_gap.ExactSVMBounder``) on soft supports, where tokens lie in
more tied contexts than d and the in-support repair needs a basis of its consistency rows: the rows independent
modulo a prime (checked against every row on use) against the exact rref of all of them. Both in one process,
interleaved per cell, on the pair of the ``active-set`` backend; the same exact gap is asserted.

    python benchmarks/bench_exact_repair.py --out benchmarks/results/exact-repair-basis.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_d_below_m import soft_cell  # noqa: E402
from bench_lm_scale import write_results  # noqa: E402

CELLS = [(10, 500, 64), (10, 1000, 64)]


def main() -> None:
    import ntpcert.exact.svm_gap as G
    from ntpcert.experiments.bench.timing import load_average
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = ["# The exact gap bound on soft supports: the repair's row basis modulo a prime against the exact rref", "",
             "In-process seconds, one run each, interleaved per cell (mod p first); build = `ExactSVMBounder(system)`, "
             "bound = its first `bound(W, a)` (which checks the projected t against every row on the mod-p basis); "
             "ratio = rref total / mod-p total.", "",
             "| V | m | d | consistency rows | basis rows | mod p: build (s) | bound (s) | rref: build (s) | bound (s) "
             "| ratio | same exact gap | load |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    independent = G._independent_rows
    for V, m, d in CELLS:
        system = KeslerSystem.build(soft_cell(V, m, d))
        sol = solve_svm(system, solver="active-set")
        out = {}
        for name, rows in (("modp", independent), ("rref", lambda constraints, pos: None)):
            G._independent_rows = rows
            t0 = time.perf_counter()
            b = G.ExactSVMBounder(system)
            t1 = time.perf_counter()
            bound = b.bound(sol.W, sol.dual)
            out[name] = (t1 - t0, time.perf_counter() - t1, bound, b)
        G._independent_rows = independent
        (mb, mo, mbd, mB), (rb, ro, rbd, rB) = out["modp"], out["rref"]
        same = mbd.gap == rbd.gap
        lines.append(f"| {V} | {m} | {d} | {len(mB.constraints)} | {mB.C.nrows()} | {mb:.2f} | {mo:.2f} | {rb:.2f} | "
                     f"{ro:.2f} | {(rb + ro) / (mb + mo):.2f} | {same} | {load_average()} |")
        print(lines[-1], flush=True)
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
