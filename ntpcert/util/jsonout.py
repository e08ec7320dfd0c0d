"""JSON output: numpy scalars and arrays as plain JSON values, one object a line."""

from __future__ import annotations

import json
from typing import Any


def json_default(o: Any) -> Any:
    """``default=`` hook of :func:`json.dumps` for numpy scalars and arrays."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """``obj`` as JSON text (numpy values converted), without a trailing newline."""
    return json.dumps(obj, default=json_default, indent=indent)


__all__ = ["dumps", "json_default"]
