r"""The data model: an NTP training set summarised by its distinct contexts.

A training set of n (context, next token) pairs over a vocabulary ``[V]`` is summarised by its
m distinct contexts ``j``; context ``j`` has

* a fixed embedding :math:`h_j \in \mathbb{R}^d` (row ``j`` of ``embeddings``),
* a frequency :math:`\pi_j` (``weights[j]``, the weights sum to one),
* a next-token distribution :math:`p_j \in \Delta^{V-1}` (row ``j`` of ``probs``) with support
  :math:`S_j = \{z : p_{j,z} > 0\}` and :math:`k_j = |S_j|`.

The loss of a linear decoder :math:`W \in \mathbb{R}^{V \times d}` is

.. math:: \mathrm{CE}(W) = -\sum_j \pi_j \sum_{z \in S_j} p_{j,z} \log \mathbb{S}_z(W h_j)

and its lower bound is the entropy :math:`\mathcal{H} = -\sum_j \pi_j \sum_{z\in S_j} p_{j,z}\log p_{j,z}`.

All input validation of the package happens in these constructors, once (the value checks are in
:mod:`ntpcert.instance.values`): they raise :class:`~ntpcert.errors.InputError` with a message that
names the field and the offending value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import ce
from ntpcert.instance.ce import CELayout
from ntpcert.instance.values import (COUNT_MAX, PROB_SUM_TOL, as_count_matrix, as_float_matrix, checked_row_sums,
                                    exact_prob_rows, exact_weights, frozen)
from ntpcert.util.numbers import lcm_all


#: Past this many (m, V) cells the fingerprint of an instance built from counts hashes them in CSR form
#: (:func:`hash_form`), since the dense int64 counts are m·V·8 bytes (16 GB at m = 119,755, V = 17,371).
#: Every certificate written before this form existed has at most 1.8·10⁸ cells, below it, so keeps its
#: fingerprint.
SPARSE_HASH_CELLS = 1 << 28


def hash_form(m: int, V: int) -> str:
    """``"dense"`` or ``"csr"``: how the fingerprint of an instance of m contexts over V tokens built from
    counts hashes them. Decided by the sizes alone, so a sparse and a dense instance of the same counts
    have one fingerprint."""
    return "csr" if m * V > SPARSE_HASH_CELLS else "dense"


def hash_csr(h: Any, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> None:
    """Feed counts in CSR form to the hash ``h``: ``b"counts-csr;"``, then per row its column indices
    (increasing) and its positive counts as little-endian int64, and the row's length as one more
    little-endian int64 (docs/certificate-format.md, section 3)."""
    h.update(b"counts-csr;")
    idx = np.ascontiguousarray(indices, dtype="<i8")
    val = np.ascontiguousarray(data, dtype="<i8")
    for j in range(len(indptr) - 1):
        a, b = int(indptr[j]), int(indptr[j + 1])
        h.update(idx[a:b].tobytes())
        h.update(val[a:b].tobytes())
        h.update(np.int64(b - a).astype("<i8").tobytes())


@dataclass(frozen=True, eq=False)
class NTPInstance:
    r"""An NTP dataset: m distinct contexts with embeddings, frequencies and next-token laws.

    Build it with :meth:`from_counts` or :meth:`from_probs`; the constructor itself expects
    already-validated arrays and is not meant to be called directly.

    Attributes
    ----------
    embeddings : ndarray of shape (m, d)
        Row ``j`` is :math:`h_j`.
    probs : ndarray of shape (m, V)
        Row ``j`` is :math:`p_j`, non-negative, summing to one.
    weights : ndarray of shape (m,)
        The frequencies :math:`\pi_j`, positive, summing to one.
    counts : ndarray of shape (m, V) of int64, or None
        The integer counts the instance was built from, when it was. Every count, every row
        sum and the total ``n`` are at most :data:`COUNT_MAX` (``2**63 - 1``), so numpy sums
        of them never overflow.
    exact_probs : tuple of tuples of Fraction, or None
        ``p_{j,z}`` as exact rationals when the instance was built from probabilities (floats are
        the dyadic rationals they are). Built from counts, use :meth:`exact_row`.
    exact_weights : tuple of Fraction, or None
        :math:`\pi_j` as exact rationals when built from probabilities.
    token_names, context_names : tuple of str, or None
        Optional labels used in reports.
    token_multiplicity : ndarray of shape (V,) of int64, or None
        How many tokens of a larger vocabulary each token stands for (None: one each). Set it with
        :meth:`with_token_multiplicity`; a model's unseen tokens merged into one representative
        (:mod:`ntpcert.instance.lm.merge`) carry their number here. Only the NTP-SVM reads it (module doc).
    """

    embeddings: np.ndarray
    probs: np.ndarray
    weights: np.ndarray
    counts: np.ndarray | None = None
    exact_probs: tuple[tuple[Fraction, ...], ...] | None = None
    exact_weights: tuple[Fraction, ...] | None = None
    token_names: tuple[str, ...] | None = None
    context_names: tuple[str, ...] | None = None
    name: str = "instance"
    _from_floats: bool = field(default=False, repr=False)
    _supports: tuple[np.ndarray, ...] = field(default=(), repr=False)
    token_multiplicity: np.ndarray | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_counts(
        cls,
        embeddings: Any,
        counts: Any,
        *,
        token_names: Sequence[str] | None = None,
        context_names: Sequence[str] | None = None,
        name: str = "instance",
    ) -> "NTPInstance":
        """Build an instance from integer next-token counts.

        Parameters
        ----------
        embeddings : array_like of shape (m, d)
            Finite context embeddings, one row per distinct context.
        counts : array_like of shape (m, V)
            Non-negative integers; ``counts[j, z]`` is how often token z followed context j.
            Every row needs a positive sum. Then :math:`\\pi_j = n_j / n` and
            :math:`p_{j,z} = \\mathrm{counts}_{j,z} / n_j` exactly.

        Counts are never rounded. Lists (as JSON gives them) and object arrays are read entry by
        entry, so Python ints stay exact whatever else the list holds. A count given as a float
        (a float entry, or a float array) is accepted only when it is an integer below ``2**53``
        (float64; ``2**24`` for float32, ``2**11`` for float16), the range where the float
        stands for exactly one integer; otherwise an :class:`InputError` asks for an integer.
        Counts are kept as an int64 array: a count, a row sum :math:`n_j` or the total
        :math:`n` past ``2**63 - 1`` (:data:`COUNT_MAX`) is refused, never wrapped around.
        Booleans, strings, NaN and infinities are refused.
        """
        H = as_float_matrix("embeddings", embeddings, ndim=2)
        C = as_count_matrix(counts)
        cls._check_shapes(H, C.shape, "counts")
        totals = checked_row_sums(C)
        empty = np.flatnonzero(totals == 0)
        if empty.size:
            raise InputError(f"counts[{int(empty[0])}]: row sums to 0, so context {int(empty[0])} has an empty support")
        n = int(totals.sum())
        probs = C / totals[:, None]
        weights = totals / n
        # C (from as_count_matrix), probs and weights are new arrays: frozen without a copy
        return cls._build(H, probs, weights, C, None, None, token_names, context_names, name, owned=True)

    @classmethod
    def from_probs(
        cls,
        embeddings: Any,
        probs: Any,
        weights: Any = None,
        *,
        token_names: Sequence[str] | None = None,
        context_names: Sequence[str] | None = None,
        name: str = "instance",
    ) -> "NTPInstance":
        """Build an instance from next-token probabilities and context weights.

        Parameters
        ----------
        embeddings : array_like of shape (m, d)
        probs : array_like of shape (m, V)
            Non-negative, each row summing to one. Entries may be numbers or exact fraction
            strings such as ``"1/3"``; fractions must sum to one exactly, floats within
            ``PROB_SUM_TOL``. Floats are kept as the exact dyadic rationals they are.
        weights : array_like of shape (m,), optional
            Positive context frequencies; normalised to sum to one. Default: uniform.
        """
        H = as_float_matrix("embeddings", embeddings, ndim=2)
        raw = np.asarray(probs, dtype=object)
        if raw.ndim != 2:
            raise InputError(f"probs: expected a 2-d array, got shape {raw.shape}")
        cls._check_shapes(H, raw.shape, "probs")
        m, V = raw.shape
        has_string = any(isinstance(x, (str, Fraction)) for x in raw.flat)
        rows = exact_prob_rows(raw, exact=has_string)
        P = np.array([[float(f) for f in row] for row in rows], dtype=np.float64).reshape(m, V)
        P = P / P.sum(axis=1, keepdims=True)
        w_exact = exact_weights(weights, m)
        W = np.array([float(f) for f in w_exact], dtype=np.float64)
        from_floats = not has_string and any(isinstance(x, (float, np.floating)) for x in raw.flat)
        return cls._build(H, P, W, None, tuple(rows), w_exact, token_names, context_names, name,
                          from_floats=from_floats)

    @staticmethod
    def _check_shapes(H: np.ndarray, shape: tuple[int, ...], what: str) -> None:
        m, d = H.shape
        if m == 0:
            raise InputError("embeddings: no contexts (shape has m = 0)")
        if d == 0:
            raise InputError("embeddings: embedding dimension d = 0")
        if shape[0] != m:
            raise InputError(f"{what}: has {shape[0]} rows but embeddings has {m} (shape {shape} vs {H.shape})")
        if shape[1] < 2:
            raise InputError(f"{what}: vocabulary size V = {shape[1]}, need at least 2 tokens")

    @classmethod
    def _build(cls, H, P, W, C, exact, exact_w, token_names, context_names, name, *,
               from_floats: bool = False, owned: bool = False) -> "NTPInstance":
        """``owned``: P, W and C were made by the caller for this instance and are frozen without a copy."""
        m, V = P.shape
        tn = cls._names("token_names", token_names, V)
        cn = cls._names("context_names", context_names, m)
        if exact is not None:
            supports = tuple(np.array([z for z, f in enumerate(row) if f > 0], dtype=np.int64) for row in exact)
        else:
            supports = tuple(np.flatnonzero(C[j] > 0).astype(np.int64) for j in range(m))
        for s in supports:
            s.setflags(write=False)
        return cls(
            embeddings=frozen(H),
            probs=frozen(P, owned=owned),
            weights=frozen(W, owned=owned),
            counts=None if C is None else frozen(C, owned=owned),
            exact_probs=exact,
            exact_weights=exact_w,
            token_names=tn,
            context_names=cn,
            name=name,
            _supports=supports,
            _from_floats=from_floats,
        )

    @staticmethod
    def _names(field_name: str, names: Sequence[str] | None, n: int) -> tuple[str, ...] | None:
        if names is None:
            return None
        out = tuple(str(x) for x in names)
        if len(out) != n:
            raise InputError(f"{field_name}: has {len(out)} entries, expected {n}")
        return out

    # ------------------------------------------------------------------ sizes and supports
    @property
    def m(self) -> int:
        """Number of distinct contexts."""
        return int(self.embeddings.shape[0])

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return int(self.embeddings.shape[1])

    @property
    def V(self) -> int:
        """Vocabulary size."""
        return int(self.probs.shape[1])

    def support(self, j: int) -> np.ndarray:
        """Sorted token indices :math:`S_j` with :math:`p_{j,z} > 0` (read-only int array)."""
        return self._supports[j]

    @property
    def supports(self) -> tuple[np.ndarray, ...]:
        """All supports :math:`S_1, \\dots, S_m`."""
        return self._supports

    @property
    def support_sizes(self) -> np.ndarray:
        """Array of shape (m,) with :math:`k_j = |S_j|`."""
        return np.array([s.size for s in self._supports], dtype=np.int64)

    def support_mask(self) -> np.ndarray:
        """Boolean array of shape (m, V): ``mask[j, z]`` iff :math:`z \\in S_j`."""
        mask = np.zeros((self.m, self.V), dtype=bool)
        for j, s in enumerate(self._supports):
            mask[j, s] = True
        return mask

    def in_support(self, j: int, z: int) -> bool:
        """Whether token z is in :math:`S_j` (a binary search of the sorted support)."""
        s = self._supports[j]
        k = int(np.searchsorted(s, z))
        return k < s.size and int(s[k]) == int(z)

    @cached_property
    def support_csr(self) -> Any:
        """The support indicator as a ``scipy.sparse.csr_array`` of shape (m, V) and dtype int8 (sorted
        indices): :meth:`support_mask` without its m·V cells. Built once."""
        import scipy.sparse as sp

        k = self.support_sizes
        ptr = np.zeros(self.m + 1, dtype=np.int64)
        np.cumsum(k, out=ptr[1:])
        idx = np.concatenate(self._supports) if self.m else np.zeros(0, dtype=np.int64)
        return sp.csr_array((np.ones(idx.size, dtype=np.int8), idx.astype(np.int64), ptr), shape=(self.m, self.V))

    def anchors(self) -> np.ndarray:
        """Array of shape (m,): the anchor token :math:`z_j = \\min S_j` used for the equations of (4)."""
        return np.array([int(s[0]) for s in self._supports], dtype=np.int64)

    def with_token_multiplicity(self, multiplicity: Any) -> "NTPInstance":
        r"""This instance with token v standing for ``multiplicity[v]`` interchangeable tokens.

        Read by the NTP-SVM only: its objective becomes :math:`\tfrac12\sum_v n_v\|w_v\|^2` and the
        column sums of its dual :math:`\sum_v n_v a_{j,v} = 0`, which is the NTP-SVM of the vocabulary where
        token v is repeated :math:`n_v` times in the same supports, restricted to rows equal on each
        repetition (all of them are, at its optimum). The supports, F, (4), (6) and the split are the same
        with or without it; the loss methods of this class and the certificates ignore it, and
        :func:`~ntpcert.pipeline.exact_verdicts.exact_certify` refuses an instance that carries it.

        Parameters
        ----------
        multiplicity : array_like of shape (V,)
            Integers at least 1; every support :math:`S_j` must hold a token of multiplicity 1 (the exact
            duality gap moves each column's rounding remainder onto it). All ones gives back an instance
            without multiplicities.
        """
        n = self.checked_multiplicity(multiplicity)
        return dataclasses.replace(self, token_multiplicity=None if n is None else frozen(n, owned=True))

    def checked_multiplicity(self, multiplicity: Any) -> np.ndarray | None:
        """``multiplicity`` checked as :meth:`with_token_multiplicity` takes it, as int64 (None: all ones)."""
        n = np.asarray(multiplicity)
        if n.shape != (self.V,):
            raise InputError(f"token_multiplicity: expected shape (V,) = ({self.V},), got {n.shape}")
        if n.dtype.kind not in "iu":
            raise InputError(f"token_multiplicity: expected integers, got dtype {n.dtype}")
        n = n.astype(np.int64)
        if n.size and int(n.min()) < 1:
            v = int(np.argmin(n))
            raise InputError(f"token_multiplicity[{v}]: {int(n[v])}, expected an integer at least 1")
        for j, s in enumerate(self._supports):
            if not np.any(n[s] == 1):
                raise InputError(f"token_multiplicity: every token of the support of context {j} has a multiplicity "
                                 "above 1 (each support needs one token of multiplicity 1)")
        return None if np.all(n == 1) else n

    def multiplicity(self) -> np.ndarray:
        """Array of shape (V,) of int64: :attr:`token_multiplicity`, or ones when there is none."""
        if self.token_multiplicity is None:
            return np.ones(self.V, dtype=np.int64)
        return self.token_multiplicity

    def exact_row(self, j: int) -> tuple[Fraction, ...]:
        """Row ``j`` of the probabilities as exact rationals."""
        if self.counts is not None:
            row = self.counts[j]
            tot = int(row.sum())
            return tuple(Fraction(int(c), tot) for c in row)
        return self.exact_probs[j]

    def exact_weight(self, j: int) -> Fraction:
        r""":math:`\pi_j` as an exact rational."""
        if self.counts is not None:
            return Fraction(int(self.counts[j].sum()), int(self.counts.sum()))
        return self.exact_weights[j]

    def ratio_integers(self, j: int) -> dict[int, int]:
        r"""Positive integers ``c_z`` for ``z`` in :math:`S_j` with :math:`p_{j,z} \propto c_z`
        exactly (the counts themselves, or fractions scaled by the lcm of their denominators).
        The log-odds of (4) are :math:`\log(c_z / c_{z_j})`."""
        S = self.support(j)
        if self.counts is not None:
            return {int(z): int(self.counts[j, z]) for z in S}
        row = self.exact_probs[j]
        lcm = lcm_all(row[int(z)].denominator for z in S)
        ints = {int(z): int(row[int(z)] * lcm) for z in S}
        g = 0
        for c in ints.values():
            g = math.gcd(g, c)
        return {z: c // g for z, c in ints.items()}

    @property
    def has_counts(self) -> bool:
        """Whether the instance was built from integer counts (dense :attr:`counts`, or sparse ones:
        :class:`~ntpcert.instance.sparse.SparseCountsInstance`)."""
        return self.counts is not None

    def count_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, tokens, counts)`` of the non-zero counts, row-major, each of shape (nnz,) of int64 (an
        instance built from counts; no (m, V) temporaries beyond the dense counts themselves)."""
        if not self.has_counts:
            raise ValueError("count_entries: the instance was built from probabilities")
        rows, cols = np.nonzero(self.counts)
        return rows.astype(np.int64), cols.astype(np.int64), self.counts[rows, cols].astype(np.int64)

    def probs_rows(self, rows: slice) -> np.ndarray:
        """The probabilities of the contexts ``rows`` (a slice), dense, shape (rows, V): a block of
        :attr:`probs` (sparse instances build only the block)."""
        return self.probs[rows]

    def counts_at(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The counts at the pairs ``(rows[i], tokens[i])``, shape (n,) of int64 (0 off the supports)."""
        return np.asarray(self.counts)[rows, tokens].astype(np.int64)

    @property
    def probs_exact_from_floats(self) -> bool:
        """True when probabilities were given as floats (then treated as the exact dyadic
        rationals they are, which may differ from the fractions the user had in mind)."""
        return self._from_floats

    @property
    def n(self) -> int | None:
        """Number of training pairs, when built from counts."""
        return None if self.counts is None else int(self.counts.sum())

    # ------------------------------------------------------------------ loss
    def entropy(self) -> float:
        r""":math:`\mathcal{H} = -\sum_j \pi_j \sum_{z \in S_j} p_{j,z} \log p_{j,z}` in nats."""
        P = self.probs
        rows, cols = np.nonzero(P > 0)  # the support entries only: no m·V temporaries
        p = P[rows, cols]
        per_context = np.bincount(rows, weights=p * np.log(p), minlength=self.m)
        return float(-(self.weights @ per_context))

    def logits(self, W: np.ndarray) -> np.ndarray:
        """Logits of shape (m, V): row j is :math:`W h_j`."""
        return self.embeddings @ self.check_decoder(W).T

    @cached_property
    def ce_layout(self) -> CELayout:
        """The arrays of :mod:`ntpcert.instance.ce` for this instance (built once)."""
        return CELayout.build(self)

    def loss(self, W: np.ndarray) -> float:
        r"""Cross-entropy :math:`\mathrm{CE}(W)`, eq. (2). ``W`` has shape (V, d).

        Computed as :math:`\sum_j\pi_j(\mathcal H_j + \mathrm{KL}_j)` (:mod:`ntpcert.instance.ce`), so
        :math:`\mathrm{CE} - \mathcal H` never loses digits to cancellation; see :meth:`excess_loss`."""
        return ce.loss(self.ce_layout, self.check_decoder(W))

    def gradient(self, W: np.ndarray) -> np.ndarray:
        r""":math:`\nabla \mathrm{CE}(W) = \sum_j \pi_j (\mathbb{S}(W h_j) - p_j) h_j^\top`, shape (V, d),
        with the in-support coefficients formed in the log domain from the out-of-support mass
        (:mod:`ntpcert.instance.ce`): accurate at any margin."""
        return ce.gradient(self.ce_layout, self.check_decoder(W))

    def gradient_direction(self, W: np.ndarray) -> tuple[np.ndarray, float]:
        r"""``(D, A)`` with :math:`\nabla\mathrm{CE}(W) = e^{A}D`, ``D`` of shape (V, d) and largest
        coefficient of order 1: the gradient's direction, exact after :math:`e^{-\text{margin}}`
        underflows (:meth:`ntpcert.instance.ce.CEKernel.direction_into`)."""
        return ce.direction(self.ce_layout, self.check_decoder(W))

    def hessian(self, W: np.ndarray) -> np.ndarray:
        r"""Dense Hessian of CE at W, shape (Vd, Vd), rows and columns in the row-major order of W
        (:func:`ntpcert.instance.ce.hessian`)."""
        return ce.hessian(self.ce_layout, self.check_decoder(W))

    def excess_loss(self, W: np.ndarray) -> float:
        r""":math:`\mathrm{CE}(W) - \mathcal{H} = \sum_j \pi_j \mathrm{KL}(p_j \| \mathbb{S}(W h_j)) \ge 0`,
        computed as :math:`\sum_j\pi_j(\log(1+Q_j) + \mathrm{KL}(p_j\|\sigma_j))`, a sum of non-negative
        terms with no cancellation (:mod:`ntpcert.instance.ce`); it underflows to 0 only where
        :math:`e^{-\text{margin}}` does (margins past about 745)."""
        return ce.excess_loss(self.ce_layout, self.check_decoder(W))

    def log_excess_loss(self, W: np.ndarray) -> float:
        r""":math:`\log(\mathrm{CE}(W) - \mathcal H)`, finite at any margin (:func:`ntpcert.instance.ce.log_excess_loss`)."""
        return ce.log_excess_loss(self.ce_layout, self.check_decoder(W))

    def smoothness(self) -> float:
        r"""Upper bound :math:`L \le \tfrac12 \lambda_{\max}(\sum_j \pi_j h_j h_j^\top)` on the
        Lipschitz constant of :math:`\nabla \mathrm{CE}` (Frobenius norm)."""
        Hs = self.embeddings * np.sqrt(self.weights)[:, None]
        s = np.linalg.norm(Hs, ord=2) if min(Hs.shape) > 0 else 0.0
        return 0.5 * float(s) ** 2

    def check_decoder(self, W: np.ndarray) -> np.ndarray:
        """``W`` as a float64 array of shape (V, d); an :class:`InputError` for another shape."""
        W = np.asarray(W, dtype=np.float64)
        if W.shape != (self.V, self.d):
            raise InputError(f"W: expected shape (V, d) = ({self.V}, {self.d}), got {W.shape}")
        return W

    # ------------------------------------------------------------------ identity
    def fingerprint(self) -> str:
        """SHA-256 of the instance's exact content (embeddings bytes, exact probabilities and
        weights), used by certificates to name the instance they speak of. Computed once: the arrays
        are read-only (about 4 s for the 8,831 x 8,831 one-hot corpus, asked for four times by
        ``certify --exact``)."""
        return self._fingerprint

    @cached_property
    def onehot_columns(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(columns, scales)`` of shape (m,) when every row of H has exactly one non-zero, in distinct
        columns (one-hot contexts; :func:`ntpcert.instance.onehot.onehot_columns`), else None. Computed once."""
        from ntpcert.instance.onehot import onehot_columns

        return onehot_columns(self.embeddings)

    @property
    def hash_form(self) -> str:
        """How :meth:`fingerprint` hashes the probabilities: ``"probs"`` (exact rationals, built from
        probabilities), ``"dense"`` (the (m, V) int64 counts) or ``"csr"`` (the counts row by row in CSR
        form, past :data:`SPARSE_HASH_CELLS` cells: :func:`hash_form`)."""
        return "probs" if self.counts is None else hash_form(self.m, self.V)

    @cached_property
    def _fingerprint(self) -> str:
        return self._fingerprint_value()

    def _fingerprint_value(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.m},{self.d},{self.V};".encode())
        h.update(np.ascontiguousarray(self.embeddings, dtype="<f8").tobytes())
        if self.counts is not None and self.hash_form == "csr":
            C = self.counts
            rows, cols = np.nonzero(C)
            hash_csr(h, np.searchsorted(rows, np.arange(self.m + 1)), cols, C[rows, cols])
        elif self.counts is not None:
            h.update(b"counts;")
            h.update(np.ascontiguousarray(self.counts, dtype="<i8").tobytes())
        else:
            h.update(b"probs;")
            for row in self.exact_probs:
                h.update((",".join(f"{f.numerator}/{f.denominator}" for f in row) + ";").encode())
        if self.exact_weights is not None:
            h.update(",".join(f"{f.numerator}/{f.denominator}" for f in self.exact_weights).encode())
        return h.hexdigest()

    def describe(self, *, embedding_rank: int | None = None, fingerprint: bool = False) -> dict[str, Any]:
        """A JSON-ready summary: sizes, support sizes, n and ℋ (and with ``fingerprint`` the key
        ``fingerprint``, :meth:`fingerprint`: ``ntpcert info``).

        ``embedding_rank`` is the rank of H when the caller already knows it (for example certified
        mod a prime); otherwise a float SVD rank is computed when H has at most 4,000,000 entries.
        """
        k = self.support_sizes
        if embedding_rank is None and self.m * self.d <= 4_000_000:
            embedding_rank = int(np.linalg.matrix_rank(self.embeddings))
        return {
            "name": self.name,
            "m": self.m,
            "d": self.d,
            "V": self.V,
            "n": self.n,
            "support_size_min": int(k.min()),
            "support_size_max": int(k.max()),
            "support_size_mean": float(k.mean()),
            "entropy": self.entropy(),
            "embedding_rank": embedding_rank,
            **({"fingerprint": self.fingerprint()} if fingerprint else {}),
        }

    def __repr__(self) -> str:
        return f"NTPInstance(name={self.name!r}, m={self.m}, d={self.d}, V={self.V})"


__all__ = ["COUNT_MAX", "NTPInstance", "PROB_SUM_TOL", "SPARSE_HASH_CELLS", "hash_csr", "hash_form"]
