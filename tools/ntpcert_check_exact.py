"""The reading and the exact arithmetic of tools/ntpcert_check.py (docs/certificate-format.md, format 1): the
format's constants and limits, strict readers of JSON values (canonical rationals, type-exact integers and
booleans, sparse lists, packed floats), integer rows and ranks mod p, the prime exponents of the log-odds,
and the exact checks that both the claims and the other sections use (a W's margins, a Farkas ray, the law
(pi, p)). Standard library and python-flint only."""

import base64
import math
import re
import struct

import flint

FORMAT, VERSION = "ntpcert-certificate", 1
#: The format's size limits (docs/certificate-format.md, section 1), a copy of ntpcert.certificate.format.LIMITS
#: (a test holds the two equal): a certificate over one is too large to check here, not invalid.
LIMITS = {"certificate_bytes": 536_870_912, "json_integer_digits": 4300, "sparse_count_cells": 1_099_511_627_776,
          "sparse_embedding_cells": 100_000_000, "why_not_cells": 2_000_000}
MAX_BYTES = LIMITS["certificate_bytes"]
MAX_INT_DIGITS = LIMITS["json_integer_digits"]
MAX_SPARSE_CELLS = LIMITS["sparse_count_cells"]
MAX_SPARSE_EMBEDDING_CELLS = LIMITS["sparse_embedding_cells"]
#: A prime for ranks mod p when the certificate names none (a rank mod p is at most the rank over Q).
DEFAULT_PRIME = 2**61 - 1
RATIONAL = re.compile(r"(-?(?:0|[1-9][0-9]*))(?:/([1-9][0-9]*))?\Z")
TOP = {"format", "version", "instance", "probabilities_exact_from_floats", "claims", "compatibility", "separability",
       "svm", "checksum"}
TOP_OPTIONAL = {"excess", "why_not_separable", "why_not_compatible", "split", "source"}
#: A bound x of an exact sqrt(Q) may differ from it by a relative 2^-40 (and 2^-1000 absolute, on the squares).
SLACK, TINY = flint.fmpq(1, 2**40), flint.fmpq(1, 2**1000)
#: Bits of the arb balls of the excess bracket.
PREC = 192
MAX_WHY_NOT_CELLS = LIMITS["why_not_cells"]


class Invalid(Exception):
    """A certificate that does not prove what it claims; the message names the field."""


class TooLarge(Exception):
    """A certificate over a size limit of the format (LIMITS): not checked, so neither valid nor invalid."""


def refuse(condition, message):
    if condition:
        raise Invalid(message)


def too_large(condition, message):
    if condition:
        raise TooLarge(message)


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
    refuse(type(x) is not int or x >= 2**63, f"{field}: {str(x)[:40]!r} is not an integer count below 2^63")
    return flint.fmpq(x)


def exact(x, field):
    """A JSON number (int, or a float taken as the dyadic rational it is) as an fmpq."""
    if type(x) is int and abs(x) <= 2**53:  # beyond, a binary64 would not hold it: the format refuses it
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


#: Per packed spelling: bytes an entry, struct letter, name, and the mask of the exponent's bits in the byte
#: below the top one (an entry is NaN or infinite iff top byte & 0x7F == 0x7F and that byte & mask == mask).
PACKED = {"embeddings_f64": (8, "d", "float64", 0xF0), "embeddings_f32": (4, "f", "float32", 0x80)}


def packed_bytes(text, m, d, field):
    """The bytes of a packed H, ``field`` ending in embeddings_f64 (little-endian binary64) or embeddings_f32
    (binary32): standard base64 (padded, nothing else) of the m d entries in row-major order, in its one
    spelling (re-encoding gives the text back), no entry NaN, infinite or -0.0. Every entry is scanned by its
    bit patterns, 2^22 entries at a time, a byte lane as one integer with a bit per entry: no float is made."""
    w, letter, kind, mask = PACKED[field.rsplit(".", 1)[-1]]
    refuse(type(text) is not str or len(text) != 4 * ((w * m * d + 2) // 3),
           f"{field}: not the length of base64 of {m} x {d} {kind} values")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise Invalid(f"{field}: not base64") from None
    refuse(len(raw) != w * m * d or base64.b64encode(raw).decode("ascii") != text,
           f"{field}: not the canonical base64 spelling of {m * d} {kind} values")
    def lane(k, keep):  # bit 8n set iff byte k of entry n passes keep
        return int.from_bytes(chunk[k::w].translate(bytes(map(keep, range(256)))), "little")
    for s in range(0, len(raw), w << 22):
        chunk = raw[s:s + (w << 22)]
        bad = lane(w - 1, lambda b: b & 0x7F == 0x7F) & lane(w - 2, lambda b: b & mask == mask)  # NaN, infinity
        neg0 = lane(w - 1, lambda b: b == 0x80)  # -0.0: the sign bit alone
        for k in range(w - 1):
            neg0 = neg0 and neg0 & lane(k, lambda b: b == 0)
        if bad | neg0:
            n = s // w + (((bad | neg0) & -(bad | neg0)).bit_length() - 1) // 8
            x = struct.unpack_from("<" + letter, raw, w * n)[0]
            raise Invalid(f"{field}[{n // d}][{n % d}]: {x!r} is not a finite float other than -0.0")
    return raw


class PackedRows:
    """The rows h_j of a packed H as {i: fmpq} of the nonzero entries (each the dyadic rational of its bits),
    each decoded from the checked bytes when first read and kept in ``rows``: a check that reads a few rows (a
    short violating vector, a Farkas ray on a few contexts) decodes only those."""
    def __init__(self, raw, m, d, field):
        self.w, letter = PACKED[field.rsplit(".", 1)[-1]][:2]
        self.raw, self.m, self.d, self.fmt, self.rows = raw, m, d, f"<{d}{letter}", {}

    def __len__(self):
        return self.m

    def __getitem__(self, j):  # (iteration, row by row, stops at the IndexError past the last)
        if j not in self.rows:
            if type(j) is not int or not 0 <= j < self.m:
                raise IndexError(f"H has no row {j!r}")
            xs = struct.unpack_from(self.fmt, self.raw, self.w * self.d * j)
            self.rows[j] = {i: flint.fmpq(*x.as_integer_ratio()) for i, x in enumerate(xs) if x}
        return self.rows[j]

    def float64_bytes(self):  # H as little-endian binary64 (the fingerprint's), float32 widened exactly
        for s in range(0, len(self.raw), self.w << 20):
            c = self.raw[s:s + (self.w << 20)]
            yield c if self.w == 8 else struct.pack(f"<{len(c) // 4}d", *struct.unpack(f"<{len(c) // 4}f", c))


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


def is_prime(p, below=None):  # a modulus is a prime 2 <= p < 2^63 (docs/certificate-format.md, section 1)
    return type(p) is int and p > 1 and (below is None or p < below) and bool(flint.fmpz(p).is_prime())


def factor(c, primes, listed):
    """{p: exponent} of c >= 1 over the increasing primes (``listed``: their set), or None when a prime not
    listed divides c. Past p^2 > c the rest is 1 or a prime (a composite rest has an unlisted factor < p)."""
    e = {}
    for p in primes:
        if p * p > c:
            break
        while c % p == 0:
            c, e[p] = c // p, e.get(p, 0) + 1
    if c > 1 and c not in listed:
        return None
    return {**e, c: e.get(c, 0) + 1} if c > 1 else e


def exponents(inst, primes):
    """E: for every equality row, the exponent of each prime in c_{j,z} / c_{j,z_j}, where c_{j,.} are the
    counts or, for probabilities, the coprime integers proportional to p_j. ``primes`` must be exactly
    the primes of those integers (each is factored completely over the list)."""
    refuse(type(primes) is not list or any(not is_prime(p) for p in primes) or primes != sorted(set(primes)),
           "compatibility.primes: not an increasing list of primes")
    factors, used, listed, memo = [], set(), set(primes), {}
    for j, vals in enumerate(inst.vals):
        ints = dict(zip(vals, integer_row(list(vals.values()))))
        g = 1 if inst.counts else math.gcd(*ints.values())
        ints = {z: c // g for z, c in ints.items()}
        row = {}
        for z, c in ints.items():
            e = memo[c] if c in memo else memo.setdefault(c, factor(c, primes, listed))
            refuse(e is None, f"compatibility.primes: the count of context {j}, token {z} has a prime factor not listed")
            row[z] = e
            used.update(e)
        factors.append(row)
    refuse(used != set(primes), f"compatibility.primes: {sorted(set(primes) - used)[:3]} divide no count")
    E = {}
    for j, z in inst.rows:
        e, a = factors[j][z], factors[j][inst.anchor[j]]
        E[(j, z)] = {p: e.get(p, 0) - a.get(p, 0) for p in set(e) | set(a) if e.get(p, 0) != a.get(p, 0)}
    return E


def lcm(dens):  # the lcm of the fmpz dens
    D = flint.fmpz(1)
    for d in set(dens):
        D = D * d // D.gcd(d)
    return D


def row_integers(M):
    """(N, D): row v of M (lists of fmpq) is N[v] / D[v], D[v] the lcm of that row's denominators (one
    denominator for all rows would be the lcm of hundreds of unrelated long ones)."""
    dens = [lcm(x.q for x in row) for row in M]
    return flint.fmpz_mat([[x.p * (D // x.q) for x in row] for row, D in zip(M, dens)]), dens


def sq_rows(N, D):
    """sum over rows v of ||N[v]||^2 / D[v]^2, exactly."""
    return sum((flint.fmpq(sum(x * x for x in r), d * d) for r, d in zip(N.tolist(), D)), flint.fmpq(0))


def hint(inst, rows=None):
    """(Hint, s): H[rows] = Hint / s (default: all rows, kept), s the lcm of the denominators of H's entries
    (of those rows' only, when s for all of H is not known yet: the other rows are not read)."""
    if rows is None and hasattr(inst, "_hint"):
        return inst._hint
    if rows is None and not hasattr(inst, "_s"):
        inst._s = lcm(x.q for h in inst.H for x in h.values())
    s = inst._s if hasattr(inst, "_s") else lcm(x.q for j in rows for x in inst.H[j].values())
    M = flint.fmpz_mat(inst.m if rows is None else len(rows), inst.d)
    for r, j in enumerate(range(inst.m) if rows is None else rows):
        for i, x in inst.H[j].items():
            M[r, i] = x.p * (s // x.q)
    if rows is None:
        inst._hint = (M, s)
    return M, s


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

