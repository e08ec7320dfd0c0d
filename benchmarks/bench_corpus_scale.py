"""Corpus scale (issue 34): a corpus of at least 1 MB of source code through a GPT-2-shaped model.

The corpus is the Python standard library's own source on this machine: the ``.py`` files directly under
``sysconfig.get_paths()["stdlib"]``, sorted by name, taken whole until the text reaches ``--bytes``
(default 2,097,152, 2 MiB: 1 MiB gives m = 62,957 2-token contexts, 2 MiB m = 119,755). Documents are the files' blank-line-separated blocks, as for any corpus file.
The model is GPT-2-small shaped (V = 50,257, d = 768, one random block, ``bench_lm_scale.save_corpus_and_model``) with a byte-level BPE of 50,257
tokens trained on that corpus; contexts are 2 tokens. Each command runs as a whole process under
``/usr/bin/time -v`` (wall time, peak RSS), as in ``bench_lm_scale.py``.

    python benchmarks/bench_corpus_scale.py --workdir /tmp/corpus-scale --out benchmarks/results/corpus-scale.md

``--commands`` picks some of certify-exact (``certify --exact --certificate-out C``, then ``verify C`` and
``tools/ntpcert_check.py C``), compare, certify.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_lm_scale import save_corpus_and_model, timed, write_results  # noqa: E402



def stdlib_corpus(n_bytes: int) -> tuple[str, list[str]]:
    """The standard library's top-level ``.py`` files, sorted, whole, until ``n_bytes`` of UTF-8 text."""
    root = sysconfig.get_paths()["stdlib"]
    parts, names, size = [], [], 0
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(root, name), encoding="utf-8", errors="strict") as f:
            text = f.read()
        parts.append(text)
        names.append(name)
        size += len(text.encode("utf-8"))
        if size >= n_bytes:
            break
    return "\n\n".join(parts), names


def setup(root: str, n_bytes: int) -> tuple[str, str]:
    """The corpus file and the model directory (reused when ``root`` has them)."""
    corpus, model = os.path.join(root, "stdlib.txt"), os.path.join(root, "gpt2-small-shaped")
    if os.path.exists(os.path.join(model, "model.safetensors")) and os.path.exists(corpus):
        return corpus, model
    text, names = stdlib_corpus(n_bytes)
    save_corpus_and_model(text, corpus, model)
    print(f"corpus: {len(names)} files, {names[0]} .. {names[-1]}, {len(text.encode('utf-8')):,} bytes",
          file=sys.stderr)
    return corpus, model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=2 << 20)
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--out", default=None)
    ap.add_argument("--workdir", default=None, help="keep the corpus and model here (reused when present)")
    ap.add_argument("--commands", nargs="+", default=["certify-exact", "compare"],
                    choices=["certify", "certify-exact", "compare"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or tmp
        os.makedirs(root, exist_ok=True)
        t0 = time.perf_counter()
        corpus, model = setup(root, args.bytes)
        setup_s = time.perf_counter() - t0
        py = [sys.executable, "-m", "ntpcert"]
        common = [corpus, "--model", model, "--context", "tokens:2", "--json", "--max-entries", str(4 * 10**9)]
        cert = os.path.join(root, "C.json")
        for name in args.commands:
            if name == "certify-exact":
                steps = [("certify --exact", py + ["certify"] + common + ["--exact", "--no-svm", "--force", "--certificate-out",
                                                                           cert]),
                         ("verify", py + ["verify", cert, "--json"]),
                         ("tools/ntpcert_check.py", [sys.executable, os.path.join(ROOT, "tools", "ntpcert_check.py"),
                                                     cert])]
            else:
                steps = [(name, py + [name] + common)]
            for label, cmd in steps:
                r = timed(cmd, args.timeout)
                if label != "certify --exact" and name == "certify-exact":
                    r["note"] = "VALID" if r["rc"] == 0 else f"not valid (exit {r['rc']})"
                rows.append({"command": label, **r})
                print(json.dumps(rows[-1]), flush=True)
    if args.out:
        write_results(table(rows, args.bytes, setup_s), args.out)


def table(rows: list[dict], n_bytes: int, setup_s: float) -> list[str]:
    """The results page's lines (``write_results`` stamps the versions)."""
    lines = [f"# Corpus scale: {n_bytes:,} bytes of the standard library's source through a GPT-2-small-shaped model",
             "", f"`python benchmarks/bench_corpus_scale.py {' '.join(sys.argv[1:])}`", "",
             f"Setup (BPE trained on the corpus, model saved) {setup_s:.0f} s; whole processes, "
             "`/usr/bin/time -v` (GB = kB/2^20).", "",
             "| command | m | V' | nnz | compatible | separable | wall s | peak GB | rc | stages (s) | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st = ", ".join(f"{k} {v}" for k, v in (r.get("stages") or {}).items())
        lines.append(f"| {r['command']} | {r.get('m') or ''} | {r.get('V_reduced') or ''} | {r.get('nnz') or ''} | "
                     f"{'' if r.get('compatible') is None else r['compatible']} | "
                     f"{'' if r.get('separable') is None else r['separable']} | {r['wall_s']} | {r['peak_gb']} | "
                     f"{r['rc']} | {st} | {str(r.get('note', ''))[:200]} |")
    return lines

if __name__ == "__main__":
    main()
