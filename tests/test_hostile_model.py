"""Hostile inputs to the model reader and the data readers: each is refused with one line on stderr naming the
field or value, exit 2, no output file, and no code from the model directory run.

The models are tiny GPT-2s built from a config (tests.lm_models); each case edits a copy of one directory.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from ntpcert.cli import main

torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]
from safetensors.numpy import load_file, save_file  # noqa: E402

from tests.lm_models import small_corpus, tiny_model, train_tokenizer  # noqa: E402

#: A file the directory's code would write if it ever ran (a module-level side effect of evil.py).
EVIL = "open({marker!r}, 'w').write('ran')\nclass EvilModel:\n    pass\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return {"root": root, "corpus": small_corpus(root), "model": tiny_model(root, "gpt2-untied")}


def _copy(base, tmp_path, name="m"):
    d = tmp_path / name
    shutil.copytree(base["model"], d)
    return d


def _config(d, **changes):
    cfg = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))


def _tensors(d, edit):
    t = load_file(str(d / "model.safetensors"))
    edit(t)
    save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})


def _set(name, idx, value):
    def edit(t):
        a = t[name].copy()
        a[idx] = value
        t[name] = a
    return edit


def _refused(capsys, rc, outs, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1, err
    for n in needles:
        assert n in err[0], err[0]
    for o in outs:
        assert not os.path.exists(o), o
    return err[0]


def _certify(base, tmp_path, capsys, model, *needles, extra=()):
    cert = tmp_path / "C.json"
    rc = main(["certify", base["corpus"], "--model", str(model), "--exact", "--no-svm", "--certificate-out",
               str(cert), *extra])
    return _refused(capsys, rc, [cert], *needles)


# ----------------------------------------------------------------------------------- 1. files inside the directory
@pytest.mark.parametrize("where", ["parent", "absolute"])
def test_a_shard_index_naming_a_file_outside_is_refused(base, tmp_path, capsys, where):
    d = _copy(base, tmp_path)
    outside = tmp_path / "outside.safetensors"
    shutil.move(d / "model.safetensors", outside)
    name = "../outside.safetensors" if where == "parent" else str(outside)
    keys = load_file(str(outside)).keys()
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": dict.fromkeys(keys,
                                                                                                           name)}))
    _certify(base, tmp_path, capsys, d, "shard index", repr(name), "outside the model directory")


@pytest.mark.parametrize("what", ["model.safetensors", "tokenizer.json", "config.json"])
def test_a_symlink_out_of_the_directory_is_refused(base, tmp_path, capsys, what):
    d = _copy(base, tmp_path)
    outside = tmp_path / ("outside-" + what)
    shutil.move(d / what, outside)
    os.symlink(outside, d / what)
    _certify(base, tmp_path, capsys, d, what, "outside the model directory")


def test_a_symlink_inside_the_directory_is_read(base, tmp_path, capsys):
    from ntpcert.instance.lm import load_model_data

    d = _copy(base, tmp_path)
    (d / "sub").mkdir()
    shutil.move(d / "model.safetensors", d / "sub" / "w.safetensors")
    os.symlink(os.path.join("sub", "w.safetensors"), d / "model.safetensors")
    a = load_model_data(base["corpus"], str(d), static=True, context="tokens:1")
    b = load_model_data(base["corpus"], base["model"], static=True, context="tokens:1")
    np.testing.assert_array_equal(a.instance.embeddings, b.instance.embeddings)


def test_custom_code_in_the_directory_is_refused_and_never_run(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    marker = tmp_path / "ran"
    (d / "evil.py").write_text(EVIL.format(marker=str(marker)))
    _config(d, auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"})
    _certify(base, tmp_path, capsys, d, "auto_map", "custom code")
    assert not marker.exists()
    _config(d, auto_map=None, model_type="evil")  # an architecture transformers does not have: not looked up
    _certify(base, tmp_path, capsys, d, "unknown architecture")
    assert not marker.exists()


def test_an_adapter_directory_is_refused(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    (d / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path / "elsewhere")}))
    _certify(base, tmp_path, capsys, d, "adapter_config.json")


def test_transformers_is_asked_for_no_remote_code_and_no_pickle(base, monkeypatch):
    import transformers

    from ntpcert.instance.lm import load_model_data

    seen = []
    for cls, meth in ((transformers.AutoModelForCausalLM, "from_pretrained"),
                      (transformers.AutoModelForCausalLM, "from_config"), (transformers.AutoConfig, "from_pretrained")):
        real = getattr(cls, meth)

        def spy(*args, _real=real, _name=f"{cls.__name__}.{meth}", **kwargs):
            seen.append((_name, kwargs))
            return _real(*args, **kwargs)

        monkeypatch.setattr(cls, meth, spy)
    load_model_data(base["corpus"], base["model"])
    names = {n for n, _ in seen}
    assert {"AutoModelForCausalLM.from_pretrained", "AutoModelForCausalLM.from_config",
            "AutoConfig.from_pretrained"} <= names
    for name, kwargs in seen:
        assert kwargs.get("trust_remote_code") is False, name
    load = [k for n, k in seen if n == "AutoModelForCausalLM.from_pretrained"]
    assert all(k.get("use_safetensors") is True and k.get("local_files_only") is True for k in load)


# ----------------------------------------------------------------------------------- 2. every tensor present
def test_a_missing_tensor_is_refused_by_name(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    _tensors(d, lambda t: t.pop("transformer.ln_f.weight"))
    _certify(base, tmp_path, capsys, d, "'transformer.ln_f.weight'", "partial checkpoint")


def test_a_tensor_of_another_shape_or_an_integer_dtype_is_refused(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    _tensors(d, lambda t: t.update({"transformer.ln_f.bias": np.zeros(7, dtype=np.float32)}))
    _certify(base, tmp_path, capsys, d, "'transformer.ln_f.bias'", "shape (7,)")
    _tensors(d, lambda t: t.update({"transformer.ln_f.bias": np.zeros(16, dtype=np.int32)}))
    _certify(base, tmp_path, capsys, d, "'transformer.ln_f.bias'", "I32")


def test_the_loading_report_is_checked_too(base, monkeypatch):
    """Where names are converted on load the header check stands aside: transformers' own report decides."""
    import transformers

    from ntpcert.errors import InputError
    from ntpcert.instance.lm import checkpoint, load_model_data

    real = transformers.AutoModelForCausalLM.from_pretrained

    def reporting_a_missing_tensor(*args, **kwargs):
        model, info = real(*args, **kwargs)
        return model, {**info, "missing_keys": {"transformer.h.0.mlp.c_fc.weight"}}

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", reporting_a_missing_tensor)
    monkeypatch.setattr(checkpoint, "_check_names", lambda *a: None)
    with pytest.raises(InputError, match=r"'transformer\.h\.0\.mlp\.c_fc\.weight' is missing"):
        load_model_data(base["corpus"], base["model"])


# ----------------------------------------------------------------------------------- 3. sizes before allocation
@pytest.mark.parametrize("key, value, needle", [("vocab_size", 10**12, "vocab_size = 1000000000000"),
                                                ("n_embd", 10**9, "n_embd = 1000000000"),
                                                ("n_layer", 10**7, "n_layer = 10000000"),
                                                ("n_positions", 10**6, "the config implies (1000000, 16)")])
def test_a_huge_size_in_the_config_is_refused_before_allocation(base, tmp_path, capsys, key, value, needle):
    import tracemalloc

    d = _copy(base, tmp_path)
    _config(d, **{key: value})
    tracemalloc.start()
    try:
        _certify(base, tmp_path, capsys, d, needle)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20  # numpy's allocations are traced: none near the config's sizes


def test_a_huge_size_on_the_static_path_is_refused(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    _config(d, vocab_size=10**12)
    _certify(base, tmp_path, capsys, d, "vocab_size = 1000000000000", extra=["--static"])


# ----------------------------------------------------------------------------------- 4. the tokenizer
def test_a_tokenizer_with_an_empty_vocabulary_is_refused(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["model"]["vocab"], tok["model"]["merges"], tok["added_tokens"] = {}, [], []
    (d / "tokenizer.json").write_text(json.dumps(tok))
    _certify(base, tmp_path, capsys, d, "tokenizer", "empty vocabulary")


def test_a_tokenizer_larger_than_the_decoder_is_refused(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    V = json.loads((d / "config.json").read_text())["vocab_size"]
    with open(base["corpus"], encoding="utf-8") as f:
        big = train_tokenizer(f.read(), 2 * V, str(d / "tokenizer.json"))
    assert big > V
    _certify(base, tmp_path, capsys, d, "tokenizer", f"vocab_size is {V}")


# ----------------------------------------------------------------------------------- 5. --bos
@pytest.mark.parametrize("bos", [None, 10**6, "1"])
def test_bos_without_a_bos_token_id_is_refused(base, tmp_path, capsys, bos):
    d = _copy(base, tmp_path)
    _config(d, bos_token_id=bos)
    _certify(base, tmp_path, capsys, d, "--bos", "bos_token_id", extra=["--bos"])


# ----------------------------------------------------------------------------------- 6. non-finite decoder or h
def test_nan_in_the_head_is_refused_by_name(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    _tensors(d, _set("lm_head.weight", (5, 1), np.nan))
    _certify(base, tmp_path, capsys, d, "decoder's weight", "[5, 1]", "nan")
    fig, table = tmp_path / "f.png", tmp_path / "t.csv"
    rc = main(["compare", base["corpus"], "--model", str(d), "--json", "--figure", str(fig)])
    _refused(capsys, rc, [fig, table], "decoder's weight", "nan")
    _certify(base, tmp_path, capsys, d, "'lm_head.weight'", "[5, 1]", extra=["--static", "--context", "tokens:1"])


def test_a_non_finite_h_is_refused_by_name(base, tmp_path, capsys):
    d = _copy(base, tmp_path)
    _tensors(d, _set("transformer.ln_f.bias", (3,), np.inf))
    _certify(base, tmp_path, capsys, d, "captured h", "is not finite")


def test_a_nan_residual_is_not_taken_for_a_small_one(base, monkeypatch):
    """The residual check refuses NaN itself (max() would keep the old value against it)."""
    from ntpcert.errors import InputError
    from ntpcert.instance.lm import capture, load_model_data

    real = capture._finite
    calls = []

    def logits_pass(what, a):  # let non-finite logits through to the residual
        calls.append(what)
        if "logits" not in what:
            real(what, a)

    monkeypatch.setattr(capture, "_finite", logits_pass)
    import transformers

    real_load = transformers.AutoModelForCausalLM.from_pretrained

    def nan_logits(*args, **kwargs):
        model, info = real_load(*args, **kwargs)
        forward = model.forward

        def patched(*a, **k):
            out = forward(*a, **k)
            out.logits[:, :, 0] = float("nan")
            return out

        model.forward = patched
        return model, info

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", nan_logits)
    with pytest.raises(InputError, match="recomputed logits .* not finite"):
        load_model_data(base["corpus"], base["model"])
    assert any("logits" in c for c in calls)


# ----------------------------------------------------------------------------------- 7. integer embeddings
TWO_ROWS = [[2**53, 2**53], [2**53, 2**53 + 1]]
COUNTS = [[1, 2, 0], [2, 1, 0]]  # compatible iff the two rows are independent


@pytest.mark.parametrize("fmt", ["json", "npz-int64", "npz-uint64"])
def test_integer_embeddings_float64_cannot_hold_are_refused_naming_the_entry(tmp_path, capsys, fmt):
    path = tmp_path / ("D.json" if fmt == "json" else "D.npz")
    if fmt == "json":
        path.write_text(json.dumps({"embeddings": TWO_ROWS, "counts": COUNTS}))
    else:
        np.savez(path, embeddings=np.array(TWO_ROWS, dtype=fmt.split("-")[1]), counts=np.array(COUNTS))
    cert = tmp_path / "C.json"
    rc = main(["certify", str(path), "--exact", "--certificate-out", str(cert)])
    _refused(capsys, rc, [cert], "embeddings[1, 1]", str(2**53 + 1), "float64 cannot hold exactly")


def test_integer_embeddings_float64_holds_are_read(tmp_path, capsys):
    path = tmp_path / "D.json"
    path.write_text(json.dumps({"embeddings": [[2**53, 2**53], [2**53, 2**54]], "counts": COUNTS}))
    assert main(["certify", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compatible"]["holds"] is True


def test_embeddings_written_as_strings_are_refused(tmp_path, capsys):
    path = tmp_path / "D.json"
    path.write_text(json.dumps({"embeddings": [["1", 0], [0, 1]], "counts": COUNTS}))
    cert = tmp_path / "C.json"
    rc = main(["certify", str(path), "--exact", "--certificate-out", str(cert)])
    _refused(capsys, rc, [cert], "embeddings[0, 0]", "'1'", "string")


# ----------------------------------------------------------------------------------- 8. HiGHS on a large LP
def test_highs_on_an_lp_past_its_limit_is_undetermined_without_building_it(tmp_path, capsys, monkeypatch):
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve import separability_lp

    rng = np.random.default_rng(0)
    m, d, V = 40, 3, 6
    C = (rng.random((m, V)) < 0.4).astype(int) * rng.integers(1, 4, size=(m, V))
    C[:, 0] += 1
    path = tmp_path / "D.json"
    path.write_text(json.dumps({"embeddings": rng.integers(-3, 4, size=(m, d)).tolist(), "counts": C.tolist()}))
    nnz = 2 * d * (int(m * V - (C > 0).sum()) + int((C > 0).sum() - m))
    monkeypatch.setattr(separability_lp, "LP_MAX_NONZEROS", nnz - 1)

    def never(self):
        raise AssertionError("the LP matrix was built")

    monkeypatch.setattr(KeslerSystem, "margin_matrix", never)
    monkeypatch.setattr(KeslerSystem, "eq_matrix", never)
    assert main(["certify", str(path), "--separability-solver", "highs", "--no-svm", "--json"]) == 0
    sep = json.loads(capsys.readouterr().out)["separable"]
    assert sep["holds"] is None and "too large to try" in sep["reason"] and "LP_MAX_NONZEROS" in sep["reason"]
    assert str(nnz) in sep["reason"]
