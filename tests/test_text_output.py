"""Text output for people: wrapped lines, huge exact values shown as normalised floats (exact in JSON),
names instead of indices, and short ``str()`` of reports."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

import ntpcert
from ntpcert import NTPInstance
from ntpcert.pipeline import pairs
from ntpcert.report.explain import Scale, sci
from ntpcert.report.text import wrap_lines


def test_wrap_lines_bound_the_width_and_keep_quoted_names_whole():
    line = "  relation: " + " ".join(f'+0.5 h(" it{i}")' for i in range(40))
    out = wrap_lines([line, "short"], width=80)
    assert out[-1] == "short" and len(out) > 3
    assert all(len(ln) <= 80 for ln in out)
    assert all(ln.startswith("      ") for ln in out[1:-1])  # continuations indented 4 past the line's indent
    assert " ".join(ln.strip() for ln in out[:-1]) == line.strip()  # nothing lost, no name split
    assert wrap_lines(["x" * 300], width=100) == ["x" * 100, "    " + "x" * 96, "    " + "x" * 96, "    " + "x" * 8]


def test_scale_shows_small_integers_exactly_and_huge_ones_divided_by_the_largest():
    small = Scale([Fraction(2), Fraction(-1)])
    assert small.exact and small.signed(Fraction(-1)) == "-1" and small.value(Fraction(2)) == "2"
    big = 7 * 10**600
    huge = Scale([Fraction(big), Fraction(-big // 2), Fraction(3)])
    assert not huge.exact
    assert huge.signed(Fraction(big)) == "+1" and huge.signed(Fraction(-big // 2)) == "-0.5"
    assert huge.top_text == "7e+600" and sci(Fraction(1, 800)) == "1.25e-3"


def test_pair_witness_names_its_tokens():
    rng = np.random.default_rng(0)
    m, d = 30, 3
    H = rng.standard_normal((m, d))
    C = np.zeros((m, 3), dtype=np.int64)
    C[:, 0] = rng.integers(1, 5, size=m)
    C[::2, 1] = rng.integers(1, 5, size=(m + 1) // 2)
    C[1::3, 2] = 1
    named = NTPInstance.from_counts(H, C, token_names=["e", "i", "x"])
    got = pairs.separability_witness(named)
    assert got is not None
    assert 'pair of tokens "e", "i" (0, 1)' in got[1]
    assert "pair of tokens (0, 1)" in pairs.separability_witness(NTPInstance.from_counts(H, C))[1]


def test_str_of_reports_is_short():
    inst = ntpcert.load_instance("paper")
    for obj in (ntpcert.certify(inst), ntpcert.solve_svm(inst)):
        text = str(obj)
        assert len(text) < 1200 and len(text.splitlines()) <= 8, text
        assert all(len(ln) <= 100 for ln in text.splitlines())
    assert "holds=True" in str(ntpcert.certify(inst))


@pytest.mark.slow
def test_explain_on_gaussian_embeddings_is_short_and_its_json_exact(capsys):
    """m = 1,368 character 3-grams of pydoc with Gaussian embeddings (random:64): the Farkas ray has
    entries of over a thousand digits (about 100 s)."""
    from ntpcert.cli.app import main

    argv = ["explain", "pydoc", "-k", "3", "--max-chars", "5000", "--embedding", "random:64"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 200 and max(map(len, lines)) <= 200
    assert "divided by the largest" in "\n".join(lines)
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    values = [e["value"] for c in out["why_not_separable"]["contexts"] for e in c["ray"]]
    assert max(len(v) for v in values) > 100  # the exact integers, not rounded
    assert all(Fraction(v).denominator == 1 for v in values)


def test_compatibility_cycle_with_huge_coefficients_is_short_and_finite():
    from types import SimpleNamespace

    from ntpcert.report.explain import compatibility_lines

    inst = NTPInstance.from_counts(np.eye(3), [[3, 1, 0], [0, 2, 5], [1, 0, 4]], token_names=["a", "b", "c"])
    big = 3 * 10**700
    terms = [SimpleNamespace(context=j % 3, token=0, versus=1, coefficient=c, counts=(3, 1), log_odds=1.0986)
             for j, c in enumerate([big, -big // 3, 7] * 20)]
    wnc = SimpleNamespace(instance=inst, terms=terms, contexts=(0, 1, 2), irreducible=True, note="",
                          mismatch=0.5, mismatch_ratio=lambda: None, start_rows=60, rows=list(range(60)))
    lines = compatibility_lines(wnc)
    text = "\n".join(lines)
    assert "divided by the largest, 3e+700" in text and "nan" not in text and "inf" not in text
    assert len(lines) <= 45 and max(map(len, lines)) < 200
    assert "+ ... (60 terms in all, each in --json)" in text
