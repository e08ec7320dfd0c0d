"""Instance files: ``.npz`` and ``.json`` readers and atomic writers.

File contract (both formats)
----------------------------
``embeddings``
    (m, d) real numbers, read as float64: strings are refused, and so is an integer float64 cannot hold
    exactly (past ``2**53``, e.g. ``2**53 + 1``), naming the entry; it is never rounded
    (:func:`~ntpcert.instance.values.check_exact_reals`).
``counts``
    (m, V) non-negative integers, **or** ``probs`` (m, V) with ``weights`` (m,). Probabilities and
    weights may be numbers or exact fraction strings such as ``"1/3"`` (in ``.npz`` as a unicode
    string array).
``token_names`` (V,), ``context_names`` (m,), ``name``
    Optional strings.

Files are read strictly, like certificates (:func:`ntpcert.util.strict_json.strict_loads`): a key
that is not one of these, a key repeated in one JSON object, the constants ``NaN``/``Infinity``, a
number that overflows to infinity and an integer literal of more than ``JSON_INT_MAX_DIGITS`` digits
are refused. Every problem is reported as one :class:`~ntpcert.errors.InputError` line that names
the file, the field and the value.

Counts are exact integers and are never rounded: JSON integers stay Python ints even when the
same list holds a float. A float count (JSON ``3.0``, or a float ``.npz`` array) is accepted only
when it is an integer below ``2**53`` (``2**24`` for float32), where it stands for one integer;
``1e20`` or ``9007199254740992.0`` is refused with a request to write the integer. Counts, row
sums and the total n must fit int64 (at most ``2**63 - 1``); past that the reader refuses the
file rather than wrap around (see :meth:`~ntpcert.instance.NTPInstance.from_counts`).

Writers keep the instance exact: counts stay integers; probabilities given as exact fractions
are written as fraction strings, probabilities given as floats as the same floats (JSON floats
are written with Python's shortest round-tripping ``repr``); weights of a probs instance are
written as fraction strings. Reading back gives an instance with the same
:meth:`~ntpcert.instance.NTPInstance.fingerprint`. Files are written to a temporary file in the
target directory and moved into place with :func:`os.replace`, so a reader never sees a
half-written file.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.util.files import atomic_write_bytes, one_line, read_input_bytes
from ntpcert.util.strict_json import StrictJSONError, strict_loads

__all__ = ["read_npz", "read_json", "write_npz", "write_json"]

_OPTIONAL = ("token_names", "context_names", "name")
#: Every key an instance file may hold.
KEYS = ("embeddings", "counts", "probs", "weights") + _OPTIONAL


def _unknown_keys(p: str, keys: list[str]) -> None:
    bad = [k for k in keys if k not in KEYS]
    if bad:
        raise InputError(f"{p}: unknown key {_show(bad[0])} (an instance file holds only {', '.join(KEYS)})")


# ---------------------------------------------------------------------------- readers
def read_npz(path: str | os.PathLike) -> NTPInstance:
    """Read an instance from a ``.npz`` archive (loaded with ``allow_pickle=False``).

    Parameters
    ----------
    path : path-like

    Returns
    -------
    NTPInstance
    """
    p = os.fspath(path)
    _check_readable(p)
    if not zipfile.is_zipfile(p):
        raise InputError(f"{p}: not an .npz archive (not a zip file)")
    try:
        archive = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise InputError(f"{p}: cannot read as .npz ({one_line(err)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):  # pragma: no cover - zip files load as NpzFile
        raise InputError(f"{p}: not an .npz archive")
    with archive:
        _unknown_keys(p, archive.files)
        fields: dict[str, Any] = {}
        for key in archive.files:
            try:
                arr = archive[key]
            except ValueError as err:
                if "allow_pickle" in str(err) or "Object arrays" in str(err):
                    raise InputError(
                        f"{p}: field {key!r} is an object (pickled) array; store numbers or strings"
                    ) from None
                raise InputError(f"{p}: field {key!r} cannot be read ({one_line(err)})") from None
            except (OSError, EOFError, zipfile.BadZipFile) as err:
                raise InputError(f"{p}: field {key!r} cannot be read ({one_line(err)})") from None
            fields[key] = _from_npz_array(p, key, arr)
    return _build(p, fields, sorted(archive.files))


#: The most digits an integer literal in a JSON data file may have. No count or embedding needs more
#: than a few dozen; the cap is Python's default int-string limit, applied here whatever the interpreter's
#: setting, so that the verdict on a file does not depend on what else the process imported.
JSON_INT_MAX_DIGITS = 4300


def read_json(path: str | os.PathLike) -> NTPInstance:
    """Read an instance from a JSON object (see the module docstring for the keys).

    Parameters
    ----------
    path : path-like

    Returns
    -------
    NTPInstance
    """
    p = os.fspath(path)
    _check_readable(p)
    raw = read_input_bytes(p, p)
    try:
        obj = strict_loads(raw.decode("utf-8"), max_int_digits=JSON_INT_MAX_DIGITS, cap_note=" (JSON_INT_MAX_DIGITS)")
    except UnicodeDecodeError as err:
        raise InputError(f"{p}: not UTF-8 text ({one_line(err)})") from None
    except StrictJSONError as err:
        raise InputError(f"{p}: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{p}: invalid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise InputError(f"{p}: invalid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise InputError(f"{p}: the JSON top level is a {type(obj).__name__}, expected an object with 'embeddings'")
    _unknown_keys(p, list(obj))
    for key in ("embeddings", "counts"):
        if key in obj:
            _reject_json_bools(p, key, obj[key])
    for key in ("token_names", "context_names"):
        if key in obj and obj[key] is not None:
            v = obj[key]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise InputError(f"{p}: field {key!r} must be a list of strings, got {_show(v)}")
    if "name" in obj and obj["name"] is not None and not isinstance(obj["name"], str):
        raise InputError(f"{p}: field 'name' must be a string, got {_show(obj['name'])}")
    fields = {k: obj[k] for k in ("embeddings", "counts", "probs", "weights") + _OPTIONAL if k in obj}
    return _build(p, fields, sorted(obj))


def _build(p: str, fields: dict[str, Any], present: list[str]) -> NTPInstance:
    if "embeddings" not in fields:
        raise InputError(f"{p}: missing key 'embeddings' (found: {', '.join(present) or 'none'})")
    has_counts = fields.get("counts") is not None
    has_probs = fields.get("probs") is not None
    if has_counts and has_probs:
        raise InputError(f"{p}: has both 'counts' and 'probs'; give one of them")
    if not has_counts and not has_probs:
        raise InputError(
            f"{p}: missing key 'counts' (or 'probs', with optional 'weights') (found: {', '.join(present)})"
        )
    if has_counts and fields.get("weights") is not None:
        raise InputError(f"{p}: has 'weights' with 'counts'; weights come from the counts' row sums, drop one")
    names = {k: fields.get(k) for k in ("token_names", "context_names")}
    name = fields.get("name")
    name = os.path.splitext(os.path.basename(p))[0] if name is None else str(name)
    try:
        if has_counts:
            return NTPInstance.from_counts(fields["embeddings"], fields["counts"], name=name, **names)
        return NTPInstance.from_probs(fields["embeddings"], fields["probs"], fields.get("weights"), name=name, **names)
    except InputError as err:
        raise InputError(f"{p}: {err}") from None


def _from_npz_array(p: str, key: str, arr: np.ndarray) -> Any:
    kind = arr.dtype.kind
    if key == "name":
        if kind != "U" or arr.ndim != 0:
            raise InputError(f"{p}: field 'name' must be a 0-d string array, got dtype {arr.dtype} shape {arr.shape}")
        return str(arr[()])
    if key in ("token_names", "context_names"):
        if kind != "U" or arr.ndim != 1:
            raise InputError(f"{p}: field {key!r} must be a 1-d string array, got dtype {arr.dtype} shape {arr.shape}")
        return arr.tolist()
    if key in ("probs", "weights") and kind == "U":
        return arr.tolist()  # exact fraction strings
    if kind not in "iuf":
        raise InputError(f"{p}: field {key!r} has dtype {arr.dtype}, expected real numbers")
    return arr


def _reject_json_bools(p: str, key: str, value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, bool):
            raise InputError(f"{p}: field {key!r} holds the boolean {json.dumps(v)}, expected numbers")


def _check_readable(p: str) -> None:
    if not os.path.exists(p):
        raise InputError(f"{p}: no such file")
    if os.path.isdir(p):
        raise InputError(f"{p}: is a directory, not a file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: not readable (permission denied)")


# ---------------------------------------------------------------------------- writers
def _fraction_strings(rows: Any) -> list:
    if isinstance(rows, Fraction):
        return str(rows)  # type: ignore[return-value]
    return [_fraction_strings(r) for r in rows]


def _contents(instance: NTPInstance) -> dict[str, Any]:
    """The instance as plain Python / numpy values, exact (see the module docstring)."""
    if not isinstance(instance, NTPInstance):
        raise TypeError(f"instance: expected an NTPInstance, got {type(instance).__name__}")
    out: dict[str, Any] = {"embeddings": np.asarray(instance.embeddings, dtype=np.float64)}
    if instance.has_counts:
        out["counts"] = np.asarray(instance.counts, dtype=np.int64)
    else:
        if instance.probs_exact_from_floats:
            # floats were taken as the dyadic rationals they are: writing the same floats keeps them
            out["probs"] = np.array([[float(f) for f in row] for row in instance.exact_probs], dtype=np.float64)
        else:
            out["probs"] = _fraction_strings(instance.exact_probs)
        out["weights"] = _fraction_strings(instance.exact_weights)
    if instance.token_names is not None:
        out["token_names"] = list(instance.token_names)
    if instance.context_names is not None:
        out["context_names"] = list(instance.context_names)
    out["name"] = instance.name
    return out


def write_npz(instance: NTPInstance, path: str | os.PathLike) -> None:
    """Write an instance to ``path`` (used as given, no suffix added) as a compressed ``.npz``.

    Fraction strings and names are stored as unicode arrays, so the file loads with
    ``allow_pickle=False``. Note that numpy drops trailing NUL characters of stored strings.
    """
    arrays = {}
    for key, value in _contents(instance).items():
        if key in ("probs", "weights", "token_names", "context_names", "name") and not isinstance(value, np.ndarray):
            value = np.array(value, dtype=np.str_)
        arrays[key] = value
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def write_json(instance: NTPInstance, path: str | os.PathLike) -> None:
    """Write an instance to ``path`` as one JSON object (UTF-8)."""
    obj = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in _contents(instance).items()}
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
