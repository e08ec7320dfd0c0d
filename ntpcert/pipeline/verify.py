r"""The independent checker of certificate files.

It re-derives every claim from the instance and the certificate alone, in exact integer and
rational arithmetic (python-flint), with no tolerance, and imports nothing that produced the
certificate (no solver, no LP, no float pipeline): only the data model, the file format and
exact arithmetic. Large integer matrix products are computed exactly with float64 BLAS on limbs
small enough that every product and partial sum is an integer below :math:`2^{52}` (so no
rounding can occur); they only screen the margins (6b), each of which is then proven from an
exact integer lower bound or settled in Python integers. What it checks:

* **schema** (first, before anything else): :func:`ntpcert.pipeline.certificate.check_schema`,
  every key of every section known and present, every value of its kind *type-exactly* (``1`` is
  not ``true``), canonical rationals, shapes that agree with the header. Parsing a file has already
  refused repeated keys, non-finite numbers, oversized integer literals and files over
  :data:`~ntpcert.pipeline.certificate.MAX_CERTIFICATE_BYTES`.
* **checksum**: SHA-256 of the canonical JSON.
* **instance**: the embedded instance has the recorded fingerprint; with DATA, DATA has it too and
  the same ``name``, ``token_names`` and ``context_names``; the header ``m``, ``d``, ``V`` and
  ``probabilities_exact_from_floats`` are those of the instance checked against. The verdict says
  which one that is (:attr:`Verdict.instance_source`).
* **compatibility, header**: ``n_eq`` is the number r of equality rows and ``primes`` the primes of
  the count ratios, both recomputed, whatever the claim.
* **compatibility, claim true**: the listed vectors y satisfy :math:`A_{eq}^\top y = 0` exactly
  (checked token by token on the contexts they touch), are independent, and with ``dim_F``
  account for all of :math:`\mathrm{null}(A_{eq}^\top)`; and :math:`Y^\top E = 0` for the prime-exponent
  matrix E recomputed from the exact probabilities. ``dim_F`` is checked as the exact rank of
  :math:`G = A_{eq}A_{eq}^\top`, or, with ``rank_modulus`` p, as the rank of G mod p (a lower bound on
  rank G, while the independent null vectors bound it above, so both are exact). With
  ``embeddings_rank_modulus`` p (Lemma 1): :math:`d \ge m` and H has rank m mod p, so H and hence
  :math:`A_{eq}` have full row rank. Optional ``W_star``: :math:`G g_p = E_{:,p}` for every prime.
* **compatibility, claim true, tall systems** (``particular_solutions``): for every prime whose
  exponents move, a rational :math:`R_p` with :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}` exactly, so
  :math:`W = \sum_p \log(p) R_p` solves (4); ``dim_F`` is the exact integer rank of :math:`A_{eq}`
  (on the columns its rows use), and the null-space basis is empty.
* **compatibility, claim false**: :math:`A_{eq}^\top y = 0` and :math:`y^\top E \ne 0`, so
  :math:`y^\top b \ne 0`; ``dim_F``, when given, is checked as rank G.
* **separability, claim true**: the rational W satisfies (6a) and every margin of (6b) is :math:`\ge 1`;
  or, with ``embeddings_rank_modulus`` p, :math:`d \ge m` and H has rank m mod p (Lemma 1).
* **separability, claim false**: the Farkas conditions of :mod:`ntpcert.exact.separability`.
* **svm**: W primal feasible, a dual feasible, the gap :math:`\tfrac12\|W\|^2 - D(a) \ge 0` equals
  the claimed one, and each float bound is its exact quantity rounded outward:

  .. math::

     2\,\mathrm{gap} \le \text{distance\_bound}^2,\quad
     0 \le \text{norm\_lower}^2 \le 2D(a),\quad
     \|W\|_F^2 \le \text{norm\_upper}^2,\quad \text{norm\_lower} \le \text{norm\_upper},

  each also within a relative :data:`BOUND_RELATIVE_SLACK` of its quantity (so a bound is never
  looser than the rounding of the quantity it names).
* **excess** (optional): the excess-loss bracket, by :mod:`ntpcert.pipeline.excess_verify` (q exactly
  dual feasible, the entropy and CE re-evaluated in ``arb`` against the claimed ends).
* **why_not_separable / why_not_compatible** (optional): an irreducible non-separable set of contexts
  and an irreducible cycle of log-odds, by :mod:`ntpcert.pipeline.why_not_verify` (the Farkas ray on
  exactly the set and an exact separating W for each one-context deletion; a null vector whose rows
  have rank one less than their number, with :math:`y^\top E \ne 0`).
* **claims**: the summary claims equal (type-exactly, ``is``) the sections they summarise, and
  ``entropy_bound_reachable`` is their Kleene conjunction.

A verdict is INVALID at the first failed check, with a one-line reason that names the field.
"""

from __future__ import annotations

import copy
import math
import operator
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from ntpcert.errors import CertificateError
from ntpcert.instance import NTPInstance
from ntpcert.pipeline import certificate as cf
from ntpcert.pipeline.excess_verify import check_excess
from ntpcert.pipeline.why_not_verify import check_why_not
from ntpcert.util.logic import and3
from ntpcert.util.numbers import factorise, lcm_all

#: :attr:`Verdict.instance_source` when the instance embedded in the certificate was checked against.
INSTANCE_EMBEDDED = "embedded"
#: :attr:`Verdict.instance_source` when an instance given by the caller (``--data DATA``) was.
INSTANCE_DATA = "data"
#: How a report names each source.
INSTANCE_SOURCE_TEXT = {INSTANCE_EMBEDDED: "the embedded data (no DATA given)", INSTANCE_DATA: "the DATA given"}

#: Relative slack of the float bounds: a bound ``x`` of an exact :math:`\sqrt Q` must satisfy
#: :math:`x^2 \le Q(1+\epsilon)^2 + \delta` (upper bounds) or :math:`x^2 \ge Q(1-\epsilon)^2 - \delta`
#: (lower bounds). The writer rounds outward by a few ulps (:math:`2^{-50}` relative).
BOUND_RELATIVE_SLACK = Fraction(1, 2**40)
#: The absolute slack :math:`\delta` on the squares (covers subnormal quantities).
BOUND_ABSOLUTE_SLACK = Fraction(1, 2**1000)

#: Bits of the integer screen of the margins (6b): before a margin is settled exactly, it is known
#: to within :math:`2^{-\text{FILTER\_BITS}}` (the margin asked for is 1), and it is proven when its
#: lower bound is already at least 1 (:meth:`_Exact.check_primal`).
FILTER_BITS = 52
#: Bytes of int64 limbs the blocked exact products hold at once.
_BLOCK_BYTES = 1 << 28


@dataclass(frozen=True)
class Verdict:
    """Outcome of :func:`verify_certificate`.

    Attributes
    ----------
    valid : bool
    reason : str
        Why it is invalid (the first failed check, one line naming the field), or ``""``.
    checks : tuple of str
        The checks that passed, in order.
    claims : dict
        The certificate's claims, all checked, when it is valid; empty when it is not (the claims
        of an invalid certificate mean nothing, and are not handed on).
    seconds : float
    instance_source : {"embedded", "data"}
        Which instance the certificate was checked against: the one embedded in it
        (:data:`INSTANCE_EMBEDDED`) or the one given by the caller (:data:`INSTANCE_DATA`).
    """

    valid: bool
    reason: str
    checks: tuple[str, ...] = ()
    claims: dict = field(default_factory=dict)
    seconds: float = 0.0
    instance_source: str = INSTANCE_EMBEDDED

    @property
    def against(self) -> str:
        """The instance source in words: ``"the embedded data (no DATA given)"`` or ``"the DATA given"``."""
        return INSTANCE_SOURCE_TEXT[self.instance_source]


class _Invalid(Exception):
    pass


def _need(cond: bool, why: str) -> None:
    if not cond:
        raise _Invalid(why)


class _Mismatch(Exception):
    """The exact spot checks disagree with the blocked integer product: the checker falls back to
    its direct exact computation (never expected; a guard against a faulty BLAS)."""


# ---------------------------------------------------------------------------- exact integer products
# An integer matrix product computed exactly with float64 BLAS. Each factor is split into limbs of c
# bits (sign and magnitude: every limb an integer below 2^c in magnitude), so that every product of
# two limbs is below 2^(2c) and every partial sum over the inner dimension n below n 2^(2c) <= 2^52:
# integers that float64 holds exactly, so each limb product is exact whatever the order of the
# sums, fused or not. The limb products are then summed in int64, and compared or squared in limbs.
def _limb_width(inner: int) -> int:
    """Bits c of the limbs of an exact product over an inner dimension ``inner <= 2^b``: limbs below
    2^c make products below 2^(2c) and sums of ``inner`` of them below 2^(2c+b) <= 2^52."""
    c = (52 - (max(inner, 1) - 1).bit_length()) // 2
    if c < 1:  # pragma: no cover - an inner dimension of 2^50
        raise ValueError(f"an inner dimension of {inner} is too large for exact limb products")
    return c


def _bit_lengths(x: np.ndarray) -> np.ndarray:
    """Bit lengths of non-negative int64 entries below 2^53 (exact: they convert to float64 exactly)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def _int_limbs(x: np.ndarray, c: int, n: int) -> list[np.ndarray]:
    r"""Limbs of int64 ``x`` with :math:`|x| < 2^{cn}`: float64 arrays :math:`L_t`, :math:`|L_t| < 2^c`,
    :math:`x = \sum_t L_t 2^{ct}`."""
    sign, ax, mask = np.sign(x), np.abs(x), (1 << c) - 1
    return [(sign * ((ax >> (c * t)) & mask)).astype(np.float64) for t in range(n)]


#: A left limb with at most this fraction of nonzero entries is multiplied as a CSR matrix (the
#: dual of V = 2000, m = 1000 has 4.7 % nonzeros). Exact for the reason the dense product is: every
#: partial sum is an integer below 2^53, whatever the order of the sums.
_SPARSE_LIMB_MAX_FILL = 0.15


def _limb_product(X: list[np.ndarray], Y: list[np.ndarray]) -> list[np.ndarray]:
    r""":math:`Q_u = \sum_{s+t=u} X_s Y_t` (int64) for limbs of two factors; :math:`XY = \sum_u Q_u 2^{cu}`."""
    Q: list[np.ndarray | None] = [None] * (len(X) + len(Y) - 1)
    for s_, Xs in enumerate(X):
        nnz = np.count_nonzero(Xs)
        if not nnz:
            continue
        if nnz <= _SPARSE_LIMB_MAX_FILL * Xs.size:
            import scipy.sparse as sp

            Xs = sp.csr_matrix(Xs)
        for t, Yt in enumerate(Y):
            P = np.asarray(Xs @ Yt).astype(np.int64)
            Q[s_ + t] = P if Q[s_ + t] is None else Q[s_ + t] + P
    shape = (X[0].shape[0], Y[0].shape[1])
    return [np.zeros(shape, dtype=np.int64) if q is None else q for q in Q]


def _normalise(Z: list[np.ndarray], c: int) -> None:
    r"""Carry int64 limbs (value :math:`\sum_u Z_u 2^{cu}`) in place: every limb but the last then lies
    in :math:`[0, 2^c)`, so the value is :math:`\ge 0` exactly when the last limb is, and 0 exactly
    when every limb is."""
    mask = (1 << c) - 1
    for u in range(len(Z) - 1):
        carry = Z[u] >> c  # floor division by 2^c (numpy shifts signed integers arithmetically)
        Z[u] &= mask
        Z[u + 1] += carry


def _limbs_needed(bits: int, c: int) -> int:
    return max(1, -(-bits // c))


def _int_of_limbs(values: list[int], c: int) -> int:
    return sum(v << (c * u) for u, v in enumerate(values))


def _add_shifted(acc: list[np.ndarray], v: np.ndarray, pos: int, bits: int, c: int) -> bool:
    """``acc += v 2^pos`` in c-bit limbs for int64 ``0 <= v < 2^bits`` (limbs may exceed c bits until
    normalised); False when ``v`` reaches past the last limb."""
    t, off = divmod(pos, c)
    while bits > 0:
        if t >= len(acc):
            return not v.any()
        take = c - off
        acc[t] += (v & ((1 << take) - 1)) << off
        v = v >> take
        bits -= take
        t, off = t + 1, 0
    return True


def _fixed_point_limbs(ap: np.ndarray, q: np.ndarray, K: int, c: int, n: int) -> list[np.ndarray] | None:
    r"""c-bit limbs (int64, in :math:`[0, 2^c)`) of :math:`\lfloor ap\,2^K / q\rfloor` for int64
    ``0 <= ap < 2^62`` and ``1 <= q < 2^61``, by long division, or None when it needs more than n limbs."""
    acc = [np.zeros(ap.shape, dtype=np.int64) for _ in range(n + 1)]
    whole = ap // q
    rem = ap - whole * q
    ok = _add_shifted(acc, whole, K, 62, c)
    step_max = 62 - int(q.max()).bit_length()  # rem < q, so rem 2^step < 2^62
    pos = K
    while ok and pos > 0:
        step = min(step_max, pos)
        pos -= step
        rem <<= step
        digit = rem // q
        rem -= digit * q
        ok = _add_shifted(acc, digit, pos, step, c)
    if not ok:
        return None
    _normalise(acc, c)
    return None if acc[n].any() else acc[:n]


def _sum_of_products(x: np.ndarray, y: np.ndarray, c: int) -> int:
    r""":math:`\sum x_i y_i` exactly, for int64 arrays with entries at most :math:`2^c` in magnitude."""
    x, y = x.ravel(), y.ravel()
    step = 1 << max(0, 61 - 2 * c)  # step 2^(2c) <= 2^61: no int64 overflow within a chunk
    return sum(int(np.dot(x[i:i + step], y[i:i + step])) for i in range(0, x.size, step))


def _sum_fractions(terms: list[tuple[int, int]]) -> Fraction:
    r""":math:`\sum a/b` of ``(a, b)`` pairs (b > 0), by a balanced tree in python-flint integers
    (each node over the lcm of its denominators), reduced once at the end."""
    items = [(flint.fmpz(a), flint.fmpz(b)) for a, b in terms]
    if not items:
        return Fraction(0)
    while len(items) > 1:
        nxt = []
        for i in range(0, len(items) - 1, 2):
            (a, b), (c, e) = items[i], items[i + 1]
            g = b.gcd(e)
            nxt.append((a * (e // g) + c * (b // g), b * (e // g)))
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    a, b = items[0]
    g = a.gcd(b)
    return Fraction(int(a // g), int(b // g))


# ---------------------------------------------------------------------------- exact data of the instance
class _Exact:
    """Exact integer forms of the instance, derived here from its data only."""

    def __init__(self, inst: NTPInstance) -> None:
        self.inst = inst
        m, d, V = inst.m, inst.d, inst.V
        self.m, self.d, self.V = m, d, V
        self.S = [sorted(int(z) for z in inst.support(j)) for j in range(m)]
        self.anchor = [s[0] for s in self.S]
        self.in_S = [set(s) for s in self.S]
        # H = Hint / 2^s exactly, one s for all entries: entry x = M 2^e (M odd, or 0) is M 2^(e+s) / 2^s,
        # with 2^s the largest reduced denominator of an entry (that of float(x).as_integer_ratio())
        emb = np.asarray(inst.embeddings, dtype=np.float64).reshape(m, d)
        if not np.isfinite(emb).all():
            float(emb[~np.isfinite(emb)][0]).as_integer_ratio()  # raises, as converting it would
        # on the non-zero entries only (one-hot H is mostly zero: 8,831 of 78 M entries), scattered back
        # into zero arrays, whose untouched pages cost nothing
        nzi = np.flatnonzero(emb)
        frac, expo = np.frexp(emb.ravel()[nzi])  # x = frac 2^expo, 0.5 <= |frac| < 1
        Mv = (frac * 2.0**53).astype(np.int64)  # exact: |M| < 2^53
        ev = expo.astype(np.int64) - 53
        aM = np.abs(Mv)
        tz = _bit_lengths(aM & -aM) - 1  # trailing zero bits
        Mv, ev = Mv >> tz, ev + tz
        s = max(0, int(-ev.min())) if nzi.size else 0
        self.hden = 1 << s
        M = np.zeros(m * d, dtype=np.int64)
        M[nzi] = Mv
        k = np.zeros(m * d, dtype=np.int64)
        k[nzi] = ev + s
        self._hm = M.reshape(m, d)  # Hint = M << _hk, _hk >= 0
        self._hk = k.reshape(m, d)
        self._hint_ints: list[int] | None = None
        self._hint_rows: dict[int, list[int]] = {}
        self._hint_l1: list[int] | None = None
        self._Hint: flint.fmpz_mat | None = None
        self._hint_limbs: dict[int, list[np.ndarray]] = {}
        self._H_rank: dict[int, int] = {}
        self._support_mask: np.ndarray | None = None
        self.rows = [(j, z) for j in range(m) for z in self.S[j][1:]]
        self.row_index = {rz: i for i, rz in enumerate(self.rows)}
        self._G = None
        self._E = None

    # -------------------------------------------------------------- the integer embeddings
    @property
    def hint_ints(self) -> list[int]:
        """Hint row by row, as Python ints."""
        if self._hint_ints is None:
            self._hint_ints = list(map(operator.lshift, self._hm.ravel().tolist(), self._hk.ravel().tolist()))
        return self._hint_ints

    def hint_row(self, j: int) -> list[int]:
        """Row j of Hint, as Python ints."""
        if self._hint_ints is not None:
            return self._hint_ints[j * self.d:(j + 1) * self.d]
        if j not in self._hint_rows:
            self._hint_rows[j] = list(map(operator.lshift, self._hm[j].tolist(), self._hk[j].tolist()))
        return self._hint_rows[j]

    @property
    def hint_l1(self) -> list[int]:
        r""":math:`\|\mathrm{Hint}_j\|_1` of every row j (exact, from the limbs: their row sums fit int64)."""
        if self._hint_l1 is None:
            c = _limb_width(self.d)
            sums = [np.abs(x).sum(axis=1).astype(np.int64).tolist() for x in self.hint_limbs(c)]
            self._hint_l1 = [_int_of_limbs(list(col), c) for col in zip(*sums)]
        return self._hint_l1

    @property
    def Hint(self) -> flint.fmpz_mat:
        r"""Hint as an integer matrix: :math:`H = \text{Hint} / 2^s`, ``hden`` :math:`= 2^s`."""
        if self._Hint is None:
            self._Hint = flint.fmpz_mat(self.m, self.d, self.hint_ints)
        return self._Hint

    def hint_limbs(self, c: int) -> list[np.ndarray]:
        """c-bit limbs of Hint (m x d float64 arrays, sign and magnitude)."""
        if c not in self._hint_limbs:
            am, k, sign = np.abs(self._hm), self._hk, np.sign(self._hm)
            bits = int((_bit_lengths(am) + k).max())
            mask = (1 << c) - 1
            limbs = []
            for t in range(_limbs_needed(bits, c)):
                sh = k - c * t  # limb t of am 2^k: (am << sh) & mask, or (am >> -sh) & mask
                left, right = np.clip(sh, 0, c), np.clip(-sh, 0, 63)
                piece = np.where(sh >= 0, (am & ((1 << (c - left)) - 1)) << left, (am >> right) & mask)
                limbs.append((sign * piece).astype(np.float64))
            self._hint_limbs[c] = limbs
        return self._hint_limbs[c]

    @property
    def support_mask(self) -> np.ndarray:
        """``(V, m)`` booleans: token v is in :math:`S_j`."""
        if self._support_mask is None:
            mask = np.zeros((self.V, self.m), dtype=bool)
            for j, sj in enumerate(self.S):
                mask[sj, j] = True
            self._support_mask = mask
        return self._support_mask

    def _prob_ratio(self, j: int, z: int, a: int) -> Fraction:
        """:math:`p_{j,z} / p_{j,a}` (with counts, the ratio of the counts: the total cancels)."""
        if self.inst.counts is not None:
            return Fraction(int(self.inst.counts[j, z]), int(self.inst.counts[j, a]))
        p = self.inst.exact_probs[j]
        return p[z] / p[a]

    @property
    def G(self) -> flint.fmpz_mat:
        """:math:`G\\cdot 2^{2s}` (integers), :math:`G_{ik} = \\langle e_{z_i}-e_{a_i}, e_{z_k}-e_{a_k}\\rangle \\langle h_{j_i}, h_{j_k}\\rangle`."""
        if self._G is None:
            K = self.Hint * self.Hint.transpose()
            r = len(self.rows)
            ctx = np.array([j for j, _ in self.rows], dtype=np.int64)
            z = np.array([t for _, t in self.rows], dtype=np.int64)
            a = np.array([self.anchor[j] for j, _ in self.rows], dtype=np.int64)
            T = ((z[:, None] == z[None, :]).astype(np.int64) - (z[:, None] == a[None, :])
                 - (a[:, None] == z[None, :]) + (a[:, None] == a[None, :]))
            G = flint.fmpz_mat(r, r)
            for i, k in zip(*np.nonzero(T)):
                G[int(i), int(k)] = int(T[i, k]) * K[int(ctx[i]), int(ctx[k])]
            self._G = G
        return self._G

    def E(self) -> tuple[list[int], dict[tuple[int, int], dict[int, int]]]:
        """Primes and the exponent rows :math:`\\nu_p(p_{j,z}/p_{j,z_j})` of every equality row."""
        if self._E is None:
            rows: dict[tuple[int, int], dict[int, int]] = {}
            primes: set[int] = set()
            for j in range(self.m):
                a = self.anchor[j]
                for z in self.S[j][1:]:
                    ratio = self._prob_ratio(j, z, a)
                    ex: dict[int, int] = {}
                    for q, e in factorise(ratio.numerator).items():
                        ex[q] = ex.get(q, 0) + e
                    for q, e in factorise(ratio.denominator).items():
                        ex[q] = ex.get(q, 0) - e
                    ex = {q: e for q, e in ex.items() if e}
                    rows[(j, z)] = ex
                    primes.update(ex)
            self._E = (sorted(primes), rows)
        return self._E

    def ratio_primes(self) -> list[int]:
        r"""The primes of the positive integers :math:`c_{j,z} \propto p_{j,z}` (:math:`z \in S_j`):
        the primes a certificate lists in ``compatibility.primes``."""
        primes: set[int] = set()
        seen: set[int] = set()
        for j in range(self.m):
            for c in self.inst.ratio_integers(j).values():
                if c > 1 and c not in seen:
                    seen.add(c)
                    primes.update(factorise(c))
        return sorted(primes)

    # -------------------------------------------------------------- ranks mod p and sparse null vectors
    def _H_mod(self, p: int) -> flint.nmod_mat:
        if p < 1 << 31:  # residues in int64: (M mod p) (2^k mod p) < 2^62
            k = self._hk
            pow2 = np.array([pow(2, t, p) for t in range(int(k.max()) + 1)], dtype=np.int64)
            r = (np.abs(self._hm) % p) * pow2[k] % p
            r = np.where(self._hm < 0, (p - r) % p, r)
            # through an fmpz_mat of nested lists: about 3x faster than nmod_mat of a flat list
            return flint.nmod_mat(flint.fmpz_mat(r.tolist()), p) if r.size else flint.nmod_mat(self.m, self.d, p)
        return flint.nmod_mat(self.Hint, p)

    def rank_H_mod(self, p: int) -> int:
        """Rank of the integer embeddings mod p (a lower bound on their rank)."""
        if p not in self._H_rank:
            self._H_rank[p] = int(self._H_mod(p).rank())
        return self._H_rank[p]

    def rank_G_mod(self, p: int) -> int:
        """Rank of :math:`G \\cdot 2^{2s}` mod p (a lower bound on rank G = rank A_eq)."""
        Hp = self._H_mod(p)
        K = Hp * Hp.transpose()
        r = len(self.rows)
        ctx = [j for j, _ in self.rows]
        z = [t for _, t in self.rows]
        a = [self.anchor[j] for j, _ in self.rows]
        Kint = [[int(K[i, k]) for k in range(self.m)] for i in range(self.m)]
        vals = []
        for i in range(r):
            Ki = Kint[ctx[i]]
            zi, ai = z[i], a[i]
            for k in range(r):
                t = (zi == z[k]) - (zi == a[k]) - (ai == z[k]) + (ai == a[k])
                vals.append(t * Ki[ctx[k]] % p if t else 0)
        return int(flint.nmod_mat(r, r, vals, p).rank())

    def rank_vectors_mod(self, ys: list[dict[tuple[int, int], int]], p: int | None) -> int:
        """Rank of the vectors over the equality rows (mod p, or exactly when p is None)."""
        cols = sorted({key for y in ys for key in y})
        pos = {key: i for i, key in enumerate(cols)}
        vals = [0] * (len(ys) * len(cols))
        for k, y in enumerate(ys):
            for key, v in y.items():
                vals[k * len(cols) + pos[key]] = v if p is None else v % p
        if p is None:
            return int(flint.fmpz_mat(len(ys), len(cols), vals).rank())
        return int(flint.nmod_mat(len(ys), len(cols), vals, p).rank())

    def left_null(self, y: dict[tuple[int, int], int]) -> bool:
        r""":math:`A_{eq}^\top y = 0` exactly: for every token, the combination of the embeddings of the
        contexts whose rows name it vanishes (only the rows of y are touched)."""
        acc: dict[int, dict[int, int]] = {}
        for (j, z), c in y.items():
            _need(0 <= j < self.m and z in self.in_S[j] and z != self.anchor[j], f"({j}, {z}) is not an equality row")
            for tok, sign in ((z, 1), (self.anchor[j], -1)):
                row = acc.setdefault(tok, {})
                row[j] = row.get(j, 0) + sign * c
        for coeffs in acc.values():
            total = [0] * self.d
            for j, c in coeffs.items():
                if c:
                    for i, h in enumerate(self.hint_row(j)):
                        if h:
                            total[i] += c * h
            if any(total):
                return False
        return True

    # -------------------------------------------------------------- logits and feasibility
    def rows_int(self, W: list[list[Fraction]]) -> tuple[flint.fmpz_mat, list[int]]:
        """``(N, D)``: row v of W is ``N[v] / D[v]`` with integers (one denominator per row)."""
        dens, ints = [], []
        for row in W:
            den = 1
            for x in row:
                den = den * x.denominator // math.gcd(den, x.denominator)
            dens.append(den)
            ints.extend(x.numerator * (den // x.denominator) for x in row)
        return flint.fmpz_mat(len(W), self.d, ints), dens

    def check_primal(self, W: cf.RationalMatrix, field_name: str) -> Fraction:
        r"""Check (6a) and (6b) exactly; return :math:`\tfrac12\|W\|_F^2`.

        Every margin of (6b) is first bounded below with integers: with :math:`F = \mathrm{trunc}(2^K W)`
        (entrywise, so :math:`2^K W = F + E`, :math:`|E| < 1`) and the exact integer product
        :math:`X = F\,\mathrm{Hint}^\top`, the scaled margin :math:`2^K (w_{a_j} - w_v)^\top \mathrm{Hint}_j`
        is at least :math:`X_{a_j j} - X_{vj} - 2\|\mathrm{Hint}_j\|_1`. Where that bound already
        reaches :math:`2^K 2^s` the margin is at least 1, proven. Every other entry, and every equality
        of (6a), is then settled exactly in Python integers, in the order of the direct check
        (:meth:`check_primal_exact`, context by context, token by token), so the first failure is
        the one it reports. K makes the bound tight to :math:`2^{-\text{FILTER\_BITS}}`."""
        try:
            return self._check_primal_screened(W, field_name)
        except _Mismatch:
            return self.check_primal_exact(W.fractions(), field_name)

    def _check_primal_screened(self, W: cf.RationalMatrix, field_name: str) -> Fraction:
        V, m, d = self.V, self.m, self.d
        num, den = W.num, W.den
        big_rows: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for (v, i), (p, q) in W.big.items():
            big_rows[v].append((i, p, q))
        nzrow = num.any(axis=1)
        nzrow[list(big_rows)] = True
        rows = np.flatnonzero(nzrow)
        norms = self.hint_l1
        s = self.hden.bit_length() - 1
        c = _limb_width(d)

        # F = trunc(2^K W) in c-bit limbs, on the nonzero rows; |W| < 2^eW
        F: list[np.ndarray] = []
        K = 0
        if rows.size:
            ap, q = np.abs(num[rows]), den[rows]
            r = float((ap / q).max())
            eW = max([math.frexp(r)[1] + 1 if r > 0 else -(1 << 30)]
                     + [abs(p).bit_length() - q.bit_length() + 1 for _, p, q in
                        (t for ts in big_rows.values() for t in ts)])
            K0 = max(0, FILTER_BITS + max(norms).bit_length() - s)
            nF = _limbs_needed(K0 + eW, c)
            while True:
                K = max(0, c * nF - eW)
                mags = _fixed_point_limbs(ap, q, K, c, nF)
                if mags is not None:
                    mags = self._big_fixed_point(mags, big_rows, rows, K, c)
                if mags is not None:
                    break
                nF += 1
            sign = np.sign(num[rows])
            for (v, i), (p, q) in W.big.items():
                sign[np.searchsorted(rows, v), i] = 1 if p > 0 else -1
            F = [(sign * x).astype(np.float64) for x in mags]

        H = self.hint_limbs(c)
        nQ = len(F) + len(H) - 1 if F else 1
        T = [2 * n + (self.hden << K) for n in norms]  # a proven margin has X_a - X_v >= T_j
        U = max(nQ, _limbs_needed(max(T).bit_length(), c)) + _limbs_needed(d.bit_length(), c) + 2
        mask = (1 << c) - 1
        T_limbs = [np.array([(t >> (c * u)) & mask for t in T], dtype=np.int64) for u in range(U)]
        anchors = np.array(self.anchor, dtype=np.int64)
        on = self.support_mask
        exact = _ExactLogits(self, W, big_rows, K, norms)
        block = max(1, _BLOCK_BYTES // (8 * V * (nQ + U)))
        for j0 in range(0, m, block):
            J = np.arange(j0, min(m, j0 + block))
            if F:
                Qr = _limb_product(F, [Ht[J].T for Ht in H])
                Q = [np.zeros((V, J.size), dtype=np.int64) for _ in Qr]
                for u, q in enumerate(Qr):
                    Q[u][rows] = q
            else:
                Q = [np.zeros((V, J.size), dtype=np.int64)]
            cols = np.arange(J.size)
            anc = anchors[J]
            Z = [(Q[u][anc, cols] - T_limbs[u][J])[None, :] - Q[u] if u < len(Q)
                 else np.broadcast_to(-T_limbs[u][J], (V, J.size)).copy() for u in range(U)]
            _normalise(Z, c)
            need = (on[:, J] | (Z[-1] < 0)).T  # (6a) everywhere on the support, (6b) where not proven
            need[cols, anc] = False  # the anchor against itself
            jj, vv = np.nonzero(need)  # context by context, token by token
            exact.prepare(vv.tolist() + anc[np.unique(jj)].tolist())
            Xv = [Q[u][vv, jj].tolist() for u in range(len(Q))]
            Xa = [Q[u][anc, cols].tolist() for u in range(len(Q))]
            for n_, (jl, v) in enumerate(zip(jj.tolist(), vv.tolist())):
                j = int(J[jl])
                a = self.anchor[j]
                la, da = exact.logit(a, j, _int_of_limbs([x[jl] for x in Xa], c), c)
                lv, dv = exact.logit(v, j, _int_of_limbs([x[n_] for x in Xv], c), c)
                if on[v, j]:
                    _need(la * dv == lv * da, f"{field_name}: (6a) fails, logits of tokens {a} and {v} differ in context {j}")
                else:
                    _need(la * dv - lv * da >= da * dv * self.hden,
                          f"{field_name}: (6b) fails, margin of token {v} in context {j} is below 1")
        return _sq_norm(W) / 2

    def _big_fixed_point(self, mags: list[np.ndarray], big_rows: dict, rows: np.ndarray, K: int, c: int
                         ) -> list[np.ndarray] | None:
        r"""Put :math:`\lfloor |p| 2^K / q\rfloor` of the entries too long for int64 into the limbs."""
        mask, n = (1 << c) - 1, len(mags)
        for v, ts in big_rows.items():
            r = int(np.searchsorted(rows, v))
            for i, p, q in ts:
                f = (abs(p) << K) // q
                if f >> (c * n):
                    return None
                for t in range(n):
                    mags[t][r, i] = (f >> (c * t)) & mask
        return mags

    def check_primal_exact(self, W: list[list[Fraction]], field_name: str) -> Fraction:
        r"""Check (6a) and (6b) exactly, directly (every logit in exact integers); return
        :math:`\tfrac12\|W\|_F^2`. The reference of :meth:`check_primal`, which reaches the same
        verdict and message faster."""
        N, D = self.rows_int(W)
        L = N * self.Hint.transpose()  # row v: logits * D[v] * hden
        for j in range(self.m):
            a = self.anchor[j]
            la, da = L[a, j], D[a]
            for v in range(self.V):
                lv, dv = L[v, j], D[v]
                if v in self.in_S[j]:
                    _need(la * dv == lv * da, f"{field_name}: (6a) fails, logits of tokens {a} and {v} differ in context {j}")
                else:
                    _need(la * dv - lv * da >= da * dv * self.hden,
                          f"{field_name}: (6b) fails, margin of token {v} in context {j} is below 1")
        sq = Fraction(0)
        for v in range(self.V):
            sq += Fraction(sum(int(N[v, i]) ** 2 for i in range(self.d)), D[v] ** 2)
        return sq / 2

    def dual_terms(self, A: cf.RationalMatrix, field_name: str) -> tuple[Fraction, Fraction]:
        """:meth:`aH_zero_and_sums` of a dense dual point (``require_zero_aH=False``): the same checks
        and values, in integer arrays when its entries have a common denominator below 2^62 (their
        product with Hint in exact limbs); any failure, or anything else, goes through
        :meth:`aH_zero_and_sums` itself, which names the first failing entry."""
        got = self._dual_terms_arrays(A)
        return got if got is not None else self.aH_zero_and_sums(A.nonzero(), field_name, require_zero_aH=False)

    def _dual_terms_arrays(self, A: cf.RationalMatrix) -> tuple[Fraction, Fraction] | None:
        num, den = A.num, A.den
        if A.big:
            return None
        nz = num != 0
        if not nz.any():
            return Fraction(0), Fraction(0)
        dens = np.unique(den[nz]).tolist()
        D = math.lcm(*dens)
        amax = int(np.abs(num).max())
        if D >= 1 << 62 or amax * (D // dens[0]) >= 1 << 62:
            return None
        Aint = num * np.where(nz, D // den, 0)  # a D, exact
        off = ~self.support_mask
        if (Aint[off] > 0).any():
            return None
        big = amax * (D // dens[0])
        if self.V * big < 1 << 63:
            colsum_zero = not Aint.sum(axis=0).any()
        else:
            colsum_zero = not any(sum(col) for col in Aint.T.tolist())
        if not colsum_zero:
            return None
        mass = -sum(Aint[off & nz].tolist())
        # ||a Hint||^2 in limbs: P = Aint Hint (V, d), row blocks
        c = _limb_width(self.m)
        Al = _int_limbs(Aint, c, _limbs_needed(big.bit_length(), c))
        H = self.hint_limbs(c)
        U = len(Al) + len(H) + _limbs_needed(self.m.bit_length(), c) + 1
        rows = np.flatnonzero(nz.any(axis=1))
        block = max(1, _BLOCK_BYTES // (8 * self.d * U))
        total = 0
        for r0 in range(0, rows.size, block):
            R = rows[r0:r0 + block]
            Q = _limb_product([x[R] for x in Al], H)
            Q += [np.zeros_like(Q[0]) for _ in range(U - len(Q))]
            _normalise(Q, c)
            if np.abs(Q[-1]).max() > 1:  # pragma: no cover - U leaves room for every value
                return None
            for u in range(U):
                total += _sum_of_products(Q[u], Q[u], c) << (2 * c * u)
                for u2 in range(u + 1, U):
                    total += _sum_of_products(Q[u], Q[u2], c) << (c * (u + u2) + 1)
        return Fraction(mass, D), Fraction(total, (D * self.hden) ** 2)

    def aH_zero_and_sums(self, a: dict[tuple[int, int], Fraction], field_name: str, *, require_zero_aH: bool) -> tuple[Fraction, Fraction]:
        """Check :math:`1^\\top a_j = 0` and off-support signs; return (sum of -a off support, ||aH||^2)."""
        colsum: dict[int, Fraction] = {}
        mass = Fraction(0)
        for (v, j), val in a.items():
            _need(0 <= v < self.V and 0 <= j < self.m, f"{field_name}: index ({v}, {j}) out of range")
            colsum[j] = colsum.get(j, Fraction(0)) + val
            if v not in self.in_S[j]:
                _need(val <= 0, f"{field_name}: entry ({v}, {j}) is positive off the support")
                mass -= val
        for j, s in colsum.items():
            _need(s == 0, f"{field_name}: column {j} does not sum to 0")
        den = 1
        for val in a.values():
            den = den * val.denominator // math.gcd(den, val.denominator)
        # only the ray's tokens and contexts: the other rows of aH are 0 (a dense V x m product with
        # entries of thousands of digits took 18 GB on a word-level corpus)
        toks = sorted({v for v, _ in a})
        ctxs = sorted({j for _, j in a})
        if not a:
            return mass, Fraction(0)
        ti = {v: i for i, v in enumerate(toks)}
        ci = {j: i for i, j in enumerate(ctxs)}
        A = flint.fmpz_mat(len(toks), len(ctxs))
        for (v, j), val in a.items():
            A[ti[v], ci[j]] = int(val * den)
        P = A * flint.fmpz_mat([self.hint_row(j) for j in ctxs])  # (tokens, d) = den * 2^s * aH on them
        if require_zero_aH:
            _need(P.is_zero(), f"{field_name}: sum_j a_j h_j^T is not 0")
            return mass, Fraction(0)
        sq = sum(int(x) ** 2 for x in P.entries())
        return mass, Fraction(sq, (den * self.hden) ** 2)


#: Entries of a row of W that share a denominator, below which :class:`_ExactLogits` scales them apart.
_GROUP_MIN = 16


class _ExactLogits:
    r"""Exact logits of single entries for :meth:`_Exact.check_primal`: row v of W as
    :math:`\sum_g N_g / q_g` over its distinct denominators, :math:`D_v = \mathrm{lcm}_g q_g`, and
    :math:`l_{vj} = D_v\, w_v^\top \mathrm{Hint}_j = \sum_g (D_v/q_g)\, N_g^\top \mathrm{Hint}_{j,g}` (integers),
    each checked against its screened value X (:math:`|2^K l_{vj} - X D_v| \le \|\mathrm{Hint}_j\|_1 D_v`)."""

    def __init__(self, ex: _Exact, W: cf.RationalMatrix, big_rows: dict, K: int, norms: list[int]) -> None:
        self.ex, self.W, self.big_rows, self.K, self.norms = ex, W, big_rows, K, norms
        self.rows: dict[int, tuple[list[tuple[int, Any, list[int]]], int]] = {}
        self.done: dict[tuple[int, int], tuple[int, int]] = {}

    def prepare(self, rows: list[int]) -> None:
        """Split the given rows of W by denominator, all at once: groups ``(D_v / q, columns,
        numerators)`` of the denominators shared by at least ``_GROUP_MIN`` entries, and one group
        of the rest with their numerators times ``D_v / q``."""
        R = np.array(sorted(set(rows) - self.rows.keys()), dtype=np.int64)
        if not R.size:
            return
        num, den = self.W.num[R], self.W.den[R]
        r, col = np.nonzero(num)
        q = den[r, col]
        order = np.lexsort((q, r))
        r, col, q = r[order], col[order], q[order]
        p = num[r, col].tolist()
        starts = np.flatnonzero((np.diff(r, prepend=-1) != 0) | (np.diff(q, prepend=0) != 0))
        spans: dict[int, list[tuple[int, int, int]]] = {v: [] for v in R.tolist()}
        for v, qg, a, b in zip(R[r[starts]].tolist(), q[starts].tolist(), starts.tolist(),
                               starts[1:].tolist() + [r.size]):
            spans[v].append((qg, a, b))
        col = col.tolist()
        for v, parts in spans.items():
            bigs = self.big_rows.get(v, ())
            D = math.lcm(*(qg for qg, _, _ in parts), *(qb for _, _, qb in bigs))
            groups, rest_cols, rest_nums = [], [], []
            for qg, a, b in parts:
                mult = D // qg
                if b - a >= _GROUP_MIN:
                    groups.append((mult, operator.itemgetter(*col[a:b]), p[a:b]))
                else:
                    rest_cols += col[a:b]
                    rest_nums += [x * mult for x in p[a:b]]
            for i, pb, qb in bigs:
                rest_cols.append(i)
                rest_nums.append(pb * (D // qb))
            if rest_cols:
                groups.append((1, lambda h, cols=rest_cols: [h[i] for i in cols], rest_nums))
            self.rows[v] = (groups, D)

    def logit(self, v: int, j: int, X: int, c: int) -> tuple[int, int]:
        """``(l_vj, D_v)``, checked against the screened ``X``."""
        key = (v, j)
        if key not in self.done:
            if v not in self.rows:
                self.prepare([v])
            groups, D = self.rows[v]
            h = self.ex.hint_row(j)
            lv = sum(mult * sum(map(operator.mul, ps, gather(h))) for mult, gather, ps in groups)
            if abs((lv << self.K) - X * D) > self.norms[j] * D:
                raise _Mismatch(f"logit ({v}, {j})")
            self.done[key] = (lv, D)
        return self.done[key]


def _sq_norm(W: cf.RationalMatrix) -> Fraction:
    r""":math:`\|W\|_F^2` exactly: the squares of the numerators summed per denominator (in 20-bit limbs
    of int64, whose products summed over fewer than 2^22 entries stay below 2^62)."""
    nz = W.num != 0
    p, q = W.num[nz], W.den[nz]
    sums: dict[int, int] = {}
    if p.size:
        order = np.argsort(q, kind="stable")
        p, q = np.abs(p[order]), q[order]
        starts = np.flatnonzero(np.diff(q, prepend=0))
        dens = q[starts].tolist()
        if p.size < 1 << 22:
            c = 20
            limbs = [(p >> (c * t)) & ((1 << c) - 1) for t in range(3)]  # |p| < 2^60
            totals = [0] * len(dens)
            for t in range(3):
                for t2 in range(t, 3):
                    part = np.add.reduceat(limbs[t] * limbs[t2], starts).tolist()
                    w = c * (t + t2) + (t != t2)
                    totals = [x + (y << w) for x, y in zip(totals, part)]
        else:
            ps = p.tolist()
            ends = starts.tolist()[1:] + [p.size]
            totals = [sum(map(operator.mul, ps[a:b], ps[a:b])) for a, b in zip(starts.tolist(), ends)]
        sums = dict(zip(dens, totals))
    for pb, qb in W.big.values():
        sums[qb] = sums.get(qb, 0) + pb * pb
    return _sum_fractions([(total, g * g) for g, total in sums.items()])


# ---------------------------------------------------------------------------- sections
def _list_text(xs: list) -> str:
    return repr(xs) if len(xs) <= 8 else f"[{', '.join(map(repr, xs[:8]))}, ...] ({len(xs)} entries)"


def _num(f: Fraction | float) -> str:
    """``%.6g`` of an exact rational that may not fit a float."""
    try:
        return f"{float(f):.6g}"
    except OverflowError:
        return ">1e308" if f > 0 else "<-1e308"


def _sqrt_text(Q: Fraction) -> str:
    try:
        return f"{math.sqrt(float(Q)):.6g}" if Q >= 0 else f"sqrt({_num(Q)})"
    except OverflowError:
        return ">1e154"


def _check_instance(cert: dict, given: NTPInstance | None) -> NTPInstance:
    """The instance checked against: the embedded one, or ``given``, which must equal it."""
    rec = cert["instance"]
    fp = rec["fingerprint"]
    embedded = cf.instance_from_record(rec["embedded"])
    _need(embedded.fingerprint() == fp,
          f"instance.fingerprint: names {fp[:16]}..., the embedded instance has {embedded.fingerprint()[:16]}...")
    if given is not None:
        _need(given.fingerprint() == fp,
              f"the certificate speaks of instance {fp[:16]}..., but DATA is instance {given.fingerprint()[:16]}...")
        for key in ("name", "token_names", "context_names"):
            mine, theirs = getattr(embedded, key), getattr(given, key)
            _need(mine == theirs, f"instance.embedded.{key}: {cf.show(mine)} differs from DATA's {cf.show(theirs)}")
        inst = given
    else:
        inst = embedded
    for key in ("m", "d", "V"):
        _need(rec[key] == getattr(inst, key), f"instance.{key}: claims {cf.show(rec[key])}, the instance has {getattr(inst, key)}")
    flag = bool(inst.probs_exact_from_floats)
    _need(cert["probabilities_exact_from_floats"] is flag,
          f"probabilities_exact_from_floats: {cf.show(cert['probabilities_exact_from_floats'])}, the instance has {flag}")
    return inst


def _integer_column(items: Any, name: str, ex: _Exact) -> tuple[flint.fmpz_mat, int]:
    """A sparse rational vector over the equality rows, times the lcm ``den`` of its denominators:
    an integer column of length r, and ``den``."""
    y = cf.sparse_dict(items, name)
    den = lcm_all(v.denominator for v in y.values())
    col = flint.fmpz_mat(len(ex.rows), 1)
    for key, v in y.items():
        _need(key in ex.row_index, f"{name}: ({key[0]}, {key[1]}) is not an equality row")
        col[ex.row_index[key], 0] = int(v * den)
    return col, den


def _check_compatibility(sec: dict, ex: _Exact, checks: list[str]) -> bool | None:
    claim = sec["claim"]  # True, False or None: the schema chose this section's variant by it
    primes, Erows = ex.E()
    r = len(ex.rows)
    _need(sec["n_eq"] == r, f"compatibility.n_eq: claims {cf.show(sec['n_eq'])}, the instance has r = {r} equality rows")
    ratio_primes = ex.ratio_primes()
    _need(sec["primes"] == ratio_primes,
          f"compatibility.primes: claims {_list_text(sec['primes'])}, the count ratios have {_list_text(ratio_primes)}")
    if claim is None:
        checks.append("compatibility undetermined (nothing to check)")
        return None

    def yE(y: dict[tuple[int, int], int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for key, c in y.items():
            for p, e in Erows[key].items():
                out[p] = out.get(p, 0) + c * e
        return {p: v for p, v in out.items() if v}

    if claim is False:
        y = _integer_vector(sec["violating_null_vector"], "compatibility.violating_null_vector", ex)
        _need(ex.left_null(y), "compatibility.violating_null_vector: not in the left null space of A_eq")
        if sec["dim_F"] is not None:
            rank = ex.G.rank() if r else 0
            _need(sec["dim_F"] == rank, f"compatibility.dim_F: claims {cf.show(sec['dim_F'])}, rank A_eq is {rank}")
        viol = yE(y)
        _need(bool(viol), "compatibility.violating_null_vector: y^T E = 0, so it shows nothing")
        checks.append(f"incompatible: y in null(A_eq^T) with y^T b = {' + '.join(f'{v}*log({p})' for p, v in sorted(viol.items()))} != 0")
        return False
    if "particular_solutions" in sec:  # tall systems: one exact solution per prime, rank A_eq exactly
        _check_particular(sec, ex, primes, Erows, checks)
        return True
    basis = sec["null_space_basis"]
    ys = [_integer_vector(b, f"compatibility.null_space_basis[{k}]", ex) for k, b in enumerate(basis)]
    dim_F = sec["dim_F"]
    _need(dim_F + len(ys) == r, f"compatibility.dim_F: {cf.show(dim_F)} and {len(ys)} null-space basis vectors do "
          f"not add up to r = {r}")
    if "embeddings_rank_witness" in sec:
        _check_rank_witness(sec, "compatibility", ex)
        _need(not ys, "compatibility.null_space_basis: A_eq has full row rank, its left null space is 0")
        checks.append(f"compatible: H has rank m = {ex.m} (peeled triangular pivots and a core mod p, re-checked), "
                      f"so A_eq has full row rank r = {r} and (4) is solvable (Lemma 1)")
        return True
    if "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        _need(_is_prime(p), f"compatibility.embeddings_rank_modulus: {cf.show(p)} is not a prime")
        _need(ex.m <= ex.d and ex.rank_H_mod(p) == ex.m,
              f"compatibility.embeddings_rank_modulus: H does not have rank m = {ex.m} mod {p}")
        _need(not ys, "compatibility.null_space_basis: A_eq has full row rank, its left null space is 0")
        checks.append(f"compatible: H has full row rank (rank m = {ex.m} mod {p}, d >= m), so A_eq has full row "
                      f"rank r = {r} and (4) is solvable (Lemma 1)")
        return True
    for k, y in enumerate(ys):
        _need(ex.left_null(y), f"compatibility.null_space_basis[{k}]: not in the left null space of A_eq")
        _need(not yE(y), f"compatibility.null_space_basis[{k}]: y^T E != 0, contradicting the claim")
    if "frequent_tokens_modulus" in sec:  # the reduced system rebuilt here: an upper bound on dim null(A_eq^T)
        from ntpcert.pipeline.frequent_tokens import left_null_dimension_bound

        p = sec["frequent_tokens_modulus"]
        _need(_is_prime(p) and p < 2**62, f"compatibility.frequent_tokens_modulus: {cf.show(p)} is not a prime below 2^62")
        bound = left_null_dimension_bound(ex.inst, p)
        _need(bound is not None, "compatibility.frequent_tokens_modulus: the reduced system is too large to rebuild")
        _need(len(ys) >= bound, f"compatibility.frequent_tokens_modulus: the reduced system mod {p} leaves {bound} "
              f"null directions, the basis has {len(ys)} vectors")
        if ys:
            _need(ex.rank_vectors_mod(ys, p) == len(ys), "compatibility.null_space_basis: the vectors are dependent "
                  f"mod {p}")
        checks.append(f"compatible: the frequent-token reduction mod {p} bounds dim null(A_eq^T) by {bound}, the "
                      f"{len(ys)} exact null vectors reach it and Y^T E = 0")
        return True
    if "rank_modulus" in sec:
        p = sec["rank_modulus"]
        _need(_is_prime(p), f"compatibility.rank_modulus: {cf.show(p)} is not a prime")
        rank_p = ex.rank_G_mod(p) if r else 0
        _need(rank_p == dim_F, f"compatibility.rank_modulus: rank of G mod {p} is {rank_p}, not dim_F = {dim_F}")
        if ys:
            _need(ex.rank_vectors_mod(ys, p) == len(ys), "compatibility.null_space_basis: the vectors are dependent "
                  f"mod {p}")
        how = f"rank G mod {p} = {dim_F} <= rank A_eq <= r - {len(ys)} independent exact null vectors"
    else:
        rank = ex.G.rank() if r else 0
        _need(dim_F == rank, f"compatibility.dim_F: claims {cf.show(dim_F)}, rank A_eq is {rank}")
        if ys:
            _need(ex.rank_vectors_mod(ys, None) == len(ys), "compatibility.null_space_basis: the vectors are dependent")
        how = f"rank A_eq = {rank}"
    checks.append(f"compatible: null(A_eq^T) has dimension {len(ys)} and Y^T E = 0 ({how})")
    if "W_star" in sec:
        G = ex.G
        _check_w_star(sec["W_star"], ex, G, primes, Erows, checks)
    return True


def _check_particular(sec: dict, ex: _Exact, primes: list[int], Erows: dict, checks: list[str]) -> None:
    r"""``particular_solutions``: for every prime p whose exponents move, a rational :math:`R_p` with
    :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}`, row by row in integers
    (:math:`\sum_i \mathrm{Hint}_{j,i}(R_{z,i} - R_{z_j,i})\,D = E_{(j,z),p}\,D\,2^s` for the common
    denominator D of :math:`R_p`); then :math:`W = \sum_p \log(p) R_p` solves (4). ``dim_F`` is the
    exact rank of :math:`2^s A_{eq}` on the columns its rows use."""
    sols = sec["particular_solutions"]
    needed = {p for p in primes if any(Erows[k].get(p) for k in ex.rows)}
    given = {int(key) for key in sols}
    _need(given == needed, f"compatibility.particular_solutions: primes {_list_text(sorted(given))}, the count ratios "
          f"need {_list_text(sorted(needed))}")
    for p in sorted(needed):
        name = f"compatibility.particular_solutions[{p}]"
        R = cf.sparse_dict(sols[str(p)], name)
        den = lcm_all(x.denominator for x in R.values())
        Ri: dict[tuple[int, int], int] = {}
        for (v, i), x in R.items():
            _need(v < ex.V and i < ex.d, f"{name}: index ({v}, {i}) is outside the (V, d) = ({ex.V}, {ex.d}) table")
            Ri[(v, i)] = int(x * den)
        target = den * ex.hden
        for (j, z) in ex.rows:
            a = ex.anchor[j]
            h = ex.hint_row(j)
            lhs = sum(x * (Ri.get((z, i), 0) - Ri.get((a, i), 0)) for i, x in enumerate(h) if x)
            _need(lhs == Erows[(j, z)].get(p, 0) * target,
                  f"{name}: row ({j}, {z}) of A_eq vec(R_p) is not the exponent of {p} in its count ratio")
    cols: dict[tuple[int, int], int] = {}
    for j, z in ex.rows:
        for i, x in enumerate(ex.hint_row(j)):
            if x:
                cols.setdefault((z, i), len(cols))
                cols.setdefault((ex.anchor[j], i), len(cols))
    A = flint.fmpz_mat(len(ex.rows), max(len(cols), 1))
    for k, (j, z) in enumerate(ex.rows):
        for i, x in enumerate(ex.hint_row(j)):
            if x:
                A[k, cols[(z, i)]] += x
                A[k, cols[(ex.anchor[j], i)]] -= x
    rank = int(A.rank()) if ex.rows else 0
    _need(sec["dim_F"] == rank, f"compatibility.dim_F: claims {cf.show(sec['dim_F'])}, rank A_eq is {rank}")
    how = (f"A_eq vec(R_p) = E_p exactly for {len(needed)} prime{'s' if len(needed) != 1 else ''}, so "
           "W = sum_p log(p) R_p solves (4)") if needed else "every count ratio is 1 (b = 0), so W = 0 solves (4)"
    checks.append(f"compatible: {how} (rank A_eq = {rank} on the {len(cols)} columns its rows use)")


def _check_rank_witness(sec: dict, section: str, ex: _Exact) -> None:
    """Lemma 1's rank witness, re-checked on the instance's own H (:func:`check_rank_witness`)."""
    from ntpcert.exact.rank_witness import check_rank_witness

    why = check_rank_witness(ex.inst.embeddings, sec["embeddings_rank_witness"], ex.m)
    _need(not why, f"{section}.embeddings_rank_witness: {why}")


def _is_prime(p: int) -> bool:
    return p >= 2 and bool(flint.fmpz(p).is_prime())


def _integer_vector(items: Any, name: str, ex: _Exact) -> dict[tuple[int, int], int]:
    """A sparse rational vector over the equality rows, scaled by the lcm of its denominators."""
    y = cf.sparse_dict(items, name)
    den = lcm_all(v.denominator for v in y.values())
    out = {}
    for key, v in y.items():
        _need(key in ex.row_index, f"{name}: ({key[0]}, {key[1]}) is not an equality row")
        out[key] = int(v * den)
    return out


def _check_w_star(ws: dict, ex: _Exact, G: flint.fmpz_mat, primes: list[int], Erows: dict, checks: list[str]) -> None:
    coeffs = ws["coefficients"]  # keys checked by the schema: primes in decimal
    needed = {p for p in primes if any(Erows[k].get(p) for k in ex.rows)}
    given = {int(key) for key in coeffs}
    _need(given == needed, f"compatibility.W_star.coefficients: primes {_list_text(sorted(given))}, the count ratios "
          f"need {_list_text(sorted(needed))}")
    scale = ex.hden ** 2
    for p in sorted(needed):
        col, den = _integer_column(coeffs[str(p)], f"compatibility.W_star.coefficients[{p}]", ex)
        lhs = G * col  # = den * 2^(2s) * G g
        for i, key in enumerate(ex.rows):
            _need(int(lhs[i, 0]) == Erows[key].get(p, 0) * den * scale,
                  f"compatibility.W_star.coefficients[{p}]: A_eq R_p differs from the exponents of {p} at row {key}")
    checks.append(f"W* = sum_p log(p) R_p verified for {len(needed)} primes")


def _check_separability(sec: dict, ex: _Exact, checks: list[str]) -> bool | None:
    claim = sec["claim"]  # True, False or None: the schema chose this section's variant by it
    if claim is True and "embeddings_rank_witness" in sec:
        _check_rank_witness(sec, "separability", ex)
        checks.append(f"separable: H has rank m = {ex.m} (peeled triangular pivots and a core mod p, re-checked), "
                      "so every logit matrix is reachable (Lemma 1)")
    elif claim is True and "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        _need(_is_prime(p), f"separability.embeddings_rank_modulus: {cf.show(p)} is not a prime")
        _need(ex.m <= ex.d and ex.rank_H_mod(p) == ex.m,
              f"separability.embeddings_rank_modulus: H does not have rank m = {ex.m} mod {p}")
        checks.append(f"separable: H has full row rank (rank m = {ex.m} mod {p}, d >= m), so every logit matrix "
                      "is reachable (Lemma 1)")
    elif claim is True:
        W = cf.matrix_rationals(sec["W"], (ex.V, ex.d), "separability.W")
        ex.check_primal(W, "separability.W")
        checks.append("separable: W satisfies (6a) exactly and every margin is >= 1")
    elif claim is False:
        a = cf.sparse_dict(sec["ray"], "separability.ray")
        mass, _ = ex.aH_zero_and_sums(a, "separability.ray", require_zero_aH=True)
        _need(mass > 0, "separability.ray: no mass off the supports")
        checks.append("not separable: Farkas ray verified (aH = 0, 1^T a_j = 0, a <= 0 off support, mass > 0)")
    else:
        checks.append("separability undetermined (nothing to check)")
    return claim


def _check_upper(x: float, Q: Fraction, name: str, what: str) -> None:
    r"""``x`` is :math:`\sqrt Q` rounded up: :math:`x \ge 0`, :math:`Q \le x^2 \le Q(1+\epsilon)^2 + \delta`."""
    _need(x >= 0, f"{name}: {x!r} is negative")
    X = Fraction(x) ** 2
    _need(X >= Q, f"{name}: {x!r} is below {what} = {_sqrt_text(Q)}")
    _need(X <= Q * (1 + BOUND_RELATIVE_SLACK) ** 2 + BOUND_ABSOLUTE_SLACK,
          f"{name}: {x!r} is not {what} = {_sqrt_text(Q)} rounded up (relative slack 2^-40)")


def _check_lower(x: float, Q: Fraction, name: str, what: str) -> None:
    r"""``x`` is :math:`\sqrt{\max(Q, 0)}` rounded down: :math:`x \ge 0`,
    :math:`Q(1-\epsilon)^2 - \delta \le x^2 \le \max(Q, 0)`."""
    _need(x >= 0, f"{name}: {x!r} is negative")
    X = Fraction(x) ** 2
    _need(X <= max(Q, Fraction(0)), f"{name}: {x!r} is above {what} = {_sqrt_text(max(Q, Fraction(0)))}")
    _need(X >= Q * (1 - BOUND_RELATIVE_SLACK) ** 2 - BOUND_ABSOLUTE_SLACK,
          f"{name}: {x!r} is not {what} = {_sqrt_text(Q)} rounded down (relative slack 2^-40)")


def _check_svm(sec: dict | None, ex: _Exact, checks: list[str]) -> dict | None:
    r"""The NTP-SVM pair. With :math:`P = \tfrac12\|W\|_F^2` and :math:`D(a)` recomputed exactly,
    :math:`\mathrm{gap} = P - D(a) \ge 0` must equal the claimed one and
    :math:`\sqrt{2\,\mathrm{gap}} \le` distance_bound, :math:`0 \le` norm_lower :math:`\le \sqrt{2D(a)}`,
    :math:`\sqrt{2P} \le` norm_upper (each within the slack of its quantity)."""
    if sec is None:
        return None
    if "W" in sec:
        W = cf.matrix_rationals(sec["W"], (ex.V, ex.d), "svm.W")
    else:
        W = cf.factored_rationals(sec["W_factored"], (ex.V, ex.d), "svm.W_factored")
    primal = ex.check_primal(W, "svm.W")
    if "a" in sec:
        A = cf.matrix_rationals(sec["a"], (ex.V, ex.m), "svm.a")
    else:
        A = cf.sparse_rationals(sec["a_sparse"], (ex.V, ex.m), "svm.a_sparse")
    mass, sq = ex.dual_terms(A, "svm.a")
    dual = mass - sq / 2
    gap = primal - dual
    claimed = cf.parse_rational(sec["gap"], "svm.gap")
    _need(gap >= 0, f"svm: the pair gives a negative gap {_num(gap)}, it cannot be feasible")
    _need(gap == claimed, f"svm.gap: claimed {_num(claimed)}, the pair gives {_num(gap)}")
    dist, lo, hi = sec["distance_bound"], sec["norm_lower"], sec["norm_upper"]
    _check_upper(dist, 2 * gap, "svm.distance_bound", "sqrt(2 gap)")
    _check_lower(lo, 2 * dual, "svm.norm_lower", "sqrt(2 D(a))")
    _check_upper(hi, 2 * primal, "svm.norm_upper", "||W||_F")
    _need(lo <= hi, f"svm.norm_upper: {hi!r} is below svm.norm_lower = {lo!r}")
    checks.append(f"NTP-SVM: exact gap {_num(gap)}, ||W - W^mm||_F <= {dist:.3e}, ||W^mm||_F in [{lo:.12g}, {hi:.12g}]")
    return {"gap": sec["gap"], "distance_bound": dist, "norm_lower": lo, "norm_upper": hi}


def _check_claims(claims: dict, compat: bool | None, sep: bool | None, svm: dict | None) -> None:
    """The summary claims equal the checked sections, type-exactly (``is``, never ``==``)."""
    _need(claims["compatible"] is compat,
          f"claims.compatible: {cf.show(claims['compatible'])} disagrees with the witness ({_json(compat)})")
    _need(claims["separable"] is sep,
          f"claims.separable: {cf.show(claims['separable'])} disagrees with the witness ({_json(sep)})")
    reach = and3(compat, sep)
    _need(claims["entropy_bound_reachable"] is reach,
          f"claims.entropy_bound_reachable: {cf.show(claims['entropy_bound_reachable'])}, but the compatibility and "
          f"separability claims give {_json(reach)}")
    cs = claims["svm"]
    if svm is None:
        _need(cs is None, "claims.svm: an object, but there is no svm section to support it")
        return
    _need(sep is True, "svm: an NTP-SVM pair is only meaningful for separable data")
    _need(cs is not None, "claims.svm: null, but the svm section certifies a bound")
    for key in ("gap", "distance_bound", "norm_lower", "norm_upper"):
        # same kinds by the schema (canonical strings or floats), so == is exact here
        _need(cs[key] == svm[key], f"claims.svm.{key}: {cf.show(cs[key])} differs from svm.{key} = {cf.show(svm[key])}")


def _json(x: bool | None) -> str:
    return "null" if x is None else ("true" if x else "false")


# ---------------------------------------------------------------------------- entry points
def _source(instance: NTPInstance | None) -> str:
    return INSTANCE_EMBEDDED if instance is None else INSTANCE_DATA


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def verify_certificate(cert: dict, instance: NTPInstance | None = None, *, sealed_text: str | None = None) -> Verdict:
    """Check a parsed certificate against ``instance`` (default: the one embedded in it).

    The schema first (:func:`~ntpcert.pipeline.certificate.check_schema`), then the checksum, the
    instance and every section; INVALID at the first failure, with a one-line reason.

    ``sealed_text``: the canonical text ``cert`` was just sealed from and is about to be written
    (:func:`~ntpcert.pipeline.certificate.seal_canonical`, as ``certify --exact`` does). The checksum
    is then taken over those bytes, the file's own, instead of encoding ``cert`` a second time (about
    2 s on a 43 MB certificate); the text must begin with that checksum field. Every section is still
    checked on ``cert`` itself. A file read back is checked without it (:func:`verify_file`)."""
    t0 = time.perf_counter()
    source = _source(instance)
    checks: list[str] = []

    def invalid(reason: str) -> Verdict:
        return Verdict(False, _one_line(reason), tuple(checks), {}, time.perf_counter() - t0, source)

    try:
        _need(type(cert) is dict, "not a certificate object")
        cf.check_schema(cert)
        checks.append("schema")
        if sealed_text is None:
            _need(cert["checksum"] == cf.checksum(cert), "checksum mismatch: the file was altered or truncated")
        else:
            _need(cf.sealed_text_matches(cert, sealed_text), "checksum mismatch: the sealed text is not this certificate's")
        checks.append("checksum")
        inst = _check_instance(cert, instance)
        checks.append(f"instance {cf.show(inst.name)} {inst.fingerprint()[:16]}...: fingerprint, header and names "
                      f"agree with {'the embedded data' if instance is None else 'DATA'}")
        ex = _Exact(inst)
        compat = _check_compatibility(cert["compatibility"], ex, checks)
        sep = _check_separability(cert["separability"], ex, checks)
        svm = _check_svm(cert["svm"], ex, checks)
        why = check_excess(cert.get("excess"), inst, checks)
        _need(not why, why)
        why = check_why_not(cert, ex, compat, sep, checks)
        _need(not why, why)
        _check_claims(cert["claims"], compat, sep, svm)
        checks.append("claims agree with the witnesses")
    except _Invalid as err:
        return invalid(str(err))
    except CertificateError as err:
        return invalid(f"malformed certificate: {err}")
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, OverflowError,
            RecursionError) as err:
        return invalid(f"malformed certificate: {type(err).__name__}: {err}")
    return Verdict(True, "", tuple(checks), copy.deepcopy(cert["claims"]), time.perf_counter() - t0, source)


def verify_text(text: str, instance: NTPInstance | None = None) -> Verdict:
    """Parse and check certificate text; an unreadable text is an invalid certificate."""
    try:
        cert = cf.loads(text)
    except CertificateError as err:
        return Verdict(False, _one_line(str(err)), instance_source=_source(instance))
    return verify_certificate(cert, instance)


def verify_file(path, instance: NTPInstance | None = None) -> Verdict:
    """Read and check a certificate file (raises InputError only when the file cannot be read; a file
    over :data:`~ntpcert.pipeline.certificate.MAX_CERTIFICATE_BYTES` is INVALID, refused unread)."""
    try:
        cert = cf.load(path)
    except CertificateError as err:
        return Verdict(False, _one_line(str(err)), instance_source=_source(instance))
    return verify_certificate(cert, instance)


def verify(certificate: dict | str | os.PathLike, instance: NTPInstance | None = None) -> Verdict:
    """Check a certificate, given as a parsed object or a file path, against ``instance``
    (default: the instance embedded in the certificate; :attr:`Verdict.instance_source` says which).

    >>> from ntpcert import verify
    >>> verify("cert.json").valid        # doctest: +SKIP
    True
    """
    if isinstance(certificate, dict):
        return verify_certificate(certificate, instance)
    return verify_file(certificate, instance)
