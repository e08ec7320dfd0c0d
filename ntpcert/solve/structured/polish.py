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

from dataclasses import dataclass

import numpy as np

from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.util.numbers import single_thread

#: A class's pinned set is padded up to a multiple of this size, so that factorisations batch.
PAD = 8

#: Relative slack of the margin test: a logit above :math:`t_j - 1` by more than this (times the scale
#: of t) counts as a violated margin.
MARGIN_SLACK = 1e-12


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
        self.M: np.ndarray | None = None  # flat m*m, kept up to date across steps

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
                inv = np.linalg.inv(stack)
            except np.linalg.LinAlgError:
                return False
            if not np.all(np.isfinite(inv)):
                return False
            for i, c in enumerate(group):
                n = self.cols[c].size
                self.inv[c] = inv[i, :n, :n].copy()
        return True

    def _contribution(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices into M and the values :math:`n_c B_c^{-1}` of class c."""
        J, m = self.cols[c], self.classes.mask.shape[0]
        return (J[:, None] * m + J[None, :]).ravel(), self.classes.sizes[c] * self.inv[c].ravel()

    def solve(self, active: np.ndarray) -> PolishResult | None:
        """One restricted solve for the pinned sets ``active | classes.mask`` (one step)."""
        cls = self.classes
        pinned = active | cls.mask
        m, C = pinned.shape
        with single_thread():
            old_cols = list(self.cols)
            old_inv = list(self.inv)
            if not self._refactor(pinned):
                return None
            if self.M is None:
                parts = [self._contribution(c) for c in range(C) if self.inv[c] is not None]
                idx = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
                val = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
                # float64 always: numpy returns int64 for an empty input even with weights
                self.M = np.bincount(idx, weights=val, minlength=m * m).astype(np.float64)
            else:  # replace the contributions of the classes whose pinned set changed
                for c in range(C):
                    if self.inv[c] is old_inv[c]:
                        continue
                    if old_inv[c] is not None:
                        J = old_cols[c]
                        self.M[(J[:, None] * m + J[None, :]).ravel()] -= cls.sizes[c] * old_inv[c].ravel()
                    if self.inv[c] is not None:
                        fi, fv = self._contribution(c)
                        self.M[fi] += fv
            r = np.zeros(m)
            for c in range(C):
                J, Bi = self.cols[c], self.inv[c]
                if Bi is not None:
                    o = ~cls.mask[J, c]
                    if o.any():
                        r[J] += cls.sizes[c] * Bi[:, o].sum(axis=1)
        Mm = self.M.reshape(m, m)
        try:  # numpy rather than scipy.linalg keeps scipy out of the structured solver's start-up
            np.linalg.cholesky(Mm)  # M = sum_c n_c B_c^{-1} must be positive definite
            t = np.linalg.solve(Mm, r)
        except (np.linalg.LinAlgError, ValueError):
            return None
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
