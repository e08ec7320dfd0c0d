"""Reading last-layer data from language models made in the test (ntpcert.instance.lm, --model)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys

import numpy as np
import pytest

from ntpcert.cli import main
from ntpcert.errors import InputError, MissingExtraError
from ntpcert.instance.lm.contexts import ContextSpec, count_contexts, split_documents

from tests.conftest import TOL

torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]: CI has it
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    short = tmp_path_factory.mktemp("short")
    # "wide": d = 128 above the m = 89 contexts of a shorter corpus, so separable at once (Lemma 1) and the
    # limits take a second; the 600-character corpus is not separable for d = 16 and its NTP-SVM solve
    # takes half a minute to find that out
    return {"root": str(root), "corpus": small_corpus(root),
            **{k: tiny_model(root, k) for k in ("gpt2", "gpt2-untied", "gptj", "llama")},
            "short": small_corpus(short, pydoc_text(250)),
            "wide": tiny_model(short, "gpt2-untied", d=128, corpus=pydoc_text(250))}


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ----------------------------------------------------------------------------------- contexts (numpy only)
def test_token_contexts_count_every_window_once():
    docs = [[1, 2, 3, 1, 2, 4], [1, 2, 3]]
    cc = count_contexts(docs, ContextSpec.parse("tokens:2"), 6)
    assert cc.contexts == ((1, 2), (2, 3), (3, 1))
    C = cc.dense()
    assert C[0].tolist() == [0, 0, 0, 2, 1, 0] and C[1, 1] == 1 and C[2, 2] == 1
    assert cc.n == 4 + 1 and cc.token_frequency.tolist() == [0, 3, 3, 2, 1, 0]


def test_prefix_contexts_are_the_first_tokens_of_each_document():
    docs = [[5, 1, 2, 3], [5, 1, 4]]
    cc = count_contexts(docs, ContextSpec.parse("prefix:2"), 6)
    assert cc.contexts == ((5,), (5, 1))
    assert cc.dense()[1].tolist() == [0, 0, 1, 0, 1, 0] and cc.dense()[0, 1] == 2


@pytest.mark.parametrize("spec", ["tokens", "tokens:0", "prefix:x", "window:2", "tokens:99999"])
def test_bad_context_spec_names_the_option(spec):
    with pytest.raises(InputError, match="--context"):
        ContextSpec.parse(spec)


def test_token_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(InputError, match="outside the model's vocabulary"):
        count_contexts([[0, 7]], ContextSpec.parse("tokens:1"), 5)


def test_documents_split_at_blank_lines():
    assert split_documents("a b\nc\n\n  \n\nd\n") == ["a b\nc", "d\n"]


# ----------------------------------------------------------------------------------- captured h
@pytest.mark.parametrize("kind, tied, bias", [("gpt2", True, False), ("gpt2-untied", False, False),
                                              ("gptj", False, True), ("llama", False, False)])
def test_captured_h_reproduce_the_models_logits(lm_dir, kind, tied, bias):
    import transformers

    from ntpcert.instance.lm import load_model_data

    md = load_model_data(lm_dir["corpus"], lm_dir[kind], context="tokens:2")
    assert (md.tied, md.bias, md.embeddings) == (tied, bias, "model")
    assert md.residual <= TOL["capture"]
    H, W = md.instance.embeddings, md.decoder
    assert W.shape == (md.instance.V, H.shape[1])
    if bias:
        assert np.all(H[:, -1] == 1.0)
    # independently of the hook: the model's own logits at a few contexts
    model = transformers.AutoModelForCausalLM.from_pretrained(lm_dir[kind], local_files_only=True)
    model.eval()
    from ntpcert.instance.lm.load import read_corpus, tokenize_documents

    ids, _ = tokenize_documents(os.path.join(lm_dir[kind], "tokenizer.json"),
                                split_documents(read_corpus(lm_dir["corpus"])))
    contexts = count_contexts(ids, ContextSpec.parse("tokens:2"), md.instance.V).contexts
    pick = [0, len(contexts) // 2, len(contexts) - 1]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([list(contexts[j]) for j in pick])).logits[:, -1].double().numpy()
    mine = H[pick] @ W.T
    rel = np.linalg.norm(mine - logits, axis=1) / np.linalg.norm(logits, axis=1)
    assert rel.max() <= TOL["capture"]


def test_prefix_contexts_and_bos(lm_dir):
    from ntpcert.instance.lm import load_model_data

    plain = load_model_data(lm_dir["corpus"], lm_dir["gpt2"], context="prefix:4")
    assert plain.instance.m <= 2 * 4 and plain.residual <= TOL["capture"]
    with_bos = load_model_data(lm_dir["corpus"], lm_dir["gpt2"], context="prefix:4", bos=True)
    assert with_bos.instance.m == plain.instance.m and with_bos.bos
    assert not np.allclose(with_bos.instance.embeddings, plain.instance.embeddings)  # BOS changes the states


def test_static_path_concatenates_input_embeddings(lm_dir):
    from safetensors.numpy import load_file

    from ntpcert.instance.lm import load_model_data

    def wte(kind):
        return load_file(os.path.join(lm_dir[kind], "model.safetensors"))["transformer.wte.weight"].astype(np.float64)

    def vocab(kind):
        with open(os.path.join(lm_dir[kind], "tokenizer.json"), encoding="utf-8") as f:
            return json.load(f)["model"]["vocab"]

    two = load_model_data(lm_dir["corpus"], lm_dir["gpt2-untied"], context="tokens:2", static=True)
    E, tok = wte("gpt2-untied"), vocab("gpt2-untied")
    assert two.embeddings == "static" and two.decoder is None and "--W" in two.decoder_note and not two.tied
    d0 = E.shape[1]
    assert two.instance.d == 2 * d0
    for j in (0, two.instance.m - 1):  # row j of H is E at the context's two tokens, exactly
        a, b = (tok[t] for t in two.instance.context_names[j].split(" "))
        np.testing.assert_array_equal(two.instance.embeddings[j], np.concatenate([E[a], E[b]]))
    one = load_model_data(lm_dir["corpus"], lm_dir["gpt2"], context="tokens:1", static=True)
    assert one.tied and one.decoder.shape == (one.instance.V, d0)
    np.testing.assert_array_equal(one.decoder, wte("gpt2"))


# ----------------------------------------------------------------------------------- refusals
def test_soft_capping_is_refused(lm_dir):
    from ntpcert.instance.lm import load_model_data

    gemma = tiny_model(lm_dir["root"], "gemma2")
    with pytest.raises(InputError, match="final_logit_softcapping"):
        load_model_data(lm_dir["corpus"], gemma)


def test_a_head_that_is_not_linear_is_refused(lm_dir, monkeypatch):
    import transformers

    from ntpcert.instance.lm import load_model_data

    real = transformers.AutoModelForCausalLM.from_pretrained

    def patched(*args, **kwargs):
        out = real(*args, **kwargs)  # (model, loading info): the reader asks for transformers' loading report
        model = out[0] if isinstance(out, tuple) else out
        head = model.get_output_embeddings()
        model.set_output_embeddings(torch.nn.Sequential(head, torch.nn.Tanh()))
        return out

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", patched)
    with pytest.raises(InputError, match="not a linear layer"):
        load_model_data(lm_dir["corpus"], lm_dir["gpt2-untied"])


def test_missing_extra_is_one_line_naming_it(lm_dir, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)
    out = tmp_path / "C.json"
    rc = main(["certify", lm_dir["corpus"], "--model", lm_dir["gpt2"], "--exact", "--certificate-out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "ntpcert[lm]" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    from ntpcert.instance.lm.capture import require_lm

    with pytest.raises(MissingExtraError, match=r"ntpcert\[lm\]"):
        require_lm()


def _partial(root):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "vocab_size": 64}, f)
    return root


def _unknown(root, src):
    import shutil

    shutil.copytree(src, root)
    with open(os.path.join(root, "config.json")) as f:
        cfg = json.load(f)
    cfg["model_type"] = "no-such-architecture"
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump(cfg, f)
    return root


@pytest.mark.parametrize("case, needle", [("absent", "no such model directory"), ("partial", "holds no weights"),
                                          ("no-config", "config"), ("unknown", "unknown architecture")])
def test_bad_model_directories_are_one_line_exit_2_nothing_written(lm_dir, tmp_path, capsys, case, needle):
    root = str(tmp_path / case)
    if case == "partial":
        _partial(root)
    elif case == "no-config":
        os.makedirs(root)
    elif case == "unknown":
        _unknown(root, lm_dir["gpt2"])
    out = tmp_path / "C.json"
    rc = main(["certify", lm_dir["corpus"], "--model", root, "--exact", "--certificate-out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_text_options_do_not_apply_with_a_model(lm_dir, capsys):
    assert main(["info", lm_dir["corpus"], "--model", lm_dir["gpt2"], "--embedding", "random:4"]) == 2
    assert "--embedding" in capsys.readouterr().err
    assert main(["info", lm_dir["corpus"], "--bos"]) == 2
    assert "--bos: applies only with --model" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- certify --model
def test_certify_a_model_exactly_and_verify_the_certificate(tmp_path, capsys):
    # d = 128 > m: Lemma 1 decides separability at once; --no-svm keeps the default run fast (the exact
    # NTP-SVM bound of the same run takes a few seconds more)
    corpus = small_corpus(tmp_path, pydoc_text(250))
    model = tiny_model(tmp_path, "gptj", d=128, corpus=pydoc_text(250))
    cert = tmp_path / "C.json"
    rc = main(["certify", corpus, "--model", model, "--context", "tokens:2", "--exact", "--no-svm",
               "--certificate-out", str(cert), "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and rep["certificate_valid"] is True and rep["entropy_bound_reachable"] is True
    assert main(["verify", str(cert)]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    data = json.loads(cert.read_text())
    source = data["source"]
    files = dict(source["files"])
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert files[name] == _sha(os.path.join(model, name))
    assert source["corpus_sha256"] == _sha(corpus) and source["context"] == "tokens:2"
    assert data["instance"]["d"] == 129  # the head's bias is the appended constant coordinate


def test_a_tampered_source_section_is_refused(tmp_path):
    from ntpcert.certificate import schema
    from ntpcert.errors import CertificateError

    body = {"kind": "model", "files": [["model.safetensors", "ab" * 32]], "corpus_sha256": "cd" * 32,
            "context": "tokens:2", "bos": False, "embeddings": "model"}
    schema.check_section(body, "source", "source")
    from ntpcert.certificate.provenance import check_source

    check_source(body)
    for bad, needle in (({**body, "files": [["x", "not-a-hash"]]}, "source.files[0]"),
                        ({**body, "embeddings": "guess"}, "source.embeddings"),
                        ({**body, "extra": 1}, "extra")):
        with pytest.raises(CertificateError, match=re.escape(needle)):
            schema.check_section(bad, "source", "source")
            check_source(bad)


# ----------------------------------------------------------------------------------- compare
def test_compare_reports_every_metric_for_the_models_decoder(lm_dir, tmp_path, capsys):
    fig = tmp_path / "cmp.png"
    assert main(["compare", lm_dir["short"], "--model", lm_dir["wide"], "--json", "--figure", str(fig)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("loss", "excess_loss", "entropy", "margin", "support_spread", "rel_dist_F", "cos_perp_mm",
                "norm_matched_distance", "excess_over_bracket"):
        assert key in out
    assert out["loss"] - out["entropy"] == pytest.approx(out["excess_loss"], rel=TOL["linalg"], abs=TOL["linalg"])
    assert sum(b["excess_nats"] for b in out["bins"]) == pytest.approx(out["excess_loss"], rel=1e-9)
    assert sum(b["tokens"] for b in out["bins"]) == out["V"] and fig.stat().st_size > 0
    assert out["source"]["capture_residual"] <= TOL["capture"] and out["separable"] is True
    assert out["bracket"]["excess_upper"] == 0.0 and 0.0 <= out["cos_perp_mm"] ** 2 <= 1.0
    assert out["norm_matched_distance"] == pytest.approx((2 - 2 * out["cos_perp_mm"]) ** 0.5, rel=1e-9)


def test_compare_snapshots_against_t(lm_dir, tmp_path, capsys):
    from ntpcert.instance.lm import load_model_data

    md = load_model_data(lm_dir["short"], lm_dir["wide"])
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    np.save(snaps / "W_10.npy", md.decoder)
    np.save(snaps / "W_2.npy", 3.0 * md.decoder)
    table = tmp_path / "t.csv"
    assert main(["compare", lm_dir["short"], "--model", lm_dir["wide"], "--W", str(snaps), "--json",
                 "--table", str(table), "--figure", str(tmp_path / "s.png")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["t"] for s in out["snapshots"]] == [2, 10]
    assert out["snapshots"][0]["norm"] == pytest.approx(3.0 * out["snapshots"][1]["norm"])
    assert table.read_text().splitlines()[0].startswith("t,loss,excess_loss")
    assert main(["compare", lm_dir["short"], "--model", lm_dir["wide"], "--W", str(snaps / "W_2.npy"),
                 "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["norm"] == pytest.approx(out["snapshots"][0]["norm"])


def test_compare_refuses_a_decoder_of_the_wrong_shape(lm_dir, tmp_path, capsys):
    np.save(tmp_path / "W.npy", np.zeros((3, 4)))
    assert main(["compare", lm_dir["short"], "--model", lm_dir["wide"], "--W", str(tmp_path / "W.npy")]) == 2
    assert "W: expected shape" in capsys.readouterr().err


def test_a_sharded_checkpoint_reads_as_the_single_file_does(lm_dir, tmp_path):
    import shutil

    import transformers

    from ntpcert.instance.lm import load_model_data

    model = transformers.AutoModelForCausalLM.from_pretrained(lm_dir["gpt2-untied"], local_files_only=True)
    out = tmp_path / "sharded"
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(out, max_shard_size="4KB")
    shutil.copy(os.path.join(lm_dir["gpt2-untied"], "tokenizer.json"), out / "tokenizer.json")
    assert (out / "model.safetensors.index.json").exists() and not (out / "model.safetensors").exists()
    one = load_model_data(lm_dir["corpus"], lm_dir["gpt2-untied"])
    for static in (False, True):
        a = load_model_data(lm_dir["corpus"], str(out), static=static)
        b = one if not static else load_model_data(lm_dir["corpus"], lm_dir["gpt2-untied"], static=True)
        np.testing.assert_array_equal(a.instance.embeddings, b.instance.embeddings)
        assert sum(name.endswith(".safetensors") for name, _ in a.files) > 1
    (out / sorted(p.name for p in out.glob("*.safetensors"))[0]).unlink()
    with pytest.raises(InputError, match="the shard"):
        load_model_data(lm_dir["corpus"], str(out))


def test_the_static_path_needs_neither_torch_nor_transformers(lm_dir, monkeypatch):
    from ntpcert.instance.lm import load_model_data

    want = load_model_data(lm_dir["corpus"], lm_dir["gpt2"], context="tokens:1", static=True)
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    got = load_model_data(lm_dir["corpus"], os.path.join(lm_dir["gpt2"], "model.safetensors"), context="tokens:1",
                          static=True, tokenizer=os.path.join(lm_dir["gpt2"], "tokenizer.json"))
    np.testing.assert_array_equal(got.instance.embeddings, want.instance.embeddings)
    np.testing.assert_array_equal(got.decoder, want.decoder)
    with pytest.raises(MissingExtraError, match=r"ntpcert\[lm\]"):
        load_model_data(lm_dir["corpus"], lm_dir["gpt2"])
