"""An English-text corpus that ships with every CPython: the help topics of ``pydoc``.

The text is ``pydoc_data.topics.topics`` (a dict topic → help text), the values joined by a
newline in sorted key order (about 465,000 characters). By default only the first
:data:`DEFAULT_MAX_CHARS` characters are used: with the char tokenizer, k = 2 and onehot-concat
embeddings that gives m ≈ 900 contexts, V ≈ 86 tokens and d = 172, small enough for the
separability LP (V·d variables) to stay fast. Pass ``max_chars=None`` for the whole text
(m ≈ 2,700 contexts with the defaults).
"""

from __future__ import annotations

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.embeddings import MAX_ENTRIES
from ntpcert.instance.io.corpus import instance_from_text
from ntpcert.util.validate import check_int

__all__ = ["DEFAULT_MAX_CHARS", "pydoc", "pydoc_text"]

#: Default cap on the number of characters of the pydoc text that are used.
DEFAULT_MAX_CHARS = 20_000


def pydoc_text(max_chars: int | None = DEFAULT_MAX_CHARS) -> str:
    """The pydoc topics joined in sorted key order, cut to ``max_chars`` characters (None: all)."""
    try:
        from pydoc_data.topics import topics
    except ImportError as err:  # pragma: no cover - part of the standard library
        raise InputError(f"pydoc: the standard-library module pydoc_data is missing ({err})") from None
    text = "\n".join(topics[key] for key in sorted(topics))
    if max_chars is None:
        return text
    return text[: check_int("max_chars", max_chars, minimum=2)]


def pydoc(
    *,
    tokenizer: str = "char",
    k: int = 2,
    all_prefixes: bool = False,
    embedding: str = "onehot-concat",
    max_chars: int | None = DEFAULT_MAX_CHARS,
    seed: int = 0,
    rng: np.random.Generator | None = None,
    progress: bool = False,
    max_entries: int | None = MAX_ENTRIES,
) -> NTPInstance:
    """The pydoc help text as an NTP instance (see :func:`ntpcert.instance.io.corpus.instance_from_text`).

    Parameters
    ----------
    tokenizer : {"char", "word", "whitespace"}
    k : int
        Context length.
    all_prefixes : bool
        Also use the shorter histories as contexts.
    embedding : str
        An embedding spec.
    max_chars : int or None
        Use only the first ``max_chars`` characters (default 20,000); None for the whole text.
    seed : int
        Seed for a random embedding, unless ``rng`` is given.
    rng : numpy.random.Generator, optional
    progress : bool
        Progress bar on stderr while counting a long text.
    max_entries : int or None
        Refuse counts or embeddings of more than this many entries (see
        :func:`~ntpcert.instance.io.corpus.instance_from_text`).

    Returns
    -------
    NTPInstance
        Named ``"pydoc"``.
    """
    return instance_from_text(
        pydoc_text(max_chars),
        tokenizer=tokenizer,
        k=k,
        all_prefixes=all_prefixes,
        embedding=embedding,
        seed=seed,
        rng=rng,
        progress=progress,
        name="pydoc",
        max_entries=max_entries,
    )
