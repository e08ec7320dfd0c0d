"""Exact arithmetic on float matrices: slice products, limbs, enclosures, squared norms."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntpcert.exact.dyadic import (
    exact_int_dot,
    exact_int_sum,
    exact_matmul,
    exact_sq_norm,
    split_slices,
    unique_rows,
)
from ntpcert.exact.rational import fraction_str, parse_fraction
from ntpcert.errors import CertificateError


def _fr(x: float) -> Fraction:
    return Fraction(*float(x).as_integer_ratio())


def _wide(rng: np.random.Generator, shape, spread: int) -> np.ndarray:
    X = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, size=shape))
    X[rng.random(shape) < 0.2] = 0.0
    return X


@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(1, 6), q=st.integers(1, 5),
       spread=st.sampled_from([0, 10, 80, 300]))
def test_exact_matmul_equals_rational_product(seed, p, n, q, spread):
    rng = np.random.default_rng(seed)
    X, Y = _wide(rng, (p, n), spread), _wide(rng, (n, q), spread)
    L = exact_matmul(X, Y)
    F = L.to_fractions()
    lo, hi = L.enclosure()
    for i in range(p):
        for j in range(q):
            exact = sum((_fr(X[i, k]) * _fr(Y[k, j]) for k in range(n)), Fraction(0))
            assert F[i, j] == exact
            assert _fr(lo[i, j]) <= exact <= _fr(hi[i, j])
    assert L.sq_norm() == sum((f * f for f in F.ravel()), Fraction(0))


def test_split_slices_reconstructs_exactly(rng):
    X = _wide(rng, (7, 9), 200)
    slices, E = split_slices(X, 17)
    total = np.zeros(X.shape, dtype=object)
    total[:] = Fraction(0)
    for s, S in enumerate(slices):
        assert np.all(np.abs(S) < 2**17)
        total = total + np.vectorize(_fr, otypes=[object])(S) * Fraction(2) ** (E - 17 * (s + 1))
    assert all(total[idx] == _fr(X[idx]) for idx in np.ndindex(X.shape))


def test_enclosure_is_tight_relative_to_the_largest_entry(rng):
    X, Y = rng.standard_normal((30, 40)), rng.standard_normal((40, 20))
    lo, hi = exact_matmul(X, Y).enclosure()
    assert np.all(lo <= hi)
    assert np.max(hi - lo) <= 1e-12 * np.max(np.abs(X @ Y))


def test_exact_sq_norm_and_int_sums(rng):
    X = _wide(rng, (6, 5), 40)
    assert exact_sq_norm(X) == sum((_fr(x) ** 2 for x in X.ravel()), Fraction(0))
    big = rng.integers(-(2**40), 2**40, size=100_000)
    assert exact_int_sum(big) == sum(int(x) for x in big)
    small = rng.integers(-(2**21), 2**21, size=50_000)
    assert exact_int_dot(small, small[::-1].copy()) == sum(int(a) * int(b) for a, b in zip(small, small[::-1]))


def test_repeated_rows_are_computed_once_with_the_same_exact_result(rng):
    base = _wide(rng, (4, 6), 60)
    pick = rng.integers(0, 4, size=23)
    X = base[pick]  # 23 rows, at most 4 distinct
    Y = _wide(rng, (6, 5), 60)
    u = unique_rows(X)
    assert u is not None
    first, inverse, counts = u
    assert np.array_equal(X[first][inverse], X) and counts.sum() == 23 and first.size <= 4
    full, fast = exact_matmul(X, Y), exact_matmul(X[first], Y).take_rows(inverse)
    assert np.array_equal(full.to_fractions(), fast.to_fractions())
    assert full.sq_norm() == exact_matmul(X[first], Y).sq_norm(counts)
    assert exact_sq_norm(X) == sum((_fr(x) ** 2 for x in X.ravel()), Fraction(0))
    assert unique_rows(_wide(rng, (9, 3), 5)) is None  # all distinct: nothing to save


@pytest.mark.parametrize("text", ["1/0", "0.5", "1e3", " 1/2", "1/-2", "", "abc", "--1", "1/2/3"])
def test_parse_fraction_rejects_non_rationals(text):
    with pytest.raises(CertificateError, match="rational"):
        parse_fraction(text)


def test_fraction_strings_round_trip_beyond_the_int_digit_limit():
    f = Fraction(7**9000 + 1, 3**7000)
    assert parse_fraction(fraction_str(f)) == f
    assert parse_fraction("-3/6") == Fraction(-1, 2)


@pytest.mark.parametrize("right_fill", [1.0, 0.05])
@pytest.mark.parametrize("fill", [0.0, 0.02, 0.1, 0.5])
def test_sparse_and_zero_row_products_equal_the_rational_product(fill, right_fill):
    """Sparse slices (CSR, left, right or both) and zero rows skipped give the exact product,
    including extremes of the 53-bit bound: full-width mantissas on an inner dimension of 1000."""
    rng = np.random.default_rng(int(fill * 100) + 7)
    p, n, q = 40, 1000, 3
    X = rng.standard_normal((p, n)) * np.exp2(rng.integers(-40, 41, size=(p, n)))
    X[rng.random((p, n)) >= fill] = 0.0
    X[::3] = 0.0  # zero rows
    X[1, :] = np.nextafter(1.0, 2.0)  # a dense row of full-width mantissas
    Y = rng.standard_normal((n, q)) * np.exp2(rng.integers(-40, 41, size=(n, q)))
    Y[rng.random((n, q)) >= right_fill] = 0.0
    Y[:: 1 if right_fill == 1.0 else 40, 0] = -np.nextafter(1.0, 2.0)
    L = exact_matmul(X, Y)
    F = L.to_fractions()
    Xf = [[_fr(x) for x in row] for row in X]
    Yf = [[_fr(y) for y in row] for row in Y]
    for i in range(p):
        for j in range(q):
            assert F[i, j] == sum((Xf[i][k] * Yf[k][j] for k in range(n) if X[i, k] and Y[k, j]), Fraction(0))
    assert all(F[i, j] == 0 for i in range(0, p, 3) for j in range(q))
