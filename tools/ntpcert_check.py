#!/usr/bin/env python3
"""ntpcert_check CERT: check every section of an ntpcert certificate (docs/certificate-format.md, format 1)
against the instance embedded in it, in exact arithmetic, with the standard library and python-flint only
(nothing from ntpcert, so no code is shared with the writer): its three claims, NTP-compatibility (4),
NTP-separability (6) and "the entropy bound is reachable", then the fingerprint and names, dim F and W*, the
NTP-SVM pair and its bounds, the excess bracket (in arb balls), the why-not culprits and the source record.
Exit status: 0 when every claim and section checks (null claims as undetermined); 1 with one line
``INVALID: <field>: <reason>`` naming the first that fails; 2 when CERT cannot be read; 4 with one line
``TOO LARGE: <field>: <reason>`` when CERT is over a size limit of the format (LIMITS): too large to check
here, not a verdict."""

import functools
import hashlib
import json
import os
import struct
import sys

import flint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the checker's other files, beside it
from ntpcert_check_exact import (DEFAULT_PRIME, FORMAT, LIMITS, Invalid, MAX_BYTES, MAX_INT_DIGITS, MAX_SPARSE_CELLS,
    MAX_SPARSE_EMBEDDING_CELLS, TOP, TOP_OPTIONAL, TooLarge, VERSION, count, dense_q, exact, exact_float, exponents,
    farkas, flag, index, integer_row, is_prime, keys, law, packed_bytes, PackedRows, primal, q, rank_mod, refuse,
    sparse, too_large)
from ntpcert_check_sections import (check_dim_F_and_W_star, check_excess, check_instance_record, check_source,
    check_svm, check_why_not)
from ntpcert_check_split import check_split
from ntpcert_check_nuclear import NUCLEAR_FORMAT, check_nuclear


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
    too_large(len(data) > MAX_BYTES, f"file: over the cap of {MAX_BYTES} bytes")
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
        packed = next((k for k in ("embeddings_f64", "embeddings_f32") if k in rec), None)
        need += ("embeddings",) if dense_h else ("embeddings_shape", packed or "embeddings_sparse")
        keys(rec, "instance.embedded", need, ("token_names", "context_names"))
        emb = rec["embeddings"] if dense_h else rec["embeddings_shape"]
        refuse(not dense_h and (type(emb) is not list or len(emb) != 2 or {type(x) for x in emb} != {int}),
               "instance.embedded.embeddings_shape: not a pair of integers")
        self.m = (len(emb) if type(emb) is list else 0) if dense_h else emb[0]
        self.d = (len(emb[0]) if self.m and type(emb[0]) is list else 0) if dense_h else emb[1]
        first = rec[law][0] if law != "counts_sparse" and rec[law] else None
        self.V = rec["V"] if law == "counts_sparse" else (len(first) if type(first) is list else 0)
        for key in ("m", "d", "V"):
            refuse(type(head[key]) is not int or head[key] != getattr(self, key) or head[key] < 1,
                   f"instance.{key}: claims {head[key]!r}, the embedded instance has {getattr(self, key)}")
        m, d, V = self.m, self.d, self.V
        self.H = [dict() for _ in range(m)] if not packed else None  # h_j as {i: nonzero entry}
        if dense_h:
            refuse(any(type(r) is not list or len(r) != d for r in emb),
                   f"instance.embedded.embeddings: expected {m} rows of {d} numbers")
            for j, r in enumerate(emb):
                self.H[j] = {i: x for i, x in enumerate(exact(x, f"instance.embedded.embeddings[{j}]") for x in r) if x}
        elif packed:
            field = f"instance.embedded.{packed}"  # every entry checked here; rows decoded when read
            self.H = PackedRows(packed_bytes(rec[packed], m, d, field), m, d, field)
        else:
            too_large(m * d > MAX_SPARSE_EMBEDDING_CELLS, f"instance.embedded.embeddings_shape: {m * d} cells, "
                      f"over the cap of {MAX_SPARSE_EMBEDDING_CELLS}")
            entries = sparse(rec["embeddings_sparse"], (m, d), "instance.embedded.embeddings_sparse", exact)
            refuse(list(entries) != sorted(entries) or not all(entries.values()),
                   "instance.embedded.embeddings_sparse: entries not nonzero and in increasing (j, i) order")
            for (j, i), x in entries.items():
                self.H[j][i] = x
        from_floats = flag(cert["probabilities_exact_from_floats"], "probabilities_exact_from_floats")
        refuse(from_floats is None or (from_floats and law != "probs"),
               f"probabilities_exact_from_floats: {from_floats!r} does not describe the embedded data")
        vals = [dict() for _ in range(m)]
        if law == "counts_sparse":
            too_large(m * V > MAX_SPARSE_CELLS,
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
                    refuse(from_floats and type(c) is not float, f"{field}[{j}][{z}]: {c!r} is not a float")
                    if x > 0:
                        vals[j][z] = x
        for j in range(m):
            refuse(not vals[j], f"instance.embedded: context {j} has an empty support")
        self.vals, self.counts = vals, law != "probs"
        self.S = [set(v) for v in vals]
        self.anchor = [min(s) for s in self.S]
        self.rows = [(j, z) for j in range(m) for z in sorted(self.S[j]) if z != self.anchor[j]]

    @functools.cached_property
    def cols(self):
        """Column i of H as {j: nonzero entry}, built when first asked for (it reads every row)."""
        cols = [dict() for _ in range(self.d)]
        for j, h in enumerate(self.H):
            for i, x in h.items():
                cols[i][j] = x
        return cols

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
        refuse(not is_prime(p, 2**63) or inst.rank_H(p) != inst.m, f"{field}.embeddings_rank_modulus: " + (
            f"H does not have rank m mod {p!r}" if is_prime(p, 2**63) else f"{p!r} is not a prime 2 <= p < 2^63"))
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
    refuse((p is not None or claimed) and not is_prime(p, 2**63), f"{f}.modulus: {p!r} is not a prime 2 <= p < 2^63")
    if claimed:
        refuse(rank_mod(inst.dense(core_r, core_c), p) < claimed, f"{f}: the core's rank mod {p} is below {claimed}")
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
    refuse(not is_prime(p, 2**63), f"compatibility.rank_modulus: {p!r} is not a prime 2 <= p < 2^63")
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


def check(cert):
    """The notes of a certificate whose claims all check; raises Invalid otherwise."""
    try:
        return check_nuclear(cert) if cert.get("format") == NUCLEAR_FORMAT else _check(cert)
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
    check_split_section(cert, inst, sep, notes)
    check_source(cert, inst, notes)
    return notes


def check_split_section(cert, inst, sep, notes):
    """The optional split section (section 11): N exactly the implicit equalities of the recession cone, by
    tools/ntpcert_check_split.py; a non-empty N beside a true separability claim, or an empty one beside a false
    claim, is refused."""
    if "split" not in cert:
        return
    H = [[inst.H[j].get(i, flint.fmpq(0)) for i in range(inst.d)] for j in range(inst.m)]
    notes.extend(check_split(cert["split"], H, [sorted(s) for s in inst.S], inst.V))
    n_N = len(cert["split"]["nonseparable"])
    refuse(n_N and sep is True, f"split: {n_N} non-separable pairs, but the separability claim is true")
    refuse(not n_N and sep is False, "split: no non-separable pair, but the separability claim is false")


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python tools/ntpcert_check.py CERT", file=sys.stderr)
        return 2
    sys.set_int_max_str_digits(0)  # rational strings of any length (integer literals are capped above)
    try:
        with open(args[0], "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            too_large(size > MAX_BYTES, f"file: {size} bytes, over the cap of {MAX_BYTES} bytes")  # refused unread
            notes = check(parse(fh.read(MAX_BYTES + 1)))
    except OSError as err:
        print(f"cannot read {args[0]}: {err.strerror or err}", file=sys.stderr)
        return 2
    except TooLarge as err:
        print(f"TOO LARGE: {err} (too large to check here; not a verdict on its claims)")
        return 4
    except Invalid as err:
        print(f"INVALID: {err}")
        return 1
    print(f"VALID: {args[0]}")
    for line in notes:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
