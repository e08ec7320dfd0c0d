r"""Word and context embeddings read off a logit matrix, and the statements about :math:`L^{mm}` as checks.

**Embeddings.** With the thin SVD :math:`L = U\Sigma Q^\top` (rank k), the balanced factorisation
:math:`W = U\Sigma^{1/2}`, :math:`H = Q\Sigma^{1/2}` satisfies :math:`WH^\top = L` and
:math:`W^\top W = H^\top H = \Sigma`; it is the factorisation that ridge-regularised training reaches
(at a stationary point of :math:`\mathrm{CE}(WH^\top) + \tfrac\lambda2(\|W\|_F^2 + \|H\|_F^2)` the factors are
balanced, and :math:`\tfrac12(\|W\|_F^2 + \|H\|_F^2) \ge \|WH^\top\|_*` with equality exactly then). Any other
balanced factorisation differs by a rotation :math:`R \in O(k)`, so the Gram matrices
:math:`WW^\top = (LL^\top)^{1/2}` and :math:`HH^\top = (L^\top L)^{1/2}` and all angles are determined by L.

**Statements as checks** (each returns a relative defect; 0 means it holds exactly):

* ``feasible``: equal logits on every support and margins at least 1 (the constraints of the NTP-SVM);
* ``context_collapse`` (subspace collapse, arXiv 2408.15417): contexts with the same support have the same
  column of :math:`L^{mm}`, hence the same context embedding;
* ``word_collapse`` (our derivation, by the same argument on rows): tokens that follow exactly the same
  contexts have the same row of :math:`L^{mm}`, hence the same word embedding;
* ``centred`` (our derivation): :math:`\mathbf 1^\top L^{mm} = 0`, i.e. the word embeddings sum to 0;
* ``balanced``: :math:`W^\top W = H^\top H` and :math:`WH^\top = L` for an embedding pair.

Proof of the three derived statements: each is a symmetry or a projection that keeps feasibility and does
not increase the nuclear norm, and the nuclear norm strictly prefers it. For two columns a, b of an optimum
with the same support, replacing both by :math:`(a+b)/2` is feasible and changes :math:`LL^\top` by
:math:`-\tfrac12(a-b)(a-b)^\top`; :math:`\|L\|_* = \mathrm{tr}(LL^\top)^{1/2}` and the square root is
operator monotone, so the norm falls strictly unless a = b. Rows work the same way with :math:`L^\top L`, and
centring changes :math:`L^\top L` by :math:`-\tfrac1V L^\top\mathbf 1\mathbf 1^\top L`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.geometry.pattern import SupportPattern

#: Singular values below this fraction of the largest are dropped from the embeddings.
EMBED_RANK_RTOL = 1e-8


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


def _cosines(X: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(X, axis=1)
    n = np.where(n > 0, n, 1.0)
    Y = X / n[:, None]
    return np.clip(Y @ Y.T, -1.0, 1.0)


@dataclass(frozen=True, eq=False)
class Embeddings:
    r"""The balanced factorisation of a logit matrix.

    Attributes
    ----------
    W : ndarray of shape (V, k)
        Word embeddings :math:`U\Sigma^{1/2}` (rows).
    H : ndarray of shape (m, k)
        Context embeddings :math:`Q\Sigma^{1/2}` (rows).
    singular_values : ndarray of shape (k,)
    """

    W: np.ndarray
    H: np.ndarray
    singular_values: np.ndarray

    @classmethod
    def from_logits(cls, L: np.ndarray, rank_rtol: float = EMBED_RANK_RTOL) -> "Embeddings":
        """Balanced embeddings of ``L`` (shape (V, m)) at the rank where singular values exceed ``rank_rtol``
        times the largest (at least 1)."""
        U, s, Qt = np.linalg.svd(np.asarray(L, dtype=np.float64), full_matrices=False)
        k = max(1, int(np.sum(s > rank_rtol * s[0]))) if s.size and s[0] > 0 else 1
        r = np.sqrt(s[:k])
        return cls(_frozen(U[:, :k] * r), _frozen(Qt[:k].T * r), _frozen(s[:k]))

    @property
    def rank(self) -> int:
        return int(self.singular_values.size)

    def word_gram(self) -> np.ndarray:
        """:math:`WW^\\top`, shape (V, V)."""
        return self.W @ self.W.T

    def context_gram(self) -> np.ndarray:
        """:math:`HH^\\top`, shape (m, m)."""
        return self.H @ self.H.T

    def word_cosines(self) -> np.ndarray:
        """Cosines of the angles between word embeddings, shape (V, V)."""
        return _cosines(self.W)

    def context_cosines(self) -> np.ndarray:
        """Cosines of the angles between context embeddings, shape (m, m)."""
        return _cosines(self.H)


@dataclass(frozen=True)
class Check:
    """One statement evaluated on one matrix: ``defect`` is its relative violation (0 when exact)."""

    name: str
    statement: str
    defect: float

    def holds(self, tol: float) -> bool:
        return self.defect <= tol

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "statement": self.statement, "defect": self.defect}


def _scale(L: np.ndarray) -> float:
    n = float(np.linalg.norm(L))
    return n if n > 0 else 1.0


def check_feasible(L: np.ndarray, pattern: SupportPattern) -> Check:
    """Equal in-support logits and margins at least 1, after scaling L to its own smallest margin."""
    L = pattern.check_logits(L)
    eq = pattern.equality_violation(L) / _scale(L)
    mm = pattern.min_margin(L)
    margin_defect = 0.0 if not np.isfinite(mm) else max(0.0, 1.0 - mm)
    return Check("feasible", "equal logits on each support, margin >= 1 off it", max(eq, margin_defect))


def check_context_collapse(L: np.ndarray, pattern: SupportPattern) -> Check:
    r""":math:`\max \|L_{:,j} - L_{:,j'}\| / \|L\|_F` over contexts j, j' with the same support."""
    L = pattern.check_logits(L)
    worst = 0.0
    for g in range(pattern.r):
        cols = L[:, pattern.group_of == g]
        if cols.shape[1] > 1:
            worst = max(worst, float(np.max(np.linalg.norm(cols - cols[:, :1], axis=0))))
    return Check("context_collapse", "contexts with the same support have the same embedding", worst / _scale(L))


def check_word_collapse(L: np.ndarray, pattern: SupportPattern) -> Check:
    r""":math:`\max \|L_{z,:} - L_{z',:}\| / \|L\|_F` over tokens z, z' with the same row of the support matrix."""
    L = pattern.check_logits(L)
    labels = pattern.token_groups()
    worst = 0.0
    for g in np.unique(labels):
        rows = L[labels == g]
        if rows.shape[0] > 1:
            worst = max(worst, float(np.max(np.linalg.norm(rows - rows[:1], axis=1))))
    return Check("word_collapse", "tokens following the same contexts have the same embedding", worst / _scale(L))


def check_centred(L: np.ndarray, pattern: SupportPattern) -> Check:
    r""":math:`\|\mathbf 1^\top L\| / (\sqrt V\|L\|_F)`: the word embeddings sum to zero."""
    L = pattern.check_logits(L)
    return Check("centred", "word embeddings sum to zero (1ᵀL = 0)",
                 float(np.linalg.norm(L.sum(axis=0)) / (np.sqrt(pattern.V) * _scale(L))))


def check_balanced(emb: Embeddings, L: np.ndarray) -> Check:
    r""":math:`\max(\|W^\top W - H^\top H\|_F, \|WH^\top - L\|_F) / \|L\|_F`."""
    L = np.asarray(L, dtype=np.float64)
    d1 = float(np.linalg.norm(emb.W.T @ emb.W - emb.H.T @ emb.H))
    d2 = float(np.linalg.norm(emb.W @ emb.H.T - L))
    return Check("balanced", "WᵀW = HᵀH and WHᵀ = L", max(d1, d2) / _scale(L))


def all_checks(L: np.ndarray, pattern: SupportPattern, emb: Embeddings | None = None) -> list[Check]:
    """Every check on ``L`` (shape (V, m)); ``emb`` defaults to the balanced embeddings of L."""
    emb = Embeddings.from_logits(L) if emb is None else emb
    return [check_feasible(L, pattern), check_context_collapse(L, pattern), check_word_collapse(L, pattern),
            check_centred(L, pattern), check_balanced(emb, L)]


__all__ = ["Check", "EMBED_RANK_RTOL", "Embeddings", "all_checks", "check_balanced", "check_centred",
           "check_context_collapse", "check_feasible", "check_word_collapse"]
