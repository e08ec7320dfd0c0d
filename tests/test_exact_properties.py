"""Property: on random small sparsity patterns the exact verdicts agree with an independent float
check (dense least squares for (4), a max-margin LP for (6)) whenever that check is decisive."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, event, given
from hypothesis import strategies as st
from scipy.optimize import linprog

from ntpcert import NTPInstance
from ntpcert.pipeline.exact_verdicts import exact_certify

#: The float checks are decisive only outside these bands.
COMPAT_YES, COMPAT_NO = 1e-9, 1e-4
MARGIN_YES, MARGIN_NO = 1e-6, 1e-10


@st.composite
def small_instances(draw):
    m = draw(st.integers(2, 6))
    V = draw(st.integers(2, 5))
    d = draw(st.integers(1, 4))
    pool = draw(st.lists(st.lists(st.integers(-2, 2), min_size=d, max_size=d), min_size=1, max_size=m))
    H = np.array([pool[draw(st.integers(0, len(pool) - 1))] for _ in range(m)], dtype=np.float64)
    H = H * draw(st.sampled_from([1.0, 0.5, 1.25]))
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        for z in draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=V, unique=True)):
            C[j, z] = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 9]))
    return NTPInstance.from_counts(H, C)


def _rows(inst):
    eq, mar, b = [], [], []
    V, d = inst.V, inst.d
    for j in range(inst.m):
        S = [int(z) for z in inst.support(j)]
        h = inst.embeddings[j]
        for z in range(V):
            row = np.zeros((V, d))
            if z in S and z != S[0]:
                row[z], row[S[0]] = h, -h
                eq.append(row.ravel())
                b.append(np.log(inst.counts[j, z] / inst.counts[j, S[0]]))
            elif z not in S:
                row[S[0]], row[z] = h, -h
                mar.append(row.ravel())
    n = V * d
    return np.array(eq).reshape(-1, n), np.array(b), np.array(mar).reshape(-1, n)


def _float_compatible(A, b):
    if A.shape[0] == 0:
        return True
    x, *_ = np.linalg.lstsq(A, b, rcond=None)
    rel = np.linalg.norm(A @ x - b) / max(1.0, np.linalg.norm(b))
    return True if rel < COMPAT_YES else (False if rel > COMPAT_NO else None)


def _float_separable(A, M):
    if M.shape[0] == 0:
        return True
    n = M.shape[1]
    c = np.zeros(n + 1)
    c[-1] = -1.0  # maximise t
    A_ub = np.hstack([-M, np.ones((M.shape[0], 1))])  # t - M x <= 0
    A_eq = np.hstack([A, np.zeros((A.shape[0], 1))]) if A.shape[0] else None
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(M.shape[0]), A_eq=A_eq,
                  b_eq=np.zeros(A.shape[0]) if A.shape[0] else None,
                  bounds=[(-1, 1)] * n + [(None, 1)], method="highs")
    assert res.status == 0
    t = -res.fun
    return True if t > MARGIN_YES else (False if t < MARGIN_NO else None)


@given(inst=small_instances())
def test_exact_verdicts_agree_with_decisive_float_checks(inst):
    A, b, M = _rows(inst)
    fc, fs = _float_compatible(A, b), _float_separable(A, M)
    assume(fc is not None or fs is not None)
    rep = exact_certify(inst, svm=False, progress=False)
    event(f"exact compatible={rep.compatible.holds} separable={rep.separable.holds}")
    assert rep.check.valid, rep.check.reason
    if fc is not None:
        assert rep.compatible.holds is fc
    if fs is not None:
        assert rep.separable.holds is fs


@given(inst=small_instances())
def test_separable_instances_get_a_checked_ntp_svm_gap(inst):
    from ntpcert.errors import SolverError

    try:
        rep = exact_certify(inst, svm=True, progress=False)
    except SolverError:
        assume(False)
    assert rep.check.valid, rep.check.reason
    if rep.separable.holds and rep.float_report.svm is not None:
        event(f"svm certified={rep.svm_certified}")
        assert rep.svm_certified, rep.svm.reason if rep.svm is not None else "no bound"
        assert rep.svm.gap >= 0
        assert rep.svm.norm_lower <= rep.float_report.svm.norm * (1 + 1e-6) + 1e-9
