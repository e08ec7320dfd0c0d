#!/usr/bin/env python3
"""ntpcert_check CERT: check every section of an ntpcert certificate (docs/certificate-format.md, format 1)
against the instance embedded in it, in exact arithmetic, with the standard library and python-flint only
(nothing from ntpcert, so no code is shared with the writer): its three claims, NTP-compatibility (4),
NTP-separability (6) and "the entropy bound is reachable", then the fingerprint and names, dim F and W*, the
NTP-SVM pair and its bounds, the excess bracket (in arb balls), the why-not culprits and the source record.
Exit status: 0 when every claim and section checks (null claims as undetermined); 1 with one line
``INVALID: <field>: <reason>`` naming the first that fails; 2 when CERT cannot be read."""

import hashlib
import json
import math
import re
import struct
import sys

import flint

FORMAT, VERSION = "ntpcert-certificate", 1
MAX_BYTES = 256 * 2**20
MAX_INT_DIGITS = 4300
MAX_SPARSE_CELLS = 10**8
#: A prime for ranks mod p when the certificate names none (a rank mod p is at most the rank over Q).
DEFAULT_PRIME = 2**61 - 1
RATIONAL = re.compile(r"(-?(?:0|[1-9][0-9]*))(?:/([1-9][0-9]*))?\Z")
TOP = {"format", "version", "instance", "probabilities_exact_from_floats", "claims", "compatibility", "separability",
       "svm", "checksum"}
TOP_OPTIONAL = {"excess", "why_not_separable", "why_not_compatible", "source"}
#: A bound x of an exact sqrt(Q) may differ from it by a relative 2^-40 (and 2^-1000 absolute, on the squares).
SLACK, TINY = flint.fmpq(1, 2**40), flint.fmpq(1, 2**1000)
#: Bits of the arb balls of the excess bracket.
PREC = 192
MAX_WHY_NOT_CELLS = 2_000_000


class Invalid(Exception):
    """A certificate that does not prove what it claims; the message names the field."""


def refuse(condition, message):
    if condition:
        raise Invalid(message)


# ------------------------------------------------------------------------------------------ reading
def _pairs(pairs):
    out = {}
    for key, value in pairs:
        refuse(key in out, f"{key}: repeated key")
        out[key] = value
    return out


def _int(text):
    refuse(len(text.lstrip("-")) > MAX_INT_DIGITS,
           f"number: an integer literal of {len(text)} digits is over the cap of {MAX_INT_DIGITS}")
    return int(text)


def parse(data):
    """The certificate as a dict, parsed strictly: no repeated key, no NaN or Infinity, bounded integers."""
    refuse(len(data) > MAX_BYTES, f"file: over the cap of {MAX_BYTES} bytes")
    try:
        cert = json.loads(data.decode("utf-8"), object_pairs_hook=_pairs, parse_int=_int,
                          parse_constant=lambda name: refuse(True, f"number: {name} is not a finite number"),
                          parse_float=lambda text: exact_float(float(text), "number"))
    except (ValueError, UnicodeDecodeError) as err:
        raise Invalid(f"file: not JSON ({err})") from None
    refuse(type(cert) is not dict, "file: not a JSON object")
    return cert


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def q(text, field):
    """A canonical rational string "p" or "p/q" (lowest terms, q > 1) as an fmpq."""
    m = RATIONAL.match(text) if type(text) is str else None
    refuse(m is None or text == "-0", f"{field}: {str(text)[:40]!r} is not a canonical rational")
    num, den = flint.fmpz(m.group(1)), flint.fmpz(m.group(2) or 1)
    refuse(m.group(2) is not None and (den == 1 or num.gcd(den) != 1), f"{field}: {text[:40]!r} is not in lowest terms")
    return flint.fmpq(num, den)


def exact_float(x, field):
    refuse(not math.isfinite(x), f"{field}: {x} is not finite")
    return x


def count(x, field):
    refuse(type(x) is not int, f"{field}: {str(x)[:40]!r} is not an integer count")
    return flint.fmpq(x)


def exact(x, field):
    """A JSON number (int, or a float taken as the dyadic rational it is) as an fmpq."""
    if type(x) is int:
        return flint.fmpq(x)
    if type(x) is float:
        return flint.fmpq(*exact_float(x, field).as_integer_ratio())
    raise Invalid(f"{field}: {str(x)[:40]!r} is not a finite number")


def keys(obj, field, required, optional=()):
    refuse(type(obj) is not dict, f"{field}: expected an object")
    missing, extra = sorted(set(required) - set(obj)), sorted(set(obj) - set(required) - set(optional))
    refuse(missing, f"{field}.{(missing or [''])[0]}: missing")
    refuse(extra, f"{field}.{(extra or [''])[0]}: unknown key")


def flag(x, field):
    """true, false or null, type-exactly (1 and 0 are not booleans)."""
    refuse(x is not None and type(x) is not bool, f"{field}: {x!r} is not true, false or null")
    return x


def index(x, bound, field):
    refuse(type(x) is not int or not 0 <= x < bound, f"{field}: {str(x)[:40]} is not an index below {bound}")
    return x


def sparse(items, bounds, field, value=None):
    """[[i, k, "p/q"], ...] with indices in range, as a dict (i, k) -> fmpq; no repeated index."""
    value = value or q
    refuse(type(items) is not list, f"{field}: expected a list")
    out = {}
    for e, item in enumerate(items):
        refuse(type(item) is not list or len(item) != 3, f"{field}[{e}]: expected [i, k, value]")
        i, k = index(item[0], bounds[0], f"{field}[{e}]"), index(item[1], bounds[1], f"{field}[{e}]")
        refuse((i, k) in out, f"{field}[{e}]: index ({i}, {k}) repeated")
        out[(i, k)] = value(item[2], f"{field}[{e}]")
    return out


# ------------------------------------------------------------------------------------------ the instance
class Instance:
    """H (m x d, exact), the supports S_j, the positive in-support values c_{j,z} (counts or
    probabilities: only their ratios matter), the anchors z_j = min S_j and the equality rows (j, z)."""

    def __init__(self, cert):
        head, rec = cert["instance"], cert["instance"]["embedded"]
        keys(head, "instance", ("fingerprint", "m", "d", "V", "embedded"))
        refuse(type(rec) is not dict, "instance.embedded: expected an object")
        law = "counts" if "counts" in rec else "counts_sparse" if "counts_sparse" in rec else "probs"
        need = {"counts": ("name", "counts"), "counts_sparse": ("name", "V", "counts_sparse"),
                "probs": ("name", "probs", "weights")}[law]
        dense_h = "embeddings" in rec
        need += ("embeddings",) if dense_h else ("embeddings_shape", "embeddings_sparse")
        keys(rec, "instance.embedded", need, ("token_names", "context_names"))
        emb = rec["embeddings"] if dense_h else rec["embeddings_shape"]
        refuse(not dense_h and (type(emb) is not list or len(emb) != 2),
               "instance.embedded.embeddings_shape: not a pair")
        self.m = (len(emb) if type(emb) is list else 0) if dense_h else emb[0]
        self.d = (len(emb[0]) if self.m and type(emb[0]) is list else 0) if dense_h else emb[1]
        first = rec[law][0] if law != "counts_sparse" and rec[law] else None
        self.V = rec["V"] if law == "counts_sparse" else (len(first) if type(first) is list else 0)
        for key in ("m", "d", "V"):
            refuse(type(head[key]) is not int or head[key] != getattr(self, key) or head[key] < 1,
                   f"instance.{key}: claims {head[key]!r}, the embedded instance has {getattr(self, key)}")
        m, d, V = self.m, self.d, self.V
        self.H = [dict() for _ in range(m)]  # h_j as {i: nonzero entry}
        if dense_h:
            refuse(any(type(r) is not list or len(r) != d for r in emb),
                   f"instance.embedded.embeddings: expected {m} rows of {d} numbers")
            for j, r in enumerate(emb):
                self.H[j] = {i: x for i, x in enumerate(exact(x, f"instance.embedded.embeddings[{j}]") for x in r) if x}
        else:
            refuse(m * d > MAX_SPARSE_CELLS, f"instance.embedded.embeddings_shape: {m * d} cells, over the cap")
            entries = sparse(rec["embeddings_sparse"], (m, d), "instance.embedded.embeddings_sparse", exact)
            refuse(list(entries) != sorted(entries) or not all(entries.values()),
                   "instance.embedded.embeddings_sparse: entries not nonzero and in increasing (j, i) order")
            for (j, i), x in entries.items():
                self.H[j][i] = x
        self.cols = [dict() for _ in range(d)]  # column i as {j: entry}
        for j, h in enumerate(self.H):
            for i, x in h.items():
                self.cols[i][j] = x
        from_floats = flag(cert["probabilities_exact_from_floats"], "probabilities_exact_from_floats")
        refuse(from_floats is None or (from_floats and law != "probs"),
               f"probabilities_exact_from_floats: {from_floats!r} does not describe the embedded data")
        vals = [dict() for _ in range(m)]
        if law == "counts_sparse":
            refuse(m * V > MAX_SPARSE_CELLS,
                   f"instance.embedded.counts_sparse: m V = {m * V} cells, over the cap of {MAX_SPARSE_CELLS}")
            entries = sparse(rec["counts_sparse"], (m, V), "instance.embedded.counts_sparse", count)
            refuse(list(entries) != sorted(entries),
                   "instance.embedded.counts_sparse: the entries are not in increasing (j, t) order")
            for (j, z), c in entries.items():
                refuse(not c > 0, f"instance.embedded.counts_sparse: ({j}, {z}) holds {c}, not a positive integer")
                vals[j][z] = c
        else:
            rows, field = rec[law], f"instance.embedded.{law}"
            refuse(type(rows) is not list or len(rows) != m or any(type(r) is not list or len(r) != V for r in rows),
                   f"{field}: expected {m} rows of {V}")
            for j, row in enumerate(rows):
                for z, c in enumerate(row):
                    x = (count if law == "counts" else exact if from_floats else q)(c, f"{field}[{j}]")
                    refuse(x < 0, f"{field}[{j}][{z}]: {x} is negative")
                    if x > 0:
                        vals[j][z] = x
        for j in range(m):
            refuse(not vals[j], f"instance.embedded: context {j} has an empty support")
        self.vals, self.counts = vals, law != "probs"
        self.S = [set(v) for v in vals]
        self.anchor = [min(s) for s in self.S]
        self.rows = [(j, z) for j in range(m) for z in sorted(self.S[j]) if z != self.anchor[j]]

    def dense(self, rows=None, cols=None):
        rows, cols = range(self.m) if rows is None else rows, range(self.d) if cols is None else cols
        return [[self.H[j].get(i, flint.fmpq(0)) for i in cols] for j in rows]

    def rank_H(self, p):
        return rank_mod(self.dense(), p) if self.m <= self.d else None

    def add(self, acc, v, x, j):
        """acc[v] += x h_j, acc a dict of rows {i: value}."""
        row = acc.setdefault(v, {})
        for i, h in self.H[j].items():
            row[i] = row.get(i, 0) + x * h

    def transpose_apply(self, y, field):
        """Whether A_eq^T y = 0, where A_eq^T y = sum over rows (j, z) of y_{jz} (e_z - e_{z_j}) h_j^T."""
        acc = {}
        for (j, z), c in y.items():
            refuse(z not in self.S[j] or z == self.anchor[j], f"{field}: ({j}, {z}) is not an equality row")
            self.add(acc, z, c, j)
            self.add(acc, self.anchor[j], -c, j)
        return not any(any(r.values()) for r in acc.values())

    def logits(self, W):
        """W H^T exactly, as V x m fmpq rows, from W given as {v: {i: value}}."""
        L = [[flint.fmpq(0)] * self.m for _ in range(self.V)]
        for v, row in W.items():
            for i, w in row.items():
                for j, h in self.cols[i].items():
                    L[v][j] += w * h
        return L


def integer_row(xs):
    """A list of fmpq times the least common denominator of its entries (a positive scaling of a row keeps
    every rank)."""
    s = flint.fmpz(1)
    for x in xs:
        s = s * x.q // s.gcd(x.q)
    return [int(x * s) for x in xs]


def rank_mod(rows, p):
    """The rank mod the prime p of a matrix of fmpq rows, each scaled to integers: at most the rank over Q."""
    return flint.nmod_mat([[x % p for x in integer_row(r)] for r in rows], p).rank() if rows else 0


def is_prime(p):
    return type(p) is int and p > 1 and bool(flint.fmpz(p).is_prime())


def exponents(inst, primes):
    """E: for every equality row, the exponent of each prime in c_{j,z} / c_{j,z_j}, where c_{j,.} are the
    counts or, for probabilities, the coprime integers proportional to p_j. ``primes`` must be exactly
    the primes of those integers (each is factored completely over the list)."""
    refuse(type(primes) is not list or any(not is_prime(p) for p in primes) or primes != sorted(set(primes)),
           "compatibility.primes: not an increasing list of primes")
    factors, used = [], set()
    for j, vals in enumerate(inst.vals):
        ints = dict(zip(vals, integer_row(list(vals.values()))))
        g = 1 if inst.counts else math.gcd(*ints.values())
        ints = {z: c // g for z, c in ints.items()}
        row = {}
        for z, c in ints.items():
            e = {}
            for p in primes:
                while c % p == 0:
                    c, e[p] = c // p, e.get(p, 0) + 1
            refuse(c != 1, f"compatibility.primes: the count of context {j}, token {z} has a prime factor not listed")
            row[z] = e
            used.update(e)
        factors.append(row)
    refuse(used != set(primes), f"compatibility.primes: {sorted(set(primes) - used)[:3]} divide no count")
    E = {}
    for j, z in inst.rows:
        e, a = factors[j][z], factors[j][inst.anchor[j]]
        E[(j, z)] = {p: e.get(p, 0) - a.get(p, 0) for p in set(e) | set(a) if e.get(p, 0) != a.get(p, 0)}
    return E


def rank_G(inst, p):
    """rank of G = A_eq A_eq^T mod p (a lower bound on rank A_eq over Q), from K = H H^T."""
    if not inst.rows:
        return 0
    Hi = flint.nmod_mat([[x % p for x in integer_row(h)] for h in inst.dense()], p)
    K, a = (Hi * Hi.transpose()).tolist(), inst.anchor
    G = [[((z == z2) - (z == a[j2]) - (a[j] == z2) + (a[j] == a[j2])) * int(K[j][j2]) % p for j2, z2 in inst.rows]
         for j, z in inst.rows]
    return flint.nmod_mat(G, p).rank()


# ------------------------------------------------------------------------------------------ the claims
def lemma1(sec, inst, field):
    """Lemma 1's premise rank H = m, in words, from ``embeddings_rank_modulus`` p (all of H mod p) or
    ``embeddings_rank_witness``; None when the section gives neither. The witness: pivots (r_k, c_k) in peel
    order with H[r_k, c_k] != 0 and column c_k zero on every row peeled after r_k or never (a triangular
    block), and a core (the unpeeled rows, columns other than the pivots') of rank core_rank mod a prime:
    rank H >= #pivots + core_rank."""
    if "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        refuse(not is_prime(p) or inst.rank_H(p) != inst.m,
               f"{field}.embeddings_rank_modulus: H does not have rank m mod {p!r}")
        return f"rank H = m mod {p}"
    if "embeddings_rank_witness" not in sec:
        return None
    w, f = sec["embeddings_rank_witness"], f"{field}.embeddings_rank_witness"
    keys(w, f, ("pivots", "core_rows", "core_cols", "core_rank", "modulus"))
    refuse(any(type(w[k]) is not list for k in ("pivots", "core_rows", "core_cols")), f"{f}: expected lists")
    refuse(any(type(x) is not list or len(x) != 2 for x in w["pivots"]), f"{f}.pivots: expected [row, column] pairs")
    rows = [index(x[0], inst.m, f"{f}.pivots") for x in w["pivots"]]
    cols = [index(x[1], inst.d, f"{f}.pivots") for x in w["pivots"]]
    core_r = [index(x, inst.m, f"{f}.core_rows") for x in w["core_rows"]]
    core_c = [index(x, inst.d, f"{f}.core_cols") for x in w["core_cols"]]
    refuse(len(set(rows)) < len(rows) or len(set(cols)) < len(cols), f"{f}.pivots: a row or column repeats")
    refuse(sorted(core_r) != sorted(set(range(inst.m)) - set(rows)), f"{f}.core_rows: not the rows left unpeeled")
    refuse(len(set(core_c)) < len(core_c) or set(core_c) & set(cols), f"{f}.core_cols: repeat or meet a pivot column")
    when = {r: k for k, r in enumerate(rows)}
    for k, (r, c) in enumerate(zip(rows, cols)):
        refuse(not inst.H[r].get(c), f"{f}.pivots[{k}]: H[{r}, {c}] is zero")
        refuse(any(when.get(j, len(rows)) > k for j in inst.cols[c]), f"{f}.pivots[{k}]: column {c} is not zero below")
    claimed, p = w["core_rank"], w["modulus"]
    refuse(type(claimed) is not int or len(rows) + claimed < inst.m, f"{f}.core_rank: {claimed!r} does not reach m")
    if claimed:
        refuse(not is_prime(p) or rank_mod(inst.dense(core_r, core_c), p) < claimed,
               f"{f}: the core's rank mod {p!r} is below {claimed}")
    return f"rank H = m: {len(rows)} rows peeled" + (f" and a core of rank {claimed} mod {p}" if claimed else "")


def check_compatibility(cert, inst, notes):
    sec = cert["compatibility"]
    refuse(type(sec) is not dict or "claim" not in sec, "compatibility: expected an object with a claim")
    claim = flag(sec["claim"], "compatibility.claim")
    refuse(sec.get("n_eq") != len(inst.rows) or type(sec.get("n_eq")) is not int,
           f"compatibility.n_eq: claims {sec.get('n_eq')!r}, the instance has {len(inst.rows)} equality rows")
    E = exponents(inst, sec.get("primes"))
    if claim is None:
        keys(sec, "compatibility", ("claim", "n_eq", "primes", "reason"))
        return None
    bounds = (inst.m, inst.V)
    if claim is False:
        keys(sec, "compatibility", ("claim", "n_eq", "dim_F", "primes", "violating_null_vector"))
        y = sparse(sec["violating_null_vector"], bounds, "compatibility.violating_null_vector")
        refuse(not inst.transpose_apply(y, "compatibility.violating_null_vector"),
               "compatibility: the violating vector y is not in the left null space (A_eq^T y != 0)")
        refuse(not any(sum((c * E[row].get(p, 0) for row, c in y.items()), flint.fmpq(0)) for p in sec["primes"]),
               "compatibility: y^T E = 0, so y does not refute (4)")
        notes.append("compatible: false (A_eq^T y = 0 and y^T b != 0)")
        return False
    keys(sec, "compatibility", ("claim", "n_eq", "dim_F", "primes", "null_space_basis"),
         ("W_star", "rank_modulus", "embeddings_rank_modulus", "embeddings_rank_witness", "particular_solutions",
          "frequent_tokens_modulus"))
    basis = sec["null_space_basis"]
    refuse(type(basis) is not list, "compatibility.null_space_basis: expected a list")
    how = lemma1(sec, inst, "compatibility")
    if how:
        refuse(basis, "compatibility.null_space_basis: not empty beside Lemma 1's witness")
        notes.append(f"compatible: true ({how}: A_eq has full row rank)")
        return True
    if "particular_solutions" in sec:
        sols = sec["particular_solutions"]
        refuse(basis or type(sols) is not dict or "rank_modulus" in sec or "W_star" in sec,
               "compatibility.particular_solutions: expected an object beside an empty basis alone")
        moving = {p for e in E.values() for p in e}
        refuse(set(sols) != {str(p) for p in moving},
               "compatibility.particular_solutions: the keys are not the primes whose exponents move")
        for key, items in sols.items():
            R = {}
            for (v, i), x in sparse(items, (inst.V, inst.d), f"compatibility.particular_solutions.{key}").items():
                R.setdefault(v, {})[i] = x
            L = inst.logits(R)
            for j, z in inst.rows:
                refuse(L[z][j] - L[inst.anchor[j]][j] != E[(j, z)].get(int(key), 0),
                       f"compatibility.particular_solutions.{key}: row ({j}, {z}) is not solved")
        notes.append(f"compatible: true (one exact solution per prime, {len(sols)} primes)")
        return True
    Y = [sparse(y, bounds, f"compatibility.null_space_basis[{k}]") for k, y in enumerate(basis)]
    for k, y in enumerate(Y):
        refuse(not inst.transpose_apply(y, f"compatibility.null_space_basis[{k}]"),
               f"compatibility.null_space_basis[{k}]: not in the left null space of A_eq")
        for p in sec["primes"]:
            refuse(sum((c * E[row].get(p, 0) for row, c in y.items()), flint.fmpq(0)),
                   f"compatibility.null_space_basis[{k}]: y^T E != 0 at the prime {p}")
    p = sec.get("rank_modulus", sec.get("frequent_tokens_modulus", DEFAULT_PRIME))  # completeness by rank G mod p
    refuse(not is_prime(p), f"compatibility.rank_modulus: {p!r} is not a prime")
    pos = {row: n for n, row in enumerate(inst.rows)}
    dense_Y = [[y.get(row, flint.fmpq(0)) for row in pos] for y in Y]
    refuse(rank_mod(dense_Y, p) != len(Y), f"compatibility.null_space_basis: the vectors are not independent mod {p}")
    if rank_G(inst, p) + len(Y) != len(inst.rows):
        raise Invalid(f"compatibility.null_space_basis: rank A_eq mod {p} + {len(Y)} vectors != {len(inst.rows)} rows:"
                      " the basis is not shown complete")
    notes.append(f"compatible: true (a complete basis of {len(Y)} null vectors, each with y^T E = 0)")
    return True


def check_separability(cert, inst, notes):
    sec = cert["separability"]
    refuse(type(sec) is not dict or "claim" not in sec, "separability: expected an object with a claim")
    claim = flag(sec["claim"], "separability.claim")
    if claim is None:
        keys(sec, "separability", ("claim", "reason"))
        return None
    if claim is False:
        keys(sec, "separability", ("claim", "ray"))
        a = sparse(sec["ray"], (inst.V, inst.m), "separability.ray")
        farkas(inst, a, "separability.ray")
        notes.append(f"separable: false (a Farkas ray with {len(a)} nonzeros)")
        return False
    keys(sec, "separability", ("claim",), ("W", "embeddings_rank_modulus", "embeddings_rank_witness"))
    refuse(sum(k in sec for k in ("W", "embeddings_rank_modulus", "embeddings_rank_witness")) != 1,
           "separability: a true claim needs exactly one of W, embeddings_rank_modulus and embeddings_rank_witness")
    how = lemma1(sec, inst, "separability")
    if how:
        notes.append(f"separable: true ({how}: every logit matrix is reachable)")
        return True
    refuse("W" not in sec, "separability.W: missing")
    primal(inst, dense_q(sec["W"], inst.V, inst.d, "separability.W"), "separability.W")
    notes.append("separable: true (W has equal in-support logits and every margin >= 1, exactly)")
    return True


# ------------------------------------------------------------------------------------------ the other sections
def floats(sec, names, field):  # the named finite JSON floats (never integers), as fmpq
    for k in names:
        refuse(type(sec[k]) is not float, f"{field}.{k}: {str(sec[k])[:40]!r} is not a finite JSON float")
    return [exact(sec[k], f"{field}.{k}") for k in names]


def lcm(dens):  # the lcm of the fmpz dens
    D = flint.fmpz(1)
    for d in set(dens):
        D = D * d // D.gcd(d)
    return D


def integers(M):
    """(fmpz_mat N, D) with M = N / D for a list of rows of fmpq, D the lcm of the denominators."""
    D = lcm(x.q for row in M for x in row)
    return flint.fmpz_mat([[x.p * (D // x.q) for x in row] for row in M]), D


def row_integers(M):
    """(N, D): row v of M (lists of fmpq) is N[v] / D[v], D[v] the lcm of that row's denominators (one
    denominator for all rows would be the lcm of hundreds of unrelated long ones)."""
    dens = [lcm(x.q for x in row) for row in M]
    return flint.fmpz_mat([[x.p * (D // x.q) for x in row] for row, D in zip(M, dens)]), dens


def sq_rows(N, D):
    """sum over rows v of ||N[v]||^2 / D[v]^2, exactly."""
    return sum((flint.fmpq(sum(x * x for x in r), d * d) for r, d in zip(N.tolist(), D)), flint.fmpq(0))


def hint(inst, rows=None):
    """(Hint, s): H[rows] = Hint / s (default: all rows, kept), s the lcm of the denominators of H's entries."""
    if rows is None and hasattr(inst, "_hint"):
        return inst._hint
    if not hasattr(inst, "_s"):
        inst._s = lcm(x.q for h in inst.H for x in h.values())
    s, M = inst._s, flint.fmpz_mat(inst.m if rows is None else len(rows), inst.d)
    for r, j in enumerate(range(inst.m) if rows is None else rows):
        for i, x in inst.H[j].items():
            M[r, i] = x.p * (s // x.q)
    if rows is None:
        inst._hint = (M, s)
    return M, s


def rank_A(inst, rows):
    """The exact rank of the rows ``rows`` of A_eq (each h_j scaled to integers), on the columns they use."""
    cols, entries = {}, []
    for j, z in rows:
        h = integer_row(inst.dense([j])[0])
        entries.append([(cols.setdefault((t, i), len(cols)), s * x) for i, x in enumerate(h) if x
                        for t, s in ((z, 1), (inst.anchor[j], -1))])
    A = flint.fmpz_mat(len(rows), max(len(cols), 1))
    for r, row in enumerate(entries):
        for c, x in row:
            A[r, c] += x
    return int(A.rank()) if rows else 0


def check_dim_F_and_W_star(cert, inst, notes):
    """dim_F = rank A_eq, and W_star: G g_p = E_{:,p}, i.e. A_eq (A_eq^T g_p) = E_{:,p} row by row."""
    sec, r = cert["compatibility"], len(inst.rows)
    if sec["claim"] is None:
        return
    dim = sec["dim_F"]
    refuse(dim is not None and type(dim) is not int, f"compatibility.dim_F: {str(dim)[:40]!r} is not an integer")
    if sec["claim"] is True and "particular_solutions" not in sec:  # the basis is complete: rank A_eq = r - #basis
        refuse(dim != r - len(sec["null_space_basis"]),
               f"compatibility.dim_F: {dim!r} + {len(sec['null_space_basis'])} basis vectors is not r = {r}")
    elif dim is not None or sec["claim"] is True:
        rank = rank_A(inst, inst.rows)
        refuse(dim != rank, f"compatibility.dim_F: claims {dim!r}, rank A_eq is {rank}")
    if "W_star" not in sec:
        return
    keys(sec["W_star"], "compatibility.W_star", ("coefficients",))
    coef, E = sec["W_star"]["coefficients"], exponents(inst, sec["primes"])
    refuse(type(coef) is not dict or set(coef) != {str(p) for e in E.values() for p in e},
           "compatibility.W_star.coefficients: the keys are not the primes whose exponents move")
    for key, items in coef.items():
        f = f"compatibility.W_star.coefficients.{key}"
        acc = {}  # A_eq^T g as {token: {i: value}}
        for (j, z), c in sparse(items, (inst.m, inst.V), f).items():
            refuse(z not in inst.S[j] or z == inst.anchor[j], f"{f}: ({j}, {z}) is not an equality row")
            inst.add(acc, z, c, j)
            inst.add(acc, inst.anchor[j], -c, j)
        for j, z in inst.rows:
            Mz, Ma = acc.get(z, {}), acc.get(inst.anchor[j], {})
            got = sum((x * (Mz.get(i, 0) - Ma.get(i, 0)) for i, x in inst.H[j].items()), flint.fmpq(0))
            refuse(got != E[(j, z)].get(int(key), 0), f"{f}: G g_p is not the exponent of {key} at row ({j}, {z})")
    notes.append(f"W*: G g_p = E_p exactly for {len(coef)} primes")


def primal(inst, W, field):
    """(6a) and (6b) for the rational W (V rows of d fmpq), in integers; returns ||W||_F^2."""
    N, D = row_integers(W)
    Hi, s = hint(inst)
    L = (Hi * N.transpose()).tolist()  # L[j][v] = D[v] s (W h_j)_v
    for j, row in enumerate(L):
        a = inst.anchor[j]
        t, Da = row[a], D[a]
        for v, x in enumerate(row):  # (messages built only on failure: this loop runs V m times)
            if v in inst.S[j] and x * Da != t * D[v]:
                refuse(True, f"{field}: (6a) fails, logits of tokens {a} and {v} differ in context {j}")
            if v not in inst.S[j] and t * D[v] - x * Da < Da * D[v] * s:
                refuse(True, f"{field}: (6b) fails, margin of token {v} in context {j} is below 1")
    return sq_rows(N, D)


def dual(inst, a, field):
    """For a (dict (v, j) -> fmpq): columns summing to 0, a <= 0 off the supports; returns (mass, ||aH||^2)."""
    col, mass = {}, flint.fmpq(0)
    for (v, j), x in a.items():
        col[j] = col.get(j, 0) + x
        if v not in inst.S[j]:
            refuse(x > 0, f"{field}: a[{v}, {j}] > 0 off the support")
            mass -= x
    refuse(any(col.values()), f"{field}: a column does not sum to 0")
    toks, ctxs = sorted({v for v, _ in a}), sorted({j for _, j in a})
    if not a:
        return mass, flint.fmpq(0)
    ti, ci = {v: n for n, v in enumerate(toks)}, {j: n for n, j in enumerate(ctxs)}
    A = [[flint.fmpq(0)] * len(ctxs) for _ in toks]
    for (v, j), x in a.items():
        A[ti[v]][ci[j]] = x
    N, D = row_integers(A)
    Hc, s = hint(inst, ctxs)
    P = N * Hc  # row v: D[v] s (aH)_v
    return mass, sq_rows(P, D) / (s * s)


def upper(x, X, Q, field, what):  # the float x (X exactly) is sqrt(Q) rounded up
    refuse(x < 0 or X * X < Q, f"{field}: {x!r} is below {what}")
    refuse(X * X > Q * (1 + SLACK) ** 2 + TINY, f"{field}: {x!r} is not {what} rounded up (relative slack 2^-40)")


def lower(x, X, Q, field, what):  # the float x (X exactly) is sqrt(max(Q, 0)) rounded down
    refuse(x < 0 or X * X > max(Q, flint.fmpq(0)), f"{field}: {x!r} is above {what}")
    refuse(X * X < Q * (1 - SLACK) ** 2 - TINY, f"{field}: {x!r} is not {what} rounded down (relative slack 2^-40)")


def check_svm(cert, inst, sep, notes):
    """The NTP-SVM pair: W primal feasible, a dual feasible, gap = ||W||^2/2 - D(a) >= 0 exactly as claimed, the
    float bounds the exact quantities rounded outward, and claims.svm repeating them."""
    sec, cs = cert["svm"], cert["claims"]["svm"]
    if sec is None:
        refuse(cs is not None, "claims.svm: an object, but there is no svm section")
        return
    refuse(sep is not True, "svm: an NTP-SVM pair is only meaningful for separable data")
    keys(sec, "svm", ("gap", "distance_bound", "norm_lower", "norm_upper"), ("W", "W_factored", "a", "a_sparse"))
    for one, other in (("W", "W_factored"), ("a", "a_sparse")):
        refuse((one in sec) == (other in sec), f"svm.{one}: give exactly one of {one} and {other}")
    V, d, m = inst.V, inst.d, inst.m
    if "W" in sec:
        W = dense_q(sec["W"], V, d, "svm.W")
    else:
        f = sec["W_factored"]
        keys(f, "svm.W_factored", ("scale", "base", "delta"))
        scale, delta = q(f["scale"], "svm.W_factored.scale"), sparse(f["delta"], (V, d), "svm.W_factored.delta")
        W = dense_q(f["base"], V, d, "svm.W_factored.base", exact)
        W = [[scale * (x + delta.get((v, i), 0)) for i, x in enumerate(row)] for v, row in enumerate(W)]
    sq_W = primal(inst, W, "svm.W")
    if "a" in sec:
        a = {(v, j): x for v, r in enumerate(dense_q(sec["a"], V, m, "svm.a")) for j, x in enumerate(r) if x}
    else:
        a = sparse(sec["a_sparse"], (V, m), "svm.a_sparse")
    mass, sq_aH = dual(inst, a, "svm.a")
    D = mass - sq_aH / 2
    gap = sq_W / 2 - D
    refuse(gap < 0, "svm: the pair gives a negative gap, it cannot be feasible")
    refuse(gap != q(sec["gap"], "svm.gap"), f"svm.gap: claimed {sec['gap'][:40]}, the pair gives {gap}"[:300])
    dist, lo, hi = floats(sec, ("distance_bound", "norm_lower", "norm_upper"), "svm")
    upper(sec["distance_bound"], dist, 2 * gap, "svm.distance_bound", "sqrt(2 gap)")
    lower(sec["norm_lower"], lo, 2 * D, "svm.norm_lower", "sqrt(2 D(a))")
    upper(sec["norm_upper"], hi, sq_W, "svm.norm_upper", "||W||_F")
    refuse(lo > hi, "svm.norm_upper: below svm.norm_lower")
    refuse(cs is None, "claims.svm: null, but the svm section certifies a bound")
    keys(cs, "claims.svm", ("gap", "distance_bound", "norm_lower", "norm_upper"))
    for k in ("gap", "distance_bound", "norm_lower", "norm_upper"):
        refuse(type(cs[k]) is not type(sec[k]) or cs[k] != sec[k], f"claims.svm.{k}: differs from svm.{k}")
    notes.append(f"svm: exact gap {float(gap):.6g} of W and the dual a, ||W - W^mm||_F <= {sec['distance_bound']:.3e}, "
                 f"||W^mm||_F in [{sec['norm_lower']:.12g}, {sec['norm_upper']:.12g}]")


def dense_q(rows, n, k, field, value=None):  # n rows of k values, read by value (default: canonical rationals)
    refuse(type(rows) is not list or len(rows) != n or any(type(r) is not list or len(r) != k for r in rows),
           f"{field}: expected {n} rows of {k} values")
    return [[(value or q)(x, f"{field}[{v}]") for x in r] for v, r in enumerate(rows)]


def law(cert, inst):
    """(pi, p): the context weights and the rows of exact probabilities, as fmpq (only their nonzeros)."""
    if inst.counts:
        n = [sum(v.values()) for v in inst.vals]
        total = sum(n)
        return [x / total for x in n], [{z: c / nj for z, c in v.items()} for v, nj in zip(inst.vals, n)]
    w = cert["instance"]["embedded"]["weights"]
    refuse(type(w) is not list or len(w) != inst.m, f"instance.embedded.weights: expected {inst.m} rationals")
    w = [q(x, "instance.embedded.weights") for x in w]
    refuse(any(x <= 0 for x in w), "instance.embedded.weights: a weight is not positive")
    return [x / sum(w) for x in w], inst.vals


def ends(ball):  # the exact lower and upper ends of an arb ball, as fmpq
    return [flint.fmpq(int(m)) * flint.fmpq(2) ** int(e) for m, e in (ball.lower().man_exp(), ball.upper().man_exp())]


def check_excess(cert, inst, notes):
    """q exactly dual feasible (rows in the simplex, sum_j pi_j (q_j - p_j) h_j^T = 0), and the ends of the
    bracket outside arb balls of sum_j pi_j H(q_j) <= L* <= CE(W) (and of their differences with H)."""
    sec = cert.get("excess")
    if sec is None:
        return
    keys(sec, "excess", ("q", "W", "lower", "upper", "excess_lower", "excess_upper"))
    m, V = inst.m, inst.V
    qs = sparse(sec["q"], (m, V), "excess.q")
    refuse(any(x < 0 for x in qs.values()), "excess.q: a negative entry")
    pi, p = law(cert, inst)
    refuse(any(sum(r.values()) != 1 for r in p), "excess: the exact probabilities of a context do not sum to 1")
    rows = [dict() for _ in range(m)]
    for (j, v), x in qs.items():
        rows[j][v] = x
    refuse(any(sum(r.values()) != 1 for r in rows), "excess.q: a row does not sum to 1")
    acc = {}
    for j in range(m):
        for v in set(rows[j]) | set(p[j]):
            inst.add(acc, v, pi[j] * (rows[j].get(v, 0) - p[j].get(v, 0)), j)
    refuse(any(any(r.values()) for r in acc.values()), "excess.q: sum_j pi_j (q_j - p_j) h_j^T is not 0")
    N, D = integers(dense_q(sec["W"], V, inst.d, "excess.W"))
    lo, lo_x, hi, hi_x = floats(sec, ("lower", "excess_lower", "upper", "excess_upper"), "excess")
    old, flint.ctx.prec = flint.ctx.prec, PREC
    try:
        def entropy(rs):
            total = flint.arb(0)
            for w, r in zip(pi, rs):
                for x in r.values():
                    if x:
                        total -= flint.arb(w * x) * flint.arb(x).log()
            return total
        Hi, s = hint(inst)
        Z, unit, fixed, logs = (Hi * N.transpose()).tolist(), D * s, flint.fmpq(0), flint.arb(0)
        for j, z in enumerate(Z):
            top = max(z)
            fixed += pi[j] * flint.fmpq(top - sum(x * z[v] for v, x in p[j].items()), unit)
            spread = sum((flint.arb(flint.fmpq(zv - top, unit)).exp() for zv in z), flint.arb(0))
            logs += flint.arb(pi[j]) * spread.log()
        ent_q, ent_p, ce = entropy(rows), entropy(p), logs + flint.arb(fixed)
        (lo_q, _), (lo_gap, _), (_, hi_ce), (_, hi_gap) = map(ends, (ent_q, ent_q - ent_p, ce, ce - ent_p))
    finally:
        flint.ctx.prec = old
    refuse(lo > lo_q, f"excess.lower: {sec['lower']!r} exceeds sum_j pi_j H(q_j) (arb, {PREC} bits)")
    refuse(lo_x > max(lo_gap, 0), f"excess.excess_lower: {sec['excess_lower']!r} exceeds sum_j pi_j H(q_j) - H")
    refuse(hi < hi_ce, f"excess.upper: {sec['upper']!r} is below CE(W)")
    refuse(hi_x < hi_gap, f"excess.excess_upper: {sec['excess_upper']!r} is below CE(W) - H")
    notes.append(f"excess: L* in [{sec['lower']!r}, {sec['upper']!r}], L* - H in [{sec['excess_lower']!r}, "
                 f"{sec['excess_upper']!r}] (q exactly dual feasible, W rational; arb, {PREC} bits)")


def increasing(xs, bound, field):  # a strictly increasing list of indices below bound
    refuse(type(xs) is not list or any(type(x) is not int for x in xs) or xs != sorted(set(xs))
           or any(not 0 <= x < bound for x in xs), f"{field}: not strictly increasing indices below {bound}")
    return xs


def farkas(inst, a, field):
    """A Farkas ray of (6): sum_j a_j h_j^T = 0, columns summing to 0, a <= 0 off the supports, mass > 0."""
    acc, col, mass = {}, [flint.fmpq(0)] * inst.m, flint.fmpq(0)
    for (v, j), x in a.items():
        col[j] += x
        if v not in inst.S[j]:
            refuse(x > 0, f"{field}: a[{v}, {j}] > 0 off the support")
            mass -= x
        inst.add(acc, v, x, j)
    refuse(any(any(r.values()) for r in acc.values()), f"{field}: sum_j a_j h_j^T != 0")
    refuse(any(col), f"{field}: a column of the ray does not sum to 0")
    refuse(not mass > 0, f"{field}: no positive mass off the supports")


def check_why_not(cert, inst, compat, sep, notes):
    """why_not_separable: an irreducible non-separable set C (a Farkas ray on exactly C, an exact W separating
    C without j for each j); why_not_compatible: a circuit of log-odds (rank A_T = |T| - 1, y^T E != 0)."""
    if "why_not_separable" in cert:
        sec, f = cert["why_not_separable"], "why_not_separable"
        refuse(sep is not False, f"{f}: present, but the separability claim is not false")
        keys(sec, f, ("contexts", "ray", "deletions"))
        C = increasing(sec["contexts"], inst.m, f"{f}.contexts")
        refuse(not C, f"{f}.contexts: empty")
        a = {k: x for k, x in sparse(sec["ray"], (inst.V, inst.m), f"{f}.ray").items() if x}
        refuse(sorted({j for _, j in a}) != C, f"{f}.ray: its contexts are not the set")
        farkas(inst, a, f"{f}.ray")
        dels = sec["deletions"]
        refuse(type(dels) is not list or len(dels) != len(C), f"{f}.deletions: not one per context")
        cells = 0
        for k, (j, rec) in enumerate(zip(C, dels)):
            g = f"{f}.deletions[{k}]"
            keys(rec, g, ("context", "cols", "W"))
            refuse(type(rec["context"]) is not int or rec["context"] != j, f"{g}.context: not the set's context {j}")
            cols = increasing(rec["cols"], inst.d, f"{g}.cols")
            cells += inst.V * len(cols)
            refuse(cells > MAX_WHY_NOT_CELLS, f"{g}.W: the deletions hold over {MAX_WHY_NOT_CELLS} entries in all")
            rest = [c for c in C if c != j]
            if not cols:
                refuse(rec["W"] != [] or rest, f"{g}.W: not [] beside no columns, or contexts are left to separate")
                continue
            N, _ = integers(dense_q(rec["W"], inst.V, len(cols), f"{g}.W"))
            for c in rest:
                refuse(set(inst.H[c]) - set(cols), f"{g}.cols: the embedding of context {c} is not zero outside them")
            Z = (flint.fmpz_mat([integer_row(r) for r in inst.dense(rest, cols)]) * N.transpose()).tolist()
            for c, z in zip(rest, Z):
                t = z[inst.anchor[c]]
                refuse(any(z[v] != t for v in inst.S[c]), f"{g}.W: context {c}'s in-support logits differ")
                refuse(any(x >= t for v, x in enumerate(z) if v not in inst.S[c]),
                       f"{g}.W: context {c} has a token off its support not below the in-support logit")
        notes.append(f"why not separable: {len(C)} contexts, a Farkas ray on exactly them, each deletion separated")
    if "why_not_compatible" in cert:
        sec, f = cert["why_not_compatible"], "why_not_compatible.y"
        refuse(compat is not False, "why_not_compatible: present, but the compatibility claim is not false")
        keys(sec, "why_not_compatible", ("y",))
        y = sparse(sec["y"], (inst.m, inst.V), f)
        refuse(not y or not all(y.values()), f"{f}: empty, or a zero entry")
        refuse(not inst.transpose_apply(y, f), f"{f}: not in the left null space of A_eq")
        E = exponents(inst, cert["compatibility"]["primes"])
        refuse(not any(sum((c * E[row].get(p, 0) for row, c in y.items()), flint.fmpq(0))
                       for p in cert["compatibility"]["primes"]), f"{f}: y^T E = 0, so the cycle's log-odds agree")
        rank = rank_A(inst, sorted(y))
        refuse(rank != len(y) - 1, f"{f}: its {len(y)} rows have rank {rank}, not {len(y) - 1}: not a single cycle")
        notes.append(f"why not compatible: a circuit of {len(y)} log-odds equations (rank {rank}) with y^T b != 0")


def fingerprint(cert, inst):
    """SHA-256 of "m,d,V;", H as little-endian float64 (row-major), then b"counts;" and the counts as
    little-endian int64 (m x V), or b"probs;", each row's probabilities as "p/q" joined by "," and ended
    by ";", then the normalised weights as "p/q" joined by "," (docs/certificate-format.md, section 3)."""
    rec, m, d, V = cert["instance"]["embedded"], inst.m, inst.d, inst.V
    h = hashlib.sha256(f"{m},{d},{V};".encode())
    dense, sparse_h, zero = rec.get("embeddings"), {}, bytes(8 * d)
    for t in rec.get("embeddings_sparse", ()):
        sparse_h.setdefault(t[0], []).append(t[1:])
    for j in range(m):
        row = dense[j] if dense is not None else [x for _, x in sparse_h.get(j, ())]
        refuse(int in set(map(type, row)) and any(type(x) is int and float(x) != x for x in row),
               "instance.embedded: an embedding is not a float64")
        if dense is not None:
            h.update(struct.pack(f"<{d}d", *map(float, row)))
            continue
        buf = bytearray(zero)
        for i, x in sparse_h.get(j, ()):
            struct.pack_into("<d", buf, 8 * i, float(x))
        h.update(buf)
    if inst.counts:
        h.update(b"counts;")
        for j in range(m):
            h.update(struct.pack(f"<{V}q", *(int(inst.vals[j][z].p) if z in inst.vals[j] else 0 for z in range(V))))
    else:
        h.update(b"probs;")
        for row in rec["probs"]:
            row = [flint.fmpq(*x.as_integer_ratio()) if type(x) is float else q(x, "instance.embedded.probs")
                   for x in row]
            h.update((",".join(f"{x.p}/{x.q}" for x in row) + ";").encode())
        h.update(",".join(f"{w.p}/{w.q}" for w in law(cert, inst)[0]).encode())
    return h.hexdigest()


def check_instance_record(cert, inst, notes):
    """The fingerprint re-derived from the embedded instance, its names (a string, V and m strings), and its
    probabilities summing to 1."""
    head, rec = cert["instance"], cert["instance"]["embedded"]
    refuse(type(rec["name"]) is not str, "instance.embedded.name: not a string")
    for key, n in (("token_names", inst.V), ("context_names", inst.m)):
        names = rec.get(key, [""] * n)
        refuse(type(names) is not list or len(names) != n or any(type(x) is not str for x in names),
               f"instance.embedded.{key}: expected {n} strings")
    if not inst.counts:  # probabilities: rows of rationals sum to 1 exactly, rows of floats to within 1e-9
        tol = flint.fmpq(1, 10**9) if cert["probabilities_exact_from_floats"] else 0
        refuse(any(abs(sum(v.values()) - 1) > tol for v in inst.vals),
               "instance.embedded.probs: a row does not sum to 1")
    fp = fingerprint(cert, inst)
    refuse(head["fingerprint"] != fp, f"instance.fingerprint: names {str(head['fingerprint'])[:16]}..., the embedded "
           f"instance has {fp[:16]}...")
    notes.append(f"fingerprint: {fp[:16]}... (re-derived from the embedded instance; names: strings, V and m of them)")


def check_source(cert, inst, notes):
    """The source record: a model's files by SHA-256, and its vocabulary record against the instance."""
    if "source" not in cert:
        return
    sec, sha = cert["source"], re.compile(r"[0-9a-f]{64}\Z")
    keys(sec, "source", ("kind", "files", "corpus_sha256", "context", "bos", "embeddings"), ("vocabulary",))
    refuse(sec["kind"] != "model" or sec["embeddings"] not in ("model", "static"),
           "source: kind is not 'model', or embeddings not 'model' or 'static'")
    refuse(type(sec["context"]) is not str or type(sec["bos"]) is not bool, "source: context or bos of the wrong kind")
    refuse(type(sec["corpus_sha256"]) is not str or not sha.match(sec["corpus_sha256"]), "source.corpus_sha256: bad")
    refuse(type(sec["files"]) is not list or not sec["files"], "source.files: expected the model's files")
    for i, x in enumerate(sec["files"]):
        refuse(type(x) is not list or len(x) != 2 or type(x[0]) is not str or not x[0] or type(x[1]) is not str
               or not sha.match(x[1]), f"source.files[{i}]: expected [name, 64 lowercase hex digits]")
    text = f"source: a model's {len(sec['files'])} files by SHA-256"
    if "vocabulary" in sec:
        voc, f = sec["vocabulary"], "source.vocabulary"
        keys(voc, f, ("V", "V_reduced", "observed", "merged", "representative"))
        refuse(any(type(voc[k]) is not int or voc[k] < (k != "merged") for k in ("V", "V_reduced", "observed",
                                                                                  "merged")),
               f"{f}: V, V_reduced, observed (positive) and merged (non-negative) are not integers")
        rep, merged = voc["representative"], voc["merged"]
        refuse(voc["observed"] + merged != voc["V"] or voc["V_reduced"] != voc["observed"] + (merged > 0),
               f"{f}: observed + merged is not V, or V_reduced is not observed + (1 if merged)")
        refuse((rep is None) != (merged == 0) or (rep is not None and not (type(rep) is int and 0 <= rep < voc["V"])),
               f"{f}.representative: {rep!r} is not a token id below V exactly when tokens are merged")
        refuse(voc["V_reduced"] != inst.V, f"{f}.V_reduced: {voc['V_reduced']}, the instance has V = {inst.V}")
        refuse(set().union(*inst.S) != set(range(voc["observed"])),
               f"{f}.observed: the instance's first {voc['observed']} tokens are not those that follow a context")
        text += f", {voc['observed']} observed tokens" + (f" and one representative of {merged} more" if merged else "")
    notes.append(text)


def check(cert):
    """The notes of a certificate whose claims all check; raises Invalid otherwise."""
    try:
        return _check(cert)
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError, struct.error) as err:
        raise Invalid(f"certificate: malformed ({type(err).__name__}: {err})") from None


def _check(cert):
    keys(cert, "certificate", TOP, TOP_OPTIONAL)
    refuse(cert["format"] != FORMAT or type(cert["version"]) is not int or cert["version"] != VERSION,
           f"format: {cert['format']!r} version {cert['version']!r} is not {FORMAT} version {VERSION}")
    body = {k: v for k, v in cert.items() if k != "checksum"}
    refuse(hashlib.sha256(canonical(body).encode("ascii")).hexdigest() != cert["checksum"],
           "checksum: does not match the SHA-256 of the canonical JSON")
    inst = Instance(cert)
    notes = [f"instance: m = {inst.m}, d = {inst.d}, V = {inst.V}, {len(inst.rows)} equality rows (embedded)"]
    check_instance_record(cert, inst, notes)
    claims = cert["claims"]
    keys(claims, "claims", ("compatible", "separable", "entropy_bound_reachable", "svm"))
    compat, sep = check_compatibility(cert, inst, notes), check_separability(cert, inst, notes)
    both = False if False in (compat, sep) else (None if None in (compat, sep) else True)
    for key, verdict in (("compatible", compat), ("separable", sep), ("entropy_bound_reachable", both)):
        refuse(flag(claims[key], f"claims.{key}") is not verdict,
               f"claims.{key}: {claims[key]!r} is not the checked verdict {json.dumps(verdict)}")
    notes.append(f"entropy bound reachable: {json.dumps(both)}")
    check_dim_F_and_W_star(cert, inst, notes)
    check_svm(cert, inst, sep, notes)
    check_excess(cert, inst, notes)
    check_why_not(cert, inst, compat, sep, notes)
    check_source(cert, inst, notes)
    return notes


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python tools/ntpcert_check.py CERT", file=sys.stderr)
        return 2
    sys.set_int_max_str_digits(0)  # rational strings of any length (integer literals are capped above)
    try:
        with open(args[0], "rb") as fh:
            notes = check(parse(fh.read(MAX_BYTES + 1)))
    except OSError as err:
        print(f"cannot read {args[0]}: {err.strerror or err}", file=sys.stderr)
        return 2
    except Invalid as err:
        print(f"INVALID: {err}")
        return 1
    print(f"VALID: {args[0]}")
    for line in notes:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
