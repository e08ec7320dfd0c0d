"""Forged certificates: each one is re-sealed with the module's own checksum, so that only the
schema and the semantic checks can catch it, and each is rejected both against the embedded data
and against DATA, through the CLI and through the library."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import decode
from ntpcert.certificate import encode
from ntpcert.certificate import format as fmt
from ntpcert.certificate import jsonio
from ntpcert.certificate import schema
from ntpcert.certificate.checker import (
    INSTANCE_DATA,
    INSTANCE_EMBEDDED,
    verify,
    verify_certificate,
    verify_file,
    verify_text,
)
from ntpcert.cli.app import main
from ntpcert.cli.verify import EXIT_INVALID, EXIT_TOO_LARGE
from ntpcert.exact.rational import fraction_str, parse_fraction
from ntpcert.instance.io import write_json
from ntpcert.pipeline.exact_verdicts import exact_certify

from .conftest import random_instance
from .standalone import checker as standalone_checker
from .standalone import standalone


# ---------------------------------------------------------------------------- instances
def _separable() -> NTPInstance:
    """Compatible and separable (with an NTP-SVM section)."""
    return random_instance(np.random.default_rng(1), 4, 6, 5, 1, 4)


def _not_separable() -> NTPInstance:
    """Two contexts with the same embedding and different supports: not separable."""
    rng = np.random.default_rng(7)
    h = rng.standard_normal(3)
    H = np.vstack([h, h, rng.standard_normal((2, 3))])
    C = np.array([[2, 1, 0, 0], [0, 3, 1, 0], [1, 0, 0, 4], [0, 0, 5, 1]])
    return NTPInstance.from_counts(H, C)


def _incompatible() -> NTPInstance:
    """h_2 = 2 h_1 with log-odds log 2 and log 5: not compatible."""
    h = np.array([0.5, -1.0, 0.75])
    return NTPInstance.from_counts(np.array([h, 2 * h, [1.0, 0.0, 0.0]]), [[1, 2, 0], [1, 5, 0], [0, 3, 1]])


class Case:
    def __init__(self, instance: NTPInstance, data: str, path: str, cert: dict) -> None:
        self.instance, self.data, self.path, self.cert = instance, data, path, cert

    def copy(self) -> dict:
        return copy.deepcopy(self.cert)


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Case]:
    tmp = tmp_path_factory.mktemp("forgery")
    out = {}
    for name, inst in [("sep", _separable()), ("nosep", _not_separable()), ("incompat", _incompatible())]:
        data, path = tmp / f"{name}.json", tmp / f"{name}.cert.json"
        write_json(inst, data)
        rep = exact_certify(inst, certificate_out=str(path), use_lemma1=name != "sep")  # "sep": an explicit W
        assert rep.check.valid, rep.check.reason
        out[name] = Case(inst, str(data), str(path), json.loads(path.read_text()))
    c = out
    assert c["sep"].cert["claims"]["compatible"] is True and c["sep"].cert["claims"]["separable"] is True
    assert c["sep"].cert["svm"] is not None
    assert c["nosep"].cert["claims"]["separable"] is False
    assert c["incompat"].cert["claims"]["compatible"] is False
    return out


# ---------------------------------------------------------------------------- the harness
def _sealed_text(cert: dict) -> str:
    """A forged dict as file text, with a correct checksum (the forger's best effort)."""
    text = jsonio.dumps(cert)
    body = json.loads(text)
    assert body["checksum"] == jsonio.checksum(body)  # only the schema or the semantics can catch it
    return text


def _rejected(case: Case, text: str, needle: str, tmp_path, capsys, *, as_dict: bool = True,
              file_name: str = "forged.json") -> str:
    """``text`` is INVALID, with a one-line reason containing ``needle``, through the CLI (text and
    --json, without and with --data) and the library (``verify_text``, ``verify_certificate`` when
    ``as_dict``), and each says which instance it was checked against. Returns the reason."""
    path = tmp_path / file_name
    path.write_text(text)
    reasons = []
    for extra, source, against in (([], INSTANCE_EMBEDDED, "against: the embedded data"),
                                   (["--data", case.data], INSTANCE_DATA, "against: the DATA given")):
        assert main(["verify", str(path), *extra]) == EXIT_INVALID
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("INVALID: ") and needle in lines[0], lines
        assert lines[1].strip().startswith(against)
        assert main(["verify", str(path), *extra, "--json"]) == EXIT_INVALID
        obj = json.loads(capsys.readouterr().out)
        assert obj["valid"] is False and needle in obj["reason"] and obj["instance_source"] == source
        reasons.append(lines[0])
    for inst, source in ((None, INSTANCE_EMBEDDED), (case.instance, INSTANCE_DATA)):
        verdicts = [verify_text(text, inst), verify_file(path, inst)]
        if as_dict:
            verdicts.append(verify_certificate(json.loads(text), inst))
        for v in verdicts:
            assert not v.valid and needle in v.reason and "\n" not in v.reason, v.reason
            assert v.instance_source == source
    ok, line = standalone(text)  # the reference checker refuses it too: it looks at every section
    assert not ok, (reasons[0], line)
    return reasons[0]


def _forge(case: Case, edit: Callable[[dict], None]) -> str:
    cert = case.copy()
    edit(cert)
    return _sealed_text(cert)


def _set(*path_value):
    """An edit that sets ``cert[k1][k2]... = value`` for each (path, value)."""
    def edit(cert: dict) -> None:
        for path, value in path_value:
            obj = cert
            for k in path[:-1]:
                obj = obj[k]
            obj[path[-1]] = value(obj[path[-1]]) if callable(value) else value
    return edit


# ---------------------------------------------------------------------------- genuine ones
@pytest.mark.parametrize("name", ["sep", "nosep", "incompat"])
def test_genuine_certificates_verify_and_say_against_what(cases, name, capsys):
    case = cases[name]
    assert main(["verify", case.path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("VALID") and lines[1] == "  against: the embedded data (no DATA given)"
    assert main(["verify", case.path, "--data", case.data]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"  against: the DATA given ({case.data})"
    for extra, source in (([], "embedded"), (["--data", case.data], "data")):
        assert main(["verify", case.path, "--json", *extra]) == 0
        obj = json.loads(capsys.readouterr().out)
        assert obj["valid"] is True and obj["instance_source"] == source
    assert verify_certificate(case.cert).instance_source == INSTANCE_EMBEDDED
    v = verify_certificate(case.cert, case.instance)
    assert v.valid and v.instance_source == INSTANCE_DATA and v.against == "the DATA given"
    assert verify(case.path).valid
    assert jsonio.dumps(case.cert) == Path(case.path).read_text()  # the genuine text is what the harness re-seals


def test_undetermined_is_spelled_null_and_verifies(cases, capsys):
    """The control of the forgeries below: ``null`` (not ``0``) is how 'nothing to check' is written."""
    cert = cases["sep"].copy()
    cert["separability"] = {"claim": None, "reason": "no exact witness"}
    cert["svm"] = None
    cert["claims"].update(separable=None, entropy_bound_reachable=None, svm=None)
    v = verify_text(_sealed_text(cert))
    assert v.valid, v.reason
    assert v.claims["separable"] is None and any("undetermined" in c for c in v.checks)


def test_an_invalid_verdict_hands_on_no_claims(cases, tmp_path, capsys):
    case = cases["nosep"]
    text = _forge(case, _set((("claims", "separable"), 1)))
    assert verify_text(text).claims == {}
    path = tmp_path / "c.json"
    path.write_text(text)
    assert main(["verify", str(path), "--json"]) == EXIT_INVALID
    assert json.loads(capsys.readouterr().out)["claims"] == {}


# ---------------------------------------------------------------------------- claims as numbers
@pytest.mark.parametrize("number", [1, 1.0])
def test_separable_written_as_one_for_a_non_separable_instance(cases, number, tmp_path, capsys):
    # the red-team forgery: an 'undetermined' section with claim 1, and the summary claim true (True == 1)
    case = cases["nosep"]
    text = _forge(case, _set((("separability",), {"claim": number, "reason": "trust me"}),
                             (("claims", "separable"), True), (("claims", "entropy_bound_reachable"), None)))
    _rejected(case, text, "separability.claim", tmp_path, capsys)
    # and with the genuine section, the summary claim alone written as a number
    text = _forge(case, _set((("claims", "separable"), number)))
    _rejected(case, text, "claims.separable", tmp_path, capsys)


@pytest.mark.parametrize("number", [0, 0.0])
def test_not_separable_written_as_zero_for_a_separable_instance(cases, number, tmp_path, capsys):
    case = cases["sep"]
    text = _forge(case, _set((("separability",), {"claim": number, "reason": "trust me"}), (("svm",), None),
                             (("claims", "separable"), False), (("claims", "entropy_bound_reachable"), None),
                             (("claims", "svm"), None)))
    _rejected(case, text, "separability.claim", tmp_path, capsys)


@pytest.mark.parametrize("name,key,number", [
    ("sep", "compatible", 1), ("sep", "compatible", 1.0), ("incompat", "compatible", 0),
    ("incompat", "compatible", 0.0), ("sep", "separable", 1), ("nosep", "separable", 0),
    ("sep", "entropy_bound_reachable", 1), ("sep", "entropy_bound_reachable", 1.0),
    ("nosep", "entropy_bound_reachable", 0), ("incompat", "entropy_bound_reachable", 0.0),
])
def test_summary_claim_written_as_a_number(cases, name, key, number, tmp_path, capsys):
    case = cases[name]
    assert case.cert["claims"][key] == number  # equal as Python sees it, so a == check would pass
    text = _forge(case, _set((("claims", key), number)))
    _rejected(case, text, f"claims.{key}", tmp_path, capsys)


@pytest.mark.parametrize("name,number", [("sep", 1), ("incompat", 0), ("sep", 1.0)])
def test_compatibility_claim_written_as_a_number(cases, name, number, tmp_path, capsys):
    case = cases[name]
    text = _forge(cases[name], _set((("compatibility", "claim"), number)))
    _rejected(case, text, "compatibility.claim", tmp_path, capsys)


@pytest.mark.parametrize("key,value", [("probabilities_exact_from_floats", 0), ("version", True), ("format", 1)])
def test_other_type_confusions(cases, key, value, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _forge(case, _set(((key,), value))), key if key != "format" else "format", tmp_path, capsys)


# ---------------------------------------------------------------------------- bounds
def _bound(case: Case, key: str, value) -> str:
    """The svm section and its claim both set to ``value`` (consistent, so only the range check can
    catch it)."""
    return _forge(case, _set((("svm", key), value), (("claims", "svm", key), value)))


@pytest.mark.parametrize("key,value", [
    ("norm_upper", -1000.0),                      # the red-team forgery: only hi^2 >= ||W||^2 was checked
    ("norm_upper", 1e300),                        # true but not the rounding of ||W||: not recomputed, so refused
    ("norm_upper", lambda x: x / 2),              # below ||W||
    ("norm_lower", -1.0),
    ("norm_lower", lambda x: 2 * x),              # above sqrt(2 D(a)), and above norm_upper
    ("norm_lower", 0.0),                          # loose
    ("distance_bound", -1.0),
    ("distance_bound", 1e300),
    ("distance_bound", lambda x: x / 4),          # below sqrt(2 gap)
    ("gap", "-1"),
    ("gap", lambda s: fraction_str(parse_fraction(s) * 2)),
])
def test_negative_loose_and_inconsistent_bounds(cases, key, value, tmp_path, capsys):
    case = cases["sep"]
    svm = case.cert["svm"]
    assert svm["norm_lower"] > 0 and parse_fraction(svm["gap"]) > 0 and svm["distance_bound"] > 0
    _rejected(case, _bound(case, key, value), f"svm.{key}", tmp_path, capsys)


def test_norm_upper_below_norm_lower_is_rejected(cases, tmp_path, capsys):
    case = cases["sep"]
    lo = case.cert["svm"]["norm_lower"]
    _rejected(case, _bound(case, "norm_upper", lo / 2), "svm.norm_upper", tmp_path, capsys)


@pytest.mark.parametrize("key", ["gap", "distance_bound", "norm_lower", "norm_upper"])
def test_summary_svm_claim_differing_from_the_section(cases, key, tmp_path, capsys):
    case = cases["sep"]
    value = "0" if key == "gap" else 12345.0
    _rejected(case, _forge(case, _set((("claims", "svm", key), value))), f"claims.svm.{key}", tmp_path, capsys)


@pytest.mark.parametrize("value", [1, True, "1.5"])
def test_bound_of_the_wrong_kind(cases, value, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _bound(case, "norm_upper", value), "svm.norm_upper", tmp_path, capsys)


@pytest.mark.parametrize("value", ["2/4", "+1", "01", "-0", "3/1", "1/-2", "0x10", " 1", "1.5"])
def test_non_canonical_rational_is_rejected(cases, value, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _forge(case, _set((("svm", "a", 0, 0), value))), "svm.a[0][0]", tmp_path, capsys)


def test_svm_claim_without_a_section_and_section_without_a_claim(cases, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _forge(case, _set((("svm",), None))), "claims.svm", tmp_path, capsys)
    _rejected(case, _forge(case, _set((("claims", "svm"), None))), "claims.svm", tmp_path, capsys)


# ---------------------------------------------------------------------------- duplicate keys, NaN
def _duplicate_first(text: str, anchor: str, inserted: str) -> str:
    """Insert ``inserted`` (a key and a value, with its comma) right after ``anchor``: a first-wins
    reader sees the inserted value, Python's last-wins ``json`` the genuine one."""
    assert anchor in text
    return text.replace(anchor, anchor + inserted, 1)


@pytest.mark.parametrize("name,anchor,inserted,needle", [
    ("nosep", "{", '"claims": {"compatible": true, "separable": true, "entropy_bound_reachable": true, "svm": null},',
     "'claims'"),
    ("nosep", '"claims": {', '"separable": true,', "'separable'"),
    ("incompat", '"claims": {', '"compatible": true,', "'compatible'"),
    ("sep", '"instance": {', '"m": 7,', "'m'"),
    ("sep", '"embedded": {', '"name": "paper",', "'name'"),
    ("nosep", '"separability": {', '"claim": true,', "'claim'"),
    ("sep", '"svm": {', '"gap": "0",', "'gap'"),
])
def test_duplicate_keys_are_rejected_at_parse_time(cases, name, anchor, inserted, needle, tmp_path, capsys):
    case = cases[name]
    text = _duplicate_first(jsonio.dumps(case.cert), anchor, inserted)
    last_wins = json.loads(text)
    assert last_wins == case.cert and last_wins["checksum"] == jsonio.checksum(last_wins)  # sealed for a last-wins reader
    reason = _rejected(case, text, "duplicate key", tmp_path, capsys, as_dict=False)
    assert needle in reason


@pytest.mark.parametrize("literal,needle", [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "Infinity"),
                                            ("1e999", "infinity")])
def test_non_finite_numbers_are_rejected_at_parse_time(cases, literal, needle, tmp_path, capsys):
    case = cases["sep"]
    text = jsonio.dumps(case.cert)
    key = '"distance_bound": '
    start = text.index(key) + len(key)
    end = text.index(",", start)
    _rejected(case, text[:start] + literal + text[end:], needle, tmp_path, capsys, as_dict=False)


# ---------------------------------------------------------------------------- metadata lies
@pytest.mark.parametrize("key", ["m", "d", "V"])
def test_header_sizes_must_be_the_instance(cases, key, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _forge(case, _set((("instance", key), lambda x: x + 1))), f"instance.{key}", tmp_path, capsys)


def test_fingerprint_must_be_the_instance(cases, tmp_path, capsys):
    case = cases["sep"]
    _rejected(case, _forge(case, _set((("instance", "fingerprint"), "0" * 64))), "fingerprint", tmp_path, capsys)


@pytest.mark.parametrize("name", ["sep", "nosep", "incompat"])
@pytest.mark.parametrize("key,change", [
    ("n_eq", lambda x: x + 1),
    ("n_eq", lambda x: x - 1),
    ("dim_F", lambda x: x + 1),
    ("dim_F", lambda x: x - 1),
    ("primes", lambda p: p + [10007]),
    ("primes", lambda p: p[:-1]),
])
def test_compatibility_header_is_recomputed(cases, name, key, change, tmp_path, capsys):
    case = cases[name]
    sec = case.cert["compatibility"]
    if key == "primes" and not sec["primes"]:
        pytest.skip("no primes to drop")
    if key == "dim_F" and sec[key] is None:  # not claimed: claim an impossible rank (above r) instead
        forged = sec["n_eq"] + (1 if change(0) > 0 else 2)
        change = lambda _x, v=forged: v  # noqa: E731
    if key != "primes" and change(sec[key]) < 0:
        pytest.skip("would be negative")
    _rejected(case, _forge(case, _set((("compatibility", key), change))), f"compatibility.{key}", tmp_path, capsys)


@pytest.mark.parametrize("key,value", [
    ("name", 123), ("name", None), ("token_names", ["a", "b"]), ("token_names", [1, 2, 3, 4, 5]),
    ("context_names", "abcd"), ("context_names", ["a", "b", "c", None]),
])
def test_malformed_names_are_rejected_without_and_with_data(cases, key, value, tmp_path, capsys):
    case = cases["sep"]
    text = _forge(case, _set((("instance", "embedded", key), value)))
    _rejected(case, text, f"instance.embedded.{key}", tmp_path, capsys)


@pytest.mark.parametrize("key,value", [
    ("name", "paper"), ("token_names", ["t0", "t1", "t2", "t3", "t4"]), ("context_names", ["a", "b", "c", "d"]),
])
def test_renamed_instance_is_rejected_against_data_and_reported_as_embedded_without(cases, key, value, tmp_path, capsys):
    """Names are outside the fingerprint: a well-formed rename is caught against DATA; without
    DATA there is nothing to compare them with, so the verdict says it was the embedded data."""
    case = cases["sep"]
    text = _forge(case, _set((("instance", "embedded", key), value)))
    path = tmp_path / "renamed.json"
    path.write_text(text)
    assert main(["verify", str(path), "--data", case.data]) == EXIT_INVALID
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("INVALID") and f"instance.embedded.{key}" in out[0] and "DATA" in out[0]
    v = verify_certificate(json.loads(text), case.instance)
    assert not v.valid and f"instance.embedded.{key}" in v.reason
    assert main(["verify", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "  against: the embedded data (no DATA given)"
    assert verify_certificate(json.loads(text)).instance_source == INSTANCE_EMBEDDED


def test_float_flag_on_a_counts_instance(cases, tmp_path, capsys):
    case = cases["sep"]
    text = _forge(case, _set((("probabilities_exact_from_floats",), True)))
    _rejected(case, text, "probabilities_exact_from_floats", tmp_path, capsys)


# ---------------------------------------------------------------------------- unknown and extra keys
@pytest.mark.parametrize("name,path,needle", [
    ("sep", ("claims", "svm_certified"), "claims: unknown key 'svm_certified'"),
    ("nosep", ("claims", "separable_strict"), "claims: unknown key"),
    ("sep", ("claims", "svm", "relative_gap"), "claims.svm: unknown key"),
    ("sep", ("note",), "certificate: unknown key 'note'"),
    ("sep", ("instance", "n"), "instance: unknown key"),
    ("sep", ("instance", "embedded", "weights"), "instance.embedded: unknown key 'weights'"),
    ("sep", ("compatibility", "verified"), "compatibility: unknown key"),
    ("incompat", ("compatibility", "null_space_basis"), "compatibility: unknown key 'null_space_basis'"),
    ("sep", ("compatibility", "violating_null_vector"), "compatibility: unknown key 'violating_null_vector'"),
    ("nosep", ("separability", "W"), "separability: unknown key 'W'"),
    ("nosep", ("separability", "reason"), "separability: unknown key 'reason'"),
    ("sep", ("svm", "relative_gap"), "svm: unknown key"),
    ("sep", ("compatibility", "W_star", "note"), "compatibility.W_star: unknown key"),
])
def test_unknown_keys_are_rejected_at_every_level(cases, name, path, needle, tmp_path, capsys):
    case = cases[name]
    if path[:2] == ("compatibility", "W_star") and "W_star" not in case.cert["compatibility"]:
        pytest.skip("no W_star in this certificate")
    _rejected(case, _forge(case, _set((path, [] if path[-1] in ("W", "null_space_basis", "violating_null_vector")
                                              else True))), needle, tmp_path, capsys)


@pytest.mark.parametrize("path", [("claims", "compatible"), ("instance", "fingerprint"), ("compatibility", "primes"),
                                  ("separability", "ray"), ("svm", "a"), ("checksum",)])
def test_missing_keys_are_rejected(cases, path, tmp_path, capsys):
    case = cases["nosep" if path == ("separability", "ray") else "sep"]

    def edit(cert: dict) -> None:
        obj = cert
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]

    cert = case.copy()
    edit(cert)
    text = jsonio.dumps(cert) if path != ("checksum",) else json.dumps(cert)
    _rejected(case, text, ".".join(path) + ": missing", tmp_path, capsys)


# ---------------------------------------------------------------------------- size cap, huge integers
def _too_large(case: Case, text: str, needle: str, tmp_path, capsys, *, as_dict: bool = True) -> None:
    """``text`` is TOO LARGE (exit 4, never INVALID), with a one-line reason containing ``needle``, through
    the CLI (text and --json, without and with --data), the library and the standalone checker."""
    path = tmp_path / "large.json"
    path.write_text(text)
    for extra in ([], ["--data", case.data]):
        assert main(["verify", str(path), *extra]) == EXIT_TOO_LARGE
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("TOO LARGE: ") and needle in lines[0] and "INVALID" not in lines[0], lines
        assert main(["verify", str(path), *extra, "--json"]) == EXIT_TOO_LARGE
        obj = json.loads(capsys.readouterr().out)
        assert obj["valid"] is False and obj["too_large"] is True and needle in obj["reason"]
    for inst in (None, case.instance):
        verdicts = [verify_text(text, inst), verify_file(path, inst)] + (
            [verify_certificate(json.loads(text), inst)] if as_dict else [])
        for v in verdicts:
            assert not v.valid and v.too_large and needle in v.reason and "\n" not in v.reason, v.reason
    ok, line = standalone(text)
    assert not ok and line.startswith("TOO LARGE: "), line


def test_oversize_file_is_refused_unread(cases, tmp_path, capsys):
    case = cases["sep"]
    path = tmp_path / "huge.cert.json"
    path.write_text(jsonio.dumps(case.cert))
    with open(path, "r+b") as fh:  # sparse: no disk used, nothing worth reading
        fh.truncate(jsonio.MAX_CERTIFICATE_BYTES + 1)
    assert os.path.getsize(path) > jsonio.MAX_CERTIFICATE_BYTES
    for extra, against in (([], "the embedded data"), (["--data", case.data], "the DATA given")):
        assert main(["verify", str(path), *extra]) == EXIT_TOO_LARGE
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("TOO LARGE") and "MAX_CERTIFICATE_BYTES" in lines[0] and "over the cap" in lines[0]
        assert against in lines[1]
    for inst in (None, case.instance):
        for v in (verify_file(path, inst), verify(str(path), inst)):
            assert not v.valid and v.too_large and "over the cap" in v.reason


def test_size_cap_is_a_module_constant_applied_to_text_too(cases, tmp_path, capsys, monkeypatch):
    case = cases["sep"]
    text = jsonio.dumps(case.cert)
    monkeypatch.setattr(jsonio, "MAX_CERTIFICATE_BYTES", len(text) - 1)
    monkeypatch.setattr(standalone_checker, "MAX_BYTES", len(text) - 1)  # the reference checker's own cap
    _too_large(case, text, "over the cap", tmp_path, capsys, as_dict=False)
    monkeypatch.setattr(jsonio, "MAX_CERTIFICATE_BYTES", len(text))
    assert verify_text(text).valid


@pytest.mark.parametrize("name,path", [("sep", ("instance", "m")), ("sep", ("claims", "compatible")),
                                       ("nosep", ("separability", "ray", 0, 0)), ("sep", ("compatibility", "dim_F"))])
def test_integer_literal_over_the_digit_cap_is_invalid_not_a_crash(cases, name, path, tmp_path, capsys):
    case = cases[name]
    huge = 10 ** (schema.MAX_JSON_INTEGER_DIGITS + 700)
    with jsonio.unlimited_int_digits():  # the forger's Python has no int-string limit
        text = _forge(case, _set((path, huge)))
    reason = _rejected(case, text, "digits", tmp_path, capsys, as_dict=False)
    assert "MAX_JSON_INTEGER_DIGITS" in reason
    # the same object handed over as a dict: refused by the schema, printed without converting it
    with jsonio.unlimited_int_digits():
        cert = json.loads(text)
    for inst in (None, case.instance):
        v = verify_certificate(cert, inst)
        assert not v.valid and ".".join(map(str, path[:2])) in v.reason and "bits" in v.reason


def test_huge_integer_inside_a_rational_string_is_read_and_rejected(cases, tmp_path, capsys):
    case = cases["sep"]
    big = "1" + "0" * 20000
    text = _bound(case, "gap", big)
    reason = _rejected(case, text, "svm.gap", tmp_path, capsys)
    assert "claimed >1e308" in reason


# ---------------------------------------------------------------------------- grafts
def test_svm_pair_on_a_non_separable_certificate(cases, tmp_path, capsys):
    host, donor = cases["nosep"], cases["sep"]
    cert = host.copy()
    cert["svm"] = copy.deepcopy(donor.cert["svm"])
    cert["claims"]["svm"] = copy.deepcopy(donor.cert["claims"]["svm"])
    _rejected(host, _sealed_text(cert), "svm", tmp_path, capsys)


def test_exact_fraction_bounds_still_agree_with_genuine_writer(cases):
    """The slack of the float bounds is far above the writer's rounding: the genuine bounds sit
    within a few ulps of their exact quantities."""
    svm = cases["sep"].cert["svm"]
    gap = parse_fraction(svm["gap"])
    rel = abs(Fraction(svm["distance_bound"]) ** 2 / (2 * gap) - 1)
    assert rel < Fraction(1, 2**45)


# ---------------------------------------------------------------------------- sparse counts
@pytest.fixture(scope="module")
def sparse_case(tmp_path_factory) -> Case:
    """Mostly-zero counts (supports of 1-2 of 12 tokens): embedded as ``counts_sparse``."""
    inst = random_instance(np.random.default_rng(3), 16, 5, 12, 1, 2)
    tmp = tmp_path_factory.mktemp("forgery-sparse")
    data, path = tmp / "sparse.json", tmp / "sparse.cert.json"
    write_json(inst, data)
    rep = exact_certify(inst, certificate_out=str(path))
    assert rep.check.valid, rep.check.reason
    return Case(inst, str(data), str(path), json.loads(path.read_text()))


def test_sparse_counts_are_written_and_verify(sparse_case, capsys):
    rec = sparse_case.cert["instance"]["embedded"]
    assert "counts" not in rec and rec["V"] == 12
    C = sparse_case.instance.counts
    assert rec["counts_sparse"] == [[int(j), int(t), int(C[j, t])] for j, t in zip(*np.nonzero(C))]
    assert decode.instance_from_record(rec).fingerprint() == sparse_case.instance.fingerprint()
    assert main(["verify", sparse_case.path, "--data", sparse_case.data]) == 0
    assert capsys.readouterr().out.startswith("VALID")


def _sparse_edit(fn):
    def edit(cert: dict) -> None:
        fn(cert["instance"]["embedded"])
    return edit


@pytest.mark.parametrize("name,edit,needle", [
    ("swapped", lambda r: r["counts_sparse"].insert(0, r["counts_sparse"].pop(1)), "does not come after"),
    ("repeated", lambda r: r["counts_sparse"].insert(1, list(r["counts_sparse"][0])), "does not come after"),
    ("zero count", lambda r: r["counts_sparse"][0].__setitem__(2, 0), "counts_sparse[0]: expected [j, t, c]"),
    ("negative count", lambda r: r["counts_sparse"][0].__setitem__(2, -3), "counts_sparse[0]: expected"),
    ("float count", lambda r: r["counts_sparse"][0].__setitem__(2, 2.0), "counts_sparse[0]: expected"),
    ("bool count", lambda r: r["counts_sparse"][0].__setitem__(2, True), "counts_sparse[0]: expected"),
    ("token out of range", lambda r: r["counts_sparse"][-1].__setitem__(1, 12), "counts_sparse[-1]"),
    ("context out of range", lambda r: r["counts_sparse"].append([16, 0, 1]), "counts_sparse["),
    ("short entry", lambda r: r["counts_sparse"][0].pop(), "counts_sparse[0]: expected"),
    ("V grown", lambda r: r.__setitem__("V", 13), "instance.V"),
    ("V huge", lambda r: r.__setitem__("V", 10**12), "instance."),
    ("V missing", lambda r: r.pop("V"), "instance.embedded.V: missing"),
    ("both forms", lambda r: r.__setitem__("counts", [[1] * 12] * 16), "instance.embedded: unknown key"),
    ("a count changed", lambda r: r["counts_sparse"][0].__setitem__(2, r["counts_sparse"][0][2] + 1), "fingerprint"),
    ("an entry dropped", lambda r: r["counts_sparse"].pop(0), "instance."),
])
def test_forged_sparse_counts_are_rejected(sparse_case, name, edit, needle, tmp_path, capsys):
    if needle == "counts_sparse[-1]":
        needle = f"counts_sparse[{len(sparse_case.cert['instance']['embedded']['counts_sparse']) - 1}]"
    _rejected(sparse_case, _forge(sparse_case, _sparse_edit(edit)), needle, tmp_path, capsys)


def test_sparse_counts_of_a_huge_matrix_are_refused_before_it_is_built(sparse_case, tmp_path, capsys):
    """Header and record agree on V = 10^12: refused by the cell cap, never allocated."""
    def edit(cert: dict) -> None:
        cert["instance"]["V"] = 10**12
        cert["instance"]["embedded"]["V"] = 10**12
    _too_large(sparse_case, _forge(sparse_case, edit), f"exceeds {fmt.MAX_SPARSE_CELLS} cells", tmp_path, capsys)


# ---------------------------------------------------------------------------- factored svm.W
@pytest.fixture(scope="module")
def factored_case(tmp_path_factory) -> Case:
    """The separable instance, its svm.W written factored and its dual sparse (thresholds lowered)."""
    inst = _separable()
    tmp = tmp_path_factory.mktemp("forgery-factored")
    data, path = tmp / "sep.json", tmp / "sep.cert.json"
    write_json(inst, data)
    old = encode.FACTORED_MIN_ENTRIES, encode.SPARSE_DUAL_MAX_FILL
    encode.FACTORED_MIN_ENTRIES, encode.SPARSE_DUAL_MAX_FILL = 0, 1.0
    try:
        rep = exact_certify(inst, certificate_out=str(path), use_lemma1=False)
    finally:
        encode.FACTORED_MIN_ENTRIES, encode.SPARSE_DUAL_MAX_FILL = old
    assert rep.check.valid, rep.check.reason
    return Case(inst, str(data), str(path), json.loads(path.read_text()))


def test_factored_w_is_the_same_matrix_and_verifies(cases, factored_case, capsys):
    svm = factored_case.cert["svm"]
    assert "W" not in svm and set(svm["W_factored"]) == {"scale", "base", "delta"}
    assert all(type(x) is int for row in svm["W_factored"]["base"] for x in row)  # written as integers
    dense = cases["sep"].cert["svm"]
    assert dense["gap"] == svm["gap"]  # the same pair, written two ways
    V, d = factored_case.instance.V, factored_case.instance.d
    assert decode.factored_rationals(svm["W_factored"], (V, d), "W").fractions() == \
        decode.matrix_fractions(dense["W"], (V, d), "W")
    assert main(["verify", factored_case.path, "--data", factored_case.data]) == 0
    assert capsys.readouterr().out.startswith("VALID")


def _factored(fn):
    def edit(cert: dict) -> None:
        fn(cert["svm"]["W_factored"])
    return edit


def _grow_scale(f: dict) -> None:
    s = parse_fraction(f["scale"])
    f["scale"] = fraction_str(s * 2)


def _shrink_scale(f: dict) -> None:
    f["scale"] = fraction_str(parse_fraction(f["scale"]) / 2)


def _nudge_base(f: dict) -> None:
    f["base"][0][0] = f["base"][0][0] + 1  # integers (a quantised point): one unit of the base


def _add_delta(f: dict) -> None:
    f["delta"].append([0, 0, "1/3"])


@pytest.mark.parametrize("name,edit,needle", [
    ("scale doubled", _factored(_grow_scale), "svm.gap"),
    ("scale halved", _factored(_shrink_scale), "svm.W"),
    ("base nudged", _factored(_nudge_base), "svm.W"),
    ("delta added", _factored(_add_delta), "svm.W"),
    ("delta repeated", _factored(lambda f: f["delta"].extend([[1, 1, "1/7"], [1, 1, "1/7"]])),
     "entry (1, 1) repeated"),
    ("delta out of range", _factored(lambda f: f["delta"].append([99, 0, "1"])), "index (99, 0) out of range"),
    ("delta not rational", _factored(lambda f: f["delta"].append([0, 0, "0.5"])), "svm.W_factored.delta["),
    ("delta malformed", _factored(lambda f: f["delta"].append([0, "1/2"])), "svm.W_factored.delta["),
    ("scale non-canonical", _factored(lambda f: f.__setitem__("scale", "2/4")), "svm.W_factored.scale"),
    ("scale a float", _factored(lambda f: f.__setitem__("scale", 0.5)), "svm.W_factored.scale"),
    ("base nan", _factored(lambda f: f["base"][1].__setitem__(2, "nan")), "svm.W_factored.base[1][2]"),
    ("base integer past 2^53", _factored(lambda f: f["base"][1].__setitem__(2, 2**53 + 1)), "svm.W_factored.base[1][2]"),
    ("base boolean", _factored(lambda f: f["base"][1].__setitem__(2, True)), "svm.W_factored.base[1][2]"),
    ("base short row", _factored(lambda f: f["base"][1].pop()), "svm.W_factored.base[1]"),
    ("base missing row", _factored(lambda f: f["base"].pop()), "svm.W_factored.base"),
    ("unknown key", _factored(lambda f: f.__setitem__("note", 1)), "svm.W_factored: unknown key 'note'"),
    ("scale missing", _factored(lambda f: f.pop("scale")), "svm.W_factored.scale: missing"),
    ("both forms", lambda c: c["svm"].__setitem__("W", [["0"] * 6] * 5), "svm: give exactly one of W and W_factored"),
    ("neither form", lambda c: c["svm"].pop("W_factored"), "svm.W: missing (give W or W_factored)"),
])
def test_forged_factored_w_is_rejected(factored_case, name, edit, needle, tmp_path, capsys):
    _rejected(factored_case, _forge(factored_case, edit), needle, tmp_path, capsys)


def test_sparse_dual_is_the_same_matrix_and_verifies(cases, factored_case):
    svm = factored_case.cert["svm"]
    V, m = factored_case.instance.V, factored_case.instance.m
    assert "a" not in svm and svm["a_sparse"]
    dense = decode.matrix_fractions(cases["sep"].cert["svm"]["a"], (V, m), "a")
    assert decode.sparse_rationals(svm["a_sparse"], (V, m), "a").fractions() == dense
    assert verify_certificate(factored_case.cert, factored_case.instance).valid


def _first_a(svm: dict) -> list:
    return svm["a_sparse"][0]


@pytest.mark.parametrize("name,edit,needle", [
    ("entry changed", lambda c: _first_a(c["svm"]).__setitem__(2, fraction_str(parse_fraction(_first_a(c["svm"])[2]) * 2)),
     "svm"),
    ("entry dropped", lambda c: c["svm"]["a_sparse"].pop(0), "svm"),
    ("entry repeated", lambda c: c["svm"]["a_sparse"].append(list(_first_a(c["svm"]))), "repeated"),
    ("out of range", lambda c: c["svm"]["a_sparse"].append([0, 99, "-1"]), "index (0, 99) out of range"),
    ("not canonical", lambda c: c["svm"]["a_sparse"].append([0, 0, "2/4"]), "svm.a_sparse["),
    ("malformed", lambda c: c["svm"]["a_sparse"].append([0, 0]), "svm.a_sparse["),
    ("both forms", lambda c: c["svm"].__setitem__("a", [["0"] * 4] * 5), "svm: give exactly one of a and a_sparse"),
    ("neither form", lambda c: c["svm"].pop("a_sparse"), "svm.a: missing (give a or a_sparse)"),
])
def test_forged_sparse_dual_is_rejected(factored_case, name, edit, needle, tmp_path, capsys):
    _rejected(factored_case, _forge(factored_case, edit), needle, tmp_path, capsys)


def test_integral_embeddings_are_written_as_integers_and_read_back_to_the_same_bytes(tmp_path):
    """One-hot embeddings travel as JSON integers; a -0.0 keeps the float spelling (its bytes differ)."""
    H = np.eye(4)[[0, 1, 2, 3, 0, 1]] * 2.0
    C = np.array([[1, 2, 0], [0, 1, 3], [2, 0, 1], [1, 1, 0], [0, 4, 1], [3, 0, 2]])
    inst = NTPInstance.from_counts(H, C)
    rec = encode.instance_record(inst)
    assert all(type(x) is int for row in rec["embeddings"] for x in row)
    assert decode.instance_from_record(rec).fingerprint() == inst.fingerprint()
    rep = exact_certify(inst, certificate_out=str(tmp_path / "c.json"))
    assert rep.check.valid and verify_file(tmp_path / "c.json", inst).valid
    Hz = H.copy()
    Hz[0, 3] = -0.0
    inst_z = NTPInstance.from_counts(Hz, C)
    rec_z = encode.instance_record(inst_z)
    assert type(rec_z["embeddings"][0][3]) is float
    assert decode.instance_from_record(rec_z).fingerprint() == inst_z.fingerprint() != inst.fingerprint()
