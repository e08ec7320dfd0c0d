"""Built-in datasets, each a function of keyword options returning an :class:`~ntpcert.NTPInstance`.

``BUILTINS`` maps a name to ``(function, one-line description)``; :func:`load_builtin` calls one
by name. Every generator takes ``seed`` (an int) or ``rng`` (a :class:`numpy.random.Generator`).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.datasets.dyck import dyck as dyck
from ntpcert.instance.datasets.paper import paper as paper
from ntpcert.instance.datasets.pydoc_corpus import pydoc as pydoc

__all__ = ["BUILTINS", "load_builtin", "builtin_options", "paper", "dyck", "pydoc"]

BUILTINS: dict[str, tuple[Callable[..., NTPInstance], str]] = {
    "paper": (paper, "the paper's synthetic setting: m=50, d=60, V=10, every k_j=6, n=5000, Gaussian embeddings"),
    "dyck": (dyck, "balanced brackets (2 types, depth <= 3), 4-token contexts, one-hot k-gram embeddings"),
    "pydoc": (pydoc, "English text of Python's pydoc topics (first 20,000 chars), char 2-grams, one-hot embeddings"),
}


def builtin_options(name: str) -> tuple[str, ...]:
    """The keyword options the built-in ``name`` accepts."""
    func = _lookup(name)[0]
    return tuple(p.name for p in inspect.signature(func).parameters.values() if p.kind is p.KEYWORD_ONLY)


def load_builtin(name: str, **options: Any) -> NTPInstance:
    """Build the built-in dataset ``name`` with keyword ``options``.

    Raises
    ------
    InputError
        For an unknown name (the message lists the known ones) or an option the dataset does
        not take (the message lists the ones it does).
    """
    func, _ = _lookup(name)
    known = builtin_options(name)
    for key in options:
        if key not in known:
            raise InputError(f"{key}: not an option of built-in dataset {name!r} (options: {', '.join(known)})")
    return func(**options)


def _lookup(name: str) -> tuple[Callable[..., NTPInstance], str]:
    try:
        return BUILTINS[name]
    except (KeyError, TypeError):
        raise InputError(f"DATA: unknown built-in dataset {name!r} (built-ins: {', '.join(BUILTINS)})") from None
