import numpy as np
import pytest

from ntpcert import InputError
from ntpcert.instance.embeddings import (
    EmbeddingSpec,
    embed_contexts,
    from_npy,
    onehot_concat,
    onehot_context,
    parse_embedding_spec,
    random_gaussian,
)


def test_onehot_context_is_identity():
    H = onehot_context(4)
    assert H.shape == (4, 4) and H.dtype == np.float64
    np.testing.assert_array_equal(H, np.eye(4))


def test_onehot_concat_blocks_and_right_alignment():
    vocab = ["a", "b", "c"]
    H = onehot_concat([("a", "b"), ("c", "c"), ("b",)], vocab, 2)
    assert H.shape == (3, 6)
    np.testing.assert_array_equal(H[0], [1, 0, 0, 0, 1, 0])  # a in block 0, b in block 1
    np.testing.assert_array_equal(H[1], [0, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(H[2], [0, 0, 0, 0, 1, 0])  # short context: last block, zero block first
    assert set(np.unique(H)) <= {0.0, 1.0}


def test_onehot_concat_rejects_long_contexts_and_unknown_tokens():
    with pytest.raises(InputError, match=r"contexts\[0\]"):
        onehot_concat([("a", "b", "a")], ["a", "b"], 2)
    with pytest.raises(InputError, match="vocabulary"):
        onehot_concat([("z",)], ["a", "b"], 2)


def test_random_gaussian_shape_scale_and_determinism():
    H = random_gaussian(400, 50, np.random.default_rng(0))
    assert H.shape == (400, 50)
    assert np.mean(np.sum(H**2, axis=1)) == pytest.approx(1.0, abs=0.05)
    np.testing.assert_array_equal(H, random_gaussian(400, 50, np.random.default_rng(0)))
    with pytest.raises(TypeError, match="rng"):
        random_gaussian(2, 2, 0)


def test_from_npy_reads_and_validates(tmp_path):
    good = np.arange(6, dtype=np.int32).reshape(3, 2)
    np.save(tmp_path / "h.npy", good)
    H = from_npy(tmp_path / "h.npy", 3)
    assert H.dtype == np.float64
    np.testing.assert_array_equal(H, good)
    with pytest.raises(InputError, match=r"embedding: .*shape \(3, 2\), expected \(4, d\)"):
        from_npy(tmp_path / "h.npy", 4)


def _write(tmp_path, arr, name="e.npy"):
    path = tmp_path / name
    np.save(path, arr, allow_pickle=True)
    return path


BAD_NPY = [
    ("missing", lambda t: t / "none.npy", "no such file"),
    ("garbage", lambda t: (t / "g.npy", (t / "g.npy").write_text("hello"))[0], "cannot read"),
    ("nan", lambda t: _write(t, np.array([[1.0, np.nan], [0.0, 1.0]])), "not finite"),
    ("one_d", lambda t: _write(t, np.ones(2)), "shape"),
    ("strings", lambda t: _write(t, np.array([["a", "b"], ["c", "d"]])), "dtype"),
    ("objects", lambda t: _write(t, np.array([[1, None], [0, 1]], dtype=object)), "cannot read"),
    ("zero_columns", lambda t: _write(t, np.ones((2, 0))), "shape"),
    ("directory", lambda t: t, "directory"),
]


@pytest.mark.parametrize("case", BAD_NPY, ids=[c[0] for c in BAD_NPY])
def test_from_npy_bad_files(tmp_path, case):
    _, make, pattern = case
    with pytest.raises(InputError, match=pattern) as info:
        from_npy(make(tmp_path), 2)
    assert str(info.value).startswith("embedding:")


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("onehot-context", EmbeddingSpec("onehot-context")),
        ("onehot-concat", EmbeddingSpec("onehot-concat")),
        ("random:16", EmbeddingSpec("random", dim=16)),
        ("dir/h.npy", EmbeddingSpec("file", path="dir/h.npy")),
    ],
)
def test_parse_embedding_spec(spec, expected):
    parsed = parse_embedding_spec(spec)
    assert parsed == expected
    assert str(parsed) == spec


@pytest.mark.parametrize("spec", ["", "random", "random:", "random:0", "random:-3", "random:2.5", "random:x",
                                  "onehot", "gaussian:4", "h.npz", 3, None])
def test_parse_embedding_spec_rejects(spec):
    with pytest.raises(InputError, match="embedding") as info:
        parse_embedding_spec(spec)
    assert repr(spec) in str(info.value)


def test_embed_contexts_dispatch(tmp_path):
    contexts, vocab = [("a",), ("b",), ("a", "b")], ["a", "b"]
    rng = np.random.default_rng(1)
    assert embed_contexts("onehot-context", contexts, vocab, k=2, rng=rng).shape == (3, 3)
    assert embed_contexts("onehot-concat", contexts, vocab, k=2, rng=rng).shape == (3, 4)
    assert embed_contexts("random:7", contexts, vocab, k=2, rng=rng).shape == (3, 7)
    np.save(tmp_path / "h.npy", np.ones((3, 5)))
    assert embed_contexts(str(tmp_path / "h.npy"), contexts, vocab, k=2, rng=rng).shape == (3, 5)
