#!/usr/bin/env python3
"""Does ``ntpcert bench``'s headline ranking agree with qpbenchmark's on the same instances?

Runs ``ntpcert bench --scale SCALE --out OUT --export-qpbenchmark QPB`` (whole process timed, with
the load average), then qpbenchmark's recipe on the exported test set (``run`` then ``report``),
and compares three rankings by shifted geometric mean of runtime (shift 10 s):

1. ntpcert's headline (separable instances; Kesler rows + solve, failures at the time limit);
2. qpbenchmark's own rule applied to ntpcert's ``results.csv`` (``Results.build_shgeom_df``);
3. qpbenchmark's runs of its solvers on the exported QPs (the solve call only, qpsolvers' own settings).

Writes ``benchmarks/results/qpbenchmark-SCALE.md``. Usage:
``python benchmarks/bench_qpbenchmark_agreement.py --scale tiny``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from ntpcert.experiments.bench.qpbench_results import settings_name  # noqa: E402
from ntpcert.experiments.bench.timing import load_average  # noqa: E402
from ntpcert.util.files import atomic_write_text  # noqa: E402
from ntpcert.util.versions import stamp_versions  # noqa: E402


def qpbenchmark_ranking(test_set_py: Path, results_csv: Path, settings: str) -> dict[str, float]:
    """qpbenchmark's runtime ratios (1.0 = best) of the solvers in ``results_csv``."""
    from qpbenchmark.benchmark import load_test_set
    from qpbenchmark.results import Results

    ts = load_test_set(str(test_set_py))
    res = Results(results_csv, ts)
    df = res.build_shgeom_df(metric="runtime", shift=10.0,
                             not_found_values={k: v.runtime for k, v in ts.tolerances.items()})
    return {solver: float(df.loc[solver, settings]) for solver in df.index}


def order(ratios: dict[str, float], keep=None) -> list[str]:
    return [b for b in sorted(ratios, key=ratios.get) if keep is None or b in keep]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="tiny")
    p.add_argument("--time-limit", type=float, default=60.0)
    args = p.parse_args()
    qpb = str(Path(sys.executable).with_name("qpbenchmark"))
    with tempfile.TemporaryDirectory() as tmp:
        out, exp = Path(tmp) / "bench", Path(tmp) / "qpb"
        load0 = load_average()
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "ntpcert", "bench", "--scale", args.scale, "--time-limit",
                               str(args.time_limit), "--out", str(out), "--export-qpbenchmark", str(exp), "--json"],
                              check=True, stdout=subprocess.PIPE, text=True)
        bench_s = time.perf_counter() - t0
        load1 = load_average()
        ours = {b: v["sgm_ratio"] for b, v in json.loads(proc.stdout)["summary"]["all"].items()}
        settings = settings_name(1e-6)
        theirs_on_ours = qpbenchmark_ranking(exp / "ntp_svm.py", out / "results.csv", settings)
        t1 = time.perf_counter()
        for cmd in ("run", "report"):
            subprocess.run([qpb, "ntp_svm.py", "--results-path", "results/ntp_svm.csv", cmd, "--author", "ntpcert"],
                           cwd=exp, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        qpb_s = time.perf_counter() - t1
        theirs = qpbenchmark_ranking(exp / "ntp_svm.py", exp / "results" / "ntp_svm.csv", settings)
    common = set(ours) & set(theirs)
    lines = [f"# Headline ranking against qpbenchmark's ({args.scale})", "",
             f"- `ntpcert bench --scale {args.scale}` whole process: {bench_s:.1f} s (load average before "
             f"{load0}, after {load1}); qpbenchmark run + report on the export: {qpb_s:.1f} s.",
             "- Ratios are shifted geometric means of runtime (shift 10 s) over the best solver, on the separable "
             "instances (the export holds only those).", "",
             "| solver | ntpcert headline | qpbenchmark's rule on ntpcert's results.csv | qpbenchmark's own runs |",
             "|---|---|---|---|"]
    for b in order(ours):
        lines.append(f"| {b} | {ours[b]:.2f} | {theirs_on_ours.get(b, float('nan')):.2f} | "
                     f"{theirs[b]:.2f} |" if b in theirs else f"| {b} | {ours[b]:.2f} | "
                     f"{theirs_on_ours.get(b, float('nan')):.2f} | - |")
    for b in order(theirs):
        if b not in ours:
            lines.append(f"| {b} | - | - | {theirs[b]:.2f} |")
    lines += ["", f"- Order, ntpcert headline: {', '.join(order(ours))}",
              f"- Order, qpbenchmark's rule on the same runs: {', '.join(order(theirs_on_ours))}",
              f"- Order of the common solvers, ntpcert: {', '.join(order(ours, common))}; qpbenchmark's runs: "
              f"{', '.join(order(theirs, common))}",
              f"- Same order on the same runs: {order(ours) == order(theirs_on_ours)}; same order of the common "
              f"solvers against qpbenchmark's own runs: {order(ours, common) == order(theirs, common)}"]
    lines += ["", "What can make the orders differ: qpbenchmark times the solve call only, with its own solver "
              "settings; ntpcert times the Kesler rows and the solve, with its backend options; with the 10 s "
              "shift, millisecond runs hardly move the mean, so the slowest instances decide both rankings."]
    text = "\n".join(lines) + "\n"
    atomic_write_text(HERE / "results" / f"qpbenchmark-{args.scale}.md", stamp_versions(text))
    print(text)


if __name__ == "__main__":
    main()
