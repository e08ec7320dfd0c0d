"""Solve benchmark instances with one backend, one JSON line per instance (run in a subprocess).

Usage: ``python worker.py BACKEND``, then one request per line on stdin, ``PATH<TAB>TIME_LIMIT``; each
answer is one line on stdout starting with ``pool.MARK`` (solver libraries may print lines of their
own). The worker first solves a tiny instance (so that imports and one-time set-up of the backend
are not timed; qpbenchmark times the solve call only, too) and then prints ``MARK ready``. The time
of an instance covers building the Kesler rows and the backend's solve. ``peak_mb`` is the process's
maximum resident set size so far.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from ntpcert.experiments.bench.pool import MARK


def _time_limit_options(backend: str, seconds: float) -> dict:
    """Backends that take a ``time_limit`` get one (the runner also kills a run that overstays)."""
    if backend == "cvxpy" or backend.startswith("cvxpy:"):
        return {}
    return {"time_limit": seconds}


def _warm_up(backend: str) -> None:
    """Solve a 3-context instance first, so that imports and one-time set-up are not timed."""
    import numpy as np

    from ntpcert import NTPInstance
    from ntpcert.errors import NTPCertError
    from ntpcert.solve.svm import solve_svm

    tiny = NTPInstance.from_counts(np.eye(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    try:
        solve_svm(tiny, solver=backend)
    except NTPCertError:
        pass


def solve_one(path: str, backend: str, limit: float) -> dict:
    """The worker's answer for one instance file: ``status`` ("optimal", "infeasible" or "error"),
    ``seconds``, residuals and gaps when a solution came back, ``peak_mb``."""
    from ntpcert.errors import InfeasibleError, NTPCertError
    from ntpcert.instance.io import read_npz
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    out: dict = {"backend": backend, "path": path}
    t0 = None  # the clock starts once the file is read
    try:
        inst = read_npz(path)
        t0 = time.perf_counter()
        system = KeslerSystem.build(inst)
        sol = solve_svm(system, solver=backend, **_time_limit_options(backend, limit))
    except InfeasibleError as err:
        out.update(status="infeasible", message=str(err)[:300])
    except NTPCertError as err:
        out.update(status="error", message=str(err)[:300])
    except Exception as err:  # noqa: BLE001 - a backend's crash is a failed run, not a crashed benchmark
        out.update(status="error", message=f"{type(err).__name__}: {err}"[:300])
    else:
        out.update(status="optimal", objective=sol.objective, primal_residual=sol.primal_residual,
                   dual_residual=sol.dual_residual, gap=abs(sol.gap), relative_gap=sol.relative_gap,
                   certified_gap=sol.info.get("certificate", {}).get("relative_gap"))
    out["seconds"] = 0.0 if t0 is None else time.perf_counter() - t0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def main(argv: list[str]) -> int:
    backend = argv[0]
    _warm_up(backend)
    sys.stdout.write(MARK + "ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        path, limit = line.rstrip("\n").split("\t")
        sys.stdout.write(MARK + json.dumps(solve_one(path, backend, float(limit))) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
