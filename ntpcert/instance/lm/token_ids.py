r"""A corpus given as token ids instead of text: ``--model DIR --token-ids``.

DATA is then one of

* a 1-D integer ``.npy``: one document;
* a 2-D integer ``.npy`` of shape (documents, length): one document per row, every row a full document
  (there is no padding value; documents of different lengths go in a ``datasets`` folder, or in one
  ``.npy`` per document);
* a folder written by ``datasets.Dataset.save_to_disk``: one document per row, in its column
  ``input_ids`` (else ``tokens``), each a list of integers (needs ``ntpcert[datasets]``).

Every id must be an integer in ``[0, V)``, V the model's vocabulary size; the documents are then read
exactly as :func:`~ntpcert.instance.lm.load.load_model_data` reads the ids its tokenizer gives for a
text (:func:`~ntpcert.instance.lm.contexts.count_contexts`), so ids of a text tokenised as ntpcert does
(blank-line-separated documents, each encoded without special tokens) give the same instance.

**The corpus hash** (the certificate's ``source.corpus_sha256`` with ``source.corpus = "token_ids"``)
is the SHA-256 of the documents in this canonical form, whatever the file: for each document in order,
its length as an 8-byte little-endian unsigned integer, then its ids as 8-byte little-endian signed
integers (:func:`token_ids_sha256`). A 1-D ``.npy``, a one-row 2-D ``.npy`` and a one-row ``datasets``
folder of the same ids have the same hash; so do two files of the same documents in different dtypes.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.util.extras import require
from ntpcert.util.files import one_line

__all__ = ["TOKEN_COLUMNS", "read_token_ids", "token_ids_sha256"]

#: The columns of a ``datasets`` folder read as token ids, in order of preference.
TOKEN_COLUMNS = ("input_ids", "tokens")


def token_ids_sha256(docs: Sequence[np.ndarray]) -> str:
    """SHA-256 of ``docs`` in the canonical form of the module doc (length ``<u8``, then ids ``<i8``)."""
    digest = hashlib.sha256()
    for doc in docs:
        a = np.asarray(doc, dtype="<i8")
        digest.update(np.uint64(a.size).astype("<u8").tobytes())
        digest.update(a.tobytes())
    return digest.hexdigest()


def _check_ids(a: np.ndarray, V: int, where: Any) -> np.ndarray:
    """``a`` as int64 when it is an integer array with every entry in [0, V); else an InputError naming
    the entry (``where(index)`` spells its position)."""
    if a.dtype.kind not in "iu":
        raise InputError(f"{where(None)}: dtype {a.dtype}, expected integer token ids")
    if a.size:
        lo, hi = a.min(), a.max()
        if lo < 0 or hi >= V:
            bad = np.argwhere((a < 0) | (a >= V))[0]
            idx = tuple(int(i) for i in bad)
            raise InputError(f"{where(idx)} = {int(a[idx])} is not a token id in [0, {V}) (the model's vocabulary)")
    return a.astype(np.int64)


def _read_npy(path: str, V: int) -> list[np.ndarray]:
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"DATA: no such file {path!r}") from None
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"DATA: {path!r} is not a readable .npy file ({one_line(err)})") from None
    if not isinstance(a, np.ndarray) or a.ndim not in (1, 2):
        raise InputError(f"DATA: {path!r} has shape {getattr(a, 'shape', None)}, expected token ids of shape (n,) "
                         "(one document) or (documents, n) (one per row)")

    def where(idx: tuple[int, ...] | None) -> str:
        return "DATA" if idx is None else f"DATA[{', '.join(map(str, idx))}]"

    ids = _check_ids(a, V, where)
    return [ids] if ids.ndim == 1 else list(ids)


def _read_dataset(path: str, V: int) -> list[np.ndarray]:
    datasets = require("datasets", "datasets", "reading token ids from a saved datasets folder")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # library code draws no bars
    try:
        ds = datasets.load_from_disk(path)
    except Exception as err:  # noqa: BLE001 - any loader failure is bad input
        raise InputError(f"DATA: {path!r} is not a folder saved by datasets ({one_line(err)})") from None
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    if not isinstance(ds, datasets.Dataset):
        splits = ", ".join(sorted(ds)) if hasattr(ds, "keys") else type(ds).__name__
        raise InputError(f"DATA: {path!r} holds several splits ({splits}): give the folder of one")
    column = next((c for c in TOKEN_COLUMNS if c in ds.column_names), None)
    if column is None:
        raise InputError(f"DATA: {path!r} has no column {' or '.join(TOKEN_COLUMNS)} (columns: "
                         f"{', '.join(ds.column_names) or 'none'})")
    import pyarrow as pa
    import pyarrow.compute as pc

    col = ds.with_format("arrow")[:][column]  # the rows as stored, any index mapping applied
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or pa.types.is_fixed_size_list(arr.type)):
        raise InputError(f"DATA: column {column!r} of {path!r} has type {arr.type}, expected lists of token ids")
    if arr.null_count:
        row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"DATA: {column}[{row}] is null, expected a list of token ids")
    flat = pc.list_flatten(arr)
    if flat.null_count:
        raise InputError(f"DATA: column {column!r} of {path!r} has a null token id")
    if not pa.types.is_integer(flat.type):
        raise InputError(f"DATA: column {column!r} of {path!r} holds {flat.type}, expected integer token ids")
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    values = flat.to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.cumsum(lengths)])

    def where(idx: tuple[int, ...] | None) -> str:
        if idx is None:
            return f"DATA: column {column!r}"
        row = int(np.searchsorted(starts, idx[0], side="right") - 1)
        return f"DATA: {column}[{row}][{idx[0] - int(starts[row])}]"

    ids = _check_ids(values, V, where)
    return [ids[starts[i]:starts[i + 1]] for i in range(lengths.size)]


def read_token_ids(path: str | os.PathLike, V: int) -> tuple[list[np.ndarray], str]:
    """The documents of a token-id corpus (module doc) and their canonical SHA-256.

    Parameters
    ----------
    path : path
        A ``.npy`` file of shape (n,) or (documents, n), or a saved ``datasets`` folder.
    V : int
        The model's vocabulary size: every id must lie in ``[0, V)``.

    Returns
    -------
    docs : list of ndarray of shape (n_i,) of int64
    sha256 : str
        :func:`token_ids_sha256` of ``docs``.

    Raises
    ------
    InputError
        An unreadable file, another shape or dtype, a missing column, or an id outside ``[0, V)`` (named
        by its position).
    MissingExtraError
        A ``datasets`` folder without ``ntpcert[datasets]``.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        docs = _read_dataset(p, V)
    elif p.endswith(".npy"):
        docs = _read_npy(p, V)
    elif not os.path.exists(p):
        raise InputError(f"DATA: no such file or folder {p!r}")
    else:
        raise InputError(f"DATA: {p!r} is neither a .npy file nor a saved datasets folder (--token-ids)")
    return docs, token_ids_sha256(docs)
