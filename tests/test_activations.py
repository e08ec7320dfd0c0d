"""An activations file (--activations, ntpcert.instance.lm.activations): the instance, verdicts and compare
numbers of --model on the same corpus, in every layout; verify; and a table of bad files."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ntpcert.cli import main
from ntpcert.errors import InputError
from ntpcert.instance.lm.activations import read_activations, write_activations

# ----------------------------------------------------------------------------------- bad files (numpy only)
#: A small valid file of one row per position: V = 5, d = 3, contexts of K = 2 tokens (one left-padded).
_CTX = np.array([[0, 1], [1, 2], [0, 1], [2, 3], [-1, 4], [1, 2]])
_NEXT = np.array([2, 3, 2, 4, 0, 1])
_HC = {tuple(c): np.random.default_rng(i).normal(size=3) for i, c in enumerate(np.unique(_CTX, axis=0))}


def _positions() -> dict:
    rng = np.random.default_rng(7)
    return {"h": np.array([_HC[tuple(c)] for c in _CTX]), "next_token": _NEXT.copy(), "context": _CTX.copy(),
            "W": rng.normal(size=(5, 3)), "b": rng.normal(size=5)}


def _contexts() -> dict:
    """The same data, one row per distinct context (m = 4), dense counts."""
    ctx = np.unique(_CTX, axis=0)
    C = np.zeros((4, 5), dtype=np.int64)
    for c, z in zip(_CTX, _NEXT):
        C[np.flatnonzero((ctx == c).all(axis=1))[0], z] += 1
    return {"h": np.array([_HC[tuple(c)] for c in ctx]), "counts": C, "context": ctx, "vocab_size": np.array([5])}


def _set(a, key, idx, value):
    a[key] = a[key].astype(np.float64) if isinstance(value, float) and a[key].dtype.kind != "f" else a[key]
    a[key][idx] = value
    return a


def _drop(a, *keys):
    for k in keys:
        del a[k]
    return a


def _csr(a, ptr, idx, data):
    a = _drop(a, "counts")
    a.update(counts_indptr=np.array(ptr), counts_indices=np.array(idx), counts_data=np.array(data))
    return a


BAD_ARRAYS = [
    ("no-h", lambda: _drop(_positions(), "h"), "h: missing"),
    ("nan", lambda: _set(_positions(), "h", (1, 2), np.nan), "h[1, 2] = nan is not finite"),
    ("inf", lambda: _set(_positions(), "h", (0, 0), np.inf), "h[0, 0] = inf is not finite"),
    ("h-ints", lambda: {**_positions(), "h": np.ones((6, 3), dtype=np.int64)}, "h: dtype int64, expected floats"),
    ("h-1d", lambda: {**_positions(), "h": np.ones(6)}, "h: shape (6,), expected 2 dimensions"),
    ("W-nan", lambda: _set(_positions(), "W", (4, 1), np.nan), "W[4, 1] = nan is not finite"),
    ("b-inf", lambda: _set(_positions(), "b", 3, -np.inf), "b[3] = -inf is not finite"),
    ("next-too-large", lambda: _set(_positions(), "next_token", 3, 5), "next_token[3] = 5 is not a token id in [0, 5)"),
    ("next-negative", lambda: _set(_positions(), "next_token", 0, -2), "next_token[0] = -2 is not a token id"),
    ("next-floats", lambda: {**_positions(), "next_token": _NEXT.astype(float)}, "next_token: dtype float64"),
    ("next-short", lambda: {**_positions(), "next_token": _NEXT[:-1]}, "next_token: shape (5,), expected 6 rows"),
    ("ctx-pad-inside", lambda: _set(_positions(), "context", (3, 1), -1), "context[3, 1] = -1 after a token id"),
    ("ctx-out", lambda: _set(_positions(), "context", (2, 0), 7), "context[2, 0] = 7 is not a token id (or -1"),
    ("ctx-short", lambda: {**_positions(), "context": _CTX[:4]}, "context: shape (4, 2), expected 6 rows"),
    ("h-differs", lambda: _set(_positions(), "h", (2, 1), _HC[(0, 1)][1] + 1e-9),
     "h: positions 0 and 2 have the same context [0, 1] but h differing by up to 1e-09"),
    ("no-context", lambda: _drop(_positions(), "context"), "context: missing"),
    ("no-next", lambda: _drop(_positions(), "next_token", "context"), "next_token: missing"),
    ("no-V", lambda: _drop(_positions(), "W", "b"), "vocab_size: missing"),
    ("W-d", lambda: {**_positions(), "W": np.ones((5, 2))}, "W: shape (5, 2), expected (5, 3)"),
    ("b-length", lambda: {**_positions(), "b": np.ones(4)}, "b: has 4 tokens, W says V = 5"),
    ("vocab-mismatch", lambda: {**_positions(), "vocab_size": np.array([7])}, "vocab_size: has 7 tokens, W says V = 5"),
    ("vocab-floats", lambda: {**_drop(_positions(), "W", "b"), "vocab_size": np.array([5.0])}, "vocab_size: [5.0]"),
    ("freq-length", lambda: {**_positions(), "token_frequency": np.ones(4, dtype=np.int64)},
     "token_frequency: has 4 tokens, W says V = 5"),
    ("freq-negative", lambda: {**_positions(), "token_frequency": -np.ones(5, dtype=np.int64)},
     "token_frequency[0] = -1 is not a count >= 0"),
    ("unknown", lambda: {**_drop(_positions(), "b"), "bias": np.ones(5)}, "bias: unknown key of an activations file"),
    ("counts-negative", lambda: _set(_contexts(), "counts", (1, 2), -1), "counts[1, 2] = -1 is not a count >= 0"),
    ("counts-zero-row", lambda: _set(_contexts(), "counts", (2, slice(None)), 0),
     "counts: row 2 of h has no next token"),
    ("counts-rows", lambda: {**_contexts(), "counts": np.ones((5, 5), dtype=np.int64)},
     "counts: shape (5, 5), expected 4 rows"),
    ("counts-and-next", lambda: {**_contexts(), "next_token": _NEXT}, "next_token: does not go with dense counts"),
    ("csr-partial", lambda: _drop(_csr(_contexts(), [0, 1, 2, 3, 4], [1, 2, 3, 4], [1, 1, 1, 1]), "counts_indices"),
     "counts_indices: missing"),
    ("csr-dup", lambda: _csr(_contexts(), [0, 2, 3, 4, 5], [1, 1, 2, 3, 4], [1, 1, 1, 1, 1]),
     "counts_indices: token 1 twice in row 0"),
    ("csr-ptr", lambda: _csr(_contexts(), [0, 2, 1, 4, 5], [1, 1, 2, 3, 4], [1, 1, 1, 1, 1]),
     "counts_indptr: shape (5,), first [0]: expected 5 non-decreasing offsets"),
    ("csr-token", lambda: _csr(_contexts(), [0, 1, 2, 3, 4], [1, 9, 2, 3], [1, 1, 1, 1]),
     "counts_indices[1] = 9 is not a token id in [0, 5)"),
    ("index-out", lambda: {**_drop(_contexts(), "counts"), "next_token": _NEXT, "context_index": np.arange(6) % 5},
     "context_index[4] = 4 is not a row of h in [0, 4)"),
    ("index-no-next", lambda: {**_drop(_contexts(), "counts"), "context_index": np.arange(6) % 4},
     "context_index: needs next_token"),
    ("ctx-dup", lambda: _set(_contexts(), "context", (2, slice(None)), _contexts()["context"][0]),
     "context: rows 0 and 2 are the same context"),
]


#: The arrays write_activations takes by name.
_WRITABLE = {"h", "next_token", "context", "context_index", "counts", "W", "b", "vocab_size", "token_frequency"}


@pytest.fixture
def save(tmp_path):
    def write(arrays: dict, suffix: str = ".npz", names=None) -> str:
        path = str(tmp_path / f"acts{suffix}")
        if suffix == ".npz":
            np.savez(path, **arrays, **({} if names is None else {"token_names": names}))
        else:
            from safetensors.numpy import save_file

            save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, path,
                      metadata=None if names is None else {"token_names": names})
        return path
    return write


def _refused(capsys, tmp_path, path, needle, *extra):
    out = tmp_path / "C.json"
    rc = main(["certify", path, "--activations", "--exact", "--certificate-out", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out.exists(), err


def test_the_base_files_of_the_table_are_valid(save):
    a, b = read_activations(save(_positions())), read_activations(save(_contexts(), ".safetensors"))
    assert (a.instance.m, a.instance.d, a.instance.V) == (4, 4, 5) and a.bias and a.decoder.shape == (5, 4)
    assert np.array_equal(a.instance.embeddings[:, :3], b.instance.embeddings)
    assert np.array_equal(a.instance.counts, b.instance.counts) and a.corpus_sha256 == b.corpus_sha256
    assert a.instance.embeddings[:, 3].tolist() == [1.0] * 4  # b: the constant coordinate
    assert a.source_record()["context"] == "tokens:1..2" and b.decoder is None


@pytest.mark.parametrize("name, make, needle", BAD_ARRAYS, ids=[c[0] for c in BAD_ARRAYS])
@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_bad_activations_are_one_line_exit_2_nothing_written(capsys, tmp_path, save, name, make, needle, suffix):
    arrays = make()
    path = save(arrays, suffix)
    _refused(capsys, tmp_path, path, needle)
    if "h" in arrays and set(arrays) <= _WRITABLE:  # write_activations checks the same before it writes anything
        with pytest.raises(InputError, match="^" + needle.split(":")[0].split("[")[0]):
            write_activations(str(tmp_path / f"w{suffix}"), **arrays)
        assert not (tmp_path / f"w{suffix}").exists()


def _garbage(tmp_path, case):
    if case == "garbage-npz":
        (tmp_path / "g.npz").write_bytes(b"not a zip file")
        return str(tmp_path / "g.npz"), "is not a readable .npz file"
    if case == "garbage-safetensors":
        (tmp_path / "g.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{nojson}")
        return str(tmp_path / "g.safetensors"), "is not a readable .safetensors file"
    if case == "txt":
        (tmp_path / "g.txt").write_text("h\n")
        return str(tmp_path / "g.txt"), "is not a .safetensors or .npz activations file"
    if case == "absent":
        return str(tmp_path / "none.npz"), "no such file"
    if case == "directory":
        return str(tmp_path), "is a directory, not an activations file"
    if case == "pickle":
        np.savez(tmp_path / "p.npz", h=np.array([[1.0, 2.0], [3.0]], dtype=object))
        return str(tmp_path / "p.npz"), "h: cannot be read without pickle"
    if case == "single-npy":
        with open(tmp_path / "s.npz", "wb") as f:
            np.save(f, np.ones((2, 2)))
        return str(tmp_path / "s.npz"), "is a single .npy array"
    if case == "names-npz":
        np.savez(tmp_path / "n.npz", **_positions(), token_names=np.arange(5))
        return str(tmp_path / "n.npz"), "token_names: dtype int64"
    if case == "names-count":
        np.savez(tmp_path / "n.npz", **_positions(), token_names=np.array(["a", "b"]))
        return str(tmp_path / "n.npz"), "token_names: has 2 tokens, W says V = 5"
    if case == "names-metadata":
        from safetensors.numpy import save_file

        save_file(_positions(), str(tmp_path / "n.safetensors"), metadata={"token_names": "[1, 2"})
        return str(tmp_path / "n.safetensors"), "token_names: the metadata is not a JSON list"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["garbage-npz", "garbage-safetensors", "txt", "absent", "directory", "pickle",
                                  "single-npy", "names-npz", "names-count", "names-metadata"])
def test_unreadable_activation_files_are_one_line_exit_2(capsys, tmp_path, case):
    path, needle = _garbage(tmp_path, case)
    _refused(capsys, tmp_path, path, needle)


@pytest.mark.parametrize("flags, needle", [
    (["--model", "DIR"], "--model: does not apply with --activations"),
    (["--context", "tokens:3"], "--context: does not apply with --activations"),
    (["--token-ids"], "--token-ids: does not apply with --activations"),
    (["--max-chars", "10"], "--max-chars: does not apply with --activations"),
    (["--embedding", "random:3"], "--embedding: does not apply with --activations"),
])
def test_model_and_corpus_options_do_not_apply_to_an_activations_file(capsys, tmp_path, save, flags, needle):
    _refused(capsys, tmp_path, save(_positions()), needle, *flags)


def test_write_activations_names_tokens_and_refuses_an_existing_file(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    for suffix in (".npz", ".safetensors"):
        path = str(tmp_path / f"n{suffix}")
        md = write_activations(path, **_positions(), token_names=names, token_frequency=np.arange(5))
        assert list(md.instance.token_names) == names and list(md.instance.context_names) == ["e", "ab", "bc", "cd"]
        assert md.token_frequency.tolist() == [0, 1, 2, 3, 4] and md.files[0][0] == f"n{suffix}"
        with pytest.raises(InputError, match="exists"):
            write_activations(path, **_positions())
    c = _contexts()
    a = write_activations(str(tmp_path / "r.npz"), h=c["h"], counts=c["counts"], vocab_size=5)
    assert list(a.instance.context_names) == ["c0", "c1", "c2", "c3"] and a.source_record()["context"] == "rows"
    assert a.token_frequency.tolist() == c["counts"].sum(axis=0).tolist()  # default: occurrences as next token


# ----------------------------------------------------------------------------------- against --model
torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]: CI has it
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from ntpcert.instance.lm import load_model_data  # noqa: E402
from ntpcert.instance.lm.contexts import split_documents  # noqa: E402
from ntpcert.instance.lm.load import read_corpus, tokenize_documents  # noqa: E402
from tests.cli_json import json_numbers, run_json  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A model with a head bias and d = 128 above the m = 89 contexts (Lemma 1 decides at once), its data
    through --model, and the corpus's ids."""
    root = tmp_path_factory.mktemp("acts")
    corpus = small_corpus(root, pydoc_text(250))
    model = tiny_model(root, "gptj", d=128, corpus=pydoc_text(250))
    md = load_model_data(corpus, model)
    ids, _ = tokenize_documents(os.path.join(model, "tokenizer.json"), split_documents(read_corpus(corpus)))
    return {"root": root, "corpus": corpus, "model": model, "md": md, "ids": ids}


def _arrays(md, layout: str, ids) -> dict:
    """The model's captured h in each layout, with its decoder W, its bias b and the corpus's frequencies."""
    H, Wb, c = md.instance.embeddings, md.decoder, md.counts
    ctx = np.array([list(t) for t in c.contexts])
    perm = np.random.default_rng(1).permutation(c.m)  # the file's row order is not the instance's
    out = {"W": Wb[:, :-1].astype(np.float32), "b": Wb[:, -1].astype(np.float32),
           "token_frequency": c.token_frequency, "token_names": list(md.vocab_names)}
    if layout == "positions":
        row = {t: j for j, t in enumerate(c.contexts)}
        pos = [(row[tuple(d[i - 2:i])], d[i]) for d in ids for i in range(2, len(d))]
        js, nxt = np.array(pos).T
        return {**out, "h": H[js, :-1].astype(np.float32), "context": ctx[js], "next_token": nxt}
    base = {**out, "h": H[perm, :-1].astype(np.float32), "context": ctx[perm]}
    if layout == "dense":
        return {**base, "counts": c.dense()[perm]}
    if layout == "sparse":
        import scipy.sparse as sp

        return {**base, "counts": sp.csr_matrix(c.dense()[perm])}
    rank = np.argsort(perm)
    return {**base, "next_token": np.repeat(c.tokens, c.values), "context_index": rank[np.repeat(c.rows, c.values)]}


LAYOUTS = [("positions", ".npz"), ("dense", ".safetensors"), ("sparse", ".npz"), ("pairs", ".safetensors")]


@pytest.mark.parametrize("layout, suffix", LAYOUTS)
def test_every_layout_of_the_models_h_is_the_models_instance(lm, tmp_path, layout, suffix):
    path = str(tmp_path / f"a{suffix}")
    written = write_activations(path, **_arrays(lm["md"], layout, lm["ids"]))
    for merge in (False, True):
        want = load_model_data(lm["corpus"], lm["model"], merge_unseen=merge)
        got = read_activations(path, merge_unseen=merge)
        assert got.instance.fingerprint() == want.instance.fingerprint()
        assert list(got.instance.context_names) == list(want.instance.context_names)
        assert list(got.instance.token_names) == list(want.instance.token_names)
        assert np.array_equal(got.decoder, want.decoder) and np.array_equal(got.token_frequency, want.token_frequency)
        assert (got.merge is None) == (not merge) and (not merge or got.merge.to_json() == want.merge.to_json())
    assert written.source_record()["context"] == "tokens:2" and written.bias


def test_prefix_contexts_left_padded_are_the_models_prefix_instance(lm, tmp_path):
    md = load_model_data(lm["corpus"], lm["model"], context="prefix:4")
    c = md.counts
    ctx = np.full((c.m, 4), -1)
    for j, t in enumerate(c.contexts):
        ctx[j, 4 - len(t):] = t
    perm = np.random.default_rng(2).permutation(c.m)
    got = write_activations(str(tmp_path / "p.npz"), h=md.instance.embeddings[perm, :-1], context=ctx[perm],
                            counts=c.dense()[perm], W=md.decoder[:, :-1], b=md.decoder[:, -1])
    assert got.instance.fingerprint() == md.instance.fingerprint() and np.array_equal(got.decoder, md.decoder)
    assert got.source_record()["context"] == "tokens:1..4" and min(len(t) for t in c.contexts) == 1


def test_a_forward_hook_of_ones_own_gives_the_models_instance(lm, tmp_path):
    """h captured here, not by ntpcert: the decoder's input at the last of each context's two tokens."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(lm["model"], local_files_only=True).eval()
    c = lm["md"].counts
    seen = []
    hook = model.lm_head.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    with torch.no_grad():
        model(input_ids=torch.tensor([list(t) for t in c.contexts]), use_cache=False)
    hook.remove()
    h = seen[-1][:, -1].numpy()
    write_activations(str(tmp_path / "hook.npz"), h=h, context=np.array([list(t) for t in c.contexts]),
                      counts=c.dense(), W=model.lm_head.weight.detach().numpy(), b=model.lm_head.bias.detach().numpy())
    got = read_activations(str(tmp_path / "hook.npz"))
    assert got.instance.fingerprint() == lm["md"].instance.fingerprint()


_run, _numbers = run_json, json_numbers


def test_certify_and_compare_read_the_file_as_the_model(lm, tmp_path, capsys):
    path = str(tmp_path / "a.safetensors")
    write_activations(path, **_arrays(lm["md"], "positions", lm["ids"]))
    a = _run(capsys, ["certify", lm["corpus"], "--model", lm["model"], "--json"])
    b = _run(capsys, ["certify", path, "--activations", "--json"])
    for key in ("m", "d", "V", "n", "entropy", "compatible", "separable", "entropy_bound_reachable", "vocabulary",
                "excess_loss", "split", "svm_error"):
        assert a[key] == b[key], key
    a = _run(capsys, ["compare", lm["corpus"], "--model", lm["model"], "--json"])
    b = _run(capsys, ["compare", path, "--activations", "--json"])
    na, nb = (_numbers({k: v for k, v in x.items() if k != "source"}) for x in (a, b))
    assert na.keys() == nb.keys() and len(na) > 40
    for key, value in na.items():
        if isinstance(value, float):
            assert nb[key] == pytest.approx(value, rel=1e-6, abs=1e-6), key
        else:
            assert nb[key] == value, key
    src = b["source"]
    assert src["embeddings"] == "activations" and src["corpus"] == "counts" and src["bias"] is True
    assert src["capture_residual"] is None and src["decoder"] == "the activations file's W"


def test_compare_without_W_in_the_file_says_to_give_one(lm, tmp_path, capsys):
    arrays = _arrays(lm["md"], "dense", lm["ids"])
    path = str(tmp_path / "noW.npz")
    write_activations(path, **{k: v for k, v in arrays.items() if k not in ("W",)})
    assert read_activations(path).instance.fingerprint() == lm["md"].instance.fingerprint()  # b alone: still d + 1
    assert main(["compare", path, "--activations", "--json"]) == 2
    assert "--W: the activations file has no W" in capsys.readouterr().err
    np.save(tmp_path / "W.npy", lm["md"].decoder)
    assert main(["compare", path, "--activations", "--W", str(tmp_path / "W.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["separable"] is True


def test_verify_rereads_a_certificate_of_an_activations_file(lm, tmp_path, capsys):
    import hashlib

    # the instance is named after the file: named after the model directory, it is --model's, names and all
    path = str(tmp_path / "gptj.npz")
    write_activations(path, **_arrays(lm["md"], "sparse", lm["ids"]))
    cert = tmp_path / "C.json"
    assert main(["certify", path, "--activations", "--exact", "--no-svm", "--certificate-out", str(cert)]) == 0
    src = json.loads(cert.read_text())["source"]
    with open(path, "rb") as f:
        assert src["files"] == [["gptj.npz", hashlib.sha256(f.read()).hexdigest()]]
    assert src["embeddings"] == "activations" and src["corpus"] == "counts" and src["vocabulary"]["merged"] > 0
    capsys.readouterr()
    assert main(["verify", str(cert), "--data", path, "--activations"]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    # the model's own data is the same instance, names included (the file carries the tokenizer's)
    assert os.path.basename(lm["model"]) == "gptj"
    assert main(["verify", str(cert), "--data", lm["corpus"], "--model", lm["model"]]) == 0
    assert main(["verify", str(cert)]) == 0
    capsys.readouterr()
    assert main(["verify", str(cert), "--activations"]) == 2
    assert "--activations: applies with --data" in capsys.readouterr().err
