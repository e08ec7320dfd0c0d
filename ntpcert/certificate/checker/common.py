"""What every part of the checker shares: the refusal, and the short texts its reasons are made of."""

from __future__ import annotations

import math
from fractions import Fraction


class Invalid(Exception):
    """A failed check; its text is the one-line reason of the INVALID result."""


def need(cond: bool, why: str) -> None:
    """Refuse with ``why`` unless ``cond``."""
    if not cond:
        raise Invalid(why)


def list_text(xs: list) -> str:
    return repr(xs) if len(xs) <= 8 else f"[{', '.join(map(repr, xs[:8]))}, ...] ({len(xs)} entries)"


def num_text(f: Fraction | float) -> str:
    """``%.6g`` of an exact rational that may not fit a float."""
    try:
        return f"{float(f):.6g}"
    except OverflowError:
        return ">1e308" if f > 0 else "<-1e308"


def sqrt_text(Q: Fraction) -> str:
    try:
        return f"{math.sqrt(float(Q)):.6g}" if Q >= 0 else f"sqrt({num_text(Q)})"
    except OverflowError:
        return ">1e154"


def json_text(x: bool | None) -> str:
    return "null" if x is None else ("true" if x else "false")



__all__ = ["Invalid", "json_text", "list_text", "need", "num_text", "sqrt_text"]
