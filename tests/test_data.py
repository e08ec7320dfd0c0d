import numpy as np
import pytest

from ntpcert import InputError, NTPInstance
from ntpcert.instance.datasets import BUILTINS, load_builtin
from ntpcert.instance.datasets.dyck import BEGIN, END, dyck, dyck_sequences, is_balanced
from ntpcert.instance.datasets.paper import paper
from ntpcert.instance.datasets.pydoc_corpus import pydoc, pydoc_text


def test_paper_matches_the_papers_sizes():
    inst = paper()
    assert inst.name == "paper"
    assert (inst.m, inst.d, inst.V) == (50, 60, 10)
    assert inst.n == 5000
    assert inst.counts.dtype == np.int64
    assert np.all(inst.support_sizes == 6)
    assert 1.2 < inst.entropy() < 1.7
    assert np.linalg.matrix_rank(inst.embeddings) == 50


def test_paper_is_deterministic_per_seed_and_rng():
    assert paper(seed=0).fingerprint() == paper().fingerprint()
    assert paper(seed=1).fingerprint() != paper(seed=0).fingerprint()
    assert paper(rng=np.random.default_rng(5)).fingerprint() == paper(seed=5).fingerprint()


def test_paper_small_variant_keeps_every_support_entry():
    inst = paper(m=5, d=3, V=4, support_size=4, n=20, seed=2)
    assert np.all(inst.support_sizes == 4) and inst.n == 20


def test_dyck_words_are_balanced_and_bounded():
    rng = np.random.default_rng(0)
    words = dyck_sequences(300, n_types=3, max_depth=2, max_length=10, rng=rng)
    for w in words:
        assert is_balanced(w)
        assert 2 <= len(w) <= 10 and len(w) % 2 == 0
        depth = max_depth = 0
        for tok in w:
            depth += 1 if tok in "([{" else -1
            max_depth = max(max_depth, depth)
        assert max_depth <= 2
    assert not is_balanced(list("(]"))
    assert not is_balanced(list("(()"))


def test_dyck_instance_defaults_and_determinism():
    inst = dyck()
    assert inst.name == "dyck"
    assert inst.V == 6 and inst.d == 4 * inst.V
    assert 20 <= inst.m <= 300
    assert set(inst.token_names) == {"(", ")", "[", "]", BEGIN, END}
    assert dyck(seed=0).fingerprint() == inst.fingerprint()
    assert dyck(seed=1).fingerprint() != inst.fingerprint()
    # grammar in the supports: a wrong closing bracket never follows an opening one
    names = inst.token_names
    for j, ctx in enumerate(inst.context_names):
        support = {names[z] for z in inst.support(j)}
        if ctx.endswith("("):
            assert "]" not in support and END not in support
    # all_prefixes adds the shorter contexts
    assert dyck(all_prefixes=True).m > inst.m


def test_pydoc_loads_small_by_default():
    inst = pydoc()
    assert inst.name == "pydoc"
    assert inst.V >= 20
    assert inst.m <= 1500
    assert inst.d == 2 * inst.V
    assert len(pydoc_text()) == 20_000
    assert len(pydoc_text(None)) > 100_000
    words = pydoc(tokenizer="word", max_chars=3000, k=1)
    assert words.V >= 20


def test_builtins_table_and_loader():
    assert list(BUILTINS) == ["paper", "dyck", "pydoc"]
    for name, (func, description) in BUILTINS.items():
        assert callable(func) and description and "\n" not in description
    assert isinstance(load_builtin("dyck", k=2), NTPInstance)


BAD_CALLS = [
    (lambda: load_builtin("nope"), "built-ins: paper, dyck, pydoc"),
    (lambda: load_builtin("paper", k=3), "k: not an option"),
    (lambda: paper(m=0), "m"),
    (lambda: paper(V=1), "V"),
    (lambda: paper(support_size=11), "support_size"),
    (lambda: paper(n=10), "n: value 10"),
    (lambda: paper(seed=-1), "seed"),
    (lambda: paper(d=2.5), "d"),
    (lambda: dyck(n_types=5), "n_types"),
    (lambda: dyck(max_depth=0), "max_depth"),
    (lambda: dyck(max_length=1), "max_length"),
    (lambda: dyck(k=0), "context length"),
    (lambda: dyck(k=20, begin_end=False), "context length"),
    (lambda: dyck(embedding="random:x"), "embedding"),
    (lambda: pydoc(max_chars=0), "max_chars"),
    (lambda: pydoc(tokenizer="bytes"), "tokenizer"),
    (lambda: pydoc(k=True), "context length"),
]


@pytest.mark.parametrize("call,pattern", BAD_CALLS, ids=[p for _, p in BAD_CALLS])
def test_bad_dataset_options_raise_input_error(call, pattern):
    with pytest.raises(InputError, match=pattern):
        call()


def test_teacher_data_are_one_hot_and_separated_by_their_teacher():
    import pytest as _pytest

    from ntpcert import InputError as _InputError
    from ntpcert.instance.datasets.teacher import teacher

    inst = teacher(m=30, d=6, V=4, seed=3)
    C = inst.counts
    assert C.shape == (30, 4) and np.all(C.sum(axis=1) == 1)
    rng = np.random.default_rng(3)
    H = rng.standard_normal((30, 6))
    T = rng.standard_normal((4, 6))
    np.testing.assert_array_equal(inst.embeddings, H)
    L = H @ T.T  # the teacher's logits put each context's token strictly first
    y = np.argmax(C, axis=1)
    assert np.all(L[np.arange(30), y][:, None] >= L) and np.all(np.sort(L, axis=1)[:, -2] < L.max(axis=1))
    assert teacher(m=30, d=6, V=4, rng=np.random.default_rng(3)).fingerprint() == inst.fingerprint()
    with _pytest.raises(_InputError, match="V: value 1"):
        teacher(V=1)
