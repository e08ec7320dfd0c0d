r"""Dual block-coordinate ascent over contexts, vectorised by delayed (batched) updates.

The dual variable is held per token class as ``A`` of shape (m, C): row j is :math:`b_j`, and the
decoder is :math:`W_c = A^\top H` (one row per class). Each block update
(:func:`~ntpcert.solve.structured.block.block_update`) needs context j's logits
:math:`g = W_c h_j`. Two equivalent ways keep them at hand:

* **kernel path** (:class:`KernelState`, for :math:`d \ge m`): keep the logits
  :math:`Z = K A` of shape (m, C) with :math:`K = HH^\top`; row j of Z *is* g.
  Memory :math:`O(m^2 + mC)`.
* **linear path** (:class:`LinearState`, for :math:`d < m`): keep :math:`W_c` of shape (C, d) and
  compute :math:`g = W_c h_j`. Memory :math:`O(Cd + mC)`.

**Delayed updates.** Updating Z (or :math:`W_c`) after each block costs a rank-one update of the
whole state. Instead the changes :math:`\Delta_1, \dots, \Delta_B` of a batch of B contexts are kept
aside; context :math:`j_b` of the batch reads :math:`g = Z_{j_b} + \sum_{i<b} K_{j_b j_i} \Delta_i` (a
:math:`b \times C` product), and the batch is applied at its end with one matrix product
(:math:`Z \mathrel{+}= K_{:,\text{batch}} \Delta`, or :math:`W_c \mathrel{+}= \Delta^\top H_\text{batch}`).
The iterates are
exactly those of sequential block-coordinate ascent; only the arithmetic is regrouped so that BLAS
does the heavy part. The per-block products are small, so they run on one BLAS thread; the batch
products use all of them. On the linear path of a large instance (m·C at least
:data:`COMPILED_MIN_CELLS`) the per-block interpreter overhead, not BLAS, is the cost, and the sequential
ascent runs compiled instead, with shrinking (:mod:`~ntpcert.solve.structured.compiled`).
"""

from __future__ import annotations

import numpy as np

from ntpcert.solve.structured import compiled
from ntpcert.solve.structured.block import block_update
from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.util.numbers import single_thread

#: Contexts per delayed update.
BATCH = 64

#: The linear path runs the compiled epoch (:mod:`~ntpcert.solve.structured.compiled`) from this many
#: dual entries m·C on (tests lower it to compare the two epochs).
COMPILED_MIN_CELLS = compiled.MIN_CELLS


class KernelState:
    """Logits :math:`Z = KA` of shape (m, C), with :math:`K = HH^\\top` of shape (m, m)."""

    path = "kernel"

    def __init__(self, H: np.ndarray, A: np.ndarray) -> None:
        self.K = H @ H.T
        self.diag = np.ascontiguousarray(np.diag(self.K))
        self.refresh(A)

    def refresh(self, A: np.ndarray) -> None:
        """Recompute the state from A (removes drift)."""
        self.Z = self.K @ A

    def batch_gram(self, batch: np.ndarray) -> np.ndarray:
        return self.K[np.ix_(batch, batch)]

    def row(self, j: int) -> np.ndarray:
        return self.Z[j]

    def flush(self, batch: np.ndarray, dA: np.ndarray) -> None:
        self.Z += self.K[:, batch] @ dA

    def logits(self) -> np.ndarray:
        """Logits of shape (m, C)."""
        return self.Z

    def sq_norms(self, A: np.ndarray) -> np.ndarray:
        """:math:`\\|w_c\\|^2` per class, shape (C,)."""
        return np.einsum("jc,jc->c", A, self.Z)


class LinearState:
    """Class rows :math:`W_c = A^\\top H` of shape (C, d)."""

    path = "linear"

    def __init__(self, H: np.ndarray, A: np.ndarray) -> None:
        self.H = H
        self.diag = np.einsum("ij,ij->i", H, H)
        self.refresh(A)

    def refresh(self, A: np.ndarray) -> None:
        self.Wc = A.T @ self.H

    def batch_gram(self, batch: np.ndarray) -> np.ndarray:
        Hb = self.H[batch]
        return Hb @ Hb.T

    def row(self, j: int) -> np.ndarray:
        return self.Wc @ self.H[j]

    def flush(self, batch: np.ndarray, dA: np.ndarray) -> None:
        self.Wc += dA.T @ self.H[batch]

    def logits(self) -> np.ndarray:
        return self.H @ self.Wc.T

    def sq_norms(self, A: np.ndarray) -> np.ndarray:
        return np.einsum("cd,cd->c", self.Wc, self.Wc)


def make_state(H: np.ndarray, A: np.ndarray, path: str = "auto") -> KernelState | LinearState:
    """The kernel state when ``path == "kernel"`` or (``"auto"`` and :math:`d \\ge m`), else linear."""
    m, d = H.shape
    if path == "kernel" or (path == "auto" and d >= m):
        return KernelState(H, A)
    return LinearState(H, A)


def uses_compiled(state: KernelState | LinearState, A: np.ndarray) -> bool:
    """True when :func:`epoch` runs the compiled linear-path epoch for this state and dual."""
    return isinstance(state, LinearState) and A.size >= COMPILED_MIN_CELLS and compiled.available()


def epoch(state: KernelState | LinearState, A: np.ndarray, classes: TokenClasses, order: np.ndarray,
          off: np.ndarray, mu: np.ndarray, batch: int = BATCH, keep: np.ndarray | None = None,
          full: bool = True) -> None:
    """One pass of block updates over the contexts in ``order``, in place on ``A`` and ``state``.

    Parameters
    ----------
    A : ndarray of shape (m, C)
    order : ndarray of shape (m,)
        A permutation of the contexts.
    off : ndarray of bool, shape (m, C)
        ``~classes.mask``.
    mu : ndarray of shape (m,)
        The last root of each context's block update (NaN before the first); updated in place.
    keep : ndarray of bool, shape (m, C), optional
        Shrinking on the compiled linear path (:func:`~ntpcert.solve.structured.compiled.linear_epoch`);
        ignored by the numpy epochs, which visit every class.
    full : bool
        With ``keep``: a full pass that rewrites it, or a shrunk one.
    """
    if uses_compiled(state, A):
        compiled.linear_epoch(state, A, classes, order, off, mu, keep, full)
        return
    sizes = None if classes.trivial else classes.sizes
    support, weight, diag = classes.support, classes.support_weight, state.diag
    C = A.shape[1]
    dA = np.empty((batch, C))
    for s in range(0, order.size, batch):
        idx = order[s : s + batch]
        Kb = state.batch_gram(idx)
        with single_thread():
            for b, j in enumerate(idx):
                g = state.row(j)
                if b:
                    g = g + Kb[b, :b] @ dA[:b]
                c = diag[j]
                g = g - c * A[j]
                new, mu[j] = block_update(g, support[j], off[j], sizes, weight[j], c, mu[j])
                np.subtract(new, A[j], out=dA[b])
                A[j] = new
        state.flush(idx, dA[: idx.size])
