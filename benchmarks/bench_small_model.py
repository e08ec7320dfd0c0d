#!/usr/bin/env python3
"""The small trained case of the non-separable issue: a 2-block GPT-2 (d = 64, BPE of 1,024 tokens) trained
by ``benchmarks/train_small_gpt2.py``, read on the first 2,000 characters of pydoc with ``tokens:2``.

In one script, interleaved: the split by the single LP of :mod:`ntpcert.solve.split` (the baseline, given a
wall-clock cap here because it is only measured) against the split by small LPs
(:mod:`ntpcert.solve.split_screen`), and ``ntpcert certify`` / ``ntpcert compare`` as whole processes.

Usage: ``python benchmarks/bench_small_model.py [--workdir DIR] [--lp-cap 300]``; writes
``benchmarks/results/small-model.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from ntpcert.experiments.bench.timing import run_process  # noqa: E402
from ntpcert.util.versions import versions_line  # noqa: E402


def _split_lp(inst, cap: float):
    """The single split LP with a wall-clock cap (a measurement only): (status, seconds)."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.optimize import linprog

    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.rows.kesler import sparse_rows
    from ntpcert.solve.structured.classes import class_instance

    t0 = time.perf_counter()
    _, red = class_instance(inst)
    s = KeslerSystem.build(red)
    C, d = red.V, red.d
    A_mar = sparse_rows(red.embeddings, C, s.mar_context, s.mar_anchor, s.mar_token)
    A_eq = sparse_rows(red.embeddings, C, s.eq_context, s.eq_token, s.eq_anchor)
    q, r = A_mar.shape[0], A_eq.shape[0]
    res = linprog(np.r_[np.zeros(C * d), -np.ones(q)], A_ub=sp.hstack([-A_mar, sp.identity(q)], format="csr"),
                  b_ub=np.zeros(q), A_eq=sp.hstack([A_eq, sp.csr_matrix((r, q))], format="csr"), b_eq=np.zeros(r),
                  bounds=[(None, None)] * (C * d) + [(0, 1)] * q, method="highs-ds", options={"time_limit": cap})
    return res.message[:60], time.perf_counter() - t0, q


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--lp-cap", type=float, default=300.0)
    ap.add_argument("--timeout", type=float, default=400.0)
    ap.add_argument("--out", default=str(HERE / "results" / "small-model.md"))
    a = ap.parse_args()
    from train_small_gpt2 import train

    from ntpcert.instance.lm import load_model_data
    from ntpcert.solve.split import nonseparable_split

    with tempfile.TemporaryDirectory() as tmp:
        root = a.workdir or tmp
        if not os.path.exists(os.path.join(root, "model", "model.safetensors")):
            train(root, 1500)
        corpus, model = os.path.join(root, "first2000.txt"), os.path.join(root, "model")
        data = load_model_data(corpus, model, context="tokens:2", merge_unseen=True)
        inst = data.instance
        t0 = time.perf_counter()
        sc = nonseparable_split(inst, method="screen")
        t_sc = time.perf_counter() - t0
        msg, t_lp, q = _split_lp(inst, a.lp_cap)
        py = [sys.executable, "-m", "ntpcert"]
        common = [corpus, "--model", model, "--context", "tokens:2", "--json"]
        rows = []
        for name, cmd in (("certify", py + ["certify"] + common), ("compare", py + ["compare"] + common)):
            pt = run_process(cmd, timeout=a.timeout)
            try:
                rep = json.loads(pt.stdout.strip().splitlines()[-1]) if pt.stdout.strip() else {}
            except ValueError:
                rep = {}
            sep = rep.get("separable")
            rows.append((name, pt.seconds, pt.returncode, (sep or {}).get("engine") if isinstance(sep, dict) else sep))
    lines = ["# The small trained model (2-block GPT-2, d = 64, BPE 1,024, first 2,000 characters, tokens:2)", "",
             versions_line(), "",
             f"Instance: m = {inst.m}, d = {inst.d}, V = {inst.V} after merging (full vocabulary {data.V}); "
             f"{q} out-of-support rows on the token classes.", "",
             "| what | seconds | result |", "|---|---|---|",
             f"| split, single LP (baseline; capped at {a.lp_cap:.0f} s) | {t_lp:.1f} | {msg} |",
             f"| split, small LPs | {t_sc:.1f} | {sc.status}: N = {sc.n_nonseparable}, P = {sc.n_separable} |"]
    for name, sec, rc, eng in rows:
        lines.append(f"| `ntpcert {name}` (process, timeout {a.timeout:.0f} s) | {sec:.1f} | exit {rc}; separable "
                     f"engine {eng} |")
    lines += ["", f"Ratio single LP / small LPs: at least {t_lp / max(t_sc, 1e-9):.1f}x (the LP did not finish "
              "when its message says time limit)."]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
