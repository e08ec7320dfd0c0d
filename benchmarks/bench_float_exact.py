#!/usr/bin/env python3
"""Float ``certify`` against ``certify --exact`` on the corpora of ``results/certify-corpora.md``,
interleaved in one script (issue 33: float never slower than exact).

Corpora (the whole ``pydoc_data.topics`` text, ``--max-chars 500000``): characters k = 3 and k = 4
with ``onehot-concat`` (as in ``certify-corpora.md``), characters k = 3 with ``random:256`` and word
tokens k = 1 with ``random:256`` (the independent measurement's two lines), and the built-in ``pydoc``
(20,000 characters, k = 2).

Each measurement is one fresh process of this script (``--worker``, through
:func:`ntpcert.experiments.bench.timing.run_process`) that loads the corpus and then times, in process,
what the command runs after loading:

* float: :func:`ntpcert.pipeline.float_verdicts.certify` and the ``why_not_*`` keys
  (:func:`ntpcert.pipeline.explain.why_not_of_report`), as ``ntpcert certify DATA --json``;
* exact: :func:`ntpcert.pipeline.exact_verdicts.exact_certify` with the ``why_not`` hook
  (:func:`ntpcert.pipeline.explain.why_not_with_sections`), as ``ntpcert certify DATA --exact --json``.

Both leave out the split P / N of the out-of-support pairs (the JSON key ``split``): it is the same LP
(:func:`ntpcert.solve.split.nonseparable_split`) in both commands, the exact one adds its exact
repair, and on these corpora it currently runs for more than ten minutes; ``--split`` puts it back in
both. Loading the corpus (the same in both) is not timed. Float and exact alternate which runs first
from one repeat to the next. The ratio column is the median over repeats of float / exact, wall and
user+sys CPU of the timed part.

``--baseline DIR`` runs the same on an earlier source tree too (its ``ntpcert`` package first on
``PYTHONPATH``; e.g. ``git archive COMMIT ntpcert | tar -x -C DIR``), interleaved with this one.

Writes ``benchmarks/results/float-vs-exact.md``. Usage:
``python benchmarks/bench_float_exact.py [--repeat 3] [--corpora word,char3] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

WHOLE = {"max_chars": 500_000}
#: name -> (description, load_instance keywords)
CORPORA = {
    "char3": ("chars k = 3, onehot-concat", dict(WHOLE, context_length=3)),
    "char3-random": ("chars k = 3, random:256", dict(WHOLE, context_length=3, embedding="random:256")),
    "word": ("words k = 1, random:256", dict(WHOLE, tokenizer="word", context_length=1, embedding="random:256")),
    "char4": ("chars k = 4, onehot-concat", dict(WHOLE, context_length=4)),
    "pydoc": ("built-in pydoc (20,000 chars, k = 2)", {}),
}
MODES = ("float", "exact")


# ------------------------------------------------------------------ worker (one fresh process)
def _verdict(v) -> dict:
    return {"holds": v.holds, "engine": v.engine}


def worker(mode: str, corpus: str, split: bool) -> None:
    """Load ``corpus``, time ``mode`` in this process, print one JSON line."""
    from functools import partial

    from ntpcert.instance.load import load_instance
    from ntpcert.pipeline.explain import why_not_of_report, why_not_with_sections

    inst = load_instance("pydoc", **CORPORA[corpus][1])
    w0, c0 = time.perf_counter(), time.process_time()
    if mode == "float":
        from ntpcert.pipeline.float_verdicts import certify

        rep = certify(inst)
        t = time.perf_counter()
        out = rep.to_json()
        out.update(why_not_of_report(rep, separability_solver="auto"))
        stages = dict(rep.stages, why_not=time.perf_counter() - t)
        if split:
            from ntpcert.pipeline.split_section import split_key

            t = time.perf_counter()
            split_key(inst, rep.separable.holds)
            stages["split"] = time.perf_counter() - t
        comp, sep = rep.compatible, rep.separable
        fit = out["compatible"]
    else:
        from ntpcert.pipeline.exact_verdicts import exact_certify

        rep = exact_certify(inst, why_not=partial(why_not_with_sections, separability_solver="auto"), split=split)
        out = rep.to_json()
        stages = {**rep.float_report.stages, **rep.stages}
        comp, sep = rep.compatible, rep.separable
        fit = out["compatible"]
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"wall": wall, "cpu": cpu, "m": inst.m, "V": inst.V, "d": inst.d, "stages": stages,
                      "compatible": _verdict(comp), "separable": _verdict(sep),
                      "valid": getattr(getattr(rep, "check", None), "valid", None),
                      "residual": fit.get("residual"), "least_squares": (fit.get("least_squares") or {}).get("method"),
                      "iterations": (fit.get("least_squares") or {}).get("iterations")}), flush=True)


# ------------------------------------------------------------------ driver
def _run(mode: str, corpus: str, tree: str | None, split: bool, timeout: float) -> dict:
    from ntpcert.experiments.bench.timing import run_process

    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, corpus] + (["--split"] if split else [])
    root = os.path.abspath(tree) if tree else str(HERE.parent)
    env = {"PYTHONPATH": root, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    pt = run_process(cmd, timeout=timeout, env=env)
    lines = [ln for ln in pt.stdout.splitlines() if ln.startswith("{")]
    if pt.returncode != 0 or not lines:
        why = "timed out" if pt.seconds >= timeout * 0.99 else (pt.stderr.strip().splitlines() or ["no output"])[-1]
        return {"rc": pt.returncode, "error": why, "process": pt.seconds, "peak_mb": pt.peak_mb}
    out = json.loads(lines[-1])
    out.update(rc=0, process=pt.seconds, peak_mb=pt.peak_mb)
    return out


def _median(xs: list[float]) -> float:
    from ntpcert.experiments.bench.timing import median

    return median(xs)


def _verdicts(r: dict) -> str:
    if r.get("rc"):
        return f"rc {r['rc']}: {r.get('error')}"
    c, s = r["compatible"], r["separable"]
    text = f"(4) {c['holds']} [{c['engine']}], (6) {s['holds']} [{s['engine']}]"
    if r.get("valid") is not None:
        text += ", certificate " + ("VALID" if r["valid"] else "INVALID")
    return text


def _stages(r: dict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in (r.get("stages") or {}).items() if v >= 0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "CORPUS"), help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated, of {', '.join(CORPORA)}")
    ap.add_argument("--split", action="store_true", help="also time the split P / N in both (the JSON key split)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    ap.add_argument("--baseline", default=None, metavar="DIR", help="an earlier source tree, run interleaved")
    ap.add_argument("--out", default=str(HERE / "results" / "float-vs-exact.md"))
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], a.worker[1], a.split)
        return
    sys.path.insert(0, str(HERE.parent))
    from ntpcert.experiments.bench.timing import load_average
    from ntpcert.util.versions import stamp_versions

    corpora = [c for c in a.corpora.split(",") if c]
    bad = [c for c in corpora if c not in CORPORA]
    if bad:
        raise SystemExit(f"--corpora: unknown {', '.join(bad)} (expected some of {', '.join(CORPORA)})")
    if a.baseline and not os.path.isdir(os.path.join(a.baseline, "ntpcert")):
        raise SystemExit(f"--baseline: {a.baseline} holds no ntpcert package")
    trees = {"this tree": None, **({"baseline": a.baseline} if a.baseline else {})}
    load = load_average()
    res: dict[tuple[str, str, str], list[dict]] = {}
    for rep in range(a.repeat):
        for corpus in corpora:
            order = MODES if rep % 2 == 0 else MODES[::-1]
            for who, tree in trees.items():
                for mode in order:
                    r = _run(mode, corpus, tree, a.split, a.timeout)
                    res.setdefault((who, corpus, mode), []).append(r)
                    print(f"[{rep + 1}/{a.repeat}] {who} {corpus} {mode}: "
                          f"{r.get('wall', float('nan')):.2f} s {_verdicts(r)}", file=sys.stderr, flush=True)
    rows, ratios = [], []
    for who in trees:
        for corpus in corpora:
            fl, ex = res[(who, corpus, "float")], res[(who, corpus, "exact")]
            size = next((f"m = {r['m']}, V = {r['V']}, d = {r['d']}" for r in fl + ex if not r.get("rc")), "")
            pairs = [(f, e) for f, e in zip(fl, ex) if not f.get("rc") and not e.get("rc")]
            wall = _median([f["wall"] / e["wall"] for f, e in pairs]) if pairs else float("nan")
            cpu = _median([f["cpu"] / e["cpu"] for f, e in pairs]) if pairs else float("nan")
            agree = all(f["compatible"]["holds"] == e["compatible"]["holds"]
                        and f["separable"]["holds"] == e["separable"]["holds"] for f, e in pairs)
            ratios.append(f"| {who} | {CORPORA[corpus][0]} ({size}) | "
                          f"{_median([r['wall'] for r in fl if not r.get('rc')]):.2f} | "
                          f"{_median([r['wall'] for r in ex if not r.get('rc')]):.2f} | {wall:.2f} | {cpu:.2f} | "
                          f"{'yes' if agree and pairs else 'NO'} |")
            for mode, runs in (("float", fl), ("exact", ex)):
                walls = ", ".join(f"{r['wall']:.2f}" if not r.get("rc") else "-" for r in runs)
                last = runs[-1]
                ls = (f"{last.get('least_squares')} ({last.get('iterations')} it.)"
                      if last.get("least_squares") not in (None, "none") else str(last.get("least_squares")))
                rows.append(f"| {who} | {CORPORA[corpus][0]} | {mode} | {walls} | "
                            f"{_median([r['cpu'] for r in runs if not r.get('rc')]):.2f} | "
                            f"{max(r.get('peak_mb', 0) for r in runs):.0f} | {_verdicts(last)} | {ls} | "
                            f"{_stages(last)} |")
    split_note = ("The split P / N is timed in both (`--split`)." if a.split else
                  "The split P / N (JSON key `split`; the same LP in both commands) is left out of both; "
                  "`--split` puts it back.")
    text = (f"# Float `certify` against `certify --exact` on the pydoc corpora\n\n"
            f"Load before: {load}. {a.repeat} interleaved repeat(s); each run a fresh process (`--worker`) that "
            f"times, in process, what the command runs after loading the corpus. {split_note} "
            f"`OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}`.\n\n"
            "| tree | corpus | float median wall s | exact median wall s | float / exact wall | "
            "float / exact CPU | verdicts agree |\n|---|---|---|---|---|---|---|\n" + "\n".join(ratios) + "\n\n"
            "| tree | corpus | mode | wall s (runs) | median user+sys CPU s | process peak MB | verdicts | "
            "least-squares point | stages (s, >= 0.05; last run) |\n|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + f"\n\nLoad after: {load_average()}.\n")
    out = Path(a.out)
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_name("." + out.name + ".tmp")
    tmp.write_text(stamp_versions(text), encoding="utf-8")
    os.replace(tmp, out)
    print(text)


if __name__ == "__main__":
    main()
