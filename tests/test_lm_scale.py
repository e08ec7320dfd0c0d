"""Model-scale reading: unseen tokens merged into one (exact for (4) and (6)), batched capture, and the
decoder's numbers over the full vocabulary (ntpcert.instance.lm.merge, ntpcert.dynamics.compare)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntpcert.cli import main
from ntpcert.errors import CertificateError, InputError
from ntpcert.instance import NTPInstance
from ntpcert.instance.lm.contexts import ContextSpec, count_contexts
from ntpcert.instance.lm.merge import merge_unseen
from ntpcert.pipeline.exact_verdicts import exact_certify

from tests.conftest import TOL


# ----------------------------------------------------------------------------------- the merge (numpy only)
def _counts(docs, V, k=1):
    return count_contexts(docs, ContextSpec.parse(f"tokens:{k}"), V)


def test_merge_keeps_observed_tokens_and_one_representative():
    cc = _counts([[1, 4, 1, 6, 4, 1, 4]], V=9)  # next tokens 4, 1, 6: observed {1, 4, 6}
    C, mg = merge_unseen(cc)
    assert mg.observed.tolist() == [1, 4, 6] and mg.representative == 0 and mg.merged == 6
    assert mg.kept.tolist() == [1, 4, 6, 0] and C.shape == (cc.m, 4) and mg.V_reduced == 4
    np.testing.assert_array_equal(C[:, :3], cc.dense()[:, [1, 4, 6]])
    assert not C[:, 3].any() and mg.unseen().tolist() == [0, 2, 3, 5, 7, 8]
    W = np.arange(18.0).reshape(9, 2)
    Wr = mg.reduce_rows(W)
    np.testing.assert_array_equal(Wr, W[[1, 4, 6, 0]])
    back = mg.expand_rows(Wr)
    np.testing.assert_array_equal(back[[1, 4, 6]], W[[1, 4, 6]])
    assert all((back[u] == W[0]).all() for u in mg.unseen())
    assert mg.to_json() == {"V": 9, "V_reduced": 4, "observed": 3, "merged": 6, "representative": 0}
    with pytest.raises(InputError, match="expected 9 rows"):
        mg.reduce_rows(W[:5])


def test_nothing_is_merged_when_every_token_is_observed():
    cc = _counts([[0, 1, 2, 0, 2, 1, 0]], V=3)
    C, mg = merge_unseen(cc)
    assert mg.merged == 0 and mg.representative is None and mg.kept.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(C, cc.dense())


def _random_docs(rng, n_docs, length, observed):
    return [rng.choice(observed, size=length).tolist() for _ in range(n_docs)]


def _cases():
    """Small instances over V = 10 with 4 or 5 observed next tokens, and embeddings of several ranks:
    compatible and separable (d >= m), and the negative verdicts (d small, repeated embeddings)."""
    out = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        observed = rng.choice(10, size=4 + seed % 2, replace=False)
        cc = _counts(_random_docs(rng, 2, 7, observed), V=10)
        d = (1, 2, 3, cc.m + 1, 2)[seed % 5]
        H = rng.integers(-3, 4, size=(cc.m, d)).astype(np.float64)
        if seed % 3 == 0:
            H[-1] = H[0]  # two contexts with one embedding: (4) and (6) can fail
        out.append((cc, H))
    return out


def test_merged_instance_gives_the_full_vocabularys_exact_verdicts():
    seen = {"compatible": set(), "separable": set()}
    for cc, H in _cases():
        full = NTPInstance.from_counts(H, cc.dense())
        C, mg = merge_unseen(cc)
        assert mg.merged > 0
        red = NTPInstance.from_counts(H, C)
        a = exact_certify(full, svm=False, use_lemma1=False)
        b = exact_certify(red, svm=False, use_lemma1=False)
        assert a.compatible.holds is not None and a.separable.holds is not None
        assert (a.compatible.holds, a.separable.holds) == (b.compatible.holds, b.separable.holds)
        assert b.check.valid
        assert red.entropy() == pytest.approx(full.entropy(), rel=1e-12)
        seen["compatible"].add(a.compatible.holds)
        seen["separable"].add(a.separable.holds)
    assert seen == {"compatible": {True, False}, "separable": {True, False}}  # both verdicts of both questions


def test_a_feasible_point_of_the_merged_instance_expands_to_one_of_the_full_instance():
    from ntpcert.rows.kesler import KeslerSystem

    for cc, H in _cases():
        C, mg = merge_unseen(cc)
        rep = exact_certify(NTPInstance.from_counts(H, C), svm=False, use_lemma1=False)
        if rep.separable.holds is not True or getattr(rep.separable.witness, "W", None) is None:
            continue
        Wr = np.asarray(rep.separable.witness.W, dtype=np.float64)
        full = KeslerSystem.build(NTPInstance.from_counts(H, cc.dense()))
        W = mg.expand_rows(Wr)
        assert full.apply_margin(W).min() >= 1 - 1e-9 and np.abs(full.apply_eq(W)).max(initial=0) <= 1e-9


# ----------------------------------------------------------------------------------- through a model
torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]: CI has it
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    # d = 128 above the m = 89 contexts: separable and compatible at once (Lemma 1); 64 tokens, 18 unseen
    root = tmp_path_factory.mktemp("scale")
    return {"corpus": small_corpus(root, pydoc_text(250)),
            "model": tiny_model(root, "gpt2-untied", d=128, corpus=pydoc_text(250)),
            "narrow": tiny_model(root, "gpt2-untied", d=4, corpus=pydoc_text(250), name="narrow")}


def test_model_data_records_the_merge(wide):
    from ntpcert.instance.lm import load_model_data

    plain = load_model_data(wide["corpus"], wide["model"])
    md = load_model_data(wide["corpus"], wide["model"], merge_unseen=True)
    mg = md.merge
    assert plain.merge is None and plain.instance.V == md.V == mg.V == 64
    assert md.instance.V == mg.V_reduced == mg.observed.size + 1 and mg.merged == 64 - mg.observed.size > 0
    assert md.decoder.shape == (64, md.instance.d) and md.token_frequency.shape == (64,)
    np.testing.assert_array_equal(md.instance.embeddings, plain.instance.embeddings)
    np.testing.assert_array_equal(md.instance.counts[:, :-1], plain.instance.counts[:, mg.observed])
    assert md.instance.token_names[:-1] == tuple(plain.instance.token_names[z] for z in mg.observed)
    assert md.source_record()["vocabulary"] == mg.to_json() and md.to_json()["V_instance"] == md.instance.V
    full = md.full_instance()
    np.testing.assert_array_equal(full.counts, plain.instance.counts)
    assert full.token_names == plain.instance.token_names


@pytest.mark.parametrize("key", ["model", "narrow"])
def test_merged_model_instance_verdicts_equal_the_unmerged_ones(wide, key):
    from ntpcert.instance.lm import load_model_data

    plain = load_model_data(wide["corpus"], wide[key])
    md = load_model_data(wide["corpus"], wide[key], merge_unseen=True)
    a = exact_certify(plain.instance, svm=False)
    b = exact_certify(md.instance, svm=False, source=md.source_record())
    assert (a.compatible.holds, a.separable.holds) == (b.compatible.holds, b.separable.holds)
    assert b.check.valid and b.certificate["source"]["vocabulary"] == md.merge.to_json()
    if key == "narrow":  # d = 4 against m = 89: not separable
        assert b.separable.holds is False


def test_certify_model_reports_the_merge_and_skips_the_reduced_svm(wide, tmp_path, capsys):
    cert = tmp_path / "C.json"
    assert main(["certify", wide["corpus"], "--model", wide["model"], "--exact", "--certificate-out", str(cert),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["entropy_bound_reachable"] is True and rep["vocabulary"]["merged"] > 0
    assert rep["V"] == rep["vocabulary"]["V_reduced"] and "W^mm" in rep["svm_error"]
    assert json.loads(cert.read_text())["source"]["vocabulary"] == rep["vocabulary"]
    assert main(["verify", str(cert)]) == 0
    capsys.readouterr()
    assert main(["certify", wide["corpus"], "--model", wide["model"]]) == 0
    text = capsys.readouterr().out
    assert "one representative" in text and "NTP-SVM: not solved" in text


def test_verify_rereads_a_model_certificate_through_the_model(wide, tmp_path, capsys):
    cert = tmp_path / "C.json"
    for extra in ([], ["--excess"]):  # a merged vocabulary, then the whole one (the bracket counts every token)
        assert main(["certify", wide["corpus"], "--model", wide["model"], "--exact", "--certificate-out", str(cert),
                     "--force", "--json"] + extra) == 0
        capsys.readouterr()
        assert main(["verify", str(cert), "--data", wide["corpus"], "--model", wide["model"], "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["valid"] is True and out["instance_source"] == "data"
    # another model's h are another instance: refused
    assert main(["verify", str(cert), "--data", wide["corpus"], "--model", wide["narrow"]]) != 0
    capsys.readouterr()
    assert main(["verify", str(cert), "--model", wide["model"]]) == 2  # --model needs --data CORPUS
    assert "applies with --data" in capsys.readouterr().err


def test_options_are_never_abbreviated(capsys):
    # --context-length abbreviated would have taken "tokens:2" as its value, or --max-ch as --max-chars
    assert main(["certify", "pydoc", "--max-ch", "200"]) == 2
    assert "unrecognized arguments: --max-ch" in capsys.readouterr().err
    assert main(["certify", "pydoc", "--context", "tokens:2", "--workers", "2"]) == 2
    assert "--workers: applies only with --model" in capsys.readouterr().err


def test_certify_excess_through_a_model_brackets_the_whole_vocabulary_or_says_why_not(wide, monkeypatch, capsys):
    from ntpcert.instance.lm import load_model_data
    from ntpcert.instance.lm.load import ModelData
    from ntpcert.pipeline.excess_certificate import excess_key

    assert main(["certify", wide["corpus"], "--model", wide["model"], "--excess", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    full = load_model_data(wide["corpus"], wide["model"]).instance  # the whole vocabulary, read apart
    want, _ = excess_key(full, exact=False, separable=rep["separable"]["holds"])
    assert rep["V"] == full.V == 64 and "vocabulary" not in rep  # the bracket counts every token
    assert rep["excess_loss"]["excess_upper"] == pytest.approx(want["excess_upper"], rel=1e-9, abs=1e-12)
    assert rep["excess_loss"]["excess_lower"] == pytest.approx(want["excess_lower"], rel=1e-9, abs=1e-12)

    # past the bracket's cap the dense counts over the whole vocabulary are never built
    monkeypatch.setattr("ntpcert.pipeline.excess_certificate.AUTO_MAX_CELLS", 1000)

    def refuse(self):
        raise AssertionError("the whole vocabulary's dense counts were built")

    monkeypatch.setattr(ModelData, "full_instance", refuse)
    for extra in ([], ["--exact"]):
        assert main(["certify", wide["corpus"], "--model", wide["model"], "--excess", "--json"] + extra) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["V"] == rep["vocabulary"]["V_reduced"] < 64
        assert f"m * V = {rep['m'] * 64:,} cells" in rep["excess_loss"]["skipped"]
        assert "whole vocabulary" in rep["excess_loss"]["skipped"]


def test_a_tampered_vocabulary_record_is_refused():
    from ntpcert.certificate.structure import check_source_section

    voc = {"V": 64, "V_reduced": 47, "observed": 46, "merged": 18, "representative": 0}
    body = {"kind": "model", "files": [["model.safetensors", "ab" * 32]], "corpus_sha256": "cd" * 32,
            "context": "tokens:2", "bos": False, "embeddings": "model", "vocabulary": voc}
    check_source_section(body)
    for bad, needle in (({**voc, "merged": 17}, r"observed 46 \+ merged 17"),
                        ({**voc, "representative": None}, "representative"),
                        ({**voc, "representative": 64}, "representative"),
                        ({**voc, "extra": 1}, "extra"), ({k: v for k, v in voc.items() if k != "V"}, "V: missing"),
                        ({**voc, "merged": -1}, "merged: expected"), ({**voc, "V": True}, "V: expected")):
        with pytest.raises(CertificateError, match=needle):
            check_source_section({**body, "vocabulary": bad})


def test_batched_capture_gives_the_same_h_and_residual(wide):
    from ntpcert.instance.lm.capture import capture
    from ntpcert.instance.lm.files import locate_model
    from ntpcert.instance.lm.load import read_corpus, tokenize_documents
    from ntpcert.instance.lm.contexts import split_documents

    files = locate_model(wide["model"], None)
    ids, _ = tokenize_documents(files.tokenizer, split_documents(read_corpus(wide["corpus"])))
    for spec in ("tokens:2", "prefix:3"):
        sp = ContextSpec.parse(spec)
        cc = count_contexts(ids, sp, 64)
        whole = capture(files, cc, sp)
        small = capture(files, cc, sp, batch_size=3)
        # float32 forward passes: batches of other shapes take other BLAS kernels, so entries of rows of
        # size about 1 differ by tens of float32 ulps (1.2e-6 was seen under load); TOL["capture"] bounds it
        np.testing.assert_allclose(small.embeddings, whole.embeddings, rtol=TOL["capture"], atol=TOL["capture"])
        np.testing.assert_array_equal(small.decoder, whole.decoder)
        assert max(small.residual, whole.residual) <= TOL["capture"]


def test_checked_batches_are_spread_and_cover_the_sample():
    from ntpcert.instance.lm.capture import checked_batches

    assert checked_batches(5, 256, 2048).tolist() == [0, 1, 2, 3, 4]  # no more than the sample: all
    got = checked_batches(124, 256, 2048)
    assert got[0] == 0 and got[-1] == 123 and got.size == 9 and np.all(np.diff(got) >= 15)
    assert checked_batches(100, 3, 10).size * 3 >= 10


def test_sampled_residual_check_keeps_h_and_still_refuses_a_post_head_change(wide, monkeypatch):
    from ntpcert.errors import InputError
    from ntpcert.instance.lm import capture as cap_mod
    from ntpcert.instance.lm.files import locate_model
    from ntpcert.instance.lm.load import read_corpus, tokenize_documents
    from ntpcert.instance.lm.contexts import split_documents

    files = locate_model(wide["model"], None)
    ids, _ = tokenize_documents(files.tokenizer, split_documents(read_corpus(wide["corpus"])))
    sp = ContextSpec.parse("tokens:2")
    cc = count_contexts(ids, sp, 64)
    full = cap_mod.capture(files, cc, sp, batch_size=3)
    assert full.residual_contexts == cc.m  # the default sample holds every context here
    monkeypatch.setattr(cap_mod, "RESIDUAL_CONTEXTS", 6)
    some = cap_mod.capture(files, cc, sp, batch_size=3)
    n_batches = -(-cc.m // 3)
    assert n_batches > 2 and 6 <= some.residual_contexts < cc.m
    np.testing.assert_array_equal(some.embeddings, full.embeddings)  # the head skipped, h the same
    assert some.residual <= TOL["capture"]

    load = cap_mod.load_causal_lm

    def shifted(files):  # a model that scales its logits after the head
        model = load(files)
        model.get_output_embeddings().register_forward_hook(lambda _m, _a, out: out * 1.5)
        return model

    monkeypatch.setattr(cap_mod, "load_causal_lm", shifted)
    with pytest.raises(InputError, match="misses the model's logits"):
        cap_mod.capture(files, cc, sp, batch_size=3)


# ----------------------------------------------------------------------------------- compare over the full V
def test_merged_compare_equals_the_dense_full_vocabulary_one(wide, monkeypatch):
    from ntpcert.dynamics import compare as cm
    from ntpcert.dynamics import logits as logits_mod
    from ntpcert.dynamics.trajectory import Limits
    from ntpcert.instance.lm import load_model_data

    md = load_model_data(wide["corpus"], wide["model"], merge_unseen=True)
    full = md.full_instance()
    dense = cm.compare(md.decoder, Limits.compute(full), frequency=md.token_frequency)
    limits, separable = cm.merged_limits(md.instance)
    assert separable is True and limits.compatible is True and limits.svm is None
    limits_w, _ = cm.merged_limits(md.instance, md.merge)
    full_mm = Limits.compute(full).svm
    assert limits_w.svm.norm == pytest.approx(full_mm.norm, rel=1e-6)
    assert np.linalg.norm(md.merge.expand_rows(limits_w.W_mm) - full_mm.W) <= 1e-6 * full_mm.norm
    monkeypatch.setattr(logits_mod, "BLOCK_ROWS", 7)  # several blocks
    rng = np.random.default_rng(3)
    for W in (md.decoder, md.decoder + rng.standard_normal(md.decoder.shape)):
        want = dense if W is md.decoder else cm.compare(W, Limits.compute(full), frequency=md.token_frequency)
        got = cm.compare_merged(W, limits, md.merge, frequency=md.token_frequency, separable=separable)
        for key in ("loss", "excess_loss", "margin", "normalized_margin", "support_spread", "log_odds_error", "rel_dist_F",
                    "norm", "perp_fraction", "excess_over_bracket"):
            assert got.values[key] == pytest.approx(want.values[key], rel=1e-8, abs=1e-9), key
        for key in ("cos_mm", "cos_perp_mm", "norm_matched_distance"):
            assert np.isnan(got.values[key]) and not np.isnan(want.values[key])
        assert "W_mm" in got.notes and got.bracket == {k: want.bracket[k] for k in got.bracket}
        # with the merge, W^mm is solved with the representative weighted: the full vocabulary's
        weighted = cm.compare_merged(W, limits_w, md.merge, frequency=md.token_frequency, separable=separable)
        for key in ("cos_mm", "cos_perp_mm", "norm_matched_distance"):
            assert weighted.values[key] == pytest.approx(want.values[key], rel=1e-6, abs=1e-9), key
        for g, w in zip(weighted.bins, want.bins):
            assert g["cos_perp_mm"] == pytest.approx(w["cos_perp_mm"], rel=1e-6, abs=1e-9, nan_ok=True)
        assert [(b["label"], b["tokens"], b["frequency"]) for b in got.bins] == \
            [(b["label"], b["tokens"], b["frequency"]) for b in want.bins]
        for g, w in zip(got.bins, want.bins):
            assert g["excess_nats"] == pytest.approx(w["excess_nats"], rel=1e-8, abs=1e-12)
            assert g["rel_dist_F"] == pytest.approx(w["rel_dist_F"], rel=1e-8, nan_ok=True)
    # brute force over every (j, z in S_j, v in [V] \\ S_j) of the full vocabulary
    W = md.decoder
    Z = full.embeddings @ W.T
    margin = min(Z[j, full.support(j)].min() - np.delete(Z[j], full.support(j)).max() for j in range(full.m))
    lse = np.log(np.exp(Z - Z.max(axis=1, keepdims=True)).sum(axis=1)) + Z.max(axis=1)
    ce = -sum(full.weights[j] * full.probs[j, z] * (Z[j, z] - lse[j]) for j in range(full.m) for z in full.support(j))
    got = cm.compare_merged(W, limits, md.merge, frequency=md.token_frequency, separable=separable)
    assert got.values["margin"] == pytest.approx(margin, rel=1e-10) and got.values["loss"] == pytest.approx(ce, rel=1e-10)


def test_compare_model_takes_the_merged_path_above_the_full_vocabulary_limit(wide, monkeypatch, capsys):
    from ntpcert.dynamics import compare as cm

    assert main(["compare", wide["corpus"], "--model", wide["model"], "--json"]) == 0
    dense = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(cm, "FULL_VOCAB_MAX_ENTRIES", 0)
    assert main(["compare", wide["corpus"], "--model", wide["model"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["V"] == dense["V"] == 64 and out["V_instance"] == out["vocabulary"]["V_reduced"] < 64
    assert out["separable"] is True and out["compatible"] is True and "W_mm" in out["notes"]
    assert sum(b["tokens"] for b in out["bins"]) == 64
    for key in ("loss", "excess_loss", "margin", "rel_dist_F"):
        assert out[key] == pytest.approx(dense[key], rel=1e-8), key
    for key in ("cos_perp_mm", "cos_mm", "norm_matched_distance"):  # W^mm weighted: the full vocabulary's
        assert out[key] == pytest.approx(dense[key], rel=1e-6, abs=1e-9), key
    assert "weighed" in out["notes"]["W_mm"]
    assert main(["compare", wide["corpus"], "--model", wide["model"]]) == 0
    assert "after merging" in capsys.readouterr().out


def test_the_capped_lsmr_projection_agrees_with_the_dense_one_and_says_when_it_stops_early(wide, monkeypatch):
    from ntpcert.dynamics import compare as cm
    from ntpcert.instance.lm import load_model_data
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.rows.subspace import Subspace

    md = load_model_data(wide["corpus"], wide["model"], merge_unseen=True)
    system = KeslerSystem.build(md.instance)
    W = md.merge.reduce_rows(md.decoder)
    dense, note = cm._project(Subspace.build(system, method="eigh"), W)
    assert note == ""
    sparse, note = cm._project(Subspace.build(system, method="lsmr"), W)
    np.testing.assert_allclose(sparse, dense, rtol=1e-7, atol=1e-9 * np.abs(dense).max())
    monkeypatch.setattr(cm, "MERGED_LSMR_MAX_ITER", 1)
    _, note = cm._project(Subspace.build(system, method="lsmr"), W)
    assert "stopped after 1 iterations" in note and "approximate" in note


@pytest.mark.parametrize("key, value", [("V", 0), ("merged", -1), ("merged", True), ("representative", "0"),
                                        ("observed", 1.0)])
def test_vocabulary_record_kinds_are_checked(key, value):
    from ntpcert.certificate.structure import check_source_section

    voc = {"V": 64, "V_reduced": 47, "observed": 46, "merged": 18, "representative": 0}
    body = {"kind": "model", "files": [["model.safetensors", "ab" * 32]], "corpus_sha256": "cd" * 32,
            "context": "tokens:2", "bos": False, "embeddings": "model", "vocabulary": {**voc, key: value}}
    with pytest.raises(CertificateError, match=f"source.vocabulary.{key}: expected"):
        check_source_section(body)


def test_svm_and_limits_through_a_model_solve_the_merged_instance_weighted(wide, tmp_path, capsys):
    """``svm --model`` and ``limits --model`` merge the unseen tokens and weigh the representative by their
    number: the files hold the model's V rows and are the full vocabulary's W^mm and W*."""
    from ntpcert.instance.lm import load_model_data
    from ntpcert.pipeline.float_verdicts import certify

    md = load_model_data(wide["corpus"], wide["model"], merge_unseen=True)
    want = certify(md.full_instance(), svm=True, svm_certificate="exact")
    assert md.merge.merged > 0 and want.svm is not None
    out = tmp_path / "W.npy"
    assert main(["svm", wide["corpus"], "--model", wide["model"], "--out", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["V"] == 64 and rep["V_instance"] == md.instance.V and rep["vocabulary"]["merged"] == md.merge.merged
    assert rep["norm"] == pytest.approx(want.svm.norm, rel=1e-6)
    W = np.load(out)
    assert W.shape == (64, md.instance.d) and np.linalg.norm(W - want.svm.W) <= 1e-6 * want.svm.norm
    assert main(["limits", wide["corpus"], "--model", wide["model"], "--out-dir", str(tmp_path / "lim"), "--basis",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["V"] == 64 and summary["files"]["W_mm.npy"] == [64, md.instance.d]
    np.testing.assert_allclose(np.load(tmp_path / "lim" / "W_mm.npy"), want.svm.W, rtol=0,
                               atol=1e-6 * want.svm.norm)
    np.testing.assert_allclose(np.load(tmp_path / "lim" / "W_star.npy"), want.fit.W_star, rtol=0,
                               atol=1e-9 * max(1.0, np.linalg.norm(want.fit.W_star)))
    B = np.load(tmp_path / "lim" / "F_basis.npy")
    assert B.shape[1:] == (64, md.instance.d)
    G = B.reshape(B.shape[0], -1)
    np.testing.assert_allclose(G @ G.T, np.eye(B.shape[0]), atol=1e-9)
    assert not B[:, md.merge.unseen()].any()  # F is zero on every unseen token's row


def test_a_nearly_unseparable_model_splits_with_the_interior_point_fallback(wide):
    """HiGHS's dual simplex stops at once ("Not Set") on the d = 4 model's split LP, whose start is nearly
    optimal; the interior point method with crossover decides it, and the checks of the split accept it."""
    from ntpcert.instance.lm import load_model_data
    from ntpcert.solve.split import nonseparable_split

    md = load_model_data(wide["corpus"], wide["narrow"], merge_unseen=True)
    sp = nonseparable_split(md.instance)
    assert sp.ok and sp.n_nonseparable > 0


def test_a_merged_models_certificate_carries_no_weight_and_both_checkers_accept_it(wide, tmp_path, capsys):
    """The weight of the representative lives only in the NTP-SVM solves: ``certify --exact --model`` embeds the
    merged instance one token each (no NTP-SVM), and ``verify`` and tools/ntpcert_check.py accept it (an instance
    that carries the weight is refused by the exact pipeline: tests/test_merged_svm.py)."""
    from tests.standalone import standalone

    cert = tmp_path / "C.json"
    assert main(["certify", wide["corpus"], "--model", wide["model"], "--exact", "--certificate-out", str(cert),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["certificate_valid"] is True and rep["vocabulary"]["merged"] > 0 and "svm_error" in rep
    assert "token_multiplicity" not in cert.read_text()
    assert main(["verify", str(cert)]) == 0 and capsys.readouterr().out.startswith("VALID")
    ok, line = standalone(cert.read_text())
    assert ok, line


def test_a_tiny_models_nearly_degenerate_h_get_a_definite_separability_verdict(tmp_path):
    """A d = 8 untied GPT-2 on 250 characters: its LayerNorm outputs leave H a singular value 3e-8 of the
    largest, and HiGHS stopped at once ("Not Set") on the split LP, so (6) stayed undetermined. The split's LP in
    whitened coordinates settles it, and its N-certificate is checked exactly."""
    from ntpcert.instance.lm import load_model_data
    from ntpcert.pipeline.decide import decide_separability
    from ntpcert.rows.kesler import KeslerSystem

    corpus = small_corpus(str(tmp_path), pydoc_text(250))
    model = tiny_model(str(tmp_path), "gpt2-untied", d=8, corpus=pydoc_text(250))
    inst = load_model_data(corpus, model, merge_unseen=True).instance
    s = np.linalg.svd(inst.embeddings, compute_uv=False)
    assert s[-1] < 1e-6 * s[0]  # the nearly degenerate direction
    verdict, _ = decide_separability(KeslerSystem.build(inst))
    assert verdict.holds is False and verdict.engine == "split-farkas"
    assert not verdict.witness.check(inst) and "verified exactly" in verdict.reason  # "": no failure
