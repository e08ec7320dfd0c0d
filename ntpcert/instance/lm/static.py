r"""The torch-free path: static context embeddings and the decoder, read from the safetensors alone.

With the input embedding matrix :math:`E` (V, d₀) of the checkpoint, a context of the K previous
tokens :math:`(c_1, \dots, c_K)` is embedded as the concatenation
:math:`h = (E_{c_1}, \dots, E_{c_K}) \in \mathbb{R}^{K d_0}`, the paper's own setting of fixed
embeddings; a ``prefix:T`` context shorter than T is padded with zero blocks in front. The
decoder matrix (``lm_head.weight`` and friends, or E itself when the checkpoint ties them) is read
directly; it applies to these h only when K = 1 (d = d₀).

Only ``safetensors`` (its numpy API) and numpy are used. bfloat16 tensors, which numpy does not
know, are widened to float32 exactly from their bits. A non-finite entry of E or of the decoder is
refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.lm.contexts import ContextCounts
from ntpcert.instance.lm.files import ModelFiles
from ntpcert.util.extras import require
from ntpcert.util.files import one_line

__all__ = ["DECODER_NAMES", "EMBEDDING_NAMES", "StaticModel", "read_static", "read_tensor", "tensor_names"]

#: Tensor names (as suffixes) of the input embedding matrix in common checkpoints.
EMBEDDING_NAMES = ("wte.weight", "embed_tokens.weight", "word_embeddings.weight", "embed_in.weight",
                   "tok_embeddings.weight")

#: Tensor names (as suffixes) of the decoder (LM head) weight.
DECODER_NAMES = ("lm_head.weight", "embed_out.weight", "output.weight")


def _open(path: str) -> Any:
    safetensors = require("safetensors", "lm", "reading a .safetensors file")
    try:
        return safetensors.safe_open(path, framework="numpy")
    except Exception as err:  # noqa: BLE001 - a broken file is bad input
        raise InputError(f"--model: {path!r} is not a readable .safetensors file ({one_line(err)})") from None


def find_tensor(names: dict[str, str], suffixes: tuple[str, ...]) -> str | None:
    """The first name (in sorted order) that is one of ``suffixes`` or ends in ``.suffix``, trying the
    suffixes in turn; None when none matches."""
    for suf in suffixes:
        hits = sorted(n for n in names if n == suf or n.endswith("." + suf))
        if hits:
            return hits[0]
    return None


def tensor_names(path: str) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, for one ``.safetensors`` file."""
    f = _open(path)
    return {n: tuple(f.get_slice(n).get_shape()) for n in f.keys()}


def read_tensor(path: str, name: str) -> np.ndarray:
    """Tensor ``name`` of one ``.safetensors`` file as float64 (bfloat16 widened from its bits)."""
    f = _open(path)
    try:
        return np.asarray(f.get_tensor(name), dtype=np.float64)
    except Exception:  # noqa: BLE001 - numpy has no bfloat16: read the raw bits
        return _bf16(path, name)


def _bf16(path: str, name: str) -> np.ndarray:
    import json
    import struct

    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
        info = header.get(name)
        if not info or info.get("dtype") != "BF16":
            raise InputError(f"--model: tensor {name!r} of {path!r} has a dtype numpy cannot read "
                             f"({None if not info else info.get('dtype')!r})")
        start, stop = info["data_offsets"]
        fh.seek(8 + n + start)
        raw = np.frombuffer(fh.read(stop - start), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"]).astype(np.float64)


@dataclass(frozen=True, eq=False)
class StaticModel:
    """The two matrices of the torch-free path.

    Attributes
    ----------
    embedding : ndarray of shape (V, d0)
        The input embedding matrix E.
    decoder : ndarray of shape (V, d0) or (V, d0 + 1)
        The decoder weight, with its bias as the last column when the checkpoint has ``lm_head.bias``.
    tied, bias : bool
    names : tuple of str
        The tensor names read (embedding, decoder).
    """

    embedding: np.ndarray
    decoder: np.ndarray
    tied: bool
    bias: bool
    names: tuple[str, ...]

    def embed(self, counts: ContextCounts, length: int) -> np.ndarray:
        """H of shape (m, length·d0): each context's token embeddings concatenated, zero blocks in front
        of contexts shorter than ``length``."""
        V, d0 = self.embedding.shape
        H = np.zeros((counts.m, length * d0), dtype=np.float64)
        for j, c in enumerate(counts.contexts):
            off = length - len(c)
            for i, t in enumerate(c):
                H[j, (off + i) * d0:(off + i + 1) * d0] = self.embedding[t]
        return H


def read_static(files: ModelFiles) -> StaticModel:
    """Find and read E and the decoder in the checkpoint's (possibly sharded) files."""
    where: dict[str, str] = {}
    for path in files.weights:
        for name in _open(path).keys():
            where[name] = path
    emb = find_tensor(where, EMBEDDING_NAMES)
    if emb is None:
        raise InputError(f"--model: no input embedding matrix in {files.weights[0]!r} (looked for "
                         f"{', '.join(EMBEDDING_NAMES)})")
    dec = find_tensor(where, DECODER_NAMES)
    E = read_tensor(where[emb], emb)
    if E.ndim != 2:
        raise InputError(f"--model: tensor {emb!r} has shape {E.shape}, expected (V, d)")
    W = E if dec is None else read_tensor(where[dec], dec)
    if W.shape != E.shape:
        raise InputError(f"--model: decoder {dec!r} has shape {W.shape}, the embedding {emb!r} {E.shape}")
    bias_name = None if dec is None else dec[: -len("weight")] + "bias"
    bias = bias_name is not None and bias_name in where
    if bias:
        W = np.hstack([W, read_tensor(where[bias_name], bias_name)[:, None]])
    for name, a in ((emb, E), (dec or emb, W[:, : E.shape[1]]), (bias_name, W[:, E.shape[1]:])):
        bad = ~np.isfinite(a)
        if bad.any():
            r, c = (int(i) for i in np.argwhere(bad)[0])
            at = f"[{r}]" if name == bias_name else f"[{r}, {c}]"
            raise InputError(f"--model: tensor {name!r} has the non-finite entry {float(a[r, c])!r} at {at}")
    tied = dec is None or np.array_equal(W[:, : E.shape[1]], E)
    return StaticModel(E, W, bool(tied), bool(bias), (emb, dec or emb))
