"""``compare --W FILE``: every decoder that is not a finite real (V, d) matrix of a safe size is one line
naming the field and the value, exit 2, nothing written; and ``--json`` never prints NaN or Infinity."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.cli.app import main
from ntpcert.instance.io import write_json

from tests.test_bad_inputs import _snapshot


def _bad_decoders() -> dict[str, tuple[np.ndarray, bool, tuple[str, ...]]]:
    """name: (array, allow_pickle, the words the one line must contain)."""
    nan, inf, big = (np.zeros((3, 2)) for _ in range(3))
    nan[1, 1] = np.nan
    inf[2, 0] = -np.inf
    big[0, 1] = 1e308
    return {
        "strings": (np.array([["1", "2"], ["3", "4"], ["5", "6"]]), False, ("--W", "'strings.npy'", "<U1")),
        "objects": (np.array([[1.0, 2.0], [3.0, None], [5.0, 6.0]], dtype=object), True,
                    ("--W", "'objects.npy'", "Object arrays")),
        "complex": (np.full((3, 2), 1 + 2j), False, ("--W", "'complex.npy'", "complex128")),
        "booleans": (np.ones((3, 2), dtype=bool), False, ("--W", "'booleans.npy'", "bool")),
        "wrong-shape": (np.zeros((2, 2)), False, ("W", "shape (V, d) = (3, 2)", "(2, 2)")),
        "three-d": (np.zeros((3, 2, 1)), False, ("--W", "'three-d.npy'", "(3, 2, 1)")),
        "nan": (nan, False, ("--W", "'nan.npy'", "entry [1, 1] is nan")),
        "inf": (inf, False, ("--W", "'inf.npy'", "entry [2, 0] is -inf")),
        "1e308": (big, False, ("--W", "entry [0, 1] = 1e+308", "too large")),
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-inputs")
    write_json(NTPInstance.from_counts(np.eye(2), [[3, 1, 0], [0, 2, 2]]), root / "D.json")
    write_json(NTPInstance.from_counts(np.array([[1.0, 0.0], [2.0, 0.0]]), [[1, 1, 0], [0, 1, 1]]), root / "N.json")
    for name, (W, pickle, _) in _bad_decoders().items():
        np.save(root / f"{name}.npy", W, allow_pickle=pickle)
    np.save(root / "W32.npy", np.arange(6.0).reshape(3, 2))
    (root / "snaps").mkdir()
    np.save(root / "snaps" / "W_1.npy", np.arange(6.0).reshape(3, 2))
    np.save(root / "snaps" / "W_2.npy", _bad_decoders()["1e308"][0])
    return root


@pytest.mark.parametrize("name", list(_bad_decoders()))
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_a_bad_decoder_is_one_line_exit_2_and_writes_nothing(name, json_flag, inputs, tmp_path, monkeypatch, capsys):
    root = tmp_path / "cwd"
    shutil.copytree(inputs, root)
    monkeypatch.chdir(root)
    before = _snapshot(root)
    code = main(["compare", "D.json", "--W", f"{name}.npy", "--figure", "fig.png", *json_flag])
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for word in _bad_decoders()[name][2]:
        assert word in lines[0], (word, lines[0])
    assert out == "" and _snapshot(root) == before


def test_a_snapshot_too_large_is_named_by_its_file(inputs, tmp_path, monkeypatch, capsys):
    root = tmp_path / "cwd"
    shutil.copytree(inputs, root)
    monkeypatch.chdir(root)
    before = _snapshot(root)
    code = main(["compare", "D.json", "--W", "snaps", "--table", "t.csv", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "W_2.npy" in err and "1e+308" in err
    assert out == "" and _snapshot(root) == before


def _strict(text: str):
    def refuse(const):
        raise AssertionError(f"{const} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def test_json_never_holds_nan_and_says_why_a_number_is_null(inputs, monkeypatch, capsys):
    """N.json is not separable (both contexts on one ray, supports {0, 1} and {1, 2}): no W^mm, so the
    W^mm numbers are NaN in the library and null, with the reason, in the JSON."""
    monkeypatch.chdir(inputs)
    assert main(["compare", "N.json", "--W", "W32.npy", "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["separable"] is False
    for key in ("cos_perp_mm", "cos_mm", "norm_matched_distance", "margin_ratio"):
        assert out[key] is None and key in out["notes"]["null"]
    assert "no W^mm" in out["notes"]["null"]
    assert all(b["cos_perp_mm"] is None for b in out["bins"])
    assert main(["compare", "N.json", "--W", "W32.npy"]) == 0  # the text output keeps printing nan
    assert "nan" in capsys.readouterr().out


def test_finite_json_maps_every_non_finite_number_to_null():
    from ntpcert.dynamics.compare import finite_json
    from ntpcert.util.jsonout import json_default

    obj = {"a": float("nan"), "b": [1.0, float("inf"), {"c": np.float64(-np.inf)}], "d": (np.float32(2.0), 3)}
    text = json.dumps(finite_json(obj), default=json_default, allow_nan=False)
    assert text == '{"a": null, "b": [1.0, null, {"c": null}], "d": [2.0, 3]}'
