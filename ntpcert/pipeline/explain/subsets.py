r"""Sub-instances on a set of contexts, and exact checks of a separating point on them.

A set :math:`C` of contexts is *separable on its own* when the NTP-separability system (6) restricted
to the contexts of :math:`C` (all V tokens kept) is feasible:

.. math:: (Wh_j)_z = t_j\ (z \in S_j), \qquad (Wh_j)_v \le t_j - 1\ (v \notin S_j), \qquad j \in C .

Only the columns of :math:`H_C` (the rows of H in C) that are not identically zero matter: W acts on
the others through zeros. :func:`sub_instance` drops them (``cols`` keeps the original indices), which
makes the sub-problems of one-hot corpora a few dozen variables per token. A point of the reduced
problem, padded with zero columns, is a point of the full one; a Farkas ray of the reduced problem
(rows :math:`a_j` over tokens, :math:`\sum_j a_j h_j^\top = 0`) is one of the full problem as it is,
because the dropped columns of :math:`H_C` are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np

from ntpcert.instance import NTPInstance
from ntpcert.instance.sparse import SparseCountsInstance


@dataclass(frozen=True, eq=False)
class SubInstance:
    """The instance restricted to some contexts and to the columns of H they use.

    Attributes
    ----------
    instance : NTPInstance
        The sub-instance: ``len(contexts)`` contexts, all V tokens, ``len(cols)`` embedding columns.
    contexts : tuple of int
        Original index of each of its contexts.
    cols : ndarray of shape (d',)
        Original index of each of its embedding columns.
    """

    instance: NTPInstance
    contexts: tuple[int, ...]
    cols: np.ndarray

    def ray_to_whole(self, ray: dict) -> dict:
        """A Farkas ray ``{(v, j'): Fraction}`` of the sub-instance on the whole instance's indices."""
        return {(int(v), self.contexts[int(j)]): x for (v, j), x in ray.items()}


def sub_instance(instance: NTPInstance, contexts) -> SubInstance:
    """The sub-instance on ``contexts`` (a sequence of distinct original indices), all tokens kept,
    the embedding columns that are zero on every one of them dropped (at least one column stays)."""
    C = tuple(int(j) for j in contexts)
    H = instance.embeddings[list(C)]
    cols = np.flatnonzero(np.any(H != 0.0, axis=0))
    if cols.size == 0:
        cols = np.array([0], dtype=np.int64)
    Hc = H[:, cols]
    names = None if instance.context_names is None else [instance.context_names[j] for j in C]
    kw = {"token_names": instance.token_names, "context_names": names, "name": f"{instance.name}[{len(C)} contexts]"}
    if isinstance(instance, SparseCountsInstance):
        sub = SparseCountsInstance.from_csr(Hc, instance.csr[list(C)], **kw)
    elif instance.has_counts:
        sub = NTPInstance.from_counts(Hc, instance.counts[list(C)], **kw)
    else:
        rows = [list(instance.exact_row(j)) for j in C]
        sub = NTPInstance.from_probs(Hc, rows, [instance.exact_weight(j) for j in C], **kw)
    return SubInstance(sub, C, cols.astype(np.int64))


@dataclass(frozen=True, eq=False)
class ExactSeparatingPoint:
    r"""A rational matrix that separates a set of contexts, on some embedding columns.

    Attributes
    ----------
    cols : ndarray of shape (d',)
        Original indices of the embedding columns W acts on (W is zero on the others).
    W : list of list of Fraction, shape (V, d')
    """

    cols: np.ndarray
    W: list

    def margins(self, instance: NTPInstance, contexts) -> tuple[bool, Fraction | None]:
        r"""Exact check on the contexts ``contexts`` of ``instance``: ``(equal, smallest margin)``.

        ``equal`` is whether every context's in-support logits are exactly equal **and** every
        context is zero outside ``cols`` (so the point's logits are the whole W's); the margin is
        :math:`\min_j \min_{v \notin S_j} (t_j - (Wh_j)_v)`, None when no token is off any support.
        The set is separable when ``equal`` and the margin is positive (scale W by its inverse)."""
        C = [int(j) for j in contexts]
        H = instance.embeddings[C]
        outside = np.ones(H.shape[1], dtype=bool)
        outside[self.cols] = False
        if np.any(H[:, outside] != 0.0):
            return False, None
        V, k = instance.V, len(self.cols)
        Wm = flint.fmpq_mat(V, k, [flint.fmpq(x.numerator, x.denominator) for row in self.W for x in row])
        Hc = H[:, self.cols]
        Hm = flint.fmpq_mat(k, len(C), [flint.fmpq(*float(Hc[j, i]).as_integer_ratio())
                                        for i in range(k) for j in range(len(C))])
        Z = Wm * Hm  # (V, |C|) exact logits
        best = None
        for c, j in enumerate(C):
            S = {int(z) for z in instance.support(j)}
            t = Z[min(S), c]
            for v in range(V):
                z = Z[v, c]
                if v in S:
                    if z != t:
                        return False, None
                elif best is None or t - z < best:
                    best = t - z
        return True, (None if best is None else Fraction(int(best.p), int(best.q)))

    def separates(self, instance: NTPInstance, contexts) -> bool:
        """Whether the point certifies ``contexts`` separable (:meth:`margins`)."""
        equal, margin = self.margins(instance, contexts)
        return equal and (margin is None or margin > 0)


def exact_point(sub: SubInstance, W: np.ndarray) -> tuple[ExactSeparatingPoint | None, str]:
    """A float point W of shape (V, d') of ``sub`` made exactly feasible (the exact pipeline's repair,
    :func:`ntpcert.exact.separability.exact_feasible_point`), then checked here on its own."""
    from ntpcert.exact.separability import exact_feasible_point

    point, _, reason = exact_feasible_point(sub.instance, W)
    if point is None:
        return None, f"the point could not be made exact: {reason}"
    F = point.fractions()
    rows = [[F[v, i] for i in range(F.shape[1])] for v in range(F.shape[0])]
    out = ExactSeparatingPoint(sub.cols, rows)
    local = ExactSeparatingPoint(np.arange(sub.cols.size), rows)
    if not local.separates(sub.instance, range(sub.instance.m)):
        return None, "the repaired point fails the exact margin check"
    return out, ""


__all__ = ["ExactSeparatingPoint", "SubInstance", "exact_point", "sub_instance"]
