r"""The certificate format: one JSON object, rationals as strings, naming its instance by a hash.

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
      "split": {"nonseparable": [[j, v], ..], "token_class": [c, ..] (V), "D_P": [["p/q", ..], ..] (C rows of d),
                "dual": [[c, j, "p/q"], ..]} | absent  (docs/certificate-format.md, section 7),
      "source": {"kind": "model", "files": [[name, SHA256], ..], ..} | absent  (ntpcert.certificate.provenance),
      "checksum": SHA256 of the canonical JSON of every other field
    }

* Rationals are strings ``"p/q"`` or ``"p"`` (integers only), so no value passes through a float.
* ``svm.W_factored`` (written for large W, :data:`~ntpcert.certificate.encode.FACTORED_MIN_ENTRIES`) stands for
  :math:`W = \text{scale}\cdot(B + \Delta)`: ``base`` B holds finite floats, read as the exact
  dyadic rationals they are (like the embeddings), and ``delta`` the nonzero entries of a sparse
  rational :math:`\Delta` (each (v, i) once). It replaces ``W`` (exactly one of the two); the
  checker forms the same exact rationals from it
  (:func:`~ntpcert.certificate.decode.factored_rationals`). Likewise a large,
  mostly-zero dual ``a`` is written as ``a_sparse``, its nonzero entries (each (v, j) once).
* Equality rows are named by ``(j, z)``: context j, token :math:`z \in S_j` other than the anchor
  :math:`z_j = \min S_j`; the row is :math:`(e_z - e_{z_j}) \otimes h_j`.
* ``instance.fingerprint`` is :meth:`~ntpcert.instance.NTPInstance.fingerprint` (SHA-256 of the
  embeddings' bytes and the exact counts or probabilities and weights). ``instance.embedded`` holds
  the instance itself (embeddings as shortest round-tripping floats, or as integers when every
  one is an integer of magnitude at most 2^53 and none is -0.0, counts as integers or
  probabilities and weights as fraction strings), so a certificate checks on its own. Counts that
  are mostly zero (:data:`~ntpcert.certificate.encode.SPARSE_COUNTS_MAX_FILL`) are written as ``"V": V, "counts_sparse":
  [[j, t, c], ...]``: the positive counts only, ``(j, t)`` strictly increasing (one spelling), at
  most :data:`MAX_SPARSE_CELLS` cells m·V. Mostly-zero embeddings (one-hot) are written as
  ``"embeddings_shape": [m, d], "embeddings_sparse": [[j, i, x], ...]`` instead
  (:data:`~ntpcert.certificate.encode.SPARSE_EMBEDDINGS_MAX_FILL`, at most
  :data:`MAX_SPARSE_EMBEDDING_CELLS` cells m·d: ``[j, i, x]`` triples of the non-zero entries only, sorted by
  (j, i), each once, every x a finite non-zero number, so the dense H is the same float64 bytes). A large
  dense H of floats (:data:`~ntpcert.certificate.encode.PACKED_MIN_ENTRIES`) is written
  ``"embeddings_shape": [m, d], "embeddings_f64": "<base64>"``: the standard base64 of its entries'
  little-endian binary64 bytes, row-major, in its one spelling (re-encoding gives the text back; no NaN,
  infinity or -0.0), :mod:`ntpcert.certificate.packed`. It halves a Gaussian H against decimals.
* ``why_not_separable`` (with a false separability claim): an irreducible non-separable set of
  contexts (strictly increasing), a Farkas ray whose support is exactly that set, and per context
  of the set, in the same order, a rational W on the embedding columns ``cols`` (V rows of
  ``len(cols)`` entries; W is zero on the other columns) that separates the set without it (``cols``
  and ``W`` empty for a set of one context). ``why_not_compatible`` (with a false compatibility
  claim): a violating null vector y whose rows form a circuit (an irreducible cycle of log-odds).
  Both are checked by :mod:`ntpcert.certificate.checker.why_not`.
* ``checksum`` catches truncation and accidental edits; a deliberate forger can recompute it, which
  is why :mod:`ntpcert.certificate.checker` re-derives every claim from the instance.

**Strictness.** A file is read by :func:`~ntpcert.certificate.jsonio.loads` /
:func:`~ntpcert.certificate.jsonio.load` and checked by
:func:`~ntpcert.certificate.structure.check_schema` before anything else looks at it:

* the file is at most :data:`MAX_CERTIFICATE_BYTES` (512 MiB), refused *before* it is read, as
  too large to check (:class:`~ntpcert.errors.CertificateTooLarge`, ``TOO LARGE`` from ``ntpcert verify``,
  exit 4), like a sparse record over its cell limit: every size limit is in :data:`LIMITS`, which
  ``tools/ntpcert_check.py`` copies and the producer respects (``certify`` writes no file over it);
* a repeated key in any JSON object, the constants ``NaN``/``Infinity``/``-Infinity``, a number
  literal that overflows to infinity, and an integer literal of more than
  :data:`~ntpcert.certificate.schema.MAX_JSON_INTEGER_DIGITS` digits are refused while parsing (so
  two readers can never see two different certificates in one file);
* every object has exactly the keys of its section in :data:`~ntpcert.certificate.schema.SCHEMA`
  (unknown keys are refused at every level, ``claims`` included), each of the kind written there,
  **type-exactly**: a boolean is ``true``/``false`` (never ``1``, ``0`` or ``1.0``), an integer is
  not a boolean, a bound is a finite JSON float;
* rationals are *canonical* strings (lowest terms, no ``+``, no leading zeros, no ``-0``, no
  ``/1``), so every value has exactly one spelling;
* matrix and list shapes agree with the header ``m``, ``d``, ``V``.

Every failure raises :class:`~ntpcert.errors.CertificateError` with a one-line message that names
the field and shows the offending value.

This module is the format's one written statement (this layout and the limits a reader enforces);
:mod:`~ntpcert.certificate.schema` holds the same layout as a table, :mod:`~ntpcert.certificate.jsonio`
the strict text and the seal, :mod:`~ntpcert.certificate.encode` and :mod:`~ntpcert.certificate.decode`
the values, and :mod:`ntpcert.certificate.checker` the independent check.
"""

from __future__ import annotations

FORMAT = "ntpcert-certificate"
VERSION = 1
#: The other file kind: an exact enclosure of the nuclear-norm SVM value L^mm (checker.nuclear).
NUCLEAR_FORMAT, NUCLEAR_VERSION = "ntpcert-nuclear-enclosure", 1

#: Every size limit of the format, in one place: what a reader refuses as too large to check here, and
#: what the producer therefore never writes. ``tools/ntpcert_check.py`` holds a copy of this table (it
#: imports nothing from ntpcert); ``tests/test_compact_certificates.py`` checks that the two are equal.
#:
#: * ``certificate_bytes``: the largest certificate file, refused from its size before it is read;
#: * ``json_integer_digits``: the most digits of a JSON integer literal (a format rule rather than a
#:   size: integers of any length are written as rational strings);
#: * ``sparse_count_cells``: the largest count matrix m·V a ``counts_sparse`` record may describe;
#: * ``sparse_embedding_cells``: the largest H (m·d) an ``embeddings_sparse`` record may describe;
#: * ``why_not_cells``: the most entries the points of a ``why_not_separable`` section hold in all.
LIMITS: dict[str, int] = {
    "certificate_bytes": 512 * 2**20,
    "json_integer_digits": 4300,
    "sparse_count_cells": 1_099_511_627_776,
    "sparse_embedding_cells": 100_000_000,
    "why_not_cells": 2_000_000,
}

#: The largest certificate file (bytes) :func:`~ntpcert.certificate.jsonio.load` reads; a larger one is
#: refused before it is read (as too large, not as invalid), and ``certify`` writes none.
MAX_CERTIFICATE_BYTES = LIMITS["certificate_bytes"]

#: The most entries the points of a ``why_not_separable`` section may hold in all (V per column).
MAX_WHY_NOT_CELLS = LIMITS["why_not_cells"]

#: The largest count matrix (m·V cells) a sparse record may describe: 2^40, a sanity bound only, since both
#: checkers read ``counts_sparse`` sparse (:class:`~ntpcert.instance.sparse.SparseCountsInstance` past
#: :data:`~ntpcert.instance.sparse.DENSE_CELLS`; the standalone checker keeps one dict a context); the file
#: cap bounds the non-zeros. It was 10^8 while the checker built the counts dense, 8 bytes a cell.
MAX_SPARSE_CELLS = LIMITS["sparse_count_cells"]

#: The largest H (m·d cells) a sparse record may describe (the checker builds it dense, 8 bytes a cell).
MAX_SPARSE_EMBEDDING_CELLS = LIMITS["sparse_embedding_cells"]

__all__ = ["FORMAT", "NUCLEAR_FORMAT", "NUCLEAR_VERSION", "LIMITS", "MAX_CERTIFICATE_BYTES", "MAX_SPARSE_CELLS", "MAX_SPARSE_EMBEDDING_CELLS",
           "MAX_WHY_NOT_CELLS", "VERSION"]
