r"""The support pattern of an NTP instance, seen in the logit domain of the unconstrained-features model.

In the unconstrained-features model (UFM) both the word embeddings :math:`W \in \mathbb R^{V\times d}` and the
context embeddings :math:`H \in \mathbb R^{m\times d}` are trained, so the logits
:math:`L = WH^\top \in \mathbb R^{V\times m}` (column j holds the logits of context j) are free up to rank d.
Everything the limits of training depend on is then the **support matrix**
:math:`S \in \{0,1\}^{V\times m}`, :math:`S_{z,j} = 1` iff :math:`z \in S_j`, plus, for the finite part only,
the in-support probabilities.

Two linear pieces of the logit domain (our derivation, the logit-domain analogue of the paper's F):

* :math:`\mathcal F = \{L : L_{:,j} \text{ is supported on } S_j \text{ and sums to 0 there}\}`
  (:math:`=\mathrm{span}\{(e_z - e_{z'})e_j^\top : z,z' \in S_j\}`); its orthogonal complement
  :math:`\mathcal F^\perp` is the set of L whose logits are **equal within each support**.
  Both projections act column by column: :math:`P_{\mathcal F^\perp}` replaces the in-support entries of a
  column by their mean.
* The finite part :math:`L^\star \in \mathcal F`: column j is :math:`\log p_{j,z} - \overline{\log p_j}` on
  :math:`S_j` (the mean taken over :math:`S_j`) and 0 off it; it is the unique point of
  :math:`\mathcal F` whose in-support softmax equals :math:`p_j`, so the NTP-compatibility condition always
  holds in the UFM.

Contexts with the same support are grouped (:attr:`SupportPattern.groups`): the nuclear-norm program of
:mod:`ntpcert.geometry.program` depends on the pattern only through the distinct supports and their
multiplicities, which is what the structured solver exploits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SupportPattern:
    """The support matrix of m contexts over V tokens and its distinct columns.

    Attributes
    ----------
    mask : ndarray of bool, shape (V, m)
        ``mask[z, j]`` iff token z can follow context j (the transpose of
        :meth:`NTPInstance.support_mask`, so that columns are contexts as in :math:`L = WH^\\top`).
    groups : ndarray of bool, shape (V, r)
        The r distinct columns of ``mask``, in order of first appearance.
    group_of : ndarray of int, shape (m,)
        ``group_of[j]``: the column of ``groups`` equal to ``mask[:, j]``.
    multiplicity : ndarray of int, shape (r,)
        How many contexts share each distinct support.
    """

    mask: np.ndarray
    groups: np.ndarray
    group_of: np.ndarray
    multiplicity: np.ndarray

    @classmethod
    def from_mask(cls, mask: np.ndarray) -> "SupportPattern":
        """From a (V, m) boolean support matrix; every column needs a non-empty support."""
        S = np.asarray(mask)
        if S.ndim != 2 or S.shape[0] < 2 or S.shape[1] < 1:
            raise InputError(f"mask: expected a (V, m) array with V >= 2 and m >= 1, got shape {S.shape}")
        if S.dtype != bool:
            if not np.all((S == 0) | (S == 1)):
                raise InputError("mask: entries must be 0/1 or booleans")
            S = S.astype(bool)
        empty = np.flatnonzero(~S.any(axis=0))
        if empty.size:
            raise InputError(f"mask: context {int(empty[0])} has an empty support")
        _, first, inverse, counts = np.unique(S.T, axis=0, return_index=True, return_inverse=True,
                                              return_counts=True)
        order = np.argsort(first, kind="stable")  # groups in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        group_of = rank[np.asarray(inverse).reshape(-1)]
        groups = S[:, np.sort(first)]
        return cls(_frozen(S), _frozen(groups), _frozen(group_of.astype(np.int64)),
                   _frozen(counts[order].astype(np.int64)))

    @classmethod
    def from_instance(cls, instance: NTPInstance) -> "SupportPattern":
        """The support pattern of ``instance`` (its embeddings play no role in the UFM)."""
        return cls.from_mask(instance.support_mask().T)

    @property
    def V(self) -> int:
        return int(self.mask.shape[0])

    @property
    def m(self) -> int:
        return int(self.mask.shape[1])

    @property
    def r(self) -> int:
        """Number of distinct supports."""
        return int(self.groups.shape[1])

    @property
    def n_margins(self) -> int:
        """Number of margin constraints (out-of-support pairs :math:`(v, j)`, :math:`v \\notin S_j`)."""
        return int((~self.mask).sum())

    def centered_support(self) -> np.ndarray:
        r"""The centred support matrix :math:`\tilde S = (I - \tfrac1V\mathbf 1\mathbf 1^\top)S`, shape (V, m).

        Column j is :math:`(V-k_j)/V` on :math:`S_j` and :math:`-k_j/V` off it: a feasible point of the
        nuclear-norm NTP-SVM with every margin exactly 1 (the proxy of :math:`L^{mm}` in the paper's code)."""
        S = self.mask.astype(np.float64)
        return S - S.mean(axis=0, keepdims=True)

    def token_groups(self) -> np.ndarray:
        """Array of shape (V,): tokens with the same row of the support matrix (followers of exactly the
        same contexts) share a label; labels in order of first appearance."""
        _, first, inverse = np.unique(self.mask, axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[np.asarray(inverse).reshape(-1)].astype(np.int64)

    def check_logits(self, L: np.ndarray, field: str = "L") -> np.ndarray:
        """``L`` as a float64 (V, m) array; an :class:`InputError` naming ``field`` otherwise."""
        L = np.asarray(L, dtype=np.float64)
        if L.shape != (self.V, self.m):
            raise InputError(f"{field}: expected shape (V, m) = ({self.V}, {self.m}), got {L.shape}")
        if not np.all(np.isfinite(L)):
            raise InputError(f"{field}: has non-finite entries")
        return L

    # ------------------------------------------------------------------ the two pieces
    def project_perp(self, L: np.ndarray) -> np.ndarray:
        r""":math:`P_{\mathcal F^\perp}(L)`: in-support entries of each column replaced by their mean."""
        L = self.check_logits(L)
        S = self.mask
        k = S.sum(axis=0)
        mean = np.where(S, L, 0.0).sum(axis=0) / k
        return np.where(S, mean[None, :], L)

    def project_F(self, L: np.ndarray) -> np.ndarray:
        r""":math:`P_{\mathcal F}(L) = L - P_{\mathcal F^\perp}(L)`: supported on the supports, zero mean there."""
        L = self.check_logits(L)
        return L - self.project_perp(L)

    def equality_violation(self, L: np.ndarray) -> float:
        r""":math:`\max_j \max_{z, z' \in S_j} |L_{z,j} - L_{z',j}|`: how far L is from equal in-support logits."""
        L = self.check_logits(L)
        S = self.mask
        hi = np.where(S, L, -np.inf).max(axis=0)
        lo = np.where(S, L, np.inf).min(axis=0)
        return float(np.max(hi - lo))

    def min_margin(self, L: np.ndarray) -> float:
        r"""Smallest margin :math:`\min_j \min_{z \in S_j, v \notin S_j} (L_{z,j} - L_{v,j})` (inf without
        margin constraints)."""
        L = self.check_logits(L)
        S = self.mask
        if not (~S).any():
            return float("inf")
        lo_in = np.where(S, L, np.inf).min(axis=0)
        hi_out = np.where(S, -np.inf, L).max(axis=0)
        keep = (~S).any(axis=0)
        return float(np.min(lo_in[keep] - hi_out[keep]))


def finite_part(instance: NTPInstance) -> np.ndarray:
    r"""The finite part :math:`L^\star \in \mathcal F`, shape (V, m): column j is
    :math:`\log p_{j,z} - \tfrac1{k_j}\sum_{z'\in S_j}\log p_{j,z'}` on :math:`S_j` and 0 off it.

    It is the minimum-norm L with :math:`L_{z,j} - L_{z',j} = \log(p_{j,z}/p_{j,z'})` on every support
    (the logit-domain W*); adding any :math:`L \in \mathcal F^\perp` leaves the in-support softmax ratios alone."""
    P = instance.probs.T
    S = P > 0
    with np.errstate(divide="ignore"):
        logp = np.where(S, np.log(np.where(S, P, 1.0)), 0.0)
    mean = logp.sum(axis=0) / S.sum(axis=0)
    return np.where(S, logp - mean[None, :], 0.0)


def ufm_loss(instance: NTPInstance, L: np.ndarray) -> float:
    r"""The cross-entropy of logits L (shape (V, m)):
    :math:`\mathrm{CE}(L) = -\sum_j \pi_j \sum_{z\in S_j} p_{j,z}\log\mathbb S_z(L_{:,j})`."""
    L = np.asarray(L, dtype=np.float64)
    zmax = L.max(axis=0, keepdims=True)
    lse = zmax[0] + np.log(np.exp(L - zmax).sum(axis=0))
    return float(instance.weights @ (lse - (instance.probs.T * L).sum(axis=0)))


def ufm_excess_loss(instance: NTPInstance, L: np.ndarray) -> float:
    r""":math:`\mathrm{CE}(L) - \mathcal H = \sum_j \pi_j\,\mathrm{KL}(p_j\,\|\,\mathbb S(L_{:,j}))`, summed as
    non-negative KL terms (no cancellation)."""
    L = np.asarray(L, dtype=np.float64)
    zmax = L.max(axis=0, keepdims=True)
    logS = L - zmax - np.log(np.exp(L - zmax).sum(axis=0, keepdims=True))
    P = instance.probs.T
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(P > 0, P * (np.log(np.where(P > 0, P, 1.0)) - logS), 0.0).sum(axis=0)
    return float(instance.weights @ kl)


__all__ = ["SupportPattern", "finite_part", "ufm_excess_loss", "ufm_loss"]
