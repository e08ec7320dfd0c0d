"""Own-norm margin ratios of normalised sign descent, spectral descent and Muon (Newton–Schulz, and exact SVD) on a one-hot separable
instance, decade by decade (Fan, Schmidt, Thrampoulidis, arXiv 2502.04664: each converges in direction to
the max-margin solution of its own norm).

Instance: m = 40, d = 20, V = 5, Gaussian embeddings, labels from a random linear teacher (seed 0), as in
tests/test_ce.py. Step size eta_0/sqrt(t). The own-norm SVMs come from ntpcert.solve.norms; the ratio is
``margin_ratio_max`` (sign), ``margin_ratio_spectral`` (spectral, Muon): 1 exactly at the own-norm
max-margin direction.

Usage::

    .venv/bin/python benchmarks/bench_own_norm.py [--steps 1000000] [--lr 0.1] [--out benchmarks/results/own-norm.md]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ntpcert.util.versions import stamp_versions

from ntpcert import NTPInstance
from ntpcert.dynamics.optimizers import muon, sign, spectral
from ntpcert.dynamics.trajectory import Limits, run
from ntpcert.instance.datasets.teacher import teacher as teacher_data
from ntpcert.util.files import atomic_write_text


def teacher_instance(seed: int = 0, m: int = 40, d: int = 20, V: int = 5) -> NTPInstance:
    """One-hot separable data: Gaussian embeddings, labels argmax_v (T h_j)_v of a random linear teacher T."""
    return teacher_data(m=m, d=d, V=V, seed=seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="sign,spectral,muon,muon-svd")
    args = ap.parse_args(argv)
    inst = teacher_instance()
    lim = Limits.compute(inst, norms=("max", "spectral"))
    decades = [10**k for k in range(1, 1 + int(round(np.log10(args.steps))))]
    opts = {"sign": (sign(args.lr, schedule="inv-sqrt"), "max"),
            "spectral": (spectral(args.lr, schedule="inv-sqrt"), "spectral"),
            "muon": (muon(args.lr, schedule="inv-sqrt"), "spectral"),
            "muon-svd": (muon(args.lr, schedule="inv-sqrt", orthogonalize="svd"), "spectral")}
    lines = ["# Own-norm margin ratios on a one-hot separable instance", "",
             "Produced by `benchmarks/bench_own_norm.py`: m = 40, d = 20, V = 5, Gaussian embeddings, labels from a "
             f"random linear teacher (seed 0); step {args.lr}/sqrt(t) from W = 0; ratio = own-norm margin of W_t "
             "divided by the own-norm SVM's (1 at the limit).", "",
             "| optimiser | " + " | ".join(f"t = {t:,}" for t in decades) + " | orth. error at the end | float64 trusted | seconds |",
             "|---|" + "---|" * (len(decades) + 3)]
    for name in args.only.split(","):
        opt, norm = opts[name]
        t0 = time.perf_counter()
        traj = run(inst, opt, args.steps, limits=lim, grid=decades)
        col = traj[f"margin_ratio_{norm}"]
        ratios = [float(col[list(traj.steps).index(t)]) for t in decades]
        orth = traj.metrics.get("orth_error")
        trusted = traj.metrics.get("float64_trusted")
        lines.append(f"| {name} | " + " | ".join(f"{r:.4f}" for r in ratios)
                     + f" | {'n/a' if orth is None else f'{float(orth[-1]):.2e}'}"
                     + f" | {'n/a' if trusted is None else bool(np.all(trusted == 1.0))}"
                     + f" | {time.perf_counter() - t0:.0f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        atomic_write_text(args.out, stamp_versions(text))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
