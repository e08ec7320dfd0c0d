"""The checkpoints of a training run on disk, in order, with their steps and one shared tokenizer.

A series is given either as several model directories, in the order given, or as one folder that holds
no ``config.json`` of its own and whose subfolders are model directories (``checkpoint-<step>`` as the
Hugging Face Trainer writes them, ``step<N>``, ...). The step of a checkpoint is the trailing integer of
its folder's name when every checkpoint's name has one and no two are equal (a folder's checkpoints are
then sorted by it), else its position in the series (a folder's checkpoints sorted by name);
:attr:`CheckpointList.steps_from` says which.

Each checkpoint reads its tokenizer from ``--model-tokenizer`` when given, else its own
``tokenizer.json``, else the one in its parent folder (where the Trainer's output directory keeps it).
The series compares checkpoints of one vocabulary: :func:`check_shared_vocabulary` refuses, before any
model is loaded, checkpoints whose config's ``vocab_size`` or tokenizer vocabulary differ. Nothing here
loads a tensor (the vocabulary size is read from the safetensors headers).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Sequence

from ntpcert.errors import InputError

__all__ = ["Checkpoint", "CheckpointList", "check_shared_vocabulary", "find_checkpoints", "is_series",
           "trailing_step"]

_TRAILING = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Checkpoint:
    """One model directory of a series.

    Attributes
    ----------
    path : str
        The model directory (``config.json`` and weights).
    step : int
        Its training step (the trailing integer of its name) or its position in the series.
    tokenizer : str or None
        The ``tokenizer.json`` to read it with; None: the one inside ``path``.
    """

    path: str
    step: int
    tokenizer: str | None = None

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))


@dataclass(frozen=True)
class CheckpointList:
    """The checkpoints in series order, and where their steps come from: ``"folder names"`` (the trailing
    integer of each name) or ``"positions"`` (0, 1, ... in series order)."""

    checkpoints: tuple[Checkpoint, ...]
    steps_from: str


def trailing_step(name: str) -> int | None:
    """The integer that ends ``name`` (``checkpoint-500`` → 500, ``step0030`` → 30), or None."""
    m = _TRAILING.search(name)
    return None if m is None else int(m.group(1))


def _is_model_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))


def is_series(models: Sequence[str] | str | None) -> bool:
    """Whether ``--model`` names a checkpoint series: several paths, or one directory without a
    ``config.json`` of its own (a folder of checkpoints, or of nothing: :func:`find_checkpoints` says so)."""
    if models is None:
        return False
    if isinstance(models, str):
        models = [models]
    if len(models) > 1:
        return True
    path = os.fspath(models[0])
    return os.path.isdir(path) and not os.path.lexists(os.path.join(path, "config.json"))


def _steps(paths: list[str]) -> tuple[list[int], str]:
    found = [trailing_step(os.path.basename(os.path.normpath(p))) for p in paths]
    if all(s is not None for s in found) and len(set(found)) == len(found):
        return [int(s) for s in found], "folder names"
    return list(range(len(paths))), "positions"


def _tokenizer(path: str, given: str | None) -> str | None:
    """``given``, else None when ``path`` holds ``tokenizer.json``, else its parent's; refused when neither has one."""
    if given is not None:
        return os.fspath(given)
    if os.path.lexists(os.path.join(path, "tokenizer.json")):
        return None
    parent = os.path.dirname(os.path.abspath(os.path.normpath(path)))
    shared = os.path.join(parent, "tokenizer.json")
    if os.path.isfile(shared):
        return shared
    raise InputError(f"--model: checkpoint {path!r} holds no tokenizer.json, nor does its folder {parent!r}: "
                     "give --model-tokenizer FILE")


def find_checkpoints(models: Sequence[str], tokenizer: str | None = None) -> CheckpointList:
    """The checkpoints of ``--model``: several model directories in the order given, or the checkpoint
    subfolders of one folder (module doc), each with its tokenizer file (``tokenizer``: the one for all).

    Raises
    ------
    InputError
        A path that is not a directory; with several paths, one without ``config.json``; a folder with no
        checkpoint subfolders; a checkpoint without a tokenizer (its own or its folder's) when
        ``tokenizer`` is None.
    """
    models = [os.fspath(m) for m in models]
    for m in models:
        if not os.path.isdir(m):
            raise InputError(f"--model: {m!r} is not a directory (a checkpoint series reads model directories)")
    if len(models) > 1:
        for m in models:
            if not _is_model_dir(m):
                raise InputError(f"--model: {m!r} holds no config.json: with several --model directories each is "
                                 "one checkpoint's model directory")
        paths = models
        steps, steps_from = _steps(paths)
    else:
        folder = models[0]
        subs = sorted(e.path for e in os.scandir(folder) if not e.name.startswith(".") and _is_model_dir(e.path))
        if not subs:
            raise InputError(f"--model: {folder!r} holds no config.json and no checkpoint folders (subfolders with "
                             "config.json and weights, e.g. checkpoint-<step>)")
        steps, steps_from = _steps(subs)
        order = sorted(range(len(subs)), key=lambda i: steps[i]) if steps_from == "folder names" else range(len(subs))
        paths = [subs[i] for i in order]
        steps = [steps[i] for i in order] if steps_from == "folder names" else steps
    cks = tuple(Checkpoint(p, s, _tokenizer(p, tokenizer)) for p, s in zip(paths, steps))
    return CheckpointList(cks, steps_from)


def _vocabulary(ck: Checkpoint, cache: dict[str, dict[str, int]]) -> tuple[int, dict[str, int], str]:
    """(the config's checked ``vocab_size``, the tokenizer's vocabulary, the tokenizer file) of ``ck``."""
    from ntpcert.instance.lm.checkpoint import checkpoint_tensors, read_config, vocab_size
    from ntpcert.instance.lm.files import locate_model
    from ntpcert.util.extras import require
    from ntpcert.util.files import one_line

    files = locate_model(ck.path, ck.tokenizer)
    V = vocab_size(read_config(files), checkpoint_tensors(files), files.config)
    key = os.path.realpath(files.tokenizer)
    if key not in cache:
        tokenizers = require("tokenizers", "lm", "tokenising a corpus with a model's tokenizer")
        try:
            cache[key] = tokenizers.Tokenizer.from_file(files.tokenizer).get_vocab(with_added_tokens=True)
        except BaseException as err:  # noqa: BLE001 - a broken tokenizer file is bad input (a Rust panic too)
            if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
                raise
            raise InputError(f"--model: tokenizer file {files.tokenizer!r} is unreadable ({one_line(err)})") from None
    return V, cache[key], files.tokenizer


def check_shared_vocabulary(checkpoints: Sequence[Checkpoint]) -> None:
    """Refuse, with one line naming the first checkpoint that differs, checkpoints whose decoder has another
    number of rows (``vocab_size``) or whose tokenizer has another vocabulary than the first's: the series
    compares the h of the same contexts. Reads the config, the safetensors headers and the tokenizers only."""
    cache: dict[str, dict[str, int]] = {}
    first = checkpoints[0]
    V0, vocab0, tok0 = _vocabulary(first, cache)
    for ck in checkpoints[1:]:
        V, vocab, tok = _vocabulary(ck, cache)
        why = None
        if V != V0:
            why = f"vocab_size {V}, not {V0}"
        elif vocab is not vocab0 and vocab != vocab0:
            if len(vocab) != len(vocab0):
                why = f"its tokenizer {tok!r} has {len(vocab)} tokens, not {len(vocab0)}"
            else:
                diff = sorted(set(vocab.items()) ^ set(vocab0.items()), key=lambda kv: kv[1])[0]
                why = f"its tokenizer {tok!r} and {tok0!r} differ at the token {diff[0]!r}"
        if why is not None:
            raise InputError(f"--model: checkpoint {ck.path!r} has another vocabulary than {first.path!r} ({why}): "
                             "a series compares checkpoints of one tokenizer (the same contexts)")
