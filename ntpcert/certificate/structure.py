r"""The structure of a parsed certificate, checked whole before anything reads a value of it.

:func:`check_schema` walks every section against the table of :mod:`ntpcert.certificate.schema`: keys,
kinds (type-exactly), the header sizes against the embedded arrays, the shapes of the witness matrices
and of the sparse vectors, ``primes`` and the names (the rules are listed in
:mod:`ntpcert.certificate.format`). Values are parsed later, by :mod:`ntpcert.certificate.decode`,
which reads only what passed here.
"""

from __future__ import annotations

import math
from typing import Any

from ntpcert.certificate.format import FORMAT, MAX_SPARSE_CELLS, MAX_SPARSE_EMBEDDING_CELLS, MAX_WHY_NOT_CELLS, VERSION
from ntpcert.certificate.provenance import check_source
from ntpcert.certificate.schema import (
    KIND_TEXT, MAX_SCHEMA_INT, check_kind, check_prime_key, check_primes, check_section, show, type_name,
)
from ntpcert.certificate.packed import packed_length
from ntpcert.errors import CertificateError, CertificateTooLarge


def check_source_section(sec: Any) -> None:
    """The optional ``source`` section: its keys and kinds (and its ``vocabulary``'s) against the schema
    table, then their values (:func:`ntpcert.certificate.provenance.check_source`)."""
    check_section(sec, "source", "source")
    if "vocabulary" in sec:
        check_section(sec["vocabulary"], "source.vocabulary", "source.vocabulary")
    if "reader" in sec:
        check_section(sec["reader"], "source.reader", "source.reader")
    check_source(sec)


def check_schema(cert: Any) -> None:
    """Check the whole structure of a parsed certificate against :data:`~ntpcert.certificate.schema.SCHEMA`.

    Keys, kinds, header sizes, the shapes and entry types of the embedded instance, of the witness
    matrices and of the sparse vectors, ``primes`` and the names: after it, every value in the
    object is a JSON value of its kind (no huge integer, no NaN, nothing that is not JSON). The
    spelling of each witness rational is checked as it is parsed
    (:func:`~ntpcert.certificate.schema.parse_rational`).

    Raises
    ------
    CertificateError
        At the first violation, naming the field and the value.
    """
    check_section(cert, "certificate", "")
    if cert["format"] != FORMAT:
        raise CertificateError(f"format: {show(cert['format'])}, expected {FORMAT!r}")
    if cert["version"] != VERSION:
        raise CertificateError(f"version: {show(cert['version'])}, this checker reads {VERSION}")
    inst = cert["instance"]
    check_section(inst, "instance", "instance")
    m, d, V = inst["m"], inst["d"], inst["V"]
    _check_embedded(inst["embedded"], m, d, V, cert["probabilities_exact_from_floats"])

    claims = cert["claims"]
    check_section(claims, "claims", "claims")
    if claims["svm"] is not None:
        check_section(claims["svm"], "claims.svm", "claims.svm")

    comp = cert["compatibility"]
    claim = _claim(comp, "compatibility", (True, False, None))
    check_section(comp, f"compatibility/{_variant(claim)}", "compatibility")
    check_primes(comp["primes"])
    if claim is True:
        if sum(k in comp for k in ("rank_modulus", "embeddings_rank_modulus", "embeddings_rank_witness",
                                   "frequent_tokens_modulus")) > 1:
            raise CertificateError("compatibility: give at most one of rank_modulus, embeddings_rank_modulus, "
                                   "embeddings_rank_witness and frequent_tokens_modulus")
        if "embeddings_rank_witness" in comp:
            check_section(comp["embeddings_rank_witness"], "rank_witness", "compatibility.embeddings_rank_witness")
        for k, vec in enumerate(comp["null_space_basis"]):
            _check_sparse(vec, f"compatibility.null_space_basis[{k}]")
        if "particular_solutions" in comp:
            if (comp["null_space_basis"] or "rank_modulus" in comp or "embeddings_rank_modulus" in comp
                    or "embeddings_rank_witness" in comp or "frequent_tokens_modulus" in comp or "W_star" in comp):
                raise CertificateError("compatibility.particular_solutions: give them with an empty null_space_basis, "
                                       "no rank modulus and no W_star")
            for key, vec in comp["particular_solutions"].items():
                check_prime_key(key, "compatibility.particular_solutions")
                _check_sparse(vec, f"compatibility.particular_solutions[{key}]")
        if "W_star" in comp:
            check_section(comp["W_star"], "compatibility.W_star", "compatibility.W_star")
            for key, vec in comp["W_star"]["coefficients"].items():
                check_prime_key(key, "compatibility.W_star.coefficients")
                _check_sparse(vec, f"compatibility.W_star.coefficients[{key}]")
    elif claim is False:
        _check_sparse(comp["violating_null_vector"], "compatibility.violating_null_vector")

    sep = cert["separability"]
    claim = _claim(sep, "separability", (True, False, None))
    check_section(sep, f"separability/{_variant(claim)}", "separability")
    if claim is True:
        if sum(k in sep for k in ("W", "embeddings_rank_modulus", "embeddings_rank_witness")) != 1:
            raise CertificateError("separability: a true claim needs exactly one of W, embeddings_rank_modulus and "
                                   "embeddings_rank_witness")
        if "embeddings_rank_witness" in sep:
            check_section(sep["embeddings_rank_witness"], "rank_witness", "separability.embeddings_rank_witness")
        if "W" in sep:
            _check_entries(sep["W"], V, d, "separability.W", _is_str, "a rational string", _all_str)
    elif claim is False:
        _check_sparse(sep["ray"], "separability.ray")

    if cert.get("excess") is not None:  # the excess-loss bracket (ntpcert.certificate.checker.excess)
        check_section(cert["excess"], "excess", "excess")
        _check_sparse(cert["excess"]["q"], "excess.q")
        _check_entries(cert["excess"]["W"], V, d, "excess.W", _is_str, "a rational string", _all_str)

    if "source" in cert:
        check_source_section(cert["source"])
    if "why_not_separable" in cert:
        _check_why_not_separable(cert["why_not_separable"], m, d, V)
    if "why_not_compatible" in cert:
        check_section(cert["why_not_compatible"], "why_not_compatible", "why_not_compatible")
        _check_sparse(cert["why_not_compatible"]["y"], "why_not_compatible.y")
    if "split" in cert:  # its entries are checked by ntpcert.certificate.checker.split
        check_section(cert["split"], "split", "split")

    svm = cert["svm"]
    if svm is not None:
        check_section(svm, "svm", "svm")
        for one, other in (("W", "W_factored"), ("a", "a_sparse")):
            if one not in svm and other not in svm:
                raise CertificateError(f"svm.{one}: missing (give {one} or {other})")
            if one in svm and other in svm:
                raise CertificateError(f"svm: give exactly one of {one} and {other}")
        if "W" in svm:
            _check_entries(svm["W"], V, d, "svm.W", _is_str, "a rational string", _all_str)
        else:
            check_section(svm["W_factored"], "svm.W_factored", "svm.W_factored")
            _check_entries(svm["W_factored"]["base"], V, d, "svm.W_factored.base", _is_number, "a finite number",
                           _all_exact_numbers)
            _check_sparse(svm["W_factored"]["delta"], "svm.W_factored.delta")
        if "a" in svm:
            _check_entries(svm["a"], V, m, "svm.a", _is_str, "a rational string", _all_str)
        else:
            _check_sparse(svm["a_sparse"], "svm.a_sparse")


def _variant(claim: bool | None) -> str:
    return "null" if claim is None else ("true" if claim else "false")


def _claim(sec: Any, field: str, allowed: tuple) -> Any:
    if type(sec) is not dict:
        raise CertificateError(f"{field}: expected an object, got {type_name(sec)} {show(sec)}")
    if "claim" not in sec:
        raise CertificateError(f"{field}.claim: missing")
    c = sec["claim"]
    if not (type(c) is bool or (c is None and None in allowed)):
        kind = "bool|null" if None in allowed else "bool"
        raise CertificateError(f"{field}.claim: expected {KIND_TEXT[kind]}, got {type_name(c)} {show(c)}")
    return c


def check_shape(rows: list, nrows: int, ncols: int, field: str) -> None:
    if len(rows) != nrows:
        raise CertificateError(f"{field}: has {len(rows)} rows, expected {nrows}")
    for i, row in enumerate(rows):
        if type(row) is not list or len(row) != ncols:
            what = f"{len(row)} entries" if type(row) is list else f"{type_name(row)} {show(row)}"
            raise CertificateError(f"{field}[{i}]: has {what}, expected a list of {ncols} entries")


def _check_entries(rows: list, nrows: int, ncols: int, field: str, ok, expected: str, whole=None) -> None:
    """Every entry passes ``ok``; ``whole(row)``, when given, is a quicker test of a whole row that
    implies ``ok`` for each of its entries (a row it does not pass is checked entry by entry, so the
    first failing entry is named either way)."""
    check_shape(rows, nrows, ncols, field)
    for i, row in enumerate(rows):
        if whole is not None and whole(row):
            continue
        for k, x in enumerate(row):
            if not ok(x):
                raise CertificateError(f"{field}[{i}][{k}]: expected {expected}, got {type_name(x)} {show(x)}")


def _is_number(x: Any) -> bool:
    """A finite float, or an integer that a float64 holds exactly."""
    return (type(x) is float and math.isfinite(x)) or (type(x) is int and abs(x) <= 2**53)


def _is_str(x: Any) -> bool:
    return type(x) is str


# whole-row forms of the entry tests (type-exact: ``set(map(type, row))`` holds the exact types)
def _all_str(row: list) -> bool:
    return set(map(type, row)) <= {str}


def _all_counts(row: list) -> bool:
    return set(map(type, row)) <= {int} and (not row or (min(row) >= 0 and max(row) < MAX_SCHEMA_INT))


def _all_finite_floats(row: list) -> bool:
    """Every entry a float and all finite (an infinite or NaN entry makes the exact sum non-finite
    or raises; an overflowing sum of finite entries only sends the row to the entry-by-entry test)."""
    if not set(map(type, row)) <= {float}:
        return False
    try:
        return math.isfinite(math.fsum(row))
    except (OverflowError, ValueError):
        return False


def _all_exact_numbers(row: list) -> bool:
    """Every entry a finite float (:func:`_all_finite_floats`), or every entry an integer of magnitude
    at most 2^53 (which a float64 holds exactly)."""
    if set(map(type, row)) <= {int}:
        return not row or (min(row) >= -(2**53) and max(row) <= 2**53)
    return _all_finite_floats(row)


def _check_sparse(items: Any, field: str) -> None:
    """``[[i, k, "p/q"], ...]`` with indices ``0 <= i, k < 2**63`` (the values are parsed later)."""
    check_kind(items, "list", field)
    for n, t in enumerate(items):
        if type(t) is not list or len(t) != 3 or not (is_count(t[0]) and is_count(t[1]) and type(t[2]) is str):
            raise CertificateError(f"{field}[{n}]: expected [i, k, \"p/q\"] with indices >= 0, got {show(t)}")


def _check_indices(items: Any, bound: int, field: str) -> None:
    """A strictly increasing list of integers ``0 <= i < bound``."""
    check_kind(items, "list", field)
    last = -1
    for n, x in enumerate(items):
        if not (type(x) is int and last < x < bound):
            raise CertificateError(f"{field}[{n}]: expected an integer index in ({last}, {bound}) (strictly "
                                   f"increasing), got {type_name(x)} {show(x)}")
        last = x


def _check_why_not_separable(sec: Any, m: int, d: int, V: int) -> None:
    field = "why_not_separable"
    check_section(sec, field, field)
    _check_indices(sec["contexts"], m, f"{field}.contexts")
    if not sec["contexts"]:
        raise CertificateError(f"{field}.contexts: empty")
    _check_sparse(sec["ray"], f"{field}.ray")
    dels = sec["deletions"]
    if len(dels) != len(sec["contexts"]):
        raise CertificateError(f"{field}.deletions: {len(dels)} entries for {len(sec['contexts'])} contexts")
    cells = 0
    for k, rec in enumerate(dels):
        name = f"{field}.deletions[{k}]"
        check_section(rec, "why_not_separable.deletion", name)
        _check_indices(rec["cols"], d, f"{name}.cols")
        cells += V * len(rec["cols"])
        if cells > MAX_WHY_NOT_CELLS:
            raise CertificateTooLarge(f"{name}.W: the deletions' points exceed {MAX_WHY_NOT_CELLS} entries in all")
        if rec["cols"]:
            _check_entries(rec["W"], V, len(rec["cols"]), f"{name}.W", _is_str, "a rational string", _all_str)
        elif rec["W"] != []:
            raise CertificateError(f"{name}.W: expected [] with no columns, got {show(rec['W'])}")


def is_count(x: Any) -> bool:
    return type(x) is int and 0 <= x < MAX_SCHEMA_INT


def _check_sparse_counts(items: list, m: int, V: int) -> None:
    """``[[j, t, c], ...]``: ``0 <= j < m``, ``0 <= t < V``, ``0 < c < 2**63`` (integers, type-exactly),
    ``(j, t)`` strictly increasing, and m·V at most :data:`MAX_SPARSE_CELLS`."""
    field = "instance.embedded.counts_sparse"
    if m * V > MAX_SPARSE_CELLS:
        raise CertificateTooLarge(f"instance.embedded.V: m * V = {m} * {V} exceeds {MAX_SPARSE_CELLS} cells")
    last = (-1, -1)
    for n, t in enumerate(items):
        if not (type(t) is list and len(t) == 3 and set(map(type, t)) <= {int} and 0 <= t[0] < m and 0 <= t[1] < V
                and 0 < t[2] < MAX_SCHEMA_INT):
            raise CertificateError(f"{field}[{n}]: expected [j, t, c] with 0 <= j < {m}, 0 <= t < {V} and an integer "
                                   f"count c > 0, got {show(t)}")
        key = (t[0], t[1])
        if key <= last:
            raise CertificateError(f"{field}[{n}]: entry {show(list(key))} does not come after {show(list(last))} "
                                   "(entries are sorted by (j, t), each once)")
        last = key


def _check_names(rec: dict, key: str, n: int) -> None:
    if key not in rec:
        return
    names = rec[key]
    if len(names) != n:
        raise CertificateError(f"instance.embedded.{key}: has {len(names)} entries, expected {n}")
    for i, x in enumerate(names):
        check_kind(x, "str", f"instance.embedded.{key}[{i}]")


def _check_embedded(rec: Any, m: int, d: int, V: int, from_floats: bool) -> None:
    if type(rec) is not dict:
        raise CertificateError(f"instance.embedded: expected an object, got {type_name(rec)} {show(rec)}")
    variant = "counts" if "counts" in rec else ("counts_sparse" if "counts_sparse" in rec else "probs")
    check_section(rec, f"instance.embedded/{variant}", "instance.embedded")
    if (("embeddings" in rec) + ("embeddings_sparse" in rec) + ("embeddings_f64" in rec) + ("embeddings_f32" in rec)
            != 1 or ("embeddings" in rec) == ("embeddings_shape" in rec)):
        raise CertificateError("instance.embedded: give embeddings, or embeddings_sparse, embeddings_f64 or "
                               "embeddings_f32 with embeddings_shape")
    if "embeddings_sparse" in rec:
        check_sparse_embeddings(rec, m, d)
    if "embeddings_f64" in rec or "embeddings_f32" in rec:
        check_packed_embeddings(rec, m, d)
    # the header against the embedded arrays' own sizes, so that a header lie is named as one
    emb, laws = rec.get("embeddings", []), rec[variant]
    sizes = {"m": len(emb) if "embeddings" in rec else m, "d": len(emb[0]) if emb and type(emb[0]) is list else None,
             "V": rec["V"] if variant == "counts_sparse" else (len(laws[0]) if laws and type(laws[0]) is list else None)}
    for key, header in (("m", m), ("d", d), ("V", V)):
        if sizes[key] is not None and sizes[key] != header:
            raise CertificateError(f"instance.{key}: claims {header}, the embedded instance has {key} = {sizes[key]}")
    if "embeddings" in rec:
        _check_entries(rec["embeddings"], m, d, "instance.embedded.embeddings", _is_number, "a finite number",
                       _all_exact_numbers)
    if variant == "counts":
        if from_floats:
            raise CertificateError("probabilities_exact_from_floats: true, but the embedded instance has counts")
        _check_entries(rec["counts"], m, V, "instance.embedded.counts", is_count, "a non-negative integer",
                       _all_counts)
    elif variant == "counts_sparse":
        if from_floats:
            raise CertificateError("probabilities_exact_from_floats: true, but the embedded instance has counts")
        _check_sparse_counts(rec["counts_sparse"], m, V)
    else:
        if from_floats:
            _check_entries(rec["probs"], m, V, "instance.embedded.probs", lambda x: type(x) is float and math.isfinite(x),
                           "a float (probabilities_exact_from_floats is true)", _all_finite_floats)
        else:
            _check_entries(rec["probs"], m, V, "instance.embedded.probs", lambda x: type(x) is str,
                           "a rational string (probabilities_exact_from_floats is false)", _all_str)
        weights = rec["weights"]
        if len(weights) != m:
            raise CertificateError(f"instance.embedded.weights: has {len(weights)} entries, expected {m}")
        for j, w in enumerate(weights):
            check_kind(w, "rational", f"instance.embedded.weights[{j}]")
    _check_names(rec, "token_names", V)
    _check_names(rec, "context_names", m)


def check_packed_embeddings(rec: dict, m: int, d: int) -> None:
    """The structure of a packed H (:mod:`ntpcert.certificate.packed`) against the header's m and d:
    the shape and the text's length, before anything is decoded; the bytes themselves are checked as
    they are decoded (:func:`~ntpcert.certificate.packed.unpack_f64`)."""
    shape = rec.get("embeddings_shape")
    if shape != [m, d] or set(map(type, shape)) != {int}:
        raise CertificateError(f"instance.embedded.embeddings_shape: {show(shape)}, expected [{m}, {d}] (the header)")
    key, width = ("embeddings_f64", 8) if "embeddings_f64" in rec else ("embeddings_f32", 4)
    want = packed_length(m * d, width)
    if len(rec[key]) != want:
        raise CertificateError(f"instance.embedded.{key}: has {len(rec[key])} characters, expected {want} "
                               f"(base64 of {m * d} float{8 * width} values, {m} x {d})")


def check_sparse_embeddings(rec: dict, m: int, d: int) -> None:
    """The structure of a sparse H against the header's m and d (module doc); raises
    :class:`CertificateError` naming the field and the value."""
    shape = rec.get("embeddings_shape")
    if type(shape) is not list or [type(x) for x in shape] != [int, int] or shape != [m, d]:  # 40.0 is not 40
        raise CertificateError(f"instance.embedded.embeddings_shape: {show(shape)}, expected [{m}, {d}] (the header)")
    if m * d > MAX_SPARSE_EMBEDDING_CELLS:
        raise CertificateTooLarge(f"instance.embedded.embeddings_shape: m * d = {m} * {d} exceeds "
                                  f"{MAX_SPARSE_EMBEDDING_CELLS} cells")
    field = "instance.embedded.embeddings_sparse"
    last = (-1, -1)
    for n, t in enumerate(rec["embeddings_sparse"]):
        ok = (type(t) is list and len(t) == 3 and type(t[0]) is int and type(t[1]) is int
              and 0 <= t[0] < m and 0 <= t[1] < d
              and ((type(t[2]) is int and 0 < abs(t[2]) <= 2 ** 53) or (type(t[2]) is float and math.isfinite(t[2])
                                                                       and t[2] != 0)))
        if not ok:
            raise CertificateError(f"{field}[{n}]: expected [j, i, x] with 0 <= j < {m}, 0 <= i < {d} and a finite "
                                   f"non-zero number x, got {show(t)}")
        if (t[0], t[1]) <= last:
            raise CertificateError(f"{field}[{n}]: entry {show(t[:2])} does not come after {show(list(last))} "
                                   "(entries are sorted by (j, i), each once)")
        last = (t[0], t[1])


__all__ = ["check_packed_embeddings", "check_schema", "check_shape", "check_source_section", "check_sparse_embeddings",
           "is_count"]
