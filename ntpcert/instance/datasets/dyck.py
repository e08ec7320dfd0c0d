r"""Dyck languages: balanced bracket sequences, the setting of "structural grokking" studies.

A Dyck word over t bracket types is generated left to right with a bounded nesting depth: at
every step the generator opens a bracket (of a uniformly random type) or closes the innermost
open one, each with probability 1/2 when both are allowed. Closing is not allowed at depth 0;
opening is not allowed at ``max_depth`` or when the remaining length is needed to close what is
open. The length of each word is an even number drawn uniformly from ``2..max_length``.

With ``begin_end=True`` (default) each word is written as ``^^..^ word $``: k begin tokens ``^``
(the usual n-gram padding, so the first bracket has a full-length context) and one end token
``$``. The next-token laws are the empirical ones of the sampled words. Their supports carry the
grammar: after an open bracket both an opening and the matching closing bracket may follow, a
closing bracket of the wrong type never does.
"""

from __future__ import annotations

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries
from ntpcert.instance.io.corpus import count_sequences, instance_from_counts, max_contexts_for
from ntpcert.util.validate import check_int

__all__ = ["BRACKETS", "BEGIN", "END", "dyck", "dyck_sequences", "is_balanced"]

#: Bracket pairs by type, in order; ``n_types`` takes the first ones.
BRACKETS = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))
BEGIN = "^"
END = "$"


def dyck_sequences(
    n_sequences: int,
    *,
    n_types: int = 2,
    max_depth: int = 3,
    max_length: int = 12,
    rng: np.random.Generator,
) -> list[list[str]]:
    """Sample balanced bracket words (without begin/end tokens).

    Parameters
    ----------
    n_sequences : int
        Number of words.
    n_types : int
        Bracket types, 1..4 (``()``, ``[]``, ``{}``, ``<>``).
    max_depth : int
        Largest nesting depth, at least 1.
    max_length : int
        Largest word length, at least 2; each length is an even number uniform in 2..max_length.
    rng : numpy.random.Generator

    Returns
    -------
    list of n_sequences lists of str
    """
    n_sequences = _int("n_sequences", n_sequences, 1)
    n_types = _int("n_types", n_types, 1)
    if n_types > len(BRACKETS):
        raise InputError(f"n_types: value {n_types} exceeds the {len(BRACKETS)} bracket types available")
    max_depth = _int("max_depth", max_depth, 1)
    max_length = _int("max_length", max_length, 2)
    words = []
    for _ in range(n_sequences):
        length = 2 * int(rng.integers(1, max_length // 2 + 1))
        stack: list[int] = []
        word: list[str] = []
        for pos in range(length):
            remaining = length - pos
            can_close = bool(stack)
            can_open = len(stack) < max_depth and len(stack) + 1 <= remaining - 1
            if can_open and (not can_close or rng.random() < 0.5):
                t = int(rng.integers(n_types))
                stack.append(t)
                word.append(BRACKETS[t][0])
            else:
                word.append(BRACKETS[stack.pop()][1])
        words.append(word)
    return words


def is_balanced(tokens: list[str]) -> bool:
    """Whether a bracket sequence (begin/end tokens ignored) is a Dyck word."""
    closing = {c: o for o, c in BRACKETS}
    opening = {o for o, _ in BRACKETS}
    stack: list[str] = []
    for tok in tokens:
        if tok in (BEGIN, END):
            continue
        if tok in opening:
            stack.append(tok)
        elif tok in closing:
            if not stack or stack.pop() != closing[tok]:
                return False
        else:
            return False
    return not stack


def dyck(
    *,
    n_sequences: int = 200,
    n_types: int = 2,
    max_depth: int = 3,
    max_length: int = 12,
    k: int = 4,
    all_prefixes: bool = False,
    begin_end: bool = True,
    embedding: str = "onehot-concat",
    seed: int = 0,
    rng: np.random.Generator | None = None,
    max_entries: int | None = MAX_ENTRIES,
) -> NTPInstance:
    """A Dyck-language NTP instance: k-token contexts of sampled balanced bracket words.

    Parameters
    ----------
    n_sequences, n_types, max_depth, max_length
        See :func:`dyck_sequences`.
    k : int
        Context length. Contexts never cross from one word into the next.
    all_prefixes : bool
        Also use the shorter histories (lengths 1..k-1) as contexts, as in
        :func:`ntpcert.instance.io.corpus.ngram_counts`.
    begin_end : bool
        Pad each word with k begin tokens ``^`` and end it with ``$``.
    embedding : str
        An embedding spec; ``onehot-concat`` (default) gives d = k·V.
    seed : int
        Seed of ``numpy.random.default_rng``; ignored when ``rng`` is given.
    rng : numpy.random.Generator, optional
        Used for the words, then (for ``random:D``) for the embeddings.
    max_entries : int or None
        Refuse, before generating, padded words of more than this many tokens in all, and, before
        allocating, counts or embeddings of more than this many entries; None: no limit.

    Returns
    -------
    NTPInstance
        Named ``"dyck"``. With the defaults: V = 6, k = 4, d = 24 and m around a hundred.
    """
    k = _int("k (context length)", k, 1)
    n_sequences = _int("n_sequences", n_sequences, 1)
    max_length = _int("max_length", max_length, 2)
    check_entries("k (context length)", n_sequences, (k if begin_end else 0) + max_length + 1, max_entries,
                  f"k = {k:,}: the words padded with k begin tokens")
    gen = rng if rng is not None else np.random.default_rng(_int("seed", seed, 0))
    words = dyck_sequences(n_sequences, n_types=n_types, max_depth=max_depth, max_length=max_length, rng=gen)
    seqs = [[BEGIN] * k + w + [END] for w in words] if begin_end else words
    V = len({t for s in seqs for t in s})
    limit = max_contexts_for(embedding, k=k, V=V, max_entries=max_entries)
    counted = count_sequences(seqs, k, all_prefixes=all_prefixes, max_entries=max_entries, max_contexts=limit)
    if not counted.contexts:
        raise InputError(f"k (context length): value {k} is at least every word's length, so there are no contexts")
    return instance_from_counts(counted, k=k, embedding=embedding, rng=gen, sep="", name="dyck",
                                max_entries=max_entries)


def _int(name: str, value: object, low: int) -> int:
    return check_int(name, value, minimum=low)
