r"""The instance in exact integers, as the checker derives it from the instance's data alone.

:class:`ExactInstance` holds the integer embeddings :math:`\mathrm{Hint} = 2^s H` (one power of two for
every entry), the supports and their anchors :math:`z_j = \min S_j`, the equality rows ``(j, z)``, the
prime exponents of the count ratios, the Gram matrix :math:`G = A_{eq}A_{eq}^\top` (scaled), ranks mod
p, exact left-null tests, and the checks of a dual or Farkas point :math:`a` (:meth:`aH_zero_and_sums`).
Everything is computed on first use and kept.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import flint
import numpy as np

from ntpcert.certificate.checker.common import need
from ntpcert.certificate.checker.limbs import bit_lengths, int_of_limbs, limb_width, limbs_needed
from ntpcert.instance import NTPInstance
from ntpcert.util.numbers import factorise


class ExactInstance:
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
        tz = bit_lengths(aM & -aM) - 1  # trailing zero bits
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
            c = limb_width(self.d)
            sums = [np.abs(x).sum(axis=1).astype(np.int64).tolist() for x in self.hint_limbs(c)]
            self._hint_l1 = [int_of_limbs(list(col), c) for col in zip(*sums)]
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
            bits = int((bit_lengths(am) + k).max())
            mask = (1 << c) - 1
            limbs = []
            for t in range(limbs_needed(bits, c)):
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
        if self.inst.has_counts:
            r = self.inst.ratio_integers(j)  # the counts of S_j (sparse instances have no dense counts)
            return Fraction(int(r.get(int(z), 0)), int(r[int(a)]))
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
            need(0 <= j < self.m and z in self.in_S[j] and z != self.anchor[j], f"({j}, {z}) is not an equality row")
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

    def aH_zero_and_sums(self, a: dict[tuple[int, int], Fraction], field_name: str, *, require_zero_aH: bool) -> tuple[Fraction, Fraction]:
        """Check :math:`1^\\top a_j = 0` and off-support signs; return (sum of -a off support, ||aH||^2)."""
        colsum: dict[int, Fraction] = {}
        mass = Fraction(0)
        for (v, j), val in a.items():
            need(0 <= v < self.V and 0 <= j < self.m, f"{field_name}: index ({v}, {j}) out of range")
            colsum[j] = colsum.get(j, Fraction(0)) + val
            if v not in self.in_S[j]:
                need(val <= 0, f"{field_name}: entry ({v}, {j}) is positive off the support")
                mass -= val
        for j, s in colsum.items():
            need(s == 0, f"{field_name}: column {j} does not sum to 0")
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
            need(P.is_zero(), f"{field_name}: sum_j a_j h_j^T is not 0")
            return mass, Fraction(0)
        sq = sum(int(x) ** 2 for x in P.entries())
        return mass, Fraction(sq, (den * self.hden) ** 2)


__all__ = ["ExactInstance"]
