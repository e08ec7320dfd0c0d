"""Compact certificates and the one set of size limits.

* Large float embeddings travel packed (``embeddings_f64``, base64 of their binary64 bytes): a genuine
  packed certificate verifies with both checkers and decodes to the same instance (fingerprint); every
  malformed spelling (wrong length, bad base64, non-canonical padding bits, NaN, infinity, -0.0, the key
  beside another spelling) is INVALID in both.
* Producer and checkers share one table of limits (``ntpcert.certificate.format.LIMITS`` and its copy in
  tools/ntpcert_check.py); a certificate over one is TOO LARGE (exit 4) in both checkers, never INVALID,
  and ``certify --exact`` writes none (exit 2, one line, nothing written).
* Slow: a corpus of about 10^5 contexts gives a certificate of tens of MB that both checkers read.
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import decode, encode, jsonio, packed, schema
from ntpcert.certificate import format as fmt
from ntpcert.certificate.checker import verify_file, verify_text
from ntpcert.cli.app import main
from ntpcert.cli.verify import EXIT_INVALID, EXIT_TOO_LARGE
from ntpcert.errors import CertificateError, InputError
from ntpcert.instance.io import write_json
from ntpcert.pipeline.exact_verdicts import exact_certify

from .conftest import random_instance
from .standalone import PATH, standalone
from .standalone import checker as standalone_checker

ROOT = PATH.parent.parent


# ---------------------------------------------------------------------------- one set of limits
def test_the_standalone_checker_holds_the_same_limits_as_the_format() -> None:
    """The checker's LIMITS, read as a literal from its source (it imports nothing from ntpcert) and as
    loaded, equal the format's; every named constant on either side is its entry of the table."""
    tree = ast.parse(PATH.with_name("ntpcert_check_exact.py").read_text(encoding="utf-8"))
    literal = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                   and any(getattr(t, "id", None) == "LIMITS" for t in node.targets))
    assert ast.literal_eval(literal) == fmt.LIMITS == standalone_checker.LIMITS
    assert set(fmt.LIMITS) == {"certificate_bytes", "json_integer_digits", "sparse_count_cells",
                               "sparse_embedding_cells", "why_not_cells"}
    pairs = [(fmt.MAX_CERTIFICATE_BYTES, "certificate_bytes"), (jsonio.MAX_CERTIFICATE_BYTES, "certificate_bytes"),
             (schema.MAX_JSON_INTEGER_DIGITS, "json_integer_digits"), (fmt.MAX_SPARSE_CELLS, "sparse_count_cells"),
             (fmt.MAX_SPARSE_EMBEDDING_CELLS, "sparse_embedding_cells"), (fmt.MAX_WHY_NOT_CELLS, "why_not_cells"),
             (standalone_checker.MAX_BYTES, "certificate_bytes"),
             (standalone_checker.MAX_INT_DIGITS, "json_integer_digits"),
             (standalone_checker.MAX_SPARSE_CELLS, "sparse_count_cells"),
             (standalone_checker.MAX_SPARSE_EMBEDDING_CELLS, "sparse_embedding_cells")]
    for value, key in pairs:
        assert value == fmt.LIMITS[key], key


# ---------------------------------------------------------------------------- packed embeddings
def _gaussian(seed: int = 11) -> NTPInstance:
    """A Gaussian H (every entry a non-integer float) with m·d = 35 entries (8·35 bytes: base64 padding)."""
    return random_instance(np.random.default_rng(seed), 5, 7, 4, 1, 3)


@pytest.fixture(scope="module")
def packed_case(tmp_path_factory):
    """A genuine certificate of a Gaussian instance with its H packed (threshold lowered), and its file."""
    inst = _gaussian()
    path = tmp_path_factory.mktemp("packed") / "c.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(encode, "PACKED_MIN_ENTRIES", 1)
        rep = exact_certify(inst, certificate_out=str(path))
    assert rep.check.valid, rep.check.reason
    return inst, json.loads(path.read_text()), path


def test_a_packed_certificate_verifies_with_both_checkers(packed_case, capsys) -> None:
    inst, cert, path = packed_case
    rec = cert["instance"]["embedded"]
    assert "embeddings" not in rec and rec["embeddings_shape"] == [inst.m, inst.d]
    assert len(rec["embeddings_f64"]) == packed.packed_length(inst.m * inst.d)
    assert main(["verify", str(path)]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    assert verify_file(path, inst).valid  # against the data too: the same fingerprint
    ok, line = standalone(path.read_bytes())
    assert ok, line
    run = subprocess.run([sys.executable, str(PATH), str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("VALID"), run.stdout + run.stderr


def test_packed_embeddings_decode_to_the_same_instance() -> None:
    """Round trip: the record's H is the instance's H byte for byte, so the fingerprint is the same."""
    inst = _gaussian(12)
    H = np.asarray(inst.embeddings, dtype=np.float64)
    text = encode.pack_f64(H)
    assert base64.b64decode(text) == H.astype("<f8").tobytes()
    back = packed.unpack_f64(text, H.shape, "f")
    assert back.tobytes() == H.tobytes()
    rec = {**{k: v for k, v in encode.instance_record(inst).items() if k != "embeddings"},
           "embeddings_shape": list(H.shape), "embeddings_f64": text}
    assert decode.instance_from_record(rec).fingerprint() == inst.fingerprint()


def test_which_embeddings_are_packed() -> None:
    """Large float H packed; small float H and integer H stay readable; a -0.0 (not packable) stays dense."""
    rng = np.random.default_rng(3)
    m, V = 10, 3
    d = -(-encode.PACKED_MIN_ENTRIES // m)
    C = np.ones((m, V), dtype=np.int64)
    big = encode.instance_record(NTPInstance.from_counts(rng.standard_normal((m, d)), C))
    assert "embeddings_f64" in big and "embeddings" not in big
    small = encode.instance_record(NTPInstance.from_counts(rng.standard_normal((m, 4)), C))
    assert "embeddings" in small and type(small["embeddings"][0][0]) is float
    ints = encode.instance_record(NTPInstance.from_counts(rng.integers(1, 9, (m, d)).astype(float), C))
    assert "embeddings" in ints and type(ints["embeddings"][0][0]) is int
    Hz = rng.standard_normal((m, d))
    Hz[2, 5] = -0.0
    assert not packed.can_pack(Hz)
    assert "embeddings" in encode.instance_record(NTPInstance.from_counts(Hz, C))
    with pytest.raises(InputError):
        encode.pack_f64(Hz)


def _bits(x: float) -> str:
    """The base64 of one little-endian binary64 value (no padding issue: used inside 3-byte groups only)."""
    return base64.b64encode(struct.pack("<d", x)).decode("ascii")


def _replace_entry(text: str, k: int, raw: bytes) -> str:
    """The packed text with entry k replaced by the bytes ``raw`` (8 of a float64, 4 of a float32)."""
    data = bytearray(base64.b64decode(text))
    w = len(raw)
    data[w * k:w * k + w] = raw
    return base64.b64encode(bytes(data)).decode("ascii")


def _last_char_bits(text: str) -> str:
    """The same bytes with the unused low bits of the last data character set (a second spelling)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = text.rstrip("=")
    pad = len(text) - len(body)
    assert pad, "the test instance has padding (8 m d is not a multiple of 3)"
    last = alphabet.index(body[-1]) | (1 if pad == 1 else 3)  # 2 unused bits with one '=', 4 with two
    return body[:-1] + alphabet[last] + "=" * pad


FORGERIES = {
    "four characters short": (lambda t: t[:-4], "characters, expected"),
    "four characters more": (lambda t: t + "AAAA", "characters, expected"),
    "a character outside the alphabet": (lambda t: "!" + t[1:], "not base64"),
    "a space inside": (lambda t: t[:8] + " " + t[9:], "not base64"),
    "padding in the middle": (lambda t: t[:4] + "====" + t[8:], "not"),
    "unused bits set": (_last_char_bits, "canonical"),
    "a NaN": (lambda t: _replace_entry(t, 3, struct.pack("<d", float("nan"))), "not finite"),
    "a signalling NaN pattern": (lambda t: _replace_entry(t, 0, bytes.fromhex("010000000000f07f")), "not finite"),
    "an infinity": (lambda t: _replace_entry(t, 7, struct.pack("<d", float("-inf"))), "not finite"),
    "-0.0": (lambda t: _replace_entry(t, 2, struct.pack("<d", -0.0)), "-0.0"),
}


def _forged(cert: dict, edit) -> str:
    forged = copy.deepcopy(cert)
    edit(forged["instance"]["embedded"])
    return jsonio.dumps(forged)  # resealed: only the reading can catch it


def _both_refuse(text: str, needle: str, tmp_path, capsys) -> None:
    """INVALID (never TOO LARGE) in verify, from text, from a file and through the CLI, with ``needle``
    in the one-line reason; INVALID in the standalone checker."""
    v = verify_text(text)
    assert not v.valid and not v.too_large and needle in v.reason and "\n" not in v.reason, v.reason
    path = tmp_path / "forged.json"
    path.write_text(text)
    assert main(["verify", str(path)]) == EXIT_INVALID
    assert capsys.readouterr().out.startswith("INVALID: ")
    ok, line = standalone(text)
    assert not ok and line.startswith("INVALID: "), line


@pytest.mark.parametrize("name", list(FORGERIES))
def test_forged_packed_embeddings_are_refused_by_both_checkers(packed_case, name, tmp_path, capsys) -> None:
    _, cert, _ = packed_case
    edit, needle = FORGERIES[name]
    text = _forged(cert, lambda rec: rec.__setitem__("embeddings_f64", edit(rec["embeddings_f64"])))
    _both_refuse(text, needle, tmp_path, capsys)


@pytest.mark.parametrize("name,edit,needle", [
    ("beside dense embeddings", lambda r: r.__setitem__("embeddings", [[0.5] * r["embeddings_shape"][1]]
                                                        * r["embeddings_shape"][0]), "instance.embedded"),
    ("without its shape", lambda r: r.pop("embeddings_shape"), "instance.embedded"),
    ("a shape that is not the header's", lambda r: r.__setitem__("embeddings_shape", r["embeddings_shape"][::-1]),
     "embeddings_shape"),
    ("not a string", lambda r: r.__setitem__("embeddings_f64", [1.0]), "embeddings_f64"),
    ("beside sparse embeddings", lambda r: r.__setitem__("embeddings_sparse", []), "instance.embedded"),
])
def test_packed_embeddings_in_a_wrong_place_are_refused(packed_case, name, edit, needle, tmp_path, capsys) -> None:
    _, cert, _ = packed_case
    _both_refuse(_forged(cert, edit), needle, tmp_path, capsys)


def test_a_changed_packed_entry_is_another_instance(packed_case, tmp_path, capsys) -> None:
    """A well-formed packed H with one entry changed: both checkers name the fingerprint."""
    inst, cert, _ = packed_case
    x = float(np.asarray(inst.embeddings)[0, 1])
    text = _forged(cert, lambda r: r.__setitem__("embeddings_f64", _replace_entry(
        r["embeddings_f64"], 1, struct.pack("<d", x + 0.25))))
    v = verify_text(text)
    assert not v.valid and not v.too_large and "fingerprint" in v.reason, v.reason
    ok, line = standalone(text)
    assert not ok and "fingerprint" in line, line


def test_unpack_checks_the_length_before_decoding() -> None:
    with pytest.raises(CertificateError, match="expected 108 "):
        packed.unpack_f64("A" * 10**6, (10, 1), "f")  # 80 bytes: 108 characters, not a million
    assert packed.packed_length(1) == 12 and packed.packed_length(3) == 32
    assert len(_bits(1.5)) == 12


# ---------------------------------------------------------------------------- too large, never INVALID
def test_an_over_cap_file_is_too_large_in_both_checkers(tmp_path, capsys) -> None:
    """A file one byte over the shared cap (sparse on disk: nothing is read): exit 4 and TOO LARGE from
    ntpcert verify and from tools/ntpcert_check.py, never INVALID."""
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.truncate(fmt.MAX_CERTIFICATE_BYTES + 1)
    assert main(["verify", str(path)]) == EXIT_TOO_LARGE
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("TOO LARGE: ") and "over the cap" in out[0] and "INVALID" not in out[0]
    assert main(["verify", str(path), "--json"]) == EXIT_TOO_LARGE
    obj = json.loads(capsys.readouterr().out)
    assert obj["valid"] is False and obj["too_large"] is True
    run = subprocess.run([sys.executable, str(PATH), str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 4 and run.stdout.startswith("TOO LARGE: ") and "INVALID" not in run.stdout, run.stdout


def test_the_standalone_main_refuses_a_file_over_its_cap_unread(packed_case, monkeypatch, capsys) -> None:
    _, _, path = packed_case
    monkeypatch.setattr(standalone_checker, "MAX_BYTES", os.path.getsize(path) - 1)
    assert standalone_checker.main([str(path)]) == 4
    assert capsys.readouterr().out.startswith("TOO LARGE: file: ")
    monkeypatch.setattr(standalone_checker, "MAX_BYTES", os.path.getsize(path))
    assert standalone_checker.main([str(path)]) == 0


def test_certify_writes_no_certificate_its_checkers_would_refuse_for_size(tmp_path, monkeypatch, capsys) -> None:
    """With the cap below the certificate's size, certify --exact says so in one line, exit 2, and writes
    nothing; the library raises InputError naming certificate_out."""
    inst = _gaussian(13)
    data = tmp_path / "data.json"
    write_json(inst, data)
    monkeypatch.setattr(jsonio, "MAX_CERTIFICATE_BYTES", 2000)
    out = tmp_path / "c.json"
    with pytest.raises(InputError, match="certificate_out: .*over the cap of 2000 bytes.*nothing written"):
        exact_certify(inst, certificate_out=str(out))
    assert not out.exists()
    assert main(["certify", str(data), "--exact", "--certificate-out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over the cap of 2000 bytes" in err[0] and "nothing written" in err[0], err
    assert not out.exists() and list(tmp_path.iterdir()) == [data]


@pytest.mark.parametrize("make", [
    lambda: _gaussian(14),  # dense floats
    lambda: NTPInstance.from_counts(np.eye(40)[np.arange(60) % 40] * 3.0, np.eye(60, 5, dtype=np.int64) + 1),
    lambda: NTPInstance.from_counts(np.random.default_rng(4).integers(-3, 4, (30, 50)).astype(float),
                                    np.random.default_rng(5).integers(0, 3, (30, 200)) * (np.arange(200) < 3) + 1),
    lambda: NTPInstance.from_probs(np.random.default_rng(6).standard_normal((3, 2)),
                                   [[0.9, 0.1, 0.0], [0.25, 0.0, 0.75], [0.0, 0.5, 0.5]], [0.5, 0.25, 0.25]),
])
def test_the_size_lower_bound_is_below_the_record(make, monkeypatch) -> None:
    """record_size_lower_bound never exceeds the record's canonical size, packed or not."""
    inst = make()
    for threshold in (encode.PACKED_MIN_ENTRIES, 1):
        monkeypatch.setattr(encode, "PACKED_MIN_ENTRIES", threshold)
        assert 0 < encode.record_size_lower_bound(inst) <= len(jsonio.canonical_json(encode.instance_record(inst)))


def test_certify_refuses_before_the_work_when_the_instance_alone_is_over_the_cap(tmp_path, monkeypatch) -> None:
    inst = _gaussian(15)
    monkeypatch.setattr(jsonio, "MAX_CERTIFICATE_BYTES", encode.record_size_lower_bound(inst) - 1)
    out = tmp_path / "c.json"
    with pytest.raises(InputError, match="would take at least .* nothing written"):
        exact_certify(inst, certificate_out=str(out))
    assert not out.exists()


def test_a_reduction_too_large_to_rebuild_is_too_large_not_invalid(monkeypatch) -> None:
    """A frequent-token certificate whose reduced system is over the cells verify rebuilds: TOO LARGE."""
    from ntpcert.certificate.checker import reduction
    from ntpcert.certificate.checker import verify_certificate
    from ntpcert.pipeline import decide as dm
    from ntpcert.pipeline import parts

    monkeypatch.setattr(dm, "GRAM_MAX_ROWS", 1)
    monkeypatch.setattr(parts, "PART_MIN_CONTEXTS", 10 ** 9)
    inst = NTPInstance.from_counts([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[1, 2], [1, 3], [1, 6]])
    rep = exact_certify(inst, svm=False)
    assert rep.check.valid and "frequent_tokens_modulus" in rep.certificate["compatibility"]
    monkeypatch.setattr(reduction, "MAX_REDUCED_CELLS", 1)
    v = verify_certificate(rep.certificate)
    assert not v.valid and v.too_large and "MAX_REDUCED_CELLS" in v.reason, v.reason


# ---------------------------------------------------------------------------- a corpus of 10^5 contexts
def _timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return run, time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.parametrize("embedding,contexts,most_mb", [("onehot-concat", 99_050, 50), ("random:256", 24_939, 100)])
def test_a_corpus_certificate_is_tens_of_mb_and_both_checkers_read_it(tmp_path, embedding, contexts, most_mb) -> None:
    """The pydoc text in characters, k = 6 (m = 99,050 contexts), one-hot: a certificate of tens of MB
    (11.8 MB), not hundreds; word pairs with Gaussian embeddings (m = 24,939) packed: 73 MB instead of
    139 MB. Both checkers read and accept each."""
    cert = tmp_path / "corpus.cert.json"
    corpus = (["-k", "6"] if embedding == "onehot-concat" else ["--tokenizer", "word", "-k", "2"])
    run, _ = _timed([sys.executable, "-m", "ntpcert", "certify", "pydoc", "--max-chars", "500000", *corpus,
                     "--embedding", embedding, "--max-entries", "100000000", "--exact", "--no-svm",
                     "--certificate-out", str(cert)])
    assert run.returncode == 0 and f"m={contexts} contexts" in run.stdout, run.stdout + run.stderr
    size = cert.stat().st_size
    assert 5 * 2**20 < size < most_mb * 2**20 < fmt.MAX_CERTIFICATE_BYTES, size
    run, _ = _timed([sys.executable, "-m", "ntpcert", "verify", str(cert)])
    assert run.returncode == 0 and run.stdout.startswith("VALID"), run.stdout[:2000] + run.stderr
    run, _ = _timed([sys.executable, str(PATH), str(cert)])
    assert run.returncode == 0 and run.stdout.startswith("VALID"), run.stdout + run.stderr
