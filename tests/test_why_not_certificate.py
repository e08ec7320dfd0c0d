"""The irreducible culprits in the exact certificate (``why_not_separable``, ``why_not_compatible``):
written by ``certify --exact``, checked by the independent checker, forgeries refused."""

from __future__ import annotations

import copy

import pytest

from ntpcert.certificate import jsonio
from ntpcert.certificate import structure
from ntpcert.certificate.checker import verify_certificate
from ntpcert.cli.app import main
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.explain import why_not_with_sections

from .test_explain import doubling_toy, two_context_toy


def _certify(inst: NTPInstance):
    return exact_certify(inst, svm=False, excess=False, why_not=why_not_with_sections)


def _unsealed(rep) -> dict:
    cert = copy.deepcopy(rep.certificate)
    cert.pop("checksum")
    return cert


def _verdict(cert: dict):
    return verify_certificate(jsonio.seal(cert))


def test_two_context_toy_certificate_carries_the_pair_and_checks():
    rep = _certify(two_context_toy())
    assert rep.check.valid and rep.separable.holds is False
    sec = rep.certificate["why_not_separable"]
    assert sec["contexts"] == [0, 1]
    assert [d["context"] for d in sec["deletions"]] == [0, 1]
    assert "why_not_compatible" not in rep.certificate  # compatible: nothing to explain
    assert any(c.startswith("why_not_separable: 2 contexts") for c in rep.check.checks)
    assert rep.why_not["why_not_separable"]["in_certificate"] is True


def test_doubling_toy_certificate_carries_one_cycle():
    rep = _certify(doubling_toy())
    assert rep.check.valid and rep.compatible.holds is False
    sec = rep.certificate["why_not_compatible"]
    assert len(sec["y"]) == 2 and {j for j, _, _ in sec["y"]} == {0, 1}
    line = next(c for c in rep.check.checks if c.startswith("why_not_compatible"))
    assert "log(2)" in line and "0.693147" in line  # the mismatch log 2, recomputed by the checker


def test_a_lone_context_that_no_decoder_separates():
    # context 0 has embedding 0 and a proper support: its logits are all equal, so it is the culprit
    # on its own, and deleting it leaves nothing to separate
    inst = NTPInstance.from_counts([[0.0], [1.0]], [[1, 0], [0, 1]])
    rep = _certify(inst)
    assert rep.check.valid and rep.separable.holds is False
    sec = rep.certificate["why_not_separable"]
    assert sec["contexts"] == [0] and sec["deletions"] == [{"context": 0, "cols": [], "W": []}]


def _sep_cert():
    return _unsealed(_certify(two_context_toy()))


def _tamper_zero_w(cert):
    d = cert["why_not_separable"]["deletions"][0]
    d["W"] = [["0"] * len(row) for row in d["W"]]


def _tamper_drop_col(cert):
    d = cert["why_not_separable"]["deletions"][1]
    assert d["cols"] == [0]  # the toy's contexts 0 and 1 live on column 0
    d["cols"] = [1]


def _tamper_ray_scale(cert):
    ray = cert["why_not_separable"]["ray"]
    ray[0][2] = str(2 * int(ray[0][2]))


def _tamper_extra_context(cert):
    sec = cert["why_not_separable"]
    sec["contexts"] = [0, 1, 2]
    sec["deletions"].append({"context": 2, "cols": [], "W": []})


def _tamper_swap_deletions(cert):
    dels = cert["why_not_separable"]["deletions"]
    dels[0], dels[1] = dels[1], dels[0]


def _tamper_missing_deletion(cert):
    cert["why_not_separable"]["deletions"].pop()


@pytest.mark.parametrize("tamper, reason", [
    (_tamper_zero_w, "off the support"),
    (_tamper_drop_col, "not zero outside"),
    (_tamper_ray_scale, "ray"),
    (_tamper_extra_context, "not the set"),
    (_tamper_swap_deletions, "context"),
    (_tamper_missing_deletion, "deletions"),
])
def test_forged_separability_culprits_are_refused(tamper, reason):
    cert = _sep_cert()
    assert _verdict(copy.deepcopy(cert)).valid
    tamper(cert)
    v = _verdict(cert)
    assert not v.valid and "why_not_separable" in v.reason and reason in v.reason, v.reason


def test_a_culprit_beside_a_true_claim_is_refused():
    sec = _sep_cert()["why_not_separable"]
    # the toy's shape, with embeddings that make it separable
    inst = NTPInstance.from_counts([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[3, 0, 0], [0, 2, 0], [1, 1, 0]])
    rep = _certify(inst)
    assert rep.check.valid and rep.separable.holds is True
    cert = _unsealed(rep)
    cert["why_not_separable"] = sec
    v = _verdict(cert)
    assert not v.valid and "claim is not false" in v.reason


def _compat_cert(extra=False):
    return _unsealed(_certify(doubling_toy(extra)))


def test_forged_cycles_are_refused():
    base = _compat_cert(extra=True)
    assert _verdict(copy.deepcopy(base)).valid
    y = base["why_not_compatible"]["y"]
    # a multiplier changed: no longer a null vector
    cert = copy.deepcopy(base)
    cert["why_not_compatible"]["y"][0][2] = str(3 * int(y[0][2]))
    v = _verdict(cert)
    assert not v.valid and "left null space" in v.reason
    # a zero multiplier
    cert = copy.deepcopy(base)
    cert["why_not_compatible"]["y"][0][2] = "0"
    assert "zero entry" in _verdict(cert).reason
    # the cycle plus the consistent tripling h_4 = 3 h_3 (log 27 = 3 log 3): still a violating null
    # vector, but not irreducible
    cert = copy.deepcopy(base)
    cert["why_not_compatible"]["y"] = sorted(y + [[2, 1, "3"], [3, 1, "-1"]])
    v = _verdict(cert)
    assert not v.valid and "not a single cycle" in v.reason, v.reason
    # the consistent part alone: no mismatch
    cert = copy.deepcopy(base)
    cert["why_not_compatible"]["y"] = [[2, 1, "3"], [3, 1, "-1"]]
    assert "y^T E = 0" in _verdict(cert).reason


def test_schema_refuses_malformed_sections():
    cert = _sep_cert()
    cert["why_not_separable"]["contexts"] = [1, 0]
    with pytest.raises(Exception, match="strictly"):
        structure.check_schema(jsonio.seal(cert))
    cert = _sep_cert()
    cert["why_not_separable"]["deletions"][0]["surprise"] = 1
    assert "unknown key" in _verdict(cert).reason


def test_pydoc_certificate_carries_both_culprits(tmp_path, capsys):
    path = tmp_path / "c.json"
    assert main(["certify", "pydoc", "--exact", "--no-svm", "--certificate-out", str(path)]) == 0
    out = capsys.readouterr().out
    # the pair screen's circuit on newline and space (6 contexts), shrunk: irreducible as it is (docs/explain.md)
    assert "why not separable          : 6 contexts, irreducible" in out
    assert "why not compatible         : an irreducible cycle" in out and "in the certificate" in out
    cert = jsonio.load(path)
    assert len(cert["why_not_separable"]["contexts"]) == 6
    assert main(["verify", str(path), "--data", "pydoc"]) == 0
    text = capsys.readouterr().out
    assert "ok  why_not_separable" in text and "ok  why_not_compatible" in text
    # the text of a context and its deletion's point: an edited point fails the check
    sec = cert["why_not_separable"]
    W = sec["deletions"][2]["W"]
    i, k = next((i, k) for i, row in enumerate(W) for k, x in enumerate(row) if x != "0")
    W[i][k] = "0"
    cert.pop("checksum")
    v = _verdict(cert)
    assert not v.valid and "why_not_separable.deletions[2]" in v.reason
