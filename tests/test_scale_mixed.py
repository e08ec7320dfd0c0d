"""Embeddings whose rows differ in scale by many orders of magnitude: no definite wrong verdict, no crash.

The truth comes from an independent exact argument. With d = 1, W is a vector w in R^V and the logits of
context j are w h_j: (6a) says the tokens of S_j share one value of w (when h_j != 0), and (6b) says
(w_z - w_v) h_j >= 1, an edge between two classes of tokens whose direction is the sign of h_j. Every
edge asks for a positive difference, so (6) holds iff no class has an edge to itself and the edges have
no directed cycle (a topological order gives the potentials). Only the signs and zero pattern of H
matter: the scales of the rows cannot change the answer, however they mislead a float solver.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ntpcert import NTPInstance, certify, exact_certify
from ntpcert.cli.app import main


def separable_d1(H: np.ndarray, mask: np.ndarray) -> bool:
    """Exact NTP-separability of a d = 1 instance (module doc), by union-find and a cycle search."""
    m, V = mask.shape
    parent = list(range(V))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for j in range(m):
        S = np.flatnonzero(mask[j])
        if H[j, 0] != 0:
            for z in S[1:]:
                parent[find(int(z))] = find(int(S[0]))
    edges: dict[int, set[int]] = {}
    for j in range(m):
        S, off = np.flatnonzero(mask[j]), np.flatnonzero(~mask[j])
        if off.size == 0:
            continue
        if H[j, 0] == 0:
            return False  # 0 >= 1 for an off-support token
        hi, lo = find(int(S[0])), [find(int(v)) for v in off]
        for c in lo:  # h > 0: class of S_j above class c; h < 0: below
            a, b = (c, hi) if H[j, 0] > 0 else (hi, c)
            if a == b:
                return False
            edges.setdefault(a, set()).add(b)
    state: dict[int, int] = {}

    def cyclic(u: int) -> bool:
        state[u] = 1
        for w in edges.get(u, ()):
            if state.get(w) == 1 or (w not in state and cyclic(w)):
                return True
        state[u] = 2
        return False

    return not any(u not in state and cyclic(u) for u in list(edges))


def test_truth_on_the_red_team_reproducer():
    H = np.array([[3.0], [3e-11]])
    mask = np.array([[True, False, False], [True, True, False]])
    assert separable_d1(H, mask) is False
    assert separable_d1(np.array([[3.0], [-3e-11]]), np.array([[True, False, False], [False, True, False]])) is True


def test_red_team_false_separable_reproducer():
    inst = NTPInstance.from_counts([[3.0], [3e-11]], [[2, 0, 0], [2, 4, 0]])
    rep = certify(inst)
    assert rep.separable.holds is not True
    ex = exact_certify(inst, svm=False)
    assert ex.separability.holds is False  # a Farkas ray exists, and --exact finds it
    from ntpcert import verify
    assert verify(ex.certificate).valid


def test_the_false_point_fails_the_point_check():
    """The red team's point: margins >= 1 and (6a) violated by only 1e-11, at ||W|| ~ 1e10. Its (6a)
    residual is far above its rounding bound, and the exact repair onto F-perp leaves no positive margin."""
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.point_check import check_point

    inst = NTPInstance.from_counts([[3.0], [3e-11]], [[2, 0, 0], [2, 4, 0]])
    system = KeslerSystem.build(inst)
    w1 = -1e10
    W = np.array([[w1 + 1 / 3 + 1e-7], [w1], [w1 - 1e11]])  # (w0 - w1) 3 >= 1, w0 - w1 = 0 violated by ~1e-11
    chk = check_point(system, W)
    assert chk.min_margin >= 1.0 and chk.eq_violation < 1e-10
    assert not chk.ok and chk.eq_excess > 1.0
    assert not check_point(system, W, exact=False).ok


def test_a_true_point_passes_the_point_check():
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.point_check import check_point

    inst = NTPInstance.from_counts([[3.0], [-3e-11]], [[2, 0, 0], [0, 4, 0]])
    system = KeslerSystem.build(inst)
    W = np.array([[1e11], [0.0], [5e10]])  # margins 3e11, 1.5e11 (context 0) and 3, 1.5 (context 1)
    chk = check_point(system, W)
    assert chk.ok and chk.how == "rounding", chk.text


@st.composite
def scale_mixed_d1(draw):
    m = draw(st.integers(2, 4))
    V = draw(st.integers(2, 4))
    mask = np.zeros((m, V), dtype=bool)
    for j in range(m):
        k = draw(st.integers(1, V))
        mask[j, draw(st.permutations(range(V)))[:k]] = True
    if mask.all():
        mask[0, 0] = False
        mask[0, 1:] = True
    mant = [draw(st.sampled_from([1.0, 3.0, 7.0, 0.5])) for _ in range(m)]
    exps = [draw(st.integers(-100, 100)) for _ in range(m)]
    signs = [draw(st.sampled_from([1.0, -1.0])) for _ in range(m)]
    H = np.array([[s * a * 10.0 ** e] for s, a, e in zip(signs, mant, exps)])
    C = mask * np.array([[draw(st.integers(1, 5)) for _ in range(V)] for _ in range(m)])
    return H, mask, C


@settings(max_examples=25)
@given(scale_mixed_d1())
def test_scale_mixed_d1_never_wrong(data):
    H, mask, C = data
    truth = separable_d1(H, mask)
    inst = NTPInstance.from_counts(H, C)
    rep = certify(inst, svm=False)
    assert rep.separable.holds in (truth, None), (H.ravel().tolist(), C.tolist(), rep.separable.reason)
    ex = exact_certify(inst, svm=False)
    assert ex.separability.holds in (truth, None), (H.ravel().tolist(), C.tolist())


@settings(max_examples=15)
@given(st.integers(-11, -1), st.integers(0, 2**32 - 1))
def test_two_context_family_exact_decides(e, seed):
    """The red team's family: two contexts, d = 1, scales 3 and 3 * 10^e; --exact decides every one."""
    rng = np.random.default_rng(seed)
    H = np.array([[3.0], [3.0 * 10.0 ** e]]) * rng.choice([-1.0, 1.0], size=(2, 1))
    C = np.zeros((2, 3), dtype=np.int64)
    while not (C.sum(axis=1) > 0).all() or (C > 0).all():
        C = rng.integers(0, 5, size=(2, 3)) * (rng.random((2, 3)) < 0.6)
    inst = NTPInstance.from_counts(H, C)
    truth = separable_d1(H, C > 0)
    assert certify(inst, svm=False).separable.holds in (truth, None)
    assert exact_certify(inst, svm=False).separability.holds is truth


#: Found by a search over 5 x 2 embeddings with log-uniform magnitudes in [1e-101, 1e116] and random
#: signs: the exact null vector of the equality rows had exponents beyond the float range, and the sign
#: of sum_p e_p log p was taken in floats (OverflowError: int too large to convert to float).
WIDE_RANGE_REPRODUCER = {
    "embeddings": [[11622312805.441576, 1.7808285218365457e+105], [1.9170611236494386e-70, 7.193330735464027e+104],
                   [4.649701641153259e-34, -7.275107701496388e-10], [-4.087547938121966e+78, 6.254787968621004e-13],
                   [-1.8273857125692165e+18, -9.557131765887375e-96]],
    "counts": [[0, 1, 3], [0, 1, 1], [3, 0, 2], [1, 0, 3], [0, 1, 1]],
}


#: The same search, with V = 2: the structured solver's gap estimate divided by its margin squared, which
#: underflowed to 0.0 (ZeroDivisionError: float division by zero, in float, --exact and --excess alike).
ZERO_DIVISION_REPRODUCER = {
    "embeddings": [[2.2608497595239643e-91, -6.965570316058234e+18], [3.422108458944717e+115, -1.2054855600112982e-93],
                   [3.230266691658939e+60, 5.300361893141191e-06], [5.508531150277852e+52, -1.5572527214374604e-24],
                   [-7.235254927065464e+79, -1.347604540603805e+20]],
    "counts": [[2, 3], [1, 0], [0, 2], [1, 0], [1, 0]],
}

#: ... and one where the solver's squared norm, a difference, rounded below 0 (ValueError: math domain error).
NEGATIVE_NORM_REPRODUCER = {
    "embeddings": [[-1.6154627245499653e-44, 1.4902567656326062e-72], [-8.549808283350569e-61, 3.818890209954005e+25],
                   [4.343348469072518e-10, 1.3890364593283751e-08], [-4.1490271588800536e-57, -1.6434825108601079e+43],
                   [6.663731935126638e-39, -4.119766962652419e-15]],
    "counts": [[1, 2, 3], [1, 1, 3], [2, 1, 3], [2, 2, 3], [0, 3, 0]],
}


def _run(data: dict, *flags: str) -> tuple[int, dict]:
    """``ntpcert certify DATA --json FLAGS`` in-process: (exit code, the JSON report)."""
    import contextlib
    import io
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.json"
        path.write_text(json.dumps(data))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["certify", str(path), "--json", *flags])
    return rc, json.loads(out.getvalue()) if rc == 0 else {}


@pytest.mark.parametrize("data", [WIDE_RANGE_REPRODUCER, ZERO_DIVISION_REPRODUCER, NEGATIVE_NORM_REPRODUCER],
                         ids=["overflow", "zero-division", "negative-norm"])
@pytest.mark.parametrize("flags", [(), ("--exact",), ("--excess",)], ids=["float", "exact", "excess"])
def test_wide_range_reproducers_exit_0(data, flags):
    rc, rep = _run(data, *flags)
    assert rc == 0, flags
    assert rep["separable"]["holds"] in (True, False, None)
    assert rep["compatible"]["holds"] in (True, False, None)


@st.composite
def wide_rows(draw):
    """5 x 2 embeddings with magnitudes 10^u, u in [-101, 116], random signs, small counts."""
    H = np.array([[draw(st.sampled_from([1.0, -1.0])) * 10.0 ** draw(st.floats(-101, 116)) for _ in range(2)]
                  for _ in range(5)])
    C = np.array([[draw(st.integers(0, 3)) for _ in range(3)] for _ in range(5)])
    C[C.sum(axis=1) == 0, 0] = 1
    return H, C


@settings(max_examples=8)
@given(wide_rows())
def test_wide_range_rows_no_crash(data):
    H, C = data
    data = {"embeddings": H.tolist(), "counts": C.tolist()}
    verdicts = []
    for flags in ((), ("--exact",)):
        rc, rep = _run(data, *flags)
        assert rc == 0, (data, flags)
        verdicts.append((rep["separable"]["holds"], rep["compatible"]["holds"]))
    for a, b in zip(*verdicts):
        assert a is None or b is None or a == b, data


@settings(max_examples=20)
@given(st.integers(-200, 200), st.integers(0, 2**32 - 1))
def test_rows_scaled_by_10_to_200(e, seed):
    """Two groups of rows whose scales differ by 10^e, |e| <= 200: a verdict or undetermined, and the
    float and exact verdicts never contradict each other."""
    rng = np.random.default_rng(seed)
    m, d, V = 6, 3, 4
    H = rng.standard_normal((m, d))
    H[: m // 2] *= 10.0 ** (e / 2)
    H[m // 2:] *= 10.0 ** (-e / 2)
    C = rng.integers(0, 3, size=(m, V)) * (rng.random((m, V)) < 0.5)
    C[C.sum(axis=1) == 0, 0] = 1
    inst = NTPInstance.from_counts(H, C)
    rep = certify(inst)
    ex = exact_certify(inst)
    for a, b in ((rep.separable.holds, ex.separability.holds), (rep.compatible.holds, ex.compatibility.holds)):
        assert a is None or b is None or a == b


def test_unit_exponent_scales_far_from_unit_size_within_the_supported_range():
    """H is scaled to unit size only far from it, exactly, and never past the supported range of its smallest
    entry (the wide-range reproducer: max 1.8e105, min 1.9e-70, so scaling stops at min = 2^-480 or above)."""
    from ntpcert.rows.kesler import EMBEDDING_RANGE
    from ntpcert.rows.scaling import unit_exponent

    H = np.array([[0.3, -1.5], [2.0, 0.0]])
    assert unit_exponent(H) == 0 and unit_exponent(H * 200) == 0
    for s in (1e-20, 2.0**-300, 1e20, 1e100):
        e = unit_exponent(H * s)
        top = np.abs(np.ldexp(H * s, e)).max()
        assert 1 <= top < 2, (s, e)
    W = np.abs(np.array(WIDE_RANGE_REPRODUCER["embeddings"]))
    e = unit_exponent(W)
    assert e < -8 and np.ldexp(W[W > 0].min(), e) >= EMBEDDING_RANGE[0]
    assert np.ldexp(W.max(), e) > 2  # stopped short of unit size by the smallest entry
