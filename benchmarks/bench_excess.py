#!/usr/bin/env python3
r"""The excess-loss bracket :math:`L^* = \inf_W \mathrm{CE}(W)`: Clarabel's exponential cone (through cvxpy,
on the dual :math:`\max \sum_j \pi_j H(q_j)` s.t. :math:`q_j \in \Delta_V`,
:math:`\sum_j \pi_j (q_j - p_j) h_j^\top = 0`) against the structured method of
:mod:`ntpcert.solve.excess` (inexact Newton-CG on CE, dual repair on the reduced problem), as a time
ratio in one process, with the agreement of the two values of :math:`L^*`; then the pydoc corpus
(k = 2): float bracket, exact certification and independent check, and (``--figure``) the figure of
per-context excess loss in ``docs/figures/excess_pydoc.png``.

Writes ``benchmarks/results/excess.md``. Usage: ``python benchmarks/bench_excess.py [--figure]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from ntpcert.util.versions import stamp_versions
from ntpcert.experiments.bench.timing import load_average
from ntpcert.instance import NTPInstance

HERE = Path(__file__).resolve().parent
#: Instances (m, d, V, kmax) of the solver comparison: random Gaussian embeddings, supports of 1..kmax tokens.
SIZES = [(20, 3, 4, 2), (60, 5, 8, 3), (150, 8, 12, 4), (300, 10, 20, 5), (600, 16, 30, 6)]


def random_instance(rng: np.random.Generator, m: int, d: int, V: int, kmax: int) -> NTPInstance:
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, kmax + 1)), replace=False)
        C[j, S] = rng.integers(1, 21, size=S.size)
    return NTPInstance.from_counts(rng.standard_normal((m, d)), C)


def clarabel_dual(inst: NTPInstance) -> tuple[float, float, str]:
    """(L*, seconds, status) from cvxpy + Clarabel on the dual (entr: exponential cone)."""
    import cvxpy as cp

    H, P, pi = inst.embeddings, inst.probs, inst.weights
    t = time.perf_counter()
    q = cp.Variable((inst.m, inst.V), nonneg=True)
    obj = cp.Maximize(cp.sum(cp.multiply(pi[:, None], cp.entr(q))))
    cons = [cp.sum(q, axis=1) == 1, H.T @ cp.multiply(pi[:, None], q - P) == 0]
    prob = cp.Problem(obj, cons)
    try:
        val = prob.solve(solver="CLARABEL")
    except Exception as err:  # noqa: BLE001 - a solver failure is a row of the table
        return float("nan"), time.perf_counter() - t, f"failed: {type(err).__name__}"
    return float(val), time.perf_counter() - t, str(prob.status)


def compare(rows: list[str]) -> None:
    from ntpcert.solve.excess import float_bracket

    rng = np.random.default_rng(2024)
    rows += ["| instance | m | d | V | structured s | bracket (L* - H) | Clarabel s | Clarabel L* - H | Clarabel / structured | Clarabel's L* to the bracket's midpoint |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    cases = [("random Gaussian", random_instance(rng, m, d, V, kmax)) for m, d, V, kmax in SIZES]
    from ntpcert.instance.load import load_instance

    cases += [("pydoc, k = 1 (admits H)", load_instance("pydoc", context_length=1)),
              ("pydoc, k = 2, first 1500 chars", load_instance("pydoc", context_length=2, max_chars=1500))]
    for label, inst in cases:
        m, d, V = inst.m, inst.d, inst.V
        t = time.perf_counter()
        b = float_bracket(inst, tol=1e-7)
        ts = time.perf_counter() - t
        val, tc, status = clarabel_dual(inst)
        mid = 0.5 * (b.lower + b.upper)
        rows.append(f"| {label} | {m} | {d} | {V} | {ts:.3f} | [{b.excess_lower:.8g}, {b.excess_upper:.8g}] | {tc:.3f} | "
                    f"{val - b.entropy:.8g} ({status}) | {tc / ts:.2f} | {abs(val - mid):.1e} |")
        print(rows[-1], flush=True)


def pydoc(rows: list[str], figure: bool) -> None:
    from ntpcert.certificate.checker.excess import check_excess
    from ntpcert.instance.load import load_instance
    from ntpcert.pipeline.excess_certificate import exact_excess
    from ntpcert.solve.excess import float_bracket

    inst = load_instance("pydoc")
    t = time.perf_counter()
    b = float_bracket(inst, tol=1e-7)
    tf = time.perf_counter() - t
    ee = exact_excess(inst, b)
    checks: list[str] = []
    t = time.perf_counter()
    why = check_excess(ee.section, inst, checks)
    tc = time.perf_counter() - t
    rows += ["| stage | seconds | result |", "|---|---|---|",
             f"| float bracket (Newton-CG, {b.iterations} steps) | {tf:.2f} | L* - H in [{b.excess_lower:.10g}, "
             f"{b.excess_upper:.10g}], relative width {b.relative_width:.2g} |",
             f"| exact repair of q + arb balls | {ee.seconds:.2f} | certified [{ee.excess_lower:.10g}, "
             f"{ee.excess_upper:.10g}], relative width {ee.relative_width:.2g}, q: {len(ee.section['q'])} non-zeros ({ee.repair}) |",
             f"| independent check (checker.excess) | {tc:.2f} | {'VALID' if not why else 'INVALID: ' + why} |"]
    print("\n".join(rows[-5:]), flush=True)
    if figure:
        from ntpcert.report.excess_figure import context_labels, plot_excess

        out = HERE.parent / "docs" / "figures" / "excess_pydoc.png"
        plot_excess(ee.to_json(), context_labels(inst), str(out),
                    title="pydoc corpus, k = 2 characters, onehot-concat: where the best linear decoder loses")
        print(f"figure: {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figure", action="store_true", help="also write docs/figures/excess_pydoc.png")
    ap.add_argument("--no-compare", action="store_true", help="skip the Clarabel comparison")
    a = ap.parse_args()
    load = load_average()
    rows: list[str] = []
    if not a.no_compare:
        compare(rows)
    table1 = "\n".join(rows)
    rows = []
    pydoc(rows, a.figure)
    text = (f"# Excess-loss bracket\n\nLoad before: {load}; load after: {load_average()}.\n\n"
            f"## Clarabel (exponential cone, cvxpy) vs the structured method, one process\n\n{table1}\n\n"
            f"## pydoc built-in (char, k = 2, onehot-concat; m = 912, V = 86, d = 172)\n\n" + "\n".join(rows) + "\n")
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    tmp = res / ".excess.md.tmp"
    tmp.write_text(stamp_versions(text), encoding="utf-8")
    os.replace(tmp, res / "excess.md")
    print(text)


if __name__ == "__main__":
    main()
