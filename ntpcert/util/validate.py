"""One vocabulary for checking arguments: each check raises :class:`~ntpcert.errors.InputError` with one
line that names the argument and its value, and returns the value in its plain Python type.

A boolean is never a number here (``True`` is not the integer 1 for ``steps``), and NumPy integers and
floats count as integers and numbers.

>>> check_int("steps", 10, minimum=0)
10
>>> check_int("steps", True, minimum=0)
Traceback (most recent call last):
...
ntpcert.errors.InputError: steps: value True is not a non-negative integer
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any, TypeVar

from ntpcert.errors import InputError

T = TypeVar("T")


def _int_words(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer in {minimum}..{maximum}"
    if minimum == 0:
        return "a non-negative integer"
    if minimum == 1:
        return "a positive integer"
    if minimum is not None:
        return f"an integer ≥ {minimum}"
    if maximum is not None:
        return f"an integer ≤ {maximum}"
    return "an integer"


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              optional: bool = False) -> int | None:
    """``value`` as an ``int`` when it is an integer (not a boolean) within [minimum, maximum];
    ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    if (isinstance(value, bool) or not isinstance(value, Integral)
            or (minimum is not None and value < minimum) or (maximum is not None and value > maximum)):
        raise InputError(f"{name}: value {value!r} is not {_int_words(minimum, maximum)}")
    return int(value)


def _number_words(minimum: float | None, maximum: float | None, exclusive: bool) -> str:
    if minimum == 0 and maximum is None:
        return "a positive number" if exclusive else "a non-negative number"
    low = f"{'>' if exclusive else '≥'} {minimum:g}" if minimum is not None else ""
    high = f"≤ {maximum:g}" if maximum is not None else ""
    return "a finite number" + (f" {low}" if low else "") + (" and" if low and high else "") + (f" {high}" if high else "")


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 exclusive_minimum: bool = False, optional: bool = False) -> float | None:
    """``value`` as a ``float`` when it is a finite real number (not a boolean) above ``minimum`` (strictly
    with ``exclusive_minimum``) and at most ``maximum``; ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    ok = not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if exclusive_minimum else value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if not ok:
        raise InputError(f"{name}: value {value!r} is not {_number_words(minimum, maximum, exclusive_minimum)}")
    return float(value)


def check_choice(name: str, value: Any, choices: Iterable[T]) -> T:
    """``value`` when it is one of ``choices``, type-exactly (``True`` is not the choice 1)."""
    options = tuple(choices)
    if not any(type(value) is type(c) and value == c for c in options):
        raise InputError(f"{name}: unknown value {value!r} (expected one of {', '.join(map(str, options))})")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` when it is ``True`` or ``False`` (not 0, 1 or a NumPy boolean array)."""
    if not isinstance(value, bool):
        raise InputError(f"{name}: value {value!r} is not true or false")
    return value
