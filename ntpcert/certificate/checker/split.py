r"""The independent check of a certificate's optional ``split`` section (docs/certificate-format.md).

The section claims which out-of-support pairs (j, v) are implicit equalities of the recession cone

.. math:: K = \{D : D h_j \text{ constant on } S_j,\ (d_{z_j} - d_v)^\top h_j \ge 0\ (v \notin S_j)\}

(the list N) and that every other out-of-support pair is separable (P). Two exact rational witnesses:

* :math:`D_P` (token v's row ``D_P[token_class[v]]``) lies in K, with every margin >= 0 and > 0 on every
  pair not in N: each such pair is in P;
* a (:math:`a_{v,j}` = ``dual[(token_class[v], j)]``, 0 when absent) has :math:`\sum_j a_{v,j} h_j = 0`
  for every v, :math:`\sum_v a_{v,j} = 0` for every j, :math:`a_{v,j} \le 0` off :math:`S_j` and
  :math:`a_{v,j} < 0` on every pair of N. For D in K,
  :math:`0 = \sum_j a_j^\top D h_j = \sum_{j, v \notin S_j} (-a_{v,j})\,\mathrm{margin}_{jv}(D)`, a sum
  of non-negative terms, so every pair of N has margin 0 in all of K: it is not in P.

So N is exactly the set of implicit equalities and P its complement. A non-empty N shows (6)
infeasible, so the section is refused beside a true separability claim, and an empty one beside a
false claim. Arithmetic is python-flint ``fmpq`` throughout (H as the dyadic rationals it is); this
module imports nothing that produced the certificate. ``tools/ntpcert_check_split.py`` is the same
check for the standalone checker.
"""

from __future__ import annotations

import re
from typing import Any

import flint

from ntpcert.certificate.checker.common import Invalid

_NUM = re.compile(r"-?(0|[1-9][0-9]*)(/[1-9][0-9]*)?")


def _int(field, x, lo, hi):
    if type(x) is not int or not lo <= x < hi:
        raise Invalid(f"split.{field}: {x!r} is not an integer in [{lo}, {hi})")
    return x


def _q(field, s):
    if not isinstance(s, str) or not _NUM.fullmatch(s):
        raise Invalid(f"split.{field}: {str(s)[:40]!r} is not an exact rational string 'p' or 'p/q'")
    p, _, q = s.partition("/")
    val = flint.fmpq(int(p), int(q) if q else 1)
    if str(val) != s:
        raise Invalid(f"split.{field}: {s[:40]!r} is not in lowest terms (canonical: {str(val)[:40]!r})")
    return val


def _list(field, x, n=None):
    if not isinstance(x, list) or (n is not None and len(x) != n):
        want = "a list" if n is None else f"a list of {n} entries"
        raise Invalid(f"split.{field}: expected {want}, got {type(x).__name__}"
                         + (f" of {len(x)}" if isinstance(x, list) else ""))
    return x


def _check(section, H, supports, V=None):
    """The lines of the report, or Invalid naming the first failure (module doc)."""
    if not isinstance(section, dict):
        raise Invalid("split: expected an object")
    keys = {"nonseparable", "token_class", "D_P", "dual"}
    if set(section) != keys:
        raise Invalid(f"split: keys {sorted(section)} differ from {sorted(keys)}")
    m = len(H)
    d = len(H[0]) if m else 0
    tc = _list("token_class", section["token_class"])
    if V is None:
        V = len(tc)
    if len(tc) != V:
        raise Invalid(f"split.token_class: {len(tc)} entries, the instance has V = {V} tokens")
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
            raise Invalid(f"split.nonseparable[{k}]: {p} is not after {list(prev)} (sorted, no repeats)")
        if v in S[j]:
            raise Invalid(f"split.nonseparable[{k}]: token {v} is in the support of context {j}")
        prev = (j, v)
        N.add((j, v))
    dual = {}
    prev = None
    for k, e in enumerate(_list("dual", section["dual"])):
        _list(f"dual[{k}]", e, 3)
        c, j = _int(f"dual[{k}][0]", e[0], 0, C), _int(f"dual[{k}][1]", e[1], 0, m)
        if prev is not None and (c, j) <= prev:
            raise Invalid(f"split.dual[{k}]: ({c}, {j}) is not after {prev} (sorted, no repeats)")
        prev = (c, j)
        val = _q(f"dual[{k}][2]", e[2])
        if val == 0:
            raise Invalid(f"split.dual[{k}]: a zero entry (entries list the non-zeros)")
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
                raise Invalid(f"split.D_P: D_P h_{j} differs on the support of context {j} (tokens {sj[0]}, {z}): "
                                 "D_P is not in K")
        for v in range(V):
            if v in S[j]:
                continue
            mar = t - logit(cls[v], j)
            if (j, v) in N:
                if mar < 0:
                    raise Invalid(f"split.D_P: margin {mar} < 0 at the pair ({j}, {v}): D_P is not in K")
            elif mar <= 0:
                raise Invalid(f"split.D_P: margin {mar} <= 0 at the pair ({j}, {v}), which is not listed as "
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
            raise Invalid(f"split.dual: sum_v a[v, {j}] = {colsum[j]}, not 0")
    for c, acc in comb.items():
        if any(x != 0 for x in acc):
            raise Invalid(f"split.dual: sum_j a[v, j] h_j is not 0 for the tokens of class {c}")
    for j in range(m):
        for v in range(V):
            if v in S[j]:
                continue
            val = dual.get((cls[v], j), zero)
            if val > 0:
                raise Invalid(f"split.dual: a[{v}, {j}] = {val} > 0 outside the support")
            if (j, v) in N and not val < 0:
                raise Invalid(f"split.dual: a[{v}, {j}] = {val} is not < 0 at the non-separable pair ({j}, {v})")
    return [f"split: {len(N)} non-separable pairs (each with a < 0 in an exact vanishing combination) and "
            f"{n_p} separable ones (D_P in K with every such margin > 0), exactly"]


def check_split_section(cert: dict, ex: Any, sep: bool | None, checks: list[str]) -> str:
    """Check ``cert["split"]`` when present (module doc) against the checker's exact instance ``ex``
    and the separability claim ``sep`` already checked: ``""`` or the reason (one line)."""
    if "split" not in cert:
        return ""
    sec = cert["split"]
    inst = ex.inst
    H = [[flint.fmpq(*float(x).as_integer_ratio()) for x in row] for row in inst.embeddings.tolist()]
    try:
        lines = _check(sec, H, ex.S, ex.V)
    except Invalid as err:
        return str(err)
    n_N = len(sec["nonseparable"])
    if n_N and sep is True:
        return f"split: {n_N} non-separable pairs, but the separability claim is true"
    if not n_N and sep is False:
        return "split: no non-separable pair, but the separability claim is false"
    checks.extend(lines)
    return ""
