"""Output files written once and whole: atomic files, staged directories, and the checks on an
output path that run *before* any computation.

Every writer goes through here: a reader never sees a half-written file, a failed command leaves
nothing behind, and a bad path is reported as :class:`~ntpcert.errors.InputError` (one line naming
the option and the path) before the work starts.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ntpcert.errors import InputError


def one_line(err: BaseException) -> str:
    """An exception's message folded onto one line (its type name when it has none)."""
    return " ".join(str(err).split()) or type(err).__name__


def read_input_bytes(path: str | os.PathLike, field: str) -> bytes:
    """The bytes of an input file; an :class:`~ntpcert.errors.InputError` naming ``field`` and the
    path when it is missing, a directory, or unreadable."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise InputError(f"{field}: {p!r} is a directory, not a file")
    try:
        with open(p, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise InputError(f"{field}: no such file {p!r}") from None
    except OSError as err:
        raise InputError(f"{field}: cannot read {p!r} ({one_line(err)})") from None


def check_output_file(path: str | os.PathLike, field: str) -> str:
    """Refuse an output *file* path that is a directory or whose directory does not exist.

    Parameters
    ----------
    path : str or path-like
    field : str
        The option or argument named in the message (``--out``, ``--csv``, ...).
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        raise InputError(f"{field}: {p!r} is a directory")
    parent = os.path.dirname(os.path.abspath(p)) or "."
    if not os.path.isdir(parent):
        raise InputError(f"{field}: directory {parent!r} does not exist")
    return p


def check_output_dir(path: str | os.PathLike, field: str) -> str:
    """Refuse an output *directory* path that is a file or whose parent does not exist
    (the directory itself is created when the outputs are moved in)."""
    p = os.fspath(path)
    if os.path.exists(p) and not os.path.isdir(p):
        raise InputError(f"{field}: {p!r} exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(p)) or "."
    if not os.path.isdir(parent):
        raise InputError(f"{field}: directory {parent!r} does not exist")
    return p


def atomic_write(path: str | os.PathLike, write: Callable[[Any], Any]) -> None:
    """Call ``write(fh)`` on a binary file handle for a temporary file next to ``path``, flush
    and fsync it, then :func:`os.replace` it over ``path``. On any failure the temporary file
    is removed and ``path`` is left as it was.

    Raises
    ------
    InputError
        When ``path`` is a directory, its directory does not exist, or it cannot be written.
    """
    p = check_output_file(path, os.fspath(path))
    directory = os.path.dirname(os.path.abspath(p))
    tmp = os.path.join(directory, f".{os.path.basename(p)}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as err:
        raise InputError(f"{p}: cannot write ({one_line(err)})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise InputError(f"{p}: cannot write ({one_line(err)})") from None
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def npy_bytes(array: Any) -> bytes:
    """The ``.npy`` file of ``array``, as bytes."""
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.asarray(array))
    return buf.getvalue()


def save_npy_atomic(path: str | os.PathLike, array: Any) -> None:
    """Write ``array`` as ``.npy`` to ``path`` atomically."""
    atomic_write_bytes(path, npy_bytes(array))


@contextmanager
def staged_directory(out: str | os.PathLike, field: str = "--out") -> Iterator[str]:
    """A fresh staging directory next to ``out``; on a clean exit every file in it is moved into
    ``out`` (created if missing), on an error nothing is. Either way the stage is removed.

    >>> with staged_directory("results") as stage:          # doctest: +SKIP
    ...     atomic_write_text(os.path.join(stage, "summary.json"), "{}")
    """
    o = check_output_dir(out, field)
    parent = os.path.dirname(os.path.abspath(o)) or "."
    try:
        stage = tempfile.mkdtemp(prefix=".ntpcert-", dir=parent)
    except OSError as err:
        raise InputError(f"{field}: cannot write in {parent!r} ({one_line(err)})") from None
    try:
        yield stage
        try:
            os.makedirs(o, exist_ok=True)
            for name in sorted(os.listdir(stage)):
                os.replace(os.path.join(stage, name), os.path.join(o, name))
        except OSError as err:
            raise InputError(f"{field}: cannot write to {o!r} ({one_line(err)})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_directory(out: str | os.PathLike, writers: dict[str, Callable[[str], None]], field: str = "--out") -> list[str]:
    """Call each ``writer(path)`` on ``stage/name`` inside :func:`staged_directory`; returns the
    names of the files moved into ``out``."""
    with staged_directory(out, field) as stage:
        for name, writer in writers.items():
            writer(os.path.join(stage, name))
        names = sorted(os.listdir(stage))
    return names


__all__ = [
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_dir",
    "check_output_file",
    "npy_bytes",
    "one_line",
    "read_input_bytes",
    "save_npy_atomic",
    "staged_directory",
    "write_directory",
]
