"""``verify_certificate(cert, sealed_text=...)``: the checksum taken over the text about to be written.

``certify --exact`` seals a certificate once (:func:`~ntpcert.certificate.jsonio.seal_canonical`)
and checks it before writing; the checker then hashes those bytes instead of encoding the object a
second time. A text that is not the certificate's sealed text must fail as a checksum mismatch, and
every other section is still checked on the object.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_certificate, verify_text
from ntpcert.pipeline.exact_verdicts import exact_certify

from .conftest import random_instance


@pytest.fixture(scope="module")
def sealed():
    inst = random_instance(np.random.default_rng(23), 8, 6, 10, 1, 3)
    rep = exact_certify(inst, use_lemma1=False)
    assert rep.check.valid, rep.check.reason
    body = {k: v for k, v in rep.certificate.items() if k != "checksum"}
    cert, text = jsonio.seal_canonical(body)
    assert text.startswith('{"checksum":')
    return cert, text


def test_sealed_text_of_the_certificate_is_valid_and_reads_back_the_same(sealed):
    cert, text = sealed
    assert jsonio.sealed_text_matches(cert, text)
    v = verify_certificate(cert, sealed_text=text)
    assert v.valid, v.reason
    assert "checksum" in v.checks
    # the text is the file: read back and checked the ordinary way, the same verdict
    back = verify_text(text + "\n")
    assert back.valid and back.claims == v.claims


def _flip_digit(text: str) -> str:
    i = text.index('"gap":"') + len('"gap":"')
    return text[:i] + ("2" if text[i] != "2" else "3") + text[i + 1:]


@pytest.mark.parametrize("change", [
    "body altered", "checksum of another text", "no checksum first", "truncated", "empty", "other key first",
])
def test_a_text_that_is_not_the_sealed_one_is_a_checksum_mismatch(sealed, change):
    cert, text = sealed
    if change == "body altered":
        bad = _flip_digit(text)
    elif change == "checksum of another text":
        other = jsonio.seal_canonical({**{k: v for k, v in cert.items() if k != "checksum"}, "svm": None})[1]
        bad = other
    elif change == "no checksum first":
        bad = jsonio.canonical_json({k: v for k, v in cert.items() if k != "checksum"})
    elif change == "truncated":
        bad = text[:-1]
    elif change == "empty":
        bad = ""
    else:  # the same digest, a body under a key the certificate lacks
        head = '{"checksum":"' + cert["checksum"] + '",'
        bad = head + '"zz":1,' + text[len(head):]
    assert not jsonio.sealed_text_matches(cert, bad)
    v = verify_certificate(cert, sealed_text=bad)
    assert not v.valid
    assert "checksum mismatch" in v.reason


def test_sections_are_still_checked_on_the_object(sealed):
    cert, text = sealed
    forged = copy.deepcopy(cert)
    forged["svm"]["gap"] = "0"  # the text (and its checksum) untouched: only the object is forged
    assert jsonio.sealed_text_matches(forged, text)
    v = verify_certificate(forged, sealed_text=text)
    assert not v.valid
    assert "svm.gap" in v.reason or "claims.svm" in v.reason


def test_exact_certify_writes_the_checksum_it_checked(tmp_path):
    inst = random_instance(np.random.default_rng(29), 8, 6, 10, 1, 3)
    out = tmp_path / "c.json"
    rep = exact_certify(inst, use_lemma1=False, certificate_out=str(out))
    assert rep.check.valid, rep.check.reason
    written = out.read_text()
    assert jsonio.loads(written)["checksum"] == rep.certificate["checksum"]
    assert verify_text(written).valid
