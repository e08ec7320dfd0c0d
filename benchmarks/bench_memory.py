"""How memory grows with the corpus: ``certify --model`` (float verdicts) on the first N characters of the pydoc
text through the GPT-2-small-shaped model of :mod:`bench_lm_scale` (V = 50,257, d = 768, one random block,
2-token contexts), each size one whole process under ``/usr/bin/time -v``.

    python benchmarks/bench_memory.py --chars 100000 200000 0 --workdir /tmp/lmscale \\
        --out benchmarks/results/memory-model.md

For each size the table gives m, V' (observed next tokens + 1), nnz (the non-zero next-token counts,
sum of k_j), m·V' and the peak RSS. The memory model is a least-squares fit of the peak RSS on the
terms the instance stores: a base (interpreter, torch, the model), bytes per context (H in float64,
8·d, and per-context arrays) and bytes per cell of the dense (m, V') counts and probabilities, which
dominate. ``--separability-solver highs`` bounds each run's time, not its memory: the separability stage is
then the HiGHS LP, refused by its size at once, so a run is the load (tokenise, count, capture, merge) and the
compatibility stage, where the peak is (at 100,000 characters the structured solver's budget of work took
300 s more and ended undetermined). From the fit and V' as it grows with m (a power law fitted on the same sizes) the table
gives the largest m whose predicted peak stays under 24 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_lm_scale import setup, timed, write_results  # noqa: E402


GB = 2 ** 30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, nargs="+", default=[100_000, 200_000, 0])
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit-gb", type=float, default=24.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or tmp
        os.makedirs(root, exist_ok=True)
        corpus, model = setup(root)
        for chars in args.chars:
            cut = [] if chars == 0 else ["--max-chars", str(chars)]
            cmd = [sys.executable, "-m", "ntpcert", "certify", corpus, "--model", model, "--context", "tokens:2",
                   "--json", "--no-svm", "--separability-solver", "highs", "--max-entries", str(4 * 10**9)] + cut
            r = timed(cmd, args.timeout)
            r["chars"] = chars or 465_000
            rows.append(r)
            print(json.dumps(r), flush=True)
    ok = [r for r in rows if r.get("rc") == 0 and r.get("m") and r.get("peak_gb")]
    lines = ["# Memory model: `certify --model` against the corpus size", "",
             "GPT-2-small-shaped model (V = 50,257, d = 768, one random block), 2-token contexts of the first N "
             "characters of the pydoc text; whole processes under `/usr/bin/time -v` (peak RSS, GB = kB/2^20); "
             "`certify --json --no-svm --separability-solver highs` (module doc).", "",
             "| chars | m | V' | nnz | m·V' | peak GB | wall s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        mv = r["m"] * r["V_reduced"] if r.get("m") and r.get("V_reduced") else None
        lines.append(f"| {r['chars']:,} | {r.get('m', '')} | {r.get('V_reduced', '')} | {r.get('nnz', '')} | "
                     f"{mv if mv is None else f'{mv:,}'} | {r.get('peak_gb')} | {r.get('wall_s')} |")
    if len(ok) >= 3:
        m = np.array([r["m"] for r in ok], dtype=float)
        vr = np.array([r["V_reduced"] for r in ok], dtype=float)
        peak = np.array([r["peak_gb"] for r in ok], dtype=float) * GB
        A = np.column_stack([np.ones_like(m), m, m * vr])
        coef, *_ = np.linalg.lstsq(A, peak, rcond=None)
        base, per_ctx, per_cell = coef
        fit = A @ coef
        k, c = np.polyfit(np.log(m), np.log(vr), 1)  # V' ≈ e^c m^k
        grid = np.logspace(np.log10(m.max()), 7, 2000)
        pred = base + per_ctx * grid + per_cell * grid * np.exp(c) * grid ** k
        fits = grid[pred <= args.limit_gb * GB]
        largest = int(fits.max()) if fits.size else None
        lines += ["", f"Fit of the peak RSS (bytes) = base + a·m + b·m·V' on the {len(ok)} sizes: base "
                      f"{base / GB:.2f} GB, a = {per_ctx:,.0f} B per context, b = {per_cell:.1f} B per cell of (m, V'); "
                      f"largest residual {np.abs(fit - peak).max() / GB:.2f} GB"
                      + (" (as many sizes as terms: the fit interpolates them, so it is not checked here; a fourth "
                         "size would check it)." if len(ok) == A.shape[1] else "."),
                  f"V' grows as {np.exp(c):.2f}·m^{k:.2f} on these sizes. Predicted largest m under "
                  f"{args.limit_gb:g} GB: **{largest:,}** (2-token contexts of this model's BPE)." if largest else
                  "No m above the largest measured fits the limit.",
                  "", "The counts and probabilities are dense (m, V') arrays, so memory follows m·V', not nnz: "
                      "the sparse instance of issue 34 would make the per-cell term a per-nnz one."]
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
