"""Standalone check of a certificate's ``split`` section (standard library + python-flint, no ntpcert).

``check_split(section, H, supports, V=None)`` re-derives, in exact rationals, that the section's N pairs
are exactly the implicit equalities of the recession cone K and every other out-of-support pair is
separable (docs/certificate-format.md, section ``split``):

* D_P (token v's row ``D_P[token_class[v]]``) lies in K: ``D h_j`` is constant on S_j, every margin
  ``(d_z - d_v).h_j`` with ``v`` outside S_j is >= 0, and > 0 on every pair not listed in N;
* a (``a[v, j] = dual[(token_class[v], j)]``, 0 when absent) has ``sum_j a[v, j] h_j = 0`` for every v,
  ``sum_v a[v, j] = 0`` for every j, ``a[v, j] <= 0`` outside S_j, and ``a[v, j] < 0`` on every N pair.

For D in K, ``0 = sum_j a_j . D h_j = sum (-a[v, j]) margin_jv(D)``, so every pair where a < 0 has margin 0
in all of K; D_P shows every other pair separable. ``H`` is the list of m rows of d ``flint.fmpq``;
``supports`` a list of m lists of token indices. Returns the report lines, or raises ``ValueError`` with
one line naming the field.
"""

from __future__ import annotations

import re

import flint

_NUM = re.compile(r"-?(0|[1-9][0-9]*)(/[1-9][0-9]*)?")


def _int(field, x, lo, hi):
    if type(x) is not int or not lo <= x < hi:
        raise ValueError(f"split.{field}: {x!r} is not an integer in [{lo}, {hi})")
    return x


def _q(field, s):
    if not isinstance(s, str) or not _NUM.fullmatch(s):
        raise ValueError(f"split.{field}: {str(s)[:40]!r} is not an exact rational string 'p' or 'p/q'")
    p, _, q = s.partition("/")
    val = flint.fmpq(int(p), int(q) if q else 1)
    if str(val) != s:
        raise ValueError(f"split.{field}: {s[:40]!r} is not in lowest terms (canonical: {str(val)[:40]!r})")
    return val


def _list(field, x, n=None):
    if not isinstance(x, list) or (n is not None and len(x) != n):
        want = "a list" if n is None else f"a list of {n} entries"
        raise ValueError(f"split.{field}: expected {want}, got {type(x).__name__}"
                         + (f" of {len(x)}" if isinstance(x, list) else ""))
    return x


def check_split(section, H, supports, V=None):
    """The lines of the report, or ValueError naming the first failure (module doc)."""
    if not isinstance(section, dict):
        raise ValueError("split: expected an object")
    keys = {"nonseparable", "token_class", "D_P", "dual"}
    if set(section) != keys:
        raise ValueError(f"split: keys {sorted(section)} differ from {sorted(keys)}")
    m = len(H)
    d = len(H[0]) if m else 0
    tc = _list("token_class", section["token_class"])
    if V is None:
        V = len(tc)
    if len(tc) != V:
        raise ValueError(f"split.token_class: {len(tc)} entries, the instance has V = {V} tokens")
    D_rows = _list("D_P", section["D_P"])
    C = len(D_rows)
    cls = [_int(f"token_class[{v}]", c, 0, C) for v, c in enumerate(tc)]
    D = [[_q(f"D_P[{c}][{i}]", x) for i, x in enumerate(_list(f"D_P[{c}]", row, d))] for c, row in enumerate(D_rows)]
    S = [set(s) for s in supports]
    N = set()
    prev = None
    for k, p in enumerate(_list("nonseparable", section["nonseparable"])):
        _list(f"nonseparable[{k}]", p, 2)
        j, v = _int(f"nonseparable[{k}][0]", p[0], 0, m), _int(f"nonseparable[{k}][1]", p[1], 0, V)
        if prev is not None and (j, v) <= prev:
            raise ValueError(f"split.nonseparable[{k}]: {p} is not after {list(prev)} (sorted, no repeats)")
        if v in S[j]:
            raise ValueError(f"split.nonseparable[{k}]: token {v} is in the support of context {j}")
        prev = (j, v)
        N.add((j, v))
    dual = {}
    prev = None
    for k, e in enumerate(_list("dual", section["dual"])):
        _list(f"dual[{k}]", e, 3)
        c, j = _int(f"dual[{k}][0]", e[0], 0, C), _int(f"dual[{k}][1]", e[1], 0, m)
        if prev is not None and (c, j) <= prev:
            raise ValueError(f"split.dual[{k}]: ({c}, {j}) is not after {prev} (sorted, no repeats)")
        prev = (c, j)
        val = _q(f"dual[{k}][2]", e[2])
        if val == 0:
            raise ValueError(f"split.dual[{k}]: a zero entry (entries list the non-zeros)")
        dual[(c, j)] = val
    # D_P in K, every non-N margin > 0
    Hm = flint.fmpq_mat(m, d, [x for row in H for x in row]) if m and d else None
    L = (flint.fmpq_mat(C, d, [x for row in D for x in row]) * Hm.transpose()) if Hm is not None and C else None
    zero = flint.fmpq(0)

    def logit(c, j):
        return L[c, j] if L is not None else zero

    n_p = 0
    for j in range(m):
        sj = sorted(S[j])
        t = logit(cls[sj[0]], j)
        for z in sj[1:]:
            if logit(cls[z], j) != t:
                raise ValueError(f"split.D_P: D_P h_{j} differs on the support of context {j} (tokens {sj[0]}, {z}): "
                                 "D_P is not in K")
        for v in range(V):
            if v in S[j]:
                continue
            mar = t - logit(cls[v], j)
            if (j, v) in N:
                if mar < 0:
                    raise ValueError(f"split.D_P: margin {mar} < 0 at the pair ({j}, {v}): D_P is not in K")
            elif mar <= 0:
                raise ValueError(f"split.D_P: margin {mar} <= 0 at the pair ({j}, {v}), which is not listed as "
                                 "non-separable: not shown separable")
            else:
                n_p += 1
    # the N-certificate
    size = [0] * C
    for c in cls:
        size[c] += 1
    colsum = [flint.fmpq(0)] * m
    comb = {}
    for (c, j), val in dual.items():
        colsum[j] += size[c] * val
        acc = comb.setdefault(c, [flint.fmpq(0)] * d)
        for i in range(d):
            acc[i] += val * H[j][i]
    for j in range(m):
        if colsum[j] != 0:
            raise ValueError(f"split.dual: sum_v a[v, {j}] = {colsum[j]}, not 0")
    for c, acc in comb.items():
        if any(x != 0 for x in acc):
            raise ValueError(f"split.dual: sum_j a[v, j] h_j is not 0 for the tokens of class {c}")
    for j in range(m):
        for v in range(V):
            if v in S[j]:
                continue
            val = dual.get((cls[v], j), zero)
            if val > 0:
                raise ValueError(f"split.dual: a[{v}, {j}] = {val} > 0 outside the support")
            if (j, v) in N and not val < 0:
                raise ValueError(f"split.dual: a[{v}, {j}] = {val} is not < 0 at the non-separable pair ({j}, {v})")
    return [f"split: {len(N)} non-separable pairs (each with a < 0 in an exact vanishing combination) and "
            f"{n_p} separable ones (D_P in K with every such margin > 0), exactly"]
