"""A decoder W (V, d) from a file: ``.npy``, or ``.safetensors`` (its only 2-d tensor, or the LM head by
name, with ``lm_head.bias`` appended as a last column), and a directory of snapshots ``W_t``."""

from __future__ import annotations

import os
import re

import numpy as np

from ntpcert.errors import InputError
from ntpcert.util.files import one_line

__all__ = ["read_decoder", "snapshot_files"]

#: The step of a snapshot file: the last run of digits in its name (``W_000120.npy`` → 120).
_STEP = re.compile(r"(\d+)(?!.*\d)")


def read_decoder(path: str | os.PathLike, field: str = "--W") -> np.ndarray:
    """W as float64, shape (V, d). Refused, in one line naming the file and what is wrong: an array of
    strings, objects, booleans or complex numbers (never cast to real), one that is not 2-d, and a
    non-finite entry (named by its index)."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InputError(f"{field}: no such file {p!r}")
    if p.lower().endswith(".npy"):
        try:
            W = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise InputError(f"{field}: {p!r} is not a readable .npy file ({one_line(err)})") from None
        if W.dtype.kind not in "fiu":  # complex, bool, strings, bytes, structured: not a real matrix
            raise InputError(f"{field}: {p!r} holds an array of dtype {W.dtype.str!r} ({W.dtype.name}); "
                             "expected real numbers (float or integer)")
    elif p.lower().endswith(".safetensors"):
        from ntpcert.instance.lm.static import DECODER_NAMES, read_tensor, tensor_names

        names = tensor_names(p)
        two_d = [n for n in names if len(names[n]) == 2]
        head = next((n for suf in DECODER_NAMES for n in sorted(names) if n == suf or n.endswith("." + suf)), None)
        name = head or (two_d[0] if len(two_d) == 1 else None)
        if name is None:
            raise InputError(f"{field}: {p!r} holds {len(two_d)} matrices and no LM head "
                             f"({', '.join(DECODER_NAMES)}): save W alone")
        W = read_tensor(p, name)
        bias = name[: -len("weight")] + "bias" if name.endswith("weight") else None
        if bias in names:
            W = np.hstack([W, read_tensor(p, bias)[:, None]])
    else:
        raise InputError(f"{field}: {p!r} is neither .npy nor .safetensors")
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise InputError(f"{field}: {p!r} is not a finite 2-d matrix (shape {W.shape})")
    bad = ~np.isfinite(W)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"{field}: {p!r} is not a finite 2-d matrix: entry [{i}, {j}] is {float(W[i, j])!r}")
    return W


def snapshot_files(directory: str | os.PathLike, field: str = "--W") -> list[tuple[int, str]]:
    """``(t, path)`` of the ``.npy`` / ``.safetensors`` files of a directory, by the step t in each name."""
    d = os.fspath(directory)
    out = []
    for name in sorted(os.listdir(d)):
        if name.lower().endswith((".npy", ".safetensors")):
            m = _STEP.search(os.path.splitext(name)[0])
            if m is None:
                raise InputError(f"{field}: snapshot {name!r} in {d!r} has no step number in its name")
            out.append((int(m.group(1)), os.path.join(d, name)))
    steps = [t for t, _ in out]
    if not out:
        raise InputError(f"{field}: directory {d!r} holds no .npy or .safetensors snapshots")
    if len(set(steps)) != len(steps):
        raise InputError(f"{field}: two snapshots in {d!r} have the same step number")
    return sorted(out)
