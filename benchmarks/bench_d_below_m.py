#!/usr/bin/env python3
"""The NTP-SVM where d < m, against LIBLINEAR and Clarabel, in one script that interleaves the contenders.

Families (every instance separable; seeds fixed):

* ``teacher`` — k_j = 1, :math:`h_j \\sim N(0, I_d)`, next token the argmax of a Gaussian teacher
  :math:`T h_j` (:func:`ntpcert.instance.datasets.teacher.teacher`), restricted to the tokens that are some
  context's label (so LIBLINEAR, which only knows labels that occur, solves the same QP; V' is what is left);
* ``onehot`` — k_j = 1, Gaussian embeddings, labels uniform with every token a label
  (:func:`ntpcert.experiments.bench.families.onehot_instance`);
* ``soft`` — supports of 2-4 tokens on half the contexts at d < m, separable by construction
  (:func:`soft_cell`; no LIBLINEAR there: Clarabel and cvxpy + Clarabel are the baselines).

Contenders, run in turn on each instance (the order rotates between repeats):

* ``ntpcert`` — ``solve_svm(system, solver="auto")``: the structured solver with its exact certificate
  (relative gap at most 1e-9, checked in rational arithmetic); ``answered`` says which backend answered
  (``structured``, or a Clarabel fallback);
* ``liblinear`` — scikit-learn's ``LinearSVC(multi_class="crammer_singer", fit_intercept=False, C=1e4,
  tol=1e-8)`` (:func:`ntpcert.experiments.liblinear_cs.crammer_singer`), one-hot families only;
* ``clarabel`` — ``solve_svm(system, solver="clarabel")`` and, for ``soft``, ``cvxpy`` (cvxpy + Clarabel),
  each capped at ``--cap`` seconds (a measurement's cap: a capped run is reported as "> cap").

Reported per cell: seconds of each contender, the ratios contender / ntpcert (> 1: ntpcert is faster),
``max|W - W_ntpcert| / max|W_ntpcert|`` of LIBLINEAR's W, and *passes per GEMM*: ntpcert's seconds divided by
the time of one (m x d)(d x V') product measured in the same process.

Usage: ``python benchmarks/bench_d_below_m.py [--quick] [--repeat 1] [--cap 300] [--families teacher,onehot,soft]
[--cells teacher:500:1000:256,...] [--no-warmup] [--name NAME]``;
writes ``benchmarks/results/d-below-m.md`` (``--quick``: ``d-below-m-quick.md``, a few small cells).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ntpcert.experiments.bench.timing import load_average, median  # noqa: E402
from ntpcert.util.versions import versions_line  # noqa: E402

#: (family, V, m, d) cells of the full run: the grid of the issue (teacher d = 64 and 256, V = 10-500,
#: m = 500-4,000; one-hot V = 500 and 2,000 at m = 4,000; soft supports at d < m).
CELLS = [("teacher", V, m, d) for d in (64, 256) for V in (10, 50, 500) for m in (500, 1000, 2000, 4000)] + \
        [("onehot", 500, 4000, 64), ("onehot", 500, 4000, 256), ("onehot", 2000, 4000, 256)] + \
        [("soft", V, m, d) for d in (64,) for V in (10, 50) for m in (500, 1000, 2000)]
QUICK = [("teacher", 10, 500, 64), ("teacher", 50, 500, 64), ("teacher", 50, 1000, 64), ("onehot", 50, 500, 64),
         ("soft", 10, 500, 64)]


def labelled(counts: np.ndarray) -> np.ndarray:
    """Counts restricted to the tokens that are some context's next token."""
    return counts[:, counts.sum(axis=0) > 0]


def teacher_cell(V: int, m: int, d: int, seed: int = 0):
    from ntpcert import NTPInstance
    from ntpcert.instance.datasets.teacher import teacher

    inst = teacher(m=m, d=d, V=V, seed=seed)
    return NTPInstance.from_counts(inst.embeddings, labelled(np.asarray(inst.counts)), name=f"teacher-V{V}-m{m}-d{d}")


def onehot_cell(V: int, m: int, d: int, seed: int = 0):
    from ntpcert.experiments.bench.families import onehot_instance

    return onehot_instance(np.random.default_rng(seed), V=V, m=m, d=d)


def soft_cell(V: int, m: int, d: int, seed: int = 0):
    """Supports of 2-4 tokens at d < m, separable by construction. The tokens fall in groups of 2-4; h has two
    halves, h = (x, y). A group shares the first half of its teacher rows, each token has its own second half.
    Half the contexts have y = 0: their logits tie on the winning group, which is their support. The other
    half have y ~ N(0, I): one token wins. The teacher itself satisfies (6a) and (6b), and no two tokens are
    interchangeable (each wins alone somewhere), so the token classes do not reduce it to one-hot data."""
    from ntpcert import NTPInstance

    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < V:
        sizes.append(int(rng.integers(2, 5)))
    sizes[-1] -= sum(sizes) - V
    if sizes[-1] < 2:
        sizes[-2] += sizes.pop()
    group = np.repeat(np.arange(len(sizes)), sizes)
    d1 = d // 2
    T1 = rng.standard_normal((len(sizes), d1))
    T2 = rng.standard_normal((V, d - d1))
    H = rng.standard_normal((m, d))
    H[: m // 2, d1:] = 0.0
    Z = H[:, :d1] @ T1[group].T + H[:, d1:] @ T2.T
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = np.flatnonzero(Z[j] >= Z[j].max() - 1e-12 * max(1.0, abs(Z[j].max())))
        counts[j, S] = rng.integers(1, 6, size=S.size)
    return NTPInstance.from_counts(H, labelled(counts), name=f"soft-V{V}-m{m}-d{d}")


MAKERS = {"teacher": teacher_cell, "onehot": onehot_cell, "soft": soft_cell}


def gemm_seconds(m: int, d: int, V: int, reps: int = 5) -> float:
    """Median seconds of one (m x d)(d x V) float64 product on one BLAS thread."""
    from ntpcert.util.numbers import blas_threads

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((m, d)), rng.standard_normal((d, V))
    out = []
    with blas_threads(1):
        for _ in range(reps):
            t0 = time.perf_counter()
            X @ Y
            out.append(time.perf_counter() - t0)
    return median(out)


def run_cell(family: str, V: int, m: int, d: int, repeat: int, cap: float, skip: frozenset = frozenset()) -> dict:
    from ntpcert.errors import InfeasibleError, SolverError
    from ntpcert.experiments.liblinear_cs import crammer_singer
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    inst = MAKERS[family](V, m, d)
    system = KeslerSystem.build(inst)
    names = ["ntpcert"] + (["liblinear"] if family != "soft" else []) + ["clarabel"] + \
            (["cvxpy"] if family == "soft" else [])
    names = [n for n in names if n not in skip]
    times: dict[str, list[float]] = {n: [] for n in names}
    capped: dict[str, bool] = {n: False for n in names}
    out: dict = {"family": family, "V": V, "Vp": inst.V, "m": m, "d": d}
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if capped[name]:
                continue
            t0 = time.perf_counter()
            try:
                if name == "ntpcert":
                    sol = solve_svm(system, solver="auto")
                    out["W"] = sol.W
                    out["answered"] = sol.solver
                    out["gap"] = (sol.info.get("certificate") or {}).get("relative_gap", sol.relative_gap)
                    out["epochs"] = sol.info.get("epochs")
                    out["separable"] = True
                elif name == "liblinear":
                    cs = crammer_singer(inst)
                    out["W_ll"], out["ll_margin"] = cs.W, cs.min_margin
                else:
                    solve_svm(system, solver=name, time_limit=cap)
            except InfeasibleError as e:
                out.setdefault("errors", []).append(f"{name}: not separable ({str(e)[:60]})")
                out["separable"] = False
            except SolverError as e:
                if time.perf_counter() - t0 >= 0.95 * cap:
                    capped[name] = True
                else:
                    out.setdefault("errors", []).append(f"{name}: {str(e)[:80]}")
            times[name].append(time.perf_counter() - t0)
    out["times"] = {n: median(v) for n, v in times.items()}
    out["capped"] = capped
    out["gemm"] = gemm_seconds(m, d, inst.V)
    if "W" in out and "W_ll" in out:
        out["w_diff"] = float(np.abs(out["W_ll"] - out["W"]).max() / np.abs(out["W"]).max())
    out["load"] = load_average()
    return out


def fmt_t(t: float, capped: bool, cap: float) -> str:
    return f"> {cap:.0f}" if capped else f"{t:.2f}"


def table(rows: list[dict], cap: float) -> list[str]:
    lines = ["| family | V (V') | m | d | ntpcert (s) | answered | epochs | passes/GEMM | LIBLINEAR (s) | ratio | "
             "Clarabel (s) | ratio | cvxpy (s) | ratio | W diff vs LIBLINEAR | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, c = r["times"], r["capped"]
        nt = t["ntpcert"]

        def cell(name: str) -> tuple[str, str]:
            if name not in t:
                return "-", "-"
            ratio = t[name] / nt
            return fmt_t(t[name], c[name], cap), (f"> {cap / nt:.1f}" if c[name] else f"{ratio:.2f}")

        ll, cl, cv = cell("liblinear"), cell("clarabel"), cell("cvxpy")
        lines.append(f"| {r['family']} | {r['V']} ({r['Vp']}) | {r['m']} | {r['d']} | {nt:.2f} | {r.get('answered', '-')} | "
                     f"{r.get('epochs', '-')} | {nt / r['gemm']:.0f} | {ll[0]} | {ll[1]} | {cl[0]} | {cl[1]} | {cv[0]} | "
                     f"{cv[1]} | {r.get('w_diff', float('nan')):.1e} | {r['load']} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cap", type=float, default=300.0)
    ap.add_argument("--families", default="teacher,onehot,soft")
    ap.add_argument("--max-m", type=int, default=None, help="skip cells with more contexts")
    ap.add_argument("--cells", default=None, help="family:V:m:d,... in place of the grid (e.g. teacher:500:1000:256)")
    ap.add_argument("--skip", default="", help="contenders left out, e.g. clarabel (its KKT factorisation needs "
                    "more than 24 GB at V = 500, m = 1,000, d = 256)")
    ap.add_argument("--no-warmup", action="store_true", help="time the first cell with the contenders' start-up "
                    "(by default a small cell of the first family runs first, untimed)")
    ap.add_argument("--name", default=None, help="results/NAME.md (default d-below-m, or d-below-m-quick)")
    a = ap.parse_args()
    fams = set(a.families.split(","))
    grid = QUICK if a.quick else CELLS
    if a.cells:
        grid = [(f, int(V), int(m), int(d)) for f, V, m, d in (c.split(":") for c in a.cells.split(","))]
    cells = [c for c in grid if c[0] in fams and (a.max_m is None or c[2] <= a.max_m)]
    skip = frozenset(filter(None, a.skip.split(",")))
    if cells and not a.no_warmup:  # imports, compilation and first calls of every contender, timed nowhere
        run_cell(cells[0][0], 10, 500, 16, 1, a.cap, skip)
    rows = []
    for fam, V, m, d in cells:
        r = run_cell(fam, V, m, d, a.repeat, a.cap, skip)
        rows.append(r)
        print(table([r], a.cap)[-1], file=sys.stderr, flush=True)
        for e in r.get("errors", []):
            print("   ", e, file=sys.stderr)
    name = a.name or ("d-below-m-quick" if a.quick else "d-below-m")
    lines = [f"# The NTP-SVM where d < m: ntpcert against LIBLINEAR and Clarabel (`{' '.join(sys.argv[1:]) or 'default'}`)",
             "", versions_line(), "",
             f"In-process seconds, median of {a.repeat}, contenders interleaved (see the script's docstring). "
             "ratio = contender / ntpcert (> 1: ntpcert faster); a capped contender shows > cap. ntpcert's time "
             "includes its exact certificate (relative gap <= 1e-9) where it answered `structured`; a fallback "
             "(`auto/...`) answers with a pair checked in floats, as Clarabel's.", ""] + table(rows, a.cap)
    errs = [f"- {r['family']} V={r['V']} m={r['m']} d={r['d']}: {e}" for r in rows for e in r.get("errors", [])]
    if errs:
        lines += ["", "Errors:", ""] + errs
    out = HERE / "results" / f"{name}.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
