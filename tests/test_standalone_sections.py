"""Every section that ntpcert writes, forged one at a time and re-sealed: ``ntpcert verify`` and the
standalone checker (tools/ntpcert_check.py) both refuse each forgery, naming the same field. The
sections beyond the three claims: the NTP-SVM pair and its bounds, the excess bracket, the why-not
culprits, W*, dim F, the fingerprint, the names and the source record."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.exact.rational import fraction_str
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.explain import why_not_with_sections

from .conftest import random_instance
from .standalone import standalone
from .test_explain import doubling_toy, two_context_toy


@pytest.fixture(scope="module")
def certs() -> dict[str, dict]:
    """Genuine certificates: 'sep' (explicit W, svm, excess, W*, a rank modulus), 'pair' (a non-separable
    pair of contexts, why_not_separable), 'cycle' (two circuits of log-odds, one of them inconsistent:
    why_not_compatible), 'lemma1' (W* beside Lemma 1's rank of H)."""
    out = {
        "sep": exact_certify(random_instance(np.random.default_rng(1), 4, 6, 5, 1, 4), use_lemma1=False,
                             excess=True).certificate,
        "pair": exact_certify(two_context_toy(), svm=False, why_not=why_not_with_sections).certificate,
        "cycle": exact_certify(doubling_toy(extra=True), svm=False, why_not=why_not_with_sections).certificate,
        "lemma1": exact_certify(random_instance(np.random.default_rng(2), 4, 6, 5, 1, 4), svm=False).certificate,
    }
    sep = out["sep"]
    assert "W_star" in sep["compatibility"] and sep["svm"] is not None and sep["excess"] is not None
    assert "why_not_separable" in out["pair"] and "why_not_compatible" in out["cycle"]
    assert "embeddings_rank_modulus" in out["lemma1"]["compatibility"] and "W_star" in out["lemma1"]["compatibility"]
    for cert in out.values():
        text = jsonio.dumps(cert)
        assert verify_text(text).valid and standalone(text)[0]
    return out


def _both_refuse(cert: dict, edit: Callable[[dict], None], field: str) -> None:
    cert = copy.deepcopy(cert)
    edit(cert)
    text = jsonio.dumps(cert)  # re-sealed: only the checks of the section can catch it
    v = verify_text(text)
    assert not v.valid and field in v.reason, v.reason
    ok, line = standalone(text)
    assert not ok and field in line, line


def _times(s: str, k: int) -> str:
    return fraction_str(Fraction(s) * k)


def _both(svm: dict, claims: dict, key: str, value) -> None:
    svm[key] = claims[key] = value


# ---------------------------------------------------------------------------- svm
SVM_FORGERIES = {
    "gap doubled": (lambda c: _both(c["svm"], c["claims"]["svm"], "gap", _times(c["svm"]["gap"], 2)), "svm.gap"),
    "gap zero": (lambda c: _both(c["svm"], c["claims"]["svm"], "gap", "0"), "svm.gap"),
    "norm_upper halved": (lambda c: _both(c["svm"], c["claims"]["svm"], "norm_upper", c["svm"]["norm_upper"] / 2),
                          "svm.norm_upper"),
    "norm_upper loose": (lambda c: _both(c["svm"], c["claims"]["svm"], "norm_upper", c["svm"]["norm_upper"] * 1.01),
                         "svm.norm_upper"),
    "norm_lower above": (lambda c: _both(c["svm"], c["claims"]["svm"], "norm_lower", c["svm"]["norm_lower"] * 1.01),
                         "svm.norm_lower"),
    "distance_bound quartered": (lambda c: _both(c["svm"], c["claims"]["svm"], "distance_bound",
                                                 c["svm"]["distance_bound"] / 4), "svm.distance_bound"),
    "dual scaled (gap no longer its own)": (lambda c: c["svm"].update(a=[[_times(x, 2) for x in r] for r in c["svm"]["a"]]),
                                            "svm.gap"),
    "dual column not summing to 0": (lambda c: c["svm"]["a"][0].__setitem__(0, _times(c["svm"]["a"][0][0], 3) if
                                                                        c["svm"]["a"][0][0] != "0" else "1"), "svm.a"),
    "W not feasible": (lambda c: c["svm"].update(W=[["0"] * len(r) for r in c["svm"]["W"]]), "svm.W"),
    "claims.svm differs": (lambda c: c["claims"]["svm"].update(gap="0"), "claims.svm.gap"),
    "bound written as an integer": (lambda c: _both(c["svm"], c["claims"]["svm"], "norm_upper", 1000), "svm.norm_upper"),
}


@pytest.mark.parametrize("name", list(SVM_FORGERIES))
def test_forged_svm_sections_are_refused_by_both(certs, name):
    edit, field = SVM_FORGERIES[name]
    _both_refuse(certs["sep"], edit, field)


def _factored(c: dict) -> None:
    """svm.W as W_factored (scale 1/3, base 0.0 and 1.0 as numbers, the rest in delta) and svm.a as a_sparse:
    the same pair in the encodings of large certificates."""
    W = c["svm"].pop("W")
    base = [[float(v == i) for i in range(len(row))] for v, row in enumerate(W)]
    delta = [[v, i, _times(fraction_str(Fraction(x) - Fraction(base[v][i]) / 3), 3)] for v, row in enumerate(W)
             for i, x in enumerate(row) if Fraction(x) != Fraction(base[v][i]) / 3]
    c["svm"]["W_factored"] = {"scale": "1/3", "base": base, "delta": delta}
    c["svm"]["a_sparse"] = [[v, j, x] for v, row in enumerate(c["svm"].pop("a")) for j, x in enumerate(row) if x != "0"]


def test_the_factored_and_sparse_encodings_of_the_pair_are_read_alike_and_forgeries_refused(certs):
    cert = copy.deepcopy(certs["sep"])
    _factored(cert)
    text = jsonio.dumps(cert)
    assert verify_text(text).valid and standalone(text)[0]
    _both_refuse(cert, lambda c: c["svm"]["W_factored"].update(scale="1/2"), "svm")
    _both_refuse(cert, lambda c: c["svm"]["W_factored"]["delta"][0].__setitem__(2, "0"), "svm")
    _both_refuse(cert, lambda c: c["svm"]["a_sparse"].pop(), "svm.a")


# ---------------------------------------------------------------------------- excess
EXCESS_FORGERIES = {
    "lower moved up": (lambda c: c["excess"].update(lower=c["excess"]["upper"]), "excess.lower"),
    "upper moved down": (lambda c: c["excess"].update(upper=c["excess"]["lower"]), "excess.upper"),
    "excess_lower moved up": (lambda c: c["excess"].update(excess_lower=c["excess"]["excess_upper"] + 1e-3),
                              "excess.excess_lower"),
    "excess_upper moved down": (lambda c: c["excess"].update(excess_upper=-1e-3), "excess.excess_upper"),
    "q off the simplex": (lambda c: c["excess"]["q"][0].__setitem__(2, _times(c["excess"]["q"][0][2], 2)), "excess.q"),
}


@pytest.mark.parametrize("name", list(EXCESS_FORGERIES))
def test_a_moved_excess_bracket_is_refused_by_both(certs, name):
    edit, field = EXCESS_FORGERIES[name]
    _both_refuse(certs["sep"], edit, field)


@pytest.mark.parametrize("key,inward", [("lower", math.inf), ("upper", -math.inf)])
def test_an_excess_end_one_ulp_inward_is_refused_by_both(certs, key, inward):
    """The writer's ends are the floats just outside its balls, and both checkers evaluate the same ones at 192
    bits: they refuse an end moved by a single ulp, at the same place."""
    _both_refuse(certs["sep"], lambda c: c["excess"].update({key: math.nextafter(c["excess"][key], inward)}),
                 f"excess.{key}")


# ---------------------------------------------------------------------------- W*, dim F, fingerprint, names
def _w_star_entry(c: dict) -> None:
    coef = c["compatibility"]["W_star"]["coefficients"]
    entry = coef[sorted(coef)[0]][0]
    entry[2] = _times(entry[2], 2) if entry[2] != "0" else "1"


def _flip_zero_sign(c: dict) -> None:
    emb = c["instance"]["embedded"]["embeddings"]
    j, i = next((j, i) for j, row in enumerate(emb) for i, x in enumerate(row) if x == 0)
    emb[j][i] = -0.0  # the same matrix over Q, another instance's bytes


OTHER_FORGERIES = {
    "W_star coefficient": ("sep", _w_star_entry, "compatibility.W_star"),
    "W_star coefficient beside Lemma 1": ("lemma1", _w_star_entry, "compatibility.W_star"),
    "W_star prime missing": ("sep", lambda c: c["compatibility"]["W_star"]["coefficients"].popitem(),
                             "compatibility.W_star"),
    "dim_F beside a basis": ("sep", lambda c: c["compatibility"].update(dim_F=c["compatibility"]["dim_F"] - 1),
                             "compatibility.dim_F"),
    "dim_F beside a false claim": ("cycle", lambda c: c["compatibility"].update(dim_F=3), "compatibility.dim_F"),
    "fingerprint of another instance": ("sep", lambda c: c["instance"].update(fingerprint="0" * 64),
                                        "instance.fingerprint"),
    "an embedding's sign bit": ("pair", _flip_zero_sign, "instance.fingerprint"),
    "a count changed, the fingerprint kept": ("sep", lambda c: c["instance"]["embedded"]["counts"][0].__setitem__(
        0, c["instance"]["embedded"]["counts"][0][0] + 1), "instance.fingerprint"),
    "token names of the wrong length": ("pair", lambda c: c["instance"]["embedded"].update(token_names=["a"]),
                                        "instance.embedded.token_names"),
    "a context name not a string": ("pair", lambda c: c["instance"]["embedded"].update(context_names=["x", "y", 3]),
                                    "instance.embedded.context_names"),
}


@pytest.mark.parametrize("name", list(OTHER_FORGERIES))
def test_forged_w_star_dim_f_fingerprint_and_names_are_refused_by_both(certs, name):
    case, edit, field = OTHER_FORGERIES[name]
    _both_refuse(certs[case], edit, field)


def test_dim_f_beside_a_false_claim_may_be_null_or_the_rank(certs):
    """The control of the forgery above: h_2 = 2 h_1 and h_4 = 3 h_3, so the 4 equality rows have rank 2."""
    cert = copy.deepcopy(certs["cycle"])
    assert cert["compatibility"]["dim_F"] is None
    cert["compatibility"]["dim_F"] = 2
    text = jsonio.dumps(cert)
    assert verify_text(text).valid and standalone(text)[0]


@pytest.mark.parametrize("probs,changed", [
    ([["1/2", "1/2", "0"], ["1/3", "0", "2/3"], ["0", "1/4", "3/4"]], "1/4"),
    ([[0.5, 0.5, 0.0], [0.25, 0.0, 0.75], [0.0, 0.125, 0.875]], 0.25),
])
def test_probabilities_that_do_not_sum_to_one_are_refused_by_both(probs, changed):
    """Both read the fingerprint and the bracket of probabilities (as fractions and as floats), and refuse a row
    that does not sum to 1 (exactly, or to within 1e-9 for floats), whatever the fingerprint says."""
    inst = NTPInstance.from_probs([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], probs)
    cert = exact_certify(inst, excess=True).certificate
    assert cert["excess"] is not None
    text = jsonio.dumps(cert)
    assert verify_text(text).valid and standalone(text)[0]
    _both_refuse(cert, lambda c: c["instance"]["embedded"]["probs"][0].__setitem__(0, changed), "probs")


# ---------------------------------------------------------------------------- why not
def _wrong_cycle(c: dict) -> None:
    """The consistent circuit h_4 = 3 h_3 (log-odds tripled) named as the culprit: y^T E = 0."""
    c["why_not_compatible"]["y"] = [[2, 1, "3"], [3, 1, "-1"]]


WHY_NOT_FORGERIES = {
    "a separable pair named": ("pair", lambda c: c["why_not_separable"].update(contexts=[1, 2]), "why_not_separable"),
    "a deletion's W zeroed": ("pair", lambda c: c["why_not_separable"]["deletions"][0].update(
        W=[["0"] * len(r) for r in c["why_not_separable"]["deletions"][0]["W"]]), "why_not_separable.deletions[0].W"),
    "a consistent circuit named": ("cycle", _wrong_cycle, "why_not_compatible.y"),
    "a cycle with an extra row": ("cycle", lambda c: c["why_not_compatible"]["y"].append([2, 1, "1"]),
                                  "why_not_compatible.y"),
    "a culprit beside a true claim": ("sep", lambda c: c.update(why_not_compatible={"y": [[0, 1, "1"]]}),
                                      "why_not_compatible"),
}


@pytest.mark.parametrize("name", list(WHY_NOT_FORGERIES))
def test_wrong_why_not_culprits_are_refused_by_both(certs, name):
    case, edit, field = WHY_NOT_FORGERIES[name]
    _both_refuse(certs[case], edit, field)


# ---------------------------------------------------------------------------- source
def _with_source(cert: dict, **vocabulary) -> dict:
    """``cert`` with a model's source record: the two_context toy's tokens 0 and 1 follow contexts, token 2
    none, so it reads as 2 observed tokens of a model of V = 7 and one representative of the 5 others."""
    cert = copy.deepcopy(cert)
    voc = {"V": 7, "V_reduced": 3, "observed": 2, "merged": 5, "representative": 4} | vocabulary
    cert["source"] = {"kind": "model", "files": [["model.safetensors", "a" * 64]], "corpus_sha256": "b" * 64,
                      "context": "tokens:2", "bos": False, "embeddings": "model", "vocabulary": voc}
    return cert


def test_a_source_record_that_matches_the_instance_is_accepted_by_both(certs):
    text = jsonio.dumps(_with_source(certs["pair"]))
    assert verify_text(text).valid
    ok, line = standalone(text)
    assert ok and "source: a model's 1 files by SHA-256, 2 observed tokens and one representative of 5 more" in line


@pytest.mark.parametrize("vocabulary,field", [
    ({"observed": 3}, "source.vocabulary"),  # its own sums: observed + merged != V
    ({"representative": None}, "source.vocabulary.representative"),  # merged tokens, no representative
    ({"representative": 7}, "source.vocabulary.representative"),  # not a token id below V
])
def test_a_source_record_that_does_not_add_up_is_refused_by_both(certs, vocabulary, field):
    _both_refuse(_with_source(certs["pair"], **vocabulary), lambda c: None, field)


@pytest.mark.parametrize("vocabulary,field", [
    ({"V": 8, "V_reduced": 4, "observed": 3}, "source.vocabulary.V_reduced"),  # the instance has V = 3, not 4
    ({"V": 3, "observed": 3, "merged": 0, "representative": None}, "source.vocabulary.observed"),  # token 2 follows none
    ({"V": 6, "observed": 1, "merged": 5, "V_reduced": 2}, "source.vocabulary.V_reduced"),
])
def test_a_source_record_of_another_instance_is_refused_by_both(certs, vocabulary, field):
    """Its sums are right, but it does not describe the embedded instance: V_reduced is not its V, or the tokens
    that follow a context are not the observed ones (the representative, the last token, follows none)."""
    text = jsonio.dumps(_with_source(certs["pair"], **vocabulary))
    ok, line = standalone(text)
    assert not ok and field in line, line
    v = verify_text(text)
    assert not v.valid and "source.vocabulary" in v.reason, v.reason
