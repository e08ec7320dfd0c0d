"""How memory grows with the corpus: ``certify --exact --model`` on the first N characters of the standard
library's source (:mod:`bench_corpus_scale`: 2 MiB of ``.py`` files) through its GPT-2-small-shaped model
(V = 50,257, d = 768, one random block, 2-token contexts), each size one whole process under
``/usr/bin/time -v``.

    python benchmarks/bench_memory.py --chars 500000 1000000 1500000 0 --workdir /tmp/corpus-scale \\
        --out benchmarks/results/memory-model.md

Two measurements per size:

* **the instance's own bytes**, counted array by array in this process (no process noise): H (float64, 8·d
  bytes a context), the CSR counts (8 bytes a non-zero count and 8 its column, 8 a row pointer), each
  context's support array and weight, and the names. A fit of those bytes on m and nnz gives the bytes per
  context and per non-zero count, exactly (the sizes are not collinear in the two terms' sense: the fit's
  residual is printed).
* **the whole process's peak RSS** (GB = kB/2^20) of ``certify --exact --no-svm --certificate-out``: load
  (tokenise, count, capture), the verdicts, the certificate and the in-process independent check. Its fit
  ``peak = base + a·m`` on the sizes gives the largest m predicted under ``--limit-gb``; nnz grows with m
  (about 2 a context here), so the per-nnz term is taken from the first measurement, not refitted.
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

from bench_corpus_scale import setup  # noqa: E402
from bench_lm_scale import timed, write_results  # noqa: E402

GB = 2 ** 30


def instance_bytes(corpus: str, model: str, chars: int) -> dict:
    """m, V', nnz and the bytes of the merged sparse instance of the first ``chars`` characters (0: all),
    from the counts alone (H is m·d float64: its bytes are 8·m·d, counted without a forward pass)."""
    from tokenizers import Tokenizer

    from ntpcert.instance.lm.contexts import ContextSpec, count_contexts, split_documents
    from ntpcert.instance.lm.load import counts_instance
    from ntpcert.instance.lm.merge import token_merge

    with open(corpus, encoding="utf-8") as f:
        text = f.read()
    text = text if not chars else text[:chars]
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    docs = [e.ids for e in tok.encode_batch(split_documents(text), add_special_tokens=False)]
    counts = count_contexts(docs, ContextSpec.parse("tokens:2", field="context"), tok.get_vocab_size())
    merge = token_merge(counts)
    names = [f"t{i}" for i in range(counts.V)]
    H = np.zeros((counts.m, 1))  # d = 1 here: H's own bytes are added as 8·m·d below
    inst = counts_instance(H, counts, names, merge, "memory")
    csr = inst.csr
    parts = {"csr": csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes,
             "supports": sum(s.nbytes + 112 for s in inst.supports),  # array header 112 B on CPython 3.11
             "weights_totals": inst.weights.nbytes + inst.totals.nbytes}
    return {"m": inst.m, "V_reduced": inst.V, "nnz": inst.nnz, "parts": parts}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, nargs="+", default=[500_000, 1_000_000, 1_500_000, 0])
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit-gb", type=float, default=24.0)
    ap.add_argument("--d", type=int, default=768)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or tmp
        os.makedirs(root, exist_ok=True)
        corpus, model = setup(root, 2 << 20)
        for chars in args.chars:
            cut = [] if chars == 0 else ["--max-chars", str(chars)]
            cert = os.path.join(root, f"memory-{chars}.json")
            cmd = [sys.executable, "-m", "ntpcert", "certify", corpus, "--model", model, "--context", "tokens:2",
                   "--json", "--no-svm", "--exact", "--certificate-out", cert, "--max-entries", str(4 * 10**9)] + cut
            r = timed(cmd, args.timeout)
            own = instance_bytes(corpus, model, chars)
            r.update({"chars": chars or len(open(corpus, encoding="utf-8").read()), **own})
            r["instance_bytes"] = sum(own["parts"].values()) + 8 * own["m"] * args.d
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "parts"}), flush=True)
            if os.path.exists(cert):
                os.remove(cert)
    lines = ["# Memory model: the sparse instance and `certify --exact --model` against the corpus size", "",
             "GPT-2-small-shaped model (V = 50,257, d = 768, one random block), 2-token contexts of the first N "
             "characters of 2 MiB of the standard library's source (`bench_corpus_scale.py`); whole processes "
             "under `/usr/bin/time -v` (peak RSS, GB = kB/2^20), `certify --exact --no-svm --certificate-out C` "
             "(module doc).", "",
             "| chars | m | V' | nnz | m·V' (dense cells avoided) | instance MB | peak GB | wall s | rc |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mv = r["m"] * r["V_reduced"]
        lines.append(f"| {r['chars']:,} | {r['m']:,} | {r['V_reduced']:,} | {r['nnz']:,} | {mv:,} | "
                     f"{r['instance_bytes'] / 2**20:,.0f} | {r.get('peak_gb')} | {r.get('wall_s')} | {r.get('rc')} |")
    m = np.array([r["m"] for r in rows], dtype=float)
    nnz = np.array([r["nnz"] for r in rows], dtype=float)
    own = np.array([r["instance_bytes"] - 8 * r["m"] * args.d for r in rows], dtype=float)
    A = np.column_stack([m, nnz])
    (per_ctx, per_nnz), *_ = np.linalg.lstsq(A, own, rcond=None)
    resid = float(np.abs(A @ np.array([per_ctx, per_nnz]) - own).max())
    lines += ["", f"**The instance** (counted array by array): {8 * args.d:,} B per context for H (float64, d = "
                  f"{args.d}) + {per_ctx:,.1f} B per context (row pointer, support array, weight and total) + "
                  f"{per_nnz:,.1f} B per non-zero count (count and column), fitted on {len(rows)} sizes, largest "
                  f"residual {resid:,.0f} B. Nothing grows with m·V': the dense (m, V') counts and probabilities "
                  "these sizes would have needed are the column above, at 16 B a cell."]
    ok = [r for r in rows if r.get("rc") == 0 and r.get("peak_gb")]
    if len(ok) >= 2:
        mm = np.array([r["m"] for r in ok], dtype=float)
        peak = np.array([r["peak_gb"] for r in ok], dtype=float) * GB
        B = np.column_stack([np.ones_like(mm), mm])
        (base, slope), *_ = np.linalg.lstsq(B, peak, rcond=None)
        res = float(np.abs(B @ np.array([base, slope]) - peak).max())
        largest = int((args.limit_gb * GB - base) / slope) if slope > 0 else None
        lines += ["", f"**The whole process** (`certify --exact`): peak ≈ {base / GB:.2f} GB + {slope / 1e3:,.1f} kB per "
                      f"context, fitted on {len(ok)} sizes (largest residual {res / GB:.2f} GB); per context that is "
                      f"{slope / (8 * args.d):.1f} copies of h_j's {8 * args.d:,} bytes (H in the capture, the instance, "
                      "the exact checks' integer mantissas, the certificate's text and the independent check's "
                      f"re-read). Predicted largest m under {args.limit_gb:g} GB: **{largest:,}** 2-token contexts "
                      "(about 2 non-zero counts a context here)."]
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
