"""Glued tokens (``ntpcert.solve.split_glue``) on the model-scale benchmark of ``bench_lm_scale.py``: the whole pydoc
text through the GPT-2-shaped model (V = 50,257, d = 768, one random block), 2-token contexts, unseen tokens
merged. Times the whitening, the group (pair tests by Newton, and those the projection of the mean h settled
first) and the N pairs the glue shows, and names the glued tokens.

    python benchmarks/bench_glue.py --workdir /tmp/lmscale --out benchmarks/results/glue-model-scale.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_lm_scale import setup, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None, help="keep the corpus and model here (reused when present)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import numpy as np

    from ntpcert.instance.lm.load import load_model_data
    from ntpcert.solve.split_glue import glue_group, whitened

    with tempfile.TemporaryDirectory() as tmp:
        corpus, model = setup(args.workdir or tmp)
        t0 = time.perf_counter()
        md = load_model_data(corpus, model, context="tokens:2", merge_unseen=True, max_entries=4 * 10**9)
        load_s = time.perf_counter() - t0
    inst = md.instance
    t0 = time.perf_counter()
    G = whitened(inst.embeddings)
    white_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = glue_group(inst, G=G)
    glue_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    N = g.nonseparable_pairs(inst) if g is not None else np.zeros((0, 2))
    pairs_s = time.perf_counter() - t0
    names = inst.token_names
    total = inst.m * inst.V - int(inst.support_sizes.sum())
    lines = [f"# Glued tokens at model scale (m = {inst.m:,}, V' = {inst.V:,}, d = {inst.d})", "",
             f"Load average {os.getloadavg()[0]:.1f} at the end; one process. Reading the corpus through the model "
             f"{load_s:.1f} s (not part of the figures).", "",
             "| step | seconds | result |", "|---|---|---|",
             f"| whitening (H = QR) | {white_s:.1f} | |"]
    if g is None:
        lines.append(f"| group | {glue_s:.1f} | nothing glued |")
    else:
        worst = max(e.residual for e in g.edges)
        lines += [f"| group | {glue_s:.1f} | {g.group.size} tokens glued; {g.tests} tests "
                  f"({g.opened} settled by the projection of the mean h), largest Stiemke residual {worst:.1e} |",
                  f"| N pairs of the glue | {pairs_s:.1f} | {len(N):,} of {total:,} out-of-support pairs |", "",
                  "Glued: " + ", ".join(repr(names[int(t)]) if names else str(int(t)) for t in g.group)]
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
