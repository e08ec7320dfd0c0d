r"""Distinct contexts of a tokenised corpus and their exact next-token counts over a model's vocabulary.

A corpus is split into documents at blank lines (a line of only whitespace); each document is
tokenised on its own, so no context crosses from one document into the next. Two ways to cut
contexts (:class:`ContextSpec`):

* ``tokens:K``: every position ``i ≥ K`` of a document gives the pair (tokens ``i-K .. i-1``,
  token ``i``): the K previous tokens, the paper's k-gram setting. The model is fed exactly those K
  tokens (after a BOS token when asked for).
* ``prefix:T``: the first ``t`` tokens of a document, for ``t = 1 .. T``, each followed by token
  ``t`` (a causal model trained on sequences of length T + 1 sees exactly these; arXiv 2408.15417).
  One forward pass over a document's first ``T + 1`` tokens gives all its contexts.

Counts are exact integers over the model's whole vocabulary ``[V]`` (tokens that never occur are
columns of zeros); the distinct contexts are sorted as token-id tuples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ntpcert.errors import InputError

__all__ = ["ContextCounts", "ContextSpec", "count_contexts", "split_documents"]

#: Documents are separated by blank lines.
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n\s*")

#: The longest context accepted (tokens fed to the model per context).
MAX_CONTEXT_LENGTH = 4096


@dataclass(frozen=True)
class ContextSpec:
    """How contexts are cut: ``kind`` ``"tokens"`` (K previous tokens) or ``"prefix"`` (document prefixes
    of lengths 1..T); ``length`` is K or T."""

    kind: str
    length: int

    @classmethod
    def parse(cls, text: str, field: str = "--context") -> "ContextSpec":
        """Read ``tokens:K`` or ``prefix:T`` (K, T positive integers)."""
        kind, _, num = str(text).partition(":")
        if kind not in ("tokens", "prefix") or not num.isdigit() or not 1 <= int(num) <= MAX_CONTEXT_LENGTH:
            raise InputError(f"{field}: value {text!r} is not tokens:K or prefix:T with K, T in 1..{MAX_CONTEXT_LENGTH}")
        return cls(kind, int(num))

    def __str__(self) -> str:
        return f"{self.kind}:{self.length}"


@dataclass(frozen=True, eq=False)
class ContextCounts:
    """The distinct contexts and their next-token counts.

    Attributes
    ----------
    contexts : tuple of m tuples of int
        Token ids of each context, sorted.
    rows, tokens, values : ndarray of shape (nnz,)
        The positive counts: context ``rows[i]`` is followed ``values[i]`` times by ``tokens[i]``.
    V : int
        The vocabulary size (the decoder's number of rows).
    token_frequency : ndarray of shape (V,)
        How often each token occurs in the corpus (every position, not only counted ones).
    """

    contexts: tuple[tuple[int, ...], ...]
    rows: np.ndarray
    tokens: np.ndarray
    values: np.ndarray
    V: int
    token_frequency: np.ndarray

    @property
    def m(self) -> int:
        return len(self.contexts)

    @property
    def n(self) -> int:
        """The number of counted (context, next token) pairs."""
        return int(self.values.sum())

    def dense(self) -> np.ndarray:
        """The counts as an int64 array of shape (m, V)."""
        C = np.zeros((self.m, self.V), dtype=np.int64)
        C[self.rows, self.tokens] = self.values
        return C


def split_documents(text: str) -> list[str]:
    """The documents of a corpus: its blank-line-separated blocks that are not only whitespace."""
    return [d for d in _BLANK_LINES.split(text) if d.strip()]


def _pairs(docs: Sequence[Sequence[int]], spec: ContextSpec) -> np.ndarray:
    """All (context, next) pairs as rows of an int64 array of width L + 1 (contexts padded with -1 for
    ``prefix`` contexts shorter than T, padding first so that rows sort as the tuples do)."""
    L = spec.length
    parts = []
    for doc in docs:
        a = np.asarray(doc, dtype=np.int64)
        if spec.kind == "tokens":
            if a.size > L:
                parts.append(np.lib.stride_tricks.sliding_window_view(a, L + 1))
        else:
            n = min(a.size - 1, L)
            if n >= 1:
                block = np.full((n, L + 1), -1, dtype=np.int64)
                for t in range(1, n + 1):
                    block[t - 1, L - t:] = a[: t + 1]
                parts.append(block)
    if not parts:
        return np.zeros((0, L + 1), dtype=np.int64)
    return np.concatenate(parts, axis=0)


def count_contexts(docs: Sequence[Sequence[int]], spec: ContextSpec, V: int) -> ContextCounts:
    """Count every (context, next token) pair of the tokenised documents ``docs`` (token ids < V).

    Raises
    ------
    InputError
        When a token id is outside ``[0, V)`` (a tokenizer larger than the model's vocabulary) or when
        no document is long enough for one context.
    """
    freq = np.zeros(V, dtype=np.int64)
    for doc in docs:
        a = np.asarray(doc, dtype=np.int64)
        if a.size and (a.min() < 0 or a.max() >= V):
            bad = int(a[(a < 0) | (a >= V)][0])
            raise InputError(f"tokenizer: token id {bad} is outside the model's vocabulary of V = {V} rows")
        freq += np.bincount(a, minlength=V)
    pairs = _pairs(docs, spec)
    if pairs.shape[0] == 0:
        need = spec.length + 1 if spec.kind == "tokens" else 2
        raise InputError(f"CORPUS: no document has the {need} tokens that one context of {spec} needs")
    uniq, inv, cnt = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    ctx, row = np.unique(uniq[:, :-1], axis=0, return_inverse=True)
    contexts = tuple(tuple(int(t) for t in c if t >= 0) for c in ctx)
    return ContextCounts(contexts, row.reshape(-1).astype(np.int64), uniq[:, -1].copy(), cnt.astype(np.int64), V,
                         freq)
