r"""The independent checker of certificate files.

It re-derives every claim from the instance and the certificate alone, in exact integer and
rational arithmetic (python-flint), with no tolerance, and imports nothing that produced the
certificate (no solver, no LP, no float pipeline): only the data model, the file format and
exact arithmetic. What it checks:

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
* **claims**: the summary claims equal (type-exactly, ``is``) the sections they summarise, and
  ``entropy_bound_reachable`` is their Kleene conjunction.

A verdict is INVALID at the first failed check, with a one-line reason that names the field.
"""

from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from ntpcert.errors import CertificateError
from ntpcert.instance import NTPInstance
from ntpcert.pipeline import certificate as cf
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
        # H = Hint / 2^s exactly, one s for all entries
        ratios = [[float(x).as_integer_ratio() for x in row] for row in inst.embeddings.tolist()]
        den = 1
        for row in ratios:
            for _, q in row:
                den = max(den, q)  # powers of two
        self.hden = den
        self.Hint = flint.fmpz_mat(m, d, [p * (den // q) for row in ratios for p, q in row])
        self.rows = [(j, z) for j in range(m) for z in self.S[j][1:]]
        self.row_index = {rz: i for i, rz in enumerate(self.rows)}
        self._G = None
        self._E = None

    def probs(self, j: int) -> list[Fraction]:
        if self.inst.counts is not None:
            c = [int(x) for x in self.inst.counts[j]]
            t = sum(c)
            return [Fraction(x, t) for x in c]
        return list(self.inst.exact_probs[j])

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
                p = self.probs(j)
                a = self.anchor[j]
                for z in self.S[j][1:]:
                    ratio = p[z] / p[a]
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
        return flint.nmod_mat(self.m, self.d, [int(x) % p for x in self.Hint.entries()], p)

    def rank_H_mod(self, p: int) -> int:
        """Rank of the integer embeddings mod p (a lower bound on their rank)."""
        return int(self._H_mod(p).rank())

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
                    for i in range(self.d):
                        h = self.Hint[j, i]
                        if h != 0:
                            total[i] += c * int(h)
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

    def check_primal(self, W: list[list[Fraction]], field_name: str) -> Fraction:
        r"""Check (6a) and (6b) exactly; return :math:`\tfrac12\|W\|_F^2`."""
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
        A = flint.fmpz_mat(self.V, self.m)
        for (v, j), val in a.items():
            A[v, j] = int(val * den)
        P = A * self.Hint  # (V, d) = den * 2^s * aH
        if require_zero_aH:
            _need(P.is_zero(), f"{field_name}: sum_j a_j h_j^T is not 0")
            return mass, Fraction(0)
        sq = sum(int(x) ** 2 for x in P.entries())
        return mass, Fraction(sq, (den * self.hden) ** 2)


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
    basis = sec["null_space_basis"]
    ys = [_integer_vector(b, f"compatibility.null_space_basis[{k}]", ex) for k, b in enumerate(basis)]
    dim_F = sec["dim_F"]
    _need(dim_F + len(ys) == r, f"compatibility.dim_F: {cf.show(dim_F)} and {len(ys)} null-space basis vectors do "
          f"not add up to r = {r}")
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
    if claim is True and "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        _need(_is_prime(p), f"separability.embeddings_rank_modulus: {cf.show(p)} is not a prime")
        _need(ex.m <= ex.d and ex.rank_H_mod(p) == ex.m,
              f"separability.embeddings_rank_modulus: H does not have rank m = {ex.m} mod {p}")
        checks.append(f"separable: H has full row rank (rank m = {ex.m} mod {p}, d >= m), so every logit matrix "
                      "is reachable (Lemma 1)")
    elif claim is True:
        W = cf.matrix_fractions(sec["W"], (ex.V, ex.d), "separability.W")
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
    W = cf.matrix_fractions(sec["W"], (ex.V, ex.d), "svm.W")
    primal = ex.check_primal(W, "svm.W")
    arows = cf.matrix_fractions(sec["a"], (ex.V, ex.m), "svm.a")
    a = {(v, j): x for v, row in enumerate(arows) for j, x in enumerate(row) if x}
    mass, sq = ex.aH_zero_and_sums(a, "svm.a", require_zero_aH=False)
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


def verify_certificate(cert: dict, instance: NTPInstance | None = None) -> Verdict:
    """Check a parsed certificate against ``instance`` (default: the one embedded in it).

    The schema first (:func:`~ntpcert.pipeline.certificate.check_schema`), then the checksum, the
    instance and every section; INVALID at the first failure, with a one-line reason."""
    t0 = time.perf_counter()
    source = _source(instance)
    checks: list[str] = []

    def invalid(reason: str) -> Verdict:
        return Verdict(False, _one_line(reason), tuple(checks), {}, time.perf_counter() - t0, source)

    try:
        _need(type(cert) is dict, "not a certificate object")
        cf.check_schema(cert)
        checks.append("schema")
        _need(cert["checksum"] == cf.checksum(cert), "checksum mismatch: the file was altered or truncated")
        checks.append("checksum")
        inst = _check_instance(cert, instance)
        checks.append(f"instance {cf.show(inst.name)} {inst.fingerprint()[:16]}...: fingerprint, header and names "
                      f"agree with {'the embedded data' if instance is None else 'DATA'}")
        ex = _Exact(inst)
        compat = _check_compatibility(cert["compatibility"], ex, checks)
        sep = _check_separability(cert["separability"], ex, checks)
        svm = _check_svm(cert["svm"], ex, checks)
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
