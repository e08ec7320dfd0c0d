"""The checker's array paths agree exactly with its direct exact ones.

:mod:`ntpcert.certificate.checker` reads witness matrices with :func:`~ntpcert.certificate.decode.matrix_rationals`
(no Fraction per entry), screens the margins (6b) with exact integer products computed in limbs by
float64 BLAS, and sums the dual terms in integer arrays. Each of these must reach the same verdict,
the same values and the same message as the direct computation it replaces (``matrix_fractions``,
``check_primal_exact``, ``aH_zero_and_sums``), on genuine witnesses, on forged ones and on
witnesses whose margins are exactly 1.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import decode
from ntpcert.certificate import schema
from ntpcert.certificate import structure
from ntpcert.certificate.checker import api as vf
from ntpcert.certificate.checker import limbs, primal
from ntpcert.certificate.checker.common import Invalid
from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.errors import CertificateError
from ntpcert.exact.rational import fraction_str
from ntpcert.pipeline.exact_verdicts import exact_certify

from .conftest import random_instance


# ---------------------------------------------------------------------------- exact limb arithmetic
def _value(limbs: list[np.ndarray], c: int) -> np.ndarray:
    """The integers a list of int64 limbs stands for (object array)."""
    out = np.zeros(limbs[0].shape, dtype=object)
    for u, x in enumerate(limbs):
        out = out + x.astype(object) * (1 << (c * u))
    return out


@pytest.mark.parametrize("inner", [1, 7, 1000, 1024, 1025])
def test_limb_product_is_the_exact_integer_product(inner):
    rng = np.random.default_rng(inner)
    c = limbs.limb_width(inner)
    assert inner * (1 << (2 * c)) <= 1 << 53
    X = rng.integers(-(1 << 62), 1 << 62, size=(5, inner), dtype=np.int64)
    Y = rng.integers(-(1 << 62), 1 << 62, size=(inner, 4), dtype=np.int64)
    X[0] = (1 << 62) - 1  # the extremes
    Y[:, 0] = -((1 << 62) - 1)
    n = limbs.limbs_needed(62, c)
    Q = limbs.limb_product(limbs.int_limbs(X, c, n), limbs.int_limbs(Y, c, n))
    exact = X.astype(object) @ Y.astype(object)
    assert (_value(Q, c) == exact).all()
    Z = Q + [np.zeros_like(Q[0]) for _ in range(3)]
    limbs.normalise(Z, c)
    assert (_value(Z, c) == exact).all()
    assert ((Z[-1] >= 0) == (exact >= 0)).all()
    assert all(((z >= 0) & (z < (1 << c))).all() for z in Z[:-1])


def test_normalised_limbs_give_sign_and_zero():
    rng = np.random.default_rng(5)
    c = 20
    Z = [rng.integers(-(1 << 55), 1 << 55, size=200, dtype=np.int64) for _ in range(6)]
    Z[0][:50] = 0
    for z in Z[1:]:
        z[:50] = 0  # value 0
    Z[0][50:60] = -1  # value -1
    for z in Z[1:]:
        z[50:60] = 0
    before = _value(Z, c)
    Z += [np.zeros(200, dtype=np.int64) for _ in range(2)]
    limbs.normalise(Z, c)
    assert (_value(Z, c) == before).all()
    assert ((Z[-1] >= 0) == (before >= 0)).all()
    assert ((np.array([z != 0 for z in Z]).any(axis=0)) == (before != 0)).all()


@pytest.mark.parametrize("K", [0, 1, 13, 64, 200])
def test_fixed_point_limbs_are_the_exact_floor(K):
    rng = np.random.default_rng(K)
    ap = rng.integers(0, 1 << 60, size=300, dtype=np.int64)
    q = rng.integers(1, 1 << 60, size=300, dtype=np.int64)
    q[:20] = 1
    q[20:40] = (1 << 60) - 1
    ap[40:50] = 0
    c = 21
    want = [(int(a) << K) // int(b) for a, b in zip(ap, q)]
    n = limbs.limbs_needed(max(w.bit_length() for w in want), c)
    got = limbs.fixed_point_limbs(ap, q, K, c, n)
    assert got is not None and list(_value(got, c)) == want
    if max(want) >> (c * (n - 1)):
        assert limbs.fixed_point_limbs(ap, q, K, c, n - 1) is None


def test_fraction_sum_and_sum_of_products():
    rng = np.random.default_rng(2)
    terms = [(int(a), int(b)) for a, b in zip(rng.integers(-10**9, 10**9, 40), rng.integers(1, 10**6, 40))]
    assert limbs.sum_fractions(terms) == sum((Fraction(a, b) for a, b in terms), Fraction(0))
    assert limbs.sum_fractions([]) == 0
    x = rng.integers(-(1 << 21), 1 << 21, size=5000, dtype=np.int64)
    y = rng.integers(-(1 << 21), 1 << 21, size=5000, dtype=np.int64)
    assert limbs.sum_of_products(x, y, 21) == sum(int(a) * int(b) for a, b in zip(x, y))


# ---------------------------------------------------------------------------- the integer embeddings
def _odd_embeddings() -> np.ndarray:
    rng = np.random.default_rng(9)
    H = rng.standard_normal((4, 6))
    H[0, 0], H[0, 1], H[0, 2] = 5e-324, -2.5e-310, 0.0  # subnormals, zero
    H[1, 0], H[1, 1] = 1e300, -3.0
    H[2] *= 2.0**-40
    H[3, :] = 0.0
    return H


def test_integer_embeddings_are_those_of_as_integer_ratio():
    H = _odd_embeddings()
    inst = NTPInstance.from_counts(H, np.ones((4, 3), dtype=np.int64))
    ex = ExactInstance(inst)
    ratios = [float(x).as_integer_ratio() for x in H.ravel()]
    den = max(q for _, q in ratios)
    assert ex.hden == den
    want = [p * (den // q) for p, q in ratios]
    assert ex.hint_ints == want
    assert [int(x) for x in ex.Hint.entries()] == want
    assert ex.hint_l1 == [sum(abs(x) for x in want[j * 6:(j + 1) * 6]) for j in range(4)]
    for c in (5, 21):
        L = ex.hint_limbs(c)
        assert list(_value([x.astype(np.int64) for x in L], c).ravel()) == want
    for p in (7, 2147483647, (1 << 61) - 1):
        assert list(ex._H_mod(p).entries()) == [x % p for x in want]


# ---------------------------------------------------------------------------- reading rationals
_BAD = ["2/4", "+1", "01", "-0", "3/1", "1/-2", "0x10", " 1", "1.5", "", "-", "1//2", "1/2/3", "0/5", "-0/5",
        "00", "-01", "1/0", "1/01", "\u0663", "1_0", "1\n", "5/", "/5", "1-2", "--1", 5, None, 1.5, True,
        "1" * 30 + "/" + "2" * 30, "0" + "1" * 5000, "2" + "0" * 4999 + "/4"]


def _random_strings(rng, shape) -> list[list[str]]:
    out = []
    for _ in range(shape[0]):
        row = []
        for _ in range(shape[1]):
            kind = rng.integers(6)
            if kind == 0:
                row.append("0")
            elif kind == 1:
                row.append(str(int(rng.integers(-10**6, 10**6))))
            elif kind == 2:
                row.append(fraction_str(Fraction(int(rng.integers(-10**12, 10**12)), int(rng.integers(1, 10**15)))))
            elif kind == 3:
                row.append(fraction_str(Fraction(int(rng.integers(1, 10**9)) * 10**25 + 7, 3**50)))
            elif kind == 4:
                row.append(fraction_str(Fraction(-int(rng.integers(1, 99)), 2**70)))
            else:
                row.append(fraction_str(Fraction(10**17 + 3, 10**17 - 1) * int(rng.choice([1, -1]))))
        out.append(row)
    return out


def test_matrix_rationals_reads_what_matrix_fractions_reads():
    rng = np.random.default_rng(4)
    rows = _random_strings(rng, (7, 9))
    rows[3][4] = fraction_str(Fraction(10**1500 + 1, 2**4000))  # digits that python-flint converts
    rows[5] = ["0"] * 9
    want = decode.matrix_fractions(rows, (7, 9), "W")
    got = decode.matrix_rationals(rows, (7, 9), "W")
    assert got.fractions() == want
    assert got.nonzero() == {(i, k): x for i, r in enumerate(want) for k, x in enumerate(r) if x}
    assert got.shape == (7, 9)
    assert decode.matrix_rationals([["0", "0"]], (1, 2), "a").fractions() == [[0, 0]]


@pytest.mark.parametrize("bad", _BAD, ids=lambda x: repr(x)[:24])
def test_matrix_rationals_names_the_entry_matrix_fractions_names(bad):
    rng = np.random.default_rng(8)
    rows = _random_strings(rng, (4, 5))
    rows[2][3] = bad
    rows[3][1] = "2/4"  # a later bad entry is not the one named
    with pytest.raises(CertificateError) as want:
        decode.matrix_fractions(copy.deepcopy(rows), (4, 5), "svm.W")
    with pytest.raises(CertificateError) as got:
        decode.matrix_rationals(rows, (4, 5), "svm.W")
    assert str(got.value) == str(want.value)
    assert "svm.W[2][3]" in str(got.value)


@pytest.mark.parametrize("rows", [[["1"]], [["1", "2"], ["3"]], "W", [["1", "2"], "x"]], ids=repr)
def test_matrix_rationals_checks_the_shape_first(rows):
    with pytest.raises(CertificateError) as want:
        decode.matrix_fractions(rows, (2, 2), "svm.W")
    with pytest.raises(CertificateError) as got:
        decode.matrix_rationals(rows, (2, 2), "svm.W")
    assert str(got.value) == str(want.value)


# ---------------------------------------------------------------------------- primal and dual
@pytest.fixture(scope="module")
def genuine():
    inst = random_instance(np.random.default_rng(11), 9, 7, 12, 1, 4)
    rep = exact_certify(inst, use_lemma1=False)
    assert rep.check.valid, rep.check.reason
    cert = rep.certificate
    assert cert["svm"] is not None and cert["separability"]["claim"] is True
    return inst, cert


def _rows(W: list[list[Fraction]]) -> list[list[str]]:
    return [[fraction_str(x) for x in row] for row in W]


def _both_primal(ex: ExactInstance, rows: list[list[str]]):
    """(result or message) of the screened and of the direct check."""
    out = []
    for how in ("screened", "direct"):
        try:
            if how == "screened":
                out.append(primal.check_primal(ex, decode.matrix_rationals(rows, (ex.V, ex.d), "svm.W"), "svm.W"))
            else:
                out.append(primal.check_primal_exact(ex, decode.matrix_fractions(rows, (ex.V, ex.d), "svm.W"), "svm.W"))
        except Invalid as err:
            out.append(str(err))
    return out


def _margins(ex: ExactInstance, W: list[list[Fraction]]) -> list[tuple[Fraction, int, int]]:
    H = [[Fraction(x) for x in row] for row in ex.inst.embeddings.tolist()]
    L = [[sum(w * h for w, h in zip(W[v], H[j])) for j in range(ex.m)] for v in range(ex.V)]
    return [(L[ex.anchor[j]][j] - L[v][j], v, j) for j in range(ex.m) for v in range(ex.V) if v not in ex.in_S[j]]


def test_screened_primal_agrees_on_genuine_forged_and_tight_witnesses(genuine):
    inst, cert = genuine
    ex = ExactInstance(inst)
    W = decode.matrix_fractions(cert["svm"]["W"], (ex.V, ex.d), "svm.W")
    a, b = _both_primal(ex, cert["svm"]["W"])
    assert isinstance(a, Fraction) and a == b
    margins = _margins(ex, W)
    low = min(m for m, _, _ in margins)
    tight = [[x / low for x in row] for row in W]  # every smallest margin exactly 1
    a, b = _both_primal(ex, _rows(tight))
    assert isinstance(a, Fraction) and a == b
    below = [[x * (1 - Fraction(1, 2**80)) for x in row] for row in tight]  # just below 1: (6b) fails
    a, b = _both_primal(ex, _rows(below))
    assert a == b and "(6b) fails" in a
    for v, i in [(ex.anchor[0], 0), (ex.V - 1, ex.d - 1), (3, 2)]:
        for delta in (Fraction(1, 3**40), Fraction(-1, 2**60), Fraction(10**30 + 1, 7)):
            forged = copy.deepcopy(W)
            forged[v][i] += delta
            a, b = _both_primal(ex, _rows(forged))
            assert a == b
    zero = [[Fraction(0)] * ex.d for _ in range(ex.V)]
    a, b = _both_primal(ex, _rows(zero))
    assert a == b and "(6b) fails" in a
    huge = [[x * 10**40 + Fraction(1, 10**30 + 3) for x in row] for row in W]  # entries past int64
    a, b = _both_primal(ex, _rows(huge))
    assert a == b


def test_the_screen_proves_the_loose_margins(genuine, monkeypatch):
    """Only the equalities (6a) and the margins the screen cannot prove are computed exactly."""
    inst, cert = genuine
    ex = ExactInstance(inst)
    seen = []
    real = primal._ExactLogits.logit
    monkeypatch.setattr(primal._ExactLogits, "logit", lambda self, v, j, X, c: seen.append((v, j)) or real(self, v, j, X, c))
    primal.check_primal(ex, decode.matrix_rationals(cert["svm"]["W"], (ex.V, ex.d), "svm.W"), "svm.W")
    on_support = {(v, j) for j in range(ex.m) for v in ex.S[j]}
    assert set(seen) <= on_support


def test_screened_primal_falls_back_when_the_product_disagrees(genuine, monkeypatch):
    inst, cert = genuine
    ex = ExactInstance(inst)
    want = primal.check_primal_exact(ex, decode.matrix_fractions(cert["svm"]["W"], (ex.V, ex.d), "svm.W"), "svm.W")
    real = limbs.limb_product
    monkeypatch.setattr(primal, "limb_product", lambda X, Y: [q + 1 for q in real(X, Y)])
    assert primal.check_primal(ex, decode.matrix_rationals(cert["svm"]["W"], (ex.V, ex.d), "svm.W"), "svm.W") == want


def _both_dual(ex: ExactInstance, rows: list[list[str]]):
    out = []
    for how in ("arrays", "direct"):
        try:
            A = decode.matrix_rationals(rows, (ex.V, ex.m), "svm.a")
            if how == "arrays":
                out.append(primal.dual_terms(ex, A, "svm.a"))
            else:
                out.append(ex.aH_zero_and_sums(A.nonzero(), "svm.a", require_zero_aH=False))
        except Invalid as err:
            out.append(str(err))
    return out


def test_dual_terms_agree_with_the_direct_sums(genuine):
    inst, cert = genuine
    ex = ExactInstance(inst)
    rows = cert["svm"]["a"]
    a, b = _both_dual(ex, rows)
    assert isinstance(a, tuple) and a == b and a[0] > 0
    assert primal._dual_terms_arrays(ex, decode.matrix_rationals(rows, (ex.V, ex.m), "svm.a")) == b  # the array path ran
    A = decode.matrix_fractions(rows, (ex.V, ex.m), "svm.a")
    off = [(v, j) for v in range(ex.V) for j in range(ex.m) if v not in ex.in_S[j]]
    v, j = off[len(off) // 2]
    forged = copy.deepcopy(A)
    forged[v][j] = Fraction(1, 4)  # positive off the support
    a, b = _both_dual(ex, _rows(forged))
    assert a == b and "positive off the support" in a
    forged = copy.deepcopy(A)
    forged[v][j] -= Fraction(1, 8)  # a column that no longer sums to 0
    a, b = _both_dual(ex, _rows(forged))
    assert a == b and "does not sum to 0" in a
    for scale in (Fraction(1, 3**50), Fraction(3**50), Fraction(2**70)):  # past int64: the direct path
        a, b = _both_dual(ex, _rows([[x * scale for x in row] for row in A]))
        assert a == b
    a, b = _both_dual(ex, [["0"] * ex.m for _ in range(ex.V)])
    assert a == b == (0, 0)


def test_the_whole_check_agrees_with_the_direct_sections(genuine):
    """A genuine certificate verifies, and its exact gap is the one the direct sums give."""
    inst, cert = genuine
    v = vf.verify_certificate(cert, inst)
    assert v.valid, v.reason
    ex = ExactInstance(inst)
    half_sq = primal.check_primal_exact(ex, decode.matrix_fractions(cert["svm"]["W"], (ex.V, ex.d), "svm.W"), "svm.W")
    A = decode.matrix_fractions(cert["svm"]["a"], (ex.V, ex.m), "svm.a")
    mass, sq = ex.aH_zero_and_sums({(i, j): x for i, r in enumerate(A) for j, x in enumerate(r) if x}, "svm.a",
                                   require_zero_aH=False)
    assert half_sq - (mass - sq / 2) == schema.parse_rational(cert["svm"]["gap"], "svm.gap")


# ---------------------------------------------------------------------------- the schema, row by row
@pytest.mark.parametrize("key, value, needle", [
    ("embeddings", math.nan, "instance.embedded.embeddings[1][2]: expected a finite number, got float nan"),
    ("embeddings", math.inf, "instance.embedded.embeddings[1][2]: expected a finite number, got float inf"),
    ("embeddings", 2**53 + 1, "instance.embedded.embeddings[1][2]: expected a finite number"),
    ("embeddings", "1.0", "instance.embedded.embeddings[1][2]: expected a finite number, got string"),
    ("counts", True, "instance.embedded.counts[1][2]: expected a non-negative integer, got boolean true"),
    ("counts", -1, "instance.embedded.counts[1][2]: expected a non-negative integer, got integer -1"),
    ("counts", 2**63, "instance.embedded.counts[1][2]: expected a non-negative integer"),
    ("counts", 1.0, "instance.embedded.counts[1][2]: expected a non-negative integer, got float 1.0"),
])
def test_whole_row_checks_name_the_entry(genuine, key, value, needle):
    _, cert = genuine
    forged = copy.deepcopy(cert)
    if key == "counts":
        _dense_counts(forged)
    forged["instance"]["embedded"][key][1][2] = value
    if key == "embeddings":
        forged["instance"]["embedded"][key][1][0] = 1  # an integer a float64 holds: fine
    with pytest.raises(CertificateError, match=None) as err:
        structure.check_schema(forged)
    assert needle in str(err.value)


def _dense_counts(cert: dict) -> None:
    """Counts written sparse (``counts_sparse``) rewritten in the dense form of the same counts."""
    rec = cert["instance"]["embedded"]
    if "counts_sparse" in rec:
        V = rec.pop("V")
        dense = [[0] * V for _ in rec["embeddings"]]
        for j, t, c in rec.pop("counts_sparse"):
            dense[j][t] = c
        rec["counts"] = dense


def test_whole_row_checks_accept_what_the_entry_checks_accept(genuine):
    _, cert = genuine
    forged = copy.deepcopy(cert)
    _dense_counts(forged)
    forged["instance"]["embedded"]["embeddings"][0][0] = 2**53
    forged["instance"]["embedded"]["embeddings"][0][1] = 1.7e308
    forged["instance"]["embedded"]["embeddings"][0][2] = 1.7e308  # finite entries whose sum overflows
    forged["instance"]["embedded"]["counts"][0][0] = 2**63 - 1
    structure.check_schema(forged)
