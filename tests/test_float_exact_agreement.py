"""Float ``certify`` against ``certify --exact`` (issue 33: float never slower than exact).

The float pipeline decides (4) with the structured engines the exact one uses
(:func:`ntpcert.pipeline.decide.decide_compatibility`) and, once one of them refutes (4) with an exact
witness, fits no least-squares point (W* does not exist): the witness bounds every W's residual from
below instead. The Kesler rows are built from the non-zeros of the embeddings
(:func:`ntpcert.rows.kesler.sparse_rows`), which is what LSMR applies where W* is fitted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.instance.load import load_instance
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.float_verdicts import certify, compute_limits
from ntpcert.pipeline.float_witness import residual_lower_bound
from ntpcert.rows.kesler import KeslerSystem, sparse_rows
from ntpcert.rows.subspace import Subspace

from .conftest import TOL

#: Small versions of the corpus families of ``benchmarks/results/certify-corpora.md`` and of the
#: independent measurement (characters k = 3 and k = 4 with one-hot k-grams, characters k = 3 and word
#: tokens k = 1 with random embeddings, the built-in pydoc k = 2).
CORPORA = {
    "chars k=3 onehot-concat": dict(max_chars=4000, context_length=3),
    "chars k=4 onehot-concat": dict(max_chars=1000, context_length=4),
    "chars k=3 random:16": dict(max_chars=4000, context_length=3, embedding="random:16"),
    "words k=1 random:16": dict(max_chars=4000, tokenizer="word", context_length=1, embedding="random:16"),
    "chars k=2 (built-in)": dict(max_chars=3000),
}


def _dense_rows(H: np.ndarray, V: int, ctx, plus, minus) -> np.ndarray:
    d = H.shape[1]
    out = np.zeros((len(ctx), V * d))
    for i, (j, p, q) in enumerate(zip(ctx, plus, minus)):
        out[i, p * d:(p + 1) * d] += H[j]
        out[i, q * d:(q + 1) * d] -= H[j]
    return out


@pytest.mark.parametrize("density", [1.0, 0.3, 0.0])
@pytest.mark.parametrize("seed", range(4))
def test_sparse_rows_are_the_kesler_rows_in_canonical_form(seed, density):
    """Dense and sparse embeddings, rows whose plus token is above or below the minus one, and rows with
    plus = minus (zero): the same matrix as the definition, with sorted indices and no stored zeros."""
    rng = np.random.default_rng(seed)
    m, d, V, n = 7, 5, 6, 40
    H = rng.standard_normal((m, d)) * (rng.random((m, d)) < density)
    if density == 1.0:
        H[H == 0] = 1.0
    ctx, plus, minus = rng.integers(0, m, n), rng.integers(0, V, n), rng.integers(0, V, n)
    A = sparse_rows(H, V, ctx, plus, minus)
    assert A.shape == (n, V * d)
    assert np.array_equal(A.toarray(), _dense_rows(H, V, ctx, plus, minus))
    B = A.copy()
    B.sum_duplicates()
    B.eliminate_zeros()
    B.sort_indices()
    assert B.nnz == A.nnz and np.array_equal(B.indices, A.indices) and np.array_equal(B.indptr, A.indptr)
    assert A.nnz == 2 * sum(np.count_nonzero(H[j]) for j, p, q in zip(ctx, plus, minus) if p != q)


def test_eq_and_margin_matrices_store_only_the_embeddings_non_zeros():
    inst = load_instance("pydoc", max_chars=2000, context_length=3)  # one-hot k-grams: 3 of d = 171 non-zero
    s = KeslerSystem.build(inst)
    A, M = s.eq_matrix(), s.margin_matrix()
    assert A.nnz == 2 * 3 * s.n_eq and M.nnz == 2 * 3 * s.n_margin
    W = np.random.default_rng(0).standard_normal((inst.V, inst.d))
    assert np.allclose(A @ W.ravel(), s.apply_eq(W), rtol=0, atol=TOL["linalg"] * np.abs(W).max())
    assert np.allclose(M @ W.ravel(), s.apply_margin(W), rtol=0, atol=TOL["linalg"] * np.abs(W).max())


def _agreeing_reports(inst):
    """The float report of ``inst``, after asserting that float and exact certify (no NTP-SVM) both decide
    both conditions, with the same answers from the same engines, and that the exact report passed the
    independent checker."""
    fl = certify(inst, svm=False)
    ex = exact_certify(inst, svm=False)
    assert ex.check.valid, ex.check.reason
    assert fl.compatible.holds is not None and fl.separable.holds is not None
    assert (fl.compatible.holds, fl.separable.holds) == (ex.compatible.holds, ex.separable.holds)
    assert fl.compatible.engine == ex.compatible.engine and fl.separable.engine == ex.separable.engine
    return fl


@pytest.mark.parametrize("kw", CORPORA.values(), ids=list(CORPORA))
def test_float_and_exact_verdicts_agree_on_the_corpus_families(kw):
    """Both decided, the same answers from the same engines, and every float witness passes its exact check
    on the instance (the exact report's passed the independent checker)."""
    inst = load_instance("pydoc", **kw)
    fl = _agreeing_reports(inst)
    assert fl.compatible.check(inst) == "" and fl.separable.check(inst) == ""
    if fl.compatible.holds is False:  # no least-squares point, as --exact; the witness's bound instead
        assert fl.fit.W_star is None and fl.subspace.method == "none"
        assert fl.fit.residual_lower_bound > 0


def _refuted_by_a_structured_engine() -> NTPInstance:
    """Chars k = 3 one-hot k-grams, 4,000 characters: a pair of tokens refutes (4) (m = 1,216 > d + 1 = 172)."""
    return load_instance("pydoc", **CORPORA["chars k=3 onehot-concat"])


def test_float_certify_lets_the_structured_engine_answer_and_fits_nothing_after_it(monkeypatch):
    """Regression (issue 33): on a corpus where a pair of tokens refutes (4), float ``certify`` neither
    factorises F nor runs LSMR on A_eq (that least-squares point, 100 LSMR iterations on the full Kesler
    system, made float certify 1.4-2x slower than --exact); the verdict is the engine's, with its witness."""
    import ntpcert.pipeline.float_verdicts as fv

    def no_subspace(*args, **kwargs):
        raise AssertionError("the generic float route ran although a structured engine had answered")

    monkeypatch.setattr(fv.Subspace, "build", no_subspace)
    monkeypatch.setattr(fv, "float_compatibility", no_subspace)
    inst = _refuted_by_a_structured_engine()
    rep = certify(inst, svm=False)
    assert rep.compatible.holds is False and rep.compatible.engine == "pair-null-vector"
    assert rep.compatible.is_exact and rep.compatible.check(inst) == ""
    js = rep.to_json()["compatible"]
    assert js["W_star_norm"] is None and js["least_squares"]["method"] == "none"
    assert js["relative_residual_lower_bound"] > 0 and "residual_lower_bound" in js["least_squares"]["why"]


def test_limits_still_fit_a_least_squares_point_above_the_witness_bound():
    """``ntpcert limits`` (compute_limits) writes a least-squares point where W* does not exist; its residual,
    like every W's, is at least the bound the violating null vector shows."""
    inst = _refuted_by_a_structured_engine()
    rep = compute_limits(inst)
    assert rep.compatible.holds is False and rep.fit.W_star is not None
    assert rep.fit.residual >= rep.fit.residual_lower_bound > 0
    assert rep.fit.relative_residual >= rep.fit.relative_residual_lower_bound > 0


@pytest.mark.parametrize("seed", range(6))
def test_residual_lower_bound_holds_below_the_least_squares_residual(seed):
    """Random small instances with a dependent embedding (h_2 = 2 h_0 + h_1) and counts that break (4): the
    bound of the violating null vector is at most the true minimum of ||A_eq vec W - b|| (dense lstsq)."""
    from ntpcert.pipeline.decide import decide_compatibility
    from ntpcert.verdict import ViolatingNullVector

    rng = np.random.default_rng(seed)
    h0, h1 = rng.integers(-3, 4, 3).astype(float), rng.integers(-3, 4, 3).astype(float)
    H = np.array([h0, h1, 2 * h0 + h1, rng.integers(-3, 4, 3).astype(float)])
    C = rng.integers(1, 9, size=(4, 3))
    C[3, 2] = 0
    inst = NTPInstance.from_counts(H, C)
    system = KeslerSystem.build(inst)
    dec = decide_compatibility(system)
    assert dec.holds is False and isinstance(dec.witness, ViolatingNullVector)
    bound, relative = residual_lower_bound(system, dec.witness.y)
    A, b = system.eq_matrix().toarray(), system.log_odds()
    x = np.linalg.lstsq(A, b, rcond=None)[0]
    least = float(np.linalg.norm(A @ x - b))
    assert 0 < bound <= least * (1 + TOL["linalg"])
    assert relative == pytest.approx(bound / max(1.0, float(np.linalg.norm(b))), rel=1e-15)


def test_residual_lower_bound_takes_null_vectors_of_any_size():
    """Entries of thousands of digits (minors of random embeddings) are scaled, not converted to floats; with
    a one-dimensional null space (h_1 = 2 h_0, one row each) the bound is the least-squares residual itself,
    |2 log 2 - log 5| / sqrt(5)."""
    inst = NTPInstance.from_counts(np.array([[0.5, -1.0], [1.0, -2.0], [1.0, 0.0]]), [[1, 2, 0], [1, 5, 0], [0, 3, 1]])
    system = KeslerSystem.build(inst)
    big = 10 ** 4000
    lower, _ = residual_lower_bound(system, {(0, 1): 2 * big, (1, 1): -big})
    assert lower == pytest.approx(abs(2 * math.log(2) - math.log(5)) / math.sqrt(5), rel=1e-14)
    assert residual_lower_bound(system, {(0, 1): 0}) == (0.0, 0.0)


def test_compatible_corpus_keeps_its_w_star():
    """Where (4) holds, W* is fitted as before and solves (4): its residual is at rounding level."""
    inst = load_instance("pydoc", **CORPORA["words k=1 random:16"])
    rep = certify(inst, svm=False)
    assert rep.compatible.holds is True and rep.fit.W_star is not None
    assert rep.fit.relative_residual < TOL["linalg"] and rep.fit.residual_lower_bound is None
    sub = Subspace.build(KeslerSystem.build(inst), method="eigh")
    assert np.allclose(rep.fit.W_star, sub.min_norm_solution(sub.system.log_odds()), atol=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(context_length=3), dict(context_length=4),
                                dict(context_length=3, embedding="random:256"),
                                dict(tokenizer="word", context_length=1, embedding="random:256")],
                         ids=["chars k=3", "chars k=4", "chars k=3 random:256", "words k=1 random:256"])
def test_float_and_exact_agree_on_the_whole_corpora(kw):
    """The corpora of ``benchmarks/bench_float_exact.py`` at full size (the whole pydoc text): the same
    verdicts from the same engines, and no least-squares point in either."""
    inst = load_instance("pydoc", max_chars=500_000, **kw)
    fl = _agreeing_reports(inst)
    if fl.compatible.holds is False:
        assert fl.fit.W_star is None and fl.fit.residual_lower_bound > 0
