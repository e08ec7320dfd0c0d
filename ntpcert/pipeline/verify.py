r"""The independent checker of certificate files.

It re-derives every claim from the instance and the certificate alone, in exact integer and
rational arithmetic (python-flint), with no tolerance, and imports nothing that produced the
certificate (no solver, no LP, no float pipeline): only the data model, the file format and
exact arithmetic. What it checks:

* **instance**: the fingerprint of the instance (embedded, or given with ``--data``) equals the
  recorded one.
* **compatibility, claim true**: the listed vectors lie in :math:`\mathrm{null}(G)`,
  :math:`G = A_{eq}A_{eq}^\top` (equivalently :math:`A_{eq}^\top y = 0`), are independent, and with
  :math:`\mathrm{rank}\,G` (computed here) account for all of it; and :math:`Y^\top E = 0` for the prime-exponent
  matrix E recomputed from the exact probabilities. Optional ``W_star``: :math:`G g_p = E_{:,p}` for every prime.
* **compatibility, claim false**: :math:`G y = 0` and :math:`y^\top E \ne 0`, so :math:`y^\top b \ne 0`.
* **separability, claim true**: the rational W satisfies (6a) and every margin of (6b) is :math:`\ge 1`.
* **separability, claim false**: the Farkas conditions of :mod:`ntpcert.exact.separability`.
* **svm**: W primal feasible, a dual feasible, the gap :math:`\tfrac12\|W\|^2 - D(a)` equals the
  claimed one, :math:`\text{distance\_bound}^2 \ge 2\,\text{gap}`, and the norm bounds bracket
  :math:`[\sqrt{2D(a)}, \|W\|]`.
* **claims**: the summary claims agree with the sections they summarise.
"""

from __future__ import annotations

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
from ntpcert.exact.rational import parse_fraction
from ntpcert.util.logic import and3
from ntpcert.util.numbers import lcm_all


@dataclass(frozen=True)
class Verdict:
    """Outcome of :func:`verify_certificate`.

    Attributes
    ----------
    valid : bool
    reason : str
        Why it is invalid (the first failed check), or ``""``.
    checks : tuple of str
        The checks that passed, in order.
    claims : dict
        The certificate's claims (when it could be read).
    seconds : float
    """

    valid: bool
    reason: str
    checks: tuple[str, ...] = ()
    claims: dict = field(default_factory=dict)
    seconds: float = 0.0


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
                    for q, e in flint.fmpz(ratio.numerator).factor() if ratio.numerator > 1 else []:
                        ex[int(q)] = ex.get(int(q), 0) + int(e)
                    for q, e in flint.fmpz(ratio.denominator).factor() if ratio.denominator > 1 else []:
                        ex[int(q)] = ex.get(int(q), 0) - int(e)
                    ex = {q: e for q, e in ex.items() if e}
                    rows[(j, z)] = ex
                    primes.update(ex)
            self._E = (sorted(primes), rows)
        return self._E

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
def _check_instance(cert: dict, given: NTPInstance | None) -> NTPInstance:
    rec = cert.get("instance")
    _need(isinstance(rec, dict), "instance: missing")
    fp = rec.get("fingerprint")
    _need(isinstance(fp, str), "instance.fingerprint: missing")
    if given is not None:
        _need(given.fingerprint() == fp,
              f"the certificate speaks of instance {fp[:16]}..., but DATA is instance {given.fingerprint()[:16]}...")
        inst = given
    else:
        inst = cf.instance_from_record(rec.get("embedded"))
        _need(inst.fingerprint() == fp,
              f"the embedded instance has fingerprint {inst.fingerprint()[:16]}..., the certificate names {fp[:16]}...")
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


def _check_compatibility(sec: Any, ex: _Exact, checks: list[str]) -> bool:
    _need(isinstance(sec, dict), "compatibility: missing")
    claim = sec.get("claim")
    _need(claim in (True, False), "compatibility.claim: must be true or false")
    primes, Erows = ex.E()
    r = len(ex.rows)

    def as_column(items: Any, name: str) -> flint.fmpz_mat:
        return _integer_column(items, name, ex)[0]

    def yE(col: flint.fmpz_mat) -> dict[int, int]:
        out: dict[int, int] = {}
        for i, key in enumerate(ex.rows):
            c = int(col[i, 0])
            if c:
                for p, e in Erows[key].items():
                    out[p] = out.get(p, 0) + c * e
        return {p: v for p, v in out.items() if v}

    G = ex.G
    if claim is False:
        col = as_column(sec.get("violating_null_vector"), "compatibility.violating_null_vector")
        _need((G * col).is_zero(), "compatibility.violating_null_vector: not in the left null space of A_eq")
        viol = yE(col)
        _need(bool(viol), "compatibility.violating_null_vector: y^T E = 0, so it shows nothing")
        checks.append(f"incompatible: y in null(A_eq^T) with y^T b = {' + '.join(f'{v}*log({p})' for p, v in sorted(viol.items()))} != 0")
        return False
    basis = sec.get("null_space_basis")
    _need(isinstance(basis, list), "compatibility.null_space_basis: missing")
    cols = [as_column(b, f"compatibility.null_space_basis[{k}]") for k, b in enumerate(basis)]
    rank = G.rank() if r else 0
    _need(rank + len(cols) == r, f"compatibility: rank A_eq = {rank} and {len(cols)} basis vectors do not add up to r = {r}")
    if cols:
        Y = flint.fmpz_mat(r, len(cols), [int(c[i, 0]) for i in range(r) for c in cols])
        _need((G * Y).is_zero(), "compatibility.null_space_basis: a vector is not in the left null space of A_eq")
        _need(Y.rank() == len(cols), "compatibility.null_space_basis: the vectors are dependent")
        for k, c in enumerate(cols):
            _need(not yE(c), f"compatibility.null_space_basis[{k}]: y^T E != 0, contradicting the claim")
    dimF = sec.get("dim_F")
    _need(dimF == rank, f"compatibility.dim_F: claims {dimF!r:.20}, rank A_eq is {rank}")
    checks.append(f"compatible: null(A_eq^T) has dimension {len(cols)} and Y^T E = 0 (rank A_eq = {rank})")
    if "W_star" in sec:
        _check_w_star(sec["W_star"], ex, G, primes, Erows, checks)
    return True


def _check_w_star(ws: Any, ex: _Exact, G: flint.fmpz_mat, primes: list[int], Erows: dict, checks: list[str]) -> None:
    _need(isinstance(ws, dict) and isinstance(ws.get("coefficients"), dict), "compatibility.W_star: malformed")
    coeffs = ws["coefficients"]
    needed = {p for p in primes if any(Erows[k].get(p) for k in ex.rows)}
    given = set()
    for key in coeffs:
        _need(isinstance(key, str) and key.isdigit(), f"compatibility.W_star: prime key {key!r:.20}")
        given.add(int(key))
    _need(given == needed, "compatibility.W_star: the primes do not match those of the count ratios")
    scale = ex.hden ** 2
    for p in sorted(needed):
        col, den = _integer_column(coeffs[str(p)], f"compatibility.W_star[{p}]", ex)
        lhs = G * col  # = den * 2^(2s) * G g
        for i, key in enumerate(ex.rows):
            _need(int(lhs[i, 0]) == Erows[key].get(p, 0) * den * scale,
                  f"compatibility.W_star[{p}]: A_eq R_p differs from the exponents of {p} at row {key}")
    checks.append(f"W* = sum_p log(p) R_p verified for {len(needed)} primes")


def _check_separability(sec: Any, ex: _Exact, checks: list[str]) -> bool | None:
    _need(isinstance(sec, dict), "separability: missing")
    claim = sec.get("claim", "missing")
    _need(claim in (True, False, None), "separability.claim: must be true, false or null")
    if claim is True:
        W = cf.matrix_fractions(sec.get("W"), (ex.V, ex.d), "separability.W")
        ex.check_primal(W, "separability.W")
        checks.append("separable: W satisfies (6a) exactly and every margin is >= 1")
    elif claim is False:
        a = cf.sparse_dict(sec.get("ray"), "separability.ray")
        mass, _ = ex.aH_zero_and_sums(a, "separability.ray", require_zero_aH=True)
        _need(mass > 0, "separability.ray: no mass off the supports")
        checks.append("not separable: Farkas ray verified (aH = 0, 1^T a_j = 0, a <= 0 off support, mass > 0)")
    else:
        checks.append("separability undetermined (nothing to check)")
    return claim


def _check_svm(sec: Any, ex: _Exact, checks: list[str]) -> dict | None:
    if sec is None:
        return None
    _need(isinstance(sec, dict), "svm: malformed")
    W = cf.matrix_fractions(sec.get("W"), (ex.V, ex.d), "svm.W")
    primal = ex.check_primal(W, "svm.W")
    arows = cf.matrix_fractions(sec.get("a"), (ex.V, ex.m), "svm.a")
    a = {(v, j): x for v, row in enumerate(arows) for j, x in enumerate(row) if x}
    mass, sq = ex.aH_zero_and_sums(a, "svm.a", require_zero_aH=False)
    dual = mass - sq / 2
    gap = primal - dual
    claimed = parse_fraction(sec.get("gap"))
    _need(gap == claimed, f"svm.gap: claimed {float(claimed):.6g}, the pair gives {float(gap):.6g}")
    _need(gap >= 0, "svm: negative gap, the pair cannot be feasible")
    dist = _float(sec, "distance_bound")
    _need(dist >= 0 and Fraction(dist) ** 2 >= 2 * gap, "svm.distance_bound: smaller than sqrt(2 gap)")
    lo, hi = _float(sec, "norm_lower"), _float(sec, "norm_upper")
    _need(lo <= 0 or Fraction(lo) ** 2 <= 2 * dual, "svm.norm_lower: larger than sqrt(2 D(a))")
    _need(Fraction(hi) ** 2 >= 2 * primal, "svm.norm_upper: smaller than ||W||")
    checks.append(f"NTP-SVM: exact gap {float(gap):.3e}, ||W - W^mm||_F <= {dist:.3e}")
    return {"gap": claimed, "distance_bound": dist, "norm_lower": lo, "norm_upper": hi}


def _float(sec: dict, key: str) -> float:
    x = sec.get(key)
    _need(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x), f"svm.{key}: not a finite number")
    return float(x)


# ---------------------------------------------------------------------------- entry points
def verify_certificate(cert: dict, instance: NTPInstance | None = None) -> Verdict:
    """Check a parsed certificate against ``instance`` (default: the one embedded in it)."""
    t0 = time.perf_counter()
    checks: list[str] = []
    claims = cert.get("claims") if isinstance(cert, dict) else None
    try:
        _need(isinstance(cert, dict), "not a certificate object")
        _need(cert.get("checksum") == cf.checksum(cert), "checksum mismatch: the file was altered or truncated")
        checks.append("checksum")
        inst = _check_instance(cert, instance)
        checks.append(f"instance fingerprint {inst.fingerprint()[:16]}...")
        ex = _Exact(inst)
        _need(bool(cert.get("probabilities_exact_from_floats")) == bool(inst.probs_exact_from_floats),
              "probabilities_exact_from_floats: does not match the instance")
        compat = _check_compatibility(cert.get("compatibility"), ex, checks)
        sep = _check_separability(cert.get("separability"), ex, checks)
        svm = _check_svm(cert.get("svm"), ex, checks)
        _need(isinstance(claims, dict), "claims: missing")
        _need(claims.get("compatible", "missing") == compat, f"claims.compatible: {claims.get('compatible')!r:.10} disagrees with the witness ({compat})")
        _need(claims.get("separable", "missing") == sep, f"claims.separable: {claims.get('separable')!r:.10} disagrees with the witness ({sep})")
        _need(claims.get("entropy_bound_reachable", "missing") == and3(compat, sep),
              "claims.entropy_bound_reachable: does not follow from the compatibility and separability claims")
        cs = claims.get("svm", "missing")
        if svm is None:
            _need(cs is None, "claims.svm: there is no svm section to support it")
        else:
            _need(sep is True, "svm: an NTP-SVM pair is only meaningful for separable data")
            _need(isinstance(cs, dict), "claims.svm: missing")
            _need(parse_fraction(cs.get("gap")) == svm["gap"], "claims.svm.gap: differs from the verified gap")
            for key in ("distance_bound", "norm_lower", "norm_upper"):
                _need(cs.get(key) == svm[key], f"claims.svm.{key}: differs from the svm section")
        checks.append("claims agree with the witnesses")
    except _Invalid as err:
        return Verdict(False, str(err), tuple(checks), claims if isinstance(claims, dict) else {}, time.perf_counter() - t0)
    except CertificateError as err:
        return Verdict(False, f"malformed certificate: {err}", tuple(checks), claims if isinstance(claims, dict) else {},
                       time.perf_counter() - t0)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, OverflowError) as err:
        return Verdict(False, f"malformed certificate: {type(err).__name__}: {err}", tuple(checks),
                       claims if isinstance(claims, dict) else {}, time.perf_counter() - t0)
    return Verdict(True, "", tuple(checks), claims, time.perf_counter() - t0)


def verify_text(text: str, instance: NTPInstance | None = None) -> Verdict:
    """Parse and check certificate text; an unreadable text is an invalid certificate."""
    try:
        cert = cf.loads(text)
    except CertificateError as err:
        return Verdict(False, str(err))
    return verify_certificate(cert, instance)


def verify_file(path, instance: NTPInstance | None = None) -> Verdict:
    """Read and check a certificate file (raises InputError only when the file cannot be read)."""
    try:
        cert = cf.load(path)
    except CertificateError as err:
        return Verdict(False, str(err))
    return verify_certificate(cert, instance)


def verify(certificate: dict | str | os.PathLike, instance: NTPInstance | None = None) -> Verdict:
    """Check a certificate, given as a parsed object or a file path, against ``instance``
    (default: the instance embedded in the certificate).

    >>> from ntpcert import verify
    >>> verify("cert.json").valid        # doctest: +SKIP
    True
    """
    if isinstance(certificate, dict):
        return verify_certificate(certificate, instance)
    return verify_file(certificate, instance)
