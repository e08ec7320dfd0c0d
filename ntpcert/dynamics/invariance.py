r"""The decoder directions that no prediction sees, and a decoder modulo them.

For an instance with embeddings :math:`h_1,\dots,h_m` (the rows of H, shape (m, d)), a change D of the
decoder W (shape (V, d)) leaves every context's softmax unchanged exactly when it adds the same constant
to all logits of each context, :math:`Dh_j\in\operatorname{span}(\mathbf 1)` for every j. These D form

.. math::

    N = \{D : Dh_j \in \operatorname{span}(\mathbf 1)\ \forall j\}
      = \{\mathbf 1a^\top : a\in\mathbb R^d\} + \{E : EH^\top = 0\}.

(Write :math:`D = \mathbf 1a^\top + E` with :math:`a = D^\top\mathbf 1/V`, so :math:`\mathbf 1^\top E = 0`.
Then :math:`Eh_j = (c_j - a^\top h_j)\mathbf 1`, and summing its entries gives
:math:`V(c_j - a^\top h_j) = \mathbf 1^\top Eh_j = 0`.) N holds the common row shift :math:`\mathbf 1c^\top`
(what TransformerLens' centred unembedding removes) and, when the instance appends a constant coordinate
:math:`h_{j,d} = 1` for the head's bias (:mod:`ntpcert.instance.lm.capture`), the bias shift, a constant
t added to the whole bias column: that is :math:`\mathbf 1(te_d)^\top`, the case :math:`a = te_d`. When H
does not span :math:`\mathbb R^d` (fewer contexts than dimensions, low-rank embeddings), N also holds every
change of the rows along :math:`\ker H`. Its orthogonal complement is

.. math::

    N^\perp = \operatorname{span}\{uh_j^\top : \mathbf 1^\top u = 0\}
            = \{X : \mathbf 1^\top X = 0,\ \text{the rows of } X \text{ in the row space of } H\},

and the orthogonal projection on it is :math:`P(W) = CWQ`, with :math:`C = I - \mathbf 1\mathbf 1^\top/V`
(centre the rows) and Q the orthogonal projector on the row space of H (a left and a right
multiplication: they commute). Every matrix a decoder is measured against lies in :math:`N^\perp`: F
(spanned by :math:`(e_z-e_{z'})h_j^\top`), W* (in F), :math:`W^{mm}` (by the NTP-SVM's KKT conditions a
combination of :math:`(e_z-e_v)h_j^\top`) and the CE gradient (:math:`\sum_j\pi_j(\mathbb S(Wh_j)-p_j)h_j^\top`).
So :math:`\langle W, X\rangle = \langle P(W), X\rangle` and :math:`P_F W = P_F P(W)` for each of them, and
the norms and cosines of :math:`P(W)` are those of W modulo N: the same for every decoder that makes the
same predictions, whatever the export convention.

Float stand-in. Q comes from the SVD of H with :func:`numpy.linalg.matrix_rank`'s rule (a singular value
counts when above :math:`\sigma_{\max}\max(m,d)\,\epsilon`): a direction of H below it changes logits only
at the level of float64 rounding. When the rank is d, Q = I and P is exactly the centring, with no
tolerance involved. The centring first subtracts the first row (:math:`C(W - \mathbf 1w_1^\top) = CW`), so
that W and :math:`W + \mathbf 1c^\top` give the same bits whenever the rows' differences are exact in
float64 (dyadic entries of a few bits, as in the tests). These are measurements, not verdicts; nothing exact
depends on the rank chosen here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GRAM_FULL_RANK", "SoftmaxQuotient"]

#: :meth:`SoftmaxQuotient.of` takes H to have rank d, without an SVD, when the smallest eigenvalue of
#: :math:`H^\top H` is above this (or :math:`100md\epsilon`, the larger) times its largest.
GRAM_FULL_RANK = 1e-8


@dataclass(frozen=True, eq=False)
class SoftmaxQuotient:
    """The projection :math:`P` on :math:`N^\\perp` of the module doc, for one instance's embeddings.

    Attributes
    ----------
    d : int
        The embedding dimension.
    rank : int
        The (float) rank r of H: Q = I when it is d.
    basis : ndarray of shape (d, r) or (d, d - r)
        An orthonormal basis of the row space of H when r <= d - r, else of :math:`\\ker H` (the smaller
        one, so that applying Q costs :math:`O(Vd\\min(r, d-r))`); (d, 0) when r = d.
    """

    d: int
    rank: int
    basis: np.ndarray

    @property
    def row_basis(self) -> bool:
        """Whether :attr:`basis` spans the row space of H (else :math:`\\ker H`)."""
        return self.rank < self.d and self.basis.shape[1] == self.rank

    @classmethod
    def of(cls, embeddings: np.ndarray) -> "SoftmaxQuotient":
        """From the embeddings H (shape (m, d)). With m >= d, first the Gram matrix :math:`H^\\top H`
        (:math:`O(md^2)` at matrix-product speed): when its smallest eigenvalue is above
        :math:`t = \\max(` :data:`GRAM_FULL_RANK`, :math:`100md\\epsilon)` times its largest, the rank is d and
        Q = I. The computed Gram matrix is within :math:`\\gamma_m d\\,\\lambda_{\\max}` of the true one in the
        2-norm (each entry within :math:`\\gamma_m\\|H_{:,i}\\|\\|H_{:,k}\\|`), and eigvalsh adds about
        :math:`d\\epsilon\\lambda_{\\max}`, so by Weyl's inequality
        :math:`\\sigma_{\\min}/\\sigma_{\\max} > \\sqrt{0.98\\,t}`, far above the SVD rule's
        :math:`\\max(m,d)\\epsilon`: the SVD would find rank d too. Otherwise (m < d, or H ill-conditioned)
        the SVD of H decides (at m = 20,000, d = 768: 4 s for the Gram test, 41 s for the SVD, on a loaded
        2-core machine)."""
        H = np.asarray(embeddings, dtype=np.float64)
        m, d = H.shape
        if m == 0 or not np.any(H):
            return cls(d, 0, np.zeros((d, 0)))
        if m >= d:
            lam = np.linalg.eigvalsh(H.T @ H)
            if lam[0] > max(GRAM_FULL_RANK, 100.0 * m * d * np.finfo(np.float64).eps) * lam[-1]:
                return cls(d, d, np.zeros((d, 0)))
        _, s, Vt = np.linalg.svd(H, full_matrices=m < d)  # Vt is (d, d) either way; U is at most (m, m)
        tol = s[0] * max(m, d) * np.finfo(np.float64).eps
        r = int(np.count_nonzero(s > tol))
        B = Vt[:r].T if r <= d - r else Vt[r:].T
        return cls(d, r, np.ascontiguousarray(B))

    def project(self, W: np.ndarray) -> np.ndarray:
        """:math:`P(W) = CWQ` (shape (V, d)): the rows centred, then their part along :math:`\\ker H`
        removed. A new array; W is not changed."""
        W = np.asarray(W, dtype=np.float64)
        out = W - W[:1]  # C(W - 1 w_1^T) = CW; exact rows differences make W and W + 1c^T give the same bits
        out -= out.mean(axis=0, keepdims=True)
        if self.rank == self.d:
            return out
        B = self.basis
        if self.row_basis:
            return (out @ B) @ B.T
        out -= (out @ B) @ B.T
        return out

    def describe(self) -> str:
        """One line: what is quotiented out."""
        if self.rank == self.d:
            return "rows centred (H has rank d: the common row shift 1c^T is all that no prediction sees)"
        return (f"rows centred and projected on the row space of H (rank {self.rank} < d = {self.d}): the common "
                "row shift 1c^T and every change along ker H leave every prediction unchanged")
