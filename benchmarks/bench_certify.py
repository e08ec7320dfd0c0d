#!/usr/bin/env python3
"""Whole-process timings of ``ntpcert certify``, ``limits`` and ``verify`` with the structured
engine deciding (issue: one engine decides), against the HiGHS LP path run in the same script
where that path finishes in the time allowed.

Parts (each writes ``benchmarks/results/certify-<part>.md``):

``small``
    V = 50, m = 200, d = 250, Gaussian embeddings, supports of 1..5 tokens (seed 0):
    ``svm``, ``certify --json``, ``limits --out``, and the LP path
    (``certify --json --separability-solver highs --no-lemma1``, with ``--lp-timeout``).
``large``
    V = 2000, m = 1000, d = 1024, supports 1..3: ``svm``, ``certify --json``,
    ``certify --exact --certificate-out C``, ``verify C --data FILE``.
``pydoc``
    the built-in corpus: ``certify --exact`` with the structured engine and with HiGHS.
``corpora``
    the whole text of ``pydoc_data.topics``: char k = 3 ``onehot-concat`` and word k = 1
    ``random:256`` with ``--exact``, char k = 4 float.
``large-exact``
    ``certify --exact --certificate-out C`` and ``verify C --data FILE`` on the V = 2000 instance, by
    ``--baseline DIR`` and by this tree (or ``--tree DIR``), interleaved, with the ratio of each.
``baseline``
    the two heaviest ``--exact`` lines (word k = 1 on the whole pydoc text; V = 2000, m = 1000,
    d = 1024 with ``--certificate-out``) run by this tree and by an earlier source tree given with
    ``--baseline DIR`` (its ``ntpcert`` package first on ``PYTHONPATH``, ``python -P``; e.g.
    ``git archive COMMIT ntpcert | tar -x -C DIR``), interleaved, with the ratio of each.

Usage: ``python benchmarks/bench_certify.py small --repeat 3`` (parts: small large pydoc corpora
baseline all).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from ntpcert.util.versions import stamp_versions
from ntpcert.experiments.bench.families import gaussian_instance
from ntpcert.experiments.bench.timing import load_average, median, run_process

WHOLE_TEXT = ["--max-chars", "500000"]


def _ntpcert() -> list[str]:
    exe = Path(sys.executable).with_name("ntpcert")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ntpcert.cli"]


def write_instance(path: Path, *, V: int, m: int, d: int, kmax: int, seed: int = 0) -> None:
    from ntpcert.instance.io import write_npz

    write_npz(gaussian_instance(np.random.default_rng(seed), V=V, m=m, d=d, kmin=1, kmax=kmax), path)


def run(args: list[str], timeout: float | None = None, tree: str | None = None) -> dict:
    """One ``ntpcert ARGS`` process: wall seconds, user + sys CPU seconds (from the reaped child's
    rusage), peak MB, exit code, the JSON it printed (if any). ``tree``: run the ``ntpcert`` package of
    that source tree instead (first on ``PYTHONPATH``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if tree is None:
        pt = run_process(_ntpcert() + args, timeout=timeout)
    else:
        pt = run_process([sys.executable, "-P", "-m", "ntpcert", *args], timeout=timeout,
                         env={"PYTHONPATH": os.path.abspath(tree)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    out = {"cmd": "ntpcert " + " ".join(args), "wall": pt.seconds, "cpu": cpu, "peak_mb": pt.peak_mb,
           "rc": pt.returncode}
    lines = [ln for ln in pt.stdout.splitlines() if ln.startswith("{")]
    if pt.returncode == 0 and lines:
        try:
            out["json"] = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    elif pt.returncode == 0:
        out["stdout"] = pt.stdout.strip().splitlines()[:1]
    else:
        out["error"] = "timed out" if timeout and pt.seconds >= timeout * 0.99 else \
            (pt.stderr.strip().splitlines() or ["no output"])[-1]
    return out


def verdicts(r: dict) -> str:
    j = r.get("json")
    if not j:
        return r.get("error", "") or " ".join(r.get("stdout", []))
    if "valid" in j:  # ntpcert verify --json
        return "VALID" if j["valid"] else f"INVALID: {j.get('reason')}"
    c, s = j.get("compatible"), j.get("separable")
    if not isinstance(c, dict) or not isinstance(s, dict):  # ntpcert svm
        return f"separable {j.get('separable')}, norm {j.get('norm', float('nan')):.6g}"
    bits = [f"compatible {c.get('holds')} [{c.get('engine')}]", f"separable {s.get('holds')} [{s.get('engine')}]"]
    if "certificate_valid" in j:
        bits.append("certificate " + ("VALID" if j["certificate_valid"] else "INVALID"))
    return ", ".join(bits)


def stages(r: dict) -> str:
    j = r.get("json") or {}
    st = j.get("stages") or {}
    return ", ".join(f"{k} {v:.2f}" for k, v in st.items() if v >= 0.05)


def table(rows: list[tuple[str, list[dict]]], base: float | None = None, base_name: str = "") -> str:
    head = "| command | median wall s | runs | median user+sys CPU s | peak MB | " + \
        (f"ratio to {base_name} | " if base else "") + \
        "verdicts | stages (s, >= 0.05) |\n|---|---|---|---|---|" + ("---|" if base else "") + "---|---|\n"
    body = []
    for name, runs in rows:
        walls = [r["wall"] for r in runs if r["rc"] == 0]
        med = median(walls)
        peak = max((r["peak_mb"] for r in runs), default=float("nan"))
        ratio = f"{med / base:.2f} | " if base else ""
        fails = [r for r in runs if r["rc"] != 0]
        note = verdicts(runs[-1]) if not fails else f"rc {fails[0]['rc']}: {fails[0].get('error', '')}"
        walls_text = ", ".join(f"{r['wall']:.2f}" for r in runs)
        cpu = median([r["cpu"] for r in runs if r["rc"] == 0])
        body.append(f"| `{name}` | {med:.2f} | {walls_text} | {cpu:.2f} | {peak:.0f} | {ratio}{note} | "
                    f"{stages(runs[-1])} |")
    return head + "\n".join(body) + "\n"


def _write(part: str, text: str) -> None:
    text = text.rstrip("\n") + f"\n\nLoad after: {load_average()}.\n"
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    target = res / f"certify-{part}.md"
    tmp = res / f".certify-{part}.md.tmp"
    tmp.write_text(stamp_versions(text), encoding="utf-8")
    os.replace(tmp, target)
    print(text, flush=True)


def _repeat(cmds: list[tuple[str, list[str], float | None]], repeat: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {name: [] for name, _, _ in cmds}
    for _ in range(repeat):  # interleaved, so that load changes hit every command alike
        for name, args, timeout in cmds:
            out[name].append(run(args, timeout))
    return out


def part_small(a) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "gauss-V50-m200-d250.npz"
        write_instance(f, V=50, m=200, d=250, kmax=5)
        load = load_average()
        cmds = [
            ("svm FILE --json", ["svm", str(f), "--json"], None),
            ("certify FILE --json", ["certify", str(f), "--json"], None),
            ("limits FILE --out DIR", ["limits", str(f), "--out", str(Path(tmp) / "lim"), "--force", "--json"], None),
            ("certify FILE --json --no-lemma1", ["certify", str(f), "--json", "--no-lemma1"], None),
        ]
        res = _repeat(cmds, a.repeat)
        lp = run(["certify", str(f), "--json", "--separability-solver", "highs", "--no-lemma1"], a.lp_timeout)
        base = median([r["wall"] for r in res["svm FILE --json"]])
        lp_text = (f"did not finish in {a.lp_timeout:g} s" if lp["rc"] != 0
                   else f"{lp['wall']:.1f} s ({verdicts(lp)})")
        text = (f"# certify on V = 50, m = 200, d = 250 (supports 1..5)\n\nLoad before: {load}. "
                f"Medians of {a.repeat} interleaved runs; ratios to `ntpcert svm` on the same file.\n\n"
                + table(list(res.items()), base, "svm")
                + f"\nThe LP path (`certify FILE --json --separability-solver highs --no-lemma1`, the engine before "
                  f"this change): {lp_text}.\n")
    _write("small", text)


def part_large(a) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "gauss-V2000-m1000-d1024.npz"
        c = Path(tmp) / "large.cert.json"
        write_instance(f, V=2000, m=1000, d=1024, kmax=3)
        load = load_average()
        cmds = [
            ("svm FILE --json", ["svm", str(f), "--json"], None),
            ("certify FILE --json", ["certify", str(f), "--json"], None),
            ("certify FILE --exact --certificate-out C", ["certify", str(f), "--exact", "--json", "--certificate-out",
                                                          str(c), "--force"], None),
            ("verify C --data FILE", ["verify", str(c), "--data", str(f)], None),
        ]
        res = _repeat(cmds, a.repeat)
        size = c.stat().st_size / 1e6 if c.exists() else float("nan")
        base = median([r["wall"] for r in res["svm FILE --json"]])
        text = (f"# certify on V = 2000, m = 1000, d = 1024 (supports 1..3)\n\nLoad before: {load}. Medians of "
                f"{a.repeat} interleaved runs; ratios to `ntpcert svm`. Certificate: {size:.0f} MB.\n\n"
                + table(list(res.items()), base, "svm"))
    _write("large", text)


def part_pydoc(a) -> None:
    load = load_average()
    cmds = [
        ("certify pydoc --exact", ["certify", "pydoc", "--exact", "--json"], None),
        ("certify pydoc --json", ["certify", "pydoc", "--json"], None),
        ("certify pydoc --exact --separability-solver highs",
         ["certify", "pydoc", "--exact", "--json", "--separability-solver", "highs"], a.lp_timeout),
    ]
    res = _repeat(cmds, a.repeat)
    base = median([r["wall"] for r in res["certify pydoc --exact --separability-solver highs"] if r["rc"] == 0])
    text = (f"# certify on the built-in pydoc corpus (char, k = 2, onehot-concat; m = 912, V = 86, d = 172)\n\n"
            f"Load before: {load}. Medians of {a.repeat} interleaved runs; ratios to the HiGHS engine.\n\n"
            + table(list(res.items()), None if np.isnan(base) else base, "HiGHS engine"))
    _write("pydoc", text)


def part_corpora(a) -> None:
    load = load_average()
    word = [*WHOLE_TEXT, "--tokenizer", "word", "-k", "1", "--embedding", "random:256"]
    tmp = tempfile.TemporaryDirectory()
    cert = str(Path(tmp.name) / "word.cert.json")
    cmds = [
        ("certify pydoc (whole text) -k 3 --exact", ["certify", "pydoc", *WHOLE_TEXT, "-k", "3", "--exact", "--json"],
         a.corpus_timeout),
        ("certify pydoc (whole text) --tokenizer word -k 1 --embedding random:256 --exact --certificate-out C",
         ["certify", "pydoc", *word, "--exact", "--json", "--certificate-out", cert, "--force"], a.corpus_timeout),
        ("verify C --data pydoc (the word-level corpus above)", ["verify", cert, "--json", "--data", "pydoc", *word],
         a.corpus_timeout),
        ("certify pydoc (whole text) -k 4 --json", ["certify", "pydoc", *WHOLE_TEXT, "-k", "4", "--json"],
         a.corpus_timeout),
    ]
    with tmp:
        res = _repeat(cmds, a.repeat)
        size = os.path.getsize(cert) / 1e6 if os.path.exists(cert) else float("nan")
    rows = []
    for name, runs in res.items():
        j = runs[-1].get("json") or {}
        sizes = f" (m = {j.get('m')}, V = {j.get('V')}, d = {j.get('d')})" if "m" in j else ""
        rows.append((name + sizes, runs))
    text = (f"# certify on the whole pydoc text (465,000 characters)\n\nLoad before: {load}. "
            f"{a.repeat} run(s) each, timeout {a.corpus_timeout} s. Word-level certificate: {size:.0f} MB.\n\n"
            + table(rows))
    _write("corpora", text)


def part_baseline(a) -> None:
    if not a.baseline or not os.path.isdir(os.path.join(a.baseline, "ntpcert")):
        raise SystemExit("baseline: give --baseline DIR, a source tree holding an earlier ntpcert package")
    word = ["pydoc", *WHOLE_TEXT, "--tokenizer", "word", "-k", "1", "--embedding", "random:256"]
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "gauss-V2000-m1000-d1024.npz"
        write_instance(f, V=2000, m=1000, d=1024, kmax=3)
        load = load_average()
        lines = [
            ("certify pydoc (whole text) --tokenizer word -k 1 --embedding random:256 --exact --certificate-out C",
             ["certify", *word, "--exact", "--json", "--force", "--certificate-out", str(Path(tmp) / "w.json")]),
            ("certify V=2000,m=1000,d=1024 FILE --exact --certificate-out C",
             ["certify", str(f), "--exact", "--json", "--force", "--certificate-out", str(Path(tmp) / "g.json")]),
        ]
        rows, ratios = [], []
        for name, args in lines:
            res: dict[str, list[dict]] = {"baseline": [], "this tree": []}
            for _ in range(a.repeat):  # interleaved
                res["baseline"].append(run(args, a.corpus_timeout, tree=a.baseline))
                res["this tree"].append(run(args, a.corpus_timeout))
            for who, runs in res.items():
                rows.append((f"{name} [{who}]", runs))
            ok = [(b, t) for b, t in zip(res["baseline"], res["this tree"]) if b["rc"] == 0 and t["rc"] == 0]
            wall = median([t["wall"] / b["wall"] for b, t in ok])
            cpu = median([t["cpu"] / b["cpu"] for b, t in ok])
            ratios.append(f"- {name}: this tree / baseline = {wall:.2f} wall, {cpu:.2f} user+sys CPU")
    text = (f"# certify --exact: this tree against an earlier one ({a.baseline})\n\nLoad before: {load}. "
            f"{a.repeat} interleaved run(s) each.\n\n" + table(rows) + "\n" + "\n".join(ratios) + "\n")
    _write("baseline", text)


def part_large_exact(a) -> None:
    """``certify --exact --certificate-out C`` on V = 2000, m = 1000, d = 1024 and ``verify C --data
    FILE``: an earlier tree (``--baseline DIR``) and this one (or ``--tree DIR``) interleaved, with the
    ratio of each pair of runs; writes ``certify-large-exact.md``."""
    if not a.baseline or not os.path.isdir(os.path.join(a.baseline, "ntpcert")):
        raise SystemExit("large-exact: give --baseline DIR, a source tree holding an earlier ntpcert package")
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "gauss-V2000-m1000-d1024.npz"
        write_instance(f, V=2000, m=1000, d=1024, kmax=3)
        load = load_average()
        trees = {"baseline": a.baseline, "this tree": a.tree}
        res: dict[str, list[dict]] = {}
        for _ in range(a.repeat):  # interleaved
            for who, tree in trees.items():
                c = Path(tmp) / f"{who.replace(' ', '-')}.cert.json"
                for name, args in [
                    ("certify FILE --exact --certificate-out C",
                     ["certify", str(f), "--exact", "--json", "--force", "--certificate-out", str(c)]),
                    ("verify C --data FILE", ["verify", str(c), "--data", str(f), "--json"]),
                ]:
                    res.setdefault(f"{name} [{who}]", []).append(run(args, a.corpus_timeout, tree=tree))
        ratios = []
        for name in ("certify FILE --exact --certificate-out C", "verify C --data FILE"):
            pairs = [(b, t) for b, t in zip(res[f"{name} [baseline]"], res[f"{name} [this tree]"])
                     if b["rc"] == 0 and t["rc"] == 0]
            if pairs:
                wall = median([t["wall"] / b["wall"] for b, t in pairs])
                cpu = median([t["cpu"] / b["cpu"] for b, t in pairs])
                ratios.append(f"- {name}: this tree / baseline = {wall:.2f} wall, {cpu:.2f} user+sys CPU "
                              f"(median of {len(pairs)} interleaved pairs)")
    text = (f"# certify --exact on V = 2000, m = 1000, d = 1024 (supports 1..3): this tree "
            f"({a.tree or 'the working tree'}) against {a.baseline}\n\nLoad before: {load}. {a.repeat} interleaved "
            f"run(s) each; user+sys CPU from the reaped process.\n\n" + table(list(res.items())) + "\n"
            + "\n".join(ratios) + "\n")
    _write("large-exact", text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["small", "large", "pydoc", "corpora", "baseline", "large-exact", "all"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lp-timeout", type=float, default=300.0, help="seconds allowed to the HiGHS path")
    ap.add_argument("--corpus-timeout", type=float, default=600.0)
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="source tree of an earlier ntpcert (parts baseline, large-exact)")
    ap.add_argument("--tree", default=None, metavar="DIR",
                    help="part large-exact: the source tree to compare (default: this working tree)")
    a = ap.parse_args()
    parts = ["small", "large", "pydoc", "corpora"] if a.part == "all" else [a.part]
    for p in parts:
        {"small": part_small, "large": part_large, "pydoc": part_pydoc, "corpora": part_corpora,
         "baseline": part_baseline, "large-exact": part_large_exact}[p](a)


if __name__ == "__main__":
    main()
