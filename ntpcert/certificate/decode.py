r"""The values of a certificate, read back exactly: the embedded instance and the rational matrices.

Every reader here takes a section whose structure :func:`~ntpcert.certificate.structure.check_schema`
has checked, and parses its values: canonical rational strings (one spelling each, refused otherwise
with a :class:`~ntpcert.errors.CertificateError` naming the first bad entry), sparse ``[i, k, "p/q"]``
lists, factored matrices :math:`\text{scale}\cdot(B + \Delta)` and the embedded instance. Matrices
come back as :class:`RationalMatrix` (int64 numerators and denominators, long entries apart), so a
large witness is read without a Fraction per entry. The writers of the same values are in
:mod:`ntpcert.certificate.encode`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain, repeat
from operator import contains
from typing import Any

import flint
import numpy as np

from ntpcert.certificate.packed import unpack_f32, unpack_f64
from ntpcert.certificate.schema import RATIONAL_RE, digits_to_int, parse_rational, show, type_name
from ntpcert.certificate.structure import check_shape, is_count
from ntpcert.errors import CertificateError, InputError
from ntpcert.instance import NTPInstance
from ntpcert.instance.sparse import DENSE_CELLS, SparseCountsInstance


def instance_from_record(rec: Any) -> NTPInstance:
    """Rebuild the embedded instance (whose structure :func:`check_schema` has checked); raises
    :class:`CertificateError` when it is malformed."""
    packed = ("embeddings_sparse", "embeddings_f64", "embeddings_f32")
    if type(rec) is not dict or not ("embeddings" in rec or any(k in rec for k in packed)):
        raise CertificateError("instance.embedded: missing or not an object with 'embeddings'")
    if any(k in rec for k in packed):  # checked by check_schema (shape, length, order)
        rec = {**{k: v for k, v in rec.items() if k not in packed + ("embeddings_shape",)},
               "embeddings": dense_embeddings(rec)}
    names = {k: rec.get(k) for k in ("token_names", "context_names")}
    name = rec.get("name")
    if type(name) is not str:
        raise CertificateError(f"instance.embedded.name: expected a string, got {type_name(name)} {show(name)}")
    try:
        if "counts" in rec:
            return NTPInstance.from_counts(rec["embeddings"], rec["counts"], name=name, **names)
        if "counts_sparse" in rec:  # checked by check_schema: indices in range, sorted, each once
            entries = np.asarray(rec["counts_sparse"], dtype=np.int64).reshape(-1, 3)
            m, V = len(rec["embeddings"]), rec["V"]
            if m * V > DENSE_CELLS:  # sparse all the way (ntpcert.instance.sparse)
                import scipy.sparse as sp

                csr = sp.csr_array((entries[:, 2], (entries[:, 0], entries[:, 1])), shape=(m, V))
                return SparseCountsInstance.from_csr(rec["embeddings"], csr, name=name, **names)
            counts = np.zeros((m, V), dtype=np.int64)
            counts[entries[:, 0], entries[:, 1]] = entries[:, 2]
            return NTPInstance.from_counts(rec["embeddings"], counts, name=name, **names)
        if "probs" in rec:
            return NTPInstance.from_probs(rec["embeddings"], rec["probs"], rec.get("weights"), name=name, **names)
    except InputError as err:
        raise CertificateError(f"instance.embedded: {err}") from None
    raise CertificateError("instance.embedded: neither 'counts' nor 'probs'")


def dense_embeddings(rec: dict) -> np.ndarray:
    """The dense H of shape (m, d) of a record checked by
    :func:`~ntpcert.certificate.structure.check_sparse_embeddings` or, packed,
    :func:`~ntpcert.certificate.structure.check_packed_embeddings` (whose bytes are checked here:
    :func:`~ntpcert.certificate.packed.unpack_f64`)."""
    m, d = rec["embeddings_shape"]
    if "embeddings_f64" in rec:
        return unpack_f64(rec["embeddings_f64"], (m, d), "instance.embedded.embeddings_f64")
    if "embeddings_f32" in rec:
        return unpack_f32(rec["embeddings_f32"], (m, d), "instance.embedded.embeddings_f32")
    H = np.zeros((m, d), dtype=np.float64)
    items = rec["embeddings_sparse"]
    if items:
        j = np.fromiter((t[0] for t in items), dtype=np.int64, count=len(items))
        i = np.fromiter((t[1] for t in items), dtype=np.int64, count=len(items))
        H[j, i] = np.array([float(t[2]) for t in items], dtype=np.float64)
    return H


# ---------------------------------------------------------------------------- rationals
def matrix_fractions(rows: Any, shape: tuple[int, int], field: str) -> list[list[Fraction]]:
    """Parse rows of canonical rational strings, checking the shape."""
    if type(rows) is not list:
        raise CertificateError(f"{field}: expected a list of {shape[0]} rows, got {type_name(rows)} {show(rows)}")
    check_shape(rows, shape[0], shape[1], field)
    return [[parse_rational(x, f"{field}[{i}][{k}]") for k, x in enumerate(row)] for i, row in enumerate(rows)]


#: Characters of a canonical rational string; :func:`matrix_rationals` deletes them to find any other.
_RATIONAL_CHARS = str.maketrans("", "", "0123456789-/")
#: Numerators and denominators of at most this many characters fit an int64 (below 10^18 < 2^60).
_SHORT_NUM = 18
#: 1, 10, ..., 10^18: the number of decimal digits of 0 < x < 10^19 is how many of them are <= x.
_POWERS_OF_TEN = np.array([10**k for k in range(19)], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class RationalMatrix:
    """A matrix of canonical rationals read by :func:`matrix_rationals`, exactly.

    Entry ``(i, k)`` is ``num[i, k] / den[i, k]`` (int64 arrays; ``|num| < 10^18``,
    ``1 <= den < 10^18``, lowest terms), except for the entries listed in ``big``:
    ``big[(i, k)] = (p, q)`` (Python ints, ``q >= 1``, lowest terms) where a numerator or
    denominator is longer; ``num`` is 0 and ``den`` 1 there.
    """

    num: np.ndarray
    den: np.ndarray
    big: dict[tuple[int, int], tuple[int, int]]

    @property
    def shape(self) -> tuple[int, int]:
        return self.num.shape

    def pair(self, i: int, k: int) -> tuple[int, int]:
        """Entry ``(i, k)`` as ``(p, q)``."""
        got = self.big.get((i, k))
        return got if got is not None else (int(self.num[i, k]), int(self.den[i, k]))

    def fractions(self) -> list[list[Fraction]]:
        """Every entry as a Fraction (what :func:`matrix_fractions` returns)."""
        out = [[Fraction(p, q) for p, q in zip(nr, dr)] for nr, dr in zip(self.num.tolist(), self.den.tolist())]
        for (i, k), (p, q) in self.big.items():
            out[i][k] = Fraction(p, q)
        return out

    def nonzero(self) -> dict[tuple[int, int], Fraction]:
        """The nonzero entries ``{(i, k): Fraction}``, in row-major order."""
        rows, cols = np.nonzero((self.num != 0) | self._big_mask())
        return {(i, k): Fraction(*self.pair(i, k)) for i, k in zip(rows.tolist(), cols.tolist())}

    def _big_mask(self) -> np.ndarray:
        mask = np.zeros(self.num.shape, dtype=bool)
        for i, k in self.big:
            mask[i, k] = True
        return mask


def matrix_rationals(rows: Any, shape: tuple[int, int], field: str) -> RationalMatrix:
    """Parse rows of canonical rational strings, checking the shape: the same checks, the same
    first error and the same values as :func:`matrix_fractions`, without a Fraction per entry.

    The whole matrix is read at once: every entry a string; ``"0"`` entries set aside; the others
    made only of ``0-9``, ``-`` and ``/``, with at most one ``/``; the numerators and denominators
    read by ``int`` (which refuses an empty part and a ``-`` anywhere but first), each exactly as
    long as the decimal spelling of its value (no leading zero, no ``-0``, no zero numerator), every
    denominator above 1, every pair coprime. Parts too long for int64 are read one by one like
    :func:`~ntpcert.certificate.schema.parse_rational`. Whatever fails any of this is read again entry by
    entry by :func:`~ntpcert.certificate.schema.parse_rational`, which raises on the first bad entry in row-major order, naming it."""
    if type(rows) is not list:
        raise CertificateError(f"{field}: expected a list of {shape[0]} rows, got {type_name(rows)} {show(rows)}")
    check_shape(rows, shape[0], shape[1], field)
    flat = list(chain.from_iterable(rows))
    got = _read_rationals(flat)
    if got is None:
        return _rationals_one_by_one(rows, shape, field)
    num, den, big = got
    ncols = shape[1]
    return RationalMatrix(num.reshape(shape), den.reshape(shape), {divmod(i, ncols): pq for i, pq in big.items()})


def _read_rationals(flat: list) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, int]]] | None:
    """``(num, den, big)`` of a flat list of canonical rational strings, or None when any entry is
    not one (or is unusual enough that the entry-by-entry reading should decide)."""
    n = len(flat)
    num = np.zeros(n, dtype=np.int64)
    den = np.ones(n, dtype=np.int64)
    big: dict[int, tuple[int, int]] = {}
    if n == 0:
        return num, den, big
    if set(map(type, flat)) != {str}:
        return None
    entries = np.array(flat, dtype=object)
    where = np.flatnonzero(entries != "0")
    if where.size == 0:
        return num, den, big
    texts = entries[where].tolist()
    slash = np.fromiter(map(contains, texts, repeat("/")), dtype=bool, count=len(texts))
    body = "/".join(texts)  # every numerator and denominator, one "/" apart
    if body.translate(_RATIONAL_CHARS) or body.count("/") != len(texts) - 1 + int(slash.sum()):
        return None  # a character that no canonical rational has, or an entry with two "/"
    parts = np.array(body.split("/"), dtype=object)
    first = np.arange(len(texts)) + np.cumsum(slash) - slash  # where each entry's numerator is in parts
    nums = parts[first].tolist()
    dens = parts[first[slash] + 1].tolist()
    try:  # int refuses "", "-", "1-2", "--1" (and digit strings past its limit)
        pv = list(map(int, nums))
        dmap = {t: int(t) for t in set(dens)}  # few distinct denominators, each read once
    except ValueError:
        return None
    # canonical spelling: each part exactly str() of its value (no leading zero, no "-0"; a zero
    # numerator, never canonical in a nonzero entry, has no digits); denominators above 1
    if any(v <= 1 or len(t) != len(str(v)) for t, v in dmap.items()):
        return None
    for t in dmap:
        if len(t) > _SHORT_NUM:
            dmap[t] = 0  # too long for int64: its entries are read one by one
    q = np.ones(len(nums), dtype=np.int64)
    q[slash] = np.array(list(map(dmap.__getitem__, dens)), dtype=np.int64)
    lens = np.fromiter(map(len, nums), dtype=np.int64, count=len(nums))
    long = (lens > _SHORT_NUM) | (q == 0)
    if long.any():  # entries with a part too long for int64: read one by one
        for t in np.flatnonzero(long).tolist():
            pq = _rational_pair(texts[t])
            if pq is None:
                return None
            big[int(where[t])] = pq
            pv[t] = 0
    p = np.array(pv, dtype=np.int64)
    digits = np.searchsorted(_POWERS_OF_TEN, np.abs(p), side="right")
    if ((digits + (p < 0) != lens) & ~long).any():
        return None
    frac = slash & ~long
    if frac.any() and not _coprime(p[frac], q[frac]):
        return None
    p[long], q[long] = 0, 1
    num[where] = p
    den[where] = q
    return num, den, big


def _coprime(p: np.ndarray, q: np.ndarray) -> bool:
    """Every ``gcd(p_i, q_i) == 1`` (int64 arrays, q > 1): by the primes of each distinct q when
    there are few of them, else by ``np.gcd``."""
    dq, inv = np.unique(q, return_inverse=True)
    if dq.size > 64:
        return not (np.gcd(p, q) != 1).any()
    for g, qd in enumerate(dq.tolist()):
        pg = p[inv == g]
        for r, _ in flint.fmpz(qd).factor():
            if not (pg % int(r)).all():
                return False
    return True


def _rational_pair(text: str) -> tuple[int, int] | None:
    """``(p, q)`` of a canonical rational string (the rules of
    :func:`~ntpcert.certificate.schema.parse_rational`), or None."""
    match = RATIONAL_RE.fullmatch(text)
    if match is None or text == "-0":
        return None
    p = digits_to_int(match.group(1))
    if match.group(2) is None:
        return p, 1
    q = digits_to_int(match.group(2))
    if q == 1 or math.gcd(p, q) != 1:
        return None
    return p, q


def _rationals_one_by_one(rows: list, shape: tuple[int, int], field: str) -> RationalMatrix:
    """The slow reading of :func:`matrix_rationals`:
    :func:`~ntpcert.certificate.schema.parse_rational` entry by entry."""
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    big: dict[tuple[int, int], tuple[int, int]] = {}
    limit = 10**_SHORT_NUM  # what the quick reading keeps in int64
    for i, row in enumerate(rows):
        for k, x in enumerate(row):
            f = parse_rational(x, f"{field}[{i}][{k}]")
            if abs(f.numerator) < limit and f.denominator < limit:
                num[i, k], den[i, k] = f.numerator, f.denominator
            else:
                big[(i, k)] = (f.numerator, f.denominator)
    return RationalMatrix(num, den, big)


def sparse_dict(items: Any, field: str) -> dict[tuple[int, int], Fraction]:
    """Parse ``[[i, k, "p/q"], ...]`` (indices non-negative integers); repeated keys are malformed."""
    if type(items) is not list:
        raise CertificateError(f"{field}: expected a list of [i, k, \"p/q\"], got {type_name(items)} {show(items)}")
    out: dict[tuple[int, int], Fraction] = {}
    for n, t in enumerate(items):
        if type(t) is not list or len(t) != 3 or not all(is_count(x) for x in t[:2]):
            raise CertificateError(f"{field}[{n}]: expected [i, k, \"p/q\"] with indices >= 0, got {show(t)}")
        key = (t[0], t[1])
        if key in out:
            raise CertificateError(f"{field}[{n}]: entry {key} repeated")
        out[key] = parse_rational(t[2], f"{field}[{n}]")
    return out


# ---------------------------------------------------------------------------- dyadic and factored matrices
def odd_parts(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(N, E)`` with ``A = N * 2**E`` entrywise exactly, N odd int64 (0 where A is 0, with E = 0).

    A finite float is :math:`m 2^e` with :math:`m \in [1/2, 1)` a 53-bit fraction, so
    :math:`N = m 2^{53}` is an integer below :math:`2^{53}`; its trailing zeros move into E."""
    A = np.asarray(A, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise InputError("a matrix written as dyadic rationals has non-finite entries")
    mant, e = np.frexp(A)
    N = np.ldexp(mant, 53).astype(np.int64)
    E = e.astype(np.int64) - 53
    low = N & -N  # lowest set bit of |N| (two's complement), a power of two; 0 for N = 0
    nz = N != 0
    t = np.zeros(N.shape, dtype=np.int64)
    t[nz] = np.frexp(low[nz].astype(np.float64))[1] - 1  # exact: 2^t below 2^53 is 0.5 * 2^(t + 1)
    N = N >> t  # arithmetic shift of a multiple of 2^t: exact for negative N too
    E = np.where(nz, E + t, 0)
    return N, E


#: Numerators and denominators of at most this many bits are kept in the int64 arrays of a
#: :class:`RationalMatrix` (below its 10^18 limit); longer ones go to ``big``.
_ARRAY_BITS = 59


def scaled_dyadic_matrix(base: np.ndarray, scale: Fraction) -> RationalMatrix:
    r""":math:`\text{scale}\cdot B` exactly, as a :class:`RationalMatrix` in lowest terms, without a
    Fraction per entry (the arithmetic of :func:`scaled_dyadic_strings`: with :math:`B = N 2^E`, N odd,
    :math:`|\text{scale}| = 2^a P / (2^b Q)` and :math:`g = \gcd(N, Q)`, an entry is
    :math:`\pm (N/g) P 2^{E+a-b} / (Q/g)`, whose odd parts are coprime)."""
    scale = Fraction(scale)
    B = np.asarray(base, dtype=np.float64)
    shape = B.shape
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    big: dict[tuple[int, int], tuple[int, int]] = {}
    p, q = abs(scale.numerator), scale.denominator
    sign = -1 if scale < 0 else 1
    if p == 0:
        return RationalMatrix(num, den, big)
    a = (p & -p).bit_length() - 1
    b = (q & -q).bit_length() - 1
    P, Q = p >> a, q >> b
    N, E = odd_parts(B)
    nz = N != 0
    if Q < 2**62 and P < 2**62:
        g = np.gcd(N, np.int64(Q))
        g[~nz] = 1
        num_odd, den_odd = N // g, np.int64(Q) // g
        shift = E + (a - b)
        nbits = np.frexp(np.abs(num_odd).astype(np.float64))[1] + P.bit_length() + np.maximum(shift, 0)
        dbits = np.frexp(den_odd.astype(np.float64))[1] + np.maximum(-shift, 0)
        fast = nz & (nbits <= _ARRAY_BITS) & (dbits <= _ARRAY_BITS)
        num[fast] = sign * (num_odd[fast] * np.int64(P) << np.maximum(shift[fast], 0))
        den[fast] = den_odd[fast] << np.maximum(-shift[fast], 0)
        slow = nz & ~fast
    else:
        slow = nz
    for i, k in zip(*np.nonzero(slow)):
        f = Fraction(float(B[i, k])) * scale
        big[(int(i), int(k))] = (f.numerator, f.denominator)
    return RationalMatrix(num, den, big)


def factored_rationals(rec: dict, shape: tuple[int, int], field: str) -> RationalMatrix:
    r"""The exact matrix :math:`\text{scale}\cdot(B + \Delta)` of a ``W_factored`` record (whose
    structure :func:`check_schema` has checked): the scale parsed as a canonical rational, every
    ``delta`` index in range and each (i, k) once."""
    scale = parse_rational(rec["scale"], f"{field}.scale")
    B = np.array(rec["base"], dtype=np.float64).reshape(shape)  # exact: finite floats, or ints below 2^53
    delta = sparse_dict(rec["delta"], f"{field}.delta")
    M = scaled_dyadic_matrix(B, scale)
    for n, ((i, k), dl) in enumerate(delta.items()):
        if not (0 <= i < shape[0] and 0 <= k < shape[1]):
            raise CertificateError(f"{field}.delta[{n}]: index ({i}, {k}) out of range for shape {shape}")
        f = (Fraction(float(B[i, k])) + dl) * scale
        if abs(f.numerator).bit_length() <= _ARRAY_BITS and f.denominator.bit_length() <= _ARRAY_BITS:
            M.big.pop((i, k), None)
            M.num[i, k], M.den[i, k] = f.numerator, f.denominator
        else:
            M.num[i, k], M.den[i, k] = 0, 1
            M.big[(i, k)] = (f.numerator, f.denominator)
    return M


def sparse_rationals(items: Any, shape: tuple[int, int], field: str) -> RationalMatrix:
    """The matrix of shape ``shape`` whose nonzero entries ``[[i, k, "p/q"], ...]`` lists (canonical
    rationals, each (i, k) once and in range), as a :class:`RationalMatrix`.

    The rationals are read all at once (:func:`_read_rationals`, the reader of
    :func:`matrix_rationals`); anything unusual is read again entry by entry by :func:`sparse_dict`,
    which names the first bad entry. :func:`check_schema` has checked the shape of every entry."""
    n = len(items)
    idx = np.array([t[:2] for t in items], dtype=np.uint64).reshape(n, 2)  # indices < 2^63 (checked)
    got = _read_rationals([t[2] for t in items])
    keys = idx[:, 0] * np.uint64(shape[1]) + idx[:, 1]
    out_of_range = (idx[:, 0] >= shape[0]) | (idx[:, 1] >= shape[1])
    if got is None or (not out_of_range.any() and np.unique(keys).size != n):
        sparse_dict(items, field)  # raises, naming the entry
        got = _read_rationals([t[2] for t in items])
        if got is None:  # pragma: no cover - sparse_dict accepted what the fast reader refused
            entries = sparse_dict(items, field)
            got = (np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64),
                   {t: (f.numerator, f.denominator) for t, f in enumerate(entries.values())})
    if out_of_range.any():
        t = int(np.flatnonzero(out_of_range)[0])
        raise CertificateError(f"{field}[{t}]: index ({items[t][0]}, {items[t][1]}) out of range for shape {shape}")
    num_flat, den_flat, big_flat = got
    rows, cols = idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64)
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    num[rows, cols] = num_flat
    den[rows, cols] = den_flat
    big = {(int(rows[t]), int(cols[t])): pq for t, pq in big_flat.items()}
    return RationalMatrix(num, den, big)


__all__ = ["RationalMatrix", "dense_embeddings", "factored_rationals", "instance_from_record", "matrix_fractions",
           "matrix_rationals", "odd_parts", "scaled_dyadic_matrix", "sparse_dict", "sparse_rationals"]
