#!/usr/bin/env python3
"""The pair screen (``ntpcert.pipeline.pair_screen``) on character corpora with k = 5, and what it costs
where it finds nothing.

1. **Whole processes** under ``/usr/bin/time -v`` (wall seconds, peak RSS) on two texts of more than
   400,000 characters, char tokens, k = 5, one-hot-concat embeddings: ``certify --json``, ``certify --exact
   --json --certificate-out C``, ``verify C`` and ``python tools/ntpcert_check.py C``. The texts: the whole
   pydoc topics text (465,048 characters on CPython 3.11.7) and the docstrings of the standard library's
   top-level modules cut to 65 characters (the recipe: :func:`stdlib65`). With ``--baseline DIR`` (a
   checkout of the tree before the screen) its ``certify`` and ``certify --exact`` run interleaved with
   these on pydoc, under ``--baseline-timeout`` seconds.
2. **The screen alone**, in this process, on those corpora and on pydoc at k = 2, 3, 4: pairs tried, LPs,
   simplex iterations, units of work, the circuit found.
3. **Where it finds nothing**: exactly separable data (``ntpcert.instance.datasets.separable``), whose
   pairs have no ray: the whole budget is spent, and this is its cost.
4. **Rays on one pair**: seeded small instances (d <= 4, V <= 6, integer or Gaussian embeddings, supports of
   one token or mixed) decided not separable by the HiGHS Farkas LP with its ray checked exactly, and how
   many of them the screen finds no ray for.

Writes ``benchmarks/results/pair-screen.md``. Usage: ``python benchmarks/bench_pair_screen.py
[--baseline DIR] [--baseline-timeout 300] [--search 600] [--no-processes]``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ntpcert.experiments.bench.timing import load_average  # noqa: E402
from ntpcert.util.versions import stamp_versions  # noqa: E402

#: Characters kept by :func:`stdlib65`.
KEEP65 = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .\n")


def stdlib65() -> str:
    """The docstrings of the top-level modules of this Python's standard library (``*.py`` directly in
    ``sysconfig.get_paths()["stdlib"]``, sorted by name; module, class and function docstrings in
    ``ast.walk`` order, by ``ast.get_docstring``), joined by blank lines, with every character outside
    letters, digits, space, '.' and newline dropped: 65 characters, about 850,000 of them on CPython 3.11."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    docs = []
    for path in sorted(lib.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    docs.append(doc)
    return "".join(c for c in "\n\n".join(docs) if c in KEEP65)


def timed(cmd: list[str], pythonpath: Path, timeout: float) -> dict:
    """``cmd`` under /usr/bin/time -v: wall seconds, peak RSS (GB), exit code, stdout."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env, timeout=timeout,
                           cwd=str(pythonpath))
    except subprocess.TimeoutExpired:
        return {"rc": "killed", "wall": timeout, "rss": None, "out": f"killed after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return {"rc": p.returncode, "wall": wall, "rss": int(rss.group(1)) / 2**20 if rss else None, "out": p.stdout,
            "err": p.stderr}


def _verdicts(out: str) -> str:
    try:
        rep = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return out.strip().splitlines()[-1][:160] if out.strip() else ""
    parts = []
    for key in ("compatible", "separable"):
        v = rep.get(key) or {}
        parts.append(f"{key} {v.get('holds')} [{v.get('engine')}]")
    if "certificate_valid" in rep:
        parts.append("certificate " + ("VALID" if rep["certificate_valid"] else "INVALID"))
    split = rep.get("split") or {}
    if split.get("status") not in (None, "ok", "exact"):
        parts.append(f"split {split.get('status')}")
    return ", ".join(parts)


def processes(corpora: dict, baseline: Path | None, baseline_timeout: float, lines: list) -> None:
    py = sys.executable
    lines += ["## Whole processes", "",
              "Char tokens, k = 5, one-hot-concat; `/usr/bin/time -v`, one run each, in this order (the tree "
              "before the screen, where given, right after the same command on this tree).", "",
              "| corpus | tree | command | wall s | peak RSS GB | exit | result |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (data, extra) in corpora.items():
            cert = Path(tmp) / f"{name}.cert.json"
            base = [py, "-m", "ntpcert", "certify", data, "--tokenizer", "char", "-k", "5", "--embedding",
                    "onehot-concat", *extra, "--json"]
            runs = [("this", "certify --json", base),
                    ("this", "certify --exact --json --certificate-out C",
                     base + ["--exact", "--certificate-out", str(cert)]),
                    ("this", "verify C", [py, "-m", "ntpcert", "verify", str(cert)]),
                    ("this", "tools/ntpcert_check.py C", [py, str(ROOT / "tools" / "ntpcert_check.py"), str(cert)])]
            if baseline is not None and name == "pydoc":
                runs.insert(1, ("before", "certify --json", base))
                runs.insert(3, ("before", "certify --exact --json", base + ["--exact"]))
            for tree, label, cmd in runs:
                path = ROOT if tree == "this" else baseline
                r = timed(cmd, path, baseline_timeout if tree == "before" else 900.0)
                what = _verdicts(r["out"]) if "certify" in label else (r["out"].strip().splitlines() or [""])[-1][:120]
                if r["rc"] == "killed":
                    what = r["out"]
                rss = f"{r['rss']:.2f}" if r["rss"] is not None else "-"
                row = f"| {name} | {tree} | `{label}` | {r['wall']:.1f} | {rss} | {r['rc']} | {what} |"
                print(row, flush=True)
                lines.append(row)
    lines.append("")


def screens(insts: dict, lines: list) -> None:
    from ntpcert.pipeline import pair_screen as ps

    lines += ["## The screen alone (in process)", "",
              "| instance | m | d | V | seconds | pairs | LPs | simplex iterations | work | ray |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, inst in insts.items():
        t0 = time.perf_counter()
        r = ps.screen(inst)
        sec = time.perf_counter() - t0
        if r.found is not None:
            f = r.found
            names = inst.token_names
            pair = ", ".join(repr(names[t]) if names else str(t) for t in f.tokens)
            ray = (f"pair ({pair}): circuit of {f.contexts.size} contexts ({int(f.shared.sum())} shared, "
                   f"{int((~f.shared).sum())} split), weights up to {max(abs(w) for w in f.weights)}")
        else:
            ray = "none: " + r.reason
        row = (f"| {name} | {inst.m} | {inst.d} | {inst.V} | {sec:.2f} | {r.pairs_tried} | {r.lps} | "
               f"{r.lp_iterations} | {r.work:.3g} | {ray} |")
        print(row, flush=True)
        lines.append(row)
    lines.append("")


def search(n: int, lines: list) -> None:
    from ntpcert import NTPInstance
    from ntpcert.exact.separability import farkas_ray_lp
    from ntpcert.pipeline import pair_screen as ps

    counts = {}
    for f, fam in enumerate(("integer, mixed supports", "Gaussian, one-token supports", "Gaussian, mixed supports")):
        nonsep = without = 0
        for i in range(n):
            rng = np.random.default_rng(100_000 * (f + 1) + i)
            d = int(rng.integers(2, 5))
            m = int(rng.integers(d + 2, 13))
            V = int(rng.integers(3, 7))
            H = (rng.integers(-2, 3, size=(m, d)).astype(float) if fam.startswith("integer")
                 else rng.standard_normal((m, d)))
            H[~H.any(axis=1), 0] = 1.0
            C = np.zeros((m, V), dtype=np.int64)
            for j in range(m):
                k = 1 if "one-token" in fam else int(rng.integers(1, V))
                C[j, rng.choice(V, size=k, replace=False)] = 1
            inst = NTPInstance.from_counts(H, C)
            ray, _ = farkas_ray_lp(inst)
            if ray is None:
                continue
            nonsep += 1
            without += ps.screen(inst).found is None
        counts[fam] = (nonsep, without)
    lines += ["## Rays on one pair", "",
              f"{n} seeded instances per family (d in 2..4, m in d + 2..12, V in 3..6); *not separable*: the "
              "HiGHS Farkas LP's ray, made exact and checked exactly.", "",
              "| family | not separable | no ray on one pair |", "|---|---|---|"]
    for fam, (a, b) in counts.items():
        lines.append(f"| {fam} | {a} | {b} |")
        print(fam, a, b, flush=True)
    lines.append("")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=None, help="a checkout of the tree before the screen")
    ap.add_argument("--baseline-timeout", type=float, default=300.0)
    ap.add_argument("--search", type=int, default=600, help="seeded small instances per family")
    ap.add_argument("--no-processes", action="store_true")
    args = ap.parse_args()

    from ntpcert.instance.datasets import pydoc
    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from ntpcert.instance.datasets.separable import hypercube_separable
    from ntpcert.instance.io.corpus import instance_from_text

    text65 = stdlib65()
    whole = len(pydoc_text(None))
    lines = ["# The pair screen: character corpora at k = 5, and its cost where it finds nothing", "",
             f"`python benchmarks/bench_pair_screen.py{' --baseline DIR' if args.baseline else ''} --search "
             f"{args.search}`; load average at start {load_average()}.", "",
             f"Texts: the whole pydoc topics text ({whole:,} characters, `certify pydoc --max-chars {whole}`), and "
             f"`stdlib65` ({len(text65):,} characters, SHA-256 {hashlib.sha256(text65.encode()).hexdigest()[:16]}..., "
             "the docstrings of the standard library's top-level modules cut to 65 characters; recipe in the "
             "script).", ""]
    with tempfile.TemporaryDirectory() as tmp:
        path65 = Path(tmp) / "stdlib65.txt"
        path65.write_text(text65, encoding="utf-8")
        if not args.no_processes:
            processes({"pydoc": ("pydoc", ["--max-chars", str(whole)]), "stdlib65": (str(path65), [])},
                      args.baseline, args.baseline_timeout, lines)
        insts = {f"pydoc k = {k}": pydoc(k=k, max_chars=None, max_entries=None) for k in (2, 3, 4, 5)}
        insts["stdlib65 k = 5"] = instance_from_text(text65, tokenizer="char", k=5, embedding="onehot-concat",
                                                      max_entries=None)
    screens(insts, lines)
    sep = {f"hypercube separable m = {m}, d = {d}, V = {V}": hypercube_separable(np.random.default_rng(0), m, d, V)
           for m, d, V in ((3000, 6, 20), (20000, 8, 64))}
    lines += ["Where no pair has a ray (exactly separable data), the screen spends its whole budget:", ""]
    screens(sep, lines)
    search(args.search, lines)
    out = HERE / "results" / "pair-screen.md"
    out.write_text(stamp_versions("\n".join(lines) + "\n"))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
