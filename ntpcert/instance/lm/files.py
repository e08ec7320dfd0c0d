"""The files of a model on disk, found and named by their SHA-256, without opening them.

A model is either a Hugging Face model directory (``config.json``, the weights as
``model.safetensors`` or as shards listed in ``model.safetensors.index.json``, and ``tokenizer.json``)
or a single ``.safetensors`` file together with a tokenizer file given apart. Nothing here reaches
a hub: every path is a local file, checked to exist before anything is loaded, so a directory that
is absent or partial is refused with one line naming what is missing.

The directory is untrusted input. Every file read from it must be a regular file inside it: a shard
index that names an absolute path or a path with ``..`` in it, and a symlink (the file itself or a
directory on its way) that resolves outside the directory, are refused by name. A Hugging Face cache
snapshot, whose files are symlinks into ``../../blobs``, is read after copying it with the links
followed (``cp -rL``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass

from ntpcert.errors import InputError

__all__ = ["ModelFiles", "inside", "locate_model", "sha256_file", "shard_names"]

#: Bytes read at a time when hashing a file.
_HASH_CHUNK = 1 << 22

#: The weights index of a sharded checkpoint.
INDEX_NAME = "model.safetensors.index.json"

#: A PEFT adapter's config: transformers would load the adapter's weights beside the model's.
ADAPTER_NAME = "adapter_config.json"


def sha256_file(path: str) -> str:
    """The SHA-256 of a file's bytes, as 64 lowercase hex digits (read in chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class ModelFiles:
    """Where a model's parts are.

    Attributes
    ----------
    root : str
        The model directory, or the directory of the ``.safetensors`` file.
    config : str or None
        ``config.json`` (None for a bare ``.safetensors`` file: only the torch-free path reads it).
    weights : tuple of str
        The ``.safetensors`` files, in shard order.
    tokenizer : str
        The ``tokenizer.json`` file.
    """

    root: str
    config: str | None
    weights: tuple[str, ...]
    tokenizer: str

    @property
    def is_directory(self) -> bool:
        """True for a Hugging Face model directory (which transformers can open)."""
        return self.config is not None

    def paths(self) -> tuple[str, ...]:
        """Every file the model is read from (config, weights, tokenizer), once each."""
        out = ([self.config] if self.config else []) + list(self.weights) + [self.tokenizer]
        return tuple(dict.fromkeys(out))

    def digests(self) -> tuple[tuple[str, str], ...]:
        """``(name, sha256)`` of every file of :meth:`paths`; names relative to :attr:`root` when inside it."""
        out = []
        for p in self.paths():
            rel = os.path.relpath(p, self.root)
            out.append((p if rel.startswith("..") else rel, sha256_file(p)))
        return tuple(out)


def _need_file(path: str, what: str, field: str) -> str:
    if not os.path.isfile(path):
        raise InputError(f"{field}: {what} {path!r} is missing")
    return path


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def inside(root: str, path: str, what: str, field: str) -> str:
    """``path``, a file of the model directory ``root``, when it is a regular file inside ``root`` once every
    symlink is resolved; else an :class:`InputError` naming it (missing, not a regular file, or outside)."""
    if not os.path.lexists(path):
        raise InputError(f"{field}: {what} {path!r} is missing")
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise InputError(f"{field}: {what} {path!r} resolves to {real!r}, outside the model directory "
                         f"{root!r}: only regular files inside it are read (copy a linked directory with cp -rL)")
    if not _is_regular(real):
        raise InputError(f"{field}: {what} {path!r} is not a regular file")
    return path


def shard_names(index: str, field: str) -> dict[str, str]:
    """The ``weight_map`` of a shard index (tensor name -> shard file name), checked: a JSON object of
    strings, every shard a ``.safetensors`` file named relative to the directory, without ``..``."""
    try:
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{field}: the shard index {index!r} is unreadable ({type(err).__name__}: {err})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError(f"{field}: the shard index {index!r} names no .safetensors shards")
    for key, name in weight_map.items():
        if not isinstance(name, str) or not name.endswith(".safetensors"):
            raise InputError(f"{field}: the shard index {index!r} maps {key!r} to {name!r}, not a .safetensors "
                             "file name")
        parts = name.replace("\\", "/").split("/")
        if os.path.isabs(name) or name.startswith(("/", "\\")) or ".." in parts or os.path.splitdrive(name)[0]:
            raise InputError(f"{field}: the shard index {index!r} names the shard {name!r} (for {key!r}), outside "
                             "the model directory: shards are file names inside it")
    return weight_map


def _shards(root: str, field: str) -> tuple[str, ...]:
    index = inside(root, os.path.join(root, INDEX_NAME), "the shard index", field)
    names = sorted(set(shard_names(index, field).values()))
    return tuple(inside(root, os.path.join(root, n), "the shard", field) for n in names)


def locate_model(model: str | os.PathLike, tokenizer: str | os.PathLike | None = None, *,
                 field: str = "--model") -> ModelFiles:
    """Find a model's files.

    Parameters
    ----------
    model : path
        A model directory, or one ``.safetensors`` file.
    tokenizer : path, optional
        The ``tokenizer.json`` to use; default ``tokenizer.json`` next to the weights. Required in
        effect for a bare ``.safetensors`` file without one beside it.

    Raises
    ------
    InputError
        A path that does not exist, a directory without ``config.json``, without weights
        (``model.safetensors`` or a complete sharded index) or without a tokenizer file.
    """
    path = os.fspath(model)
    if os.path.isdir(path):
        root = path
        config = inside(root, os.path.join(root, "config.json"), "the model's config", field)
        if os.path.lexists(os.path.join(root, ADAPTER_NAME)):
            raise InputError(f"{field}: {path!r} holds {ADAPTER_NAME}: an adapter directory is not read (its "
                             "weights and base model would come from elsewhere); merge the adapter and save the model")
        single = os.path.join(root, "model.safetensors")
        if os.path.lexists(single):
            weights: tuple[str, ...] = (inside(root, single, "the weights", field),)
        elif os.path.lexists(os.path.join(root, INDEX_NAME)):
            weights = _shards(root, field)
        else:
            raise InputError(f"{field}: {path!r} holds no weights (model.safetensors or {INDEX_NAME}); "
                             "only safetensors checkpoints are read")
    elif os.path.isfile(path):
        if not _is_regular(path):
            raise InputError(f"{field}: {path!r} is not a regular file")
        if not path.lower().endswith(".safetensors"):
            raise InputError(f"{field}: {path!r} is neither a model directory nor a .safetensors file")
        root, config, weights = os.path.dirname(os.path.abspath(path)), None, (path,)
    else:
        raise InputError(f"{field}: no such model directory or file {path!r}")
    if tokenizer is not None:  # the user's own file, wherever it is
        tok = _need_file(os.fspath(tokenizer), "the tokenizer file", "--model-tokenizer")
        if not _is_regular(tok):
            raise InputError(f"--model-tokenizer: {tok!r} is not a regular file")
    else:
        tok = inside(root, os.path.join(root, "tokenizer.json"), "the tokenizer file", field)
    return ModelFiles(root, config, weights, tok)
