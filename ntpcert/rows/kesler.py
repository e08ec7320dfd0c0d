r"""Kesler-style constraint stacking: the linear maps behind (4), (5), (6a) and (6b).

**vec(W) order (documented once, used everywhere).** ``W`` has shape (V, d), as in the paper, and
``vec(W) = W.reshape(-1)`` is its row-major flattening: entry ``(v, i)`` sits at index ``v * d + i``.

With one anchor :math:`z_j = \min S_j` per context,

* the **equality rows** are :math:`(e_z - e_{z_j}) \otimes h_j` for :math:`z \in S_j \setminus \{z_j\}`;
  there are :math:`r = \sum_j (k_j - 1)` of them, their row space is the subspace F of (5), and
  :math:`A_{eq}\,\mathrm{vec}(W) = b` with :math:`b = \log(p_{j,z}/p_{j,z_j})` is (4);
* the **margin rows** are :math:`(e_{z_j} - e_v) \otimes h_j` for :math:`v \notin S_j`;
  there are :math:`q = \sum_j (V - k_j)` of them, and under (6a) the conditions
  :math:`A_{mar}\,\mathrm{vec}(W) \ge 1` are exactly (6b).

Besides the explicit sparse matrices, the module applies both maps and their transposes through the
logits :math:`W H^\top`, never forming a matrix with V·d columns, and forms the equality Gram matrix
:math:`G = A_{eq} A_{eq}^\top`, whose entries are
:math:`\langle e_z - e_{z_j}, e_{z'} - e_{z_{j'}}\rangle \cdot \langle h_j, h_{j'}\rangle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ntpcert.instance import NTPInstance

if TYPE_CHECKING:  # scipy.sparse costs ~0.1 s of start-up; only the explicit matrices need it
    import scipy.sparse as sp


#: Smallest and largest non-zero embedding magnitudes the float pipeline accepts (products of two
#: entries, summed over d, must stay well inside float64's normal range).
EMBEDDING_RANGE = (2.0 ** -480, 2.0 ** 480)


def check_embedding_range(instance: NTPInstance) -> None:
    """An :class:`~ntpcert.errors.InputError` naming the extreme entry when a non-zero embedding
    magnitude lies outside :data:`EMBEDDING_RANGE`."""
    from ntpcert.errors import InputError

    H = instance.embeddings
    if H.size == 0:
        return
    found = instance.onehot_columns  # one-hot contexts: the non-zeros are the m scales
    if found is not None:
        H = np.abs(found[1])
    hi = max(float(H.max()), -float(H.min()))
    if hi == 0:
        return
    small_lo = hi < EMBEDDING_RANGE[0]
    if not small_lo:  # a non-zero entry below the range? block by block, without copies of H
        flat = H.reshape(-1)
        lo_bound = EMBEDDING_RANGE[0]
        for s in range(0, flat.size, RANGE_BLOCK):
            b = flat[s:s + RANGE_BLOCK]
            if np.any((b > -lo_bound) & (b < lo_bound) & (b != 0)):
                small_lo = True
                break
    if hi > EMBEDDING_RANGE[1] or small_lo:
        A = np.abs(H)
        lo = float(A[A > 0].min())
        bad = hi if hi > EMBEDDING_RANGE[1] else lo
        raise InputError(f"embeddings: an entry of magnitude {bad:.3g} is outside the supported range "
                         f"[{EMBEDDING_RANGE[0]:.3g}, {EMBEDDING_RANGE[1]:.3g}] (entries span {lo:.3g} to {hi:.3g}); "
                         "the verdicts do not change when every embedding is scaled by one positive number, so "
                         "rescale them")


#: Entries per block of the range check's scan for tiny non-zeros (in cache).
RANGE_BLOCK = 1 << 16


#: Rows per block of :meth:`KeslerSystem.apply_eq` and :meth:`KeslerSystem.apply_eq_T` (a block holds two
#: (rows, d) float64 arrays).
APPLY_BLOCK = 65_536


@dataclass(frozen=True, eq=False)
class KeslerSystem:
    """Index tables of the equality and margin rows of an instance.

    Attributes
    ----------
    eq_context, eq_token, eq_anchor : ndarray of shape (r,)
        Row ``i`` of :math:`A_{eq}` is :math:`(e_{\\text{eq\\_token}[i]} - e_{\\text{eq\\_anchor}[i]}) \\otimes h_{\\text{eq\\_context}[i]}`.
    mar_context, mar_token, mar_anchor : ndarray of shape (q,)
        Row ``i`` of :math:`A_{mar}` is :math:`(e_{\\text{mar\\_anchor}[i]} - e_{\\text{mar\\_token}[i]}) \\otimes h_{\\text{mar\\_context}[i]}`.
        Built at first use (q = Σ_j (V - k_j) is about m·V: 78 M rows and 1.9 GB at m = V = 8,831, which
        a verdict settled by Lemma 1 never reads).
    """

    instance: NTPInstance
    eq_context: np.ndarray
    eq_token: np.ndarray
    eq_anchor: np.ndarray

    @cached_property
    def _margin_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mj, mv = np.nonzero(~self.instance.support_mask())
        return mj.astype(np.int64), mv.astype(np.int64), self.instance.anchors()[mj]

    @property
    def mar_context(self) -> np.ndarray:
        return self._margin_rows[0]

    @property
    def mar_token(self) -> np.ndarray:
        return self._margin_rows[1]

    @property
    def mar_anchor(self) -> np.ndarray:
        return self._margin_rows[2]

    @classmethod
    def build(cls, instance: NTPInstance) -> "KeslerSystem":
        r"""Index the equality rows of ``instance`` (O(m + r); the margin rows, O(mV), when first asked for).

        Raises :class:`~ntpcert.errors.InputError` when an embedding entry lies outside
        ``EMBEDDING_RANGE`` in magnitude: Gram entries :math:`\langle h_j, h_l\rangle` would overflow or
        lose every digit to underflow in float64. The verdicts do not change when all embeddings are
        scaled by one positive number, so rescaling such data is the remedy.
        """
        check_embedding_range(instance)
        anchors = instance.anchors()
        k = instance.support_sizes
        # row-major (j, z) over each support but its anchor, the smallest token (supports are sorted)
        ej = np.repeat(np.arange(instance.m, dtype=np.int64), k - 1)
        ez = (np.concatenate([s[1:] for s in instance.supports]) if ej.size else np.zeros(0, dtype=np.int64))
        return cls(instance=instance, eq_context=ej.astype(np.int64), eq_token=ez.astype(np.int64),
                   eq_anchor=anchors[ej])

    # ------------------------------------------------------------------ sizes
    @property
    def n_eq(self) -> int:
        """Number r of equality rows, :math:`\\sum_j (k_j - 1)`."""
        return int(self.eq_context.size)

    @property
    def n_margin(self) -> int:
        """Number q of margin rows, :math:`\\sum_j (V - k_j)`."""
        inst = self.instance
        return int(inst.m * inst.V - int(inst.support_sizes.sum()))

    @property
    def n_vars(self) -> int:
        """Number of entries of W, V·d."""
        return self.instance.V * self.instance.d

    # ------------------------------------------------------------------ explicit sparse matrices
    def _rows(self, ctx: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> sp.csr_matrix:
        return sparse_rows(self.instance.embeddings, self.instance.V, ctx, plus, minus)

    def eq_matrix(self) -> sp.csr_matrix:
        """:math:`A_{eq}` of shape (r, V·d), sparse, :math:`2\\,\\mathrm{nnz}(h_j)` non-zeros in a row of context j
        (:func:`sparse_rows`)."""
        return self._rows(self.eq_context, self.eq_token, self.eq_anchor)

    def margin_matrix(self) -> sp.csr_matrix:
        """:math:`A_{mar}` of shape (q, V·d), sparse, :math:`2\\,\\mathrm{nnz}(h_j)` non-zeros in a row of context j
        (:func:`sparse_rows`)."""
        return self._rows(self.mar_context, self.mar_anchor, self.mar_token)

    # ------------------------------------------------------------------ matrix-free maps
    def apply_eq(self, W: np.ndarray) -> np.ndarray:
        """:math:`A_{eq}\\,\\mathrm{vec}(W)`, shape (r,): in-support logit differences to the anchor,
        :math:`(w_{z_i} - w_{a_i})^\\top h_{j_i}` row by row (:math:`O(rd)` in blocks of :data:`APPLY_BLOCK`
        rows; no (m, V) logits: 1.4 GB at a model's whole pydoc text)."""
        W = np.asarray(W, dtype=np.float64)
        H = self.instance.embeddings
        out = np.empty(self.n_eq)
        for s in range(0, self.n_eq, APPLY_BLOCK):
            e = min(s + APPLY_BLOCK, self.n_eq)
            D = W[self.eq_token[s:e]] - W[self.eq_anchor[s:e]]
            out[s:e] = np.einsum("ij,ij->i", D, H[self.eq_context[s:e]])
        return out

    def apply_margin(self, W: np.ndarray) -> np.ndarray:
        """:math:`A_{mar}\\,\\mathrm{vec}(W)`, shape (q,): anchor logit minus each off-support logit."""
        Z = self.instance.logits(W)
        return Z[self.mar_context, self.mar_anchor] - Z[self.mar_context, self.mar_token]

    def eq_coefficients(self, y: np.ndarray) -> np.ndarray:
        """The (V, m) matrix U with :math:`A_{eq}^\\top y = \\mathrm{vec}(U H)`, i.e.
        :math:`\\sum_i y_i (e_{z_i} - e_{z_{j_i}}) h_{j_i}^\\top = \\sum_j U_{:,j} h_j^\\top`."""
        inst = self.instance
        U = np.zeros((inst.V, inst.m))
        np.add.at(U, (self.eq_token, self.eq_context), y)
        np.add.at(U, (self.eq_anchor, self.eq_context), -y)
        return U

    def margin_coefficients(self, lam: np.ndarray) -> np.ndarray:
        """The (V, m) matrix U with :math:`A_{mar}^\\top \\lambda = \\mathrm{vec}(U H)`."""
        inst = self.instance
        U = np.zeros((inst.V, inst.m))
        np.add.at(U, (self.mar_anchor, self.mar_context), lam)
        np.add.at(U, (self.mar_token, self.mar_context), -lam)
        return U

    def apply_eq_T(self, y: np.ndarray) -> np.ndarray:
        """:math:`A_{eq}^\\top y` reshaped to (V, d): :math:`\\sum_i y_i (e_{z_i} - e_{a_i}) h_{j_i}^\\top`, row by
        row (:math:`O(rd)` in blocks of :data:`APPLY_BLOCK` rows; no (V, m) coefficients)."""
        import scipy.sparse as sparse

        y = np.asarray(y, dtype=np.float64)
        inst = self.instance
        H = inst.embeddings
        out = np.zeros((inst.V, inst.d))
        for s in range(0, self.n_eq, APPLY_BLOCK):
            e = min(s + APPLY_BLOCK, self.n_eq)
            n = e - s
            S = sparse.csr_matrix((np.r_[np.ones(n), -np.ones(n)],
                                   (np.r_[self.eq_token[s:e], self.eq_anchor[s:e]], np.r_[np.arange(n), np.arange(n)])),
                                  shape=(inst.V, n))
            out += S @ (y[s:e, None] * H[self.eq_context[s:e]])
        return out

    def apply_margin_T(self, lam: np.ndarray) -> np.ndarray:
        """:math:`A_{mar}^\\top \\lambda` reshaped to (V, d)."""
        return self.margin_coefficients(np.asarray(lam, dtype=np.float64)) @ self.instance.embeddings

    def eq_gram(self) -> np.ndarray:
        """Dense :math:`G = A_{eq} A_{eq}^\\top` of shape (r, r), without forming :math:`A_{eq}`.

        :math:`G_{ik} = \\langle e_{z_i} - e_{a_i}, e_{z_k} - e_{a_k} \\rangle \\, \\langle h_{j_i}, h_{j_k}\\rangle`.
        """
        H = self.instance.embeddings
        K = H @ H.T
        z, a, c = self.eq_token, self.eq_anchor, self.eq_context
        T = (
            (z[:, None] == z[None, :]).astype(np.float64)
            - (z[:, None] == a[None, :])
            - (a[:, None] == z[None, :])
            + (a[:, None] == a[None, :])
        )
        return T * K[np.ix_(c, c)]

    # ------------------------------------------------------------------ right-hand side of (4)
    def log_odds(self) -> np.ndarray:
        """:math:`b_i = \\log(p_{j,z}/p_{j,z_j})` for each equality row, shape (r,), from the exact
        ratios of the instance (counts, or fractions), evaluated in float64."""
        inst = self.instance
        if inst.has_counts:  # the r entries, not a float copy of all m·V counts
            return (np.log(inst.counts_at(self.eq_context, self.eq_token).astype(np.float64))
                    - np.log(inst.counts_at(self.eq_context, self.eq_anchor).astype(np.float64)))
        P = inst.probs
        return np.log(P[self.eq_context, self.eq_token]) - np.log(P[self.eq_context, self.eq_anchor])


def sparse_rows(H: np.ndarray, V: int, ctx: np.ndarray, plus: np.ndarray, minus: np.ndarray):
    r"""The rows :math:`(e_{plus} - e_{minus}) \otimes h_{ctx}` as a csr matrix of shape (len(ctx), V·d), in
    canonical form (sorted column indices, no duplicates, no stored zeros), built from the non-zeros of H only
    (the layout of :mod:`ntpcert.rows.kesler`; one-hot rows have one or k non-zeros, not d).

    The csr arrays are written directly: row i holds the non-zeros of :math:`h_{ctx_i}` in the block of the
    smaller of its two tokens, then again in the block of the larger, with the signs of
    :math:`e_{plus} - e_{minus}` (a row with plus = minus is zero and stores nothing). No coordinate list is
    sorted, so it costs a few passes over the 2·nnz entries (on a corpus with dense embeddings,
    r = 21,000 rows of d = 256, about 0.3 s instead of 1.5-3 s through the coordinate format).

    Parameters
    ----------
    H : ndarray of shape (m, d)
    V : int
    ctx, plus, minus : ndarray of shape (n,)
        Context, plus token and minus token of each row.
    """
    import scipy.sparse as sp

    H = np.asarray(H, dtype=np.float64)
    d = H.shape[1]
    ctx, plus, minus = (np.asarray(a, dtype=np.int64).ravel() for a in (ctx, plus, minus))
    n = ctx.size
    lo, hi = np.minimum(plus, minus), np.maximum(plus, minus)
    sign = np.where(plus <= minus, 1.0, -1.0)
    live = plus != minus
    dense_rows = bool(live.all()) and np.count_nonzero(H) == H.size
    if dense_rows:  # every row has 2d entries: the arrays are reshapes, no gather of positions
        nnz = np.full(n, d, dtype=np.int64)
    else:
        Hs = sp.csr_matrix(H)  # non-zeros only, sorted by column
        nnz = np.where(live, np.diff(Hs.indptr)[ctx], 0).astype(np.int64)
    total = int(nnz.sum())
    wide = max(2 * total, V * d) >= np.iinfo(np.int32).max
    idx_t = np.int64 if wide else np.int32
    indptr = np.zeros(n + 1, dtype=idx_t)
    np.cumsum(2 * nnz, out=indptr[1:])
    if dense_rows:
        Hc = H[ctx] * sign[:, None]  # (n, d)
        cols = np.arange(d, dtype=idx_t)
        data = np.concatenate([Hc, -Hc], axis=1).ravel()
        indices = np.concatenate([lo.astype(idx_t)[:, None] * d + cols, hi.astype(idx_t)[:, None] * d + cols],
                                 axis=1).ravel()
        return sp.csr_matrix((data, indices, indptr), shape=(n, V * d))
    first = np.cumsum(nnz) - nnz  # where each row's non-zeros start among the ``total`` gathered ones
    k = np.arange(total, dtype=np.int64) - np.repeat(first, nnz)  # position inside its row of H
    pos = np.repeat(Hs.indptr[ctx].astype(np.int64), nnz) + k  # ... and inside Hs.data
    cols_h, vals = Hs.indices[pos].astype(idx_t), Hs.data[pos] * np.repeat(sign, nnz)
    at = np.repeat(2 * first, nnz) + k  # the smaller token's block of the output row
    data = np.empty(2 * total)
    indices = np.empty(2 * total, dtype=idx_t)
    data[at], indices[at] = vals, np.repeat(lo.astype(idx_t), nnz) * d + cols_h
    at += np.repeat(nnz, nnz)  # the larger token's block
    data[at], indices[at] = -vals, np.repeat(hi.astype(idx_t), nnz) * d + cols_h
    return sp.csr_matrix((data, indices, indptr), shape=(n, V * d))
