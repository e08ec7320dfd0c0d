"""Certificate files: `certify --exact` writes what `verify` accepts, and every tampering is caught."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import decode
from ntpcert.certificate import encode
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_certificate, verify_text
from ntpcert.cli.app import main
from ntpcert.cli.verify import EXIT_INVALID
from ntpcert.exact.rational import fraction_str, parse_fraction
from ntpcert.instance.io import write_json

from .conftest import random_instance

ROOT = Path(__file__).resolve().parents[1]


def _separable(seed=1):
    return random_instance(np.random.default_rng(seed), 4, 6, 5, 1, 4)


def _not_separable():
    rng = np.random.default_rng(7)
    h = rng.standard_normal(3)
    H = np.vstack([h, h, rng.standard_normal((2, 3))])
    C = np.array([[2, 1, 0, 0], [0, 3, 1, 0], [1, 0, 0, 4], [0, 0, 5, 1]])
    return NTPInstance.from_counts(H, C)


def _incompatible():
    h = np.array([0.5, -1.0, 0.75])
    return NTPInstance.from_counts(np.array([h, 2 * h, [1.0, 0.0, 0.0]]), [[1, 2, 0], [1, 5, 0], [0, 3, 1]])


def _certify(tmp_path, inst, name, capsys):
    data = tmp_path / f"{name}.json"
    write_json(inst, data)
    cert = tmp_path / f"{name}.cert.json"
    rc = main(["certify", str(data), "--exact", "--json", "--certificate-out", str(cert)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    return data, cert, out


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("certs")
    out = {}
    for name, inst in [("sep", _separable()), ("nosep", _not_separable()), ("incompat", _incompatible())]:
        data = tmp / f"{name}.json"
        write_json(inst, data)
        path = tmp / f"{name}.cert.json"
        extra = ["--no-lemma1"] if name == "sep" else []  # an explicit feasible W to forge
        assert main(["certify", str(data), "--exact", "--json", "--certificate-out", str(path), *extra]) == 0
        out[name] = (data, path, json.loads(path.read_text()))
    return out


def _verify(cert: dict) -> tuple[bool, str]:
    v = verify_certificate(cert)
    return v.valid, v.reason


def _resealed(cert: dict) -> dict:
    return jsonio.seal(cert)


# ---------------------------------------------------------------------------- accepted
def test_certify_exact_json_has_the_float_keys_and_the_exact_ones(tmp_path, capsys):
    _, cert, out = _certify(tmp_path, _separable(), "a", capsys)
    for key in ("m", "d", "V", "entropy", "compatible", "separable", "entropy_bound_reachable", "svm"):
        assert key in out
    assert out["exact"] is True and out["certificate"] == str(cert) and out["certificate_valid"] is True
    assert out["compatible"]["holds"] is True and "residual" in out["compatible"]
    assert out["separable"]["holds"] is True
    for key in ("norm", "objective", "primal_residual", "dual_residual", "gap"):
        assert key in out["svm"]
    ex = out["svm"]["exact"]
    assert ex["primal_feasible"] and ex["norm_lower"] <= out["svm"]["norm"] * (1 + 1e-9) <= ex["norm_upper"] * (1 + 2e-9)


@pytest.mark.parametrize("name", ["sep", "nosep", "incompat"])
def test_verify_accepts_what_certify_exact_writes(certs, name, capsys):
    data, path, cert = certs[name]
    assert main(["verify", str(path)]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    assert main(["verify", str(path), "--data", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_known_verdicts_of_the_three_certificates(certs):
    assert certs["sep"][2]["claims"]["entropy_bound_reachable"] is True
    assert certs["nosep"][2]["claims"]["separable"] is False
    assert certs["incompat"][2]["claims"]["compatible"] is False
    assert certs["incompat"][2]["claims"]["entropy_bound_reachable"] is False


def test_without_certificate_out_nothing_is_written_and_the_path_is_null(tmp_path, capsys, monkeypatch):
    data = tmp_path / "x.json"
    write_json(_separable(), data)
    monkeypatch.chdir(tmp_path)
    assert main(["certify", str(data), "--exact", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certificate"] is None and out["certificate_valid"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_human_report_names_the_witnesses(tmp_path, capsys):
    data = tmp_path / "n.json"
    write_json(_not_separable(), data)
    assert main(["certify", str(data), "--exact"]) == 0
    text = capsys.readouterr().out
    assert "Farkas ray" in text and "VALID" in text


# ---------------------------------------------------------------------------- rejected
def _flip(s: str) -> str:
    f = parse_fraction(s)
    return fraction_str(-f - 1 if f == 0 else -f)


def test_flipped_feasible_witness_entry_is_rejected(certs):
    cert = copy.deepcopy(certs["sep"][2])
    cert["separability"]["W"][0][0] = _flip(cert["separability"]["W"][0][0])
    ok, why = _verify(cert)
    assert not ok and "checksum" in why  # an edit without resealing
    ok, why = _verify(_resealed(cert))
    assert not ok and "separability.W" in why and ("(6a)" in why or "(6b)" in why)


def test_flipped_farkas_entry_is_rejected(certs):
    cert = copy.deepcopy(certs["nosep"][2])
    cert["separability"]["ray"][0][2] = _flip(cert["separability"]["ray"][0][2])
    ok, why = _verify(_resealed(cert))
    assert not ok and "separability.ray" in why


def test_flipped_null_vector_entry_is_rejected(certs):
    cert = copy.deepcopy(certs["incompat"][2])
    vec = cert["compatibility"]["violating_null_vector"]
    vec[0][2] = fraction_str(parse_fraction(vec[0][2]) + 1)
    ok, why = _verify(_resealed(cert))
    assert not ok and "violating_null_vector" in why


def test_flipped_dual_entry_breaks_the_gap(certs):
    cert = copy.deepcopy(certs["sep"][2])
    if "a" in cert["svm"]:
        a = cert["svm"]["a"]
        v = next(i for i, row in enumerate(a) if parse_fraction(row[0]) != 0)
        a[v][0] = fraction_str(parse_fraction(a[v][0]) * Fraction(3, 2))
    else:  # the exact KKT pair's rational dual, written sparse
        entry = cert["svm"]["a_sparse"][0]
        entry[2] = fraction_str(parse_fraction(entry[2]) * Fraction(3, 2))
    ok, why = _verify(_resealed(cert))
    assert not ok and "svm" in why


def test_witness_for_another_instance_is_rejected(certs, capsys):
    # checked against the wrong DATA
    assert main(["verify", str(certs["sep"][1]), "--data", str(certs["nosep"][0])]) == EXIT_INVALID
    assert "speaks of instance" in capsys.readouterr().out
    # the witnesses of one instance grafted onto the other
    host = copy.deepcopy(certs["nosep"][2])
    donor = certs["sep"][2]
    for key in ("claims", "compatibility", "separability", "svm"):
        host[key] = copy.deepcopy(donor[key])
    ok, why = _verify(_resealed(host))
    assert not ok
    # another instance embedded under the original fingerprint
    swapped = copy.deepcopy(certs["sep"][2])
    swapped["instance"]["embedded"] = copy.deepcopy(certs["nosep"][2]["instance"]["embedded"])
    ok, why = _verify(_resealed(swapped))
    assert not ok and "instance.d" in why  # its sizes already disagree with the header
    # the same instance with one count changed, under the original fingerprint
    swapped = copy.deepcopy(certs["sep"][2])
    counts = swapped["instance"]["embedded"]["counts"]
    z = next(k for k, c in enumerate(counts[0]) if c > 0)
    counts[0][z] += 1
    ok, why = _verify(_resealed(swapped))
    assert not ok and "fingerprint" in why


@pytest.mark.parametrize("path,value", [
    (("claims", "separable"), False),
    (("claims", "compatible"), False),
    (("claims", "entropy_bound_reachable"), None),
    (("compatibility", "dim_F"), 3),
])
def test_wrong_claims_are_rejected(certs, path, value):
    cert = copy.deepcopy(certs["sep"][2])
    cert[path[0]][path[1]] = value
    ok, why = _verify(_resealed(cert))
    assert not ok and path[-1] in why


def test_wrong_gap_claim_is_rejected(certs):
    cert = copy.deepcopy(certs["sep"][2])
    gap = parse_fraction(cert["svm"]["gap"])
    cert["svm"]["gap"] = cert["claims"]["svm"]["gap"] = fraction_str(gap / 2)
    ok, why = _verify(_resealed(cert))
    assert not ok and "svm.gap" in why
    cert = copy.deepcopy(certs["sep"][2])
    cert["svm"]["distance_bound"] = cert["claims"]["svm"]["distance_bound"] = 0.0
    ok, why = _verify(_resealed(cert))
    assert not ok and "distance_bound" in why


def test_claiming_compatibility_without_the_full_null_space_is_rejected(certs):
    cert = copy.deepcopy(certs["incompat"][2])
    cert["compatibility"]["claim"] = True
    cert["compatibility"]["null_space_basis"] = []
    cert["compatibility"]["dim_F"] = cert["compatibility"]["n_eq"]  # "full row rank", which it is not
    del cert["compatibility"]["violating_null_vector"]
    cert["claims"]["compatible"] = True
    cert["claims"]["entropy_bound_reachable"] = cert["claims"]["separable"]
    ok, why = _verify(_resealed(cert))
    assert not ok and "rank" in why


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.99])
def test_truncated_file_is_invalid_not_a_traceback(certs, tmp_path, capsys, cut):
    text = certs["sep"][1].read_text()
    bad = tmp_path / "t.json"
    bad.write_text(text[: int(len(text) * cut)])
    assert main(["verify", str(bad)]) == EXIT_INVALID
    out, err = capsys.readouterr()
    assert out.startswith("INVALID") and "JSON" in out and "Traceback" not in err


@pytest.mark.parametrize("text,needle", [
    ("[]", "not an object"),
    ('{"format": "other"}', "format"),
    ('{"format": "ntpcert-certificate", "version": 99}', "version"),
    ("\x00\x01", "JSON"),
])
def test_not_a_certificate(text, needle):
    v = verify_text(text)
    assert not v.valid and needle in v.reason


def test_missing_cert_file_is_bad_input(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "none.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_certificate_out_into_missing_directory_is_bad_input_and_writes_nothing(tmp_path, capsys):
    data = tmp_path / "x.json"
    write_json(_separable(), data)
    assert main(["certify", str(data), "--exact", "--certificate-out", str(tmp_path / "no" / "c.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_probabilities_from_floats_are_flagged_in_output_and_certificate(tmp_path, capsys):
    rng = np.random.default_rng(3)
    inst = NTPInstance.from_probs(rng.standard_normal((3, 5)), [[0.1, 0.9, 0, 0], [0, 0.3, 0.7, 0], [0.25, 0, 0, 0.75]])
    data, cert, out = _certify(tmp_path, inst, "f", capsys)
    assert out["probabilities_exact_from_floats"] is True
    saved = json.loads(cert.read_text())
    assert saved["probabilities_exact_from_floats"] is True
    assert main(["certify", str(data), "--exact"]) == 0
    assert "taken as the exact" in capsys.readouterr().out
    assert main(["verify", str(cert)]) == 0


# ---------------------------------------------------------------------------- fast writers
def _dyadic_matrix(rng: np.random.Generator, shape=(30, 20)) -> np.ndarray:
    A = rng.standard_normal(shape) * np.exp2(rng.integers(-70, 70, shape))
    A[rng.random(shape) < 0.2] = 0.0
    A[0, :4] = [3.0, -(2.0 ** 60), 5e-324, -1.0]  # an integer, a large power of two, a subnormal
    return A


@pytest.mark.parametrize("seed", range(3))
def test_to_strings_dyadic_matches_fraction_str(seed):
    A = _dyadic_matrix(np.random.default_rng(seed))
    assert encode.to_strings_dyadic(A) == [[fraction_str(Fraction(float(x))) for x in row] for row in A]


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(3, 7), Fraction(2**40, 3**20), Fraction(9, 5 * 2**30),
                                   Fraction(1, 2**53 - 1), Fraction(12345678901, 8), Fraction(1, 3 * 2**70)])
def test_scaled_dyadic_strings_matches_fractions(scale):
    """scale * (B + Delta) in lowest terms, repeated corrections adding up, as Fractions would write it."""
    B = _dyadic_matrix(np.random.default_rng(7))
    delta = [(1, 2, Fraction(1, 3)), (1, 2, Fraction(-1, 5)), (4, 4, Fraction(7, 2**80)), (0, 0, Fraction(-3))]
    exact = [[Fraction(float(x)) for x in row] for row in B]
    for i, k, dl in delta:
        exact[i][k] += dl
    want = [[fraction_str(x * scale) for x in row] for row in exact]
    got = encode.scaled_dyadic_strings(B, scale, delta)
    assert got == want
    # and what the reader takes back is the same matrix
    assert decode.matrix_fractions(got, B.shape, "W") == [[x * scale for x in row] for row in exact]


def test_scaled_dyadic_strings_refuses_a_non_positive_scale():
    with pytest.raises(Exception, match="not positive"):
        encode.scaled_dyadic_strings(np.ones((1, 1)), Fraction(0))


def test_large_certificates_are_written_compact_and_read_the_same(monkeypatch):
    inst = random_instance(np.random.default_rng(3), m=6, d=4, V=5)
    from ntpcert.pipeline.exact_verdicts import exact_certify

    cert = exact_certify(inst, progress=False).certificate
    pretty = jsonio.dumps(cert)
    monkeypatch.setattr(jsonio, "PRETTY_MAX_ENTRIES", 0)
    compact = jsonio.dumps(cert)
    assert "\n " in pretty and compact.count("\n") == 1
    assert jsonio.loads(compact) == jsonio.loads(pretty) == jsonio.seal(cert)
    assert verify_text(compact).valid
    assert jsonio.dumps(cert, reseal=False) == compact  # a sealed certificate keeps its checksum


def test_the_int_string_limit_is_lifted_only_around_reading_and_writing(tmp_path):
    """Importing ntpcert, certifying, writing, reading back and checking a certificate leave the
    interpreter's int-string limit as it was; inside, a witness of more digits than the limit is read
    and written all the same."""
    import subprocess
    import sys

    code = (  # a fresh interpreter: nothing imported before the check
        "import sys; sys.set_int_max_str_digits(4321)\n"
        "import numpy as np, ntpcert\n"
        "from ntpcert.certificate import decode, encode, jsonio\n"
        "from ntpcert.certificate.checker import verify_file\n"
        "from tests.conftest import random_instance\n"
        "assert sys.get_int_max_str_digits() == 4321, 'import'\n"
        "inst = random_instance(np.random.default_rng(3), m=6, d=4, V=5)\n"
        f"rep = ntpcert.exact_certify(inst, progress=False, certificate_out={str(tmp_path / 'c.json')!r})\n"
        "assert sys.get_int_max_str_digits() == 4321, 'exact_certify'\n"
        f"cert = jsonio.load({str(tmp_path / 'c.json')!r}); jsonio.save(cert, {str(tmp_path / 'd.json')!r})\n"
        f"assert verify_file({str(tmp_path / 'd.json')!r}).valid and ntpcert.verify(cert).valid\n"
        "assert sys.get_int_max_str_digits() == 4321, 'load, save, verify'\n"
        "with jsonio.unlimited_int_digits():\n"
        "    assert sys.get_int_max_str_digits() == 0\n"
        "assert sys.get_int_max_str_digits() == 4321, 'restored'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with jsonio.unlimited_int_digits():
        text = str(10**5000 + 1)  # past the default limit of 4,300 digits
    rows = [[text, "0"]]
    assert decode.matrix_rationals(rows, (1, 2), "W").fractions() == [[10**5000 + 1, 0]]
    assert encode.sparse_list({(0, 0): Fraction(10**5000 + 1)})[0][2] == text


def test_a_certificate_its_checker_refuses_is_not_written(tmp_path, monkeypatch):
    import dataclasses

    from ntpcert.pipeline import exact_verdicts
    from ntpcert.report.text import exact_report_lines

    real = exact_verdicts.verify_certificate

    def refusing(cert, instance=None, **kwargs):
        return dataclasses.replace(real(cert, instance, **kwargs), valid=False, reason="refused for the test")

    monkeypatch.setattr(exact_verdicts, "verify_certificate", refusing)
    out = tmp_path / "c.json"
    rep = exact_verdicts.exact_certify(_separable(), certificate_out=str(out))
    assert not out.exists() and rep.path is None and not rep.check.valid
    assert rep.entropy_bound_reachable is None
    assert any("INVALID (refused for the test)" in line and "not written" in line for line in exact_report_lines(rep))
