"""Instances read from models held in memory by TransformerLens and nnsight (ntpcert.instance.lm.hooked):
the same instance as the model directory's (bit for bit through nnsight, to float32 rounding through a
TransformerBridge), and TransformerLens' HookedTransformer instance against the Hugging Face one
(docs/math.md, *The HookedTransformer instance*)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from ntpcert.errors import InputError, MissingExtraError

from tests.conftest import TOL

torch = pytest.importorskip("torch")  # the [lm], [tl] and [nnsight] extras are part of [test]: CI has them
pytest.importorskip("transformer_lens")
pytest.importorskip("nnsight")
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from ntpcert.instance.lm import (from_hooked_transformer, from_nnsight, from_transformer_bridge,  # noqa: E402
                                 load_model_data)
from ntpcert.instance.lm.hooked import FLOAT32_PATH_TOL  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402

#: Logits of the HookedTransformer instance against the Hugging Face model's, after removing each context's
#: mean over the vocabulary: two float32 forward passes (eager reconstructed attention against sdpa) and
#: TransformerLens' float32 folding of the weights; measured 7e-8 of max |logit| on the test models.
SHIFT_TOL = 1e-5


def _hf(path):
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return model.eval()


def _bridge(path, *, compat=False):
    """A TransformerBridge around the model of ``path``, built offline (no hub): the model and a fast
    tokenizer of its tokenizer.json are given to ``boot_transformers``."""
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"))
    bridge = TransformerBridge.boot_transformers(path, hf_model=_hf(path), tokenizer=tok)
    if compat:
        bridge.enable_compatibility_mode(disable_warnings=True)
    return bridge


def _nnsight(path):
    import transformers
    from nnsight import LanguageModel

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nnsight 0.8 calls LanguageModel deprecated (for TransformersModel)
        return LanguageModel(_hf(path), tokenizer=tok)


def _final_norm(path, gain, shift):
    """Set the final LayerNorm's gain and shift of the GPT-2 model in ``path`` (saved again)."""
    model = _hf(path)
    with torch.no_grad():
        model.transformer.ln_f.weight.copy_(torch.as_tensor(gain, dtype=torch.float32))
        model.transformer.ln_f.bias.copy_(torch.as_tensor(shift, dtype=torch.float32))
    model.save_pretrained(path)
    ln = model.transformer.ln_f
    return ln.weight.detach().double().numpy(), ln.bias.detach().double().numpy()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hooked"))
    short = str(tmp_path_factory.mktemp("hooked_short"))
    rng = np.random.default_rng(7)
    d = 16
    gain = 1.0 + 0.3 * rng.standard_normal(d)
    out = {"corpus": small_corpus(root), "gpt2": tiny_model(root, "gpt2"),
           "generic": tiny_model(root, "gpt2", name="generic", seed=1),
           "zero_shift": tiny_model(root, "gpt2", name="zero_shift", seed=2),
           "short": small_corpus(short, pydoc_text(250)),
           "wide": tiny_model(short, "gpt2-untied", d=128, corpus=pydoc_text(250))}
    out["generic_norm"] = _final_norm(out["generic"], gain, 0.2 * rng.standard_normal(d))
    out["zero_shift_norm"] = _final_norm(out["zero_shift"], gain, np.zeros(d))
    return out


# ------------------------------------------------------------------------------- the model directory's instance
@pytest.mark.parametrize("context, bos", [("tokens:2", False), ("prefix:4", True)])
def test_nnsight_gives_the_model_directory_instance_bit_for_bit(models, context, bos):
    md = load_model_data(models["corpus"], models["gpt2"], context=context, bos=bos)
    nd = from_nnsight(_nnsight(models["gpt2"]), models["corpus"], context=context, bos=bos)
    assert nd.instance.fingerprint() == md.instance.fingerprint()
    assert np.array_equal(nd.decoder, md.decoder) and nd.instance.token_names == md.instance.token_names
    assert nd.instance.context_names == md.instance.context_names
    assert (nd.tied, nd.bias, nd.residual_contexts) == (md.tied, md.bias, md.instance.m)
    assert nd.residual <= TOL["capture"] and nd.corpus_sha256 == md.corpus_sha256
    reader = nd.source_record()["reader"]
    assert reader["library"] == "nnsight" and reader["hook"] == "lm_head.input"


@pytest.mark.parametrize("context, bos", [("tokens:2", False), ("prefix:4", True)])
def test_the_bridge_gives_the_model_directory_instance_bit_for_bit(models, context, bos):
    md = load_model_data(models["corpus"], models["gpt2"], context=context, bos=bos)
    bridge = _bridge(models["gpt2"])
    before = {k: v.clone() for k, v in bridge.state_dict().items()}
    bd = from_transformer_bridge(bridge, models["corpus"], context=context, bos=bos)
    assert bd.instance.fingerprint() == md.instance.fingerprint()
    assert np.array_equal(bd.decoder, md.decoder) and bd.instance.token_names == md.instance.token_names
    assert bd.residual <= TOL["capture"] and bd.corpus_sha256 == md.corpus_sha256
    reader = bd.source_record()["reader"]
    # the wrapped model, rebuilt with a model directory's attention; the bridge's own logits agree
    assert reader["forward"] == "transformers" and reader["attention"] == "sdpa" and "forward_note" not in reader
    assert 0.0 < reader["bridge_gap"] <= FLOAT32_PATH_TOL
    # the bridge is left as it was: its eager attention, its weights
    assert bridge.original_model.config._attn_implementation == "eager"
    after = bridge.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_a_bridge_whose_hooks_change_its_logits_is_read_through_its_own_forward(models):
    bridge = _bridge(models["gpt2"])
    bridge.hook_dict["blocks.0.hook_out"].add_hook(lambda t, hook: t * 1.5)  # noqa: ARG005 - TL's signature
    try:
        bd = from_transformer_bridge(bridge, models["corpus"])
        reader = bd.source_record()["reader"]
        assert reader["forward"] == "bridge" and "hooks or edited weights" in reader["forward_note"]
        assert "bridge_gap" not in reader
        md = load_model_data(models["corpus"], models["gpt2"])
        rel = (np.linalg.norm(bd.instance.embeddings - md.instance.embeddings, axis=1)
               / np.linalg.norm(md.instance.embeddings, axis=1))
        assert rel.max() > 1e-3  # the hook's model, not the directory's
        with pytest.raises(InputError, match=r"forward='transformers': the bridge's logits differ .* by "):
            from_transformer_bridge(bridge, models["corpus"], forward="transformers")
    finally:
        bridge.reset_hooks()


def test_a_processed_bridge_and_an_unknown_forward(models):
    bd = from_transformer_bridge(_bridge(models["gpt2"], compat=True), models["corpus"])
    reader = bd.source_record()["reader"]
    assert reader["forward"] == "bridge" and reader["forward_note"] == "the bridge's weights are processed"
    with pytest.raises(InputError, match="forward='transformers': the bridge's weights are processed"):
        from_transformer_bridge(_bridge(models["gpt2"], compat=True), models["corpus"], forward="transformers")
    with pytest.raises(InputError, match=r"forward: 'hf' is not one of auto, transformers, bridge"):
        from_transformer_bridge(_bridge(models["gpt2"]), models["corpus"], forward="hf")


def test_the_bridges_own_forward_gives_the_model_directory_instance_to_float32_rounding(models):
    md = load_model_data(models["corpus"], models["gpt2"])
    bridge = _bridge(models["gpt2"])
    bd = from_transformer_bridge(bridge, models["corpus"], tokenizer=os.path.join(models["gpt2"], "tokenizer.json"),
                                 forward="bridge")
    a, b = md.instance, bd.instance
    assert b.fingerprint() != a.fingerprint()  # another float32 path: the reason for the default above
    # the bridge's zero b_U of a head without bias is no coordinate: the same shapes, counts and decoder
    assert (b.m, b.d, b.V) == (a.m, a.d, a.V) and np.array_equal(b.counts, a.counts)
    assert np.array_equal(bd.decoder, md.decoder) and bd.tied and not bd.bias
    # TransformerBridge recomputes GPT-2's attention in eager form (split QKV): another float32 path
    rel = np.linalg.norm(b.embeddings - a.embeddings, axis=1) / np.linalg.norm(a.embeddings, axis=1)
    assert rel.max() <= FLOAT32_PATH_TOL
    assert bd.residual <= TOL["capture"] and bd.residual_contexts == a.m
    reader = bd.source_record()["reader"]
    assert reader["hook"] == "unembed.hook_in" and reader["attention"] == "eager" and reader["forward"] == "bridge"
    assert not any(reader["processing"].values())  # no weight processing: the Hugging Face weights
    # the default tokenizer (the bridge's own, which TransformerLens gave a padding token) reads the same ids
    again = from_transformer_bridge(bridge, models["corpus"], forward="bridge")
    assert np.array_equal(again.instance.counts, a.counts) and np.array_equal(again.instance.embeddings, b.embeddings)


def test_a_model_in_training_mode_is_read_in_eval_mode_and_left_as_it_was(models):
    nn_model = _nnsight(models["gpt2"])
    nn_model._module.train()
    nd = from_nnsight(nn_model, models["corpus"])
    assert nn_model._module.training  # restored
    assert nd.instance.fingerprint() == load_model_data(models["corpus"], models["gpt2"]).instance.fingerprint()


def _verdicts(inst):
    from ntpcert.pipeline.float_verdicts import certify

    rep = certify(inst, svm=False)
    return rep.compatible.holds, rep.separable.holds


def _compare(data):
    """``ntpcert compare --model``'s numbers for ``data`` (ntpcert.cli.compare._decoder_and_frequency)."""
    from ntpcert.dynamics.compare import compare_decoder, compare_model_merged, model_instance
    from ntpcert.dynamics.trajectory import Limits

    inst, merge = model_instance(data)
    if merge is not None:
        rep = compare_model_merged(inst, merge, data.decoder, frequency=data.token_frequency)
    else:
        rep = compare_decoder(inst, Limits.compute(inst), data.decoder, frequency=data.token_frequency)
    return rep.to_json()


#: The numbers of ``compare`` that no export convention changes (the ``raw_*`` ones do, by design).
_INVARIANT = ("loss", "excess_loss", "entropy", "margin", "normalized_margin", "support_spread", "log_odds_error",
              "rel_dist_F", "cos_perp_mm", "norm_matched_distance", "cos_mm", "norm", "perp_fraction")


def test_the_readers_give_the_same_verdicts_and_comparison(models):
    path, corpus = models["wide"], models["short"]
    tok = os.path.join(path, "tokenizer.json")
    md = load_model_data(corpus, path, merge_unseen=True)
    nd = from_nnsight(_nnsight(path), corpus, merge_unseen=True)
    bridge = _bridge(path)
    bd = from_transformer_bridge(bridge, corpus, tokenizer=tok, merge_unseen=True)
    own = from_transformer_bridge(bridge, corpus, tokenizer=tok, merge_unseen=True, forward="bridge")
    assert nd.instance.fingerprint() == md.instance.fingerprint() == bd.instance.fingerprint()
    assert _verdicts(md.instance) == _verdicts(nd.instance) == _verdicts(bd.instance) == _verdicts(own.instance)
    ref, same, same_bridge, near = _compare(md), _compare(nd), _compare(bd), _compare(own)
    assert (ref["compatible"], ref["separable"]) == (near["compatible"], near["separable"])
    for key in _INVARIANT:
        # the same bits in, the same numbers out
        assert same[key] == ref[key] and same_bridge[key] == ref[key], key
        if ref[key] is None:
            assert near[key] is None, key
        else:
            assert abs(near[key] - ref[key]) <= 1e-6 * max(1.0, abs(ref[key])), (key, near[key], ref[key])


def test_verdicts_agree_across_readers_on_data_that_are_not_separable(models):
    md = load_model_data(models["corpus"], models["gpt2"])
    bd = from_transformer_bridge(_bridge(models["gpt2"]), models["corpus"])
    assert _verdicts(md.instance) == _verdicts(bd.instance) == (True, False)


# ------------------------------------------------------------------------------- the HookedTransformer instance
def test_hooked_logits_are_the_models_up_to_a_constant_per_context(models):
    path = models["generic"]
    md = load_model_data(models["corpus"], path)
    bridge = _bridge(path, compat=True)
    hd = from_hooked_transformer(bridge, models["corpus"])
    H, W = hd.instance.embeddings, hd.decoder
    # the processed bridge's unembedding reads the same: its b_U (the folded shift, centred) is not 0
    assert from_transformer_bridge(bridge, models["corpus"]).instance.fingerprint() == hd.instance.fingerprint()
    assert hd.instance.d == md.instance.d + 1 and hd.bias and np.all(H[:, -1] == 1.0)
    assert np.array_equal(hd.instance.counts, md.instance.counts)
    proc = hd.source_record()["reader"]["processing"]
    assert proc["fold_ln"] is True and proc["center_unembed"] is True and proc["compatibility_mode"] is True
    # h is the normalised vector: mean 0 over its d coordinates (float32 rounding)
    assert np.abs(H[:, :-1].mean(axis=1)).max() <= 1e-6
    Z_hf = md.instance.embeddings @ md.decoder.T
    Z_tl = H @ W.T
    D = Z_tl - Z_hf
    spread = np.abs(D - D.mean(axis=1, keepdims=True)).max()
    assert spread <= SHIFT_TOL * np.abs(Z_hf).max()
    assert np.abs(D.mean(axis=1)).max() > 100 * spread  # the constants themselves are not 0: centring moved them


def test_compare_numbers_of_logits_are_the_same_for_the_hooked_instance(models):
    """The numbers of ``compare`` that are functions of the logits modulo a constant per context agree
    between the Hugging Face instance and HookedTransformer's (on separable data: m = 89 < d = 128, where
    the limits take a second); those of the instance's geometry (F, W*, W^mm, norms) need not."""
    path, corpus = models["wide"], models["short"]
    md = load_model_data(corpus, path, merge_unseen=True)
    hd = from_hooked_transformer(_bridge(path, compat=True), corpus, merge_unseen=True)
    ref, tl = _compare(md), _compare(hd)
    assert (ref["compatible"], ref["separable"]) == (tl["compatible"], tl["separable"]) == (True, True)
    for key in ("loss", "excess_loss", "entropy", "excess_over_bracket", "margin", "support_spread",
                "log_odds_error"):
        assert abs(tl[key] - ref[key]) <= 1e-6 * max(1.0, abs(ref[key])), (key, tl[key], ref[key])


def test_a_bridge_without_compatibility_mode_is_no_hooked_transformer(models):
    with pytest.raises(InputError, match="enable_compatibility_mode"):
        from_hooked_transformer(_bridge(models["gpt2"]), models["corpus"])


def _fmpq_rank(*blocks):
    """The exact rank of the columns of ``blocks`` side by side (rational arrays as lists of rows of fmpq)."""
    import flint

    rows = [sum((list(b[i]) for b in blocks), []) for i in range(len(blocks[0]))]
    return flint.fmpq_mat(rows).rank()


def _exact(a):
    import flint

    return [[flint.fmpq(*float(x).as_integer_ratio()) for x in row] for row in np.atleast_2d(a)]


def _hf_from_normalised(h_hat, gain, shift):
    """Exact rationals: the captured normalised rows made exactly mean 0, and gain ⊙ ĥ + shift."""
    import flint

    hh = _exact(h_hat)
    d = len(hh[0])
    hh = [[x - sum(row, flint.fmpq(0)) / d for x in row] for row in hh]
    g, s = _exact(gain)[0], _exact(shift)[0]
    return hh, [[g[i] * row[i] + s[i] for i in range(d)] for row in hh]


def _numeric_rank(H, rel=1e-5):
    """Rank with singular values below ``rel`` times the largest taken as 0: float32 rounding of the forward
    pass (about 1e-7 relative) leaves a tiny singular value in an exactly deficient matrix."""
    s = np.linalg.svd(H, compute_uv=False)
    return int(np.sum(s > rel * s[0]))


def test_hooked_column_space_equals_the_models_when_the_shifts_do_not_cancel(models):
    gain, shift = models["generic_norm"]
    assert np.all(gain != 0) and abs(np.sum(shift / gain)) > 0.1
    path, corpus = models["generic"], models["corpus"]
    md = load_model_data(corpus, path)
    hd = from_hooked_transformer(_bridge(path, compat=True), corpus)
    h_hat, H_hf = hd.instance.embeddings[:, :-1], md.instance.embeddings
    m, d = H_hf.shape
    # the captured h of the two paths are gain ⊙ ĥ + shift to float32 rounding
    rel = np.linalg.norm(H_hf - (h_hat * gain + shift), axis=1) / np.linalg.norm(H_hf, axis=1)
    assert rel.max() <= FLOAT32_PATH_TOL
    # exactly, in rationals: col(H_HF) = col([ĥ, 1]) (both rank d, and side by side still rank d)
    hh, H = _hf_from_normalised(h_hat, gain, shift)
    one = [[1]] * m
    assert _fmpq_rank(H) == _fmpq_rank(hh, one) == _fmpq_rank(H, hh, one) == d
    assert _numeric_rank(H_hf) == _numeric_rank(hd.instance.embeddings) == d
    # the verdicts: exactly, the hooked reading's H is [ĥ, 1] with ĥ mean 0 only to float32 rounding, so its
    # exact rank is d + 1 and a verdict on it can turn on that rounding (docs/math.md, the HookedTransformer
    # relation); which way it turns depends on the machine's float kernels. Compatibility agrees; on separability
    # the two readings never contradict each other: the directory's pair screen finds a ray (d + 1 contexts), and the
    # hooked reading's, on one dimension more, finds the same answer or none
    from ntpcert.pipeline import pair_screen
    from ntpcert.pipeline.decide import decide_compatibility
    from ntpcert.rows.kesler import KeslerSystem

    both = [decide_compatibility(KeslerSystem.build(i)).holds for i in (md.instance, hd.instance)]
    assert both[0] is not None and both[0] == both[1]
    seps = [pair_screen.separability_verdict(i) for i in (md.instance, hd.instance)]
    assert seps[0] is not None and seps[0].holds is False
    assert seps[1] is None or seps[1].holds is False


def test_with_a_zero_shift_the_hooked_column_space_is_one_larger(models):
    gain, shift = models["zero_shift_norm"]
    assert np.all(gain != 0) and np.all(shift == 0)
    path, corpus = models["zero_shift"], models["corpus"]
    md = load_model_data(corpus, path)
    hd = from_hooked_transformer(_bridge(path, compat=True), corpus)
    h_hat, H_hf = hd.instance.embeddings[:, :-1], md.instance.embeddings
    m, d = H_hf.shape
    hh, H = _hf_from_normalised(h_hat, gain, shift)
    one = [[1]] * m
    # col(H_HF) = col(ĥ) misses the constant direction: rank d - 1 against d, with containment, and the
    # constant direction is all that is missing
    assert _fmpq_rank(H) == d - 1
    assert _fmpq_rank(hh, one) == _fmpq_rank(H, hh, one) == _fmpq_rank(H, one) == d
    # shifts that cancel (sum of shift_i / gain_i = 0) but are not 0 lose the same direction
    import flint

    a = [flint.fmpq(i + 1, 7) * (-1) ** i for i in range(d)]
    mean = sum(a, flint.fmpq(0)) / d
    g = _exact(gain)[0]
    _, H0 = _hf_from_normalised(h_hat, gain, np.zeros(d))
    H_cancel = [[H0[j][i] + g[i] * (a[i] - mean) for i in range(d)] for j in range(m)]
    assert _fmpq_rank(H_cancel) == d - 1 and _fmpq_rank(H_cancel, one) == d
    # in floats: a singular value at float32 rounding, one rank fewer than the HookedTransformer instance
    assert _numeric_rank(H_hf) == d - 1 and _numeric_rank(hd.instance.embeddings) == d


@pytest.mark.slow
def test_with_a_zero_shift_the_verdicts_only_grow(models):
    """What holds for the model holds for HookedTransformer (its column space is one larger). Slow: where neither
    reading is decided cheaply (which depends on the machine's float kernels: the missing direction is float32
    rounding), the float pipeline spends its whole separability budget on both, minutes on a 2-core machine."""
    path, corpus = models["zero_shift"], models["corpus"]
    md = load_model_data(corpus, path)
    hd = from_hooked_transformer(_bridge(path, compat=True), corpus)
    hf_v, tl_v = _verdicts(md.instance), _verdicts(hd.instance)
    assert all(t for h, t in zip(hf_v, tl_v) if h)


def test_a_constant_direction_decides_separability():
    """The other side of the relation, on the smallest case: d = 2, ĥ = ±(1, -1) (a LayerNorm's output is
    one of these for d = 2), gain 1 and shift 0; both contexts are followed by token 0 only. No W separates
    them, since (w_0 - w_1)·h_2 = -(w_0 - w_1)·h_1; with the constant coordinate a bias does."""
    from ntpcert.instance import NTPInstance

    h_hat = np.array([[1.0, -1.0], [-1.0, 1.0]])
    counts = np.array([[3, 0], [2, 0]])
    hf = NTPInstance.from_counts(h_hat, counts)
    tl = NTPInstance.from_counts(np.hstack([h_hat, np.ones((2, 1))]), counts)
    assert _verdicts(hf) == (True, False) and _verdicts(tl) == (True, True)


# ------------------------------------------------------------------------------- provenance, extras, refusals
def test_a_certificate_of_a_bridge_instance_records_the_reader_and_verifies(models, tmp_path):
    from ntpcert.cli import main
    from ntpcert.pipeline.exact_verdicts import exact_certify

    bd = from_transformer_bridge(_bridge(models["wide"], compat=True), models["short"])
    cert = tmp_path / "C.json"
    rep = exact_certify(bd.instance, svm=False, certificate_out=str(cert), source=bd.source_record())
    assert rep.path is not None
    data = json.loads(cert.read_text())
    assert data["source"]["reader"]["processing"]["fold_ln"] is True
    assert data["source"]["reader"]["forward"] == "bridge"
    assert dict(data["source"]["files"]).keys() == {"state_dict", "tokenizer.json"}
    assert main(["verify", str(cert)]) == 0
    tool = os.path.join(os.path.dirname(__file__), "..", "tools", "ntpcert_check.py")
    run = subprocess.run([sys.executable, tool, str(cert)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "read through transformer_lens" in run.stdout, run.stdout + run.stderr
    bad = dict(data)
    bad["source"] = {**data["source"], "reader": {**data["source"]["reader"], "processing": {"fold_ln": "yes"}}}
    from ntpcert.certificate.structure import check_source_section
    from ntpcert.errors import CertificateError

    with pytest.raises(CertificateError, match="source.reader.processing.fold_ln"):
        check_source_section(bad["source"])
    from ntpcert.certificate import jsonio
    from ntpcert.certificate.checker import verify_text
    from tests.standalone import standalone

    for forged in ({**data["source"]["reader"], "processing": {"fold_ln": "yes"}},
                   {**data["source"]["reader"], "hook": 3}, {k: v for k, v in data["source"]["reader"].items()
                                                             if k != "library"},
                   {**data["source"]["reader"], "forward": 3}, {**data["source"]["reader"], "bridge_gap": "2e-7"},
                   {**data["source"]["reader"], "bridge_gap": 1}, {**data["source"]["reader"], "forward_note": None}):
        text = jsonio.dumps({**data, "source": {**data["source"], "reader": forged}}, reseal=True)
        assert not verify_text(text).valid and not standalone(text)[0], forged


@pytest.mark.parametrize("module, extra, call", [("transformer_lens", "tl", from_transformer_bridge),
                                                 ("transformer_lens", "tl", from_hooked_transformer),
                                                 ("nnsight", "nnsight", from_nnsight)])
def test_without_the_extra_one_line_names_it(monkeypatch, module, extra, call):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingExtraError, match=rf"pip install 'ntpcert\[{extra}\]'") as err:
        call(object(), ["some text"])
    assert "\n" not in str(err.value)


def test_what_is_not_a_model_of_the_library_is_refused_in_one_line(models):
    for call, needle in ((from_transformer_bridge, "not a transformer_lens TransformerBridge"),
                         (from_hooked_transformer, "has no hook point 'ln_final.hook_normalized'"),
                         (from_nnsight, "not an nnsight wrapper")):
        with pytest.raises(InputError, match=needle):
            call(object(), ["some text"])
    with pytest.raises(InputError, match="neither a path nor a list of documents"):
        from_nnsight(_nnsight(models["gpt2"]), 42)


def test_a_certificate_of_the_bridges_wrapped_model_verifies_and_is_the_directorys(models, tmp_path):
    from ntpcert.certificate.checker import verify_text
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from tests.standalone import standalone

    bd = from_transformer_bridge(_bridge(models["gpt2"]), models["corpus"])
    md = load_model_data(models["corpus"], models["gpt2"])
    certs = []
    for data, name in ((bd, "bridge.json"), (md, "dir.json")):
        rep = exact_certify(data.instance, svm=False, certificate_out=str(tmp_path / name),
                            source=data.source_record())
        assert rep.path is not None
        certs.append(json.loads((tmp_path / name).read_text()))
    text = (tmp_path / "bridge.json").read_text()
    assert verify_text(text).valid and standalone(text)[0]
    reader = certs[0]["source"]["reader"]
    assert reader["forward"] == "transformers" and type(reader["bridge_gap"]) is float
    # everything the instance decides is the model directory's: the same fingerprint and claims
    assert certs[0]["instance"] == certs[1]["instance"] and certs[0]["claims"] == certs[1]["claims"]
