"""Scale of the model commands: a GPT-2-small-shaped model (V = 50,257, d = 768, random weights, one block to
keep the forward cheap) on the built-in pydoc text tokenised by a BPE tokenizer trained on it, 2-token
contexts. Each command runs as a whole process under ``/usr/bin/time -v`` (wall time, peak RSS).

    python benchmarks/bench_lm_scale.py --chars 2000 5000 --out benchmarks/results/lm-scale.md

``--chars 0`` means the whole text (465k characters). The setup (tokenizer, model) is timed apart and not
part of the figures; ``--workdir DIR`` keeps it for the next run. ``certify --model`` and ``compare --model``
merge the tokens that follow no context into one (:mod:`ntpcert.instance.lm.merge`), so the instance has
V' = observed + 1 tokens; the table gives m, V' and m·V' with the verdicts and each command's stages.
``--commands`` picks some of certify, certify+svm, certify+excess, compare, svm, limits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from ntpcert.util.files import atomic_write_text  # noqa: E402
from ntpcert.util.versions import stamp_versions  # noqa: E402

V_MODEL, D_MODEL = 50_257, 768


def setup(root: str) -> tuple[str, str]:
    """The corpus file (whole pydoc text) and the model directory (reused when ``root`` has them)."""
    corpus, model = os.path.join(root, "pydoc.txt"), os.path.join(root, "gpt2-small-shaped")
    if os.path.exists(os.path.join(model, "model.safetensors")) and os.path.exists(corpus):
        return corpus, model
    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text

    save_corpus_and_model(pydoc_text(None), corpus, model)
    return corpus, model


def save_corpus_and_model(text: str, corpus: str, model: str) -> None:
    """Write ``text`` to ``corpus`` and a GPT-2-small-shaped model (one random block, seed 0) with a byte-level
    BPE of V_MODEL tokens trained on ``text`` to the directory ``model``."""
    import torch
    import transformers as tf

    from tests.lm_models import train_tokenizer

    with open(corpus, "w", encoding="utf-8") as f:
        f.write(text)
    os.makedirs(model, exist_ok=True)
    train_tokenizer(text, V_MODEL, os.path.join(model, "tokenizer.json"), byte_level=True)
    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=V_MODEL, n_positions=64, n_embd=D_MODEL, n_layer=1, n_head=12,
                        bos_token_id=0, eos_token_id=0)
    tf.utils.logging.disable_progress_bar()
    tf.GPT2LMHeadModel(cfg).save_pretrained(model)


def _holds(v):
    return v.get("holds") if isinstance(v, dict) else v


def timed(cmd: list[str], timeout: float) -> dict:
    """Run ``cmd`` under /usr/bin/time -v: wall seconds, peak RSS (GB), exit code, last stderr line."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "wall_s": timeout, "peak_gb": None, "note": f"killed after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    out = {"rc": p.returncode, "wall_s": round(wall, 1), "peak_gb": round(int(rss.group(1)) / 2**20, 2) if rss else None}
    try:
        rep = json.loads(p.stdout.strip().splitlines()[-1])
        out.update({k: _holds(rep.get(k)) for k in ("m", "d", "compatible", "separable", "entropy_bound_reachable",
                                                    "excess_loss", "rel_dist_F", "margin")})
        if rep.get("m") and rep.get("support_size_mean") is not None:
            out["nnz"] = int(round(rep["m"] * rep["support_size_mean"]))  # non-zero next-token counts, sum of k_j
        voc = rep.get("vocabulary") or {}
        out["V_reduced"] = voc.get("V_reduced", rep.get("V"))
        out["merged"] = voc.get("merged", 0)
        if isinstance(rep.get("stages"), dict):
            out["stages"] = {k: round(v, 1) for k, v in rep["stages"].items()}
        notes = []
        if isinstance(rep.get("separable"), dict):
            sep = rep["separable"]
            notes.append(f"separable: {sep.get('engine')}" if sep.get("holds") is not None
                         else "separable undetermined: " + str(sep.get("reason"))[:160])
        comp = rep.get("compatible")
        if isinstance(comp, dict) and comp.get("relative_residual") is not None:
            notes.append(f"W* relative residual {comp['relative_residual']:.2e} "
                         f"({(comp.get('least_squares') or {}).get('method')})")
        if isinstance(rep.get("excess_loss"), dict) and rep["excess_loss"].get("skipped"):
            notes.append("bracket skipped: " + rep["excess_loss"]["skipped"][:80])
        if rep.get("message"):
            notes.append(str(rep["message"])[:160])
        if isinstance(rep.get("notes"), dict) and rep["notes"].get("F"):
            notes.append(rep["notes"]["F"][:240])
        if "cos_perp_mm" in rep:
            mm = rep.get("cos_perp_mm")
            why = str((rep.get("notes") or {}).get("W_mm", ""))[:140]
            notes.append("W^mm: " + (f"null ({why})" if mm is None or mm != mm else "computed"))
        if notes:
            out["note"] = "; ".join(notes)
    except (ValueError, IndexError):
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ntpcert")]
        out["note"] = lines[-1][:200] if lines else p.stderr.strip().splitlines()[0][:200]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, nargs="+", default=[2000, 5000])
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default=None)
    ap.add_argument("--workdir", default=None, help="keep the corpus and model here (reused when present)")
    ap.add_argument("--commands", nargs="+", default=["certify", "certify+svm", "compare"],
                    choices=["certify", "certify+svm", "certify+excess", "compare", "svm", "limits"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or tmp
        os.makedirs(root, exist_ok=True)
        t0 = time.perf_counter()
        corpus, model = setup(root)
        setup_s = time.perf_counter() - t0
        py = [sys.executable, "-m", "ntpcert"]
        for chars in args.chars:
            cut = [] if chars == 0 else ["--max-chars", str(chars)]
            common = [corpus, "--model", model, "--context", "tokens:2", "--json", "--max-entries", str(4 * 10**9)] + cut
            out_dir = os.path.join(root, "limits-out")
            for name, extra in (("certify", ["--no-svm"]), ("certify+svm", []), ("certify+excess", ["--excess"]),
                                ("compare", []), ("svm", []), ("limits", ["--out-dir", out_dir, "--force"])):
                if name not in args.commands:
                    continue
                cmd = py + [name.split("+")[0]] + common + extra
                r = timed(cmd, args.timeout)
                rows.append({"chars": chars or 465_000, "command": name, **r})
                print(json.dumps(rows[-1]), flush=True)
    load = os.getloadavg()[0]
    lines = [f"# Model commands at V = {V_MODEL:,}, d = {D_MODEL} (GPT-2-small shaped, random weights, 1 block)",
             "", f"Setup (BPE tokenizer trained on the whole pydoc text, model saved) {setup_s:.0f} s; "
             f"load average {load:.1f} at the end. Whole processes, `/usr/bin/time -v`.", "",
             "| corpus chars | command | m | V' | m × V' | compatible | separable | wall s | peak GB | rc | stages (s) "
             "| note |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, vr = r.get("m"), r.get("V_reduced")
        mv = f"{m * vr:,}" if m and vr else ""
        st = ", ".join(f"{k} {v}" for k, v in (r.get("stages") or {}).items())
        lines.append(f"| {r['chars']:,} | {r['command']} | {m or ''} | {vr or ''} | {mv} | {r.get('compatible')} | "
                     f"{r.get('separable')} | {r['wall_s']} | {r['peak_gb']} | {r['rc']} | {st} | {r.get('note', '')} |")
    write_results(lines, args.out)


def write_results(lines: list[str], out: str | None) -> None:
    """The results text (with the versions line) to ``out`` when given, and to stdout."""
    text = stamp_versions("\n".join(lines) + "\n")
    if out:
        atomic_write_text(out, text)
    print(text)


if __name__ == "__main__":
    main()
