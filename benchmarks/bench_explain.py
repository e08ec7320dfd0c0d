#!/usr/bin/env python3
"""Whole-process timings of ``ntpcert explain`` on the built-in pydoc corpus (char, k = 2,
``onehot-concat``), against ``ntpcert certify --json`` run interleaved in the same script, and the
cost of the ``why_not_*`` keys inside ``certify`` (in process, on the built-in corpus and the whole
pydoc text at k = 3 and 4).

The target of the issue: ``explain pydoc -k 2`` in at most 30 s, whole process, including the excess-loss
bracket (``excess_loss``: float, or certified with ``--exact``), which ``certify --excess --json`` computes too.

Writes ``benchmarks/results/explain.md``. Usage: ``python benchmarks/bench_explain.py --repeat 3``
(``--no-corpora`` skips the whole-text rows, which take minutes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from ntpcert.util.versions import stamp_versions
from ntpcert.experiments.bench.timing import load_average, median, run_process

TARGET_S = 30.0


def _ntpcert() -> list[str]:
    exe = Path(sys.executable).with_name("ntpcert")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ntpcert.cli"]


def whole_process(repeat: int) -> tuple[str, float]:
    cmds = [
        ("certify pydoc -k 2 --json", ["certify", "pydoc", "-k", "2", "--json"]),
        ("explain pydoc -k 2", ["explain", "pydoc", "-k", "2"]),
        ("explain pydoc -k 2 --json", ["explain", "pydoc", "-k", "2", "--json"]),
        ("explain pydoc -k 2 --exact", ["explain", "pydoc", "-k", "2", "--exact"]),
    ]
    runs: dict[str, list] = {name: [] for name, _ in cmds}
    for _ in range(repeat):  # interleaved, so that load changes hit every command alike
        for name, args in cmds:
            runs[name].append(run_process(_ntpcert() + args))
    base = median([p.seconds for p in runs[cmds[0][0]] if p.returncode == 0])
    rows = ["| command | median wall s | runs | peak MB | ratio to certify --json | within 30 s |",
            "|---|---|---|---|---|---|"]
    worst = 0.0
    for name, _ in cmds:
        ps = runs[name]
        ok = [p.seconds for p in ps if p.returncode == 0]
        med = median(ok) if ok else float("nan")
        if name.startswith("explain"):
            worst = max([worst, *[p.seconds for p in ps]])
        fails = [p for p in ps if p.returncode != 0]
        within = "" if not name.startswith("explain") else ("yes" if ok and max(ok) <= TARGET_S and not fails else "NO")
        rows.append(f"| `ntpcert {name}` | {med:.2f} | {', '.join(f'{p.seconds:.2f}' for p in ps)} | "
                    f"{max(p.peak_mb for p in ps):.0f} | {med / base:.2f} | {within} |")
    return "\n".join(rows) + "\n", worst


def certify_overhead(corpora: bool) -> str:
    from ntpcert.instance.load import load_instance
    from ntpcert.pipeline.explain import why_not_of_report
    from ntpcert.pipeline.float_verdicts import certify

    rows = ["| instance | m | certify s | why_not s | ratio | why_not_separable | why_not_compatible |",
            "|---|---|---|---|---|---|---|"]
    cases = [(2, None)] + ([(3, 500_000), (4, 500_000)] if corpora else [])
    for k, chars in cases:
        inst = load_instance("pydoc", context_length=k, max_chars=chars)
        t = time.perf_counter()
        rep = certify(inst)
        tc = time.perf_counter() - t
        t = time.perf_counter()
        w = why_not_of_report(rep)
        tw = time.perf_counter() - t

        def show(key: str) -> str:
            v = w.get(key)
            if v is None:
                return "-"
            if "skipped" in v:
                return "skipped: " + v["skipped"]
            size = v.get("size", v.get("equations"))
            return f"{size} ({'irreducible' if v['irreducible'] else 'not shown irreducible'})"

        name = "pydoc built-in, k = 2" if chars is None else f"whole pydoc text, k = {k}"
        rows.append(f"| {name} | {inst.m} | {tc:.2f} | {tw:.3f} | {tw / tc:.3f} | {show('why_not_separable')} | "
                    f"{show('why_not_compatible')} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-corpora", action="store_true", help="skip the whole-text rows of the overhead table")
    a = ap.parse_args()
    load = load_average()
    table, worst = whole_process(a.repeat)
    over = certify_overhead(not a.no_corpora)
    text = (f"# explain: why the entropy bound is out of reach\n\nLoad before: {load}. Medians of {a.repeat} "
            f"interleaved runs; ratios to `certify --json` in the same script.\n\n"
            f"## Whole process, pydoc built-in (char, k = 2, onehot-concat; m = 912, V = 86, d = 172)\n\n{table}\n"
            f"Slowest `explain` run: {worst:.2f} s (target: at most {TARGET_S:g} s).\n\n"
            f"## Cost of the `why_not_*` keys inside `certify` (in process, one run each)\n\n{over}")
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    tmp = res / ".explain.md.tmp"
    tmp.write_text(stamp_versions(text), encoding="utf-8")
    os.replace(tmp, res / "explain.md")
    print(text, flush=True)


if __name__ == "__main__":
    main()
