#!/usr/bin/env python3
r"""The conjectured limit of GD on data that are not separable (docs/math.md, "The conjectured limit"), measured.

Instances: the stream of ``partly_separable_instances()`` that ``tests/test_split_property.py`` checks
(hypothesis, seed 32, 250 examples, database-less), its distinct instances in order (P and N both
non-empty by construction, checked here). For each: the split, W_fin, L* and W^mm_P
(``Limits.compute``), then ntpcert's GD (``ntpcert.dynamics``: the fused ``Stepper``, default step
1/(2L), from 0) for 10^5 steps, with the iterate read at t = 1, 10, ..., 10^5:

* ``cos`` :math:`\cos(W_t - W_{t/10}, W^{mm}_P)` (the decade increment's direction);
* ``dist`` :math:`\|P_{F_N}W_t - W_{fin}\|_F` and ``rel`` the same over :math:`\|W_{fin}\|_F`;
* ``gap`` :math:`\mathrm{CE}(W_t) - L^*`.

NGD (step 0.01), Adam, sign descent and Muon (their defaults) run on the first ``--others`` instances
and are reported, not asserted: their limits are open. Instances still far from the conjectured limit
at 10^5 (``rel`` > 1e-2 or 1 - ``cos`` > 1e-3) are run on to 10^6 steps (``--extend``), to read
the trend over decades rather than one number. A size sweep (m in 5, 20, 80, a few instances each,
GD on a geometric grid to 10^5) gives the figure ``benchmarks/results/conjecture.png``.

Usage: ``python benchmarks/bench_conjecture.py``; writes ``benchmarks/results/conjecture.md``,
``conjecture.csv`` (every instance, optimiser and decade) and ``conjecture.png``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

#: The stream of tests/test_split_property.py (its SEED and MANY).
SEED = 32
MANY = 250
STEPS = 100_000
SIZES = (5, 20, 80)
OTHERS = ("ngd", "adam", "sign", "muon")


def stream(n: int = MANY, seed_: int = SEED, **bounds):
    """The distinct instances of ``partly_separable_instances(**bounds)`` under hypothesis' ``seed``."""
    from hypothesis import given, seed, settings

    from ntpcert.experiments import strategies as nst

    out, seen = [], set()

    @seed(seed_)
    @settings(max_examples=n, deadline=None, database=None, derandomize=False)
    @given(nst.partly_separable_instances(**bounds))
    def collect(inst):
        fp = inst.fingerprint()
        if fp not in seen:
            seen.add(fp)
            out.append(inst)

    collect()
    return out


def limits_of(inst):
    from ntpcert.dynamics.trajectory import Limits

    lim = Limits.compute(inst)
    assert lim.split is not None and lim.split.limit is not None and lim.svm is not None, lim.svm_error
    N = lim.split.nonseparable
    q = inst.m * inst.V - int(inst.support_sizes.sum())
    assert 0 < len(N) < q, "not partly separable"
    return lim


def measure(inst, lim, W, W_prev):
    from ntpcert.util.numbers import cosine

    Wfin = lim.W_star
    dist = float(np.linalg.norm(lim.subspace.project(W) - Wfin))
    nf = float(np.linalg.norm(Wfin))
    return {"cos": cosine(W - W_prev, lim.W_mm) if W_prev is not None else float("nan"), "dist": dist,
            "rel": dist / nf if nf > 0 else float("nan"), "gap": inst.loss(W) - lim.split.limit.L_star}


def decades(inst, lim, opt_name: str, steps: int):
    """Rows (t, metrics) at t = 1, 10, ..., steps for the optimiser ``opt_name`` from 0, and the seconds."""
    from ntpcert.dynamics.optimizers import make_optimizer
    from ntpcert.dynamics.trajectory import Stepper

    st = Stepper(inst, make_optimizer(opt_name))
    rows, prev, t, secs = [], None, 1, 0.0
    while t <= steps:
        secs += st.advance(t - st.t)
        W = st.W.copy()
        rows.append((t, measure(inst, lim, W, prev)))
        prev, t = W, t * 10
    return rows, secs


def quantiles(x) -> str:
    x = np.asarray([v for v in x if math.isfinite(v)])
    if x.size == 0:
        return "| – | – | – | – | – | 0 |"
    q = np.quantile(x, [0.0, 0.05, 0.5, 0.95, 1.0])
    return "| " + " | ".join(f"{v:.3g}" for v in q) + f" | {x.size} |"


def sweep(per_size: int, steps: int):
    """GD on a geometric grid for a few instances of each size m in SIZES: {m: [(t, rel, 1 - cos, gap)]}."""
    from ntpcert.dynamics.optimizers import gd
    from ntpcert.dynamics.trajectory import Stepper, geometric_grid

    out = {}
    for m in SIZES:
        insts = stream(40, SEED + m, min_m=m, max_m=m, max_d=3, max_V=5)[-per_size:]  # past hypothesis' smallest first draws
        curves = []
        for inst in insts:
            lim = limits_of(inst)
            st = Stepper(inst, gd())
            grid = geometric_grid(steps, 10)
            rows, W_at = [], {}
            for t in grid:
                st.advance(int(t) - st.t)
                W_at[int(t)] = st.W.copy()
                prev = W_at.get(int(t) // 10) if t >= 10 and int(t) % 10 == 0 else None  # decades only
                r = measure(inst, lim, st.W, prev)
                rows.append((int(t), r["rel"], 1 - r["cos"], r["gap"]))
            N = len(lim.split.nonseparable)
            curves.append((inst, inst.m * inst.V - int(inst.support_sizes.sum()) - N, N, rows))
        out[m] = curves
    return out


def figure(curves, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    colours = dict(zip(SIZES, ("tab:blue", "tab:orange", "tab:green")))
    for m, cs in curves.items():
        for i, (inst, _P, _N, rows) in enumerate(cs):
            a = np.array(rows, dtype=float)
            lab = f"m = {m}" if i == 0 else None
            ax[0].loglog(a[:, 0], a[:, 1], color=colours[m], label=lab, lw=1)
            ok = np.isfinite(a[:, 2]) & (a[:, 2] > 0)
            ax[1].loglog(a[ok, 0], a[ok, 2], "o-", color=colours[m], label=lab, lw=1, ms=3)
            ax[2].loglog(a[:, 0], np.maximum(a[:, 3], 1e-17), color=colours[m], label=lab, lw=1)
    ax[0].set_title(r"$\|P_{F_N}W_t - W_{fin}\| / \|W_{fin}\|$")
    ax[1].set_title(r"$1 - \cos(W_t - W_{t/10},\ W^{mm}_P)$")
    ax[2].set_title(r"$\mathrm{CE}(W_t) - L^*$")
    for a in ax:
        a.set_xlabel("GD step t")
        a.grid(True, which="major", alpha=0.3)
    ax[0].legend()
    fig.suptitle("GD on partly separable instances (P, N non-empty), step 1/(2L)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=None, help="instances (default: every distinct one of the stream)")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--others", type=int, default=20, help="instances for NGD, Adam, sign and Muon")
    p.add_argument("--extend", type=int, default=8, help="slowest instances run on to 10 times the steps")
    p.add_argument("--per-size", type=int, default=3)
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--sweep-only", action="store_true", help="redo the figure and its section of conjecture.md")
    args = p.parse_args()
    if args.sweep_only:
        curves = sweep(args.per_size, args.steps)
        figure(curves, RESULTS / "conjecture.png")
        md = RESULTS / "conjecture.md"
        head = md.read_text(encoding="utf-8").split("## Sizes (the figure)")[0]
        md.write_text(head + "\n".join(sizes_section(curves)), encoding="utf-8")
        return
    from ntpcert.experiments.bench.timing import load_average
    from ntpcert.util.versions import versions_line

    t_all = time.perf_counter()
    insts = stream()
    if args.count is not None:
        insts = insts[:args.count]
    records, csv_rows, sizes, secs = [], [], [], []
    for i, inst in enumerate(insts):
        lim = limits_of(inst)
        rows, s = decades(inst, lim, "gd", args.steps)
        secs.append(s)
        N = len(lim.split.nonseparable)
        q = inst.m * inst.V - int(inst.support_sizes.sum())
        info = dict(i=i, m=inst.m, d=inst.d, V=inst.V, P=q - N, N=N, W_mm=float(lim.svm.norm),
                    W_fin=float(np.linalg.norm(lim.W_star)))
        records.append((info, {"gd": rows}, lim, inst))
        for t, r in rows:
            csv_rows.append({**info, "optimizer": "gd", "t": t, **r})
        if i % 20 == 0:
            print(f"[{i}/{len(insts)}] {s:.1f} s; at 10^5: cos {rows[-1][1]['cos']:.6f} rel {rows[-1][1]['rel']:.2e} "
                  f"gap {rows[-1][1]['gap']:.2e}", file=sys.stderr)
    for info, runs, lim, inst in records[:args.others]:
        for name in OTHERS:
            rows, _ = decades(inst, lim, name, args.steps)
            runs[name] = rows
            for t, r in rows:
                csv_rows.append({**info, "optimizer": name, "t": t, **r})

    def last(rec, name="gd", k=-1):
        return rec[1][name][k][1]

    slow = [rec for rec in records if last(rec)["rel"] > 1e-2 or 1 - last(rec)["cos"] > 1e-3]
    slow.sort(key=lambda rec: -last(rec)["rel"] if math.isfinite(last(rec)["rel"]) else 0.0)
    extended = []
    for info, runs, lim, inst in slow[:args.extend]:
        rows, s = decades(inst, lim, "gd", 10 * args.steps)
        extended.append((info, rows, s))
        for t, r in rows[-2:]:
            csv_rows.append({**info, "optimizer": "gd-extended", "t": t, **r})
        print(f"extended instance {info['i']}: " + ", ".join(f"10^{int(round(math.log10(t)))}: rel {r['rel']:.2e} "
                                                              f"cos {r['cos']:.6f}" for t, r in rows[-3:]),
              file=sys.stderr)
    curves = None if args.no_sweep else sweep(args.per_size, args.steps)
    if curves is not None:
        figure(curves, RESULTS / "conjecture.png")
    with open(RESULTS / "conjecture.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
        w.writeheader()
        w.writerows(csv_rows)
    write_md(records, extended, curves, secs, time.perf_counter() - t_all, load_average(), versions_line(), args)


def write_md(records, extended, curves, secs, wall, load, versions, args) -> None:
    n = len(records)
    T = [t for t, _ in records[0][1]["gd"]]
    L = []
    L += ["# The conjectured limit of GD on partly separable data, measured", "", versions, ""]
    L += [f"`python benchmarks/bench_conjecture.py` (load {load}; {wall / 60:.1f} min wall in all). {n} distinct "
          f"instances of `partly_separable_instances()`, the stream of `tests/test_split_property.py` (hypothesis seed "
          f"{SEED}, {MANY} examples), m = {min(r[0]['m'] for r in records)}-{max(r[0]['m'] for r in records)}, "
          f"d = {min(r[0]['d'] for r in records)}-{max(r[0]['d'] for r in records)}, "
          f"V = {min(r[0]['V'] for r in records)}-{max(r[0]['V'] for r in records)}, with P and N both non-empty "
          f"(|P| {min(r[0]['P'] for r in records)}-{max(r[0]['P'] for r in records)}, "
          f"|N| {min(r[0]['N'] for r in records)}-{max(r[0]['N'] for r in records)}). ntpcert's GD "
          f"(`Stepper`, default step 1/(2L), from 0) for {args.steps:,} steps: "
          f"{np.median(secs):.2f} s an instance (median), {sum(secs):.0f} s in all. The conjecture (docs/math.md): "
          "P_{F_N} W_t → W_fin, W_t/‖W_t‖ → W^mm_P/‖W^mm_P‖, CE(W_t) → L*. These are float64 measurements, "
          "not proofs. Every row: instance, optimiser and decade in `conjecture.csv`.", ""]
    L += ["## GD at t = 10^5: the distribution over the instances", ""]
    L += ["| quantity | min | 5 % | median | 95 % | max | count |", "|---|---|---|---|---|---|---|"]
    fin = lambda k, name="gd", j=-1: [rec[1][name][j][1][k] for rec in records]  # noqa: E731
    L += ["| cos(W_{10^5} − W_{10^4}, W^mm_P) " + quantiles(fin("cos"))]
    L += ["| 1 − cos(W_{10^5} − W_{10^4}, W^mm_P) " + quantiles([1 - c for c in fin("cos")])]
    L += ["| ‖P_{F_N} W_{10^5} − W_fin‖ " + quantiles(fin("dist"))]
    L += ["| ‖P_{F_N} W_{10^5} − W_fin‖ / ‖W_fin‖ " + quantiles(fin("rel"))]
    L += ["| CE(W_{10^5}) − L* " + quantiles(fin("gap"))]
    L += ["| ‖W^mm_P‖ " + quantiles([r[0]["W_mm"] for r in records])]
    L += ["| ‖W_fin‖ " + quantiles([r[0]["W_fin"] for r in records])]
    nz = sum(1 for r in records if r[0]["W_fin"] == 0)
    L += ["", f"{nz} instances have W_fin = 0 (their relative distance is undefined and left out; their absolute "
              "distance is in the table)." if nz else "Every instance has W_fin ≠ 0.", ""]
    L += ["## GD: the trend over decades (medians, and the share of instances that improved on the decade before)", ""]
    L += ["| t | median 1 − cos | median rel. distance | median CE − L* | cos improved | distance fell | CE − L* fell |",
          "|---|---|---|---|---|---|---|"]
    for k in range(1, len(T)):
        c = np.array([1 - x for x in fin("cos", j=k)])
        cp = np.array([1 - x for x in fin("cos", j=k - 1)])
        dd, dp = np.array(fin("dist", j=k)), np.array(fin("dist", j=k - 1))
        g, gp = np.array(fin("gap", j=k)), np.array(fin("gap", j=k - 1))
        rel = np.array([x for x in fin("rel", j=k) if math.isfinite(x)])
        imp = f"{int(np.sum(c < cp))}/{n}" if k > 1 else "–"
        L += [f"| 10^{k} | {np.median(c):.3g} | {np.median(rel):.3g} | {np.median(g):.3g} | {imp} | "
              f"{int(np.sum(dd < dp))}/{n} | {int(np.sum(g < gp))}/{n} |"]
    L += [""]
    if extended:
        L += ["## The slowest instances, run on (GD, same step)", "",
              "Those with relative distance > 1e-2 or 1 − cos > 1e-3 at 10^5, slowest first.", "",
              "| instance (m, d, V, \\|P\\|, \\|N\\|) | ‖W^mm_P‖ | ‖W_fin‖ | t | 1 − cos | rel. distance | CE − L* |",
              "|---|---|---|---|---|---|---|"]
        for info, rows, s in extended:
            for t, r in rows[-3:]:
                L += [f"| {info['i']} ({info['m']}, {info['d']}, {info['V']}, {info['P']}, {info['N']}) | "
                      f"{info['W_mm']:.3g} | {info['W_fin']:.3g} | 10^{int(round(math.log10(t)))} | {1 - r['cos']:.3g} | "
                      f"{r['rel']:.3g} | {r['gap']:.3g} |"]
        L += [""]
    m_o = min(args.others, n)
    if m_o:
        L += [f"## Other optimisers (reported, not asserted): the first {m_o} instances, 10^5 steps, their defaults", "",
              "NGD: step 0.01; Adam: 0.01, β = (0.9, 0.99); sign: 0.01; Muon: 0.01, momentum 0.95, five "
              "Newton–Schulz steps. Sign descent and Adam are steepest in the max-norm and Muon in the spectral norm, "
              "so W^mm_P (Frobenius) need not be their limit direction.", "",
              "| optimiser | median cos at 10^5 | min cos | median rel. distance | max rel. distance | median CE − L* |",
              "|---|---|---|---|---|---|"]
        for name in ("gd", *OTHERS):
            sub = [rec for rec in records[:m_o] if name in rec[1]]
            cs = [rec[1][name][-1][1]["cos"] for rec in sub]
            rl = [x for x in (rec[1][name][-1][1]["rel"] for rec in sub) if math.isfinite(x)]
            gp = [rec[1][name][-1][1]["gap"] for rec in sub]
            L += [f"| {name} | {np.median(cs):.6f} | {np.min(cs):.6f} | {np.median(rl):.3g} | {np.max(rl):.3g} | "
                  f"{np.median(gp):.3g} |"]
        L += [""]
    if curves is not None:
        L += sizes_section(curves)
    (RESULTS / "conjecture.md").write_text("\n".join(L), encoding="utf-8")


def sizes_section(curves) -> list[str]:
    L = ["## Sizes (the figure)", "", "![convergence of GD against t for m = 5, 20, 80](conjecture.png)", "",
         "`conjecture.png`: GD on a geometric grid to 10^5 for the last few distinct instances of 40 examples of "
         "`partly_separable_instances(min_m=m, max_m=m, max_d=3, max_V=5)` (hypothesis seed 32 + m). The cosine is "
         "read where t/10 is on the grid too. At t = 10^5:", "",
         "| m | d | V | \\|P\\| | \\|N\\| | 1 − cos | rel. distance | CE − L* |", "|---|---|---|---|---|---|---|---|"]
    for m, cs in curves.items():
        for inst, nP, nN, rows in cs:
            t, rel, omc, gap = rows[-1]
            L += [f"| {m} | {inst.d} | {inst.V} | {nP} | {nN} | {omc:.3g} | {rel:.3g} | {gap:.3g} |"]
    return L + [""]


if __name__ == "__main__":
    main()
