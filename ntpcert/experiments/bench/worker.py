"""Solve one benchmark instance with one backend and print one JSON line (run in a subprocess).

Usage: ``python worker.py INSTANCE.npz BACKEND TIME_LIMIT``. The time covers building the Kesler
rows and the backend's solve, after a warm-up solve of a tiny instance (so not the interpreter's
start, reading the file, or importing the solver). Peak memory is the process's maximum resident
set size.
"""

from __future__ import annotations

import json
import resource
import sys
import time


def _time_limit_options(backend: str, seconds: float) -> dict:
    """Backends that take a ``time_limit`` get one (the runner also kills a run that overstays)."""
    if backend == "cvxpy" or backend.startswith("cvxpy:"):
        return {}
    return {"time_limit": seconds}


def _warm_up(backend: str) -> None:
    """Solve a 3-context instance first, so that imports and one-time set-up of the backend and its
    solver library are not timed (qpbenchmark times the solve call only, too)."""
    import numpy as np

    from ntpcert import NTPInstance
    from ntpcert.errors import NTPCertError
    from ntpcert.solve.svm import solve_svm

    tiny = NTPInstance.from_counts(np.eye(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    try:
        solve_svm(tiny, solver=backend)
    except NTPCertError:
        pass


def main(argv: list[str]) -> int:
    path, backend, limit = argv[0], argv[1], float(argv[2])
    from ntpcert.errors import InfeasibleError, NTPCertError
    from ntpcert.instance.io import read_npz
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.svm import solve_svm

    inst = read_npz(path)
    _warm_up(backend)
    out: dict = {"backend": backend}
    t0 = time.perf_counter()
    try:
        system = KeslerSystem.build(inst)
        sol = solve_svm(system, solver=backend, **_time_limit_options(backend, limit))
    except InfeasibleError as err:
        cert = getattr(err, "certificate", None)
        out.update(status="infeasible", message=str(err)[:300],
                   certificate=None if cert is None else cert.to_json())
    except NTPCertError as err:
        out.update(status="error", message=str(err)[:300])
    except Exception as err:  # noqa: BLE001 - a backend's crash is a failed run, not a crashed benchmark
        out.update(status="error", message=f"{type(err).__name__}: {err}"[:300])
    else:
        out.update(status="optimal", objective=sol.objective, primal_residual=sol.primal_residual,
                   dual_residual=sol.dual_residual, relative_gap=sol.relative_gap,
                   certified_gap=sol.info.get("certificate", {}).get("relative_gap"),
                   info={k: sol.info[k] for k in ("epochs", "classes", "pdas_steps", "exact_seconds", "path")
                         if k in sol.info})
    out["seconds"] = time.perf_counter() - t0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
