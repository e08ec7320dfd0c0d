"""``nmod_matrix`` (through an fmpz_mat) builds the same matrix mod p as ``nmod_mat`` of a flat list."""

from __future__ import annotations

import flint
import numpy as np
import pytest

from ntpcert.exact.modular import PRIMES, nmod_matrix, rank_mod, residues


@pytest.mark.parametrize("p", [2, 65521, 2147483647, *PRIMES[:2]])
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (30, 40), (0, 3), (3, 0)])
def test_nmod_matrix_is_the_flat_list_matrix(p, shape):
    rng = np.random.default_rng(p % 1000 + shape[0])
    R = rng.integers(0, min(p, 1 << 62), size=shape, dtype=np.int64)
    M = nmod_matrix(R, p)
    ref = flint.nmod_mat(shape[0], shape[1], R.ravel().tolist(), p)
    assert (M.nrows(), M.ncols()) == shape
    assert M == ref
    assert rank_mod(R, p) == (int(ref.rank()) if R.size else 0)


def test_rank_mod_of_a_rank_deficient_float_matrix():
    rng = np.random.default_rng(3)
    A = np.ldexp(np.round(np.ldexp(rng.standard_normal((6, 9)), 20)), -20)  # 20-bit dyadics
    A[5] = A[0] - 2 * A[1]  # exact in float64
    p = PRIMES[0]
    assert rank_mod(residues(A, p), p) == 5


# ---------------------------------------------------------------------------- exact at every modulus of the format
def _prime_below(n: int) -> int:
    n -= 1
    while not flint.fmpz(n).is_prime():
        n -= 1
    return n


def _prime_from(n: int) -> int:
    while not flint.fmpz(n).is_prime():
        n += 1
    return n


def _worst_dyadics() -> np.ndarray:
    """Random odd 53-bit mantissas (|M| mod p spread over [0, p)) at exponents up to 700 bits apart, both
    signs, and zeros."""
    rng = np.random.default_rng(5)
    M = rng.integers(2**52, 2**53, size=(6, 7)) | 1
    E = rng.integers(-350, 350, size=(6, 7))
    A = np.ldexp(M.astype(np.float64), E) * rng.choice([-1.0, 1.0], size=(6, 7))
    A[2, 3] = A[4, 0] = 0.0
    return A


def _exact_residues(A: np.ndarray, p: int) -> np.ndarray:
    """The residues of A 2^s in Python integers (the smallest s making every entry an integer)."""
    from fractions import Fraction

    F = [[Fraction(float(x)) for x in row] for row in A]
    s = max(f.denominator.bit_length() - 1 for row in F for f in row)
    return np.array([[int(f * 2**s) % p for f in row] for row in F], dtype=object)


#: The bound of the int64 products, both sides of it; the largest modulus of the format; and 2^61 - 1.
BOUND_MODULI = [_prime_below(2**31), _prime_from(2**31), _prime_below(2**32), 2**61 - 1, _prime_below(2**63)]


@pytest.mark.parametrize("p", BOUND_MODULI)
def test_residues_are_exact_at_every_modulus_of_the_format(p):
    A = _worst_dyadics()
    R = residues(A, p)
    assert R.dtype == np.int64 and R.min() >= 0 and R.max() < p
    assert R.tolist() == _exact_residues(A, p).tolist()


def test_the_int64_product_bound_is_where_int64_stops_being_exact(monkeypatch):
    """Above 2^31 the int64 product (|M| mod p)(2^k mod p) wraps: with the bound one power higher, the
    residues mod a prime just below 2^32 come out wrong (so the test above would fail)."""
    from ntpcert.exact import modular

    A, p = _worst_dyadics(), _prime_below(2**32)
    monkeypatch.setattr(modular, "INT64_PRODUCT_BOUND", 2**32)
    assert residues(A, p).tolist() != _exact_residues(A, p).tolist()


@pytest.mark.parametrize("p", [2**63, _prime_from(2**63), 2**64 + 13, 1, 0, -7])
def test_residues_refuse_a_modulus_outside_the_format(p):
    with pytest.raises(ValueError, match="expected an integer 2 <= p < 2"):
        residues(np.eye(2), p)


@pytest.mark.parametrize("p", [_prime_below(2**62), _prime_from(2**62), _prime_below(2**63)])
def test_gram_residues_are_exact_past_2_62(p):
    """T K with |T| = 2 passes 2^63 for p > 2^62 in int64; the Gram residues are exact on both sides."""
    from ntpcert.exact.modular import gram_residues

    H = _worst_dyadics()[:3]
    ctx, tok, anc = np.array([0, 1, 2, 2]), np.array([1, 2, 1, 3]), np.array([0, 0, 0, 0])
    t, a = tok.tolist(), anc.tolist()
    Hx = _exact_residues(H, p)
    K = [[sum(int(a) * int(b) for a, b in zip(Hx[i], Hx[k])) % p for k in range(3)] for i in range(3)]
    T = [[int(t[i] == t[k]) - (t[i] == a[k]) - (a[i] == t[k]) + (a[i] == a[k]) for k in range(4)]
         for i in range(4)]
    want = [[T[i][k] * K[int(ctx[i])][int(ctx[k])] % p for k in range(4)] for i in range(4)]
    G = gram_residues(H, ctx, tok, anc, p)
    assert G.dtype == np.int64 and G.tolist() == want
    assert any(abs(int(t)) == 2 for row in T for t in row) and max(max(r) for r in K) > p // 2  # at the bound


@pytest.mark.parametrize("p", BOUND_MODULI)
def test_the_checkers_rank_of_h_mod_p_is_exact_at_its_int64_bound(p):
    """ExactInstance forms H mod p in int64 below 2^31 and through flint above: the same matrix as the exact
    integers reduced mod p, on both sides of the bound."""
    from ntpcert import NTPInstance
    from ntpcert.certificate.checker.exact import ExactInstance

    A = _worst_dyadics()
    ex = ExactInstance(NTPInstance.from_counts(A, np.ones((A.shape[0], 2), dtype=np.int64)))
    got = ex._H_mod(p)
    assert [[int(got[i, k]) for k in range(A.shape[1])] for i in range(A.shape[0])] == _exact_residues(A, p).tolist()
