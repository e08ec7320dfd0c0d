r"""An :class:`~ntpcert.instance.model.NTPInstance` whose next-token counts are a sparse (CSR) matrix.

A corpus read through a model has m distinct contexts over a vocabulary of V' tokens with a few non-zero
counts per context: at 2 MiB of source code through a 50,257-token BPE, m = 119,755 and V' = 17,371, so
dense (m, V') counts and probabilities would take 2·10⁹ cells (33 GB), while the counts have 233,048
non-zeros (nnz). :class:`SparseCountsInstance` keeps the counts as ``scipy.sparse.csr_array`` (int64
data, int64 indices) and is everything an ``NTPInstance`` is: the same supports, weights, entropy, exact
rows and fingerprint as ``NTPInstance.from_counts`` of the dense counts. The dense ``probs`` and ``counts``
(m, V) exist only on request, and only up to :data:`DENSE_CELLS` cells (then built once and kept): a step
that still needs them past that size raises :class:`DenseRefused`, an :class:`~ntpcert.errors.InputError`
naming the sizes, instead of allocating tens of GB.

Memory: 8·m·d bytes for H (float64), 16 bytes per non-zero (count and column index), 8 bytes per context
(row pointer) and about 110 bytes per context for its support array and weight.

**Fingerprint.** :meth:`NTPInstance.fingerprint` hashes the dense int64 counts, m·V·8 bytes (16 GB at the
size above; the standalone checker builds them value by value). Past :data:`SPARSE_HASH_CELLS` cells of
(m, V) the counts are hashed in CSR form instead (``b"counts-csr;"``, then per row its column indices
and counts as little-endian int64, each row ended by its length), a choice made by the sizes alone, so
every reader (dense or sparse, a model directory, an activations file) gives one fingerprint for one
instance. A certificate names the form in ``instance.hash_form`` (docs/certificate-format.md).
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from functools import cached_property
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.model import SPARSE_HASH_CELLS, NTPInstance, hash_csr, hash_form
from ntpcert.instance.values import COUNT_MAX, as_float_matrix, frozen

__all__ = ["DENSE_CELLS", "SPARSE_HASH_CELLS", "DenseRefused", "SparseCountsInstance"]

#: The most (m, V) cells a sparse instance turns into dense ``probs`` and ``counts`` on request (400 MB each).
DENSE_CELLS = 50_000_000

class DenseRefused(InputError):
    """A step asked a sparse instance for dense (m, V) arrays past :data:`DENSE_CELLS` cells."""


def _dense_hash(h: Any, csr: Any, block: int = 4096) -> None:
    h.update(b"counts;")
    for a in range(0, csr.shape[0], block):
        h.update(np.ascontiguousarray(csr[a:a + block].toarray(), dtype="<i8").tobytes())


class SparseCountsInstance(NTPInstance):
    r"""An instance built from sparse counts (module doc). Build it with :meth:`from_csr`.

    Attributes
    ----------
    csr : scipy.sparse.csr_array of shape (m, V), int64
        ``csr[j, z]`` is how often token z followed context j; sorted column indices, no explicit zeros.
    totals : ndarray of shape (m,) of int64
        The row sums :math:`n_j`.
    """

    csr: Any
    totals: np.ndarray

    # the dataclass fields ``probs`` and ``counts`` become views built on request
    def _dense(self, what: str) -> np.ndarray:
        got = self.__dict__.get(f"_dense_{what}")
        if got is not None:
            return got
        self._guard(what)
        C = self.csr.toarray()
        C.setflags(write=False)
        P = C / self.totals[:, None]
        P.setflags(write=False)
        self.__dict__["_dense_counts"], self.__dict__["_dense_probs"] = C, P
        return self.__dict__[f"_dense_{what}"]

    def _guard(self, what: str) -> None:
        """:class:`DenseRefused` when an (m, V) array of this instance would exceed :data:`DENSE_CELLS` cells."""
        m, V = self.csr.shape
        if m * V > DENSE_CELLS:
            raise DenseRefused(f"{what}: this step needs the dense (m, V) = ({m:,}, {V:,}) array, {m * V:,} cells, "
                               f"past the {DENSE_CELLS:,} a sparse instance builds (its counts have "
                               f"{self.csr.nnz:,} non-zeros); this step is not sparse yet")

    def _set_ignored(self, value: Any) -> None:  # the dataclass __init__ sets None
        if value is not None:
            raise TypeError("a SparseCountsInstance takes its counts as csr (SparseCountsInstance.from_csr)")

    probs = property(lambda self: self._dense("probs"), _set_ignored)  # type: ignore[assignment]
    counts = property(lambda self: self._dense("counts"), _set_ignored)  # type: ignore[assignment]

    @classmethod
    def from_csr(cls, embeddings: Any, counts: Any, *, token_names: Sequence[str] | None = None,
                 context_names: Sequence[str] | None = None, name: str = "instance",
                 token_multiplicity: np.ndarray | None = None) -> "SparseCountsInstance":
        """The instance of ``counts`` (a scipy sparse matrix or array of shape (m, V) of non-negative
        integers), with the checks of :meth:`NTPInstance.from_counts`: the same instance, never dense."""
        H = as_float_matrix("embeddings", embeddings, ndim=2)
        import scipy.sparse as sp  # here: importing the instance types needs no scipy

        if not sp.issparse(counts):
            raise InputError(f"counts: expected a scipy sparse matrix, got {type(counts).__name__}")
        raw = counts.tocoo()  # the stored entries as given: duplicates not yet added
        NTPInstance._check_shapes(H, raw.shape, "counts")
        if raw.dtype.kind not in "iu":
            raise InputError(f"counts: expected integers, got dtype {raw.dtype}")
        # the values' range before any int64 arithmetic (a uint64 past 2^63 - 1 would wrap, duplicates would add)
        if raw.nnz and int(raw.data.min()) < 0:
            k = int(np.argmin(raw.data))
            raise InputError(f"counts[{int(raw.row[k])}, {int(raw.col[k])}]: {int(raw.data[k])}, expected a "
                             "non-negative integer")
        if raw.nnz and int(raw.data.max()) > COUNT_MAX // raw.nnz:
            tot = sum(int(x) for x in raw.data)  # exact: bounds every duplicate sum, row sum and n
            if tot > COUNT_MAX:
                raise InputError(f"counts: the total n = {tot} exceeds {COUNT_MAX} (int64)")
        C = sp.csr_array((raw.data.astype(np.int64), (raw.row.astype(np.int64), raw.col.astype(np.int64))),
                         shape=raw.shape)  # duplicates added, in int64 now safely
        C.sum_duplicates()
        C.eliminate_zeros()
        C.sort_indices()
        C = sp.csr_array((C.data.astype(np.int64), C.indices.astype(np.int64), C.indptr.astype(np.int64)),
                         shape=C.shape)
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        totals = np.zeros(C.shape[0], dtype=np.int64)
        np.add.at(totals, rows, C.data)  # no overflow: checked above
        empty = np.flatnonzero(totals == 0)
        if empty.size:
            raise InputError(f"counts[{int(empty[0])}]: row sums to 0, so context {int(empty[0])} has an empty support")
        m, V = C.shape
        supports = tuple(frozen(C.indices[C.indptr[j]:C.indptr[j + 1]]) for j in range(m))
        inst = cls(embeddings=frozen(H), probs=None, weights=frozen(totals / int(totals.sum()), owned=True),
                   counts=None, token_names=cls._names("token_names", token_names, V),
                   context_names=cls._names("context_names", context_names, m), name=name, _supports=supports,
                   token_multiplicity=None if token_multiplicity is None else frozen(token_multiplicity))
        for a in (C.data, C.indices, C.indptr, totals):
            a.setflags(write=False)
        object.__setattr__(inst, "csr", C)
        object.__setattr__(inst, "totals", totals)
        return inst

    # ------------------------------------------------------------------ what NTPInstance reads from dense arrays
    @property
    def V(self) -> int:
        return int(self.csr.shape[1])

    @property
    def has_counts(self) -> bool:
        return True

    def count_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = np.repeat(np.arange(self.m, dtype=np.int64), np.diff(self.csr.indptr))
        return rows, self.csr.indices.astype(np.int64), self.csr.data.astype(np.int64)

    def probs_rows(self, rows: slice) -> np.ndarray:
        return self.csr[rows].toarray() / self.totals[rows][:, None]

    def counts_at(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        rows, tokens = np.asarray(rows, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
        keys = self._keys
        want = rows * self.V + tokens
        at = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
        hit = keys.size > 0 and keys[at] == want
        return np.where(hit, self.csr.data[at] if keys.size else 0, 0).astype(np.int64)

    @cached_property
    def _keys(self) -> np.ndarray:
        """``j·V + z`` of every non-zero, increasing (CSR order)."""
        rows = np.repeat(np.arange(self.m, dtype=np.int64), np.diff(self.csr.indptr))
        return rows * self.V + self.csr.indices.astype(np.int64)

    @property
    def n(self) -> int:
        return int(sum(int(x) for x in self.totals)) if self.totals.size else 0

    def support_mask(self) -> np.ndarray:
        self._guard("support_mask")  # the mask is (m, V)
        return super().support_mask()

    def with_token_multiplicity(self, multiplicity: Any) -> "SparseCountsInstance":
        return SparseCountsInstance.from_csr(self.embeddings, self.csr, token_names=self.token_names,
                                             context_names=self.context_names, name=self.name,
                                             token_multiplicity=self.checked_multiplicity(multiplicity))

    def exact_row(self, j: int) -> tuple[Fraction, ...]:
        row = [Fraction(0)] * self.V
        tot = int(self.totals[j])
        a, b = int(self.csr.indptr[j]), int(self.csr.indptr[j + 1])
        for z, c in zip(self.csr.indices[a:b], self.csr.data[a:b]):
            row[int(z)] = Fraction(int(c), tot)
        return tuple(row)

    def exact_weight(self, j: int) -> Fraction:
        return Fraction(int(self.totals[j]), self.n)

    def ratio_integers(self, j: int) -> dict[int, int]:
        a, b = int(self.csr.indptr[j]), int(self.csr.indptr[j + 1])
        return {int(z): int(c) for z, c in zip(self.csr.indices[a:b], self.csr.data[a:b])}

    def row_counts(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(tokens of S_j, their counts) of context j, both of shape (k_j,)."""
        a, b = int(self.csr.indptr[j]), int(self.csr.indptr[j + 1])
        return self.csr.indices[a:b], self.csr.data[a:b]

    def entropy(self) -> float:
        c = self.csr.data.astype(np.float64)
        rows = np.repeat(np.arange(self.m), np.diff(self.csr.indptr))
        p = c / self.totals[rows]
        per_context = np.bincount(rows, weights=p * np.log(p), minlength=self.m)
        return float(-(self.weights @ per_context))

    @property
    def hash_form(self) -> str:
        return hash_form(self.m, self.V)

    @property
    def nnz(self) -> int:
        r"""The number of non-zero counts, :math:`\sum_j k_j`."""
        return int(self.csr.nnz)

    def _fingerprint_value(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.m},{self.d},{self.V};".encode())
        h.update(np.ascontiguousarray(self.embeddings, dtype="<f8").tobytes())
        if self.hash_form == "csr":
            hash_csr(h, self.csr.indptr, self.csr.indices, self.csr.data)
        else:
            _dense_hash(h, self.csr)
        return h.hexdigest()

    def __repr__(self) -> str:
        return f"SparseCountsInstance(name={self.name!r}, m={self.m}, d={self.d}, V={self.V}, nnz={self.csr.nnz})"
