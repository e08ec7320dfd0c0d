r"""The certificate file: one JSON object, rationals as strings, naming its instance by a hash.

Layout (``format = "ntpcert-certificate"``, ``version = 1``)::

    {
      "format": "ntpcert-certificate", "version": 1,
      "instance": {"fingerprint": SHA256, "m": .., "d": .., "V": .., "embedded": INSTANCE},
      "probabilities_exact_from_floats": bool,
      "claims": {"compatible": bool|null, "separable": bool|null,
                 "entropy_bound_reachable": bool|null,
                 "svm": {"gap": "p/q", "distance_bound": x, "norm_lower": x, "norm_upper": x} | null},
      "compatibility": {"claim": true, "n_eq": r, "dim_F": k, "primes": [..],
                        "null_space_basis": [[[j, z, "p/q"], ..], ..], "W_star": {...} (optional),
                        "particular_solutions": {"p": [[v, i, "p/q"], ..], ..} (optional; basis empty),
                        "rank_modulus": p (optional), "embeddings_rank_modulus": p (optional),
                        "embeddings_rank_witness": {pivots, core_rows, core_cols, core_rank, modulus} (optional)}
                     | {"claim": false, ..., "dim_F": k|null, "violating_null_vector": [[j, z, "p/q"], ..]}
                     | {"claim": null, "n_eq": r, "primes": [..], "reason": ".."},
      "separability": {"claim": true, "W": [["p/q", ..], ..]}            (V rows of d entries)
                    | {"claim": true, "embeddings_rank_modulus": p}      (Lemma 1: d >= m, rank H = m)
                    | {"claim": true, "embeddings_rank_witness": {...}}  (Lemma 1, rank m by
                                                     ntpcert.exact.rank_witness: peeled pivots + a core mod p)
                    | {"claim": false, "ray": [[v, j, "p/q"], ..]}       (nonzeros of a, shape (V, m))
                    | {"claim": null, "reason": ".."},
      "svm": {"W": [[..]] | "W_factored": {"scale": "p/q", "base": [[x, ..], ..], "delta": [[v, i, "p/q"], ..]},
              "a": [[..]] | "a_sparse": [[v, j, "p/q"], ..], "gap": "p/q", "distance_bound": x,
              "norm_lower": x, "norm_upper": x} | null,
      "excess": {"q": [[j, v, "p/q"], ..], "W": [["p/q", ..], ..], "lower": x, "upper": x,
                 "excess_lower": x, "excess_upper": x} | null | absent,
      "why_not_separable": {"contexts": [j, ..], "ray": [[v, j, "p/q"], ..],
                            "deletions": [{"context": j, "cols": [i, ..], "W": [["p/q", ..], ..]}, ..]} | absent,
      "why_not_compatible": {"y": [[j, z, "p/q"], ..]} | absent,
      "source": {"kind": "model", "files": [[name, SHA256], ..], ..} | absent  (ntpcert.pipeline.provenance),
      "checksum": SHA256 of the canonical JSON of every other field
    }

* Rationals are strings ``"p/q"`` or ``"p"`` (integers only), so no value passes through a float.
* ``svm.W_factored`` (written for large W, :data:`FACTORED_MIN_ENTRIES`) stands for
  :math:`W = \text{scale}\cdot(B + \Delta)`: ``base`` B holds finite floats, read as the exact
  dyadic rationals they are (like the embeddings), and ``delta`` the nonzero entries of a sparse
  rational :math:`\Delta` (each (v, i) once). It replaces ``W`` (exactly one of the two); the
  checker forms the same exact rationals from it (:func:`factored_rationals`). Likewise a large,
  mostly-zero dual ``a`` is written as ``a_sparse``, its nonzero entries (each (v, j) once).
* Equality rows are named by ``(j, z)``: context j, token :math:`z \in S_j` other than the anchor
  :math:`z_j = \min S_j`; the row is :math:`(e_z - e_{z_j}) \otimes h_j`.
* ``instance.fingerprint`` is :meth:`~ntpcert.instance.NTPInstance.fingerprint` (SHA-256 of the
  embeddings' bytes and the exact counts or probabilities and weights). ``instance.embedded`` holds
  the instance itself (embeddings as shortest round-tripping floats, or as integers when every
  one is an integer of magnitude at most 2^53 and none is -0.0, counts as integers or
  probabilities and weights as fraction strings), so a certificate checks on its own. Counts that
  are mostly zero (:data:`SPARSE_COUNTS_MAX_FILL`) are written as ``"V": V, "counts_sparse":
  [[j, t, c], ...]``: the positive counts only, ``(j, t)`` strictly increasing (one spelling), at
  most :data:`MAX_SPARSE_CELLS` cells m·V. Mostly-zero embeddings (one-hot) are written as
  ``"embeddings_shape": [m, d], "embeddings_sparse": [[j, i, x], ...]`` instead
  (:mod:`ntpcert.pipeline.sparse_embeddings`).
* ``why_not_separable`` (with a false separability claim): an irreducible non-separable set of
  contexts (strictly increasing), a Farkas ray whose support is exactly that set, and per context
  of the set, in the same order, a rational W on the embedding columns ``cols`` (V rows of
  ``len(cols)`` entries; W is zero on the other columns) that separates the set without it (``cols``
  and ``W`` empty for a set of one context). ``why_not_compatible`` (with a false compatibility
  claim): a violating null vector y whose rows form a circuit (an irreducible cycle of log-odds).
  Both are checked by :mod:`ntpcert.pipeline.why_not_verify`.
* ``checksum`` catches truncation and accidental edits; a deliberate forger can recompute it, which
  is why :mod:`ntpcert.pipeline.verify` re-derives every claim from the instance.

**Strictness.** A file is read by :func:`loads` / :func:`load` and checked by :func:`check_schema`
before anything else looks at it:

* the file is at most :data:`MAX_CERTIFICATE_BYTES` (256 MiB), refused *before* it is read;
* a repeated key in any JSON object, the constants ``NaN``/``Infinity``/``-Infinity``, a number
  literal that overflows to infinity, and an integer literal of more than
  :data:`MAX_JSON_INTEGER_DIGITS` digits are refused while parsing (so two readers can never see
  two different certificates in one file);
* every object has exactly the keys of its section in :data:`SCHEMA` (unknown keys are refused at
  every level, ``claims`` included), each of the kind written there, **type-exactly**: a boolean
  is ``true``/``false`` (never ``1``, ``0`` or ``1.0``), an integer is not a boolean, a bound is a
  finite JSON float;
* rationals are *canonical* strings (lowest terms, no ``+``, no leading zeros, no ``-0``, no
  ``/1``), so every value has exactly one spelling;
* matrix and list shapes agree with the header ``m``, ``d``, ``V``.

Every failure raises :class:`~ntpcert.errors.CertificateError` with a one-line message that names
the field and shows the offending value.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain, repeat
from operator import contains
from typing import Any

import flint
import numpy as np

from ntpcert.errors import CertificateError, InputError
from ntpcert.pipeline.cert_schema import (  # noqa: F401  the schema table and its kinds, re-exported: one table
    KIND_TEXT as _KIND_TEXT, MAX_JSON_INTEGER_DIGITS, MAX_SCHEMA_INT, RATIONAL_RE, SCHEMA, check_kind,
    check_primes as _check_primes, check_prime_key as _check_prime_key, check_section, digits_to_int as _digits_to_int,
    parse_rational, show, type_name as _type_name,
)
from ntpcert.exact.rational import fraction_str
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.provenance import check_source
from ntpcert.pipeline.sparse_embeddings import check_sparse_embeddings, dense_embeddings, sparse_embeddings_record

FORMAT = "ntpcert-certificate"
VERSION = 1

# Exact witnesses hold integers of any size (a null vector of d + 1 dyadic embeddings has entries of
# about 66 d bits: over 5,000 digits at d = 256); Python >= 3.11 refuses str <-> int beyond 4,300 digits.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)

#: The largest certificate file (bytes) :func:`load` reads; a larger one is refused before it is read.
MAX_CERTIFICATE_BYTES = 256 * 2**20

#: The most entries the points of a ``why_not_separable`` section may hold in all (V per column).
MAX_WHY_NOT_CELLS = 2_000_000

# ---------------------------------------------------------------------------- the schema
def check_schema(cert: Any) -> None:
    """Check the whole structure of a parsed certificate against :data:`SCHEMA`.

    Keys, kinds, header sizes, the shapes and entry types of the embedded instance, of the witness
    matrices and of the sparse vectors, ``primes`` and the names: after it, every value in the
    object is a JSON value of its kind (no huge integer, no NaN, nothing that is not JSON). The
    spelling of each witness rational is checked as it is parsed (:func:`parse_rational`).

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
    _check_primes(comp["primes"])
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
                _check_prime_key(key, "compatibility.particular_solutions")
                _check_sparse(vec, f"compatibility.particular_solutions[{key}]")
        if "W_star" in comp:
            check_section(comp["W_star"], "compatibility.W_star", "compatibility.W_star")
            for key, vec in comp["W_star"]["coefficients"].items():
                _check_prime_key(key, "compatibility.W_star.coefficients")
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

    if cert.get("excess") is not None:  # the excess-loss bracket (ntpcert.pipeline.excess_verify)
        check_section(cert["excess"], "excess", "excess")
        _check_sparse(cert["excess"]["q"], "excess.q")
        _check_entries(cert["excess"]["W"], V, d, "excess.W", _is_str, "a rational string", _all_str)

    if "source" in cert:
        check_section(cert["source"], "source", "source")
        check_source(cert["source"])
    if "why_not_separable" in cert:
        _check_why_not_separable(cert["why_not_separable"], m, d, V)
    if "why_not_compatible" in cert:
        check_section(cert["why_not_compatible"], "why_not_compatible", "why_not_compatible")
        _check_sparse(cert["why_not_compatible"]["y"], "why_not_compatible.y")

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
        raise CertificateError(f"{field}: expected an object, got {_type_name(sec)} {show(sec)}")
    if "claim" not in sec:
        raise CertificateError(f"{field}.claim: missing")
    c = sec["claim"]
    if not (type(c) is bool or (c is None and None in allowed)):
        kind = "bool|null" if None in allowed else "bool"
        raise CertificateError(f"{field}.claim: expected {_KIND_TEXT[kind]}, got {_type_name(c)} {show(c)}")
    return c


def _check_shape(rows: list, nrows: int, ncols: int, field: str) -> None:
    if len(rows) != nrows:
        raise CertificateError(f"{field}: has {len(rows)} rows, expected {nrows}")
    for i, row in enumerate(rows):
        if type(row) is not list or len(row) != ncols:
            what = f"{len(row)} entries" if type(row) is list else f"{_type_name(row)} {show(row)}"
            raise CertificateError(f"{field}[{i}]: has {what}, expected a list of {ncols} entries")


def _check_entries(rows: list, nrows: int, ncols: int, field: str, ok, expected: str, whole=None) -> None:
    """Every entry passes ``ok``; ``whole(row)``, when given, is a quicker test of a whole row that
    implies ``ok`` for each of its entries (a row it does not pass is checked entry by entry, so the
    first failing entry is named either way)."""
    _check_shape(rows, nrows, ncols, field)
    for i, row in enumerate(rows):
        if whole is not None and whole(row):
            continue
        for k, x in enumerate(row):
            if not ok(x):
                raise CertificateError(f"{field}[{i}][{k}]: expected {expected}, got {_type_name(x)} {show(x)}")


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
        if type(t) is not list or len(t) != 3 or not (_is_count(t[0]) and _is_count(t[1]) and type(t[2]) is str):
            raise CertificateError(f"{field}[{n}]: expected [i, k, \"p/q\"] with indices >= 0, got {show(t)}")


def _check_indices(items: Any, bound: int, field: str) -> None:
    """A strictly increasing list of integers ``0 <= i < bound``."""
    check_kind(items, "list", field)
    last = -1
    for n, x in enumerate(items):
        if not (type(x) is int and last < x < bound):
            raise CertificateError(f"{field}[{n}]: expected an integer index in ({last}, {bound}) (strictly "
                                   f"increasing), got {_type_name(x)} {show(x)}")
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
            raise CertificateError(f"{name}.W: the deletions' points exceed {MAX_WHY_NOT_CELLS} entries in all")
        if rec["cols"]:
            _check_entries(rec["W"], V, len(rec["cols"]), f"{name}.W", _is_str, "a rational string", _all_str)
        elif rec["W"] != []:
            raise CertificateError(f"{name}.W: expected [] with no columns, got {show(rec['W'])}")


def _is_count(x: Any) -> bool:
    return type(x) is int and 0 <= x < MAX_SCHEMA_INT


def _check_sparse_counts(items: list, m: int, V: int) -> None:
    """``[[j, t, c], ...]``: ``0 <= j < m``, ``0 <= t < V``, ``0 < c < 2**63`` (integers, type-exactly),
    ``(j, t)`` strictly increasing, and m·V at most :data:`MAX_SPARSE_CELLS`."""
    field = "instance.embedded.counts_sparse"
    if m * V > MAX_SPARSE_CELLS:
        raise CertificateError(f"instance.embedded.V: m * V = {m} * {V} exceeds {MAX_SPARSE_CELLS} cells")
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
        raise CertificateError(f"instance.embedded: expected an object, got {_type_name(rec)} {show(rec)}")
    variant = "counts" if "counts" in rec else ("counts_sparse" if "counts_sparse" in rec else "probs")
    check_section(rec, f"instance.embedded/{variant}", "instance.embedded")
    if ("embeddings" in rec) == ("embeddings_sparse" in rec) or ("embeddings_sparse" in rec) != (
            "embeddings_shape" in rec):
        raise CertificateError("instance.embedded: give embeddings, or embeddings_sparse with embeddings_shape")
    if "embeddings_sparse" in rec:  # ntpcert.pipeline.sparse_embeddings
        check_sparse_embeddings(rec, m, d)
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
        _check_entries(rec["counts"], m, V, "instance.embedded.counts", _is_count, "a non-negative integer",
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


# ---------------------------------------------------------------------------- instance record
#: Counts are embedded sparse when at most this fraction of them is positive (and m·V fits
#: :data:`MAX_SPARSE_CELLS`); a word-level corpus (m = V = 3,594, 0.3 % positive) took 26 MB dense.
SPARSE_COUNTS_MAX_FILL = 0.25
#: The largest count matrix (m·V cells) a sparse record may describe (the checker builds it dense,
#: 8 bytes a cell). 10^8 admits the whitespace-split pydoc text (m = V = 8,831: 78 M cells, 156 MB as
#: dense JSON, 2 MB sparse), which ``--max-entries 100000000`` builds.
MAX_SPARSE_CELLS = 100_000_000


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
        rec["embeddings"] = H.astype(np.int64).tolist() if integral else H.tolist()
    if instance.counts is not None:
        C = np.asarray(instance.counts)
        j, t = np.nonzero(C)  # row-major order: (j, t) increasing
        if j.size <= SPARSE_COUNTS_MAX_FILL * C.size and C.size <= MAX_SPARSE_CELLS:
            rec["V"] = int(C.shape[1])
            rec["counts_sparse"] = np.stack([j, t, C[j, t]], axis=1).astype(np.int64).tolist()
        else:
            rec["counts"] = C.tolist()
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


def instance_from_record(rec: Any) -> NTPInstance:
    """Rebuild the embedded instance (whose structure :func:`check_schema` has checked); raises
    :class:`CertificateError` when it is malformed."""
    if type(rec) is not dict or not ("embeddings" in rec or "embeddings_sparse" in rec):
        raise CertificateError("instance.embedded: missing or not an object with 'embeddings'")
    if "embeddings_sparse" in rec:  # checked by check_schema (check_sparse_embeddings)
        rec = {**{k: v for k, v in rec.items() if k not in ("embeddings_sparse", "embeddings_shape")},
               "embeddings": dense_embeddings(rec)}
    names = {k: rec.get(k) for k in ("token_names", "context_names")}
    name = rec.get("name")
    if type(name) is not str:
        raise CertificateError(f"instance.embedded.name: expected a string, got {_type_name(name)} {show(name)}")
    try:
        if "counts" in rec:
            return NTPInstance.from_counts(rec["embeddings"], rec["counts"], name=name, **names)
        if "counts_sparse" in rec:  # checked by check_schema: indices in range, sorted, m * V bounded
            entries = np.asarray(rec["counts_sparse"], dtype=np.int64).reshape(-1, 3)
            counts = np.zeros((len(rec["embeddings"]), rec["V"]), dtype=np.int64)
            counts[entries[:, 0], entries[:, 1]] = entries[:, 2]
            return NTPInstance.from_counts(rec["embeddings"], counts, name=name, **names)
        if "probs" in rec:
            return NTPInstance.from_probs(rec["embeddings"], rec["probs"], rec.get("weights"), name=name, **names)
    except InputError as err:
        raise CertificateError(f"instance.embedded: {err}") from None
    raise CertificateError("instance.embedded: neither 'counts' nor 'probs'")


# ---------------------------------------------------------------------------- rationals
def matrix_strings(M) -> list[list[str]]:
    """An exact matrix (Fractions, ints or dyadic floats) as rows of rational strings."""
    return [[fraction_str(x) for x in row] for row in M]


def matrix_fractions(rows: Any, shape: tuple[int, int], field: str) -> list[list[Fraction]]:
    """Parse rows of canonical rational strings, checking the shape."""
    if type(rows) is not list:
        raise CertificateError(f"{field}: expected a list of {shape[0]} rows, got {_type_name(rows)} {show(rows)}")
    _check_shape(rows, shape[0], shape[1], field)
    return [[parse_rational(x, f"{field}[{i}][{k}]") for k, x in enumerate(row)] for i, row in enumerate(rows)]


#: Characters of a canonical rational string; :func:`matrix_rationals` deletes them to find any other.
_RATIONAL_CHARS = str.maketrans("", "", "0123456789-/")
#: Numerators and denominators of at most this many characters fit an int64 (below 10^18 < 2^60).
_SHORT_NUM = 18
#: 1, 10, ..., 10^18: the number of decimal digits of 0 < x < 10^19 is how many of them are <= x.
_POWERS_OF_TEN = np.array([10**k for k in range(19)], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class RationalMatrix:
    """A matrix of canonical rationals read by :func:`matrix_rationals`, exactly.

    Entry ``(i, k)`` is ``num[i, k] / den[i, k]`` (int64 arrays; ``|num| < 10^18``,
    ``1 <= den < 10^18``, lowest terms), except for the entries listed in ``big``:
    ``big[(i, k)] = (p, q)`` (Python ints, ``q >= 1``, lowest terms) where a numerator or
    denominator is longer; ``num`` is 0 and ``den`` 1 there.
    """

    num: np.ndarray
    den: np.ndarray
    big: dict[tuple[int, int], tuple[int, int]]

    @property
    def shape(self) -> tuple[int, int]:
        return self.num.shape

    def pair(self, i: int, k: int) -> tuple[int, int]:
        """Entry ``(i, k)`` as ``(p, q)``."""
        got = self.big.get((i, k))
        return got if got is not None else (int(self.num[i, k]), int(self.den[i, k]))

    def fractions(self) -> list[list[Fraction]]:
        """Every entry as a Fraction (what :func:`matrix_fractions` returns)."""
        out = [[Fraction(p, q) for p, q in zip(nr, dr)] for nr, dr in zip(self.num.tolist(), self.den.tolist())]
        for (i, k), (p, q) in self.big.items():
            out[i][k] = Fraction(p, q)
        return out

    def nonzero(self) -> dict[tuple[int, int], Fraction]:
        """The nonzero entries ``{(i, k): Fraction}``, in row-major order."""
        rows, cols = np.nonzero((self.num != 0) | self._big_mask())
        return {(i, k): Fraction(*self.pair(i, k)) for i, k in zip(rows.tolist(), cols.tolist())}

    def _big_mask(self) -> np.ndarray:
        mask = np.zeros(self.num.shape, dtype=bool)
        for i, k in self.big:
            mask[i, k] = True
        return mask


def matrix_rationals(rows: Any, shape: tuple[int, int], field: str) -> RationalMatrix:
    """Parse rows of canonical rational strings, checking the shape: the same checks, the same
    first error and the same values as :func:`matrix_fractions`, without a Fraction per entry.

    The whole matrix is read at once: every entry a string; ``"0"`` entries set aside; the others
    made only of ``0-9``, ``-`` and ``/``, with at most one ``/``; the numerators and denominators
    read by ``int`` (which refuses an empty part and a ``-`` anywhere but first), each exactly as
    long as the decimal spelling of its value (no leading zero, no ``-0``, no zero numerator), every
    denominator above 1, every pair coprime. Parts too long for int64 are read one by one like
    :func:`parse_rational`. Whatever fails any of this is read again entry by entry by
    :func:`parse_rational`, which raises on the first bad entry in row-major order, naming it."""
    if type(rows) is not list:
        raise CertificateError(f"{field}: expected a list of {shape[0]} rows, got {_type_name(rows)} {show(rows)}")
    _check_shape(rows, shape[0], shape[1], field)
    flat = list(chain.from_iterable(rows))
    got = _read_rationals(flat)
    if got is None:
        return _rationals_one_by_one(rows, shape, field)
    num, den, big = got
    ncols = shape[1]
    return RationalMatrix(num.reshape(shape), den.reshape(shape), {divmod(i, ncols): pq for i, pq in big.items()})


def _read_rationals(flat: list) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, int]]] | None:
    """``(num, den, big)`` of a flat list of canonical rational strings, or None when any entry is
    not one (or is unusual enough that the entry-by-entry reading should decide)."""
    n = len(flat)
    num = np.zeros(n, dtype=np.int64)
    den = np.ones(n, dtype=np.int64)
    big: dict[int, tuple[int, int]] = {}
    if n == 0:
        return num, den, big
    if set(map(type, flat)) != {str}:
        return None
    entries = np.array(flat, dtype=object)
    where = np.flatnonzero(entries != "0")
    if where.size == 0:
        return num, den, big
    texts = entries[where].tolist()
    slash = np.fromiter(map(contains, texts, repeat("/")), dtype=bool, count=len(texts))
    body = "/".join(texts)  # every numerator and denominator, one "/" apart
    if body.translate(_RATIONAL_CHARS) or body.count("/") != len(texts) - 1 + int(slash.sum()):
        return None  # a character that no canonical rational has, or an entry with two "/"
    parts = np.array(body.split("/"), dtype=object)
    first = np.arange(len(texts)) + np.cumsum(slash) - slash  # where each entry's numerator is in parts
    nums = parts[first].tolist()
    dens = parts[first[slash] + 1].tolist()
    try:  # int refuses "", "-", "1-2", "--1" (and digit strings past its limit)
        pv = list(map(int, nums))
        dmap = {t: int(t) for t in set(dens)}  # few distinct denominators, each read once
    except ValueError:
        return None
    # canonical spelling: each part exactly str() of its value (no leading zero, no "-0"; a zero
    # numerator, never canonical in a nonzero entry, has no digits); denominators above 1
    if any(v <= 1 or len(t) != len(str(v)) for t, v in dmap.items()):
        return None
    for t in dmap:
        if len(t) > _SHORT_NUM:
            dmap[t] = 0  # too long for int64: its entries are read one by one
    q = np.ones(len(nums), dtype=np.int64)
    q[slash] = np.array(list(map(dmap.__getitem__, dens)), dtype=np.int64)
    lens = np.fromiter(map(len, nums), dtype=np.int64, count=len(nums))
    long = (lens > _SHORT_NUM) | (q == 0)
    if long.any():  # entries with a part too long for int64: read one by one
        for t in np.flatnonzero(long).tolist():
            pq = _rational_pair(texts[t])
            if pq is None:
                return None
            big[int(where[t])] = pq
            pv[t] = 0
    p = np.array(pv, dtype=np.int64)
    digits = np.searchsorted(_POWERS_OF_TEN, np.abs(p), side="right")
    if ((digits + (p < 0) != lens) & ~long).any():
        return None
    frac = slash & ~long
    if frac.any() and not _coprime(p[frac], q[frac]):
        return None
    p[long], q[long] = 0, 1
    num[where] = p
    den[where] = q
    return num, den, big


def _coprime(p: np.ndarray, q: np.ndarray) -> bool:
    """Every ``gcd(p_i, q_i) == 1`` (int64 arrays, q > 1): by the primes of each distinct q when
    there are few of them, else by ``np.gcd``."""
    dq, inv = np.unique(q, return_inverse=True)
    if dq.size > 64:
        return not (np.gcd(p, q) != 1).any()
    for g, qd in enumerate(dq.tolist()):
        pg = p[inv == g]
        for r, _ in flint.fmpz(qd).factor():
            if not (pg % int(r)).all():
                return False
    return True


def _rational_pair(text: str) -> tuple[int, int] | None:
    """``(p, q)`` of a canonical rational string (the rules of :func:`parse_rational`), or None."""
    match = RATIONAL_RE.fullmatch(text)
    if match is None or text == "-0":
        return None
    p = _digits_to_int(match.group(1))
    if match.group(2) is None:
        return p, 1
    q = _digits_to_int(match.group(2))
    if q == 1 or math.gcd(p, q) != 1:
        return None
    return p, q


def _rationals_one_by_one(rows: list, shape: tuple[int, int], field: str) -> RationalMatrix:
    """The slow reading of :func:`matrix_rationals`: :func:`parse_rational` entry by entry."""
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    big: dict[tuple[int, int], tuple[int, int]] = {}
    limit = 10**_SHORT_NUM  # what the quick reading keeps in int64
    for i, row in enumerate(rows):
        for k, x in enumerate(row):
            f = parse_rational(x, f"{field}[{i}][{k}]")
            if abs(f.numerator) < limit and f.denominator < limit:
                num[i, k], den[i, k] = f.numerator, f.denominator
            else:
                big[(i, k)] = (f.numerator, f.denominator)
    return RationalMatrix(num, den, big)


def sparse_list(vec: dict) -> list[list]:
    """``{(i, k): Fraction}`` as sorted ``[[i, k, "p/q"], ...]``."""
    return [[int(i), int(k), fraction_str(v)] for (i, k), v in sorted(vec.items())]


def sparse_dict(items: Any, field: str) -> dict[tuple[int, int], Fraction]:
    """Parse ``[[i, k, "p/q"], ...]`` (indices non-negative integers); repeated keys are malformed."""
    if type(items) is not list:
        raise CertificateError(f"{field}: expected a list of [i, k, \"p/q\"], got {_type_name(items)} {show(items)}")
    out: dict[tuple[int, int], Fraction] = {}
    for n, t in enumerate(items):
        if type(t) is not list or len(t) != 3 or not all(_is_count(x) for x in t[:2]):
            raise CertificateError(f"{field}[{n}]: expected [i, k, \"p/q\"] with indices >= 0, got {show(t)}")
        key = (t[0], t[1])
        if key in out:
            raise CertificateError(f"{field}[{n}]: entry {key} repeated")
        out[key] = parse_rational(t[2], f"{field}[{n}]")
    return out


# ---------------------------------------------------------------------------- files
def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, ASCII, no NaN: the bytes the checksum is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def checksum(cert: dict) -> str:
    """SHA-256 of the canonical JSON of ``cert`` without its ``checksum`` field."""
    body = {k: v for k, v in cert.items() if k != "checksum"}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def seal(cert: dict) -> dict:
    """A copy of ``cert`` with its checksum set."""
    out = {k: v for k, v in cert.items() if k != "checksum"}
    out["checksum"] = checksum(out)
    return out


def seal_canonical(cert: dict) -> tuple[dict, str]:
    """``(seal(cert), canonical_json(seal(cert)))`` from one encoding pass: when ``checksum`` sorts
    before every other top-level key, the sealed text is the body's canonical text with
    ``"checksum":"..."`` put first (a large certificate's encoding takes seconds)."""
    body = {k: v for k, v in cert.items() if k != "checksum"}
    text = canonical_json(body)
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()
    sealed = {**body, "checksum": digest}
    if body and min(body) > "checksum":
        return sealed, '{"checksum":"' + digest + '",' + text[1:]
    return sealed, canonical_json(sealed)


def sealed_text_matches(cert: dict, text: str) -> bool:
    """Whether ``text`` is in the form :func:`seal_canonical` makes for ``cert`` as far as a hash shows
    without encoding ``cert`` again: ``{"checksum":"<cert's checksum>",`` followed by a body whose
    SHA-256 is that checksum, with the body's first key one of ``cert``'s."""
    digest = cert.get("checksum")
    if type(digest) is not str:
        return False
    head = '{"checksum":"' + digest + '",'
    if not text.startswith(head) or not text.endswith("}"):
        return False
    body = "{" + text[len(head):]
    if not any(body.startswith('{"' + k + '":') for k in cert if k != "checksum"):
        return False
    return hashlib.sha256(body.encode("ascii")).hexdigest() == digest


#: Certificates whose matrices hold more entries than this, V·(d + m) by the header, are written
#: in the compact canonical form (no indentation): the indented form needs Python's pure-Python
#: JSON encoder, which took 17-27 s on V = 2000, m = 1000, d = 1024, against about 1 s.
PRETTY_MAX_ENTRIES = 200_000


def dumps(cert: dict, *, reseal: bool = True, canonical: str | None = None) -> str:
    """The file text of a certificate (sealed): indented by one space, or the canonical JSON of
    :func:`canonical_json` when it is large (:data:`PRETTY_MAX_ENTRIES`). Both read the same.
    ``reseal=False`` writes the checksum ``cert`` carries (a certificate just sealed and checked)
    instead of computing it again; ``canonical``, with it, is that certificate's canonical text
    already made (:func:`seal_canonical`)."""
    if reseal or "checksum" not in cert:
        sealed, canonical = seal(cert), None
    else:
        sealed = cert
    head = sealed.get("instance") if isinstance(sealed.get("instance"), dict) else {}
    sizes = [head.get(k) for k in ("V", "d", "m")]
    if all(type(x) is int for x in sizes) and sizes[0] * (sizes[1] + sizes[2]) > PRETTY_MAX_ENTRIES:
        return (canonical if canonical is not None else canonical_json(sealed)) + "\n"
    return json.dumps(sealed, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def save(cert: dict, path: str | os.PathLike, *, reseal: bool = True, canonical: str | None = None) -> None:
    """Write atomically (temporary file in the same directory, then ``os.replace``); ``reseal`` and
    ``canonical`` as in :func:`dumps`."""
    from ntpcert.util.files import atomic_write_bytes

    atomic_write_bytes(path, dumps(cert, reseal=reseal, canonical=canonical).encode("ascii"))


def _size_error(size: int, what: str) -> CertificateError:
    return CertificateError(f"{what} is {size} bytes, over the cap of {MAX_CERTIFICATE_BYTES} bytes "
                            f"({MAX_CERTIFICATE_BYTES / 2**20:g} MiB, MAX_CERTIFICATE_BYTES)")


def loads(text: str) -> dict:
    """Parse certificate text; raises :class:`CertificateError` (over the size cap, truncated, not
    JSON, a repeated key, a non-finite number, an oversized integer literal, wrong format or version),
    with the strict reader that data files share (:func:`ntpcert.util.strict_json.strict_loads`).
    The schema itself is checked by :func:`check_schema`."""
    from ntpcert.util.strict_json import StrictJSONError, strict_loads

    if len(text) > MAX_CERTIFICATE_BYTES:  # every character is at least one byte
        raise _size_error(len(text), "the certificate text")
    try:
        obj = strict_loads(text, max_int_digits=MAX_JSON_INTEGER_DIGITS,
                           cap_note=" (MAX_JSON_INTEGER_DIGITS); large integers belong in rational strings")
    except StrictJSONError as err:
        raise CertificateError(str(err)) from None
    except json.JSONDecodeError as err:
        raise CertificateError(f"not valid JSON (truncated or corrupted?): {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise CertificateError("not valid JSON: nested too deeply") from None
    if type(obj) is not dict:
        raise CertificateError("not a certificate: the JSON value is not an object")
    if obj.get("format") != FORMAT or type(obj.get("format")) is not str:
        raise CertificateError(f"not a certificate: format is {show(obj.get('format'))}, expected {FORMAT!r}")
    if type(obj.get("version")) is not int or obj.get("version") != VERSION:
        raise CertificateError(f"unsupported certificate version {show(obj.get('version'))} (this checker reads {VERSION})")
    return obj


def load(path: str | os.PathLike) -> dict:
    """Read a certificate file (at most :data:`MAX_CERTIFICATE_BYTES`, refused before reading).

    Raises
    ------
    InputError
        When the file cannot be read at all (missing, a directory, no permission).
    CertificateError
        When it is over the size cap, or its content is not a certificate (see :func:`loads`).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_CERTIFICATE_BYTES:
                raise _size_error(size, f"CERT {p!r}")
            raw = fh.read(MAX_CERTIFICATE_BYTES + 1)  # a file that grows, or reports no size, is still capped
    except FileNotFoundError:
        raise InputError(f"CERT: file {p!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"CERT: {p!r} is a directory") from None
    except OSError as err:
        raise InputError(f"CERT: cannot read {p!r} ({err.strerror})") from None
    if len(raw) > MAX_CERTIFICATE_BYTES:
        raise _size_error(len(raw), f"CERT {p!r}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CertificateError("not a certificate: the file is not UTF-8 text") from None
    return loads(text)


def _odd_parts(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""``(N, E)`` with ``A = N * 2**E`` entrywise exactly, N odd int64 (0 where A is 0, with E = 0).

    A finite float is :math:`m 2^e` with :math:`m \in [1/2, 1)` a 53-bit fraction, so
    :math:`N = m 2^{53}` is an integer below :math:`2^{53}`; its trailing zeros move into E."""
    A = np.asarray(A, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise InputError("a matrix written as dyadic rationals has non-finite entries")
    mant, e = np.frexp(A)
    N = np.ldexp(mant, 53).astype(np.int64)
    E = e.astype(np.int64) - 53
    low = N & -N  # lowest set bit of |N| (two's complement), a power of two; 0 for N = 0
    nz = N != 0
    t = np.zeros(N.shape, dtype=np.int64)
    t[nz] = np.log2(low[nz].astype(np.float64)).astype(np.int64)  # exact: a power of two below 2^53
    N = N >> t  # arithmetic shift of a multiple of 2^t: exact for negative N too
    E = np.where(nz, E + t, 0)
    return N, E


def _pow2_strings(exps: np.ndarray) -> dict[int, str]:
    return {int(k): str(1 << int(k)) for k in np.unique(exps)}


def to_strings_dyadic(A: np.ndarray) -> list[list[str]]:
    r"""A float matrix (exact dyadics) as rows of canonical rational strings, shape (r, c).

    Vectorised: each entry is :math:`N 2^E` with N odd (:func:`_odd_parts`), so ``"N*2^E"`` for
    :math:`E \ge 0` and ``"N/2^-E"`` otherwise is already in lowest terms; equal to
    ``fraction_str(float(x))`` entry by entry."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"to_strings_dyadic: expected a matrix, got shape {A.shape}")
    N, E = _odd_parts(A)
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
    N, E = _odd_parts(base)
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

#: Numerators and denominators of at most this many bits are kept in the int64 arrays of a
#: :class:`RationalMatrix` (below its 10^18 limit); longer ones go to ``big``.
_ARRAY_BITS = 59


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
    N, E = _odd_parts(B)
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


def scaled_dyadic_matrix(base: np.ndarray, scale: Fraction) -> RationalMatrix:
    r""":math:`\text{scale}\cdot B` exactly, as a :class:`RationalMatrix` in lowest terms, without a
    Fraction per entry (the arithmetic of :func:`scaled_dyadic_strings`: with :math:`B = N 2^E`, N odd,
    :math:`|\text{scale}| = 2^a P / (2^b Q)` and :math:`g = \gcd(N, Q)`, an entry is
    :math:`\pm (N/g) P 2^{E+a-b} / (Q/g)`, whose odd parts are coprime)."""
    scale = Fraction(scale)
    B = np.asarray(base, dtype=np.float64)
    shape = B.shape
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    big: dict[tuple[int, int], tuple[int, int]] = {}
    p, q = abs(scale.numerator), scale.denominator
    sign = -1 if scale < 0 else 1
    if p == 0:
        return RationalMatrix(num, den, big)
    a = (p & -p).bit_length() - 1
    b = (q & -q).bit_length() - 1
    P, Q = p >> a, q >> b
    N, E = _odd_parts(B)
    nz = N != 0
    if Q < 2**62 and P < 2**62:
        g = np.gcd(N, np.int64(Q))
        g[~nz] = 1
        num_odd, den_odd = N // g, np.int64(Q) // g
        shift = E + (a - b)
        nbits = np.frexp(np.abs(num_odd).astype(np.float64))[1] + P.bit_length() + np.maximum(shift, 0)
        dbits = np.frexp(den_odd.astype(np.float64))[1] + np.maximum(-shift, 0)
        fast = nz & (nbits <= _ARRAY_BITS) & (dbits <= _ARRAY_BITS)
        num[fast] = sign * (num_odd[fast] * np.int64(P) << np.maximum(shift[fast], 0))
        den[fast] = den_odd[fast] << np.maximum(-shift[fast], 0)
        slow = nz & ~fast
    else:
        slow = nz
    for i, k in zip(*np.nonzero(slow)):
        f = Fraction(float(B[i, k])) * scale
        big[(int(i), int(k))] = (f.numerator, f.denominator)
    return RationalMatrix(num, den, big)


def factored_rationals(rec: dict, shape: tuple[int, int], field: str) -> RationalMatrix:
    r"""The exact matrix :math:`\text{scale}\cdot(B + \Delta)` of a ``W_factored`` record (whose
    structure :func:`check_schema` has checked): the scale parsed as a canonical rational, every
    ``delta`` index in range and each (i, k) once."""
    scale = parse_rational(rec["scale"], f"{field}.scale")
    B = np.array(rec["base"], dtype=np.float64).reshape(shape)  # exact: finite floats, or ints below 2^53
    delta = sparse_dict(rec["delta"], f"{field}.delta")
    M = scaled_dyadic_matrix(B, scale)
    for n, ((i, k), dl) in enumerate(delta.items()):
        if not (0 <= i < shape[0] and 0 <= k < shape[1]):
            raise CertificateError(f"{field}.delta[{n}]: index ({i}, {k}) out of range for shape {shape}")
        f = (Fraction(float(B[i, k])) + dl) * scale
        if abs(f.numerator).bit_length() <= _ARRAY_BITS and f.denominator.bit_length() <= _ARRAY_BITS:
            M.big.pop((i, k), None)
            M.num[i, k], M.den[i, k] = f.numerator, f.denominator
        else:
            M.num[i, k], M.den[i, k] = 0, 1
            M.big[(i, k)] = (f.numerator, f.denominator)
    return M


def sparse_record(A: np.ndarray) -> list[list]:
    """The nonzero entries of a float matrix (exact dyadics) as ``[[i, k, "p/q"], ...]``, row-major."""
    A = np.asarray(A, dtype=np.float64)
    rows, cols = np.nonzero(A)
    texts = to_strings_dyadic(A[rows, cols].reshape(1, -1))[0] if rows.size else []
    return [[i, k, t] for i, k, t in zip(rows.tolist(), cols.tolist(), texts)]


def sparse_rationals(items: Any, shape: tuple[int, int], field: str) -> RationalMatrix:
    """The matrix of shape ``shape`` whose nonzero entries ``[[i, k, "p/q"], ...]`` lists (canonical
    rationals, each (i, k) once and in range), as a :class:`RationalMatrix`.

    The rationals are read all at once (:func:`_read_rationals`, the reader of
    :func:`matrix_rationals`); anything unusual is read again entry by entry by :func:`sparse_dict`,
    which names the first bad entry. :func:`check_schema` has checked the shape of every entry."""
    n = len(items)
    idx = np.array([t[:2] for t in items], dtype=np.uint64).reshape(n, 2)  # indices < 2^63 (checked)
    got = _read_rationals([t[2] for t in items])
    keys = idx[:, 0] * np.uint64(shape[1]) + idx[:, 1]
    out_of_range = (idx[:, 0] >= shape[0]) | (idx[:, 1] >= shape[1])
    if got is None or (not out_of_range.any() and np.unique(keys).size != n):
        sparse_dict(items, field)  # raises, naming the entry
        got = _read_rationals([t[2] for t in items])
        if got is None:  # pragma: no cover - sparse_dict accepted what the fast reader refused
            entries = sparse_dict(items, field)
            got = (np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64),
                   {t: (f.numerator, f.denominator) for t, f in enumerate(entries.values())})
    if out_of_range.any():
        t = int(np.flatnonzero(out_of_range)[0])
        raise CertificateError(f"{field}[{t}]: index ({items[t][0]}, {items[t][1]}) out of range for shape {shape}")
    num_flat, den_flat, big_flat = got
    rows, cols = idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64)
    num = np.zeros(shape, dtype=np.int64)
    den = np.ones(shape, dtype=np.int64)
    num[rows, cols] = num_flat
    den[rows, cols] = den_flat
    big = {(int(rows[t]), int(cols[t])): pq for t, pq in big_flat.items()}
    return RationalMatrix(num, den, big)

