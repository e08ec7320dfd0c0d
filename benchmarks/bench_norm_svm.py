"""Other-norm NTP-SVMs (what ``ntpcert trajectory --norms all`` solves): the direct route of
ntpcert.solve.norm_programs (sparse Kesler rows to Clarabel / SCS) against the cvxpy route it replaced as
the default, in one process, as ratios.

The cvxpy route is what ``solver="auto"`` did before: cvxpy with ``AUTO_SOLVER[norm]`` (Clarabel, or SCS
for the nuclear norm), then cvxpy with SCS when that one's checked relative gap exceeded the tolerance.
Both answers are checked the same way (repaired point, weak-duality bound), so the table also gives each
route's certified relative gap and the difference of the two optima. Wall seconds and process CPU
seconds (user + sys) are both reported: the machine may be shared.

Instances: ``paper`` (m = 50, d = 60, V = 10, nontrivial F), the first 250 characters of the built-in
pydoc text with one-hot context embeddings (m = d = 116, V = 35), and a one-hot separable teacher instance
(m = 40, d = 20, V = 5; tests/test_ce.py).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_norm_svm.py [--out benchmarks/results/norm-svm.md]
        [--norms max,l1,spectral,nuclear] [--instances paper,pydoc250,teacher]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from ntpcert.util.versions import stamp_versions

from ntpcert import NTPInstance
from ntpcert.instance.load import load_instance
from ntpcert.instance.datasets.teacher import teacher as teacher_data
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.solve.norms import AUTO_SOLVER, NORM_SVM_TOL, solve_norm_svm
from ntpcert.util.files import atomic_write_text


def teacher_instance(seed: int = 0, m: int = 40, d: int = 20, V: int = 5) -> NTPInstance:
    """One-hot separable data: Gaussian embeddings, labels argmax_v (T h_j)_v of a random linear teacher T."""
    return teacher_data(m=m, d=d, V=V, seed=seed)


INSTANCES = {
    "paper": lambda: load_instance("paper"),
    "pydoc250": lambda: load_instance("pydoc", max_chars=250, embedding="onehot-context"),
    "teacher": teacher_instance,
}


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def old_route(system, sub, norm):
    """``solver="auto"`` before the direct route: AUTO_SOLVER[norm] through cvxpy, then SCS if needed."""
    sol = solve_norm_svm(system, norm, solver=AUTO_SOLVER[norm], subspace=sub)
    if sol.relative_gap > NORM_SVM_TOL and AUTO_SOLVER[norm] != "SCS":
        alt = solve_norm_svm(system, norm, solver="SCS", subspace=sub)
        sol = alt if alt.relative_gap < sol.relative_gap else sol
    return sol


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--norms", default="max,l1,spectral,nuclear")
    ap.add_argument("--instances", default="paper,pydoc250,teacher")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cvxpy  # noqa: F401  (imports and solver start-up paid before any timing)
    import clarabel  # noqa: F401
    import scs  # noqa: F401

    norms = args.norms.split(",")
    lines = ["# Other-norm NTP-SVMs: direct route vs cvxpy", "",
             f"Produced by `benchmarks/bench_norm_svm.py` in one process. Machine: {platform.machine()}, "
             f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}.", "",
             "| instance | norm | cvxpy route | wall s | CPU s | rel. gap | direct route | wall s | CPU s | rel. gap "
             "| wall ratio | CPU ratio | optima differ by (rel.) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    totals: dict[str, list[float]] = {}
    for name in args.instances.split(","):
        inst = INSTANCES[name]()
        system = KeslerSystem.build(inst)
        sub = Subspace.build(system)
        tot = totals.setdefault(f"{name} (m = {inst.m}, d = {inst.d}, V = {inst.V})", [0.0, 0.0, 0.0, 0.0])
        for norm in norms:
            old, ow, oc = timed(lambda: old_route(system, sub, norm))
            new, nw, nc = timed(lambda: solve_norm_svm(system, norm, subspace=sub))
            diff = abs(old.value - new.value) / max(old.value, new.value)
            tot[0] += ow
            tot[1] += oc
            tot[2] += nw
            tot[3] += nc
            lines.append(f"| {name} | {norm} | {old.solver} | {ow:.2f} | {oc:.2f} | {old.relative_gap:.1e} | {new.solver} "
                         f"| {nw:.2f} | {nc:.2f} | {new.relative_gap:.1e} | {ow / nw:.1f}x | {oc / nc:.1f}x | {diff:.1e} |")
            print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", f"All of `--norms {args.norms}` per instance:", "",
              "| instance | cvxpy wall s | cvxpy CPU s | direct wall s | direct CPU s | wall ratio | CPU ratio |",
              "|---|---|---|---|---|---|---|"]
    for name, (ow, oc, nw, nc) in totals.items():
        lines.append(f"| {name} | {ow:.1f} | {oc:.1f} | {nw:.1f} | {nc:.1f} | {ow / nw:.1f}x | {oc / nc:.1f}x |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += ["", f"Load average (1 min) at the end: {load:.1f}."]
    text = "\n".join(lines) + "\n"
    if args.out:
        atomic_write_text(args.out, stamp_versions(text))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
