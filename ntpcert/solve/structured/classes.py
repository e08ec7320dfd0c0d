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
        :math:`n_c` as float64.
    mask : ndarray of shape (m, C)
        ``mask[j, c]`` iff the tokens of class c lie in :math:`S_j`.
    support : tuple of ndarray
        Class indices of :math:`S_j` for each context j.
    support_weight : ndarray of shape (m,)
        :math:`\\sum_{c \\in S_j} n_c = k_j`.
    """

    of_token: np.ndarray
    representative: np.ndarray
    sizes: np.ndarray
    mask: np.ndarray
    support: tuple
    support_weight: np.ndarray

    @classmethod
    def build(cls, instance: NTPInstance) -> "TokenClasses":
        """Group the tokens of ``instance`` by their support column (O(mV) time)."""
        mask = instance.support_mask()  # (m, V)
        packed = np.ascontiguousarray(np.packbits(mask, axis=0).T)  # (V, ceil(m/8))
        rows = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        # order classes by their smallest token, so that classes of singletons keep token order
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        of_token = rank[inverse.ravel()].astype(np.int64)
        rep = first[order].astype(np.int64)
        sizes = np.bincount(of_token, minlength=rep.size).astype(np.float64)
        cmask = np.ascontiguousarray(mask[:, rep])
        support = tuple(np.flatnonzero(row) for row in cmask)
        return cls(of_token, rep, sizes, cmask, support, instance.support_sizes.astype(np.float64))

    @property
    def count(self) -> int:
        """Number C of classes."""
        return int(self.representative.size)

    @property
    def trivial(self) -> bool:
        """True when every class is a single token."""
        return self.count == self.of_token.size

    def expand_rows(self, B: np.ndarray) -> np.ndarray:
        """Rows per class (shape (C, ...)) to rows per token (shape (V, ...))."""
        return B if self.trivial else B[self.of_token]

    def collapse_rows(self, X: np.ndarray) -> np.ndarray:
        """Rows per token (shape (V, ...)) to the mean row of each class (shape (C, ...))."""
        if self.trivial:
            return X
        out = np.zeros((self.count,) + X.shape[1:])
        np.add.at(out, self.of_token, X)
        return out / self.sizes.reshape((-1,) + (1,) * (X.ndim - 1))


def class_instance(instance: NTPInstance):
    """``(classes, reduced)``: the token classes and the instance on one token per class (supports as
    0/1 counts: the split depends on the supports and H only)."""
    classes = TokenClasses.build(instance)
    reduced = NTPInstance.from_counts(instance.embeddings, classes.mask.astype(np.int64),
                                      name=instance.name)
    return classes, reduced
