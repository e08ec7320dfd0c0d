r"""From text to an NTP instance: tokenize, count (context, next token) pairs, embed.

The pipeline is ``text → tokens → k-gram counts → NTPInstance.from_counts``:

* :func:`tokenize` splits text into characters (``char``) or into lower-cased words and
  punctuation marks (``word``).
* :func:`ngram_counts` counts, for every position ``i``, the pair (the ``k`` tokens before ``i``,
  token ``i``). With ``all_prefixes=True`` every shorter history (the last 1, 2, ..., k tokens)
  is counted as a context too.
* :func:`instance_from_text` embeds the distinct contexts (:mod:`ntpcert.instance.embeddings`) and builds
  the instance, with readable token and context names.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries, embed_contexts, embedding_dim, parse_embedding_spec
from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.util.progress import progress_bar
from ntpcert.util.validate import check_int

__all__ = [
    "MAX_ENTRIES",
    "TOKENIZERS",
    "WORD_PATTERN",
    "NgramCounts",
    "tokenize",
    "ngram_counts",
    "count_sequences",
    "max_contexts_for",
    "instance_from_counts",
    "instance_from_text",
    "display_token",
]

#: The tokenizers :func:`tokenize` knows.
TOKENIZERS = ("char", "word", "whitespace")

#: The ``word`` tokenizer: runs of word characters, or single non-space non-word characters.
WORD_PATTERN = re.compile(r"\w+|[^\w\s]")

#: A progress bar is shown (when asked for) only for at least this many counted positions.
PROGRESS_MIN_POSITIONS = 200_000

_PROGRESS_CHUNK = 10_000


class NgramCounts(NamedTuple):
    """The result of :func:`ngram_counts`; unpacks as ``contexts, vocab, counts``.

    Attributes
    ----------
    contexts : list of m tuples of str
        The distinct contexts, sorted (as tuples, so a shorter context precedes its extensions).
    vocab : list of V str
        The sorted distinct tokens of the text (all of them, also those never predicted).
    counts : ndarray of shape (m, V), int64
        ``counts[j, t]`` is how often ``vocab[t]`` followed context ``contexts[j]``.
    """

    contexts: list[tuple[str, ...]]
    vocab: list[str]
    counts: np.ndarray


def tokenize(text: str, tokenizer: str = "char") -> list[str]:
    r"""Split text into tokens.

    Parameters
    ----------
    text : str
    tokenizer : {"char", "word", "whitespace"}
        ``char``: every character is a token, whitespace included, case kept.
        ``word``: the text is lower-cased and split by the regular expression ``\w+|[^\w\s]``:
        a token is a maximal run of word characters (letters, digits, underscore) or a single
        punctuation character; whitespace only separates tokens.
        ``whitespace``: ``str.split()``: a token is a maximal run of non-whitespace characters,
        case and punctuation kept (``"Hello,"`` and ``"hello"`` are different tokens).

    Returns
    -------
    list of str
    """
    if not isinstance(text, str):
        raise InputError(f"text: expected a str, got {type(text).__name__}")
    if tokenizer == "char":
        return list(text)
    if tokenizer == "word":
        return WORD_PATTERN.findall(text.lower())
    if tokenizer == "whitespace":
        return text.split()
    raise InputError(f"tokenizer: unknown value {tokenizer!r} (expected one of {', '.join(TOKENIZERS)})")


def ngram_counts(
    tokens: Sequence[str], k: int, *, all_prefixes: bool = False, progress: bool = False,
    max_entries: int | None = MAX_ENTRIES,
) -> NgramCounts:
    """Count (context, next token) pairs of one token sequence.

    For every position ``i ≥ k`` the pair ``(tokens[i-k:i], tokens[i])`` is counted once.
    With ``all_prefixes=True``, every position ``i ≥ 1`` also counts the pairs
    ``(tokens[i-L:i], tokens[i])`` for each shorter history length ``L = 1 .. min(k, i)``, so one
    position contributes up to k pairs (one per suffix length of its history).

    Parameters
    ----------
    tokens : sequence of str
    k : int
        Context length, at least 1.
    all_prefixes : bool
        Also count the contexts of lengths 1..k-1.
    progress : bool
        Show a progress bar on stderr when the sequence is long.
    max_entries : int or None
        Refuse (while counting, before allocating) more contexts than fit an (m, V) count matrix
        of this many entries; None: no limit.

    Returns
    -------
    NgramCounts
        ``contexts`` (sorted token tuples), ``vocab`` (sorted tokens), ``counts`` (m, V) int64.
    """
    return count_sequences([tokens], k, all_prefixes=all_prefixes, progress=progress, max_entries=max_entries)


def count_sequences(
    sequences: Iterable[Sequence[str]],
    k: int,
    *,
    all_prefixes: bool = False,
    progress: bool = False,
    max_entries: int | None = MAX_ENTRIES,
    max_contexts: int | None = None,
) -> NgramCounts:
    """:func:`ngram_counts` over several independent sequences: contexts never cross from one
    sequence into the next; the vocabulary is that of all sequences together.

    The counting stops with an :class:`~ntpcert.errors.InputError` as soon as the distinct contexts
    are more than ``max_contexts`` or more than ``max_entries // V`` (the (m, V) count matrix would
    exceed ``max_entries`` entries), before any matrix is allocated; None switches a bound off.
    """
    k = _check_k(k)
    seqs = [list(s) for s in sequences]
    total = sum(len(s) for s in seqs)
    vocab = sorted({t for s in seqs for t in s})
    V = len(vocab)
    limit = max_contexts
    if max_entries is not None and V:
        by_counts = max_entries // V
        limit = by_counts if limit is None else min(limit, by_counts)
    table: dict[tuple[str, ...], dict[str, int]] = {}
    lengths = range(1, k + 1) if all_prefixes else range(k, k + 1)
    first = 1 if all_prefixes else k
    show = bool(progress) and total >= PROGRESS_MIN_POSITIONS
    with progress_bar(show, total=total, desc="counting", unit="tok") as bar:
        for seq in seqs:
            n = len(seq)
            for start in range(0, n, _PROGRESS_CHUNK):
                stop = min(start + _PROGRESS_CHUNK, n)
                for i in range(max(start, first), stop):
                    nxt = seq[i]
                    for L in lengths:
                        if L > i:
                            break
                        ctx = tuple(seq[i - L:i])
                        row = table.get(ctx)
                        if row is None:
                            row = table[ctx] = {}
                        row[nxt] = row.get(nxt, 0) + 1
                if limit is not None and len(table) > limit:
                    _too_many_contexts(limit, max_entries)
                bar.update(stop - start)
    contexts = sorted(table)
    check_entries("contexts", len(contexts), V, max_entries, "the count matrix (m, V)")
    ti = {t: z for z, t in enumerate(vocab)}
    counts = np.zeros((len(contexts), V), dtype=np.int64)
    for j, c in enumerate(contexts):
        for t, n in table[c].items():
            counts[j, ti[t]] = n
    return NgramCounts(contexts, vocab, counts)


def _too_many_contexts(limit: int, max_entries: int | None) -> None:
    why = (f"the counts (m·V) or the embeddings (m·d) would exceed the limit of {max_entries:,} entries "
           "(raise it with --max-entries, or use a smaller k or a shorter text)" if max_entries is not None
           else "the limit given")
    raise InputError(f"contexts: more than {limit:,} distinct contexts: {why}")


def max_contexts_for(embedding: str, *, k: int, V: int, max_entries: int | None = MAX_ENTRIES) -> int | None:
    """The most contexts an instance of ``V`` tokens and context length ``k`` may have under
    ``max_entries``: m·max(V, d, k) ≤ max_entries, with d of the embedding when it is known before
    counting (``onehot-concat``: k·V, ``random:D``: D; ``onehot-context``: d = m, so m² ≤ max_entries).
    None when ``max_entries`` is None; an :class:`~ntpcert.errors.InputError` when not even one
    context fits."""
    if max_entries is None:
        return None
    d = embedding_dim(embedding, k=k, V=V) or 1
    width = max(V, k, d, 1)
    check_entries("embedding", 1, width, max_entries, f"{embedding!r} with k = {k:,} and V = {V:,}")
    limit = max_entries // width
    if parse_embedding_spec(embedding).kind == "onehot-context":
        limit = min(limit, math.isqrt(max_entries))
    return limit


def display_token(token: str) -> str:
    """A printable, unambiguous rendering of a token: backslashes doubled, non-printable
    characters (newline, tab, ...) written as Python escapes such as ``\\n``."""
    out = []
    for ch in token:
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)


def context_names(contexts: Sequence[Sequence[str]], sep: str) -> list[str]:
    """Readable names: the displayed tokens of each context joined by ``sep``."""
    return [sep.join(display_token(t) for t in c) for c in contexts]


def instance_from_counts(
    counted: NgramCounts,
    *,
    k: int,
    embedding: str = "onehot-concat",
    rng: np.random.Generator,
    sep: str = "",
    name: str = "corpus",
    max_entries: int | None = MAX_ENTRIES,
) -> NTPInstance:
    """Embed counted contexts and build the instance (token and context names included); an
    embedding of more than ``max_entries`` entries is refused before it is allocated."""
    contexts, vocab, counts = counted
    if len(vocab) < 2:
        shown = ", ".join(repr(t) for t in vocab) or "none"
        raise InputError(f"text: {len(vocab)} distinct token(s) ({shown}); need at least 2")
    if not contexts:
        raise InputError(f"k (context length): no position of the text has {k} tokens before it")
    H = embed_contexts(embedding, contexts, vocab, k=k, rng=rng, max_entries=max_entries)
    return NTPInstance.from_counts(
        H,
        counts,
        token_names=[display_token(t) for t in vocab],
        context_names=context_names(contexts, sep),
        name=name,
    )


def instance_from_text(
    text: str,
    *,
    tokenizer: str = "char",
    k: int = 2,
    all_prefixes: bool = False,
    embedding: str = "onehot-concat",
    seed: int = 0,
    rng: np.random.Generator | None = None,
    progress: bool = False,
    name: str = "corpus",
    max_entries: int | None = MAX_ENTRIES,
) -> NTPInstance:
    """Build an NTP instance from raw text.

    Parameters
    ----------
    text : str
    tokenizer : {"char", "word"}
        See :func:`tokenize`.
    k : int
        Context length (the k previous tokens), at least 1.
    all_prefixes : bool
        Also use the shorter histories (lengths 1..k-1) as contexts; see :func:`ngram_counts`.
    embedding : str
        An embedding spec (:func:`ntpcert.instance.embeddings.parse_embedding_spec`). ``onehot-concat``
        gives d = k·V.
    seed : int
        Seeds ``numpy.random.default_rng`` for a random embedding, unless ``rng`` is given.
    rng : numpy.random.Generator, optional
    progress : bool
        Show a progress bar on stderr while counting a long text.
    name : str
    max_entries : int or None
        Refuse, while counting and before any matrix is allocated, a text whose counts (m·V),
        embeddings (m·d) or contexts (m·k) would have more than this many entries (default
        :data:`~ntpcert.instance.embeddings.MAX_ENTRIES`); None: no limit.

    Returns
    -------
    NTPInstance
        Built from counts; contexts in sorted order; token names are the tokens (non-printable
        characters escaped), context names the tokens joined (by nothing for ``char``, by a
        space for ``word``).
    """
    tokens = tokenize(text, tokenizer)
    k = _check_k(k)
    parse_embedding_spec(embedding)
    if len(tokens) < 2:
        raise InputError(f"text: has {len(tokens)} token(s) with tokenizer {tokenizer!r}; need at least 2")
    if not all_prefixes and len(tokens) <= k:
        raise InputError(
            f"k (context length): value {k} needs more than {k} tokens, the text has {len(tokens)}"
        )
    V = len(set(tokens))
    limit = max_contexts_for(embedding, k=k, V=V, max_entries=max_entries)
    counted = count_sequences([tokens], k, all_prefixes=all_prefixes, progress=progress, max_entries=max_entries,
                              max_contexts=limit)
    gen = rng if rng is not None else make_rng(seed)
    sep = "" if tokenizer == "char" else " "
    return instance_from_counts(counted, k=k, embedding=embedding, rng=gen, sep=sep, name=name,
                                max_entries=max_entries)


def make_rng(seed: int) -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` for a non-negative integer seed; InputError otherwise."""
    return np.random.default_rng(check_int("seed", seed, minimum=0))


def _check_k(k: object) -> int:
    return check_int("k (context length)", k, minimum=1)
