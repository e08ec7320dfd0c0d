#!/usr/bin/env python3
"""Compatibility (4) of tall systems: particular solutions against the null-space route, in one
process, interleaved.

``certify --exact`` (``exact_certify``, no SVM, no excess bracket) on tall instances (more equality
rows than the (token, feature) columns they use), once as it is and once with the tall route
switched off (the decision engine's and the exact stage's), which is the route before it: a
fraction-free null space of the r x r Gram matrix, listed in the certificate and re-checked vector
by vector (or undetermined past 2,500 rows). Reports wall seconds of each, the ratio, the verdicts
and the certificate's compatibility method.

Writes ``benchmarks/results/tall-compat.md``. Usage: ``python benchmarks/bench_tall_compat.py
[--repeat 2]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ntpcert.util.versions import stamp_versions  # noqa: E402
from ntpcert import NTPInstance  # noqa: E402
from ntpcert.experiments.bench.timing import load_average  # noqa: E402


def equal_counts(m: int, d: int) -> NTPInstance:
    """Gaussian embeddings, tokens 0 / 1 at random with token 2 everywhere, equal counts (b = 0)."""
    rng = np.random.default_rng(0)
    H = rng.standard_normal((m, d))
    C = np.zeros((m, 3), dtype=np.int64)
    C[:2, :2] = 1
    C[2 + np.arange(m - 2), (rng.random(m - 2) < 0.5).astype(int)] = 1
    C[:, 2] = 1
    return NTPInstance.from_counts(H, C, name=f"equal-counts m={m} d={d}")


def teacher(m: int, d: int, V: int, seed: int = 0) -> NTPInstance:
    """Compatible counts with log-odds in log 2 and log 3 (:mod:`ntpcert.instance.datasets.compatible`)."""
    from ntpcert.instance.datasets.compatible import integer_log_odds

    return integer_log_odds(np.random.default_rng(seed), m, d, V)


def run(inst: NTPInstance, tall: bool) -> tuple[float, object]:
    import ntpcert.pipeline.decide as decide
    import ntpcert.pipeline.exact_verdicts as ev
    from ntpcert.exact.compatibility import check_compatibility_by_columns

    route = check_compatibility_by_columns if tall else (lambda instance: None)
    decide.check_compatibility_by_columns = route
    ev.check_compatibility_by_columns = route
    try:
        t0 = time.perf_counter()
        rep = ev.exact_certify(inst, svm=False, excess=False)
        return time.perf_counter() - t0, rep
    finally:
        decide.check_compatibility_by_columns = check_compatibility_by_columns
        ev.check_compatibility_by_columns = check_compatibility_by_columns


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    cases = [equal_counts(900, 6), teacher(400, 3, 4), teacher(2000, 4, 5), teacher(3000, 8, 10)]
    lines = ["# Compatibility of tall systems: particular solutions vs the null-space route", "",
             f"`python benchmarks/bench_tall_compat.py --repeat {args.repeat}`, one process, interleaved; "
             f"load average at start {load_average()}. Wall seconds of `exact_certify(svm=False, "
             "excess=False)`: the float stage, the exact stage and the independent check.", "",
             "| instance | r | tall route s | null-space route s | ratio | verdicts (tall / null-space) |",
             "|---|---|---|---|---|---|"]
    for inst in cases:
        new, old = [], []
        for _ in range(args.repeat):
            t, rep_new = run(inst, True)
            new.append(t)
            t, rep_old = run(inst, False)
            old.append(t)
        r = rep_new.float_report.subspace.system.n_eq
        verdicts = (f"{rep_new.compatible.holds} ({rep_new.compatibility.engine}, "
                    f"{'VALID' if rep_new.check.valid else 'INVALID'}) / {rep_old.compatible.holds} "
                    f"({rep_old.compatibility.engine}, {'VALID' if rep_old.check.valid else 'INVALID'})")
        row = (f"| {inst.name} | {r} | {min(new):.2f} | {min(old):.2f} | {min(new) / min(old):.3f} | {verdicts} |")
        print(row, flush=True)
        lines.append(row)
    lines += ["", "The ratio is tall / null-space (below 1: the tall route is faster). Best of the repeats."]
    out = HERE / "results" / "tall-compat.md"
    out.write_text(stamp_versions("\n".join(lines) + "\n"))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
