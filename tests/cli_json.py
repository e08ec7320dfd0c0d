"""Helpers of the tests that run a command and read its JSON."""

from __future__ import annotations

import json

from ntpcert.cli import main


def run_json(capsys, argv: list[str]) -> dict:
    """``main(argv)`` must exit 0; its stdout, one JSON object."""
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def json_numbers(obj, path: str = "") -> dict:
    """Every leaf of a JSON value by its path (``.key`` and ``[i]``)."""
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in json_numbers(val, f"{path}.{key}").items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in json_numbers(val, f"{path}[{i}]").items()}
    return {path: obj}
