"""Cost of exact certificates, as ratios to the float pipeline run in the same script.

Settings
--------
``paper``   the paper's setting (m=50, d=60, V=10, k_j=6), :func:`ntpcert.instance.datasets.paper`.
``larger``  the same generator at m=100, d=120, V=20, k_j=6, n=10000.
``large``   (``--large``) m=200, d=240, V=20, k_j=6, n=20000.

For each setting, ``certify --exact`` runs the float pipeline (separability LP, F and W*, NTP-SVM
with Clarabel), then the exact stages, the independent check and the write. The float pipeline's
time inside the same call is the baseline: the ratio is total / float part, per run, median over
runs (so load from other processes on the machine cancels out as far as it can). ``ntpcert verify``
of the written certificate is timed right after, as a ratio to the same baseline.

``--svm-bound`` also times :func:`ntpcert.exact.svm_gap.exact_svm_bound` at V=2000, m=1000, d=1024,
k_j <= 3 against the float evaluation of the same pair's residuals and gap
(:meth:`ntpcert.solve.svm.SVMSolution.from_primal_dual`).

Run: ``python benchmarks/bench_exact.py [--large] [--svm-bound] [--repeat N] [--out FILE.md]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from ntpcert.util.versions import stamp_versions


def _timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench_setting(name: str, inst, repeat: int) -> dict:
    """Each run of ``exact_certify`` contains a full float pipeline run: its time is the baseline of
    that run, so the ratio is taken within one call (robust to load on a shared machine)."""
    from ntpcert.certificate.checker import verify_file
    from ntpcert.pipeline.exact_verdicts import exact_certify

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cert.json")
        for _ in range(repeat):
            rep = exact_certify(inst, svm=True, progress=False, certificate_out=path)
            t0 = time.perf_counter()
            verdict = verify_file(path)
            t_verify = time.perf_counter() - t0
            base = rep.float_report.seconds
            runs.append({
                "float_s": base,
                "exact_s": rep.seconds,
                "ratio": rep.seconds / base,
                "extra_s": rep.seconds - base,
                "compat_s": rep.stages.get("exact_compatibility", 0.0),
                "separability_s": rep.stages.get("exact_separability", 0.0),
                "svm_bound_s": rep.svm.seconds if rep.svm is not None else float("nan"),
                "check_s": rep.verdict.seconds,
                "verify_s": t_verify,
                "verify_ratio": t_verify / base,
            })
        size = os.path.getsize(path)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return {
        "setting": name,
        "m": inst.m, "d": inst.d, "V": inst.V,
        **med,
        "cert_mb": size / 1e6,
        "valid": verdict.valid and rep.check.valid,
        "verdicts": f"compatible={rep.compatible.holds}, separable={rep.separable.holds}",
        "gap": rep.svm.gap_float if rep.svm is not None else float("nan"),
        "distance": rep.svm.distance_bound if rep.svm is not None else float("nan"),
    }


def bench_svm_bound(repeat: int, seed: int = 0) -> dict:
    """exact_svm_bound at the size a structured solver calls it on, vs the float gap evaluation."""
    from ntpcert import NTPInstance
    from ntpcert.exact.svm_gap import ExactSVMBounder
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import SVMSolution

    rng = np.random.default_rng(seed)
    V, m, d = 2000, 1000, 1024
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(1, 4))
        C[j, rng.choice(V, size=k, replace=False)] = rng.integers(1, 10, size=k)
    H = rng.standard_normal((m, d))
    inst = NTPInstance.from_counts(H, C)
    mask = inst.support_mask().T
    # a strictly feasible primal point (d > m: any logits are reachable) and a feasible dual direction
    W = np.where(mask, 0.0, -1.0) @ np.linalg.pinv(H).T
    a = np.where(mask, 0.0, -1e-3)
    a[inst.anchors(), np.arange(m)] -= a.sum(axis=0)
    system = KeslerSystem.build(inst)
    t_float, _ = _timed(lambda: SVMSolution.from_primal_dual(system, W, a, solver="-", status="-", seconds=0.0), repeat)
    t0 = time.perf_counter()
    bounder = ExactSVMBounder(system)
    t_prep = time.perf_counter() - t0
    t_exact, b = _timed(lambda: bounder.bound(W, a), repeat)
    return {"V": V, "m": m, "d": d, "float_s": t_float, "prep_s": t_prep, "exact_s": t_exact,
            "ratio": t_exact / t_float, "feasible": b.primal_feasible, "timings": b.timings}


def report(rows: list[dict], svm: dict | None) -> str:
    lines = [
        "| setting | m | d | V | float pipeline (s) | certify --exact (s) | ratio | exact stages: compat / separability / SVM gap / check (s) | verify (s) | verify / float | certificate (MB) | verdicts | exact gap | dist. bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['m']} | {r['d']} | {r['V']} | {r['float_s']:.2f} | {r['exact_s']:.2f} | "
            f"{r['ratio']:.2f} | {r['compat_s']:.2f} / {r['separability_s']:.2f} / {r['svm_bound_s']:.2f} / {r['check_s']:.2f} | "
            f"{r['verify_s']:.2f} | {r['verify_ratio']:.2f} | {r['cert_mb']:.1f} | {r['verdicts']}{'' if r['valid'] else ' (INVALID)'} | "
            f"{r['gap']:.2e} | {r['distance']:.2e} |"
        )
    if svm is not None:
        lines += [
            "",
            f"exact_svm_bound at V={svm['V']}, m={svm['m']}, d={svm['d']}, k_j<=3: {svm['exact_s']:.2f} s per call "
            f"(one-off precomputation {svm['prep_s']:.2f} s) vs {svm['float_s']:.2f} s for the float residuals and gap "
            f"of the same pair: ratio {svm['ratio']:.1f}; primal certified: {svm['feasible']}; "
            f"split: dual {svm['timings'].get('dual', float('nan')):.2f} s, primal {svm['timings'].get('primal', float('nan')):.2f} s.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="repeats per timing (median; default 3)")
    p.add_argument("--large", action="store_true", help="also the m=200 setting (minutes)")
    p.add_argument("--svm-bound", action="store_true", help="also exact_svm_bound at V=2000, m=1000, d=1024")
    p.add_argument("--out", default=None, help="write the markdown table here")
    args = p.parse_args(argv)
    from ntpcert.instance.datasets import paper

    settings = [("paper", paper(), args.repeat),
                ("larger", paper(m=100, d=120, V=20, support_size=6, n=10000), max(1, args.repeat // 3))]
    if args.large:
        settings.append(("large", paper(m=200, d=240, V=20, support_size=6, n=20000), 1))
    rows = []
    for name, inst, rep in settings:
        print(f"[bench_exact] {name} ...", file=sys.stderr, flush=True)
        rows.append(bench_setting(name, inst, rep))
    svm = bench_svm_bound(max(1, args.repeat // 3)) if args.svm_bound else None
    text = report(rows, svm)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(stamp_versions(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
