"""The sections of a certificate beyond its three claims, for tools/ntpcert_check.py: dim F and W*, the NTP-SVM
pair and its bounds, the excess bracket (in arb balls), the why-not culprits, the fingerprint and names, and
the source record (docs/certificate-format.md, sections 3 and 7-10). Standard library and python-flint only."""

import hashlib
import math
import re
import struct

import flint

from ntpcert_check_exact import (MAX_WHY_NOT_CELLS, PREC, SLACK, TINY, dense_q, exact, exponents, farkas, hint,
    integer_row, keys, law, lcm, primal, q, refuse, row_integers, sparse, sq_rows)


# ------------------------------------------------------------------------------------------ the other sections
def floats(sec, names, field):  # the named finite JSON floats (never integers), as fmpq
    for k in names:
        refuse(type(sec[k]) is not float, f"{field}.{k}: {str(sec[k])[:40]!r} is not a finite JSON float")
    return [exact(sec[k], f"{field}.{k}") for k in names]


def integers(M):
    """(fmpz_mat N, D) with M = N / D for a list of rows of fmpq, D the lcm of the denominators."""
    D = lcm(x.q for row in M for x in row)
    return flint.fmpz_mat([[x.p * (D // x.q) for x in row] for row in M]), D


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


#: Past m V = SPARSE_HASH_CELLS count cells the fingerprint hashes counts in CSR form (a copy of
#: ntpcert.instance.model.SPARSE_HASH_CELLS; docs/certificate-format.md, section 3).
SPARSE_HASH_CELLS = 1 << 28


def fingerprint(cert, inst):
    """SHA-256 of "m,d,V;", H as little-endian float64 (row-major), then b"counts;" and the counts as
    little-endian int64 (m x V), or past SPARSE_HASH_CELLS cells b"counts-csr;" and per row its tokens
    (increasing), their counts and its length as little-endian int64, or b"probs;", each row's probabilities as
    "p/q" joined by "," and ended by ";", then the normalised weights as "p/q" joined by "," (docs/certificate-
    format.md, section 3)."""
    rec, m, d, V = cert["instance"]["embedded"], inst.m, inst.d, inst.V
    h = hashlib.sha256(f"{m},{d},{V};".encode())
    dense, sparse_h, zero = rec.get("embeddings"), {}, bytes(8 * d)
    for t in rec.get("embeddings_sparse", ()):
        sparse_h.setdefault(t[0], []).append(t[1:])
    packed = hasattr(inst.H, "float64_bytes")  # H's checked bytes (float32 widened exactly)
    for chunk in inst.H.float64_bytes() if packed else ():
        h.update(chunk)
    for j in range(m if not packed else 0):
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
    if inst.counts and m * V > SPARSE_HASH_CELLS:  # per row: its tokens, their counts, its length
        h.update(b"counts-csr;")
        for row in inst.vals:
            toks = sorted(row)
            h.update(struct.pack(f"<{2 * len(toks) + 1}q", *toks, *(int(row[z].p) for z in toks), len(toks)))
    elif inst.counts:
        h.update(b"counts;")
        for row in inst.vals:  # a row of zeros with its few counts written in
            buf = bytearray(8 * V)
            for z, c in row.items():
                struct.pack_into("<q", buf, 8 * z, int(c.p))
            h.update(buf)
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
    keys(sec, "source", ("kind", "files", "corpus_sha256", "context", "bos", "embeddings"), ("vocabulary", "corpus", "reader"))
    refuse(sec["kind"] != "model" or sec["embeddings"] not in ("model", "static", "activations"),
           "source: kind is not 'model', or embeddings not 'model', 'static' or 'activations'")
    refuse(sec.get("corpus", "token_ids") not in ("token_ids", "counts"), "source.corpus: not 'token_ids' or 'counts'")
    refuse(type(sec["context"]) is not str or type(sec["bos"]) is not bool, "source: context or bos of the wrong kind")
    refuse(type(sec["corpus_sha256"]) is not str or not sha.match(sec["corpus_sha256"]), "source.corpus_sha256: bad")
    refuse(type(sec["files"]) is not list or not sec["files"], "source.files: expected the model's files")
    for i, x in enumerate(sec["files"]):
        refuse(type(x) is not list or len(x) != 2 or type(x[0]) is not str or not x[0] or type(x[1]) is not str
               or not sha.match(x[1]), f"source.files[{i}]: expected [name, 64 lowercase hex digits]")
    text = f"source: a model's {len(sec['files'])} files by SHA-256"
    if "reader" in sec:
        rd, f = sec["reader"], "source.reader"
        keys(rd, f, ("library", "version", "class", "hook", "processing"),
             ("attention", "forward", "forward_note", "bridge_gap"))
        refuse(any(type(rd[k]) is not str for k in ("library", "version", "class", "hook"))
               or any(k in rd and type(rd[k]) is not str for k in ("attention", "forward", "forward_note")),
               f"{f}: library, version, class, hook (and attention, forward, forward_note) are not strings")
        refuse("bridge_gap" in rd and (type(rd["bridge_gap"]) is not float or not math.isfinite(rd["bridge_gap"])),
               f"{f}.bridge_gap: not a finite float")
        refuse(type(rd["processing"]) is not dict
               or any(type(v) is not bool and v is not None for v in rd["processing"].values()),
               f"{f}.processing: expected an object of true, false or null")
        text += f", read through {rd['library']} at {rd['hook']}"
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

