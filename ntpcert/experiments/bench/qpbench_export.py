r"""Export benchmark instances as a qpbenchmark test set, so that ``qpbenchmark`` can run them too.

The test set is a directory with ``data/*.npz`` (one QP per file, sparse matrices stored as their
CSC arrays), a script ``ntp_svm.py`` defining ``NtpSvm(TestSet)`` and an empty ``results/``; run it
with ``qpbenchmark --results-path results/ntp_svm.csv ntp_svm.py run`` and then ``... report``
(checked with qpbenchmark 2.7.1). Each QP is the NTP-SVM in qpsolvers' form

.. math:: \min_x \tfrac12 x^\top x \quad\text{s.t.}\quad -A_{mar} x \le -\mathbf 1, \quad A_{eq} x = 0,

with :math:`x = \mathrm{vec}(W)` (see :mod:`ntpcert.rows.kesler`). Instances that are not NTP-separable are
exported too (a correct solver reports them infeasible); the file's ``separable`` entry says which.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ntpcert.experiments.bench.runner import Prepared

TEST_SET_SCRIPT = '''#!/usr/bin/env python3
"""NTP-SVM test set (exported by ntpcert): hard-margin QPs of next-token prediction.

Run with: qpbenchmark --results-path results/ntp_svm.csv ntp_svm.py run
"""

import os
from typing import Iterator

import numpy as np
import scipy.sparse as spa
from qpbenchmark.problem import Problem
from qpbenchmark.test_set import TestSet
from qpbenchmark.tolerance import Tolerance


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

    def define_tolerances(self, runtime: float = 100.0) -> None:
        self.tolerances = {
            "default": Tolerance(primal=1.0, dual=1.0, gap=1.0, runtime=runtime),
            "high_accuracy": Tolerance(primal=1e-9, dual=1e-9, gap=1e-9, runtime=runtime),
            "low_accuracy": Tolerance(primal=1e-3, dual=1e-3, gap=1e-3, runtime=runtime),
            "mid_accuracy": Tolerance(primal=1e-6, dual=1e-6, gap=1e-6, runtime=runtime),
        }

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


def export(items: Sequence[Prepared], outdir: str | os.PathLike) -> list[str]:
    """Write the test set for ``items`` into ``outdir``; returns the data files written."""
    from ntpcert.instance.io import read_npz
    from ntpcert.rows.kesler import KeslerSystem

    root = Path(outdir)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    written = []
    for it in items:
        system = KeslerSystem.build(read_npz(it.path))
        arrays = qp_arrays(system)
        arrays["separable"] = np.array(it.expected)
        target = data / f"{it.family}__{it.name}.npz"
        tmp = target.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, target)
        written.append(str(target))
    script = root / "ntp_svm.py"
    tmp = root / ".ntp_svm.py.tmp"
    tmp.write_text(TEST_SET_SCRIPT, encoding="utf-8")
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
