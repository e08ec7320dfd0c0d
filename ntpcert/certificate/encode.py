r"""The writers of a certificate: the embedded instance, the rational matrices and the whole body.

Each writer makes exact JSON values (rationals as canonical strings, :mod:`ntpcert.certificate.format`)
from the producer's exact results; :func:`build_certificate` assembles them, seals the body
(:mod:`ntpcert.certificate.jsonio`) and checks every section against the schema table the checker
reads. The checker itself never imports this module (an import-linter contract in ``pyproject.toml``):
what it reads back goes through :mod:`ntpcert.certificate.decode`.
"""

from __future__ import annotations

import base64
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ntpcert.certificate.decode import odd_parts
from ntpcert.certificate.format import FORMAT, MAX_SPARSE_CELLS, MAX_SPARSE_EMBEDDING_CELLS, VERSION
from ntpcert.certificate.jsonio import seal, unlimited_int_digits
from ntpcert.certificate.packed import can_pack, is_float32
from ntpcert.certificate.schema import check_produced
from ntpcert.errors import InputError
from ntpcert.exact.rational import fraction_str
from ntpcert.instance import NTPInstance
from ntpcert.util.logic import and3

if TYPE_CHECKING:
    from ntpcert.exact.compatibility import WStarClosedForm
    from ntpcert.exact.svm_gap import SVMBound
    from ntpcert.verdict import Verdict


#: Counts are embedded sparse when at most this fraction of them is positive (and m·V fits
#: :data:`~ntpcert.certificate.format.MAX_SPARSE_CELLS`); a word-level corpus (m = V = 3,594,
#: 0.3 % positive) took 26 MB dense.
SPARSE_COUNTS_MAX_FILL = 0.25


#: A dense H of floats with at least this many entries m·d is written packed (``embeddings_f64``, the
#: base64 of its binary64 bytes: 10.7 characters an entry instead of about 21 as decimals); a smaller one
#: stays readable decimals. Word pairs of the pydoc text with ``random:256`` (m = 24,939): 133 MB -> 68 MB.
PACKED_MIN_ENTRIES = 20_000


#: H is written sparse when at most this fraction of its entries is non-zero.
SPARSE_EMBEDDINGS_MAX_FILL = 0.05


def sparse_embeddings_record(H: np.ndarray) -> dict[str, Any] | None:
    """``{"embeddings_shape": [m, d], "embeddings_sparse": [[j, i, x], ...]}`` for a mostly-zero H of shape
    (m, d) (module doc), else None (write it dense)."""
    H = np.asarray(H, dtype=np.float64)
    m, d = H.shape
    if m * d > MAX_SPARSE_EMBEDDING_CELLS or np.any(np.signbit(H) & (H == 0)):  # -0.0 would not survive
        return None
    j, i = np.nonzero(H)
    if j.size > SPARSE_EMBEDDINGS_MAX_FILL * H.size:
        return None
    x = H[j, i]
    integral = bool(np.all(x == np.rint(x)) and np.all(np.abs(x) <= 2.0 ** 53))
    vals = x.astype(np.int64).tolist() if integral else x.tolist()
    return {"embeddings_shape": [int(m), int(d)],
            "embeddings_sparse": [[a, b, v] for a, b, v in zip(j.tolist(), i.tolist(), vals)]}


def pack_f64(A: np.ndarray) -> str:
    """The ``embeddings_f64`` text of a float matrix (:mod:`ntpcert.certificate.packed`): its entries'
    little-endian binary64 bytes in row-major order, in standard base64; finite entries only, and no
    -0.0 (:func:`~ntpcert.certificate.packed.can_pack`), so the text is the one spelling of the matrix."""
    A = np.ascontiguousarray(A, dtype="<f8")
    if A.ndim != 2 or not can_pack(A):
        raise InputError(f"pack_f64: expected a matrix of finite entries without -0.0, got shape {A.shape}")
    return base64.b64encode(A.tobytes()).decode("ascii")


def pack_f32(A: np.ndarray) -> str:
    """The ``embeddings_f32`` text of a matrix whose every entry is exactly a binary32
    (:func:`~ntpcert.certificate.packed.is_float32`), finite and without -0.0: its entries' little-endian
    binary32 bytes in row-major order, in standard base64 (:mod:`ntpcert.certificate.packed`)."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or not can_pack(A) or not is_float32(A):
        raise InputError(f"pack_f32: expected a matrix of binary32 entries without -0.0, got shape {A.shape}")
    return base64.b64encode(np.ascontiguousarray(A, dtype="<f4").tobytes()).decode("ascii")


def instance_record(instance: NTPInstance) -> dict[str, Any]:
    """The instance as exact JSON values (see the module doc)."""
    H = np.asarray(instance.embeddings, dtype=np.float64)
    sparse = sparse_embeddings_record(H)  # mostly zero (one-hot): [j, i, x] triples
    rec: dict[str, Any] = {"name": instance.name}
    if sparse is not None:
        rec.update(sparse)
    else:
        # integral embeddings (one-hot, k-gram) as JSON integers, which encode several times faster than
        # floats and read back to the same float64 bytes (no -0.0 among them, all within 2^53)
        integral = bool(np.all(H == np.rint(H)) and np.all(np.abs(H) <= 2.0**53)
                        and not np.any(np.signbit(H) & (H == 0)))
        if integral:
            rec["embeddings"] = H.astype(np.int64).tolist()
        elif H.size >= PACKED_MIN_ENTRIES and can_pack(H):  # floats (Gaussian): 10.7 characters an entry, not ~21
            rec["embeddings_shape"] = [int(H.shape[0]), int(H.shape[1])]
            if is_float32(H):  # a float32 model's h: 5.3 characters an entry
                rec["embeddings_f32"] = pack_f32(H)
            else:
                rec["embeddings_f64"] = pack_f64(H)
        else:  # a -0.0 keeps its own spelling (the fingerprint is over the bytes)
            rec["embeddings"] = H.tolist()
    if instance.has_counts:
        j, t, c = instance.count_entries()  # row-major order: (j, t) increasing
        cells = instance.m * instance.V
        if j.size <= SPARSE_COUNTS_MAX_FILL * cells and cells <= MAX_SPARSE_CELLS:
            rec["V"] = int(instance.V)
            rec["counts_sparse"] = np.stack([j, t, c], axis=1).astype(np.int64).tolist()
        else:
            rec["counts"] = np.asarray(instance.counts).tolist()
    else:
        if instance.probs_exact_from_floats:
            rec["probs"] = [[float(f) for f in row] for row in instance.exact_probs]
        else:
            rec["probs"] = [[fraction_str(f) for f in row] for row in instance.exact_probs]
        rec["weights"] = [fraction_str(f) for f in instance.exact_weights]
    if instance.token_names is not None:
        rec["token_names"] = list(instance.token_names)
    if instance.context_names is not None:
        rec["context_names"] = list(instance.context_names)
    return rec


def record_size_lower_bound(instance: NTPInstance) -> int:
    """A lower bound on the bytes of the instance's record (:func:`instance_record`), from its sizes alone:
    whatever form the writer picks, H takes at least 2 bytes an entry dense (a digit and a separator) or
    7 a non-zero entry sparse (``[j,i,x]``), the latter only within
    :data:`~ntpcert.certificate.format.MAX_SPARSE_EMBEDDING_CELLS`; counts likewise (within
    :data:`~ntpcert.certificate.format.MAX_SPARSE_CELLS`), probabilities 2 bytes a cell. What a producer
    checks against the size cap before it does the work of a certificate that could not be written."""
    H = np.asarray(instance.embeddings)
    m, d = H.shape
    dense_h = 2 * m * d
    emb = min(dense_h, 7 * int(np.count_nonzero(H))) if m * d <= MAX_SPARSE_EMBEDDING_CELLS else dense_h
    if not instance.has_counts:
        return emb + 2 * m * instance.V
    cells = instance.m * instance.V
    dense_c = 2 * cells
    law = min(dense_c, 7 * int(instance.count_entries()[0].size)) if cells <= MAX_SPARSE_CELLS else dense_c
    return emb + law


# ---------------------------------------------------------------------------- rationals
def matrix_strings(M) -> list[list[str]]:
    """An exact matrix (Fractions, ints or dyadic floats) as rows of rational strings."""
    return [[fraction_str(x) for x in row] for row in M]


def sparse_list(vec: dict) -> list[list]:
    """``{(i, k): Fraction}`` as sorted ``[[i, k, "p/q"], ...]``."""
    return [[int(i), int(k), fraction_str(v)] for (i, k), v in sorted(vec.items())]


def _pow2_strings(exps: np.ndarray) -> dict[int, str]:
    return {int(k): str(1 << int(k)) for k in np.unique(exps)}


def to_strings_dyadic(A: np.ndarray) -> list[list[str]]:
    r"""A float matrix (exact dyadics) as rows of canonical rational strings, shape (r, c).

    Vectorised: each entry is :math:`N 2^E` with N odd (:func:`~ntpcert.certificate.decode.odd_parts`), so ``"N*2^E"`` for
    :math:`E \ge 0` and ``"N/2^-E"`` otherwise is already in lowest terms; equal to
    ``fraction_str(float(x))`` entry by entry."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"to_strings_dyadic: expected a matrix, got shape {A.shape}")
    N, E = odd_parts(A)
    pos = E > 0
    if np.any(pos):  # integers of any size: rare (entries >= 2^53 or odd multiples of powers of two)
        big = {(int(i), int(k)): str(int(N[i, k]) << int(E[i, k])) for i, k in zip(*np.nonzero(pos))}
    else:
        big = {}
    den = {k: "/" + v for k, v in _pow2_strings(-E[E < 0]).items()}
    den[0] = ""
    out = []
    for nr, er, nz in zip(N, E, N != 0):  # only the nonzero entries are formatted (duals are sparse)
        row = ["0"] * len(nr)
        ks = np.flatnonzero(nz)
        for k, n, e in zip(ks.tolist(), nr[ks].tolist(), er[ks].tolist()):
            row[k] = f"{n}{den[-e]}" if e <= 0 else ""
        out.append(row)
    for (i, k), text in big.items():
        out[i][k] = text
    return out


def scaled_dyadic_strings(base: np.ndarray, scale: Fraction, delta: Any = ()) -> list[list[str]]:
    r"""Rows of canonical rational strings of :math:`	ext{scale}\cdot(B + \Delta)`, shape (r, c).

    ``base`` holds exact dyadics B, ``scale`` is a positive Fraction and ``delta`` lists sparse
    corrections ``(i, k, Fraction)`` (repeats add up). With :math:`B = N 2^E` (N odd),
    :math:`	ext{scale} = 2^a P / (2^b Q)` (P, Q odd, coprime) and :math:`g = \gcd(N, Q)`, an entry
    is :math:`(N/g) P / (Q/g) \cdot 2^{E + a - b}`, whose odd numerator and denominator are coprime:
    lowest terms without a Fraction per entry. Entries with a correction go through Fractions."""
    scale = Fraction(scale)
    if scale <= 0:
        raise InputError(f"scaled_dyadic_strings: scale {scale} is not positive")
    p, q = scale.numerator, scale.denominator
    a = (p & -p).bit_length() - 1
    b = (q & -q).bit_length() - 1
    P, Q = p >> a, q >> b
    N, E = odd_parts(base)
    if Q >= 2**62:  # np.gcd needs int64: fall back to one Fraction per entry
        M = np.asarray(base, dtype=np.float64)
        out = [[fraction_str(Fraction(float(x)) * scale) for x in row] for row in M]
    else:
        g = np.gcd(N, np.int64(Q))
        g[N == 0] = 1
        num_odd = N // g
        den_odd = np.int64(Q) // g
        shift = E + (a - b)
        # numerator (N/g) P 2^max(sh, 0) and denominator (Q/g) 2^max(-sh, 0) in int64 where their bit
        # lengths leave room (a float bound, kept two bits clear of 2^63); the rest in Python ints
        nbits = np.frexp(np.abs(num_odd).astype(np.float64))[1] + P.bit_length() + np.maximum(shift, 0)
        dbits = np.frexp(den_odd.astype(np.float64))[1] + np.maximum(-shift, 0)
        fast = (nbits <= 61) & (dbits <= 61)
        num = np.where(fast, num_odd * np.int64(P if P < 2**62 else 0) << np.clip(shift, 0, 62), 0)
        den = np.where(fast, den_odd << np.clip(-shift, 0, 62), 1)
        dtext = {int(x): "/" + str(x) for x in np.unique(den)}
        dtext[1] = ""
        out = []
        for nr, dr in zip(num.tolist(), den.tolist()):
            out.append([f"{n}{dtext[dd]}" if n else "0" for n, dd in zip(nr, dr)])
        for i, k in zip(*np.nonzero(~fast & (N != 0))):
            n, dd, sh = int(num_odd[i, k]) * P, int(den_odd[i, k]), int(shift[i, k])
            if sh > 0:
                n <<= sh
            elif sh < 0:
                dd <<= -sh
            out[i][k] = str(n) if dd == 1 else f"{n}/{dd}"
    acc: dict[tuple[int, int], Fraction] = {}
    for i, k, dl in delta:
        acc[(int(i), int(k))] = acc.get((int(i), int(k)), Fraction(0)) + Fraction(dl)
    if acc:
        B = np.asarray(base, dtype=np.float64)
        for (i, k), dl in acc.items():
            out[i][k] = fraction_str((Fraction(float(B[i, k])) + dl) * scale)
    return out


#: ``svm.W`` is written factored (``W_factored``) when it has at least this many entries V·d: the
#: rational strings of V = 2000, d = 1024 took seconds to write and to read back.
FACTORED_MIN_ENTRIES = 20_000


def factored_record(base: np.ndarray, scale: Fraction, delta: Any = ()) -> dict[str, Any]:
    r"""``svm.W_factored`` for :math:`W = \text{scale}\cdot(B + \Delta)`: ``delta`` lists
    ``(i, k, Fraction)`` corrections (repeats add up; zero sums are dropped).

    When :math:`B = 2^{-s} N` with integers :math:`|N| \le 2^{53}` (a quantised point), the record
    holds N, scale :math:`\cdot 2^{-s}` and :math:`2^s\Delta` instead: the same W, and JSON
    integers encode several times faster than floats."""
    acc: dict[tuple[int, int], Fraction] = {}
    for i, k, dl in delta:
        acc[(int(i), int(k))] = acc.get((int(i), int(k)), Fraction(0)) + Fraction(dl)
    B = np.asarray(base, dtype=np.float64)
    if not np.all(np.isfinite(B)):
        raise InputError("a factored matrix has non-finite base entries")
    scale = Fraction(scale)
    values: list = B.tolist()
    N, E = odd_parts(B)
    nz = N != 0
    if nz.any():
        s = -int(E[nz].min())
        bits = np.frexp(np.abs(N[nz]).astype(np.float64))[1] + (E[nz] + s)
        if int(bits.max()) <= 53:  # every N << (E + s) is an integer of at most 53 bits
            values = np.where(nz, N << np.where(nz, E + s, 0), 0).tolist()
            two_s = Fraction(2) ** s
            scale = scale / two_s
            acc = {key: v * two_s for key, v in acc.items()}
    return {"scale": fraction_str(scale), "base": values,
            "delta": sparse_list({key: v for key, v in acc.items() if v})}


def sparse_record(A: np.ndarray) -> list[list]:
    """The nonzero entries of a float matrix (exact dyadics) as ``[[i, k, "p/q"], ...]``, row-major."""
    A = np.asarray(A, dtype=np.float64)
    rows, cols = np.nonzero(A)
    texts = to_strings_dyadic(A[rows, cols].reshape(1, -1))[0] if rows.size else []
    return [[i, k, t] for i, k, t in zip(rows.tolist(), cols.tolist(), texts)]


# ---------------------------------------------------------------------------- the certificate
#: A large dual ``a`` is written sparse (``a_sparse``) when at most this fraction of it is nonzero.
SPARSE_DUAL_MAX_FILL = 0.25


#: Why an instance with token multiplicities gets no certificate: a certificate speaks of the tokens it embeds.
MULTIPLICITY_REFUSED = ("instance: its tokens carry multiplicities (token_multiplicity: a merged vocabulary's NTP-SVM "
                        "weights); a certificate speaks of the tokens it embeds, one each: certify the instance "
                        "without them (the verdicts on (4), (6) and the split are the same)")


def build_certificate(instance: NTPInstance, compat: Verdict, sep: Verdict, svm: SVMBound | None,
                      w_star: WStarClosedForm | None = None, primes: tuple | None = None,
                      E: np.ndarray | None = None) -> dict:
    """Assemble and seal the certificate (:mod:`ntpcert.certificate.format`) of the exact verdicts
    ``compat`` and ``sep`` (:class:`~ntpcert.verdict.Verdict`, exact witnesses); every section is written
    against the table the checker reads (:func:`ntpcert.certificate.schema.check_produced`). ``primes``
    and ``E``: the primes of the count ratios and their exponent matrix (computed when not given)."""
    if instance.token_multiplicity is not None:
        raise InputError(MULTIPLICITY_REFUSED)
    if primes is None or E is None:
        from ntpcert.exact.compatibility import prime_exponents

        primes, E = prime_exponents(instance)
    cert = seal(certificate_body(instance, compat, sep, svm, w_star, primes, E))
    check_produced(cert)
    return cert


def _compatibility_section(compat: Verdict, n_eq: int, primes: tuple, E: np.ndarray,
                           w_star: WStarClosedForm | None) -> dict:
    """The ``compatibility`` section: the claim and its exact witness, by the witness's kind."""
    from ntpcert.verdict import (EmbeddingsFullRank, FullRowRank, NullSpaceBasis, ParticularSolutions,
                                 ViolatingNullVector)

    w = compat.witness
    comp: dict[str, Any] = {"claim": compat.holds, "n_eq": n_eq}
    if compat.holds is None:
        comp["primes"] = list(primes)
        comp["reason"] = compat.reason or "undetermined"
        return comp
    comp["dim_F"] = getattr(w, "rank", None)
    comp["primes"] = list(primes)
    if isinstance(w, ViolatingNullVector):
        comp["violating_null_vector"] = sparse_list(w.y)
        return comp
    comp["null_space_basis"] = [sparse_list(y) for y in w.basis] if isinstance(w, NullSpaceBasis) else []
    if isinstance(w, ParticularSolutions):  # R_p with A_eq vec(R_p) = E_p: the primes whose exponents move
        comp["particular_solutions"] = {str(p): sparse_list(w.particular[p])
                                        for q, p in enumerate(primes) if any(E[:, q])}
    elif isinstance(w, NullSpaceBasis) and w.engine == "frequent-tokens":  # the checker rebuilds the bound
        comp["frequent_tokens_modulus"] = w.modulus
    elif isinstance(w, EmbeddingsFullRank):
        key, value = w.rank_witness.certificate_entry
        comp[key] = value
    elif isinstance(w, (FullRowRank, NullSpaceBasis)) and w.modulus is not None:
        comp["rank_modulus"] = w.modulus
    if w_star is not None and not isinstance(w, ParticularSolutions):  # the R_p already give a solution of (4)
        comp["W_star"] = {"coefficients": {str(p): sparse_list(g) for p, g in w_star.coefficients.items() if g}}
    return comp


def _separability_section(sep: Verdict) -> dict:
    """The ``separability`` section: the claim and its exact witness."""
    from ntpcert.verdict import EmbeddingsFullRank, FarkasRay, FeasiblePoint

    w = sep.witness
    if isinstance(w, EmbeddingsFullRank):
        key, value = w.rank_witness.certificate_entry
        return {"claim": True, key: value}
    if isinstance(w, FeasiblePoint):
        return {"claim": True, "W": matrix_strings(w.point.fractions())}
    if isinstance(w, FarkasRay):
        return {"claim": False, "ray": sparse_list(w.ray)}
    return {"claim": None, "reason": sep.reason}


@unlimited_int_digits()
def certificate_body(
    instance: NTPInstance,
    compat: Verdict,
    sep: Verdict,
    svm: SVMBound | None,
    w_star: WStarClosedForm | None,
    primes: tuple,
    E: np.ndarray,
) -> dict:
    """The certificate before its checksum (its integers of any length written through python-flint,
    with the interpreter's int-string limit lifted only while it is built)."""
    svmsec = None
    claims_svm = None
    if svm is not None and svm.primal_feasible and sep.holds is True:
        svmsec = {
            **_svm_matrices(svm),
            "gap": fraction_str(svm.gap),
            "distance_bound": svm.distance_bound,
            "norm_lower": svm.norm_lower,
            "norm_upper": svm.norm_upper,
        }
        claims_svm = {k: svmsec[k] for k in ("gap", "distance_bound", "norm_lower", "norm_upper")}
    return {
        "format": FORMAT,
        "version": VERSION,
        "instance": {
            "fingerprint": instance.fingerprint(),
            "m": instance.m,
            "d": instance.d,
            "V": instance.V,
            "embedded": instance_record(instance),
        },
        "probabilities_exact_from_floats": bool(instance.probs_exact_from_floats),
        "claims": {
            "compatible": compat.holds,
            "separable": sep.holds,
            "entropy_bound_reachable": and3(compat.holds, sep.holds),
            "svm": claims_svm,
        },
        "compatibility": _compatibility_section(compat, len(E), primes, E, w_star),
        "separability": _separability_section(sep),
        "svm": svmsec,
    }


def _svm_matrices(svm: SVMBound) -> dict[str, Any]:
    """``W`` (rational strings) or, when large, ``W_factored``; ``a`` or, when large and mostly
    zero, ``a_sparse`` (:mod:`ntpcert.certificate.format`)."""
    out: dict[str, Any] = {}
    if svm.W_base.size >= FACTORED_MIN_ENTRIES:
        out["W_factored"] = factored_record(svm.W_base, svm.scale, svm.W_delta)
    else:
        out["W"] = scaled_dyadic_strings(svm.W_base, svm.scale, svm.W_delta)
    if getattr(svm, "a_exact", None) is not None:  # a rational dual (the exact KKT pair): its non-zeros
        from ntpcert.exact.rational import fraction_str

        out["a_sparse"] = [[v, j, fraction_str(x)] for (v, j), x in sorted(svm.a_exact.items()) if x != 0]
    elif svm.a.size >= FACTORED_MIN_ENTRIES and np.count_nonzero(svm.a) <= SPARSE_DUAL_MAX_FILL * svm.a.size:
        out["a_sparse"] = sparse_record(svm.a)
    else:
        out["a"] = to_strings_dyadic(svm.a)
    return out


__all__ = ["FACTORED_MIN_ENTRIES", "MULTIPLICITY_REFUSED", "PACKED_MIN_ENTRIES", "SPARSE_COUNTS_MAX_FILL", "SPARSE_DUAL_MAX_FILL",
           "SPARSE_EMBEDDINGS_MAX_FILL",
           "build_certificate", "certificate_body", "factored_record", "instance_record", "matrix_strings", "pack_f64",
           "record_size_lower_bound", "scaled_dyadic_strings", "sparse_embeddings_record", "sparse_list", "sparse_record", "to_strings_dyadic"]
