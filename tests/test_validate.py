"""The one validation vocabulary (ntpcert.util.validate): every refusal is one InputError line naming the
argument and the value."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.errors import InputError
from ntpcert.util.validate import check_bool, check_choice, check_int, check_number

REFUSED = [
    (check_int, ("steps", True), {"minimum": 0}, "steps: value True is not a non-negative integer"),
    (check_int, ("steps", -1), {"minimum": 0}, "steps: value -1 is not a non-negative integer"),
    (check_int, ("k", 1.0), {"minimum": 1}, "k: value 1.0 is not a positive integer"),
    (check_int, ("low", 2), {"minimum": 3}, "low: value 2 is not an integer ≥ 3"),
    (check_int, ("bits", 99), {"minimum": 1, "maximum": 64}, "bits: value 99 is not an integer in 1..64"),
    (check_int, ("n", None), {}, "n: value None is not an integer"),
    (check_number, ("tol", 0.0), {"minimum": 0, "exclusive_minimum": True}, "tol: value 0.0 is not a positive number"),
    (check_number, ("tol", float("nan")), {"minimum": 0}, "tol: value nan is not a non-negative number"),
    (check_number, ("lr", True), {}, "lr: value True is not a finite number"),
    (check_number, ("x", "1"), {}, "x: value '1' is not a finite number"),
    (check_number, ("x", 2.0), {"minimum": 0, "maximum": 1}, "x: value 2.0 is not a finite number ≥ 0 and ≤ 1"),
    (check_number, ("x", 0.5), {"minimum": 1, "exclusive_minimum": True}, "x: value 0.5 is not a finite number > 1"),
    (check_choice, ("solver", "nope", ("auto", "clarabel")), {}, "solver: unknown value 'nope' (expected one of auto, clarabel)"),
    (check_choice, ("solver", ["auto"], ("auto",)), {}, "solver: unknown value ['auto'] (expected one of auto)"),
    (check_bool, ("exact", 1), {}, "exact: value 1 is not true or false"),
    (check_bool, ("exact", np.True_), {}, "exact: value np.True_ is not true or false"),
]


@pytest.mark.parametrize("check,args,kwargs,message", REFUSED, ids=[r[3].split(":")[0] + str(i) for i, r in enumerate(REFUSED)])
def test_invalid_values_are_one_line_naming_argument_and_value(check, args, kwargs, message) -> None:
    with pytest.raises(InputError) as err:
        check(*args, **kwargs)
    assert str(err.value) == message


def test_valid_values_come_back_in_plain_types() -> None:
    assert check_int("k", np.int64(3), minimum=1) == 3 and type(check_int("k", np.int64(3))) is int
    assert check_int("k", None, optional=True) is None
    assert check_number("tol", np.float32(0.5), minimum=0) == 0.5 and type(check_number("tol", 1)) is float
    assert check_number("t", None, optional=True) is None
    assert check_choice("solver", "auto", ("auto", "clarabel")) == "auto"
    assert check_bool("exact", False) is False
