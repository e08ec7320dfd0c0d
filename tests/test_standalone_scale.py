"""The standalone checker (tools/ntpcert_check.py) at corpus scale: what lets it read a certificate of about
10^5 contexts x 768 dimensions without holding H as m x d rationals.

* Packed rows of H are decoded only when a check reads them (a short violating vector or Farkas ray reads
  a few), while the scan of the packed bytes still covers every entry.
* ``embeddings_f32``: H packed as binary32 (each entry the exact value of its bits, hashed widened to
  float64 in the fingerprint), in one spelling, refused in every other.
* The fingerprint's CSR form of the counts past ``SPARSE_HASH_CELLS`` count cells, equal to ntpcert's for
  dense and sparse count instances on both sides of the threshold.
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from tests.test_compact_certificates import _last_char_bits, _replace_entry

from ntpcert import NTPInstance
from ntpcert.certificate import encode, jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.instance import model
from ntpcert.instance.sparse import SparseCountsInstance
from ntpcert.pipeline.exact_verdicts import exact_certify

from .conftest import random_instance
from .standalone import PATH, checker, standalone

sections = sys.modules["ntpcert_check_sections"]  # loaded beside the checker by tests/standalone.py
exact = sys.modules["ntpcert_check_exact"]


def _certify(inst: NTPInstance, path, packed_min: int | None = None, f32: bool = False) -> dict:
    """ntpcert's certificate of ``inst`` (with H packed from ``packed_min`` entries on: as float64, or as float32
    where every entry is one and ``f32``), as a dict."""
    with pytest.MonkeyPatch.context() as mp:
        if packed_min is not None:
            mp.setattr(encode, "PACKED_MIN_ENTRIES", packed_min)
        if not f32:
            mp.setattr(encode, "is_float32", lambda A: False)
        rep = exact_certify(inst, svm=False, certificate_out=str(path))
    assert rep.check.valid, rep.check.reason
    return json.loads(path.read_text())


def _f32(H: np.ndarray) -> str:
    """The ``embeddings_f32`` text of H (float32-exact): base64 of its little-endian binary32 bytes."""
    assert np.array_equal(H.astype(np.float32).astype(np.float64), H)
    return base64.b64encode(np.ascontiguousarray(H, dtype="<f4").tobytes()).decode("ascii")


def _as_f32(cert: dict, H: np.ndarray) -> dict:
    """The certificate with its H respelled as ``embeddings_f32`` (the fingerprint does not change)."""
    out = copy.deepcopy(cert)
    rec = out["instance"]["embedded"]
    for key in ("embeddings", "embeddings_f64", "embeddings_sparse"):
        rec.pop(key, None)
    rec["embeddings_shape"], rec["embeddings_f32"] = list(H.shape), _f32(H)
    return out


# ---------------------------------------------------------------------------- the fingerprint's CSR form
def _record_cert(inst) -> dict:
    """Just the instance part of a certificate, enough for the checker's Instance and fingerprint."""
    head = {"fingerprint": "", "m": inst.m, "d": inst.d, "V": inst.V, "embedded": encode.instance_record(inst)}
    return {"instance": head, "probabilities_exact_from_floats": False}


def _counts(rng: np.random.Generator, m: int, V: int) -> np.ndarray:
    """Random counts, mostly zero (1 to 3 tokens a context), some large."""
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(1, min(3, V) + 1))
        C[j, rng.choice(V, size=k, replace=False)] = rng.integers(1, 10**6, size=k)
    return C


@pytest.mark.parametrize("seed", range(6))
def test_both_hash_forms_agree_with_ntpcert(seed: int, monkeypatch) -> None:
    """At m V = threshold the counts hash dense, past it in CSR form, on both sides, for a dense and a
    sparse instance of the same counts; the two forms differ (so a checker using the wrong one is caught)."""
    rng = np.random.default_rng(seed)
    m, V, d = int(rng.integers(2, 30)), int(rng.integers(2, 15)), int(rng.integers(1, 6))
    H, C = rng.standard_normal((m, d)), _counts(rng, m, V)
    prints = {}
    for form, cells in (("dense", m * V), ("csr", m * V - 1)):
        monkeypatch.setattr(model, "SPARSE_HASH_CELLS", cells)
        monkeypatch.setattr(sections, "SPARSE_HASH_CELLS", cells)
        for kind, inst in (("dense", NTPInstance.from_counts(H, C)),
                           ("sparse", SparseCountsInstance.from_csr(H, sp.csr_array(C)))):
            assert inst.hash_form == form
            cert = _record_cert(inst)
            ours = sections.fingerprint(cert, checker.Instance(cert))
            assert ours == inst.fingerprint(), (form, kind)
            prints[form, kind] = ours
    assert prints["dense", "dense"] == prints["dense", "sparse"] != prints["csr", "dense"] == prints["csr", "sparse"]


@pytest.mark.parametrize("sparse", [False, True])
def test_a_certificate_hashed_in_csr_form_checks_under_the_same_threshold(sparse: bool, tmp_path,
                                                                          monkeypatch) -> None:
    """A certificate written with ntpcert's threshold lowered (its fingerprint in CSR form) is VALID for the
    standalone checker with the same threshold, and names another instance under the real one."""
    inst = random_instance(np.random.default_rng(7), 12, 3, 6, 1, 3)
    if sparse:
        inst = SparseCountsInstance.from_csr(inst.embeddings, sp.csr_array(inst.counts))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(model, "SPARSE_HASH_CELLS", 10)
        cert = _certify(inst, tmp_path / "c.json")
        assert inst.hash_form == "csr"
    text = jsonio.dumps(cert, reseal=False)
    ok, line = standalone(text)
    assert not ok and "instance.fingerprint" in line, line
    monkeypatch.setattr(sections, "SPARSE_HASH_CELLS", 10)
    ok, line = standalone(text)
    assert ok, line


# ---------------------------------------------------------------------------- embeddings_f32
@pytest.fixture(scope="module")
def f32_case(tmp_path_factory):
    """A certificate of an instance whose H is float32-exact (m d = 35: 140 bytes, one '=' of padding),
    written packed as float64 by ntpcert, and the same certificate respelled as ``embeddings_f32``."""
    rng = np.random.default_rng(21)
    H = rng.standard_normal((7, 5)).astype(np.float32).astype(np.float64)
    C = rng.integers(0, 4, (7, 4))
    C[:, 0] += 1
    inst = NTPInstance.from_counts(H, C)
    root = tmp_path_factory.mktemp("f32")
    cert = _certify(inst, root / "c.json", packed_min=1)
    assert "embeddings_f64" in cert["instance"]["embedded"]
    ours = _certify(inst, root / "c32.json", packed_min=1, f32=True)  # ntpcert's own f32 writer
    cert32 = _as_f32(cert, H)
    assert ours["instance"]["embedded"]["embeddings_f32"] == cert32["instance"]["embedded"]["embeddings_f32"]
    return inst, H, cert, cert32


def test_an_f32_certificate_is_valid(f32_case, tmp_path) -> None:
    inst, H, cert, cert32 = f32_case
    text = jsonio.dumps(cert32)
    rec = json.loads(text)["instance"]["embedded"]
    assert len(rec["embeddings_f32"]) == 4 * ((4 * H.size + 2) // 3) < len(cert["instance"]["embedded"]["embeddings_f64"])
    assert json.loads(text)["instance"]["fingerprint"] == inst.fingerprint()
    ok, line = standalone(text)
    assert ok, line
    path = tmp_path / "c32.json"
    path.write_text(text)
    run = subprocess.run([sys.executable, str(PATH), str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("VALID"), run.stdout + run.stderr


_replace32 = _replace_entry


F32_FORGERIES = {
    "four characters short": (lambda t: t[:-4], "not the length of base64 of 7 x 5 float32"),
    "four characters more": (lambda t: t + "AAAA", "not the length"),
    "the length of float64": (lambda t: t + "A" * (4 * ((8 * 35 + 2) // 3) - len(t)), "not the length"),
    "a character outside the alphabet": (lambda t: "!" + t[1:], "not base64"),
    "unused bits set": (_last_char_bits, "not the canonical base64 spelling of 35 float32"),
    "a NaN": (lambda t: _replace32(t, 3, struct.pack("<f", float("nan"))), "embeddings_f32[0][3]: nan"),
    "a signalling NaN pattern": (lambda t: _replace32(t, 12, bytes.fromhex("0100807f")), "embeddings_f32[2][2]: nan"),
    "an infinity": (lambda t: _replace32(t, 34, struct.pack("<f", float("-inf"))), "embeddings_f32[6][4]: -inf"),
    "-0.0": (lambda t: _replace32(t, 7, struct.pack("<f", -0.0)), "embeddings_f32[1][2]: -0.0"),
    "a changed entry": (lambda t: _replace32(t, 1, struct.pack("<f", 0.75)), "instance.fingerprint"),
    # finite bit patterns next to the refused ones: read as numbers (so only the fingerprint fails)
    "the largest float32": (lambda t: _replace32(t, 0, bytes.fromhex("ffff7f7f")), "instance.fingerprint"),
    "a negative subnormal": (lambda t: _replace32(t, 0, bytes.fromhex("01000080")), "instance.fingerprint"),
}


@pytest.mark.parametrize("name", list(F32_FORGERIES))
def test_forged_f32_embeddings_are_refused(f32_case, name) -> None:
    edit, needle = F32_FORGERIES[name]
    forged = copy.deepcopy(f32_case[3])
    rec = forged["instance"]["embedded"]
    rec["embeddings_f32"] = edit(rec["embeddings_f32"])
    ok, line = standalone(jsonio.dumps(forged))  # resealed: only the reading can catch it
    assert not ok and line.startswith("INVALID: ") and needle in line, line
    assert not verify_text(jsonio.dumps(forged)).valid  # and ntpcert's own checker


@pytest.mark.parametrize("other", ["embeddings_f64", "embeddings", "embeddings_sparse", "embeddings_shape"])
def test_f32_beside_another_spelling_or_without_its_shape_is_refused(f32_case, other) -> None:
    _, H, cert, cert32 = f32_case
    forged = copy.deepcopy(cert32)
    rec = forged["instance"]["embedded"]
    if other == "embeddings_shape":
        del rec[other]
    else:
        rec[other] = {"embeddings_f64": cert["instance"]["embedded"].get("embeddings_f64"),
                      "embeddings": H.tolist(), "embeddings_sparse": []}[other]
    ok, line = standalone(jsonio.dumps(forged))
    assert not ok and line.startswith("INVALID: instance.embedded."), line
    assert not verify_text(jsonio.dumps(forged)).valid
    assert ("missing" if other == "embeddings_shape" else "unknown key") in line, line


@pytest.mark.parametrize("key,dtype,bad", [("embeddings_f32", "<f4", bytes.fromhex("000080ff")),
                                           ("embeddings_f64", "<f8", struct.pack("<d", -0.0)),
                                           ("embeddings_f64", "<f8", bytes.fromhex("000000000000f8ff"))],
                         ids=["f32 -inf", "f64 -0.0", "f64 NaN"])
def test_the_scan_reaches_entries_past_its_first_slice(key, dtype, bad) -> None:
    """The validity scan works through the bytes 2^22 entries at a time: a refused entry just past the
    first slice is found and named by its row and column; the same bytes without it pass."""
    m, d = (1 << 20) + 3, 4
    good = np.arange(1, m * d + 1, dtype=dtype).tobytes()
    w = len(bad)
    k = (1 << 22) + 5  # entry (2^20 + 1, 1)
    forged = good[:w * k] + bad + good[w * (k + 1):]
    field = f"instance.embedded.{key}"
    assert exact.packed_bytes(base64.b64encode(good).decode("ascii"), m, d, field) == good
    with pytest.raises(checker.Invalid, match=rf"{key}\[{(1 << 20) + 1}\]\[1\]: "):
        exact.packed_bytes(base64.b64encode(forged).decode("ascii"), m, d, field)


# ---------------------------------------------------------------------------- lazy rows
@pytest.fixture(scope="module")
def lazy_case(tmp_path_factory):
    """m = 20,000 contexts in d = 64 (H packed: 1.28e6 entries, float32-exact), V = 3: contexts 0 and 1 share
    an embedding with different supports (not separable, a ray on 2 contexts), contexts 2 and 3 share one
    with different log-odds (not compatible, a vector on 2 rows); every other context has every token once."""
    rng = np.random.default_rng(5)
    m, d = 20_000, 64
    H = rng.standard_normal((m, d)).astype(np.float32).astype(np.float64)
    H[1], H[3] = H[0], H[2]
    C = np.ones((m, 3), dtype=np.int64)
    C[0], C[1], C[3] = [1, 1, 0], [1, 0, 0], [1, 2, 1]
    cert = _certify(NTPInstance.from_counts(H, C), tmp_path_factory.mktemp("lazy") / "c.json")
    assert "embeddings_f64" in cert["instance"]["embedded"]
    return H, cert


@pytest.mark.parametrize("spelling", ["embeddings_f64", "embeddings_f32"])
def test_a_small_witness_decodes_only_its_rows(lazy_case, spelling, monkeypatch) -> None:
    """The checker reads H's rows of the witnesses' contexts and no other (the scan and the fingerprint
    read the bytes), and never builds the columns."""
    H, cert = lazy_case
    cert = cert if spelling == "embeddings_f64" else _as_f32(cert, H)
    made = []

    class Recorded(checker.Instance):
        def __init__(self, c):
            super().__init__(c)
            made.append(self)

    monkeypatch.setattr(checker, "Instance", Recorded)
    ok, line = standalone(jsonio.dumps(cert))
    assert ok and "compatible: false" in line and "separable: false" in line, line
    (inst,) = made
    assert type(inst.H) is exact.PackedRows and len(inst.H) == H.shape[0]
    witness = {j for j, _, _ in cert["compatibility"]["violating_null_vector"]}
    witness |= {j for _, j, _ in cert["separability"]["ray"]}
    assert set(inst.H.rows) == witness and len(witness) <= 4
    assert "cols" not in vars(inst)
    assert all(inst.H[j] == {i: x for i, x in enumerate(checker.flint.fmpq(*float(v).as_integer_ratio())
                                                         for v in H[j]) if x} for j in (0, 7, 19_999))
