r"""A fixed decoder (W, b) on its own, for questions about W alone (``ntpcert bottleneck``): from a ``.npy``
or ``.safetensors`` file, or from a model directory's checkpoint (its LM head, or the input embedding
where the two are tied, and ``lm_head.bias`` where there is one). No tokenizer, corpus or torch is needed:
the tensors are read from the safetensors files alone (:mod:`ntpcert.instance.lm.static`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InputError

__all__ = ["Head", "read_head", "read_model_head"]


@dataclass(frozen=True, eq=False)
class Head:
    """A decoder: logits ``W @ h + b``.

    Attributes
    ----------
    W : ndarray of shape (V, d)
        Float64, finite.
    b : ndarray of shape (V,) or None
        The bias, float64 and finite; None where the decoder has none.
    source : dict
        Where it was read: ``path``, and for a checkpoint the tensor names (``weight``, ``bias``) and
        whether the head is the tied input embedding (``tied``).
    """

    W: np.ndarray
    b: np.ndarray | None
    source: dict


def _finite(a: np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        idx = ", ".join(str(int(i)) for i in np.argwhere(bad)[0])
        raise InputError(f"{what}: entry [{idx}] is {float(a[tuple(np.argwhere(bad)[0])])!r}, not finite")
    return a


def read_head(path: str | os.PathLike, field: str = "W", bias: str | os.PathLike | None = None) -> Head:
    """The decoder of a ``.npy`` file (W alone) or a ``.safetensors`` file (its LM head by name, or its only
    2-d tensor, with the head's ``.bias`` beside it), and optionally a ``.npy`` bias of shape (V,)."""
    from ntpcert.instance.lm.decoder_file import read_decoder

    p = os.fspath(path)
    W = read_decoder(p, field)
    src: dict = {"path": p}
    b = None
    if p.lower().endswith(".safetensors"):
        from ntpcert.instance.lm.static import DECODER_NAMES, tensor_names

        names = tensor_names(p)
        head = next((n for suf in DECODER_NAMES for n in sorted(names) if n == suf or n.endswith("." + suf)), None)
        if head is None:
            head = next(n for n in names if len(names[n]) == 2)
        bias_name = head[: -len("weight")] + "bias" if head.endswith("weight") else None
        src["weight"] = head
        if bias_name in names:  # read_decoder appended it as the last column
            W, b = W[:, :-1], W[:, -1].copy()
            src["bias"] = bias_name
    if bias is not None:
        if b is not None:
            raise InputError(f"--bias: {p!r} has its own bias ({src['bias']!r})")
        b = _read_bias(bias, W.shape[0])
        src["bias"] = os.fspath(bias)
    return _checked(W, b, src, field)


def _read_bias(path: str | os.PathLike, V: int) -> np.ndarray:
    p = os.fspath(path)
    if not os.path.isfile(p) or not p.lower().endswith(".npy"):
        raise InputError(f"--bias: {p!r} is not a .npy file")
    try:
        b = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as err:
        from ntpcert.util.files import one_line

        raise InputError(f"--bias: {p!r} is not a readable .npy file ({one_line(err)})") from None
    if b.dtype.kind not in "fiu":
        raise InputError(f"--bias: {p!r} holds dtype {b.dtype.name}; expected real numbers")
    if b.shape != (V,):
        raise InputError(f"--bias: {p!r} has shape {b.shape}, expected ({V},) (one entry per row of W)")
    return _finite(b, f"--bias {p!r}")


def _checked(W: np.ndarray, b: np.ndarray | None, src: dict, field: str) -> Head:
    if W.ndim != 2 or W.shape[0] < 1 or W.shape[1] < 1:
        raise InputError(f"{field}: the decoder has shape {W.shape}; expected (V, d) with V, d >= 1")
    return Head(_finite(W, field), None if b is None else _finite(b, f"{field} (bias)"), src)


def read_model_head(model: str | os.PathLike, field: str = "--model") -> Head:
    """The decoder of a Hugging Face model directory (``config.json`` and ``model.safetensors`` or a shard
    index) or of one ``.safetensors`` checkpoint: the LM head (``lm_head.weight`` and friends), or the input
    embedding where the checkpoint ties them, and the head's bias when it has one. Nothing but the
    safetensors files is opened; every file must be a regular file inside the directory."""
    from ntpcert.instance.lm.files import INDEX_NAME, inside, shard_names
    from ntpcert.instance.lm.static import DECODER_NAMES, EMBEDDING_NAMES, find_tensor, read_tensor, tensor_names

    path = os.fspath(model)
    if os.path.isdir(path):
        inside(path, os.path.join(path, "config.json"), "the model's config", field)
        single = os.path.join(path, "model.safetensors")
        if os.path.lexists(single):
            weights = [inside(path, single, "the weights", field)]
        elif os.path.lexists(os.path.join(path, INDEX_NAME)):
            index = inside(path, os.path.join(path, INDEX_NAME), "the shard index", field)
            weights = [inside(path, os.path.join(path, n), "the shard", field)
                       for n in sorted(set(shard_names(index, field).values()))]
        else:
            raise InputError(f"{field}: {path!r} holds no weights (model.safetensors or {INDEX_NAME})")
    elif os.path.isfile(path) and path.lower().endswith(".safetensors"):
        weights = [path]
    else:
        raise InputError(f"{field}: no such model directory or .safetensors file {path!r}")
    where: dict[str, str] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for w in weights:
        for name, shape in tensor_names(w).items():
            where[name], shapes[name] = w, shape
    dec = find_tensor(where, DECODER_NAMES)
    tied = dec is None
    if tied:
        dec = find_tensor(where, EMBEDDING_NAMES)
    if dec is None:
        raise InputError(f"{field}: no LM head ({', '.join(DECODER_NAMES)}) and no input embedding "
                         f"({', '.join(EMBEDDING_NAMES)}) in {weights[0]!r}")
    if len(shapes[dec]) != 2:
        raise InputError(f"{field}: tensor {dec!r} has shape {shapes[dec]}, expected (V, d)")
    W = read_tensor(where[dec], dec)
    src: dict = {"path": path, "weight": dec, "tied": tied}
    b = None
    bias_name = dec[: -len("weight")] + "bias" if not tied and dec.endswith("weight") else None
    if bias_name is not None and bias_name in where:
        if shapes[bias_name] != (W.shape[0],):
            raise InputError(f"{field}: bias {bias_name!r} has shape {shapes[bias_name]}, expected ({W.shape[0]},)")
        b = read_tensor(where[bias_name], bias_name)
        src["bias"] = bias_name
    return _checked(W, b, src, f"{field} tensor {dec!r}")
