r"""Interchangeable tokens of an NTP instance, collapsed into classes.

Two tokens :math:`v, v'` are *interchangeable* when they lie in exactly the same supports:
:math:`v \in S_j \Leftrightarrow v' \in S_j` for every context j. Swapping the rows
:math:`w_v, w_{v'}` of W maps the feasible set of the NTP-SVM onto itself and keeps
:math:`\|W\|_F`, so the unique minimiser :math:`W^{mm}` has equal rows on a class, and the optimal dual
:math:`a` (row ``v`` of the (V, m) dual) is equal on a class too. With classes :math:`c` of sizes
:math:`n_c` and class rows :math:`b_c \in \mathbb{R}^m`, the dual of ``math.md`` becomes

.. math:: \max_b \; \sum_j \sum_{c \notin S_j} n_c(-b_{c,j}) - \tfrac12 \sum_c n_c\, b_c K b_c^\top
          \quad\text{s.t.}\quad \sum_c n_c b_{c,j} = 0,\; b_{c,j} \le 0 \;(c \notin S_j),

with :math:`K = H H^\top`. Tokens that occur in no support form one class; with a large vocabulary
and few contexts it holds most tokens, so the solver's cost follows the number of classes rather
than V.

**Token multiplicities.** When the instance carries
:attr:`~ntpcert.instance.NTPInstance.token_multiplicity` (token v stands for :math:`\nu_v` tokens, e.g. a
model's unseen tokens merged into one representative), a class's size counts them:
:math:`n_c = \sum_{v\in c}\nu_v`. The dual above with these sizes is the dual of the vocabulary in which every
token is repeated :math:`\nu_v` times, so every solver that works on the classes (the structured solver, the
working-set QP) solves that vocabulary's NTP-SVM, restricted to equal rows on each repetition (which its
optimum has).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.instance import NTPInstance


@dataclass(frozen=True, eq=False)
class TokenClasses:
    """The classes of interchangeable tokens.

    Attributes
    ----------
    of_token : ndarray of shape (V,)
        Class index of each token.
    representative : ndarray of shape (C,)
        The smallest token of each class.
    sizes : ndarray of shape (C,)
        :math:`n_c` as float64: the number of tokens of the class, each counted with its multiplicity.
    mask : ndarray of shape (m, C)
        ``mask[j, c]`` iff the tokens of class c lie in :math:`S_j`.
    support : tuple of ndarray
        Class indices of :math:`S_j` for each context j.
    support_weight : ndarray of shape (m,)
        :math:`\\sum_{c \\in S_j} n_c` (:math:`k_j` without multiplicities).
    token_weight : ndarray of shape (V,) or None
        Each token's multiplicity, None when every token counts once.
    """

    of_token: np.ndarray
    representative: np.ndarray
    sizes: np.ndarray
    mask: np.ndarray
    support: tuple
    support_weight: np.ndarray
    token_weight: np.ndarray | None = None

    @classmethod
    def build(cls, instance: NTPInstance) -> "TokenClasses":
        """Group the tokens of ``instance`` by their support column (O(mV) time)."""
        of_token, rep = partition(instance)
        nu = instance.token_multiplicity
        sizes = np.bincount(of_token, weights=nu, minlength=rep.size).astype(np.float64)
        cmask = np.zeros((instance.m, rep.size), dtype=bool)  # (m, C)
        col = np.full(instance.V, -1, dtype=np.int64)
        col[rep] = np.arange(rep.size)
        for j, sj in enumerate(instance.supports):
            c = col[sj]
            cmask[j, c[c >= 0]] = True
        support = tuple(np.flatnonzero(row) for row in cmask)
        weight = instance.support_sizes.astype(np.float64) if nu is None else cmask.astype(np.float64) @ sizes
        return cls(of_token, rep, sizes, cmask, support, weight,
                   None if nu is None else np.asarray(nu, dtype=np.float64))

    @property
    def count(self) -> int:
        """Number C of classes."""
        return int(self.representative.size)

    @property
    def trivial(self) -> bool:
        """True when every class is a single token counted once (then every size is 1)."""
        return self.count == self.of_token.size and self.token_weight is None

    def expand_rows(self, B: np.ndarray) -> np.ndarray:
        """Rows per class (shape (C, ...)) to rows per token (shape (V, ...))."""
        return B if self.trivial else B[self.of_token]

    def collapse_rows(self, X: np.ndarray) -> np.ndarray:
        """Rows per token (shape (V, ...)) to the mean row of each class (shape (C, ...)), each token
        weighted by its multiplicity."""
        if self.trivial:
            return X
        out = np.zeros((self.count,) + X.shape[1:])
        if self.token_weight is not None:
            X = X * self.token_weight.reshape((-1,) + (1,) * (X.ndim - 1))
        np.add.at(out, self.of_token, X)
        return out / self.sizes.reshape((-1,) + (1,) * (X.ndim - 1))


def partition(instance: NTPInstance) -> tuple[np.ndarray, np.ndarray]:
    """``(of_token, representative)``: the class of each token (shape (V,)) and each class's smallest token
    (shape (C,)), tokens in one class when their support columns are equal, classes ordered by their smallest
    token (so classes of singletons keep token order). From the sparse supports: O(nnz + V), no (m, V) cells."""
    k = instance.support_sizes
    rows = np.repeat(np.arange(instance.m, dtype=np.int64), k)
    toks = np.concatenate(instance.supports).astype(np.int64) if rows.size else np.zeros(0, dtype=np.int64)
    order = np.lexsort((rows, toks))  # by token, then context (numpy only: the SVM path imports no scipy)
    rows = rows[order]
    ptr = np.zeros(instance.V + 1, dtype=np.int64)
    np.cumsum(np.bincount(toks, minlength=instance.V), out=ptr[1:])
    seen: dict[bytes, int] = {}
    of_token = np.empty(instance.V, dtype=np.int64)
    rep: list[int] = []
    for t in range(instance.V):
        key = rows[ptr[t]:ptr[t + 1]].tobytes()
        c = seen.get(key)
        if c is None:
            c = seen[key] = len(rep)
            rep.append(t)
        of_token[t] = c
    return of_token, np.asarray(rep, dtype=np.int64)


def class_instance(instance: NTPInstance):
    """``(classes, reduced)``: the token classes and the instance on one token per class (supports as
    0/1 counts: the split depends on the supports and H only)."""
    classes = TokenClasses.build(instance)
    reduced = NTPInstance.from_counts(instance.embeddings, classes.mask.astype(np.int64),
                                      name=instance.name)
    return classes, reduced
