"""The capture's cost with the recomputed logits checked on every batch against the sampled check of
:mod:`ntpcert.instance.lm.capture` (at least ``RESIDUAL_CONTEXTS`` contexts, the head skipped elsewhere), in
one process, interleaved: the GPT-2-small-shaped model of :mod:`bench_lm_scale` on the pydoc text.

    python benchmarks/bench_capture.py --workdir /tmp/lmscale --chars 0 --out benchmarks/results/capture.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_lm_scale import setup, write_results  # noqa: E402



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from ntpcert.instance.lm import capture as cap
    from ntpcert.instance.lm import load_model_data

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus, model = setup(args.workdir or tmp)
        kw = {"max_entries": 4 * 10**9, "merge_unseen": True}
        if args.chars:
            kw["max_chars"] = args.chars
        load_model_data(corpus, model, **kw)  # warm: tokenizer, files in the page cache
        H = {}
        for r in range(args.repeat):
            for name, sample in (("every batch", 10**12), ("sampled", cap.RESIDUAL_CONTEXTS)):
                old = cap.RESIDUAL_CONTEXTS
                cap.RESIDUAL_CONTEXTS = sample
                try:
                    t0 = time.perf_counter()
                    md = load_model_data(corpus, model, **kw)
                    wall = time.perf_counter() - t0
                finally:
                    cap.RESIDUAL_CONTEXTS = old
                H[name] = md.instance.embeddings
                rows.append((r, name, wall, md.instance.m, md.residual, md.residual_contexts, os.getloadavg()[0]))
                print(rows[-1], flush=True)
    same = bool(np.array_equal(H["every batch"], H["sampled"]))
    med = {n: float(np.median([w for _, k, w, *_ in rows if k == n])) for n in ("every batch", "sampled")}
    lines = ["# Capture: the residual check on every batch against a sample of batches", "",
             "`load_model_data` (tokenise, count, capture, merge) of the pydoc text"
             + (f" (first {args.chars:,} characters)" if args.chars else " (whole)")
             + " through the GPT-2-small-shaped model (V = 50,257, d = 768, one random block), in one process, "
               "interleaved.", "",
             "| run | residual checked on | wall s | m | residual | contexts checked | load |", "|---|---|---|---|---|---|---|"]
    for r, name, wall, m, res, n, load in rows:
        lines.append(f"| {r} | {name} | {wall:.1f} | {m:,} | {res:.2e} | {n:,} | {load:.2f} |")
    lines += ["", f"Median wall: every batch {med['every batch']:.1f} s, sampled {med['sampled']:.1f} s: "
                  f"**{med['every batch'] / med['sampled']:.1f}x**. The captured h are "
                  f"{'identical (bit for bit)' if same else 'NOT identical'} in both."]
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
