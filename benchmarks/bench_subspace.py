"""Dense eigh against sparse LSMR for F and W*: where ``Subspace.build``'s automatic switch
(``DENSE_MAX_ROWS``) should sit, measured in one run of this script.

For each instance, on the same ``KeslerSystem`` (its build is common to both and not timed):

* ``eigh``: ``Subspace.build(system, method="eigh")`` then ``min_norm_solution(log_odds)``: the dense
  r x r Gram matrix G and its eigen-decomposition, O(r^3) time, O(r^2) memory;
* ``lsmr/csr``: ``Subspace.build(system, method="lsmr", operator="csr")`` then ``min_norm_solution``:
  LSMR on the explicit sparse A_eq (its construction included in the time);
* ``lsmr/kesler``: the same with A_eq applied through ``apply_eq`` / ``apply_eq_T`` (dense logits).

Reported: seconds (best of ``--repeats``, interleaved, for r up to ``--repeat-max-rows``; one run
above), the ratio eigh / lsmr(csr), LSMR's iterations and stop reason, the relative difference of
the two W* and of P_F(X) for a Gaussian X, and the peak traced memory of each path (one extra run with
``tracemalloc``, which sees NumPy's allocations). Families (r grows with the size parameter):

* ``corpus-k2``: the pydoc text, character bigram contexts, one-hot-concat embeddings (real data:
  rank-deficient A_eq, inconsistent log-odds; ``max_chars`` grows);
* ``gauss-wide``: Gaussian embeddings, d = 128, V = 500, supports of 1..5 tokens (full row rank);
* ``gauss-narrow``: Gaussian embeddings, d = 16, V = 50, supports of 1..5 tokens (V·d = 800 < r:
  rank-deficient, inconsistent).

Usage::

    .venv/bin/python benchmarks/bench_subspace.py [--quick] [--out benchmarks/results/subspace.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc


def _threads(argv: list[str]) -> str:
    """``--threads N`` read before NumPy loads its BLAS (default 1: on a loaded machine, spinning BLAS
    threads make multi-threaded timings swing by several times)."""
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
    return "1"


THREADS = _threads(sys.argv)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS

import numpy as np  # (after the thread settings)
import scipy

from ntpcert.experiments.bench.families import gaussian_instance
from ntpcert.util.versions import stamp_versions
from ntpcert.instance.datasets import pydoc
from ntpcert.rows import subspace as S
from ntpcert.rows.kesler import KeslerSystem

#: (family, size parameter) -> instance; the sizes are chosen so that r runs from ~300 to ~8000.
FAMILIES = {
    "corpus-k2": ([1000, 2000, 3000, 10000, 30000, 100000, 300000],
                  lambda n: pydoc(k=2, max_chars=n, embedding="onehot-concat", max_entries=None)),
    "gauss-wide": ([150, 250, 350, 500, 1000, 2000, 4000],
                   lambda n: gaussian_instance(np.random.default_rng(n), V=500, m=n, d=128, kmin=1, kmax=5)),
    "gauss-narrow": ([150, 250, 350, 500, 1000, 2000, 4000],
                     lambda n: gaussian_instance(np.random.default_rng(n), V=50, m=n, d=16, kmin=1, kmax=5)),
}
QUICK = {"corpus-k2": [1000, 3000], "gauss-wide": [150, 500], "gauss-narrow": [150, 500]}
METHODS = {
    "eigh": {"method": "eigh"},
    "lsmr/csr": {"method": "lsmr", "operator": "csr"},
    "lsmr/kesler": {"method": "lsmr", "operator": "kesler"},
}


def run_once(system: KeslerSystem, kw: dict) -> tuple[float, S.Subspace, np.ndarray]:
    t0 = time.perf_counter()
    sub = S.Subspace.build(system, **kw)
    W = sub.min_norm_solution(system.log_odds())
    return time.perf_counter() - t0, sub, W


def peak_bytes(system: KeslerSystem, kw: dict) -> int:
    tracemalloc.start()
    try:
        run_once(system, kw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(system: KeslerSystem, repeats: int, methods: list[str]) -> dict:
    best = {name: float("inf") for name in methods}
    subs, sols = {}, {}
    for _ in range(repeats):
        for name in methods:  # interleaved: a busy moment biases every column alike
            t, sub, W = run_once(system, METHODS[name])
            best[name] = min(best[name], t)
            subs[name], sols[name] = sub, W
    X = np.random.default_rng(0).standard_normal((system.instance.V, system.instance.d))
    Pe = subs["eigh"].project(X)
    out = {"seconds": best, "info": subs["lsmr/csr"].solve_info, "dim": subs["eigh"].dim,
           "certified": subs["eigh"].certified_rank,
           "w_diff": float(np.linalg.norm(sols["lsmr/csr"] - sols["eigh"]) / max(np.linalg.norm(sols["eigh"]), 1e-300)),
           "p_diff": float(np.linalg.norm(subs["lsmr/csr"].project(X) - Pe) / np.linalg.norm(Pe)),
           "peak": {name: peak_bytes(system, METHODS[name]) for name in ("eigh", "lsmr/csr")}}
    return out


def render(rows: list[tuple[str, object, KeslerSystem, dict]], args: argparse.Namespace) -> str:
    lines = [
        "# F and W*: dense eigh vs sparse LSMR",
        "",
        "Produced by `benchmarks/bench_subspace.py`; all numbers below come from one run of it.",
        (f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, SciPy {scipy.__version__}; {THREADS} BLAS thread(s); load average "
        f"{os.getloadavg()[0]:.1f} at the end (the machine was shared: absolute times are noisy, ratios are the point)."),
        (f"Time = `Subspace.build` + `min_norm_solution(log_odds)`, best of {args.repeats} interleaved runs for "
        f"r ≤ {args.repeat_max_rows}, one run above. LSMR: atol = btol = {S.LSMR_TOL:g}, no condition stop, "
        f"from x = 0. Peak = tracemalloc peak of one more run (NumPy allocations included)."),
        "",
        ("| family | size | V | m | d | r | rank A_eq (eigh) | eigh s | lsmr/csr s | lsmr/kesler s | eigh / lsmr(csr) "
         "| LSMR iters | istop | ‖A^T r‖ | rel. diff W* | rel. diff P_F(X) | peak eigh MB | peak lsmr MB |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for fam, size, system, res in rows:
        inst = system.instance
        sec, info = res["seconds"], res["info"]
        cert = "" if res["certified"] == res["dim"] else f" (certified ≥ {res['certified']})"
        lines.append(
            f"| {fam} | {size} | {inst.V} | {inst.m} | {inst.d} | {system.n_eq} | {res['dim']}{cert} | "
            f"{sec['eigh']:.3g} | {sec['lsmr/csr']:.3g} | {sec.get('lsmr/kesler', float('nan')):.3g} | "
            f"**{sec['eigh'] / sec['lsmr/csr']:.1f}×** | {info['iterations']} | {info['istop']} | "
            f"{info['normal_residual']:.1e} | {res['w_diff']:.1e} | {res['p_diff']:.1e} | "
            f"{res['peak']['eigh'] / 2**20:.0f} | {res['peak']['lsmr/csr'] / 2**20:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two small sizes per family (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeat-max-rows", type=int, default=3000, help="one run only above this many rows")
    ap.add_argument("--kesler-max-rows", type=int, default=5000,
                    help="skip the (slower) apply_eq LinearOperator above this many rows")
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    ap.add_argument("--threads", default="1", help="BLAS threads (default 1; read before NumPy loads)")
    ap.add_argument("--out", default=None, help="write the Markdown table here (default: stdout only)")
    args = ap.parse_args(argv)
    rows = []
    warm = KeslerSystem.build(gaussian_instance(np.random.default_rng(0), V=20, m=30, d=8, kmin=1, kmax=4))
    for kw in METHODS.values():  # warm-up: imports, caches, thread pools
        run_once(warm, kw)
    for fam in args.families:
        sizes, make = FAMILIES[fam]
        for size in (QUICK[fam] if args.quick else sizes):
            system = KeslerSystem.build(make(size))
            r = system.n_eq
            methods = ["eigh", "lsmr/csr"] + (["lsmr/kesler"] if r <= args.kesler_max_rows else [])
            res = measure(system, args.repeats if r <= args.repeat_max_rows else 1, methods)
            rows.append((fam, size, system, res))
            sec = res["seconds"]
            print(f"{fam} {size}: r={r} " + " ".join(f"{k}={v:.3g}s" for k, v in sec.items())
                  + f" ratio={sec['eigh'] / sec['lsmr/csr']:.1f} iters={res['info']['iterations']} "
                  f"w_diff={res['w_diff']:.1e} p_diff={res['p_diff']:.1e}", file=sys.stderr, flush=True)
    text = render(rows, args)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(stamp_versions(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
