r"""The benchmark's runs in qpbenchmark's results format, so that its own tools read them.

qpbenchmark (checked with 2.7.1) keeps one row per (problem, solver, settings) with the columns
:data:`COLUMNS`; ``qpbenchmark.results.Results`` reads such a file, and ``qpbenchmark TESTSET report``
writes its report from it. Here

* ``problem`` is ``FAMILY__INSTANCE``, the name of the exported file (:mod:`.qpbench_export`);
* ``settings`` is :func:`settings_name` of the tolerance, the one settings group the exported test set
  defines, so that the test set and this file can be reported on together;
* ``runtime`` is the run's seconds (the time limit for a killed run, 0 for a run not made, as
  qpbenchmark writes a skipped solver);
* ``found`` is whether a solution came back; residuals and the (absolute) duality gap are ntpcert's,
  recomputed from the returned pair, and ``inf`` without a solution (as ``qpsolvers.Solution`` gives).
  qpsolvers' gap :math:`|x^\top P x + q^\top x + h^\top z + b^\top y|` equals ours,
  :math:`\tfrac12\|W\|^2 - D(a)`, up to the stationarity residual.
"""

from __future__ import annotations

import csv
import io
from typing import Sequence

from ntpcert.experiments.bench.runner import Run

#: qpbenchmark's results columns, in its order.
COLUMNS = ("problem", "solver", "settings", "runtime", "found", "primal_residual", "dual_residual", "duality_gap")

#: qpbenchmark's names of its standard tolerances.
STANDARD = {1e-9: "high_accuracy", 1e-6: "mid_accuracy", 1e-3: "low_accuracy"}


def settings_name(tol: float) -> str:
    """qpbenchmark's settings name for a tolerance (``mid_accuracy`` for 1e-6), else ``tol_<tol>``."""
    return STANDARD.get(float(tol), f"tol_{float(tol):g}".replace(".", "p").replace("-", "m"))


def problem_name(family: str, instance: str) -> str:
    """The qpbenchmark problem name of an instance (the exported file's stem)."""
    return f"{family}__{instance}"


def result_rows(runs: Sequence[Run], *, tol: float, time_limit: float) -> list[dict]:
    """One qpbenchmark row per run."""
    rows = []
    for r in runs:
        found = r.raw.startswith("optimal")
        runtime = r.seconds if r.seconds is not None else (0.0 if r.raw == "not run" else time_limit)
        inf = float("inf")
        rows.append({"problem": problem_name(r.family, r.instance), "solver": r.backend,
                     "settings": settings_name(tol), "runtime": runtime, "found": found,
                     "primal_residual": r.primal_residual if found else inf,
                     "dual_residual": r.dual_residual if found else inf,
                     "duality_gap": r.gap if found else inf})
    return rows


def results_csv(runs: Sequence[Run], *, tol: float, time_limit: float) -> str:
    """``results.csv``: :func:`result_rows` as CSV text, rows sorted as qpbenchmark writes them."""
    rows = sorted(result_rows(runs, tol=tol, time_limit=time_limit), key=lambda d: (d["problem"], d["solver"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


__all__ = ["COLUMNS", "problem_name", "result_rows", "results_csv", "settings_name"]
