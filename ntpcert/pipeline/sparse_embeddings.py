"""Mostly-zero embeddings in a certificate: ``"embeddings_sparse": [[j, i, x], ...]``.

One-hot context embeddings of the whitespace-split pydoc text (m = d = 8,831) are 78 M entries, all but
8,831 of them zero: 157 MB of dense JSON that the producer writes and the checker reads back, against
about 0.2 MB as ``[j, i, x]`` triples. A certificate carries H sparse when at most
:data:`SPARSE_EMBEDDINGS_MAX_FILL` of its entries are non-zero, with ``"embeddings_shape": [m, d]``;
the triples hold the non-zero entries only, sorted by (j, i), each once, every x a finite non-zero number
(an integer within 2^53, or a float), so the dense H they describe is the same float64 bytes (and the
same fingerprint) as the instance's own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ntpcert.errors import CertificateError

#: H is written sparse when at most this fraction of its entries is non-zero.
SPARSE_EMBEDDINGS_MAX_FILL = 0.05
#: The largest H (m·d cells) a sparse record may describe (the checker builds it dense, 8 bytes a cell).
MAX_SPARSE_EMBEDDING_CELLS = 100_000_000


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


def show(value: Any) -> str:
    """A value as the messages quote it, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_sparse_embeddings(rec: dict, m: int, d: int) -> None:
    """The structure of a sparse H against the header's m and d (module doc); raises
    :class:`CertificateError` naming the field and the value."""
    shape = rec.get("embeddings_shape")
    if shape != [m, d]:
        raise CertificateError(f"instance.embedded.embeddings_shape: {show(shape)}, expected [{m}, {d}] (the header)")
    if m * d > MAX_SPARSE_EMBEDDING_CELLS:
        raise CertificateError(f"instance.embedded.embeddings_shape: m * d = {m} * {d} exceeds "
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


def dense_embeddings(rec: dict) -> np.ndarray:
    """The dense H of shape (m, d) of a record checked by :func:`check_sparse_embeddings`."""
    m, d = rec["embeddings_shape"]
    H = np.zeros((m, d), dtype=np.float64)
    items = rec["embeddings_sparse"]
    if items:
        j = np.fromiter((t[0] for t in items), dtype=np.int64, count=len(items))
        i = np.fromiter((t[1] for t in items), dtype=np.int64, count=len(items))
        H[j, i] = np.array([float(t[2]) for t in items], dtype=np.float64)
    return H


__all__ = ["MAX_SPARSE_EMBEDDING_CELLS", "SPARSE_EMBEDDINGS_MAX_FILL", "check_sparse_embeddings",
           "dense_embeddings", "sparse_embeddings_record"]
