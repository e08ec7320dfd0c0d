r"""Tokens that never follow a context, merged into one representative: exact for (4) and (6).

A model's vocabulary is much larger than the set of tokens a corpus shows as next tokens (GPT-2's
V = 50,257 against about 9,000 observed on the whole pydoc text). Call a token *unseen* when it lies
in no support :math:`S_j`. The reduced instance keeps the observed tokens, in token order, and, when
there are unseen tokens, one more token standing for all of them (the *representative*: the smallest
unseen id, as the last row). The counts, the contexts and the embeddings are unchanged.

**Why the verdicts are the same (exactly).** Write :math:`U` for the unseen tokens, :math:`u` for
the representative, :math:`t_j` for the common in-support logit of (6a).

* (4), NTP-compatibility, is the system :math:`(w_z - w_{z_j})^\top h_j = \log(p_{j,z}/p_{j,z_j})`,
  :math:`z \in S_j`. No unseen token appears in it, in the full instance or the reduced one (where
  :math:`u` is in no support either). The two systems are the same equations in the same unknowns
  (the observed rows) plus free rows: one is solvable iff the other is, and F of (5) is zero on the
  unseen rows (and on :math:`u`'s row) in both.
* (6), NTP-separability: (6a) involves only observed tokens. In (6b) every unseen token :math:`v`
  has the same constraints, :math:`w_v^\top h_j \le t_j - 1` for every j (it is out of every
  support). If :math:`W` (full) is feasible, its observed rows and the row of any one unseen token
  are feasible for the reduced instance. If :math:`W'` (reduced) is feasible, the full :math:`W` with
  the observed rows of :math:`W'` and :math:`w'_u` copied to every unseen row is feasible. Farkas
  rays correspond the same way: a ray of the reduced instance, with its entries on :math:`u` put on
  any one unseen token (0 on the others), is a ray of the full instance, since the full system
  restricted to the observed tokens and that token *is* the reduced system.
* Hence NTP-compatible, NTP-separable and "the entropy bound is reachable" (both) hold for the full
  vocabulary iff they hold for the reduced instance; the verdicts of ``certify`` on it, float or
  exact, are statements about the full vocabulary.

**The NTP-SVM, weighted.** :math:`\min\|W\|_F` counts every unseen row. At its optimum all unseen
rows are equal (swapping two of them maps the feasible set onto itself, and the objective is strictly
convex), so the full :math:`W^{mm}` solves the reduced problem with weight :math:`|U|` on
:math:`\|w_u\|^2`, not weight 1: the reduced instance's own :math:`W^{mm}` is a different point.
:meth:`TokenMerge.weighted` gives the reduced instance with that weight
(:meth:`~ntpcert.instance.NTPInstance.with_token_multiplicity`: the representative counts :math:`|U|` times in
the NTP-SVM's objective and its dual's column sums), and its :math:`W^{mm}`, with the representative's row
copied to every unseen token (:meth:`TokenMerge.expand_rows`), *is* the full one. The same holds for
:math:`W^{mm}_P`: the full vocabulary's split puts all of U on the same side of each context (the split is
invariant under swaps of unseen tokens), so its extended pattern is the reduced one's with U repeated.

**What is not the same.** :math:`\mathrm{CE}(W)` counts :math:`|U|\,e^{w_u^\top h_j}` in each partition
function, so the best loss :math:`L^*` and the bracket on :math:`L^*-\mathcal H` of the reduced instance
are not the full vocabulary's unless both conditions hold (then both are :math:`\mathcal H`). Off the
separable case, :math:`W_{fin}` and :math:`L^*` of the reduced instance are the full ones when no pair of
the representative is non-separable (then neither :math:`F_N` nor :math:`\mathrm{CE}_N` involves an unseen
token), and are not computed otherwise. A decoder's own numbers (CE, margins) are computed on the full
vocabulary from its (V, d) rows (:mod:`ntpcert.dynamics.compare`).

Everything here works from the sparse counts (:class:`~ntpcert.instance.lm.contexts.ContextCounts`):
no (m, V) array over the full vocabulary is formed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.instance.lm.contexts import ContextCounts
from ntpcert.instance.model import NTPInstance

__all__ = ["MERGED_SVM_NOTE", "TokenMerge", "merge_unseen", "reduced_counts", "token_merge"]


#: Why ``certify`` does not solve a merged instance's NTP-SVM: it is the full vocabulary's only weighted.
MERGED_SVM_NOTE = ("not solved here: the instance merges the unseen tokens into one representative, which keeps "
                   "compatibility and separability exact, and W^mm only with the representative's row weighed by "
                   "the number of tokens it stands for (ntpcert svm, limits and compare --model solve it so; a "
                   "certificate, one token each, does not carry that weight); see ntpcert.instance.lm.merge")


@dataclass(frozen=True, eq=False)
class TokenMerge:
    """How the reduced vocabulary maps to the model's.

    Attributes
    ----------
    V : int
        The model's vocabulary size (rows of its decoder).
    kept : ndarray of shape (V',)
        Token id (in the model's vocabulary) of each row of the reduced instance: the observed next
        tokens, sorted, then the representative when there is one.
    merged : int
        How many unseen tokens the representative stands for (0: nothing merged, no representative).
    """

    V: int
    kept: np.ndarray
    merged: int

    @property
    def V_reduced(self) -> int:
        """V', the reduced instance's vocabulary size."""
        return int(self.kept.size)

    @property
    def representative(self) -> int | None:
        """Token id of the representative of the unseen tokens, or None when every token is observed."""
        return int(self.kept[-1]) if self.merged else None

    @property
    def observed(self) -> np.ndarray:
        """Token ids of the observed next tokens (sorted)."""
        return self.kept[:-1] if self.merged else self.kept

    def unseen(self) -> np.ndarray:
        """Token ids of the unseen tokens (the representative among them), sorted."""
        mask = np.ones(self.V, dtype=bool)
        mask[self.observed] = False
        return np.flatnonzero(mask)

    def reduce_rows(self, W: np.ndarray) -> np.ndarray:
        """Rows of a full (V, ...) array at the reduced tokens (the representative's own row for u)."""
        W = np.asarray(W)
        if W.shape[0] != self.V:
            from ntpcert.errors import InputError

            raise InputError(f"W: expected {self.V} rows (the model's vocabulary), got shape {W.shape}")
        return W[self.kept]

    def expand_rows(self, Wr: np.ndarray) -> np.ndarray:
        """A full (V, ...) array from reduced rows: each observed row in place, the representative's row
        copied to every unseen token (the feasible point of the module doc)."""
        Wr = np.asarray(Wr)
        out = np.empty((self.V,) + Wr.shape[1:], dtype=Wr.dtype)
        if self.merged:
            out[...] = Wr[-1]
        out[self.observed] = Wr[: self.observed.size]
        return out

    def multiplicity(self) -> np.ndarray:
        """Array of shape (V',) of int64: 1 for each observed token, the number of merged tokens for the
        representative."""
        n = np.ones(self.V_reduced, dtype=np.int64)
        if self.merged:
            n[-1] = self.merged
        return n

    def weighted(self, instance: NTPInstance) -> NTPInstance:
        """The reduced ``instance`` (V' tokens) whose representative weighs as the tokens it stands for in the
        NTP-SVM (module doc): its :math:`W^{mm}`, expanded by :meth:`expand_rows`, is the full vocabulary's."""
        if instance.V != self.V_reduced:
            from ntpcert.errors import InputError

            raise InputError(f"instance: has V = {instance.V} tokens, the merge keeps {self.V_reduced}")
        return instance.with_token_multiplicity(self.multiplicity())

    def expand_pairs(self, pairs: np.ndarray) -> np.ndarray:
        """Out-of-support pairs (j, v) of the reduced instance as the full vocabulary's: a pair of the
        representative stands for one pair per unseen token. Shape (n, 2), sorted by j then v."""
        P = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        nobs = self.observed.size
        obs = P[P[:, 1] < nobs]
        out = [np.column_stack([obs[:, 0], self.observed[obs[:, 1]]])]
        rep = P[P[:, 1] >= nobs, 0] if self.merged else np.zeros(0, dtype=np.int64)
        if rep.size:
            U = self.unseen()
            out.append(np.column_stack([np.repeat(rep, U.size), np.tile(U, rep.size)]))
        full = np.concatenate(out).astype(np.int64)
        return full[np.lexsort((full[:, 1], full[:, 0]))]

    @property
    def keeps_svm(self) -> bool:
        """Whether the NTP-SVM of the reduced instance is the full vocabulary's (nothing merged)."""
        return not self.merged

    def report_keys(self, *, svm_asked: bool) -> dict[str, Any]:
        """The report's ``vocabulary`` key and, when an NTP-SVM was asked for but tokens were merged,
        ``svm_error`` saying why it was not solved (:data:`MERGED_SVM_NOTE`)."""
        out: dict[str, Any] = {"vocabulary": self.to_json()}
        if svm_asked and not self.keeps_svm:
            out["svm_error"] = MERGED_SVM_NOTE
        return out

    def to_json(self) -> dict[str, Any]:
        """The record in reports and the certificate's ``source.vocabulary``."""
        return {"V": self.V, "V_reduced": self.V_reduced, "observed": int(self.observed.size),
                "merged": self.merged, "representative": self.representative}


def token_merge(counts: ContextCounts) -> TokenMerge:
    """The merge of ``counts``: the observed tokens (those with a positive count) and, when some token of
    ``[V]`` is unseen, the smallest unseen id as the representative."""
    V = counts.V
    observed = np.unique(counts.tokens).astype(np.int64)
    merged = V - observed.size
    kept = observed
    if merged:
        free = np.ones(V, dtype=bool)
        free[observed] = False
        kept = np.concatenate([observed, [int(np.argmax(free))]]).astype(np.int64)
    kept.setflags(write=False)
    return TokenMerge(int(V), kept, int(merged))


def reduced_counts(counts: ContextCounts, merge: TokenMerge) -> np.ndarray:
    """The counts (m, V') over the reduced tokens (the representative's column is 0), from the sparse ones."""
    col = np.searchsorted(merge.observed, counts.tokens)
    C = np.zeros((counts.m, merge.V_reduced), dtype=np.int64)
    C[counts.rows, col] = counts.values
    return C


def reduced_csr(counts: ContextCounts, merge: TokenMerge) -> Any:
    """The counts over the reduced tokens as a ``scipy.sparse.csr_array`` of shape (m, V') (the
    representative's column is empty): :func:`reduced_counts` without a dense cell."""
    import scipy.sparse as sp

    col = np.searchsorted(merge.observed, counts.tokens)
    return sp.csr_array((counts.values.astype(np.int64), (counts.rows, col)), shape=(counts.m, merge.V_reduced))


def merge_unseen(counts: ContextCounts) -> tuple[np.ndarray, TokenMerge]:
    """The reduced counts (m, V') and the merge (:func:`token_merge`, :func:`reduced_counts`). V ≥ 2, so
    V' ≥ 2: one observed token leaves at least one unseen."""
    merge = token_merge(counts)
    return reduced_counts(counts, merge), merge
