"""The ``split`` section of a certificate (docs/certificate-format.md, section 11) for tools/ntpcert_check.py,
in exact rationals, with the standard library and python-flint only.

The section lists N, the out-of-support pairs (j, v), v not in S_j, that no D in the recession cone
K = {D : D h_j constant on S_j, t_j - (D h_j)_v >= 0 off S_j} separates; every other out-of-support pair is
in P. Two certificates prove it, both read through ``token_class`` (token v's row of D_P is ``D_P[c(v)]``,
its row of a is ``b[c(v), .]``):

* P: the C x m matrix G = D_P H^T holds every logit, (D_P h_j)_v = G[c(v), j]. From it, each context's
  in-support logits must be equal (t_j) and each margin t_j - G[c(v), j] off S_j must be >= 0, and > 0 on P;
* N: M_c = sum_j b[c, j] h_j, summed entry by entry, must be 0 for every class c < C, used or not (so
  sum_j a_j h_j^T = 0 exactly: its row v is M_{c(v)}); every column sum sum_c n_c b[c, j] (n_c the tokens
  of class c) must be 0; b[c, j] must be <= 0 where class c has a token off S_j, and < 0 at (c(v), j)
  for every listed pair (j, v).

Then for D in K, 0 = <sum_j a_j h_j^T, D> = sum_j sum_{v not in S_j} (-a_{v,j}) (t_j - (D h_j)_v), a sum of
terms >= 0, so every N pair has margin 0 on all of K, and D_P separates every P pair."""

import os
import sys

import flint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # beside ntpcert_check_exact.py
from ntpcert_check_exact import Invalid, dense_q, index, keys, refuse, sparse  # noqa: F401 (Invalid: raised)


def read_pairs(items, S, V):
    """The listed pairs of N: [j, v] with v off S_j, strictly increasing (so none twice)."""
    refuse(type(items) is not list, "split.nonseparable: expected a list of [j, v]")
    pairs = []
    for e, item in enumerate(items):
        field = f"split.nonseparable[{e}]"
        refuse(type(item) is not list or len(item) != 2, f"{field}: expected [j, v]")
        j, v = index(item[0], len(S), field), index(item[1], V, field)
        refuse(v in S[j], f"{field}: token {v} is in the support of context {j}")
        refuse(pairs and (j, v) <= pairs[-1], f"{field}: ({j}, {v}) is not after the pair before it")
        pairs.append((j, v))
    return pairs


def check_split(section, H, supports, V):
    """Check the section for H (m rows of d fmpq), the supports (m lists of tokens) and V tokens; return the
    report lines, or raise Invalid with one line naming the field."""
    m, d = len(H), len(H[0])
    S = [set(s) for s in supports]
    keys(section, "split", ("nonseparable", "token_class", "D_P", "dual"))
    N = read_pairs(section["nonseparable"], S, V)
    rows = section["D_P"]
    refuse(type(rows) is not list or not rows, "split.D_P: expected a non-empty list of rows")
    C = len(rows)
    D = dense_q(rows, C, d, "split.D_P")
    cls = section["token_class"]
    refuse(type(cls) is not list or len(cls) != V, f"split.token_class: expected {V} class indices")
    cls = [index(c, C, f"split.token_class[{v}]") for v, c in enumerate(cls)]
    b = sparse(section["dual"], (C, m), "split.dual")
    refuse(list(b) != sorted(b), "split.dual: entries not in increasing (c, j) order")
    zero = next((cj for cj, x in b.items() if x == 0), None)
    refuse(zero is not None, f"split.dual: the entry at (c, j) = {zero} is 0")

    # P: every logit of D_P, exactly; in-support equalities, every margin >= 0, and > 0 off N.
    Dt = flint.fmpq_mat(C, d, [x for r in D for x in r]).transpose()
    G = (flint.fmpq_mat(m, d, [x for h in H for x in h]) * Dt).tolist()
    in_N, n_out = set(N), 0
    for j, logits in enumerate(G):  # logits[c] = D_P[c] . h_j
        s = supports[j]
        t = logits[cls[s[0]]]
        bad = next((z for z in s if logits[cls[z]] != t), None)
        refuse(bad is not None, f"split.D_P: logits of tokens {s[0]} and {bad} differ in context {j} (D_P not in K)")
        for v in range(V):
            if v not in S[j]:
                n_out += 1
                margin = t - logits[cls[v]]
                refuse(margin < 0, f"split.D_P: margin {margin} < 0 at context {j}, token {v} (D_P not in K)")
                refuse(margin == 0 and (j, v) not in in_N,
                       f"split.D_P: margin 0 at context {j}, token {v}, a pair not listed in split.nonseparable")

    # N: sum_j a_j h_j^T = 0 (per class), column sums 0, signs off the supports, a < 0 on every listed pair.
    n_c, inside = [0] * C, {}
    for v, c in enumerate(cls):
        n_c[c] += 1
    for j, s in enumerate(supports):
        for z in s:
            inside[cls[z], j] = inside.get((cls[z], j), 0) + 1
    M = [[flint.fmpq(0)] * d for _ in range(C)]
    col = [flint.fmpq(0)] * m
    for (c, j), x in b.items():
        M[c] = [y + x * h for y, h in zip(M[c], H[j])]
        col[j] += n_c[c] * x
        refuse(x > 0 and n_c[c] > inside.get((c, j), 0),
               f"split.dual: a = {x} > 0 at class {c}, context {j}, on a token off the support")
    c = next((c for c in range(C) if any(M[c])), None)
    refuse(c is not None, f"split.dual: sum_j b[c, j] h_j != 0 for class c = {c}")
    j = next((j for j in range(m) if col[j]), None)
    refuse(j is not None, f"split.dual: column {j} of a sums to {col[j] if j is not None else 0}, not 0")
    for j, v in N:
        refuse(not b.get((cls[v], j), 0) < 0, f"split.dual: a[{v}, {j}] is not < 0 on the listed pair ({j}, {v})")
    return [f"split: {len(N)} non-separable pairs (each with a < 0 in an exact vanishing combination) and "
            f"{n_out - len(N)} separable ones (D_P in K with every such margin > 0), exactly"]
