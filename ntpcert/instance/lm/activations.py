r"""An activations file → the NTP instance of its h and next tokens: ``--activations`` (DATA is the file).

A model's last-layer activations, captured elsewhere, are an instance without the model: the h_j as
the decoder sees them, the next tokens that follow each context, and optionally the decoder itself.
The file is a ``.safetensors`` or an ``.npz`` (read without pickle) holding these arrays (docs/formats.md,
*Activations files*):

**One row per position** (``next_token`` and ``context``, no ``context_index``):

* ``h`` (n, d) float: the decoder's input at each position;
* ``next_token`` (n,) int: the token that follows;
* ``context`` (n, K) int (or (n,) for K = 1): the context's token ids, shorter contexts left-padded
  with -1. Positions with the same context are one context of the instance, and must carry exactly the
  same h (equal values; a row that differs is refused, naming both positions and the largest difference: an
  average would be another instance).

**One row per distinct context**:

* ``h`` (m, d) float, and the counts of the tokens that follow each, as one of
  ``counts`` (m, V) int (dense), the CSR triple ``counts_indptr`` (m + 1,), ``counts_indices`` (nnz,),
  ``counts_data`` (nnz,) (no index twice in a row), or ``next_token`` (n,) with ``context_index`` (n,)
  (row of h of each observed pair); every context needs a positive count;
* ``context`` (m, K) int, optional: the contexts' token ids (as above, no row twice). With it the rows
  are put in the order of their contexts, as ``--model`` orders them; without it they keep the file's
  order and are named ``c0``, ``c1``, ...

**Both**, optionally: ``W`` (V, d) float, the decoder; ``b`` (V,) float, its bias, which becomes the
constant last coordinate of every h (h → [h, 1], W → [W, b]) exactly as for a model's head with a bias
(:func:`ntpcert.instance.lm.capture.capture`; ``b`` without ``W`` appends the coordinate all the same);
``vocab_size`` (a scalar or shape (1,)) when no ``W`` or dense ``counts`` gives V; ``token_frequency``
(V,) int, occurrences of each token in the corpus, for the frequency bins of ``compare`` (default: how
often each token is a next token); ``token_names``, V strings (in a ``.safetensors``: the metadata key
``token_names``, a JSON list; in an ``.npz``: a string array). Any other key is refused: a misspelt
``bias`` must not be read as no bias.

Every id must be an integer in ``[0, V)`` (-1 only as a context's left padding); h, W and b finite
floats. The instance is that of :func:`ntpcert.instance.lm.load.counts_instance`: an activations
file of a model's h on the contexts of a corpus (:func:`write_activations`) has the fingerprint, the
verdicts and the ``compare`` numbers of ``--model`` on that corpus (``tests/test_activations.py``).

The certificate's ``source`` names the file by SHA-256 (``files``), ``embeddings: "activations"``,
``corpus: "counts"`` and ``corpus_sha256``: the SHA-256 of the counts in the canonical form of
:func:`counts_sha256`, the same for every layout of the same contexts and counts.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries
from ntpcert.instance.lm.contexts import ContextCounts
from ntpcert.instance.lm.load import ModelData, counts_instance
from ntpcert.instance.lm.merge import token_merge
from ntpcert.util.extras import require
from ntpcert.util.files import atomic_write_bytes, check_output_file, one_line

__all__ = ["ACTIVATION_KEYS", "counts_sha256", "read_activations", "write_activations"]

#: Every key an activations file may hold (``token_names`` is metadata in a ``.safetensors``).
ACTIVATION_KEYS = ("h", "next_token", "context", "context_index", "counts", "counts_indptr", "counts_indices",
                   "counts_data", "W", "b", "vocab_size", "token_frequency", "token_names")

_CSR = ("counts_indptr", "counts_indices", "counts_data")


# ---------------------------------------------------------------------------------------------- reading
def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_safetensors(path: str) -> tuple[dict[str, np.ndarray], list[str] | None]:
    require("safetensors", "lm", "reading a .safetensors activations file")
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            keys = list(f.keys())
            arrays = {}
            for k in keys:
                try:
                    arrays[k] = f.get_tensor(k)
                except Exception as err:  # noqa: BLE001 - e.g. bfloat16, which numpy has not
                    raise InputError(f"{k}: cannot be read as a numpy array ({one_line(err)})") from None
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file is bad input
        raise InputError(f"DATA: {path!r} is not a readable .safetensors file ({one_line(err)})") from None
    names = None
    if "token_names" in meta:
        try:
            names = json.loads(meta["token_names"])
        except ValueError as err:
            raise InputError(f"token_names: the metadata is not a JSON list ({one_line(err)})") from None
        if not (isinstance(names, list) and all(isinstance(t, str) for t in names)):
            raise InputError("token_names: the metadata is not a JSON list of strings")
    if "token_names" in arrays:
        raise InputError("token_names: a tensor; in a .safetensors file it is the metadata key token_names")
    return arrays, names


def _read_npz(path: str) -> tuple[dict[str, np.ndarray], list[str] | None]:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"DATA: {path!r} is not a readable .npz file ({one_line(err)})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise InputError(f"DATA: {path!r} is a single .npy array, not an .npz of named arrays")
    arrays = {}
    with z:
        for k in z.files:
            try:
                arrays[k] = z[k]
            except (OSError, ValueError, EOFError) as err:  # object arrays need pickle: refused
                raise InputError(f"{k}: cannot be read without pickle ({one_line(err)})") from None
    names = None
    if "token_names" in arrays:
        t = arrays.pop("token_names")
        if t.dtype.kind != "U" or t.ndim != 1:
            raise InputError(f"token_names: dtype {t.dtype}, shape {t.shape}, expected a 1-D array of strings")
        names = [str(x) for x in t]
    return arrays, names


def _read_file(path: str) -> tuple[dict[str, np.ndarray], list[str] | None]:
    if os.path.isdir(path):
        raise InputError(f"DATA: {path!r} is a directory, not an activations file")
    if not os.path.exists(path):
        raise InputError(f"DATA: no such file {path!r}")
    if path.endswith(".safetensors"):
        arrays, names = _read_safetensors(path)
    elif path.endswith(".npz"):
        arrays, names = _read_npz(path)
    else:
        raise InputError(f"DATA: {path!r} is not a .safetensors or .npz activations file")
    unknown = sorted(set(arrays) - set(ACTIVATION_KEYS))
    if unknown:
        raise InputError(f"{unknown[0]}: unknown key of an activations file (known: {', '.join(ACTIVATION_KEYS)})")
    return arrays, names


# ---------------------------------------------------------------------------------------------- checks
def _where(key: str, idx: Any) -> str:
    return f"{key}[{', '.join(str(int(i)) for i in np.atleast_1d(idx))}]"


def _floats(a: np.ndarray, key: str, ndim: int) -> np.ndarray:
    """``a`` as float64: a float array of ``ndim`` dimensions with finite entries."""
    if a.dtype.kind != "f":
        raise InputError(f"{key}: dtype {a.dtype}, expected floats")
    if a.ndim != ndim:
        raise InputError(f"{key}: shape {a.shape}, expected {ndim} dimension{'s' if ndim > 1 else ''}")
    a = a.astype(np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        idx = np.argwhere(bad)[0]
        raise InputError(f"{_where(key, idx)} = {float(a[tuple(idx)])!r} is not finite")
    return a


def _ints(a: np.ndarray, key: str, ndims: tuple[int, ...], low: int, high: int | None, what: str) -> np.ndarray:
    """``a`` as int64: an integer array of one of ``ndims`` dimensions, every entry in ``[low, high)``."""
    if a.dtype.kind not in "iu":
        raise InputError(f"{key}: dtype {a.dtype}, expected integers")
    if a.ndim not in ndims:
        raise InputError(f"{key}: shape {a.shape}, expected {' or '.join(f'{n} dimension(s)' for n in ndims)}")
    if a.size:
        bad = (a < low) if high is None else ((a < low) | (a >= high))
        if bad.any():
            idx = np.argwhere(bad)[0]
            value = int(a[tuple(idx)])
            rng = f">= {low}" if high is None else f"in [{low}, {high})"
            raise InputError(f"{_where(key, idx)} = {value} is not {what} {rng}")
    return a.astype(np.int64)


def _rows(a: np.ndarray, key: str, n: int, what: str) -> None:
    if a.shape[0] != n:
        raise InputError(f"{key}: shape {a.shape}, expected {n} rows ({what})")


def _vocabulary(a: dict[str, np.ndarray], names: list[str] | None) -> int:
    """V: the rows of W, else ``vocab_size``, else the columns of dense ``counts``; every other key that
    has V entries must agree."""
    given: list[tuple[str, int]] = []
    if "W" in a:
        if a["W"].ndim != 2:
            raise InputError(f"W: shape {a['W'].shape}, expected (V, d)")
        given.append(("W", int(a["W"].shape[0])))
    if "vocab_size" in a:
        v = a["vocab_size"]
        if v.dtype.kind not in "iu" or v.size != 1 or v.ndim > 1 or int(v.reshape(-1)[0]) < 2:
            raise InputError(f"vocab_size: {v.reshape(-1)[:3].tolist()} (dtype {v.dtype}, shape {v.shape}), "
                             "expected one integer >= 2")
        given.append(("vocab_size", int(v.reshape(-1)[0])))
    if "counts" in a and a["counts"].ndim == 2:
        given.append(("counts", int(a["counts"].shape[1])))
    if not given:
        raise InputError("vocab_size: missing, and neither W nor dense counts gives V (the vocabulary size)")
    key, V = given[0]
    for other in ("b", "token_frequency"):
        if other in a:
            if a[other].ndim != 1:
                raise InputError(f"{other}: shape {a[other].shape}, expected ({V},)")
            given.append((other, int(a[other].shape[0])))
    if names is not None:
        given.append(("token_names", len(names)))
    for k, v in given[1:]:
        if v != V:
            raise InputError(f"{k}: has {v} tokens, {key} says V = {V}")
    return V


def _contexts(c: np.ndarray, key: str, V: int) -> np.ndarray:
    """Context rows (n, K) of token ids, left-padded with -1."""
    c = _ints(c, key, (1, 2), -1, V, "a token id (or -1, padding)")
    c = c.reshape(-1, 1) if c.ndim == 1 else c
    real = c >= 0
    late = real.cumsum(axis=1) > 0  # after a row's first real token
    bad = late & ~real
    if bad.any():
        idx = np.argwhere(bad)[0]
        raise InputError(f"{_where(key, idx)} = -1 after a token id: -1 pads a context on the left only")
    return c


def _context_tuples(c: np.ndarray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(t) for t in row if t >= 0) for row in c)


def _context_label(c: np.ndarray | None) -> str:
    """The source record's ``context``: ``tokens:K`` when every context has K tokens, ``tokens:1..K`` when
    some are shorter (left-padded), ``rows`` when the file names no contexts."""
    if c is None:
        return "rows"
    K = c.shape[1]
    return f"tokens:{K}" if bool((c >= 0).all()) else f"tokens:1..{K}"


def _triples(rows: np.ndarray, tokens: np.ndarray, values: np.ndarray, V: int) -> tuple[np.ndarray, ...]:
    """Sorted (row, token, value) of the positive values, equal pairs summed."""
    keep = values > 0
    key = rows[keep] * V + tokens[keep]
    uniq, inv = np.unique(key, return_inverse=True)
    vals = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(vals, inv.reshape(-1), values[keep])
    return uniq // V, uniq % V, vals


def _per_position(a: dict[str, np.ndarray], V: int) -> tuple[np.ndarray, ...]:
    """(H (m, d), contexts (m, K), rows, tokens, values) of a file with one row per position."""
    h = _floats(a["h"], "h", 2)
    n = h.shape[0]
    if "context" not in a:
        raise InputError("context: missing: a file of one row per position (next_token without context_index) "
                         "needs each position's context")
    nxt = _ints(a["next_token"], "next_token", (1,), 0, V, "a token id")
    _rows(nxt, "next_token", n, "one per row of h")
    ctx = _contexts(a["context"], "context", V)
    _rows(ctx, "context", n, "one per row of h")
    uniq, first, inv = np.unique(ctx, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    H = h[first]
    same = (h == H[inv]).all(axis=1)
    if not same.all():
        i = int(np.flatnonzero(~same)[0])
        j = int(inv[i])
        diff = float(np.abs(h[inv == j] - H[j]).max())
        same_ctx = list(_context_tuples(uniq[j:j + 1])[0])
        raise InputError(f"h: positions {int(first[j])} and {i} have the same context {same_ctx} "
                         f"but h differing by up to {diff:.3g}: positions with the same context must carry exactly the "
                         "same h (write one row per distinct context, with context_index, instead)")
    rows, tokens, values = _triples(inv.astype(np.int64), nxt, np.ones(n, dtype=np.int64), V)
    return H, uniq, rows, tokens, values


def _per_context(a: dict[str, np.ndarray], V: int) -> tuple[Any, ...]:
    """(H (m, d), contexts (m, K) or None, rows, tokens, values) of a file with one row per context, rows in
    the order of their contexts when the file gives them."""
    h = _floats(a["h"], "h", 2)
    m = h.shape[0]
    if "counts" in a:
        for k in ("next_token", "context_index") + _CSR:
            if k in a:
                raise InputError(f"{k}: does not go with dense counts (give the counts one way)")
        C = _ints(a["counts"], "counts", (2,), 0, None, "a count")
        _rows(C, "counts", m, "one per row of h")
        rows, tokens = np.nonzero(C)
        values = C[rows, tokens]
    elif any(k in a for k in _CSR):
        missing = [k for k in _CSR if k not in a]
        if missing:
            raise InputError(f"{missing[0]}: missing (sparse counts are the triple {', '.join(_CSR)})")
        for k in ("next_token", "context_index"):
            if k in a:
                raise InputError(f"{k}: does not go with sparse counts (give the counts one way)")
        ptr = _ints(a["counts_indptr"], "counts_indptr", (1,), 0, None, "an offset")
        if ptr.size != m + 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            raise InputError(f"counts_indptr: shape {ptr.shape}, first {ptr[:1].tolist()}: expected {m + 1} "
                             "non-decreasing offsets from 0 (one row per row of h)")
        tokens = _ints(a["counts_indices"], "counts_indices", (1,), 0, V, "a token id")
        values = _ints(a["counts_data"], "counts_data", (1,), 0, None, "a count")
        if tokens.size != values.size or ptr[-1] != tokens.size:
            raise InputError(f"counts_indptr: ends at {int(ptr[-1])}, counts_indices has {tokens.size} entries and "
                             f"counts_data {values.size}: expected the same")
        rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
        key = rows * V + tokens
        if np.unique(key).size != key.size:
            dup = int(np.flatnonzero(np.diff(np.sort(key)) == 0)[0])
            k = int(np.sort(key)[dup])
            raise InputError(f"counts_indices: token {k % V} twice in row {k // V} (each count once)")
    else:
        if "next_token" not in a:
            raise InputError("context_index: needs next_token (the token of each observed pair)")
        tokens = _ints(a["next_token"], "next_token", (1,), 0, V, "a token id")
        rows = _ints(a["context_index"], "context_index", (1,), 0, m, "a row of h")
        if rows.size != tokens.size:
            raise InputError(f"context_index: shape {rows.shape}, next_token {tokens.shape}: expected the same")
        values = np.ones(tokens.size, dtype=np.int64)
    rows, tokens, values = _triples(rows.astype(np.int64), tokens.astype(np.int64), values.astype(np.int64), V)
    total = np.bincount(rows, weights=values, minlength=m)
    if (total <= 0).any():
        j = int(np.flatnonzero(total <= 0)[0])
        raise InputError(f"counts: row {j} of h has no next token (every context needs a positive count)")
    ctx = None
    if "context" in a:
        ctx = _contexts(a["context"], "context", V)
        _rows(ctx, "context", m, "one per row of h")
        uniq, first, inv = np.unique(ctx, axis=0, return_index=True, return_inverse=True)
        if uniq.shape[0] < m:
            inv = inv.reshape(-1)
            j = int(np.flatnonzero(np.bincount(inv) > 1)[0])
            twice = np.flatnonzero(inv == j)[:2].tolist()
            raise InputError(f"context: rows {twice[0]} and {twice[1]} are the same context (one row per distinct "
                             "context; a file of one row per position has no context_index or counts)")
        rank = np.empty(m, dtype=np.int64)
        rank[first] = np.arange(m)
        h, ctx = h[first], uniq
        rows, tokens, values = _triples(rank[rows], tokens, values, V)
    return h, ctx, rows, tokens, values


def counts_sha256(counts: ContextCounts) -> str:
    """SHA-256 of ``counts`` in a canonical form: m and V (8-byte little-endian unsigned), each context's
    length (the same) and token ids (8-byte little-endian signed), then nnz and the arrays ``rows``,
    ``tokens``, ``values`` (int64 little-endian)."""
    digest = hashlib.sha256()
    u8 = lambda v: np.uint64(v).astype("<u8").tobytes()  # noqa: E731
    digest.update(u8(counts.m) + u8(counts.V))
    for c in counts.contexts:
        digest.update(u8(len(c)) + np.asarray(c, dtype="<i8").tobytes())
    digest.update(u8(counts.values.size))
    for arr in (counts.rows, counts.tokens, counts.values):
        digest.update(np.ascontiguousarray(arr, dtype="<i8").tobytes())
    return digest.hexdigest()


def _build(a: dict[str, np.ndarray], names: list[str] | None, *, merge_unseen: bool, max_entries: int | None,
           name: str, files: tuple[tuple[str, str], ...]) -> ModelData:
    """The :class:`ModelData` of the arrays ``a`` of an activations file."""
    if "h" not in a:
        raise InputError("h: missing (the activations: (n, d) per position, or (m, d) per distinct context)")
    V = _vocabulary(a, names)
    h = a["h"]
    if h.ndim == 2:
        check_entries("h", int(h.shape[0]), int(h.shape[1]), max_entries, "the activations (n, d)")
    if "context_index" in a or "counts" in a or any(k in a for k in _CSR):
        H, ctx, rows, tokens, values = _per_context(a, V)
    elif "next_token" in a:
        H, ctx, rows, tokens, values = _per_position(a, V)
    else:
        raise InputError("next_token: missing: give next_token and context (one row per position), or counts, "
                         "the counts_indptr/indices/data triple, or next_token with context_index (one row per "
                         "distinct context)")
    m, d = H.shape
    decoder, note = None, "the activations file has no W: give --W for a decoder of these h"
    if "W" in a:
        W = _floats(a["W"], "W", 2)
        if W.shape[1] != d:
            raise InputError(f"W: shape {W.shape}, expected ({V}, {d}) (d of h)")
        decoder, note = W, ""
    bias = "b" in a
    if bias:  # the head's bias as the constant last coordinate, as capture() appends it
        b = _floats(a["b"], "b", 1)
        H = np.hstack([H, np.ones((m, 1))])
        decoder = None if decoder is None else np.hstack([decoder, b[:, None]])
    if "token_frequency" in a:
        freq = _ints(a["token_frequency"], "token_frequency", (1,), 0, None, "a count")
    else:
        freq = np.bincount(tokens, weights=values, minlength=V).astype(np.int64)
    contexts = _context_tuples(ctx) if ctx is not None else tuple(() for _ in range(m))
    counts = ContextCounts(contexts, rows, tokens, values, V, freq)
    merge = token_merge(counts) if merge_unseen else None
    check_entries("contexts", m, V if merge is None else merge.V_reduced, max_entries, "the count matrix (m, V)")
    tnames = list(names) if names is not None else [f"<{z}>" for z in range(V)]
    cnames = None if ctx is not None else [f"c{j}" for j in range(m)]
    inst = counts_instance(H, counts, tnames, merge, name, context_names=cnames)
    return ModelData(inst, decoder, note, files, counts_sha256(counts), _context_label(ctx), False, "activations",
                     False, bias, None, "activations file", freq, merge, counts, tuple(tnames), None, "counts")


def read_activations(path: str | os.PathLike, *, merge_unseen: bool = False,
                     max_entries: int | None = MAX_ENTRIES) -> ModelData:
    """The instance of an activations file (module doc), as a :class:`~ntpcert.instance.lm.ModelData`.

    Parameters
    ----------
    path : path
        A ``.safetensors`` or ``.npz`` file.
    merge_unseen : bool
        Keep the observed next tokens and one representative of the others (:mod:`ntpcert.instance.lm.merge`).
    max_entries : int or None
        Refuse activations (n·d) or counts (m·V, V of the instance) of more entries.

    Returns
    -------
    ModelData
        ``embeddings`` ``"activations"``, ``corpus`` ``"counts"``, ``files`` the file by SHA-256;
        ``decoder`` the file's W (with b as its last column), or None.

    Raises
    ------
    InputError
        An unreadable file, a missing or unknown key, a wrong shape or dtype, a non-finite float, an id
        out of range, positions of one context with different h: one line naming the key and the value.
    """
    p = os.fspath(path)
    arrays, names = _read_file(p)
    base = os.path.basename(p)
    return _build(arrays, names, merge_unseen=merge_unseen, max_entries=max_entries,
                  name=os.path.splitext(base)[0] or "activations", files=((base, _file_sha256(p)),))


# ---------------------------------------------------------------------------------------------- writing
def write_activations(path: str | os.PathLike, *, h: Any, next_token: Any = None, context: Any = None,
                      context_index: Any = None, counts: Any = None, W: Any = None, b: Any = None,
                      vocab_size: int | None = None, token_frequency: Any = None,
                      token_names: Any = None, overwrite: bool = False) -> ModelData:
    """Write an activations file (module doc) from arrays, after reading them as :func:`read_activations`
    would: nothing is written when they would be refused.

    Parameters
    ----------
    path : path
        Ending in ``.safetensors`` (needs ``safetensors``) or ``.npz``; written atomically.
    h : array of shape (n, d) or (m, d)
        Per position (with ``next_token`` and ``context``) or per distinct context (with ``counts``, or
        ``next_token`` and ``context_index``).
    next_token : array of shape (n,), optional
    context : array of shape (n, K) or (m, K), optional
        Token ids, left-padded with -1.
    context_index : array of shape (n,), optional
    counts : array of shape (m, V) or scipy.sparse matrix, optional
        Written dense, or as the CSR triple ``counts_indptr/indices/data`` when sparse.
    W : array of shape (V, d), optional
    b : array of shape (V,), optional
    vocab_size : int, optional
    token_frequency : array of shape (V,), optional
    token_names : sequence of V str, optional
    overwrite : bool
        Replace ``path`` when it exists.

    Returns
    -------
    ModelData
        What :func:`read_activations` reads from the file (its ``files`` name the written bytes).
    """
    p = os.fspath(path)
    if not (p.endswith(".safetensors") or p.endswith(".npz")):
        raise InputError(f"path: {p!r} does not end in .safetensors or .npz")
    check_output_file(p, "path", overwrite=overwrite)
    a: dict[str, np.ndarray] = {"h": np.asarray(h)}
    for key, value in (("next_token", next_token), ("context", context), ("context_index", context_index),
                       ("W", W), ("b", b), ("token_frequency", token_frequency)):
        if value is not None:
            a[key] = np.asarray(value)
    if vocab_size is not None:
        a["vocab_size"] = np.asarray(vocab_size).reshape(-1)
    if counts is not None:
        if hasattr(counts, "tocsr"):
            csr = counts.tocsr()
            csr.sort_indices()
            a.update(counts_indptr=np.asarray(csr.indptr, dtype=np.int64),
                     counts_indices=np.asarray(csr.indices, dtype=np.int64),
                     counts_data=np.asarray(csr.data))
            a.setdefault("vocab_size", np.asarray([csr.shape[1]], dtype=np.int64))
        else:
            a["counts"] = np.asarray(counts)
    for key in list(a):
        if a[key].dtype.kind in "iub" and key not in ("h", "W", "b"):
            a[key] = a[key].astype(np.int64)
        a[key] = np.ascontiguousarray(a[key])
    names = None if token_names is None else [str(t) for t in token_names]
    _build(a, names, merge_unseen=False, max_entries=None, name="check", files=(("check", "0" * 64),))
    if p.endswith(".safetensors"):
        require("safetensors", "lm", "writing a .safetensors activations file")
        from safetensors.numpy import save

        data = save(a, metadata=None if names is None else {"token_names": json.dumps(names)})
    else:
        buf = io.BytesIO()
        extra = {} if names is None else {"token_names": np.asarray(names, dtype=str)}
        np.savez(buf, **a, **extra)
        data = buf.getvalue()
    atomic_write_bytes(p, data)
    return read_activations(p, max_entries=None)
