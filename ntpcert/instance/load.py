"""Reading and writing instances: one entry point, :func:`load_instance`, for every DATA argument.

A DATA spec is a built-in dataset name (``paper``, ``dyck``, ``pydoc``; see :mod:`ntpcert.instance.datasets`),
an instance file (``.npz`` or ``.json``, see :mod:`ntpcert.instance.io.arrays`) or a UTF-8 text file,
which goes through the corpus pipeline of :mod:`ntpcert.instance.io.corpus`.

A table (a file named ``*.csv`` or ``*.tsv``) is not read as text unless a tokenizer is given
explicitly: its characters would make a meaningless corpus. A text that is empty or only
whitespace is refused.
"""

from __future__ import annotations

import os

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.io.arrays import read_json, read_npz
from ntpcert.instance.embeddings import MAX_ENTRIES
from ntpcert.instance.io.corpus import TOKENIZERS, instance_from_text
from ntpcert.util.files import read_input_bytes
from ntpcert.util.validate import check_int

__all__ = ["TABLE_SUFFIXES", "load_instance"]

#: Files with these suffixes are tables, not text: DATA refuses them unless a tokenizer is given.
TABLE_SUFFIXES = (".csv", ".tsv")


def load_instance(
    spec: str | os.PathLike,
    *,
    tokenizer: str | None = None,
    context_length: int | None = None,
    all_prefixes: bool = False,
    embedding: str | None = None,
    seed: int = 0,
    max_chars: int | None = None,
    max_entries: int | None = None,
    progress: bool = False,
) -> NTPInstance:
    """Load an instance from a DATA spec.

    Resolution order: an existing file is read by its suffix (``.npz`` → :func:`read_npz`,
    ``.json`` → :func:`read_json`, anything else as UTF-8 text through the corpus pipeline);
    otherwise a built-in name builds that dataset.

    Parameters
    ----------
    spec : str or path-like
        A file path or a built-in dataset name.
    tokenizer : {"char", "word", "whitespace"}, optional
        Text files and ``pydoc``; default ``char``.
    context_length : int, optional
        k, the number of previous tokens in a context; text files (default 2), ``dyck``
        (default 4) and ``pydoc`` (default 2).
    all_prefixes : bool
        Also use the shorter histories (lengths 1..k-1) as contexts (text, ``dyck``, ``pydoc``).
    embedding : str, optional
        An embedding spec (``onehot-context``, ``onehot-concat``, ``random:D``, ``PATH.npy``);
        text, ``dyck`` and ``pydoc``; default ``onehot-concat``.
    seed : int
        Seed of the dataset's random generator (built-ins and random embeddings).
    max_chars : int, optional
        Use only the first ``max_chars`` characters of a text file or of ``pydoc`` (whose
        default cap is 20,000).
    max_entries : int, optional
        Text files and built-ins: refuse, before allocating, counts (m·V) or embeddings (m·d) of
        more than this many entries (default :data:`~ntpcert.instance.embeddings.MAX_ENTRIES`). An
        instance file is read as it is (it holds its matrices already); the limit does not apply.
    progress : bool
        Progress bar on stderr while counting long texts.

    Raises
    ------
    InputError
        For a missing file that is not a built-in name, an unreadable or invalid file, an option
        that is invalid or does not apply to the DATA given; the message names the option (or
        the file) and the value.
    """
    from ntpcert.instance.datasets import BUILTINS, builtin_options, load_builtin
    from ntpcert.instance.io.corpus import make_rng

    if not isinstance(spec, (str, os.PathLike)):
        raise InputError(f"DATA: expected a file path or a built-in name, got {spec!r}")
    path = os.fspath(spec)
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise InputError(f"tokenizer: unknown value {tokenizer!r} (expected one of {', '.join(TOKENIZERS)})")
    check_int("context_length", context_length, minimum=1, optional=True)
    if embedding is not None:
        from ntpcert.instance.embeddings import parse_embedding_spec

        parse_embedding_spec(embedding)
    check_int("max_chars", max_chars, minimum=2, optional=True)
    check_int("max_entries", max_entries, minimum=1, optional=True)
    make_rng(seed)  # validates the seed

    # options given explicitly, under the names the caller used
    given = {
        "tokenizer": tokenizer,
        "context_length": context_length,
        "all_prefixes": True if all_prefixes else None,
        "embedding": embedding,
        "max_chars": max_chars,
    }
    given = {k: v for k, v in given.items() if v is not None}

    if os.path.isfile(path):
        lower = path.lower()
        if lower.endswith(".npz") or lower.endswith(".json"):
            if given:
                key, value = next(iter(given.items()))
                raise InputError(
                    f"{key}: value {value!r} applies to text corpora and built-ins, not to the instance file {path!r}"
                )
            return read_npz(path) if lower.endswith(".npz") else read_json(path)
        if lower.endswith(TABLE_SUFFIXES) and tokenizer is None:
            raise InputError(
                f"DATA: {path!r} looks like a table ({os.path.splitext(path)[1]}), not an instance; give an .npz/.json "
                "instance file, or --tokenizer char|word to read it as text"
            )
        return _load_text(path, tokenizer, context_length, all_prefixes, embedding, seed, max_chars,
                          MAX_ENTRIES if max_entries is None else max_entries, progress)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"DATA: {path!r} is not a regular file")
    if path in BUILTINS:
        accepted = builtin_options(path)
        ours = ("tokenizer", "context_length", "all_prefixes", "embedding", "seed", "max_chars")
        applicable = [o for o in ours if _BUILTIN_NAMES.get(o, o) in accepted]
        options: dict[str, object] = {}
        for key, value in given.items():
            if key not in applicable:
                raise InputError(
                    f"{key}: does not apply to built-in dataset {path!r} (options it takes: {', '.join(applicable)})"
                )
            options[_BUILTIN_NAMES.get(key, key)] = value
        options["seed"] = seed
        if max_entries is not None and "max_entries" in accepted:
            options["max_entries"] = max_entries
        if progress and "progress" in accepted:
            options["progress"] = True
        return load_builtin(path, **options)
    if os.path.isdir(path):
        raise InputError(f"DATA: {path!r} is a directory, not a file or built-in dataset")
    raise InputError(f"DATA: no such file or built-in dataset {path!r} (built-ins: {', '.join(BUILTINS)})")


#: load_instance option → the built-in generators' keyword for it
_BUILTIN_NAMES = {"context_length": "k"}


def _load_text(path, tokenizer, context_length, all_prefixes, embedding, seed, max_chars, max_entries,
               progress) -> NTPInstance:
    raw = read_input_bytes(path, "DATA")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"DATA: {path!r} is neither .npz/.json nor UTF-8 text (byte {err.start}: {err.reason})"
        ) from None
    if max_chars is not None:
        text = text[:max_chars]
    if not text.strip():
        what = "empty" if not text else "only whitespace"
        raise InputError(f"DATA: {path!r} is {what}{' in its first --max-chars characters' if max_chars and text else ''}; "
                         "a text corpus needs some text")
    name = os.path.splitext(os.path.basename(path))[0] or "corpus"
    try:
        return instance_from_text(
            text,
            tokenizer=tokenizer or "char",
            k=2 if context_length is None else context_length,
            all_prefixes=all_prefixes,
            embedding=embedding or "onehot-concat",
            seed=seed,
            progress=progress,
            name=name,
            max_entries=max_entries,
        )
    except InputError as err:
        raise InputError(f"{path}: {err}") from None
