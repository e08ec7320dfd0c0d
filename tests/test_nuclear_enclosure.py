"""The exact rational enclosure of L^mm (ntpcert.geometry.enclosure): on the geometry patterns of the tests,
lower <= L^mm <= upper exactly with relative width <= 1e-12, the float optimum inside, and both checkers
(``ntpcert verify`` and tools/ntpcert_check.py) accepting the file and refusing forged witnesses."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import numpy as np
import pytest

from ntpcert.certificate.checker import verify_certificate
from ntpcert.certificate.jsonio import loads
from ntpcert.geometry.enclosure import check_enclosure, nuclear_enclosure
from ntpcert.geometry.pattern import SupportPattern
from ntpcert.geometry.structured import solve_nuclear_structured
from tests.standalone import standalone
from tests.test_geometry import SADDLE_PATTERN, N_VARIED, random_mask, varied_mask

#: The target of issue 36 on the relative width (upper - lower) / upper.
WIDTH_TARGET = 1e-12

#: The masks of tests/test_geometry.py: its three fast random ones, the saddle pattern, the cvxpy one, and
#: the varied patterns of its slow agreement test.
MASKS = {"random0": random_mask(np.random.default_rng(0), 3, 4), "random1": random_mask(np.random.default_rng(1), 4, 6),
         "random2": random_mask(np.random.default_rng(2), 5, 5), "saddle": SADDLE_PATTERN,
         "random7": random_mask(np.random.default_rng(7), 6, 9)}
MASKS.update({f"varied{s}": varied_mask(s) for s in range(N_VARIED)})


def _enclose(S: np.ndarray):
    pattern = SupportPattern.from_mask(S)
    sol = solve_nuclear_structured(pattern, gap_tol=1e-15)
    return pattern, sol, nuclear_enclosure(pattern, sol.L, sol.dual)


def _both(record: dict) -> tuple[bool, str, bool, str]:
    text = json.dumps(record)
    res = verify_certificate(loads(text))
    ok, line = standalone(text)
    return res.valid, res.reason, ok, line


@pytest.mark.parametrize("name", sorted(MASKS))
def test_enclosure_is_tight_and_holds_the_float_optimum(name: str) -> None:
    pattern, sol, enc = _enclose(MASKS[name])
    assert enc.lower <= enc.upper
    assert enc.relative_width <= WIDTH_TARGET, (name, enc.relative_width)
    # the float pair brackets L^mm too (up to its rounding): both ends agree with it
    assert enc.lower <= Fraction(sol.objective) * (1 + Fraction(1, 10**13))
    assert Fraction(sol.dual_objective) <= enc.upper * (1 + Fraction(1, 10**13))
    ok, why = check_enclosure(pattern, enc.to_json())
    assert ok, why


def test_both_checkers_accept_the_enclosure_file() -> None:
    pattern, _, enc = _enclose(MASKS["saddle"])
    v_ok, v_why, s_ok, s_line = _both(enc.to_json())
    assert v_ok, v_why
    assert s_ok and "nuclear enclosure" in s_line, s_line
    other = SupportPattern.from_mask(MASKS["random2"])
    ok, why = check_enclosure(other, enc.to_json())  # a record is a proof for its own pattern only
    assert not ok and "mask" in why


def _forged(record: dict, how: str) -> dict:
    rec = copy.deepcopy(record)
    S = np.array(rec["mask"], dtype=bool)
    if how == "A_not_psd":  # a negative diagonal entry: A is not positive definite
        rec["A"][0][0] = "-1"
    elif how == "Lambda_norm":  # Lambda doubled: still sign- and sum-feasible, but ||Lambda||_2 > 1
        rec["Lambda"] = [[str(2 * Fraction(x)) for x in row] for row in rec["Lambda"]]
        rec["lower"] = str(2 * Fraction(rec["lower"]))
    elif how == "margin":  # one off-support logit raised to its level: margin 0
        v, j = map(int, np.argwhere(~S)[0])
        z = int(np.flatnonzero(S[:, j])[0])
        rec["L"][v][j] = rec["L"][z][j]
    elif how == "upper_low":  # the upper end below the proved bound
        rec["upper"] = str(Fraction(rec["upper"]) * Fraction(999, 1000))
    elif how == "lower_high":
        rec["lower"] = str(Fraction(rec["lower"]) * Fraction(1001, 1000))
    return rec


@pytest.mark.parametrize("how,word", [("A_not_psd", "A"), ("Lambda_norm", "Lambda"), ("margin", "margin"),
                                      ("upper_low", "upper"), ("lower_high", "lower")])
def test_forged_witnesses_are_refused_by_both_checkers(how: str, word: str) -> None:
    pattern, _, enc = _enclose(MASKS["random1"])
    rec = _forged(enc.to_json(), how)
    v_ok, v_why, s_ok, s_line = _both(rec)
    assert not v_ok and word in v_why, v_why
    assert not s_ok and word in s_line, s_line
    ok, why = check_enclosure(pattern, rec)
    assert not ok and word in why


def test_the_dual_is_scaled_just_inside_the_unit_ball() -> None:
    """The solver's Lambda has spectral norm 1 up to rounding; the enclosure's is below 1 by a slack of at most
    1e-13 (so the scaling costs little of the width)."""
    _, sol, enc = _enclose(MASKS["random7"])
    Lam = np.array([[float(x) for x in row] for row in enc.Lam])
    assert np.linalg.norm(Lam, 2) < 1.0
    assert 0 < enc.norm_slack <= 1e-13
    assert enc.lower > 0 and enc.upper > enc.lower


def test_geometry_writes_the_enclosure_and_verify_reads_it(tmp_path, capsys):
    import json

    from ntpcert.cli import main

    out = tmp_path / "enc.json"
    assert main(["geometry", "paper", "--gap-tol", "1e-15", "--enclosure-out", str(out), "--json"]) == 0
    enc = json.loads(capsys.readouterr().out)["enclosure"]
    assert enc["lower"] <= enc["upper"] and enc["relative_width"] <= 1e-12 and enc["file"] == str(out)
    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("VALID") and "the support pattern it holds" in text
    assert main(["geometry", "paper", "--enclosure-out", str(out)]) == 2  # no overwrite without --force
    assert "--enclosure-out" in capsys.readouterr().err
