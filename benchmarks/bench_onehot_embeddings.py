#!/usr/bin/env python3
"""One-hot data (k_j = 1, h_j = e_j): ntpcert's NTP-SVM against LIBLINEAR's Crammer–Singer SVM and Clarabel.

Each context has its own coordinate (H = I_m, d = m) and one next token; every token is some context's label
(LIBLINEAR would drop a class without one). The contenders, interleaved in one process, ``--repeat`` times:

* **ntpcert**: ``KeslerSystem.build(instance)`` and ``solve_svm(system)`` (``auto``, with its exact gap
  certificate), from the instance to a certified W^mm;
* **LIBLINEAR, dense**: scikit-learn's ``LinearSVC(multi_class="crammer_singer", fit_intercept=False,
  C=1e4, tol=1e-8)`` fitted on the dense H, the fit alone (:func:`ntpcert.experiments.liblinear_cs.crammer_singer`'s
  ``seconds``; its margin check afterwards is not timed);
* **LIBLINEAR, sparse**: the same fit on H as a CSR matrix, the input one-hot features usually have (its fit
  alone; the conversion is not timed);
* **Clarabel** (``solve_svm(system, solver="clarabel")``) once per size, in a child process with a time cap
  (``--clarabel-cap``): the interior-point solve of the Kesler QP with m(V - 1) margin rows.

Reported: medians, the ratios contender / ntpcert (> 1: ntpcert is faster), and the largest entry of
|W_LIBLINEAR - W_ntpcert| (the hard-margin solution is the same; C = 1e4 makes LIBLINEAR's hard, checked
by its margins). Usage: ``python benchmarks/bench_onehot_embeddings.py [--out FILE]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_lm_scale import write_results  # noqa: E402
from ntpcert.experiments.bench.timing import load_average, median  # noqa: E402

SIZES = [(500, 4000), (2000, 4000)]


def instance(V: int, m: int, seed: int = 0):
    from ntpcert.instance import NTPInstance

    rng = np.random.default_rng(seed)
    y = rng.integers(0, V, m)
    y[:V] = rng.permutation(V)  # every token a label
    C = np.zeros((m, V), dtype=np.int64)
    C[np.arange(m), y] = 1
    return NTPInstance.from_counts(np.eye(m), C), y


def _clarabel(V: int, m: int, out) -> None:
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    inst, _ = instance(V, m)
    system = KeslerSystem.build(inst)
    t0 = time.perf_counter()
    sol = solve_svm(system, solver="clarabel")
    out.put((time.perf_counter() - t0, sol.W))


def clarabel_time(V: int, m: int, cap: float) -> tuple[float | None, np.ndarray | None]:
    """Clarabel's solve in a child process; (None, None) past ``cap`` seconds."""
    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=_clarabel, args=(V, m, q))
    p.start()
    p.join(cap)
    if p.is_alive():
        p.kill()
        p.join()
        return None, None
    return q.get() if not q.empty() else (None, None)


def liblinear_sparse(inst, y) -> tuple[float, np.ndarray]:
    import warnings

    from scipy.sparse import csr_matrix
    from sklearn.svm import LinearSVC

    from ntpcert.experiments.liblinear_cs import DEFAULT_C, DEFAULT_TOL

    X = csr_matrix(inst.embeddings)
    clf = LinearSVC(multi_class="crammer_singer", C=DEFAULT_C, fit_intercept=False, tol=DEFAULT_TOL,
                    max_iter=1_000_000, random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    return time.perf_counter() - t0, np.asarray(clf.coef_)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--clarabel-cap", type=float, default=600.0)
    p.add_argument("--out", default=str(HERE / "results" / "onehot-embeddings.md"))
    args = p.parse_args()
    from ntpcert.experiments.liblinear_cs import crammer_singer
    from ntpcert.instance import NTPInstance
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    rows = []
    for V, m in SIZES:
        inst, y = instance(V, m)
        t = {"ntpcert": [], "dense": [], "sparse": []}
        for _ in range(args.repeat):
            fresh = NTPInstance.from_counts(inst.embeddings, inst.counts)  # nothing cached from the last run
            t0 = time.perf_counter()
            sol = solve_svm(KeslerSystem.build(fresh))
            t["ntpcert"].append(time.perf_counter() - t0)
            cs = crammer_singer(inst)
            t["dense"].append(cs.seconds)
            ts, Ws = liblinear_sparse(inst, y)
            t["sparse"].append(ts)
        cert = sol.info["certificate"]
        tc, Wc = clarabel_time(V, m, args.clarabel_cap)
        med = {k: median(v) for k, v in t.items()}
        rows.append(dict(V=V, m=m, med=med, path=sol.info["path"], rel=cert["relative_gap"],
                         diff=float(np.abs(cs.W - sol.W).max()), diff_s=float(np.abs(Ws - sol.W).max()),
                         hard=cs.hard_margin, clarabel=tc,
                         diff_c=None if Wc is None else float(np.abs(Wc - sol.W).max()), load=load_average()))
        print(rows[-1], file=sys.stderr)
    lines = ["# One-hot data (k_j = 1, h_j = e_j): ntpcert against LIBLINEAR Crammer–Singer and Clarabel", "",
             f"`python benchmarks/bench_onehot_embeddings.py`: H = I_m, one label per context, every token a label "
             f"(seed 0). In-process medians of {args.repeat} interleaved runs; ntpcert from the instance to a W^mm "
             "with its exact gap certificate (`KeslerSystem.build` + `solve_svm`, `auto`, on a fresh instance each run, so "
             "that nothing found in one run is cached for the next); LIBLINEAR's fit alone "
             "(scikit-learn `LinearSVC(multi_class=\"crammer_singer\", fit_intercept=False, C=1e4, tol=1e-8)`) on "
             "the dense H and on H as CSR; Clarabel once, in a child process capped at "
             f"{args.clarabel_cap:.0f} s. Ratios are contender / ntpcert.", "",
             "| V | m = d | ntpcert (s) | path | certified relative gap | LIBLINEAR dense (s) | ratio | "
             "LIBLINEAR CSR (s) | ratio | Clarabel (s) | ratio | max abs W diff (dense, CSR, Clarabel) | "
             "LIBLINEAR hard margin | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        med, c = r["med"], r["clarabel"]
        cl = f"> {args.clarabel_cap:.0f}" if c is None else f"{c:.2f}"
        clr = f"> {args.clarabel_cap / med['ntpcert']:.0f}" if c is None else f"{c / med['ntpcert']:.1f}"
        dc = "–" if r["diff_c"] is None else f"{r['diff_c']:.1e}"
        lines.append(f"| {r['V']} | {r['m']} | {med['ntpcert']:.3f} | {r['path']} | {r['rel']:.1e} | "
                     f"{med['dense']:.3f} | {med['dense'] / med['ntpcert']:.2f} | {med['sparse']:.3f} | "
                     f"{med['sparse'] / med['ntpcert']:.2f} | {cl} | {clr} | {r['diff']:.1e}, {r['diff_s']:.1e}, {dc} | "
                     f"{'yes' if r['hard'] else 'no'} | {r['load']} |")
    write_results(lines, args.out)


if __name__ == "__main__":
    main()
