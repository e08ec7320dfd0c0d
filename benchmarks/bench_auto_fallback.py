"""Float ``certify`` on mid-sized instances where the ``auto`` NTP-SVM backend falls back to Clarabel:
the baseline settings and the current ones, run in the same process, as a ratio.

Instances: m in [100, 300), V in [20, 60), d in [5, 50), Gaussian embeddings, supports of 1 to k <= 3
random tokens with counts in [1, 5] (about 45 KB of JSON each), drawn by one generator (``--seed``); the
ones listed by ``--index`` are those of seed 1 where the structured solver does not certify within
auto's first try, so that auto hands the QP to Clarabel.

Baseline: Clarabel's default KKT solver (QDLDL), the structured solver's first try bounded by 300
epochs only, and no bound on certify's NTP-SVM (the settings before ``KKT_METHOD``, ``SMALL_WORK``
and ``SVM_MAX_WORK``); current: faer, 300 epochs or fewer by ``SMALL_WORK`` (a budget of work: the
earlier 3 s made the answering backend depend on the load), and ``SVM_MAX_WORK`` for the NTP-SVM. (A second solve of
an NTP-SVM that already failed inside the separability decision is gone from both: that change is not
a setting.) Verdicts are compared: they must agree, the settings change only the NTP-SVM.

Usage::

    .venv/bin/python benchmarks/bench_auto_fallback.py [--seed 1] [--index 1,2] [--out benchmarks/results/auto-fallback.md]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from ntpcert import NTPInstance, certify
from ntpcert.pipeline.float_verdicts import SVM_MAX_WORK
from ntpcert.solve.svm import auto, clarabel_direct
from ntpcert.util.files import atomic_write_text
from ntpcert.util.versions import stamp_versions


def mid_sized(seed: int, index: int) -> NTPInstance:
    """The ``index``-th instance of the generator with ``seed`` (module doc)."""
    rng = np.random.default_rng(seed)
    for t in range(index + 1):
        m, V, d = int(rng.integers(100, 300)), int(rng.integers(20, 60)), int(rng.integers(5, 50))
        k = int(rng.integers(1, 4))
        H = rng.standard_normal((m, d))
        C = np.zeros((m, V), dtype=np.int64)
        for j in range(m):
            kk = int(rng.integers(1, k + 1))
            S = rng.choice(V, kk, replace=False)
            C[j, S] = rng.integers(1, 6, kk)
    return NTPInstance.from_counts(H, C, name=f"mid-{seed}-{index}")


def timed(inst: NTPInstance, kkt: str | None, small_work: int,
          svm_work: int | None) -> tuple[float, float, object]:
    """``(wall seconds, CPU seconds of this process, report)`` of float certify with these settings."""
    old = clarabel_direct.KKT_METHOD, auto.SMALL_WORK
    clarabel_direct.KKT_METHOD, auto.SMALL_WORK = kkt, small_work
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        rep = certify(inst, svm_work=svm_work)
        return time.perf_counter() - t0, time.process_time() - c0, rep
    finally:
        clarabel_direct.KKT_METHOD, auto.SMALL_WORK = old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--index", default="1,2")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    certify(NTPInstance.from_counts([[1.0, 0.0], [0.0, 1.0]], [[1, 0, 0], [0, 1, 0]]))  # imports, before timing
    rows = []
    for index in (int(x) for x in args.index.split(",")):
        inst = mid_sized(args.seed, index)
        size = len(json.dumps({"embeddings": inst.embeddings.tolist(), "counts": inst.counts.tolist()}))
        new_s, new_c, new = timed(inst, "faer", auto.SMALL_WORK, SVM_MAX_WORK)
        base_s, base_c, base = timed(inst, None, 10**30, None)
        assert (new.compatible.holds, new.separable.holds) == (base.compatible.holds, base.separable.holds)
        solver = new.svm.solver if new.svm is not None else new.svm_error
        rows.append((inst, size, base_s, new_s, base_c, new_c, solver, new.separable.holds))
        print(f"{inst.name}: m={inst.m} V={inst.V} d={inst.d} ({size / 1024:.0f} KB) baseline {base_s:.1f} s, "
              f"current {new_s:.1f} s, ratio {base_s / new_s:.2f}, svm {solver}", file=sys.stderr)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = ["# Float certify where auto falls back to Clarabel", "",
             "Produced by `benchmarks/bench_auto_fallback.py` (one process: baseline = QDLDL, a first structured "
             f"try of 300 epochs, no bound on the NTP-SVM; current = faer, 300 epochs or fewer by SMALL_WORK = "
             f"{auto.SMALL_WORK:.3g} work units, SVM_MAX_WORK = {SVM_MAX_WORK:.3g} for the NTP-SVM). Load average at "
             "the end: "
             f"{load:.1f} on {os.cpu_count()} cores (a shared machine: the ratio is the figure to read).", "",
             "| instance | m | V | d | JSON | separable | baseline s | current s | ratio | baseline CPU s | current CPU s "
             "| NTP-SVM |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for inst, size, b, n, bc, nc, solver, sep in rows:
        lines.append(f"| {inst.name} | {inst.m} | {inst.V} | {inst.d} | {size / 1024:.0f} KB | {sep} | {b:.1f} | {n:.1f} | "
                     f"{b / n:.2f} | {bc:.1f} | {nc:.1f} | {solver} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        atomic_write_text(args.out, stamp_versions(text))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
