"""Contexts and tokens as people read them: their names when the instance has them (a corpus' contexts
are the k preceding tokens, escaped), else ``context j`` / ``token v``."""

from __future__ import annotations

from ntpcert.instance import NTPInstance


def context_text(instance: NTPInstance, j: int) -> str:
    """The name of context ``j``, or ``#j`` when the instance has no names."""
    names = instance.context_names
    return names[int(j)] if names is not None else f"#{int(j)}"


def token_text(instance: NTPInstance, v: int) -> str:
    """The name of token ``v``, or ``#v`` when the instance has no names."""
    names = instance.token_names
    return names[int(v)] if names is not None else f"#{int(v)}"


def quoted(text: str) -> str:
    """``text`` between double quotes (names are already escaped: a newline reads ``\\n``)."""
    return '"' + text + '"'


__all__ = ["context_text", "quoted", "token_text"]
