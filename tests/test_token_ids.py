"""A corpus given as token ids (--model DIR --token-ids): the instance, verdicts and compare numbers of the
same text tokenised by ntpcert, its canonical hash, verify, and bad ids (ntpcert.instance.lm.token_ids)."""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
import pytest

from ntpcert.cli import main
from ntpcert.errors import InputError

torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]: CI has it
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from ntpcert.instance.lm import load_model_data  # noqa: E402
from ntpcert.instance.lm.contexts import split_documents  # noqa: E402
from ntpcert.instance.lm.load import read_corpus, tokenize_documents  # noqa: E402
from tests.cli_json import json_numbers, run_json
from tests.lm_models import small_corpus, tiny_model  # noqa: E402


def _ids_of(corpus: str, model: str) -> list[list[int]]:
    """The documents' ids exactly as load_model_data makes them: blank-line documents, no special tokens."""
    ids, _ = tokenize_documents(os.path.join(model, "tokenizer.json"), split_documents(read_corpus(corpus)))
    return ids


def _save_dataset(ids: list[list[int]], path: str, column: str = "input_ids") -> str:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({column: ids, "text": [str(len(x)) for x in ids]}).save_to_disk(path)
    return path


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A model with a head bias and d = 128 above the contexts (Lemma 1 decides at once); corpora of one
    document, of that document twice (a 2-D array of equal rows) and of it and its first half (ragged)."""
    root = tmp_path_factory.mktemp("ids")
    corpus = small_corpus(root, pydoc_text(250))
    model = tiny_model(root, "gptj", d=128, corpus=pydoc_text(250))
    doc = split_documents(read_corpus(corpus))[0]
    words = doc.split(" ")
    paths = {}
    for name, text in (("one", doc), ("twice", doc + "\n\n" + doc),
                       ("ragged", doc + "\n\n" + " ".join(words[: len(words) // 2]))):
        paths[name] = str(root / f"{name}.txt")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.write(text)
    np.save(root / "one.npy", np.asarray(_ids_of(paths["one"], model)[0], dtype=np.int32))
    np.save(root / "twice.npy", np.asarray(_ids_of(paths["twice"], model), dtype=np.uint16))
    ragged = _ids_of(paths["ragged"], model)
    assert len(ragged) == 2 and len(ragged[0]) > len(ragged[1]) > 10
    _save_dataset(ragged, str(root / "ds"))
    return {"root": root, "model": model, "corpus": corpus, **paths,
            "V": load_model_data(corpus, model, static=True).V}


_run, _numbers = run_json, json_numbers


CASES = [("one", "one.npy"), ("twice", "twice.npy"), ("ragged", "ds")]


@pytest.mark.parametrize("text, ids", CASES)
def test_token_ids_give_the_instance_of_the_text(lm, text, ids):
    path = str(lm["root"] / ids)
    for merge in (False, True):
        a = load_model_data(lm[text], lm["model"], merge_unseen=merge)
        b = load_model_data(path, lm["model"], token_ids=True, merge_unseen=merge)
        assert a.instance.fingerprint() == b.instance.fingerprint()
        assert list(a.instance.context_names) == list(b.instance.context_names)
        assert np.array_equal(a.token_frequency, b.token_frequency) and np.array_equal(a.decoder, b.decoder)
        rec = b.source_record()
        assert rec["corpus"] == "token_ids" and "corpus" not in a.source_record()
        assert {k: v for k, v in rec.items() if k not in ("corpus", "corpus_sha256")} == \
            {k: v for k, v in a.source_record().items() if k != "corpus_sha256"}


def test_the_ids_hash_is_the_canonical_form_whatever_the_file(lm, tmp_path):
    """Length as <u8, ids as <i8, document by document: the 1-D .npy, a one-row 2-D .npy and a one-row dataset
    of the same ids hash alike, in any integer dtype; another document changes it."""
    doc = np.load(lm["root"] / "one.npy")
    want = hashlib.sha256(struct.pack("<Q", doc.size) + struct.pack(f"<{doc.size}q", *doc.tolist())).hexdigest()
    np.save(tmp_path / "row.npy", doc.astype(np.int64)[None, :])
    _save_dataset([doc.tolist()], str(tmp_path / "ds1"), column="tokens")
    got = {p: load_model_data(p, lm["model"], token_ids=True, static=True).corpus_sha256
           for p in (str(lm["root"] / "one.npy"), str(tmp_path / "row.npy"), str(tmp_path / "ds1"))}
    assert set(got.values()) == {want}
    np.save(tmp_path / "other.npy", doc[::-1].copy())
    assert load_model_data(str(tmp_path / "other.npy"), lm["model"], token_ids=True, static=True).corpus_sha256 != want


@pytest.mark.parametrize("text, ids", CASES[1:])
def test_certify_and_compare_read_the_ids_as_the_text(lm, capsys, text, ids):
    path = str(lm["root"] / ids)
    a = _run(capsys, ["certify", lm[text], "--model", lm["model"], "--json"])
    b = _run(capsys, ["certify", path, "--model", lm["model"], "--token-ids", "--json"])
    for key in ("compatible", "separable", "entropy_bound_reachable", "vocabulary", "excess_loss", "split"):
        assert a[key] == b[key], key
    assert a["m"] == b["m"] and a["n"] == b["n"]
    a = _run(capsys, ["compare", lm[text], "--model", lm["model"], "--json"])
    b = _run(capsys, ["compare", path, "--model", lm["model"], "--token-ids", "--json"])
    na, nb = (_numbers({k: v for k, v in x.items() if k != "source"}) for x in (a, b))
    assert na.keys() == nb.keys() and len(na) > 40
    for key, value in na.items():
        if isinstance(value, float):
            assert nb[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        else:
            assert nb[key] == value, key
    assert b["source"]["corpus"] == "token_ids" and b["source"]["files"] == a["source"]["files"]


def test_verify_rereads_a_certificate_of_token_ids(lm, tmp_path, capsys):
    ids = str(lm["root"] / "ds")
    cert = tmp_path / "C.json"
    assert main(["certify", ids, "--model", lm["model"], "--token-ids", "--exact", "--no-svm",
                 "--certificate-out", str(cert)]) == 0
    src = json.loads(cert.read_text())["source"]
    assert src["corpus"] == "token_ids" and src["vocabulary"]["merged"] > 0
    capsys.readouterr()
    assert main(["verify", str(cert), "--data", ids, "--model", lm["model"], "--token-ids"]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    assert main(["verify", str(cert), "--data", lm["ragged"], "--model", lm["model"]]) == 0  # the same instance
    capsys.readouterr()
    assert main(["verify", str(cert), "--data", str(lm["root"] / "twice.npy"), "--model", lm["model"],
                 "--token-ids"]) == 3  # another corpus: another instance
    assert "INVALID" in capsys.readouterr().out


def _bad(root, case, V):
    """A bad token-id DATA of each kind, and the words its refusal must name."""
    p = str(root / f"{case}.npy")
    if case == "floats":
        np.save(p, np.arange(5, dtype=np.float64))
        return p, "DATA: dtype float64"
    if case == "3-d":
        np.save(p, np.zeros((2, 2, 2), dtype=np.int64))
        return p, "DATA: " + repr(p) + " has shape (2, 2, 2)"
    if case == "too-large":
        a = np.arange(12, dtype=np.int64).reshape(2, 6)
        a[1, 4] = V
        np.save(p, a)
        return p, f"DATA[1, 4] = {V} is not a token id in [0, {V})"
    if case == "negative":
        np.save(p, np.array([3, 4, -1, 5]))
        return p, f"DATA[2] = -1 is not a token id in [0, {V})"
    if case == "objects":
        np.save(p, np.array([[1, 2], [3]], dtype=object), allow_pickle=True)
        return p, "is not a readable .npy file"
    if case == "text":
        p = str(root / "ids.txt")
        with open(p, "w") as f:
            f.write("1 2 3\n")
        return p, "neither a .npy file nor a saved datasets folder"
    if case == "absent":
        return str(root / "none.npy"), "no such file"
    if case == "ds-out-of-range":
        return _save_dataset([[1, 2, 3], [4, V + 7, 5]], str(root / "dsr")), f"DATA: input_ids[1][1] = {V + 7}"
    if case == "ds-no-column":
        return _save_dataset([[1, 2, 3]], str(root / "dsc"), column="ids"), "has no column input_ids or tokens"
    if case == "ds-strings":
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_dict({"tokens": [["a", "b"]]}).save_to_disk(str(root / "dss"))
        return str(root / "dss"), "expected integer token ids"
    if case == "ds-splits":
        datasets = pytest.importorskip("datasets")
        d = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]]})
        datasets.DatasetDict({"train": d, "test": d}).save_to_disk(str(root / "dsd"))
        return str(root / "dsd"), "holds several splits (test, train)"
    if case == "not-a-dataset":
        os.makedirs(root / "empty", exist_ok=True)
        return str(root / "empty"), "is not a folder saved by datasets"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["floats", "3-d", "too-large", "negative", "objects", "text", "absent",
                                  "ds-out-of-range", "ds-no-column", "ds-strings", "ds-splits", "not-a-dataset"])
def test_bad_token_ids_are_one_line_exit_2_nothing_written(lm, tmp_path, capsys, case):
    path, needle = _bad(tmp_path, case, lm["V"])
    capsys.readouterr()
    out = tmp_path / "C.json"
    rc = main(["certify", path, "--model", lm["model"], "--token-ids", "--exact", "--certificate-out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out.exists(), err
    with pytest.raises(InputError):
        load_model_data(path, lm["model"], token_ids=True, static=True)


@pytest.mark.parametrize("argv, needle", [
    (["--token-ids"], "--token-ids: applies only with --model DIR"),
    (["--model", "M", "--token-ids", "--max-chars", "10"], "--max-chars: value 10 applies to a text corpus"),
])
def test_token_id_flags_out_of_place_are_refused(lm, capsys, argv, needle):
    argv = [lm["model"] if a == "M" else a for a in argv]
    assert main(["info", str(lm["root"] / "one.npy"), *argv]) == 2
    assert needle in capsys.readouterr().err
