r"""What a model directory must hold, checked from its JSON and the safetensors headers before any tensor
is loaded.

The directory is untrusted input, so nothing in it decides what runs or how much is allocated:

* ``config.json`` is a JSON object without ``auto_map`` (a pointer to Python code in the directory):
  transformers is always called with ``trust_remote_code=False``, and a directory that asks for custom
  code is refused rather than read as another architecture;
* the tensors are read from the safetensors headers alone (:func:`checkpoint_tensors`: name, dtype,
  shape; the format checks that the data offsets cover the file, so these sizes are bounded by the
  bytes on disk), each tensor once in one file, every parameter of a floating-point dtype of
  :data:`FLOAT_DTYPES`;
* the config's ``vocab_size`` V is the number of rows of the checkpoint's input embedding matrix
  (:func:`vocab_size`), or, where no embedding tensor has a known name, at most the checkpoint's number
  of entries: a config of ``vocab_size`` :math:`10^{12}` is refused before the (V,) token counts exist;
* the architecture is built on torch's ``meta`` device (shapes, no storage), and every parameter it
  needs must be in the checkpoint with the shape it implies (:func:`check_parameters`): transformers
  would initialise a missing one at random and the model read would not be the one on disk. Its
  parameter count, a sum of the config's sizes, must not exceed the checkpoint's entries, so the load
  allocates no more than the files hold. Layer counts and widths are compared with the checkpoint's
  numbers of tensors and entries before the meta model is built (each layer has at least one tensor,
  each width is the length of some parameter).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ntpcert.errors import InputError
from ntpcert.instance.lm.files import ModelFiles
from ntpcert.util.extras import require
from ntpcert.util.files import one_line

__all__ = ["FLOAT_DTYPES", "Tensor", "check_parameters", "checkpoint_tensors", "read_config", "vocab_size"]

#: Safetensors dtypes a parameter may have: floating point that numpy (or, for BF16, its bits) reads.
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")

#: Config keys that count repeated blocks (layers, experts): each needs at least one tensor.
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_local_experts", "num_experts")

#: Config keys of widths (hidden and feed-forward sizes): each is the length of some parameter.
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "intermediate_size", "n_inner", "ffn_dim", "head_dim")

#: A tensor of the checkpoint: (dtype, shape, file).
Tensor = tuple[str, tuple[int, ...], str]


def read_config(files: ModelFiles) -> dict:
    """``config.json`` as a dict: a JSON object, with no ``auto_map`` (custom code in the directory)."""
    try:
        with open(files.config, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError, RecursionError) as err:
        raise InputError(f"--model: {files.config!r} is not a readable JSON config ({one_line(err)})") from None
    if not isinstance(cfg, dict):
        raise InputError(f"--model: {files.config!r} is not a JSON object")
    if "auto_map" in cfg:
        raise InputError(f"--model: config auto_map = {one_line(json.dumps(cfg['auto_map']))[:80]}: the model asks "
                         "for custom code from its directory, which is never run (only transformers' own "
                         "architectures are read)")
    return cfg


def checkpoint_tensors(files: ModelFiles) -> dict[str, Tensor]:
    """Every tensor of the checkpoint's files, from their headers only: name -> (dtype, shape, file)."""
    safetensors = require("safetensors", "lm", "reading a .safetensors file")
    out: dict[str, Tensor] = {}
    for path in files.weights:
        try:
            with safetensors.safe_open(path, framework="numpy") as f:
                for name in f.keys():
                    sl = f.get_slice(name)
                    if name in out:
                        raise InputError(f"--model: tensor {name!r} is in two files ({out[name][2]!r} and {path!r})")
                    out[name] = (str(sl.get_dtype()), tuple(int(n) for n in sl.get_shape()), path)
        except InputError:
            raise
        except Exception as err:  # noqa: BLE001 - a broken header is bad input
            raise InputError(f"--model: {path!r} is not a readable .safetensors file ({one_line(err)})") from None
    if not out:
        raise InputError(f"--model: {files.weights[0]!r} holds no tensors")
    return out


def _entries(tensors: dict[str, Tensor]) -> int:
    return sum(math.prod(shape) for _, shape, _ in tensors.values())


def vocab_size(cfg: dict, tensors: dict[str, Tensor], config: str) -> int:
    """The config's ``vocab_size``, checked against the checkpoint (module doc)."""
    from ntpcert.instance.lm.static import EMBEDDING_NAMES, find_tensor

    V = cfg.get("vocab_size")
    if not isinstance(V, int) or isinstance(V, bool) or V <= 0:
        raise InputError(f"--model: {config!r} has no positive integer vocab_size (got {V!r})")
    emb = find_tensor(dict.fromkeys(tensors), EMBEDDING_NAMES)
    if emb is not None:
        shape = tensors[emb][1]
        if len(shape) != 2 or shape[0] != V:
            raise InputError(f"--model: config vocab_size = {V}, but the input embedding {emb!r} has shape "
                             f"{shape} (V rows expected)")
    elif V > _entries(tensors):
        raise InputError(f"--model: config vocab_size = {V} is more than the checkpoint's {_entries(tensors)} "
                         "entries")
    return V


def check_layers(cfg: dict, tensors: dict[str, Tensor], config: str) -> None:
    """Counts of repeated blocks in the config, at most the checkpoint's number of tensors; widths, at most
    its number of entries (each is the length of some parameter)."""
    for keys, bound, what in ((LAYER_KEYS, len(tensors), "tensors"), (WIDTH_KEYS, _entries(tensors), "entries")):
        for key in keys:
            n = cfg.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n > bound:
                raise InputError(f"--model: config {key} = {n}, but the checkpoint has only {bound} {what}")


def _names(name: str, prefix: str) -> tuple[str, ...]:
    """The checkpoint names under which transformers finds parameter ``name``: as is, without or with the
    base model's prefix, and the legacy ``gamma``/``beta`` of a norm's ``weight``/``bias``."""
    out = [name]
    if prefix and name.startswith(prefix + "."):
        out.append(name[len(prefix) + 1:])
    elif prefix:
        out.append(f"{prefix}.{name}")
    for new, old in ((".weight", ".gamma"), (".bias", ".beta")):
        out += [n[: -len(new)] + old for n in list(out) if n.endswith(new)]
    return tuple(out)


def check_parameters(files: ModelFiles, cfg: dict, tensors: dict[str, Tensor], transformers: Any,
                     torch: Any) -> None:
    """The architecture of ``cfg`` on the meta device against the checkpoint (module doc)."""
    check_layers(cfg, tensors, files.config)
    try:
        config = transformers.AutoConfig.from_pretrained(files.root, local_files_only=True, trust_remote_code=False)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - a config transformers cannot build is bad input
        raise InputError(f"--model: the config {files.config!r} does not build a model ({one_line(err)})") from None
    groups: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append((name, tuple(int(n) for n in p.shape)))
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping

    converted = get_checkpoint_conversion_mapping(type(model).__name__) or get_checkpoint_conversion_mapping(
        getattr(config, "model_type", None))
    if not converted:  # else names are converted on load: the loading report after it decides (capture)
        _check_names(type(model).__name__, getattr(model, "base_model_prefix", "") or "", groups, tensors)
    need = sum(math.prod(g[0][1]) for g in groups.values())
    have = _entries(tensors)
    if need > have:
        raise InputError(f"--model: the config's {type(model).__name__} has {need} parameters, more than the "
                         f"checkpoint's {have} entries (a size in {files.config!r} does not match the weights)")


def _check_names(arch: str, prefix: str, groups: dict, tensors: dict[str, Tensor]) -> None:
    """Each parameter (a group of tied names) is in the checkpoint, with its shape and a float dtype."""
    for group in groups.values():
        found = next(((n, t) for n, _ in group for t in _names(n, prefix) if t in tensors), None)
        name, shape = group[0]
        if found is None:
            raise InputError(f"--model: the checkpoint has no tensor {name!r} (shape {shape}), which "
                             f"{arch} needs: a partial checkpoint is refused (transformers would "
                             "initialise the tensor at random)")
        dtype, got, _ = tensors[found[1]]
        if got != shape:
            raise InputError(f"--model: tensor {found[1]!r} has shape {got}, the config implies {shape}")
        if dtype not in FLOAT_DTYPES:
            raise InputError(f"--model: tensor {found[1]!r} has dtype {dtype}, not a floating-point dtype "
                             f"({', '.join(FLOAT_DTYPES)})")
