"""The softmax bottleneck at GPT-2-small scale: every token of a random V × d Gaussian decoder gets an exactly
checked argmaxability verdict, as one process (run it under ``/usr/bin/time -v`` for wall time and peak RSS).

    python benchmarks/bench_bottleneck.py [--V 50257] [--d 768] [--seed 0] [--plant] [--bias]
        [--certificate-out FILE] [--check]

The decoder is ``numpy.random.default_rng(seed).standard_normal((V, d))``, rounded to multiples of 2^-20
when ``--plant`` is given so that planted rows are exact: three midpoints of two rows ((w_a + w_b) / 2, an
edge point of the hull: support 2), one duplicate row, and one row 0.5 · w_a (inside the hull: a convex
combination of about d + 1 rows, the most expensive certificate). ``--bias`` adds a Gaussian bias. Prints
one JSON line: the stages' seconds, the counts, the planted rows and their verdicts, the load average
before and after; ``--check`` also re-checks the certificate with the independent checker and times it.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from ntpcert.geometry.bottleneck import argmaxability, check_bottleneck_certificate
from ntpcert.util.versions import versions_line


def decoder(V: int, d: int, seed: int, plant: bool, bias: bool) -> tuple[np.ndarray, np.ndarray | None, dict]:
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((V, d))
    b = rng.standard_normal(V) if bias else None
    planted: dict = {}
    if plant:
        W = np.ldexp(np.rint(np.ldexp(W, 20)), -20)  # a dyadic grid: sums of two rows halve exactly
        idx = rng.choice(V, size=13, replace=False).tolist()
        for k in range(3):
            a, c, v = idx[3 * k: 3 * k + 3]
            W[v] = (W[a] + W[c]) / 2
            if b is not None:
                b[v] = (b[a] + b[c]) / 2 - 0.25
            planted[v] = f"midpoint of {a} and {c}"
        a, v = idx[9], idx[10]
        W[v] = W[a]
        if b is not None:
            b[v] = b[a]
        planted[v] = f"duplicate of {a}"
        a, v = idx[11], idx[12]
        W[v] = 0.5 * W[a]
        if b is not None:
            b[v] = float(np.min(b)) - 1.0
        planted[v] = f"0.5 * row {a}"
    return W, b, planted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--V", type=int, default=50_257)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plant", action="store_true")
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--certificate-out", default=None)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    W, b, planted = decoder(args.V, args.d, args.seed, args.plant, args.bias)
    t_make = time.perf_counter() - t0
    res = argmaxability(W, b, progress=False)
    out: dict = {"versions": versions_line(), "V": args.V, "d": args.d, "seed": args.seed, "bias": args.bias,
                 "make_s": round(t_make, 2), "seconds": {k: round(v, 2) for k, v in res.seconds.items()},
                 "counts": res.counts(), "lp": {"tokens": res.lp_tokens, "rounds": res.lp_rounds},
                 "unargmaxable": res.unargmaxable, "undetermined": res.undetermined,
                 "planted": {str(v): {"what": s, "verdict": res.token(v)} for v, s in planted.items()}}
    if args.certificate_out or args.check:
        t1 = time.perf_counter()
        cert = res.certificate(W, b)
        text = json.dumps(cert)
        out["certificate_s"] = round(time.perf_counter() - t1, 2)
        out["certificate_bytes"] = len(text)
        if args.certificate_out:
            with open(args.certificate_out, "w", encoding="utf-8") as f:
                f.write(text)
        if args.check:
            t1 = time.perf_counter()
            chk = check_bottleneck_certificate(json.loads(text), W, b)
            out["check"] = {"valid": chk.valid, "problems": list(chk.problems),
                            "seconds": round(time.perf_counter() - t1, 2)}
    out["load_before_after"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
