"""A short ``__str__`` for result dataclasses, so that ``print(report)`` shows a few lines, not kilobytes.

The dataclass ``repr`` of a report holds every array and nested result in full. :func:`short_str`
writes the class name and its fields, with arrays as their shapes, instances by name and size,
nested results by class name (and ``holds`` for a verdict), containers by length and long text cut; set it as the class's
``__str__`` (``__str__ = short_str``), leaving ``repr`` complete for debugging.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: Characters of one field's text before it is cut, and of the whole summary line before wrapping.
FIELD_CHARS = 60
LINE_CHARS = 100


def _brief(v: Any) -> str:
    if v is None or isinstance(v, (bool, int)):
        return repr(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    shape = getattr(v, "shape", None)
    if isinstance(shape, tuple):
        return f"{type(v).__name__}({'x'.join(map(str, shape))})"
    if all(hasattr(v, a) for a in ("m", "d", "V", "name")):
        return f"{v.name!r} (m={v.m}, d={v.d}, V={v.V})"
    if isinstance(v, str):
        return repr(v if len(v) <= FIELD_CHARS else v[: FIELD_CHARS - 3] + "...")
    if isinstance(v, (list, tuple, set, frozenset, dict)):
        return f"<{len(v)} {'entries' if isinstance(v, dict) else 'items'}>"
    if hasattr(v, "holds"):  # a verdict: say it
        return f"<{type(v).__name__} holds={getattr(v, 'holds')!r}>"
    return f"<{type(v).__name__}>"


def short_str(obj: Any) -> str:
    """``ClassName(field=value, ...)`` with every value in brief, wrapped at :data:`LINE_CHARS`.

    >>> import numpy as np
    >>> @dataclasses.dataclass
    ... class R:
    ...     W: np.ndarray
    ...     ok: bool
    ...     __str__ = short_str
    >>> print(R(np.zeros((3, 4)), True))
    R(W=ndarray(3x4), ok=True)
    """
    parts = [f"{f.name}={_brief(getattr(obj, f.name))}" for f in dataclasses.fields(obj) if f.repr]
    lines, line = [], f"{type(obj).__name__}("
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else ")")
        if len(line) + len(piece) > LINE_CHARS and line.strip():
            lines.append(line.rstrip())
            line = "    "
        line += piece
    lines.append(line if parts else line + ")")
    return "\n".join(lines)


__all__ = ["short_str"]
