r"""Re-check a bottleneck certificate against the decoder, trusting nothing in it.

Every claim is checked in exact arithmetic by code that shares nothing with the search that produced it
(no LP, no screen): the certificate's fingerprint must be the decoder's; every argmaxable token's witness
g (recomputed by the row rule of :mod:`~ntpcert.geometry.bottleneck.format`, or given as a point) must make
it the unique argmax of the exact values :math:`A g` (:func:`ntpcert.exact.dyadic.exact_matmul`, compared
limb by limb); every unargmaxable token's weights must be positive rationals on other tokens with
:math:`\sum_u \lambda_u = 1`, :math:`\sum_u \lambda_u w_u = w_v` and :math:`\sum_u \lambda_u b_u \ge b_v`
exactly (a duplicate: a twin with the same row). No token may be claimed twice, and every token must be
accounted for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import CertificateError
from ntpcert.exact.dyadic import exact_matmul
from ntpcert.geometry.bottleneck.format import FORMAT, VERSION, decoder_sha256, lifted, row_direction

__all__ = ["BottleneckCheck", "check_bottleneck_certificate", "read_certificate"]

#: Witness columns multiplied exactly at a time.
CHECK_BLOCK = 64


@dataclass(frozen=True)
class BottleneckCheck:
    """The outcome of :func:`check_bottleneck_certificate`.

    Attributes
    ----------
    valid : bool
    problems : tuple of str
        Why not (the first few failures), empty when valid.
    argmaxable, unargmaxable, undetermined : tuple of int
        The tokens of each verdict, as checked (only when valid).
    """

    valid: bool
    problems: tuple[str, ...] = ()
    argmaxable: tuple[int, ...] = ()
    unargmaxable: tuple[int, ...] = ()
    undetermined: tuple[int, ...] = ()

    def to_json(self) -> dict:
        return {"valid": self.valid, "problems": list(self.problems), "argmaxable": len(self.argmaxable),
                "unargmaxable": list(self.unargmaxable), "undetermined": list(self.undetermined)}


def read_certificate(path: str | os.PathLike) -> dict:
    """A certificate file's JSON object (strict JSON: no NaN, no repeated keys)."""
    from ntpcert.errors import InputError
    from ntpcert.util.strict_json import strict_loads

    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            return strict_loads(f.read())
    except (OSError, ValueError) as err:
        raise InputError(f"certificate: {p!r} is not a readable JSON file ({' '.join(str(err).split())})") from None


class _Fail(Exception):
    pass


def _ints(xs: Any, what: str, low: int, high: int) -> np.ndarray:
    if not isinstance(xs, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in xs):
        raise _Fail(f"{what}: not a list of integers")
    a = np.asarray(xs, dtype=np.int64) if xs else np.zeros(0, dtype=np.int64)
    if a.size and (a.min() < low or a.max() > high):
        raise _Fail(f"{what}: a value outside [{low}, {high}]")
    return a


def _floats(xs: Any, n: int, what: str) -> np.ndarray:
    if not isinstance(xs, list) or len(xs) != n or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                          for x in xs):
        raise _Fail(f"{what}: not a list of {n} numbers")
    a = np.asarray(xs, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise _Fail(f"{what}: a value is not finite")
    return a


def _unique_tops(A: np.ndarray, G: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each column j, whether row targets[j] of the exact A @ G[:, j] exceeds every other row."""
    lm = exact_matmul(A, G)
    k = G.shape[1]
    cols = np.arange(k)
    undecided = np.ones((A.shape[0], k), dtype=bool)
    below = np.zeros((A.shape[0], k), dtype=bool)
    for L in lm.limbs:  # normalised limbs: values compare lexicographically, most significant first
        diff = np.sign(L - L[targets, cols][None, :])
        below |= undecided & (diff < 0)
        undecided &= diff == 0
    below[targets, cols] = True  # the target itself
    return below.all(axis=0)


def check_bottleneck_certificate(cert: dict, W: Any, b: Any = None) -> BottleneckCheck:
    """Check a certificate object (:meth:`BottleneckResult.certificate`, or read with :func:`read_certificate`)
    against the decoder ``W`` (V, d) and bias ``b`` (V,) or None. Never raises on a bad certificate: a
    malformed or false one is invalid, with the reason."""
    try:
        return _check(cert, W, b)
    except _Fail as err:
        return BottleneckCheck(False, (str(err),))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, CertificateError) as err:
        return BottleneckCheck(False, (f"malformed certificate ({type(err).__name__}: {err})",))


def _check(cert: dict, W: Any, b: Any) -> BottleneckCheck:
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    V, d = W.shape
    if not isinstance(cert, dict) or cert.get("format") != FORMAT or cert.get("version") != VERSION:
        raise _Fail(f"not a {FORMAT} certificate of version {VERSION}")
    dec = cert["decoder"]
    if dec.get("V") != V or dec.get("d") != d or dec.get("bias") is not (b is not None):
        raise _Fail(f"the certificate speaks of a decoder of V = {dec.get('V')}, d = {dec.get('d')}, bias = "
                    f"{dec.get('bias')}, not this one (V = {V}, d = {d}, bias = {b is not None})")
    if dec.get("sha256") != decoder_sha256(W, b):
        raise _Fail("the decoder's SHA-256 differs from the certificate's")
    A = lifted(W, b)
    claimed: dict[int, str] = {}

    def claim(v: int, what: str) -> None:
        if v in claimed:
            raise _Fail(f"token {v} is claimed twice ({claimed[v]} and {what})")
        claimed[v] = what

    yes: list[int] = []
    no: list[int] = []
    # argmaxable: row witnesses (recomputed) and points
    rows = cert["rows"]
    toks = _ints(rows["tokens"], "rows.tokens", 0, V - 1)
    srcs = _ints(rows["sources"], "rows.sources", 0, V - 1)
    bits = _ints(rows["bits"], "rows.bits", 0, 40)
    if not (toks.size == srcs.size == bits.size):
        raise _Fail("rows: tokens, sources and bits differ in length")
    c = None
    if b is not None:
        c = _ints(rows["c"], "rows.c", 1, 1 << 62)
        if c.size != toks.size:
            raise _Fail("rows: c differs in length")
    center = _floats(cert["center"], d, "center")
    points = cert["points"]
    ptoks = np.asarray([p["token"] for p in points], dtype=np.int64)
    if ptoks.size and (ptoks.min() < 0 or ptoks.max() >= V):
        raise _Fail("points: a token out of range")
    P = (np.stack([_floats(p["x"], A.shape[1], f"points[{i}].x") for i, p in enumerate(points)], axis=1)
         if points else np.zeros((A.shape[1], 0)))
    if b is not None and P.shape[1] and np.any(P[-1] <= 0):
        raise _Fail("points: a bias entry s <= 0 (h = x / s needs s > 0)")
    for v in toks.tolist() + ptoks.tolist():
        claim(v, "argmaxable")
    for s0 in range(0, toks.size, CHECK_BLOCK):
        sl = slice(s0, s0 + CHECK_BLOCK)
        G = row_direction(W, center, srcs[sl], bits[sl], None if c is None else c[sl])
        zero = ~np.any(G, axis=0)
        ok = ~zero & _unique_tops(A, G, toks[sl])
        if not ok.all():
            raise _Fail(f"token {int(toks[sl][~ok][0])}: its row witness does not make it the unique argmax")
    for s0 in range(0, ptoks.size, CHECK_BLOCK):
        sl = slice(s0, s0 + CHECK_BLOCK)
        ok = _unique_tops(A, P[:, sl], ptoks[sl])
        if not ok.all():
            raise _Fail(f"token {int(ptoks[sl][~ok][0])}: its point does not make it the unique argmax")
    yes += toks.tolist() + ptoks.tolist()
    if cert["alone"] is True:
        if V != 1:
            raise _Fail("alone: claimed for a decoder of more than one token")
        claim(0, "alone")
        yes.append(0)
    # unargmaxable
    for item in cert["duplicates"]:
        v, t = int(item["token"]), int(item["twin"])
        if not (0 <= v < V and 0 <= t < V) or v == t or not np.array_equal(A[v], A[t]):
            raise _Fail(f"token {v}: its twin {t} is not an identical row")
        claim(v, "duplicate")
        no.append(v)
    for item in cert["combinations"]:
        v = int(item["token"])
        if not 0 <= v < V:
            raise _Fail("combinations: a token out of range")
        claim(v, "combination")
        _check_combination(W, b, v, item)
        no.append(v)
    und = [int(item["token"]) for item in cert["undetermined"]]
    for v in und:
        if not 0 <= v < V:
            raise _Fail("undetermined: a token out of range")
        claim(v, "undetermined")
    if len(claimed) != V:
        raise _Fail(f"{V - len(claimed)} tokens have no verdict in the certificate")
    return BottleneckCheck(True, (), tuple(sorted(yes)), tuple(sorted(no)), tuple(sorted(und)))


def _check_combination(W: np.ndarray, b: np.ndarray | None, v: int, item: dict) -> None:
    from ntpcert.certificate.jsonio import unlimited_int_digits

    support, nums, den = item["support"], item["numerators"], item["denominator"]
    if not isinstance(support, list) or not isinstance(nums, list) or len(support) != len(nums) or not support:
        raise _Fail(f"token {v}: support and numerators must be non-empty lists of one length")
    S = [int(u) for u in support]
    if len(set(S)) != len(S) or v in S or any(not 0 <= u < W.shape[0] for u in S):
        raise _Fail(f"token {v}: its support repeats a token, holds the token itself, or is out of range")
    if not all(isinstance(q, str) and q.isdigit() and len(q) < 1_000_000 for q in nums + [den]):
        raise _Fail(f"token {v}: numerators and denominator must be non-negative integers written as text")
    with unlimited_int_digits():
        lam, D = [int(q) for q in nums], int(den)
    if any(x <= 0 for x in lam) or D <= 0 or sum(lam) != D:
        raise _Fail(f"token {v}: the weights are not positive with sum 1")
    rows = S + [v]
    cols = [W[rows, j] for j in range(W.shape[1])] + ([b[rows]] if b is not None else [])
    for j, col in enumerate(cols):
        N = _dyadic_ints(col)  # exact values of one coordinate, as integers on a common power of two
        total = sum(x * n for x, n in zip(lam, N[:-1]))
        if j < W.shape[1] and total != D * N[-1]:
            raise _Fail(f"token {v}: the weighted rows differ from its row in coordinate {j}")
        if j == W.shape[1] and total < D * N[-1]:
            raise _Fail(f"token {v}: the weighted biases are below its bias")


def _dyadic_ints(x: np.ndarray) -> list[int]:
    """Integers N with x == N * 2**-K for one K (float64 values are dyadic)."""
    ratios = [float(t).as_integer_ratio() for t in x]
    K = max(q.bit_length() - 1 for _, q in ratios)
    return [p << (K - (q.bit_length() - 1)) for p, q in ratios]
