r"""Active-set Newton polish: solve the NTP-SVM exactly on a guessed set of active constraints.

Write :math:`t_j` for the common in-support logit of context j. Given, for every token class c, the
set :math:`J_c` of contexts where its logit is pinned (:math:`c \in S_j`, pinned to :math:`t_j`, or
:math:`c \notin S_j` with an active margin, pinned to :math:`t_j - 1`), the KKT conditions restricted
to that guess are linear. With :math:`B_c = K_{J_c J_c}` and :math:`o_c \in \{0,1\}^{J_c}` marking the
off-support entries, the dual rows are

.. math:: b_c|_{J_c} = B_c^{-1} (t_{J_c} - o_c), \qquad b_c = 0 \text{ elsewhere,}

and the coupling :math:`\sum_c n_c b_{c,j} = 0` becomes one symmetric positive definite m×m system
(every context has a support class, so every row of M is covered):

.. math:: M t = r, \quad M = \sum_c n_c P_c^\top B_c^{-1} P_c, \quad r = \sum_c n_c P_c^\top B_c^{-1} o_c .

When the guess is right the result is the optimum up to rounding. :class:`ActiveSetSystem` runs
primal-dual active-set steps (drop pinned margins whose multiplier has the wrong sign, pin violated
ones) and keeps :math:`B_c^{-1}` of the classes whose pinned set did not change, so later steps cost
little more than the m×m solve.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .structured_classes import TokenClasses

#: A class's pinned set is padded up to a multiple of this size, so that factorisations batch.
PAD = 8

#: Relative slack of the margin test: a logit above :math:`t_j - 1` by more than this (times the scale
#: of t) counts as a violated margin.
MARGIN_SLACK = 1e-12


_CONTROLLER = []


def single_thread():
    """A context that keeps BLAS/LAPACK on one thread (small matrix operations are much slower
    multi-threaded, above all on a loaded machine); a no-op without threadpoolctl."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl is optional
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    ctl = _CONTROLLER[0]
    return nullcontext() if ctl is None else ctl.limit(limits=1, user_api="blas")


@dataclass(frozen=True)
class PolishResult:
    """Dual rows from one active-set solve.

    Attributes
    ----------
    A : ndarray of shape (m, C)
        The dual per class; rows are contexts.
    t : ndarray of shape (m,)
        The common in-support logits.
    steps : int
        Active-set steps taken.
    converged : bool
        True when the last step found no wrong sign and no violated margin.
    """

    A: np.ndarray
    t: np.ndarray
    steps: int
    converged: bool


class ActiveSetSystem:
    """Restricted KKT solves for changing pinned sets, reusing unchanged blocks.

    Parameters
    ----------
    classes : TokenClasses
    H : ndarray of shape (m, d)
    K : ndarray of shape (m, m), optional
        :math:`HH^\\top`; when omitted the blocks are formed from H.
    """

    def __init__(self, classes: TokenClasses, H: np.ndarray, K: np.ndarray | None = None) -> None:
        self.classes = classes
        self.H = H
        self.K = K
        m, C = classes.mask.shape
        self.cols: list[np.ndarray | None] = [None] * C
        self.inv: list[np.ndarray | None] = [None] * C

    def _gram(self, idx: np.ndarray) -> np.ndarray:
        if self.K is not None:
            return self.K[np.ix_(idx, idx)]
        Hi = self.H[idx]
        return Hi @ Hi.T

    def logits(self, A: np.ndarray) -> np.ndarray:
        """Logits of shape (m, C) of the dual A."""
        if self.K is not None:
            return self.K @ A
        return self.H @ (A.T @ self.H).T

    def _refactor(self, pinned: np.ndarray) -> bool:
        C = pinned.shape[1]
        changed = []
        for c in range(C):
            J = np.flatnonzero(pinned[:, c])
            old = self.cols[c]
            if old is None or old.size != J.size or not np.array_equal(old, J):
                self.cols[c] = J
                self.inv[c] = None
                if J.size:
                    changed.append(c)
        if not changed:
            return True
        lengths = np.array([self.cols[c].size for c in changed])
        padded = (lengths + PAD - 1) // PAD * PAD
        for size in np.unique(padded):
            group = [changed[i] for i in np.flatnonzero(padded == size)]
            stack = np.broadcast_to(np.eye(size), (len(group), size, size)).copy()
            for i, c in enumerate(group):
                n = self.cols[c].size
                stack[i, :n, :n] = self._gram(self.cols[c])
            try:
                np.linalg.cholesky(stack)  # positive definite, or the guess cannot be solved
                inv = np.linalg.inv(stack)
            except np.linalg.LinAlgError:
                return False
            for i, c in enumerate(group):
                n = self.cols[c].size
                self.inv[c] = inv[i, :n, :n].copy()
        return True

    def solve(self, active: np.ndarray) -> PolishResult | None:
        """One restricted solve for the pinned sets ``active | classes.mask`` (one step)."""
        cls = self.classes
        pinned = active | cls.mask
        m, C = pinned.shape
        with single_thread():
            if not self._refactor(pinned):
                return None
            M = np.zeros(m * m)
            r = np.zeros(m)
            for c in range(C):
                J, Bi = self.cols[c], self.inv[c]
                if Bi is None:
                    continue
                n = cls.sizes[c]
                M[(J[:, None] * m + J[None, :]).ravel()] += n * Bi.ravel()
                o = ~cls.mask[J, c]
                if o.any():
                    r[J] += n * Bi[:, o].sum(axis=1)
        M = M.reshape(m, m)
        try:
            L = np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            return None
        t = np.linalg.solve(L.T, np.linalg.solve(L, r))
        if not np.all(np.isfinite(t)):
            return None
        A = np.zeros((m, C))
        for c in range(C):
            J, Bi = self.cols[c], self.inv[c]
            if Bi is not None:
                A[J, c] = Bi @ (t[J] - ~cls.mask[J, c])
        return PolishResult(A, t, 1, False)

    def pdas(self, active: np.ndarray, steps: int) -> PolishResult | None:
        """Up to ``steps`` primal-dual active-set steps from the guess ``active`` (m, C)."""
        off = ~self.classes.mask
        res = None
        for k in range(1, steps + 1):
            res = self.solve(active)
            if res is None:
                return None
            Z = self.logits(res.A)
            slack = MARGIN_SLACK * max(1.0, float(np.abs(res.t).max()))
            viol = off & ~active & (Z > res.t[:, None] - 1.0 + slack)
            wrong = active & (res.A > 0)
            if not viol.any() and not wrong.any():
                return PolishResult(res.A, res.t, k, True)
            active = (active & ~wrong) | viol
        return PolishResult(res.A, res.t, steps, False)
