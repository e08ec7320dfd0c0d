r"""Context embeddings: maps from the m distinct contexts to the rows :math:`h_j` of H (m, d).

Four maps, each named by an *embedding spec* string (see :func:`parse_embedding_spec`):

``onehot-context``
    :math:`h_j = e_j \in \mathbb{R}^m`: every context gets its own coordinate (d = m). H has rank m,
    so any logits are reachable and every instance is both NTP-compatible and NTP-separable (the
    argument of the paper's Lemma 1, which needs only rank m).
``onehot-concat``
    The k-gram map: the one-hot vectors of the k previous tokens, concatenated (d = k·V).
``random:D``
    i.i.d. Gaussian entries :math:`\mathcal{N}(0, 1/D)`, so :math:`\mathbb{E}\|h_j\|^2 = 1` (d = D).
``PATH.npy``
    A float array of shape (m, d) read from disk, one row per context in the instance's context order.

The one-hot maps have entries in {0, 1}, so exact (rational) arithmetic on them stays cheap.
Randomness comes only from a :class:`numpy.random.Generator` passed in by the caller.

Every map refuses, before allocating, an H of more than ``max_entries`` entries (default
:data:`MAX_ENTRIES`; the command line's ``--max-entries``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.util.validate import check_int

__all__ = [
    "MAX_ENTRIES",
    "check_entries",
    "embedding_dim",
    "EmbeddingSpec",
    "parse_embedding_spec",
    "embed_contexts",
    "onehot_context",
    "onehot_concat",
    "random_gaussian",
    "from_npy",
]

#: Largest number of entries of a matrix built from a text, a built-in or a sweep grid point: the
#: embeddings H (m·d) and the counts (m·V). 5·10⁷ float64 entries are 400 MB. Raise it with the
#: ``max_entries`` keyword of the builders, or ``--max-entries`` on the command line.
MAX_ENTRIES = 50_000_000


def check_entries(field: str, rows: int, cols: int, max_entries: int | None = MAX_ENTRIES, what: str = "") -> None:
    """Refuse a ``rows`` × ``cols`` matrix of more than ``max_entries`` entries (None: no limit),
    with an :class:`~ntpcert.errors.InputError` naming ``field`` and the sizes."""
    if max_entries is None:
        return
    if rows * cols > max_entries:
        raise InputError(f"{field}: {what + ' would have ' if what else ''}{rows:,} × {cols:,} = {rows * cols:,} "
                         f"entries, more than the limit of {max_entries:,} (raise it with --max-entries)")


_KINDS = ("onehot-context", "onehot-concat", "random", "file")
_SPEC_HELP = "expected onehot-context, onehot-concat, random:D with D a positive integer, or a path ending in .npy"


@dataclass(frozen=True)
class EmbeddingSpec:
    """A parsed embedding spec.

    Attributes
    ----------
    kind : {"onehot-context", "onehot-concat", "random", "file"}
    dim : int or None
        D for ``random:D``.
    path : str or None
        The ``.npy`` path for ``kind == "file"``.
    """

    kind: str
    dim: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        if self.kind == "random":
            return f"random:{self.dim}"
        if self.kind == "file":
            return str(self.path)
        return self.kind


def parse_embedding_spec(spec: str | EmbeddingSpec) -> EmbeddingSpec:
    """Parse ``onehot-context``, ``onehot-concat``, ``random:D`` or a path ending in ``.npy``.

    Only the syntax is checked here; a file spec is read (and its shape checked) by
    :func:`from_npy` when the contexts are known.

    Raises
    ------
    InputError
        Naming ``embedding`` and the value, when the spec is not one of the above.
    """
    if isinstance(spec, EmbeddingSpec):
        if spec.kind not in _KINDS:
            raise InputError(f"embedding: unknown kind {spec.kind!r} ({_SPEC_HELP})")
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise InputError(f"embedding: {spec!r} is not a string ({_SPEC_HELP})")
    text = os.fspath(spec)
    s = text.strip()
    if s in ("onehot-context", "onehot-concat"):
        return EmbeddingSpec(s)
    if s.startswith("random:") or s == "random":
        dim_text = s[len("random:"):] if s.startswith("random:") else ""
        try:
            dim = int(dim_text)
        except ValueError:
            dim = 0
        if dim < 1 or not dim_text.strip().isdigit():
            raise InputError(f"embedding: {text!r} needs a positive integer dimension D in random:D")
        return EmbeddingSpec("random", dim=dim)
    if s.lower().endswith(".npy"):
        return EmbeddingSpec("file", path=text)
    raise InputError(f"embedding: unknown spec {text!r} ({_SPEC_HELP})")


def embedding_dim(spec: str | EmbeddingSpec, *, k: int, V: int) -> int | None:
    """d of an embedding spec before any context is seen: k·V for ``onehot-concat``, D for
    ``random:D``; None when it depends on the contexts (``onehot-context``: d = m) or on a file."""
    es = parse_embedding_spec(spec)
    if es.kind == "onehot-concat":
        return k * V
    if es.kind == "random":
        return int(es.dim)
    return None


def onehot_context(m: int, *, max_entries: int | None = MAX_ENTRIES) -> np.ndarray:
    """One coordinate per context: the identity.

    Parameters
    ----------
    m : int
        Number of contexts.

    Returns
    -------
    H : ndarray of shape (m, m)
        ``H = I_m`` (float64).
    """
    m = _positive_int("m", m)
    check_entries("embedding", m, m, max_entries, "onehot-context (d = m)")
    return np.eye(m, dtype=np.float64)


def onehot_concat(contexts: Sequence[Sequence[Hashable]], vocab: Sequence[Hashable], k: int, *,
                  max_entries: int | None = MAX_ENTRIES) -> np.ndarray:
    """Concatenated one-hot vectors of the (up to) k previous tokens.

    Block ``b`` (columns ``b*V : (b+1)*V``) holds the one-hot vector of one context position.
    A context of full length k puts its token ``i`` (oldest first) in block ``i``. A shorter
    context of length L < k is **right-aligned**: its token ``i`` goes to block ``k - L + i``, so
    the most recent token is always in the last block, and the leading ``k - L`` blocks (the
    positions the context does not reach back to) stay zero. Contexts of different lengths
    thus get different embeddings, and contexts sharing their recent tokens share blocks.

    Parameters
    ----------
    contexts : sequence of m sequences of tokens
        Each of length 1..k (a length-0 context embeds to the zero vector).
    vocab : sequence of V distinct tokens
        Token ``vocab[t]`` is coordinate ``t`` of each block.
    k : int
        Number of blocks.

    Returns
    -------
    H : ndarray of shape (m, k * V)
        Entries in {0, 1} (float64).
    """
    k = _positive_int("k (context length)", k)
    index = {tok: t for t, tok in enumerate(vocab)}
    if len(index) != len(vocab):
        raise InputError("vocab: tokens are not distinct")
    V = len(index)
    check_entries("embedding", len(contexts), k * V, max_entries, f"onehot-concat (d = k·V = {k}·{V})")
    H = np.zeros((len(contexts), k * V), dtype=np.float64)
    for j, ctx in enumerate(contexts):
        L = len(ctx)
        if L > k:
            raise InputError(f"contexts[{j}]: has length {L}, longer than k = {k}")
        offset = k - L
        for i, tok in enumerate(ctx):
            t = index.get(tok)
            if t is None:
                raise InputError(f"contexts[{j}]: token {tok!r} is not in the vocabulary")
            H[j, (offset + i) * V + t] = 1.0
    return H


def random_gaussian(m: int, D: int, rng: np.random.Generator, *, max_entries: int | None = MAX_ENTRIES) -> np.ndarray:
    r"""I.i.d. Gaussian embeddings scaled so that :math:`\mathbb{E}\|h_j\|^2 = 1`.

    Entries are :math:`\mathcal{N}(0, 1/D)`, i.e. ``rng.standard_normal((m, D)) / sqrt(D)``.
    The scale does not change any verdict (compatibility, separability); it rescales W* and
    W^mm by its inverse. With :math:`\|h_j\| \approx 1` the smoothness bound
    :math:`L \le \tfrac12 \lambda_{\max}(\sum_j \pi_j h_j h_j^\top) \le \tfrac12 \max_j \|h_j\|^2`
    is about 1/2 or less, so constant GD steps up to about 1 (the paper uses 0.5) are stable.

    Parameters
    ----------
    m : int
        Number of contexts.
    D : int
        Embedding dimension.
    rng : numpy.random.Generator

    Returns
    -------
    H : ndarray of shape (m, D)
    """
    m = _positive_int("m", m)
    D = _positive_int("D", D)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    check_entries("embedding", m, D, max_entries, f"random:{D}")
    return rng.standard_normal((m, D)) / np.sqrt(D)


def from_npy(path: str | os.PathLike, m: int, *, max_entries: int | None = MAX_ENTRIES) -> np.ndarray:
    """Read embeddings of shape (m, d) from a ``.npy`` file (no pickles).

    Parameters
    ----------
    path : path-like
    m : int
        The number of contexts; the file must have exactly m rows.

    Returns
    -------
    H : ndarray of shape (m, d), float64

    Raises
    ------
    InputError
        Naming ``embedding`` and the file, when it cannot be read, is not a 2-d numeric array
        with m rows and d ≥ 1 columns, holds a non-finite value, or has more than ``max_entries``
        entries (checked from the header, before the data are read).
    """
    p = os.fspath(path)
    try:
        arr = np.load(p, allow_pickle=False, mmap_mode="r")
    except FileNotFoundError:
        raise InputError(f"embedding: no such file {p!r}") from None
    except IsADirectoryError:
        raise InputError(f"embedding: {p!r} is a directory, not a .npy file") from None
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"embedding: cannot read {p!r} as a .npy array ({_one_line(err)})") from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InputError(f"embedding: {p!r} is an .npz archive, not a single .npy array")
    if arr.dtype.kind not in "iuf":
        raise InputError(f"embedding: {p!r} has dtype {arr.dtype}, expected real numbers")
    if arr.ndim != 2 or arr.shape[0] != m or arr.shape[1] < 1:
        raise InputError(f"embedding: {p!r} has shape {arr.shape}, expected ({m}, d) with one row per context")
    check_entries("embedding", m, int(arr.shape[1]), max_entries, repr(p))
    H = np.array(arr, dtype=np.float64)
    del arr
    bad = ~np.isfinite(H)
    if np.any(bad):
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"embedding: {p!r} entry [{i}, {j}] is {H[i, j]!r}, not finite")
    return H


def embed_contexts(
    spec: str | EmbeddingSpec,
    contexts: Sequence[Sequence[Hashable]],
    vocab: Sequence[Hashable],
    *,
    k: int,
    rng: np.random.Generator,
    max_entries: int | None = MAX_ENTRIES,
) -> np.ndarray:
    """Embed contexts by a spec (see :func:`parse_embedding_spec`).

    Parameters
    ----------
    spec : str or EmbeddingSpec
    contexts : sequence of m token sequences
    vocab : sequence of V tokens
    k : int
        The maximal context length (the number of blocks of ``onehot-concat``).
    rng : numpy.random.Generator
        Used by ``random:D`` only.
    max_entries : int or None
        Refuse an H of more than this many entries (m·d) before allocating it; None: no limit.

    Returns
    -------
    H : ndarray of shape (m, d)
    """
    es = parse_embedding_spec(spec)
    m = len(contexts)
    if es.kind == "onehot-context":
        return onehot_context(m, max_entries=max_entries)
    if es.kind == "onehot-concat":
        return onehot_concat(contexts, vocab, k, max_entries=max_entries)
    if es.kind == "random":
        return random_gaussian(m, int(es.dim), rng, max_entries=max_entries)
    return from_npy(es.path, m, max_entries=max_entries)


def _positive_int(name: str, value: object) -> int:
    return check_int(name, value, minimum=1)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__
