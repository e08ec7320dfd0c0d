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
from typing import Any, Callable, Iterable, Iterator

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


def _writable_dir(path: str) -> bool:
    """Whether files can be created in the directory ``path`` (write and search permission)."""
    return os.access(path, os.W_OK | os.X_OK)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _refuse_inputs(p: str, field: str, inputs: Iterable[str | os.PathLike | None]) -> None:
    for inp in inputs:
        if inp is None:
            continue
        q = os.fspath(inp)
        same = _same_file(p, q) if os.path.exists(q) and os.path.exists(p) else os.path.realpath(p) == os.path.realpath(q)
        if same:
            raise InputError(f"{field}: {p!r} is an input of this command ({q!r}); choose another output path")


def check_output_file(
    path: str | os.PathLike,
    field: str,
    *,
    overwrite: bool = True,
    inputs: Iterable[str | os.PathLike | None] = (),
) -> str:
    """Refuse an output *file* path before any work: a directory, a missing or unwritable
    directory, one of ``inputs`` (the same file, after symlinks), or, unless ``overwrite``, an
    existing file.

    Parameters
    ----------
    path : str or path-like
    field : str
        The option or argument named in the message (``--out``, ``--csv``, ...).
    overwrite : bool
        Whether an existing file may be replaced (the command line passes ``--force``).
    inputs : iterable of paths
        Files the command reads; an output that is one of them is refused even with ``overwrite``.
    """
    p = os.fspath(path)
    if not p:
        raise InputError(f"{field}: empty path")
    if os.path.isdir(p):
        raise InputError(f"{field}: {p!r} is a directory")
    parent = os.path.dirname(os.path.abspath(p)) or "."
    if not os.path.isdir(parent):
        raise InputError(f"{field}: directory {parent!r} does not exist")
    if not _writable_dir(parent):
        raise InputError(f"{field}: cannot write in directory {parent!r} (permission denied)")
    _refuse_inputs(p, field, inputs)
    if os.path.lexists(p):
        if not os.path.isfile(p):
            raise InputError(f"{field}: {p!r} exists and is not a regular file")
        if not overwrite:
            raise InputError(f"{field}: {p!r} exists; give --force to replace it")
    return p


def check_output_dir(
    path: str | os.PathLike,
    field: str,
    *,
    names: Iterable[str] = (),
    overwrite: bool = True,
    inputs: Iterable[str | os.PathLike | None] = (),
) -> str:
    """Refuse an output *directory* path before any work: a file, a directory that exists but
    cannot be written, a parent that is missing or cannot be written (when the directory is to be
    created), one of ``names`` inside it that is an input, or, unless ``overwrite``, one of
    ``names`` (the files the command would write) that exists already.

    The directory itself is created when the outputs are moved in (see :func:`staged_directory`).
    """
    p = os.fspath(path)
    if not p:
        raise InputError(f"{field}: empty path")
    if os.path.lexists(p) and not os.path.isdir(p):
        raise InputError(f"{field}: {p!r} exists and is not a directory")
    if os.path.isdir(p):
        if not _writable_dir(p):
            raise InputError(f"{field}: cannot write in directory {p!r} (permission denied)")
        names = list(names)
        inputs = list(inputs)
        for name in names:
            _refuse_inputs(os.path.join(p, name), field, inputs)
        if not overwrite:
            clash = [n for n in names if os.path.lexists(os.path.join(p, n))]
            if clash:
                shown = ", ".join(clash[:4]) + (f" and {len(clash) - 4} more" if len(clash) > 4 else "")
                raise InputError(f"{field}: {p!r} already holds {shown}; give --force to replace "
                                 f"{'it' if len(clash) == 1 else 'them'}")
        return p
    parent = os.path.dirname(os.path.abspath(p)) or "."
    if not os.path.isdir(parent):
        raise InputError(f"{field}: directory {parent!r} does not exist")
    if not _writable_dir(parent):
        raise InputError(f"{field}: cannot create {p!r} in directory {parent!r} (permission denied)")
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
    """A fresh staging directory for ``out``; on a clean exit every entry in it is moved into
    ``out``, on an error (or an interrupt) nothing is. Either way the stage is removed.

    When ``out`` exists the stage is a hidden directory inside it and each file is moved in with
    :func:`os.replace` (subdirectories are merged file by file); when it does not, the stage is a
    hidden directory next to it and becomes ``out`` by one rename. Check ``out`` with
    :func:`check_output_dir` before the work starts: this function replaces what it moves over.

    >>> with staged_directory("results") as stage:          # doctest: +SKIP
    ...     atomic_write_text(os.path.join(stage, "summary.json"), "{}")
    """
    o = check_output_dir(out, field)
    exists = os.path.isdir(o)
    where = o if exists else (os.path.dirname(os.path.abspath(o)) or ".")
    try:
        stage = tempfile.mkdtemp(prefix=".ntpcert-stage-", dir=where)
    except OSError as err:
        raise InputError(f"{field}: cannot write in {where!r} ({one_line(err)})") from None
    try:
        yield stage
        try:
            if exists or os.path.lexists(o):
                _merge_into(stage, o)
            else:
                os.chmod(stage, 0o777 & ~_umask())
                os.rename(stage, o)
        except OSError as err:
            raise InputError(f"{field}: cannot write to {o!r} ({one_line(err)})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _merge_into(src: str, dst: str) -> None:
    """Move every entry of directory ``src`` into directory ``dst``: files replace files of the
    same name, subdirectories are merged."""
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s) and not os.path.islink(s) and os.path.isdir(d):
            _merge_into(s, d)
        else:
            if os.path.isdir(s) and not os.path.islink(s):
                os.chmod(s, 0o777 & ~_umask())
            os.replace(s, d)


def write_directory(out: str | os.PathLike, writers: dict[str, Callable[[str], None]], field: str = "--out") -> list[str]:
    """Call each ``writer(path)`` on ``stage/name`` inside :func:`staged_directory`; returns the
    names of the files moved into ``out``."""
    with staged_directory(out, field) as stage:
        for name, writer in writers.items():
            writer(os.path.join(stage, name))
        names = sorted(os.listdir(stage))
    return names


def text_writer(text: str) -> Callable[[str], None]:
    """A writer for :func:`write_directory`: ``text`` into the file, UTF-8."""
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)

    return write


def npy_writer(array: Any) -> Callable[[str], None]:
    """A writer for :func:`write_directory`: ``array`` as ``.npy``."""
    def write(path: str) -> None:
        import numpy as np

        np.save(path, np.asarray(array))

    return write


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
    "npy_writer",
    "text_writer",
    "write_directory",
]
