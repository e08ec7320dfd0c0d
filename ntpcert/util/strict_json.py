"""One strict JSON reader for every file ntpcert reads (certificates and data files).

It refuses, with one line that names the field:

* a key repeated in one object (two readers could see two different files);
* the constants ``NaN``, ``Infinity``, ``-Infinity`` and a number literal that overflows to infinity;
* an integer literal of more than ``max_int_digits`` digits (Python's default int-string limit, applied
  whatever the interpreter's own setting, so that the answer does not depend on what else was imported).

A refused value is parsed into a marker first and reported after parsing with its path
(``embeddings[0][1]``), so the message names where it is; a file without one is not walked again.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

#: Python's default int-string conversion limit (digits).
DEFAULT_MAX_INT_DIGITS = 4300


class StrictJSONError(ValueError):
    """A JSON text that the strict reader refuses; ``str(err)`` is the one-line reason."""


class _Refused:
    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _find(obj: Any, path: str) -> tuple[str, str] | None:
    """``(path, why)`` of the first refused value in ``obj``, depth first; None when there is none."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, _Refused):
            return p, v.why
        if isinstance(v, dict):
            stack.extend((x, f"{p}.{k}" if p else str(k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, f"{p}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def strict_loads(text: str, *, max_int_digits: int = DEFAULT_MAX_INT_DIGITS, cap_note: str = "") -> Any:
    """Parse ``text`` as JSON, strictly (module doc); ``cap_note`` follows the integer-cap message.

    When the interpreter's own int-string limit is set and at most ``max_int_digits``, it refuses every
    literal the cap refuses (a ValueError): the text is read without a hook on each integer, and read
    again with it only on such a refusal, so that the refusal is named as it would have been.

    Raises
    ------
    StrictJSONError
        For a refused construct, naming the field (``"embeddings[0][1]: the JSON constant NaN ..."``,
        ``"duplicate key 'counts' in a JSON object ..."``).
    json.JSONDecodeError, RecursionError
        For text that is not JSON at all (the caller words those).
    """
    refused = []

    def unique(pairs: list[tuple[str, Any]]) -> dict:
        obj: dict = {}
        for key, value in pairs:
            if key in obj:
                raise StrictJSONError(f"duplicate key {_short(key)} in a JSON object: a reader could see either value")
            obj[key] = value
        return obj

    def constant(name: str) -> _Refused:
        refused.append(True)
        return _Refused(f"the JSON constant {name} is not allowed: every number must be finite")

    def finite(text: str) -> float | _Refused:
        x = float(text)
        if math.isfinite(x):
            return x
        refused.append(True)
        return _Refused(f"the number {_short(text)} overflows to infinity")

    def bounded(text: str) -> int | _Refused:
        digits = len(text) - (text[:1] == "-")
        if digits > max_int_digits:
            refused.append(True)
            return _Refused(f"an integer literal of {digits} digits exceeds the cap of {max_int_digits}{cap_note}")
        try:
            return int(text)
        except ValueError:  # a lower sys.set_int_max_str_digits
            refused.append(True)
            return _Refused(f"an integer literal of {digits} digits exceeds this interpreter's int-string limit")

    def parse(parse_int):
        return json.loads(text, object_pairs_hook=unique, parse_constant=constant, parse_float=finite,
                          parse_int=parse_int)

    if 0 < sys.get_int_max_str_digits() <= max_int_digits:
        try:
            obj = parse(None)
        except ValueError as err:
            if isinstance(err, (json.JSONDecodeError, StrictJSONError)):
                raise
            refused.clear()
            obj = parse(bounded)
    else:
        obj = parse(bounded)
    if refused:
        found = _find(obj, "")
        if found is not None:
            path, why = found
            raise StrictJSONError(f"{path or 'the top level'}: {why}")
    return obj


__all__ = ["DEFAULT_MAX_INT_DIGITS", "StrictJSONError", "strict_loads"]
