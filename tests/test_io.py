import json
import os
import zipfile
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import InputError, NTPInstance
from ntpcert.instance.io import read_json, read_npz, write_json, write_npz
from ntpcert.instance.load import load_instance
from ntpcert.util.files import atomic_write, atomic_write_bytes
from ntpcert.instance.io.corpus import count_sequences, display_token, instance_from_text, ngram_counts, tokenize

from .conftest import random_instance

READERS = {"npz": (write_npz, read_npz), "json": (write_json, read_json)}


def _same(a: NTPInstance, b: NTPInstance) -> None:
    assert a.fingerprint() == b.fingerprint()
    assert a.token_names == b.token_names
    assert a.context_names == b.context_names
    assert a.name == b.name
    assert a.probs_exact_from_floats == b.probs_exact_from_floats
    np.testing.assert_array_equal(a.embeddings, b.embeddings)


# ---------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("fmt", sorted(READERS))
def test_counts_round_trip_keeps_integers_and_names(tmp_path, rng, fmt):
    write, read = READERS[fmt]
    inst = random_instance(rng, m=7, d=5, V=4)
    inst = NTPInstance.from_counts(inst.embeddings, inst.counts, token_names=["a", "b", "\n", "é"],
                                   context_names=[f"c{j}" for j in range(7)], name="mine")
    path = tmp_path / f"x.{fmt}"
    write(inst, path)
    back = read(path)
    _same(inst, back)
    assert back.counts.dtype == np.int64
    np.testing.assert_array_equal(back.counts, inst.counts)


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_fraction_probs_round_trip_exactly(tmp_path, fmt):
    write, read = READERS[fmt]
    inst = NTPInstance.from_probs(np.eye(3)[:2], [["1/3", "2/3", "0"], ["1/7", "0", "6/7"]], ["1/3", "2/3"])
    path = tmp_path / f"x.{fmt}"
    write(inst, path)
    back = read(path)
    _same(inst, back)
    assert back.exact_probs == inst.exact_probs
    assert back.exact_weights == (Fraction(1, 3), Fraction(2, 3))


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_float_probs_round_trip_as_the_same_dyadic_rationals(tmp_path, fmt):
    write, read = READERS[fmt]
    inst = NTPInstance.from_probs(np.array([[0.1, 2.0], [np.pi, -1e-300]]), [[0.1, 0.9], [0.3, 0.7]], [0.3, 0.7])
    path = tmp_path / f"x.{fmt}"
    write(inst, path)
    back = read(path)
    _same(inst, back)
    assert back.probs_exact_from_floats


def test_json_fraction_strings_are_read_exactly(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"embeddings": [[1, 0], [0, 1]], "probs": [["1/3", "2/3"], ["1", "0"]],
                                "weights": ["1/4", "3/4"], "token_names": ["x", "y"]}))
    inst = read_json(path)
    assert inst.exact_row(0) == (Fraction(1, 3), Fraction(2, 3))
    assert inst.exact_weight(1) == Fraction(3, 4)
    assert inst.token_names == ("x", "y")
    assert inst.name == "f"
    written = tmp_path / "g.json"
    write_json(inst, written)
    obj = json.loads(written.read_text())
    assert obj["probs"] == [["1/3", "2/3"], ["1", "0"]]
    assert obj["weights"] == ["1/4", "3/4"]


@pytest.mark.parametrize("text,needle", [
    ('{"embeddings": [[1]], "counts": [[1, 0]], "note": "x"}', "unknown key 'note'"),
    ('{"embeddings": [[1]], "counts": [[1, 0]], "counts": [[0, 1]]}', "duplicate key 'counts'"),
    ('{"embeddings": [[NaN]], "counts": [[1, 0]]}', "embeddings[0][0]: the JSON constant NaN"),
    ('{"embeddings": [[1]], "probs": [[1, 0]], "weights": [Infinity]}', "weights[0]: the JSON constant Infinity"),
    ('{"embeddings": [[1e400]], "counts": [[1, 0]]}', "embeddings[0][0]: the number '1e400' overflows"),
    ('{"embeddings": [[1]], "counts": [[1, ' + "1" * 4301 + ']]}', "counts[0][1]: an integer literal of 4301 digits"),
    ('{"embeddings": [[1]], "counts": [[1, 0]], "name": {"a": 1, "a": 2}}', "duplicate key 'a'"),
])
def test_json_data_files_are_read_strictly(tmp_path, text, needle):
    """The certificate's strict reader (ntpcert.util.strict_json): one line naming the field."""
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_json(path)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_npz_data_files_refuse_unknown_keys(tmp_path):
    path = tmp_path / "u.npz"
    np.savez(path, embeddings=np.eye(2), counts=np.array([[1, 0], [0, 1]]), extra=np.zeros(1))
    with pytest.raises(InputError, match="unknown key 'extra'"):
        read_npz(path)


def test_writer_leaves_no_temporary_and_replaces_atomically(tmp_path, rng):
    inst = random_instance(rng, m=3, d=2, V=3)
    path = tmp_path / "x.npz"
    path.write_bytes(b"old")
    write_npz(inst, path)
    assert os.listdir(tmp_path) == ["x.npz"]
    _same(inst, read_npz(path))


def test_failed_write_keeps_old_file_and_cleans_up(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"old")

    class Boom(Exception):
        pass

    def bad_write(fh):
        fh.write(b"partial")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(str(path), bad_write)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["x.bin"]


def test_write_into_missing_directory_is_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        atomic_write_bytes(tmp_path / "nope" / "x.json", b"{}")


# ---------------------------------------------------------------------------- bad files
def _npz(tmp_path, name="bad.npz", **arrays):
    path = tmp_path / name
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def _json(tmp_path, obj, name="bad.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


H2 = [[1.0, 0.0], [0.0, 1.0]]
C2 = [[1, 2], [0, 3]]

BAD_FILES = [
    ("missing_file", lambda t: (read_npz, t / "none.npz"), "no such file"),
    ("not_zip", lambda t: (read_npz, _json(t, "hello", "x.npz")), "not an .npz"),
    ("npy_as_npz", lambda t: (read_npz, (np.save(t / "a.npy", np.eye(2)), t / "a.npy")[1]), "not an .npz"),
    ("object_array",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[1, "a"], [2, 3]], dtype=object))), "counts"),
    ("npz_missing_embeddings", lambda t: (read_npz, _npz(t, counts=np.array(C2))), "embeddings"),
    ("npz_missing_counts", lambda t: (read_npz, _npz(t, embeddings=np.eye(2))), "counts"),
    ("npz_both", lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array(C2), probs=np.eye(2))), "both"),
    ("npz_negative_count", lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[1, -2], [0, 3]]))),
     r"counts\[0, 1\]"),
    ("npz_bad_names", lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array(C2), token_names=np.eye(2))),
     "token_names"),
    ("npz_nan_embedding",
     lambda t: (read_npz, _npz(t, embeddings=np.array([[np.nan, 0], [0, 1]]), counts=np.array(C2))), "embeddings"),
    ("invalid_json", lambda t: (read_json, _json(t, "{not json")), "invalid JSON"),
    ("json_list", lambda t: (read_json, _json(t, [1, 2])), "top level"),
    ("json_missing_embeddings", lambda t: (read_json, _json(t, {"counts": C2})), "embeddings"),
    ("json_missing_counts", lambda t: (read_json, _json(t, {"embeddings": H2})), "counts"),
    ("json_both", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": C2, "probs": C2})), "both"),
    ("json_weights_with_counts", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": C2, "weights": [1, 1]})),
     "weights"),
    ("json_bad_fraction", lambda t: (read_json, _json(t, {"embeddings": H2, "probs": [["1/x", "1"], ["1", "0"]]})),
     r"probs\[0, 0\]"),
    ("json_fraction_sum", lambda t: (read_json, _json(t, {"embeddings": H2, "probs": [["1/3", "1/3"], ["1", "0"]]})),
     r"probs\[0\]"),
    ("json_bool_count", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": [[1, True], [0, 3]]})), "counts"),
    ("json_float_count", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": [[1, 0.5], [0, 3]]})), "counts"),
    ("json_ragged", lambda t: (read_json, _json(t, {"embeddings": [[1.0], [0.0, 1.0]], "counts": C2})), "embeddings"),
    ("json_names_type", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": C2, "token_names": "ab"})),
     "token_names"),
    ("json_names_count", lambda t: (read_json, _json(t, {"embeddings": H2, "counts": C2, "token_names": ["a"]})),
     "token_names"),
    ("json_not_utf8", lambda t: (read_json, (t / "b.json", (t / "b.json").write_bytes(b"\xff\xfe{"))[0]), "UTF-8"),
    ("json_directory", lambda t: (read_json, t), "directory"),
]


@pytest.mark.parametrize("case", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_files_raise_one_line_input_error_naming_the_field(tmp_path, case):
    _, make, pattern = case
    reader, path = make(tmp_path)
    with pytest.raises(InputError, match=pattern) as info:
        reader(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert os.path.basename(os.fspath(path)) in msg


# ---------------------------------------------------------------------------- corpus
def test_tokenizers():
    assert tokenize("ab a", "char") == ["a", "b", " ", "a"]
    assert tokenize("Hello, World! it's", "word") == ["hello", ",", "world", "!", "it", "'", "s"]
    assert tokenize(" Hello, hello\n\tWorld! it's ", "whitespace") == ["Hello,", "hello", "World!", "it's"]
    with pytest.raises(InputError, match="tokenizer: unknown value 'bpe'"):
        tokenize("a b", "bpe")


def test_whitespace_tokenizer_from_the_cli(tmp_path, capsys):
    from ntpcert.cli.app import main

    path = tmp_path / "t.txt"
    path.write_text("The cat. the cat! The dog.\n")
    assert main(["info", str(path), "--tokenizer", "whitespace", "-k", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["V"] == 5 and out["m"] == 4  # The, cat., the, cat!, dog. ; "dog." ends the text


def test_char_k1_counts_by_hand():
    contexts, vocab, counts = ngram_counts(tokenize("abab", "char"), 1)
    assert contexts == [("a",), ("b",)]
    assert vocab == ["a", "b"]
    np.testing.assert_array_equal(counts, [[0, 2], [1, 0]])
    assert counts.dtype == np.int64


def test_k2_and_all_prefixes_by_hand():
    toks = list("abcab")
    contexts, vocab, counts = ngram_counts(toks, 2)
    assert contexts == [("a", "b"), ("b", "c"), ("c", "a")]
    np.testing.assert_array_equal(counts, [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    contexts, vocab, counts = ngram_counts(toks, 2, all_prefixes=True)
    assert contexts == [("a",), ("a", "b"), ("b",), ("b", "c"), ("c",), ("c", "a")]
    np.testing.assert_array_equal(counts, [[0, 2, 0], [0, 0, 1], [0, 0, 1], [1, 0, 0], [1, 0, 0], [0, 1, 0]])
    # every position i >= 1 counts min(k, i) pairs
    assert counts.sum() == 1 + 2 + 2 + 2


def test_sequences_do_not_share_contexts():
    contexts, vocab, counts = count_sequences([list("ab"), list("cd")], 1)
    assert contexts == [("a",), ("c",)]
    assert vocab == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(counts, [[0, 1, 0, 0], [0, 0, 0, 1]])


def test_instance_from_text_names_and_embedding():
    inst = instance_from_text("ab\nab", k=1)
    assert inst.token_names == ("\\n", "a", "b")
    assert inst.context_names == ("\\n", "a", "b")
    assert (inst.m, inst.d, inst.V) == (3, 3, 3)
    np.testing.assert_array_equal(inst.embeddings, np.eye(3))
    np.testing.assert_array_equal(inst.counts, [[0, 1, 0], [0, 0, 2], [1, 0, 0]])
    words = instance_from_text("the cat. the dog. the cat.", tokenizer="word", k=2)
    assert "the cat" in words.context_names
    assert words.d == 2 * words.V


def test_display_token_is_unambiguous():
    assert display_token("\n") == "\\n"
    assert display_token("\\") == "\\\\"
    assert display_token("é") == "é"


def test_progress_bar_goes_to_stderr(capsys, monkeypatch):
    from ntpcert.instance.io import corpus

    monkeypatch.setattr(corpus, "PROGRESS_MIN_POSITIONS", 10)
    ngram_counts(list("abcabcabcabc" * 3), 2, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "counting" in err


# ---------------------------------------------------------------------------- load_instance
def test_load_instance_dispatches_by_suffix(tmp_path, rng):
    inst = random_instance(rng, m=4, d=3, V=3)
    write_npz(inst, tmp_path / "a.npz")
    write_json(inst, tmp_path / "a.json")
    assert load_instance(str(tmp_path / "a.npz")).fingerprint() == inst.fingerprint()
    assert load_instance(tmp_path / "a.json").fingerprint() == inst.fingerprint()
    os.replace(tmp_path / "a.json", tmp_path / "A.JSON")
    assert load_instance(str(tmp_path / "A.JSON")).fingerprint() == inst.fingerprint()
    (tmp_path / "t.txt").write_text("abab")
    text = load_instance(str(tmp_path / "t.txt"), context_length=1)
    np.testing.assert_array_equal(text.counts, [[0, 2], [1, 0]])
    assert text.name == "t"
    capped = load_instance(str(tmp_path / "t.txt"), context_length=1, max_chars=3, embedding="onehot-context")
    np.testing.assert_array_equal(capped.counts, [[0, 1], [1, 0]])


def test_file_named_like_a_builtin_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "paper").write_text("xyxyx")
    inst = load_instance("paper")
    assert inst.name == "paper" and inst.V == 2


def test_load_instance_builtin_with_options():
    inst = load_instance("dyck", context_length=2, seed=3)
    assert inst.name == "dyck" and inst.d == 2 * inst.V
    assert load_instance("paper", seed=1).fingerprint() == load_instance("paper", seed=1).fingerprint()


BAD_LOADS = [
    ("nope-not-here", {}, "DATA: no such file or built-in dataset 'nope-not-here' \\(built-ins: paper, dyck, pydoc\\)"),
    ("paper", {"context_length": 0}, "context_length"),
    ("paper", {"context_length": 3}, "context_length"),
    ("paper", {"tokenizer": "word"}, "tokenizer"),
    ("dyck", {"max_chars": 100}, "max_chars"),
    ("pydoc", {"tokenizer": "bpe"}, "tokenizer"),
    ("pydoc", {"embedding": "random:0"}, "embedding"),
    ("pydoc", {"embedding": "spherical"}, "embedding"),
    ("pydoc", {"max_chars": 1}, "max_chars"),
    ("pydoc", {"seed": -1}, "seed"),
    ("TEXT", {"context_length": -2}, "context_length"),
    ("TEXT1", {}, "text"),
    ("TEXT2", {"context_length": 5}, "k \\(context length\\)"),
    ("TEXTSAME", {}, "text"),
    ("NPZ", {"tokenizer": "char"}, "tokenizer"),
    ("BINARY", {}, "UTF-8"),
    ("EMBEDFILE", {"embedding": "missing.npy"}, "embedding"),
]


@pytest.mark.parametrize("spec,options,pattern", BAD_LOADS, ids=[f"{s}-{sorted(o)}" for s, o, _ in BAD_LOADS])
def test_bad_loads_raise_input_error_naming_the_option(tmp_path, spec, options, pattern, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = {"TEXT": "abcabc", "TEXT1": "a", "TEXT2": "abc", "TEXTSAME": "aaaa", "EMBEDFILE": "abab"}
    if spec in files:
        (tmp_path / "t.txt").write_text(files[spec])
        spec = "t.txt"
    elif spec == "NPZ":
        write_npz(NTPInstance.from_counts(np.eye(2), C2), tmp_path / "x.npz")
        spec = "x.npz"
    elif spec == "BINARY":
        (tmp_path / "b.bin").write_bytes(b"\x00\xff\xfe\x80")
        spec = "b.bin"
    with pytest.raises(InputError, match=pattern) as info:
        load_instance(spec, **options)
    assert "\n" not in str(info.value)


def test_zip_without_npy_members_is_input_error(tmp_path):
    path = tmp_path / "z.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hi")
    with pytest.raises(InputError, match="embeddings"):
        read_npz(path)


# ---------------------------------------------------------------------------- counts keep their meaning
TWO_53_PLUS_1 = {  # same embedding, counts ratios 2^53 + 1 : 1 and 2^53 : 1 -> not compatible
    "1.0": '{"embeddings": [[1,0],[1,0]], "counts": [[9007199254740993, 1.0], [9007199254740992, 1]]}',
    "1": '{"embeddings": [[1,0],[1,0]], "counts": [[9007199254740993, 1], [9007199254740992, 1]]}',
}


@pytest.mark.parametrize("one", sorted(TWO_53_PLUS_1))
def test_json_count_2_53_plus_1_is_never_certified_compatible(tmp_path, one):
    from ntpcert.pipeline.exact_verdicts import exact_certify

    path = _json(tmp_path, TWO_53_PLUS_1[one], name="big.json")
    inst = read_json(path)
    assert inst.counts.tolist() == [[2**53 + 1, 1], [2**53, 1]]
    assert inst.n == 2**54 + 3
    report = exact_certify(inst, svm=False)
    assert report.compatibility.holds is False
    assert report.check.valid


@pytest.mark.parametrize("one", sorted(TWO_53_PLUS_1))
def test_cli_certify_exact_refutes_compatibility_of_2_53_plus_1(tmp_path, capsys, one):
    from ntpcert.cli.app import main

    path = _json(tmp_path, TWO_53_PLUS_1[one], name="big.json")
    code = main(["certify", str(path), "--exact", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out)
    assert result["compatible"]["holds"] is False
    assert result["n"] == 2**54 + 3


def test_json_float_count_and_int_count_give_the_same_instance(tmp_path):
    a = read_json(_json(tmp_path, '{"embeddings": [[1,0],[0,1]], "counts": [[3, 1.0], [0.0, 2]]}', name="a.json"))
    b = read_json(_json(tmp_path, '{"embeddings": [[1,0],[0,1]], "counts": [[3, 1], [0, 2]]}', name="b.json"))
    assert a.counts.dtype == np.int64
    assert a.fingerprint() == b.fingerprint()


def test_npz_float_counts_are_read_as_exact_integers(tmp_path):
    path = _npz(tmp_path, "f.npz", embeddings=np.eye(2), counts=np.array([[3.0, 2.0**53 - 1], [0.0, 2.0]]))
    inst = read_npz(path)
    assert inst.counts.dtype == np.int64
    assert inst.counts.tolist() == [[3, 2**53 - 1], [0, 2]]
    assert inst.n == 2**53 + 4


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_counts_at_the_int64_limit_round_trip_with_exact_n_and_entropy(tmp_path, fmt):
    write, read = READERS[fmt]
    inst = NTPInstance.from_counts(np.eye(2), [[2**61, 2**61], [2**61, 2**61 - 1]])
    path = tmp_path / f"x.{fmt}"
    write(inst, path)
    back = read(path)
    _same(inst, back)
    assert back.n == 2**63 - 1
    assert back.describe()["n"] == 2**63 - 1
    assert back.entropy() == pytest.approx(np.log(2), rel=1e-14)


_AMBIGUOUS = r"is not an exactly representable integer count .*; give it as an integer"
_PAST = r"exceeds the largest supported count 2\^63 - 1"
HUGE_COUNTS = [
    ("json_float_1e20", lambda t: (read_json, _json(t, '{"embeddings": [[1,0],[0,1]], "counts": [[1, 1e20], [1, 0]]}')),
     r"counts\[0, 1\]: value 1e\+20 " + _AMBIGUOUS),
    ("json_float_2_53",
     lambda t: (read_json, _json(t, '{"embeddings": [[1,0],[0,1]], "counts": [[1, 9007199254740992.0], [1, 0]]}')),
     r"counts\[0, 1\]: value 9007199254740992.0 " + _AMBIGUOUS),
    ("json_int_10_20",
     lambda t: (read_json, _json(t, '{"embeddings": [[1,0],[0,1]], "counts": [[1, 100000000000000000000], [1, 0]]}')),
     r"counts\[0, 1\]: value 100000000000000000000 " + _PAST),
    ("json_negative_1e20", lambda t: (read_json, _json(t, '{"embeddings": [[1,0],[0,1]], "counts": [[1, -1e20], [1, 0]]}')),
     r"counts\[0, 1\]: value -1e\+20 is negative"),
    ("json_row_sum_2_63",
     lambda t: (read_json, _json(t, {"embeddings": H2, "counts": [[2**62, 2**62], [1, 0]]})),
     r"counts\[0\]: row sums to 9223372036854775808, past the largest supported row sum"),
    ("json_total_past_int64",
     lambda t: (read_json, _json(t, {"embeddings": H2, "counts": [[2**62, 2**61], [2**62, 0]]})),
     r"counts: the counts sum to n = 11529215046068469760, past the largest supported total"),
    ("json_huge_literal", lambda t: (read_json, _json(t, '{"embeddings": [[1]], "counts": [[1, ' + "9" * 5000 + "]]}")),
     r"counts\[0\]\[1\]: an integer literal of 5000 digits"),
    ("npz_float_1e20", lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[1.0, 1e20], [1.0, 0.0]]))),
     r"counts\[0, 1\]: value 1e\+20 " + _AMBIGUOUS),
    ("npz_float_2_53", lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[1.0, 2.0**53], [1, 0]]))),
     r"counts\[0, 1\]: value 9007199254740992.0 " + _AMBIGUOUS),
    ("npz_uint64_10_19",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[1, 10**19], [1, 0]], dtype=np.uint64))),
     r"counts\[0, 1\]: value 10000000000000000000 " + _PAST),
    ("npz_int_10_20_as_text",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([["1", str(10**20)], ["1", "0"]]))),
     "counts"),
    ("npz_row_sum_2_63",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[2**62, 2**62], [1, 0]], dtype=np.int64))),
     r"counts\[0\]: row sums to 9223372036854775808, past the largest supported row sum"),
    ("npz_row_sum_uint64",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[2**62, 2**62], [1, 0]], dtype=np.uint64))),
     r"counts\[0\]: row sums to 9223372036854775808"),
    ("npz_total_past_int64",
     lambda t: (read_npz, _npz(t, embeddings=np.eye(2), counts=np.array([[2**62, 2**61], [2**62, 0]]))),
     r"counts: the counts sum to n = 11529215046068469760"),
]


@pytest.mark.parametrize("case", HUGE_COUNTS, ids=[c[0] for c in HUGE_COUNTS])
def test_huge_or_ambiguous_counts_are_refused_naming_file_field_and_value(tmp_path, case):
    _, make, pattern = case
    reader, path = make(tmp_path)
    with pytest.raises(InputError, match=pattern) as info:
        reader(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(os.fspath(path) + ": ")
    if "negative" not in case[0]:
        assert "negative" not in msg


@pytest.mark.parametrize("case", ["json_float_1e20", "json_row_sum_2_63", "json_int_10_20"])
def test_cli_refuses_huge_counts_with_exit_2(tmp_path, capsys, case):
    from ntpcert.cli.app import main

    _, path = {c[0]: c[1] for c in HUGE_COUNTS}[case](tmp_path)
    code = main(["certify", str(path), "--exact", "--json"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "counts" in err and "\n" not in err.strip()
