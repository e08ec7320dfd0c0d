"""The ``active-set`` backend's working-set QP (``ntpcert.solve.structured.working_set``) solved densely by DAQP
against the same rounds with Clarabel, on the d < m families of ``bench_d_below_m.py`` with few class rows
(V = 10, d = 64: C·d = 640, within ``DENSE_MAX_VARS``). Both engines run in one process, interleaved per cell
(DAQP first, then Clarabel by setting ``DENSE_MAX_VARS`` to 0); the ratio is Clarabel / DAQP (> 1: DAQP faster),
with the relative difference of their ||W^mm||. Neither time includes an exact certificate (the backend checks its
pair in floats, as every backend does).

    python benchmarks/bench_active_set_dense.py --out benchmarks/results/active-set-dense.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_d_below_m import soft_cell, teacher_cell  # noqa: E402
from bench_lm_scale import write_results  # noqa: E402

CELLS = [("soft", 10, 500, 64), ("soft", 10, 1000, 64), ("soft", 10, 2000, 64),
         ("teacher", 10, 500, 64), ("teacher", 10, 1000, 64), ("teacher", 10, 2000, 64)]


def main() -> None:
    from ntpcert.experiments.bench.timing import load_average
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.structured import working_set as ws

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    makers = {"soft": soft_cell, "teacher": teacher_cell}
    dense_max = ws.DENSE_MAX_VARS
    lines = ["# The active-set backend: its working-set QP by DAQP (dense) against Clarabel", "",
             "In-process seconds, one run each, interleaved per cell (DAQP, then Clarabel); ratio = Clarabel / DAQP. "
             "Both pairs are checked in floats by `SVMSolution.from_primal_dual`.", "",
             "| family | V (V') | m | d | rows | DAQP (s) | rounds | Clarabel (s) | rounds | ratio | ‖W‖ rel. diff "
             "| load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for fam, V, m, d in CELLS:
        inst = makers[fam](V, m, d)
        system = KeslerSystem.build(inst)
        out = {}
        for engine, limit in (("daqp", dense_max), ("clarabel", 0)):
            ws.DENSE_MAX_VARS = limit
            t0 = time.perf_counter()
            sol = ws.solve(system)
            out[engine] = (time.perf_counter() - t0, sol)
        ws.DENSE_MAX_VARS = dense_max
        (td, sd), (tc, sc) = out["daqp"], out["clarabel"]
        assert sd.info["engine"] == "daqp" and sc.info["engine"] == "clarabel"
        diff = abs(sd.norm - sc.norm) / sc.norm
        lines.append(f"| {fam} | {V} ({inst.V}) | {m} | {d} | {system.n_margin:,} | {td:.2f} | {sd.info['rounds']} | "
                     f"{tc:.2f} | {sc.info['rounds']} | {tc / td:.2f} | {diff:.1e} | {load_average()} |")
        print(lines[-1], flush=True)
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
