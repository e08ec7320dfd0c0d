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
    (check_bool, ("exact", np.True_), {}, f"exact: value {np.True_!r} is not true or false"),
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


def _public_calls():
    """(call, the message's start): invalid calls of public functions, each refused in one line."""
    from ntpcert import load_instance, solve_svm
    from ntpcert.dynamics.trajectory import decade_steps, geometric_grid
    from ntpcert.instance.datasets.dyck import dyck
    from ntpcert.instance.datasets.paper import paper
    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from ntpcert.instance.datasets.teacher import teacher

    inst = paper(m=4, d=3, V=3, support_size=2, n=40)
    return [
        (lambda: geometric_grid(True), "steps: value True is not a non-negative integer"),
        (lambda: geometric_grid(10, per_decade=0), "per_decade: value 0 is not a positive integer"),
        (lambda: decade_steps(-3), "steps: value -3 is not a non-negative integer"),
        (lambda: paper(m=0), "m: value 0 is not a positive integer"),
        (lambda: dyck(k=1.5), "k (context length): value 1.5 is not a positive integer"),
        (lambda: teacher(V=True), "V: value True is not an integer"),
        (lambda: pydoc_text(1), "max_chars: value 1 is not an integer ≥ 2"),
        (lambda: load_instance("paper", max_entries=0), "max_entries: value 0 is not a positive integer"),
        (lambda: load_instance("pydoc", context_length=False), "context_length: value False is not a positive integer"),
        (lambda: solve_svm(inst, solver="structured", tol=0.0), "tol: value 0.0 is not a positive number"),
        (lambda: solve_svm(inst, solver="structured", time_limit=-1), "time_limit: value -1 is not a positive number"),
        (lambda: solve_svm(inst, solver="structured", max_epochs=True), "max_epochs: value True is not a positive integer"),
    ]


@pytest.mark.parametrize("index", range(12))
def test_public_functions_refuse_invalid_arguments_in_one_line(index) -> None:
    call, start = _public_calls()[index]
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value).startswith(start) and "\n" not in str(err.value), str(err.value)
