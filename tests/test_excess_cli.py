"""The excess_loss key in certify --json, certify --exact --json (certificate section checked by verify)
and explain (text and --json)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntpcert.cli.app import main
from ntpcert.instance import NTPInstance

from .conftest import random_instance


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def nonsep(tmp_path):
    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    path = tmp_path / "nonsep.json"
    path.write_text(json.dumps({"embeddings": inst.embeddings.tolist(), "counts": inst.counts.tolist()}))
    return str(path)


def test_certify_json_carries_the_float_bracket(capsys):
    out = _json(capsys, ["certify", "paper", "--json", "--excess"])
    ex = out["excess_loss"]
    assert ex["exact"] is False
    assert ex["excess_lower"] <= 0.0 <= ex["excess_upper"] <= 1e-6
    assert len(ex["per_context_excess"]) == out.get("m", len(ex["per_context_excess"]))


def test_certify_exact_writes_a_checked_excess_section(capsys, nonsep, tmp_path):
    cert = tmp_path / "c.json"
    out = _json(capsys, ["certify", nonsep, "--exact", "--excess", "--json", "--certificate-out", str(cert)])
    ex = out["excess_loss"]
    assert ex["exact"] is True and ex["certificate_checked"] is True and ex["exact_repair"] == "exact"
    assert 0 < ex["excess_lower"] <= ex["excess_upper"]
    assert json.loads(cert.read_text())["excess"]["lower"] == ex["lower"]
    v = _json(capsys, ["verify", str(cert), "--json"])
    assert v["valid"] is True
    assert sum(c.startswith("excess:") for c in v["checks"]) == 3


def test_certify_without_excess_is_zero_by_the_theorem_or_says_how(capsys, nonsep, tmp_path):
    reached = _json(capsys, ["certify", "paper", "--json"])
    assert reached["entropy_bound_reachable"] is True
    assert reached["excess_loss"]["engine"] == "theorem" and "compatible and separable" in reached["excess_loss"]["reason"]
    assert reached["excess_loss"]["excess_lower"] == reached["excess_loss"]["excess_upper"] == 0.0
    assert "excess_bracket" not in reached["stages"]
    for extra in ([], ["--exact", "--certificate-out", str(tmp_path / "c.json")]):
        out = _json(capsys, ["certify", nonsep, "--json", *extra])
        assert out["entropy_bound_reachable"] is False
        assert "--excess" in out["excess_loss"]["skipped"]
    assert "excess" not in json.loads((tmp_path / "c.json").read_text())


def test_verify_rejects_a_raised_lower_end(capsys, nonsep, tmp_path):
    from ntpcert.certificate import jsonio

    cert = tmp_path / "c.json"
    _json(capsys, ["certify", nonsep, "--exact", "--excess", "--json", "--certificate-out", str(cert)])
    c = jsonio.load(cert)
    c["excess"]["excess_lower"] = c["excess"]["excess_upper"] + 1e-3
    jsonio.save(c, tmp_path / "forged.json")
    assert main(["verify", str(tmp_path / "forged.json")]) == 3
    assert "excess.excess_lower" in capsys.readouterr().out


def test_explain_prints_and_returns_the_bracket(capsys):
    toy = NTPInstance.from_counts([[1.0], [2.0]], [[2, 1], [2, 1]], token_names=["a", "b"])
    from ntpcert.pipeline.explain import explain
    from ntpcert.report.explain import explanation_lines

    exp = explain(toy)
    ex = exp.to_json()["excess_loss"]
    assert 0 < ex["excess_lower"] <= ex["excess_upper"]  # not compatible: L* > H
    text = "\n".join(explanation_lines(exp))
    assert "Best loss of a linear decoder: L* in [" in text and "contexts carrying the most excess" in text
    exact = explain(toy, exact=True).to_json()["excess_loss"]
    assert exact["exact"] is True and exact["checked"] is True
    assert exact["excess_lower"] > 0


def test_probabilities_read_from_floats_that_miss_the_simplex_are_not_certified(tmp_path, capsys):
    from ntpcert.errors import InputError
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.excess_certificate import exact_excess

    inst = NTPInstance.from_probs(np.random.default_rng(3).standard_normal((3, 5)),
                                  [[0.1, 0.9, 0, 0], [0, 0.3, 0.7, 0], [0.25, 0, 0, 0.75]])
    rep = exact_certify(inst, svm=False, excess=True)
    assert rep.check.valid and "excess" not in rep.certificate
    ex = rep.to_json()["excess_loss"]
    assert "do not sum to 1" in ex["exact_skipped"] and ex["certificate_checked"] is False
    with pytest.raises(InputError, match="probs"):
        exact_excess(inst)


def test_checker_refuses_a_section_on_probabilities_off_the_simplex():
    from ntpcert.certificate.checker.excess import check_excess

    inst = NTPInstance.from_probs(np.random.default_rng(3).standard_normal((3, 5)),
                                  [[0.1, 0.9, 0, 0], [0, 0.3, 0.7, 0], [0.25, 0, 0, 0.75]])
    sec = {"q": [[0, 0, "1/10"], [0, 1, "9/10"]], "W": [["0"] * 5] * 4, "lower": 0.0, "upper": 9.0,
           "excess_lower": 0.0, "excess_upper": 9.0}
    why = check_excess(sec, inst, [])
    assert why.startswith("excess:") and "do not sum to 1" in why
