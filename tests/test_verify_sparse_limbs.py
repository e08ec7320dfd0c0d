"""The checker's limb products with a sparse left factor (CSR) are the exact integer products."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.certificate.checker import limbs


@pytest.mark.parametrize("fill", [0.01, 0.1, 0.15, 0.6])
def test_sparse_limb_product_is_the_exact_integer_product(fill):
    rng = np.random.default_rng(int(fill * 1000))
    inner = 1000
    c = limbs.limb_width(inner)
    X = rng.integers(-(1 << 62), 1 << 62, size=(30, inner), dtype=np.int64)
    X[rng.random(X.shape) >= fill] = 0
    X[0, :] = (1 << 62) - 1  # one dense row of extremes
    X[5] = 0
    Y = rng.integers(-(1 << 62), 1 << 62, size=(inner, 4), dtype=np.int64)
    Y[:, 0] = -((1 << 62) - 1)
    n = limbs.limbs_needed(62, c)
    Xl = limbs.int_limbs(X, c, n)
    sparse = [np.count_nonzero(x) <= limbs.SPARSE_LIMB_MAX_FILL * x.size for x in Xl]
    assert all(sparse) == (fill <= 0.1)  # both paths are exercised across the table
    Q = limbs.limb_product(Xl, limbs.int_limbs(Y, c, n))
    exact = X.astype(object) @ Y.astype(object)
    value = np.zeros(exact.shape, dtype=object)
    for u, q in enumerate(Q):
        assert q.dtype == np.int64
        value = value + q.astype(object) * (1 << (c * u))
    assert (value == exact).all()


# ---------------------------------------------------------------------------- the int64 and float64 bounds, at the bound
@pytest.mark.parametrize("inner", [1, 2, 3, 2**10, 2**10 + 1, 2**16, 2**20])
def test_limb_products_are_exact_at_the_widest_limbs(inner):
    """Limbs of c = limb_width(inner) bits at their largest, 2^c - 1, summed over the whole inner dimension:
    every partial sum is below 2^52, so float64 holds it whatever the order of the sums."""
    c = limbs.limb_width(inner)
    top = (1 << c) - 1
    X = [np.full((2, inner), float(top)), np.full((2, inner), -float(top))]
    Y = [np.full((inner, 1), float(top))]
    Q = limbs.limb_product(X, Y)
    assert Q[0].tolist() == [[inner * top * top]] * 2 and Q[1].tolist() == [[-inner * top * top]] * 2
    b = (inner - 1).bit_length()
    assert inner * top**2 < 2**52 and 2 * c + b <= 52
    if (52 - b) % 2 == 0 and inner == 2**b:  # one bit wider and the worst sum passes 2^53: the width is tight
        assert inner * ((1 << (c + 1)) - 1) ** 2 >= 2**53


@pytest.mark.parametrize("c", [26, 24, 22])
def test_sum_of_products_is_exact_at_its_chunk_bound(c):
    """Entries of magnitude 2^c summed in chunks of 2^(61 - 2c) products: each chunk sum reaches 2^61 (two
    bits below int64's limit) and the total is the exact integer."""
    step = 1 << (61 - 2 * c)
    n = 3 * step + 5
    x = np.full(n, 1 << c, dtype=np.int64)
    y = np.full(n, -(1 << c), dtype=np.int64)
    assert limbs.sum_of_products(x, y, c) == -n * 4**c
    assert step * 4**c == 2**61


def test_fixed_point_limbs_are_exact_at_their_bounds():
    """floor(ap 2^K / q) for ap = 2^62 - 1 and q = 2^61 - 1 (the largest allowed) and q = 1: the shifted
    remainders stay below 2^62."""
    c, K, n = 16, 130, 13
    ap = np.array([[2**62 - 1, 2**62 - 1, 1, 0]], dtype=np.int64)
    q = np.array([[2**61 - 1, 1, 2**61 - 1, 3]], dtype=np.int64)
    got = limbs.fixed_point_limbs(ap, q, K, c, n)
    assert got is not None
    for k in range(4):
        want = (int(ap[0, k]) << K) // int(q[0, k])
        assert limbs.int_of_limbs([int(x[0, k]) for x in got], c) == want


def test_squared_norm_is_exact_at_its_int64_bound():
    """|p| < 2^60 in three 20-bit limbs, one denominator, 2^22 - 1 entries: the limb-product sums reach
    2^62 - 2^42, below int64's limit; the norm is the exact integer."""
    from fractions import Fraction

    from ntpcert.certificate.checker.primal import sq_norm
    from ntpcert.certificate.decode import RationalMatrix

    n = (1 << 22) - 1
    num = np.full((1, n), (1 << 60) - 1, dtype=np.int64)
    num[0, ::2] *= -1
    W = RationalMatrix(num, np.ones((1, n), dtype=np.int64), {})
    assert sq_norm(W) == Fraction(n * ((1 << 60) - 1) ** 2)
    assert n * ((1 << 20) - 1) ** 2 < 2**62


def _dual_instance(V: int):
    from ntpcert import NTPInstance
    from ntpcert.certificate.checker.exact import ExactInstance

    counts = np.ones((1, V), dtype=np.int64)
    counts[0, -1] = 0  # one token off the support
    return ExactInstance(NTPInstance.from_counts([[1.0, 0.5]], counts))


def test_a_dual_whose_column_sums_to_2_64_is_refused():
    """Column sums are formed in int64 only when V * max|a D| < 2^63. Nineteen entries below 10^18 that sum to
    exactly 2^64 (0 once wrapped in int64) are a column that does not sum to 0, and are refused as one. (A
    column that wraps to 0 needs V * max >= 2^64: the guard keeps one bit in hand.)"""
    from ntpcert.certificate.checker.common import Invalid
    from ntpcert.certificate.checker.primal import dual_terms
    from ntpcert.certificate.decode import RationalMatrix

    V = 20
    entries = [10**18 - 1] * 18 + [2**64 - 18 * (10**18 - 1), 0]
    assert sum(entries) == 2**64 and max(entries) < 10**18 and V * max(entries) >= 2**63
    num = np.array(entries, dtype=np.int64).reshape(V, 1)
    A = RationalMatrix(num, np.ones((V, 1), dtype=np.int64), {})
    with pytest.raises(Invalid, match="column 0 does not sum to 0"):
        dual_terms(_dual_instance(V), A, "svm.a")


@pytest.mark.parametrize("side", [0, 1])
def test_dual_terms_are_exact_on_both_sides_of_the_2_62_guard(side):
    """A dual with denominators 1 and q, whose largest numerator times D / 1 = q lies just below (side 0) or
    just above (side 1) 2^62: the int64 route and the exact fallback give the exact mass and ||aH||^2."""
    from fractions import Fraction

    from ntpcert.certificate.checker.primal import dual_terms
    from ntpcert.certificate.decode import RationalMatrix

    q = (1 << 20) + 7
    x = (1 << 62) // q**2 + side
    big = (x * q - 1) * q  # max |num| * (D // smallest denominator)
    assert (big < 1 << 62) if side == 0 else (big >= 1 << 62)
    # a = (x, -(x q - 1)/q, -1/q): the column sums to 0, the off-support token 2 is <= 0 with mass 1/q
    A = RationalMatrix(np.array([[x], [-(x * q - 1)], [-1]], dtype=np.int64),
                       np.array([[1], [q], [q]], dtype=np.int64), {})
    ex = _dual_instance(3)
    got = dual_terms(ex, A, "svm.a")
    assert got == ex.aH_zero_and_sums(A.nonzero(), "svm.a", require_zero_aH=False)
    assert got[0] == Fraction(1, q)
