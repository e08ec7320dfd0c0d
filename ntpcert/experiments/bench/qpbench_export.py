r"""Export benchmark instances as a qpbenchmark test set, so that ``qpbenchmark`` can run them too.

The test set is a directory with ``data/*.npz`` (one QP per file, sparse matrices stored as their
CSC arrays), a script ``ntp_svm.py`` defining ``NtpSvm(TestSet)`` and an empty ``results/``. Its
whole recipe (checked with qpbenchmark 2.7.1 by ``tests/test_qpbenchmark_recipe.py``) is::

    cd DIR
    qpbenchmark ntp_svm.py --results-path results/ntp_svm.csv run --author NAME
    qpbenchmark ntp_svm.py --results-path results/ntp_svm.csv report --author NAME

The test set defines **one** settings group, named by :func:`~.qpbench_results.settings_name` of the
benchmark's tolerance (``mid_accuracy`` for 1e-6) with its time limit, so that ``run`` covers every
setting and ``report`` finds results for each one; ntpcert's own ``results.csv`` uses the same name,
so ``report`` also runs on it. Each QP is the NTP-SVM in qpsolvers' form

.. math:: \min_x \tfrac12 x^\top x \quad\text{s.t.}\quad -A_{mar} x \le -\mathbf 1, \quad A_{eq} x = 0,

with :math:`x = \mathrm{vec}(W)` (see :mod:`ntpcert.rows.kesler`). Only separable instances are
exported: qpbenchmark scores a problem by "found a solution within tolerance", so an infeasible one
would count as a failure at the time limit for every solver, the way ntpcert's report refuses to
score it (it scores those instances apart).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ntpcert.experiments.bench.qpbench_results import problem_name, settings_name
from ntpcert.experiments.bench.runner import DEFAULT_TOL, Prepared

#: Time limit of the exported settings when none is given (seconds).
DEFAULT_TIME_LIMIT = 60.0

TEMPLATE = '''#!/usr/bin/env python3
"""NTP-SVM test set (exported by ntpcert): hard-margin QPs of next-token prediction.

Run with:
    qpbenchmark ntp_svm.py --results-path results/ntp_svm.csv run --author NAME
    qpbenchmark ntp_svm.py --results-path results/ntp_svm.csv report --author NAME
"""

import os
from typing import Iterator

import numpy as np
import qpbenchmark.report
import scipy.sparse as spa
from qpbenchmark.problem import Problem
from qpbenchmark.solver_settings import SolverSettings
from qpbenchmark.test_set import TestSet
from qpbenchmark.tolerance import Tolerance

#: The one settings group: its name, tolerance and time limit (seconds), from `ntpcert bench`.
SETTINGS = {settings!r}
TOL = {tol!r}
TIME_LIMIT = {time_limit!r}

_gpu_info_summary = qpbenchmark.report.get_gpu_info_summary


def _gpu_or_none() -> str:
    """qpbenchmark 2.7.1 names the GPU through PyTorch and stops the report when PyTorch is installed
    without CUDA ("Torch not compiled with CUDA enabled"); then the report names no GPU."""
    try:
        return _gpu_info_summary()
    except (AssertionError, RuntimeError):
        return ""


qpbenchmark.report.get_gpu_info_summary = _gpu_or_none


def _csc(data, key):
    return spa.csc_matrix((data[key + "_data"], data[key + "_indices"], data[key + "_indptr"]),
                          shape=tuple(data[key + "_shape"]))


class NtpSvm(TestSet):
    """NTP-SVM instances: min 1/2 |W|_F^2 under the NTP-separability constraints."""

    @property
    def description(self) -> str:
        return "Hard-margin NTP-SVM QPs (Thrampoulidis 2024) exported by ntpcert."

    @property
    def title(self) -> str:
        return "NTP-SVM test set"

    @property
    def sparse_only(self) -> bool:
        return True

    def define_tolerances(self, runtime: float = TIME_LIMIT) -> None:
        self.tolerances = {{SETTINGS: Tolerance(primal=TOL, dual=TOL, gap=TOL, runtime=runtime)}}

    def define_solver_settings(self) -> None:
        settings = SolverSettings()
        settings.set_eps_abs(TOL)
        settings.set_eps_rel(0.0)
        settings.set_param("piqp", "check_duality_gap", True)
        settings.set_param("proxqp", "check_duality_gap", True)
        settings.set_time_limit(self.tolerances[SETTINGS].runtime)
        self.solver_settings = {{SETTINGS: settings}}

    def __init__(self):
        super().__init__()
        self.data_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

    def __iter__(self) -> Iterator[Problem]:
        for fname in sorted(os.listdir(self.data_dir)):
            if not fname.endswith(".npz"):
                continue
            with np.load(os.path.join(self.data_dir, fname), allow_pickle=False) as data:
                A = _csc(data, "A") if data["A_shape"][0] else None
                b = data["b"] if A is not None else None
                yield Problem(P=_csc(data, "P"), q=data["q"], G=_csc(data, "G"), h=data["h"], A=A, b=b,
                              lb=None, ub=None, name=fname[:-4])
'''


def qp_arrays(system) -> dict[str, np.ndarray]:
    """The NTP-SVM of a :class:`~ntpcert.rows.kesler.KeslerSystem` as named arrays (CSC parts)."""
    from ntpcert.rows.qp import build_qp

    qp = build_qp(system)
    out: dict[str, np.ndarray] = {"q": qp.q, "h": -np.ones(qp.n_ineq), "b": np.zeros(qp.n_eq)}
    for key, M in (("P", qp.P), ("G", qp.A[qp.n_eq :]), ("A", qp.A[: qp.n_eq])):
        M = M.tocsc()
        out[key + "_data"] = M.data
        out[key + "_indices"] = M.indices
        out[key + "_indptr"] = M.indptr
        out[key + "_shape"] = np.array(M.shape, dtype=np.int64)
    return out


def test_set_script(*, tol: float = DEFAULT_TOL, time_limit: float = DEFAULT_TIME_LIMIT) -> str:
    """The text of ``ntp_svm.py`` with one settings group of tolerance ``tol`` and ``time_limit`` seconds."""
    return TEMPLATE.format(settings=settings_name(tol), tol=float(tol), time_limit=float(time_limit))


def export(items: Sequence[Prepared], outdir: str | os.PathLike, *, tol: float = DEFAULT_TOL,
           time_limit: float = DEFAULT_TIME_LIMIT) -> list[str]:
    """Write the test set of the separable ``items`` into ``outdir``; returns the data files written."""
    from ntpcert.instance.io import read_npz
    from ntpcert.rows.kesler import KeslerSystem

    root = Path(outdir)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    written = []
    for it in items:
        if it.expected == "not separable":
            continue
        system = KeslerSystem.build(read_npz(it.path))
        arrays = qp_arrays(system)
        arrays["separable"] = np.array(it.expected)
        target = data / f"{problem_name(it.family, it.name)}.npz"
        tmp = target.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, target)
        written.append(str(target))
    script = root / "ntp_svm.py"
    tmp = root / ".ntp_svm.py.tmp"
    tmp.write_text(test_set_script(tol=tol, time_limit=time_limit), encoding="utf-8")
    os.replace(tmp, script)
    return written


def load_problem(path: str | os.PathLike):
    """Read one exported file back as ``(P, q, G, h, A, b)`` with scipy CSC matrices (A, b None
    without equalities): the reader the test-set script uses, for checks without qpbenchmark."""
    import scipy.sparse as spa

    with np.load(path, allow_pickle=False) as d:
        def csc(key):
            return spa.csc_matrix((d[key + "_data"], d[key + "_indices"], d[key + "_indptr"]), shape=tuple(d[key + "_shape"]))

        A = csc("A") if d["A_shape"][0] else None
        return csc("P"), d["q"], csc("G"), d["h"], A, (d["b"] if A is not None else None)
