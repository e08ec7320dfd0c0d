r"""Ranks certified by arithmetic modulo a prime.

For an integer matrix :math:`N` and a prime :math:`p`, :math:`\mathrm{rank}_{\mathbb F_p}(N \bmod p) \le
\mathrm{rank}_{\mathbb Q}(N)`: a minor that vanishes over :math:`\mathbb Q` vanishes mod p. So a matrix
with m rows whose reduction mod p has rank m has **full row rank, exactly** — a certificate anyone
can re-check by reducing the same integers mod the same prime. The converse can fail only when p
divides every non-zero maximal minor, so a rank drop mod p is never taken as proof of anything: the
caller tries another prime or says "not certified".

Dyadic floats :math:`x = M\,2^{E}` (:math:`|M| < 2^{53}`) are scaled by one common power of two
:math:`2^{s}` to integers :math:`M\,2^{E+s}`; their residues are :math:`(M \bmod p)(2^{E+s} \bmod p)
\bmod p`, exactly, for every modulus :math:`2 \le p <` :data:`MODULUS_BOUND` :math:`= 2^{63}`. Below
:data:`INT64_PRODUCT_BOUND` :math:`= 2^{31}` both factors are below :math:`2^{31}` and the product, below
:math:`2^{62}`, is formed in int64; from :math:`2^{31}` on it would pass :math:`2^{63}` (a 53-bit mantissa
times a residue near p) and is formed in Python integers. Every residue lies in :math:`[0, p)`, so it fits
int64. The scale does not change the rank.

**The moduli a certificate may name** (``rank_modulus``, ``embeddings_rank_modulus``,
``frequent_tokens_modulus``, a rank witness's ``modulus``) are the primes :math:`2 \le p < 2^{63}`
(:func:`is_modulus`): the bound of every integer of the schema
(:data:`ntpcert.certificate.schema.MAX_SCHEMA_INT`), of int64 residues, and within flint's word-size
``nmod`` (:math:`p < 2^{64}`). ``tools/ntpcert_check.py`` refuses the same range.

Costs (python-flint ``nmod_mat``, measured on the project's machine): a 1000 x 1024 matrix takes
about 0.75 s to build from residues and 0.6 s for its rank; 4000 x 4000 takes 30 s, so callers cap
the sizes they try.
"""

from __future__ import annotations

import math

import numpy as np

#: Primes below 2**31 (2**31 - 1 and the two next primes below it), tried in turn.
PRIMES = (2147483647, 2147483629, 2147483587)

#: Every modulus of the format is a prime ``2 <= p < MODULUS_BOUND`` (module doc).
MODULUS_BOUND = 2**63

#: Below this modulus, residue products (each factor below p) are formed in int64: they stay below 2^62.
INT64_PRODUCT_BOUND = 2**31


def is_modulus(p: object) -> bool:
    """Whether ``p`` is a modulus of the format: an integer (not a boolean), prime, ``2 <= p < 2^63``."""
    import flint

    return type(p) is int and 2 <= p < MODULUS_BOUND and bool(flint.fmpz(p).is_prime())


def _check_range(p: int) -> None:
    if not (type(p) is int and 2 <= p < MODULUS_BOUND):
        raise ValueError(f"modulus {p!r}: expected an integer 2 <= p < 2^63")


def _mul_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``a * b mod p`` entrywise, exactly, for int64 arrays with entries in ``[0, p)``: in int64 when
    ``p < 2^31`` (products below 2^62), else in Python integers."""
    if p < INT64_PRODUCT_BOUND:
        return a * b % p
    return (a.astype(object) * b.astype(object) % p).astype(np.int64)


def residues(A: np.ndarray, p: int) -> np.ndarray:
    r"""The integers :math:`A\,2^{s}` modulo ``p`` (int64 in :math:`[0, p)`, same shape), exactly, for a float
    array A of dyadic rationals (every float is one), the smallest common :math:`s` making them all
    integers, and ``2 <= p < 2^63`` (module doc)."""
    _check_range(p)
    A = np.asarray(A, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError("residues: the matrix has a non-finite entry")
    frac, expo = np.frexp(A)  # A = frac * 2**expo, |frac| in [0.5, 1)
    mant = (frac * 2.0 ** 53).astype(np.int64)  # exact: 53-bit integers
    e = expo.astype(np.int64) - 53
    nz = mant != 0
    if not nz.any():
        return np.zeros(A.shape, dtype=np.int64)
    # strip trailing zero bits so the common scale stays small
    tz = np.zeros_like(mant)
    m = np.where(nz, mant, 1)
    for b in (32, 16, 8, 4, 2, 1):
        mask = (m & ((1 << b) - 1)) == 0
        m = np.where(mask, m >> b, m)
        tz += np.where(mask, b, 0)
    e = e + tz
    s = -int(e[nz].min())
    shift = np.where(nz, e + s, 0)
    out = np.zeros(A.shape, dtype=np.int64)
    uniq = np.unique(shift[nz])
    table = np.array([pow(2, int(k), p) for k in uniq], dtype=np.int64)
    pow_arr = table[np.searchsorted(uniq, shift[nz])]
    out[nz] = _mul_mod(np.abs(m[nz]) % p, pow_arr, p)
    neg = nz & (m < 0)
    out[neg] = (p - out[neg]) % p
    return out


def nmod_matrix(R: np.ndarray, p: int):
    """A ``flint.nmod_mat`` of a 2-d int64 array of residues in [0, p). Built through an ``fmpz_mat``
    of the nested lists: 0.16 s for 1000 x 1024, against 0.37-0.47 s for ``nmod_mat`` of a flat list."""
    import flint

    R = np.asarray(R, dtype=np.int64)
    n, k = R.shape
    if n == 0 or k == 0:
        return flint.nmod_mat(n, k, p)
    return flint.nmod_mat(flint.fmpz_mat(R.tolist()), p)


def rank_mod(R: np.ndarray, p: int) -> int:
    """Rank over the integers mod ``p`` of an int64 matrix of residues in [0, p)."""
    R = np.asarray(R, dtype=np.int64)
    if R.size == 0:
        return 0
    return int(nmod_matrix(R, p).rank())


def certify_full_row_rank(A: np.ndarray, *, primes: tuple[int, ...] = PRIMES[:2]) -> int | None:
    """A prime p with rank(A·2^s mod p) equal to the number of rows of ``A`` (a float array of shape
    (n, k)): proof that A has full row rank over the rationals. None when no prime in ``primes``
    shows it (the rank may still be full; nothing is claimed)."""
    A = np.asarray(A, dtype=np.float64)
    n, k = A.shape
    if n > k:
        return None
    for p in primes:
        if rank_mod(residues(A, p), p) == n:
            return p
    return None


def rational_reconstruction(a: int, p: int) -> tuple[int, int] | None:
    """(n, d) with n/d = a mod p, |n|, d <= sqrt(p/2), or None (rational reconstruction)."""
    bound = math.isqrt(p // 2)
    r0, r1 = p, a % p
    s0, s1 = 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        s0, s1 = s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound:
        return None
    n, d = (r1, s1) if s1 > 0 else (-r1, -s1)
    if math.gcd(abs(n), d) != 1:
        return None
    return n, d


def lift_vector(col: list[int], p: int) -> np.ndarray | None:
    """An integer vector (int64, shape (len(col),)) proportional to the rational reconstruction of a
    vector mod p, or None when an entry does not reconstruct or the integers pass 2^62. Whatever it
    returns must still be checked exactly: reconstruction is a guess that is right when the true
    entries are small (|numerator|, denominator <= sqrt(p / 2))."""
    nums, dens = [], []
    for a in col:
        if a == 0:
            nums.append(0)
            dens.append(1)
            continue
        nd = rational_reconstruction(int(a), p)
        if nd is None:
            return None
        nums.append(nd[0])
        dens.append(nd[1])
    den = 1
    for d in dens:
        den = den * d // math.gcd(den, d)
    out = [n * (den // d) for n, d in zip(nums, dens)]
    g = 0
    for v in out:
        g = math.gcd(g, v)
    if g > 1:
        out = [v // g for v in out]
    if any(abs(v) >= 2 ** 62 for v in out):
        return None
    return np.array(out, dtype=np.int64)


def gram_residues(H: np.ndarray, eq_context: np.ndarray, eq_token: np.ndarray, eq_anchor: np.ndarray,
                  p: int) -> np.ndarray:
    r"""The equality Gram matrix :math:`G = A_{eq}A_{eq}^\top` (times :math:`2^{2s}`) modulo p, shape
    (r, r), from the residues of H (:math:`G_{ik} = T_{ik} K_{j_i j_k}` with :math:`K = HH^\top` and
    :math:`T_{ik} = \langle e_{z_i} - e_{a_i}, e_{z_k} - e_{a_k}\rangle \in \{-2, \dots, 2\}`)."""
    Rh = residues(H, p)
    m, d = Rh.shape
    Hm = nmod_matrix(Rh, p)
    K = np.array((Hm * Hm.transpose()).entries(), dtype=object).astype(np.int64).reshape(m, m)
    z, a, c = eq_token, eq_anchor, eq_context
    T = ((z[:, None] == z[None, :]).astype(np.int64) - (z[:, None] == a[None, :])
         - (a[:, None] == z[None, :]) + (a[:, None] == a[None, :]))
    Kc = K[np.ix_(c, c)]
    if 2 * p <= MODULUS_BOUND:  # |T K| <= 2 (p - 1) < 2^63
        return (T * Kc) % p
    return (T.astype(object) * Kc.astype(object) % p).astype(np.int64)


__all__ = ["INT64_PRODUCT_BOUND", "MODULUS_BOUND", "PRIMES", "is_modulus", "lift_vector", "rational_reconstruction", "certify_full_row_rank", "gram_residues", "nmod_matrix", "rank_mod", "residues"]
