"""ntpcert.geometry.collapse against a reference written here with plain loops, following the definitions of
the ``neural_collapse`` package (github.com/rhubarbwu/neural-collapse: ``MeanAccumulator``,
``VarNormAccumulator``, ``CovarAccumulator``, ``covariance_ratio``, ``variability_cdnv``, ``mean_norms``,
``simplex_etf_error``, ``kernel_stats`` with ``log_kernel``, ``self_duality_error``, ``similarities``,
``distance_norms``, ``clf_ncc_agreement``) as the Linguistic Collapse analysis (arXiv 2405.17767) calls them,
with the module's two documented rules: pairs of coincident means are left out, and NC4 ties count as
agreement."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.geometry import collapse as nc
from ntpcert.instance.lm.merge import TokenMerge

from tests.conftest import random_instance

EPS = float(np.finfo(np.float64).eps)
AGREE = 1e-6  # the bar: module and reference agree to this


# ----------------------------------------------------------------------------------- the reference
def _normalize(x):
    return x / (np.linalg.norm(x) + EPS)


def _structure_error(A, B):
    """``neural_collapse.measure.structure_error``: the C x C matrix itself."""
    K = A.shape[0]
    S = B @ A.T
    S = S / np.linalg.norm(S)
    S = S + 1.0 / K / math.sqrt(K - 1)
    S[np.diag_indices(K)] -= 1.0 / math.sqrt(K - 1)
    return float(np.linalg.norm(S))


def reference(inst, H, W_rows_of):
    """Every number of FEATURE_KEYS and DECODER_KEYS by loops. ``W_rows_of(v)`` is the decoder's row for the
    instance's token v."""
    m, V = inst.probs.shape
    a = np.zeros((m, V))
    for j in range(m):
        for v in range(V):
            if inst.probs[j, v] > 0:
                a[j, v] = inst.counts[j, v] if inst.counts is not None else inst.weights[j] * inst.probs[j, v]
    classes = [v for v in range(V) if a[:, v].sum() > 0]
    C, d = len(classes), H.shape[1]
    mu = np.array([sum(a[j, v] * H[j] for j in range(m)) / a[:, v].sum() for v in classes])
    muG = mu.mean(axis=0)  # MeanAccumulator.compute(): the unweighted mean of the class means
    Mc = mu - muG
    var = np.array([sum(a[j, v] * np.sum((H[j] - mu[c]) ** 2) for j in range(m)) / a[:, v].sum()
                    for c, v in enumerate(classes)])
    SW = np.zeros((d, d))
    for c, v in enumerate(classes):
        for j in range(m):
            x = H[j] - mu[c]
            SW += a[j, v] * np.outer(x, x)
    SW /= a[:, classes].sum()
    SB = Mc.T @ Mc / C
    out = {"within_ratio": float(np.trace(np.linalg.pinv(SB, rcond=d * EPS) @ SW)) / C}
    # pairs
    cdnv, ker, cos = [], [], []
    coincident = 0
    Xh = np.array([_normalize(x) for x in Mc])
    for i in range(C):
        for k in range(i + 1, C):
            dist = np.linalg.norm(mu[i] - mu[k])
            if dist <= nc.COINCIDENT_RTOL * max(np.linalg.norm(mu[i]), np.linalg.norm(mu[k])):
                coincident += 1
            else:
                cdnv.append((var[i] + var[k]) / 2 / dist ** 2)
            cos.append(float(Xh[i] @ Xh[k]))
            kd = np.linalg.norm(Xh[i] - Xh[k])
            if kd > nc.COINCIDENT_RTOL * max(np.linalg.norm(Xh[i]), np.linalg.norm(Xh[k])):
                ker.append(math.log(kd ** -1))
    norms = np.linalg.norm(Mc, axis=1)
    out.update(cdnv=np.mean(cdnv) if cdnv else math.nan, cdnv_pairs=len(cdnv), coincident_pairs=coincident,
               norm_cv=np.std(norms, ddof=1) / np.mean(norms), log_norm_var=np.var(np.log(norms), ddof=1),
               interference_mean=np.mean(cos), interference_std=np.std(cos), etf_error=_structure_error(Mc, Mc),
               etf_error_floor=math.sqrt(2 - 2 * math.sqrt(min(d, C - 1) / (C - 1))),
               log_kernel_mean=np.mean(ker), log_kernel_var=np.var(ker), log_kernel_pairs=len(ker))
    # the decoder
    Wc = np.array([W_rows_of(v) for v in classes])
    wn = np.linalg.norm(Wc, axis=1)
    cosd = np.array([Wc[c] @ Mc[c] / (wn[c] * norms[c]) for c in range(C)])
    dec = {"w_norm_cv": np.std(wn, ddof=1) / np.mean(wn), "self_duality_error": _structure_error(Mc, Wc),
           "self_duality_error_centred": _structure_error(Mc, Wc - Wc.mean(axis=0)),
           "duality_distance_mean": np.mean([np.linalg.norm(_normalize(Wc[c]) - Xh[c]) for c in range(C)]),
           "duality_cos_mean": cosd.mean(), "duality_cos_var": np.var(cosd, ddof=1)}
    hits = total = 0.0
    for j in range(m):
        dist = np.array([np.sum((H[j] - mu[c]) ** 2) for c in range(C)])
        z = np.array([Wc[c] @ H[j] for c in range(C)])
        tol_d = nc.TIE_RTOL * (np.sum((H[j] - muG) ** 2) + np.max(norms ** 2))
        tol_z = nc.TIE_RTOL * np.linalg.norm(H[j]) * np.max(wn)
        near = {c for c in range(C) if dist[c] <= dist.min() + tol_d}
        top = {c for c in range(C) if z[c] >= z.max() - tol_z}
        w = a[j, classes].sum()
        hits += w * bool(near & top)
        total += w
    dec["ncc_agreement"] = hits / total
    return out, dec, classes


def _assert_agree(got: dict, want: dict, keys):
    for k in keys:
        g, w = got[k], want[k]
        if isinstance(w, int):
            assert g == w, k
        else:
            assert g == pytest.approx(w, rel=AGREE, abs=AGREE), (k, g, w)


# ----------------------------------------------------------------------------------- three instances
def _gaussian():
    """Random supports of 1 to 4 tokens, Gaussian h, C = 12 > d + 1 = 6 (the ETF floor is positive)."""
    rng = np.random.default_rng(3)
    inst = random_instance(rng, m=40, d=5, V=12, kmin=1, kmax=4)
    return inst, None, rng.standard_normal((inst.V, inst.d))


def _one_hot():
    """Every support one token (classification), built from probabilities: a = pi_j p_jv; token 6 never
    follows a context (excluded)."""
    rng = np.random.default_rng(4)
    m, d, V = 30, 9, 7
    P = np.zeros((m, V))
    P[np.arange(m), rng.integers(0, V - 1, size=m)] = 1.0
    P[:V - 1, :V - 1] = np.eye(V - 1)  # every token but the last is seen
    H = rng.standard_normal((m, d)) + 2.0 * np.eye(V, d)[P.argmax(axis=1)]
    inst = NTPInstance.from_probs(H, P, rng.dirichlet(np.ones(m)))
    return inst, None, rng.standard_normal((V, d))


def _merged():
    """A model's vocabulary of 15 tokens of which 5 are observed, the others merged into representative 0
    (no samples); tokens 4 and 5 follow contexts 0 and 4 in the same proportions (1:1 and 2:2), and tokens
    9 and 12 contexts 1 and 2 (3:3 and 1:1): each pair has one mean."""
    rng = np.random.default_rng(5)
    merge = TokenMerge(15, np.array([1, 4, 5, 9, 12, 0]), 10)
    counts = np.array([[2, 1, 1, 0, 0, 0],
                       [1, 0, 0, 3, 3, 0],
                       [0, 0, 0, 1, 1, 0],
                       [5, 0, 0, 0, 0, 0],
                       [0, 2, 2, 0, 0, 0],
                       [1, 0, 0, 0, 0, 0],
                       [3, 0, 0, 0, 0, 0]])
    inst = NTPInstance.from_counts(rng.standard_normal((7, 6)), counts)
    return inst, merge, rng.standard_normal((15, 6))


CASES = {"gaussian": _gaussian, "one-hot": _one_hot, "merged": _merged}


@pytest.mark.parametrize("name", list(CASES))
def test_the_numbers_agree_with_the_reference(name):
    inst, merge, W = CASES[name]()
    got = nc.collapse(inst, W, merge=merge, ufm=False)
    rows = (lambda v: W[v]) if merge is None else (lambda v: W[merge.kept[v]])
    feats, dec, classes = reference(inst, inst.embeddings, rows)
    _assert_agree(got.features, feats, nc.FEATURE_KEYS)
    _assert_agree(got.decoder, dec, nc.DECODER_KEYS)
    assert got.classes["count"] == len(classes)
    assert got.classes["excluded"] == (W.shape[0] - len(classes))
    assert got.values == {"nc1": got.features["cdnv"], "nc2": got.features["etf_error"],
                          "nc3": got.decoder["self_duality_error"], "nc4": got.decoder["ncc_agreement"]}
    if name == "merged":  # the pairs (4, 5) and (9, 12) coincide and are left out of CDNV and the log kernel
        assert got.features["coincident_pairs"] == 2 and got.features["log_kernel_pairs"] == 8
        assert got.classes == {**got.classes, "count": 5, "excluded": 10}
    if name == "gaussian":
        assert got.features["etf_error_floor"] > 0 and got.features["etf_error"] >= got.features["etf_error_floor"]
    if name == "one-hot":
        assert got.classes["weighting"] == "probs x weights" and got.classes["excluded"] == 1


def test_blocks_do_not_change_the_numbers(monkeypatch):
    inst, merge, W = _merged()
    whole = nc.collapse(inst, W, merge=merge, ufm=False)
    for k, v in {"BLOCK": 2, "NNZ_BLOCK": 3}.items():
        monkeypatch.setattr(nc, k, v)
    blocked = nc.collapse(inst, W, merge=merge, ufm=False)
    for part in ("features", "decoder"):
        a, b = getattr(whole, part), getattr(blocked, part)
        for k in a:
            assert b[k] == pytest.approx(a[k], rel=1e-12, abs=1e-12), k


def test_the_limits_are_measured_as_decoders():
    from ntpcert.dynamics.trajectory import Limits

    inst, _, W = _gaussian()
    limits = Limits.compute(inst)
    got = nc.collapse(inst, W, limits, ufm=False)
    for key, M in (("W_star", limits.W_star), ("W_mm", limits.W_mm)):
        if M is None:
            assert getattr(got, key) is None and key in got.null
            continue
        _, dec, _ = reference(inst, inst.embeddings, lambda v, M=M: M[v])
        _assert_agree(getattr(got, key), dec, nc.DECODER_KEYS)
    h = got.head
    assert h["W_star_rank"] == np.linalg.matrix_rank(limits.W_star, tol=nc.RANK_RTOL * np.linalg.norm(limits.W_star, 2))
    assert h["rank"] <= min(inst.V - 1, h["embedding_rank"]) and h["raw_rank"] == min(inst.V, inst.d)
    s = np.linalg.svd(W - W.mean(axis=0), compute_uv=False)  # H has rank d: P(W) is W centred
    assert h["singular_values"] == pytest.approx(list(s[:nc.HEAD_TOP]), rel=1e-9)
    assert h["stable_rank"] == pytest.approx(np.sum(s ** 2) / s[0] ** 2, rel=1e-9)


@pytest.mark.parametrize("m", [3, 40])
def test_the_head_spectrum_from_the_gram_matrix_is_the_svds(m, monkeypatch):
    """P(W) = C W Q: with m = 3 < d = 8 the embeddings have rank 3 and Q projects; with m = 40, Q = I."""
    from ntpcert.dynamics.invariance import SoftmaxQuotient

    rng = np.random.default_rng(m)
    H = rng.standard_normal((m, 8))
    W = rng.standard_normal((30, 8)) + 2.0
    q = SoftmaxQuotient.of(H)
    svd = nc.spectrum(W, quotient=q)
    assert svd["rank"] == min(m, 8)
    monkeypatch.setattr(nc, "SVD_MAX_ENTRIES", 0)
    gram = nc.spectrum(W, quotient=q)
    assert gram["rank"] == svd["rank"] and gram["rank_99"] == svd["rank_99"]
    n = svd["rank"]
    assert gram["singular_values"][:n] == pytest.approx(svd["singular_values"][:n], rel=1e-9)
    assert gram["stable_rank"] == pytest.approx(svd["stable_rank"], rel=1e-9)
    assert gram["effective_rank"] == pytest.approx(svd["effective_rank"], rel=1e-6)


def _etf(C: int, d: int) -> np.ndarray:
    """C unit vectors of R^d (d >= C - 1) forming a simplex ETF: the centred standard basis, normalised."""
    E = np.eye(C) - 1.0 / C
    U, s, _ = np.linalg.svd(E)
    M = (U[:, :C - 1] * s[:C - 1])  # (C, C-1): the same Gram matrix
    M = np.hstack([M, np.zeros((C, d - (C - 1)))])
    return M / np.linalg.norm(M, axis=1, keepdims=True)


def test_a_collapsed_instance_reads_as_collapsed():
    """Each context's h is its class mean, the means a simplex ETF, W the means: NC1 = 0, ETF error 0,
    self-duality 0, NCC agreement 1 (and the same for W* and W^mm, the limits)."""
    from ntpcert.dynamics.trajectory import Limits

    C, d, per = 5, 6, 3
    M = _etf(C, d) + 0.0  # centred: the global mean is 0
    labels = np.repeat(np.arange(C), per)
    counts = np.zeros((labels.size, C), dtype=np.int64)
    counts[np.arange(labels.size), labels] = np.arange(labels.size) % 4 + 1  # unequal context counts
    inst = NTPInstance.from_counts(M[labels], counts)
    got = nc.collapse(inst, 3.0 * M, Limits.compute(inst), ufm=True)
    f, dec = got.features, got.decoder
    assert f["cdnv"] == pytest.approx(0, abs=1e-12) and f["within_ratio"] == pytest.approx(0, abs=1e-12)
    assert f["etf_error"] == pytest.approx(0, abs=1e-6) and f["etf_error_floor"] == 0.0
    assert f["interference_mean"] == pytest.approx(-1 / (C - 1), abs=1e-12) and f["interference_std"] < 1e-7
    assert f["norm_cv"] == pytest.approx(0, abs=1e-12) and f["log_kernel_var"] == pytest.approx(0, abs=1e-12)
    assert dec["self_duality_error"] == pytest.approx(0, abs=1e-6) and dec["ncc_agreement"] == 1.0
    assert dec["duality_cos_mean"] == pytest.approx(1.0, abs=1e-12) and dec["duality_distance_mean"] < 1e-12
    # one-token supports: F = {0}, so W* = 0 and its angles are null, saying so; W^mm is collapsed as well
    assert "W* is 0" in got.null["W_star.self_duality_error"] and got.head["W_star_rank"] == 0
    assert got.W_mm["ncc_agreement"] == 1.0 and got.W_mm["self_duality_error"] == pytest.approx(0, abs=1e-6)
    assert got.ufm is not None and got.ufm["decoder"]["ncc_agreement"] == 1.0
    assert got.ufm["features"]["cdnv"] == pytest.approx(0, abs=1e-8)
    # a random decoder on the same means is not collapsed
    rnd = nc.collapse(inst, np.random.default_rng(0).standard_normal((C, d)), ufm=False)
    assert rnd.decoder["self_duality_error"] > 0.3 and rnd.decoder["ncc_agreement"] < 1.0


def test_what_is_invariant_is_invariant():
    """W + 1c^T changes no prediction: NC4 and the centred self-duality stay, the raw one moves; H + t moves
    no NC1 and no NC2 number; a common scale of W moves none."""
    inst, merge, W = _gaussian()
    base = nc.collapse(inst, W, ufm=False)
    shifted = nc.collapse(inst, W + np.linspace(1, 3, inst.d)[None, :], ufm=False)
    for k in ("ncc_agreement", "self_duality_error_centred"):
        assert shifted.decoder[k] == pytest.approx(base.decoder[k], rel=1e-9)
    assert abs(shifted.decoder["self_duality_error"] - base.decoder["self_duality_error"]) > 1e-3
    scaled = nc.collapse(inst, 7.0 * W, ufm=False)
    for k in nc.DECODER_KEYS:
        assert scaled.decoder[k] == pytest.approx(base.decoder[k], rel=1e-9, abs=1e-12)
    moved = NTPInstance.from_counts(inst.embeddings + 5.0, inst.counts)
    got = nc.collapse(moved, W, ufm=False)
    for k in nc.FEATURE_KEYS:
        assert got.features[k] == pytest.approx(base.features[k], rel=1e-7, abs=1e-9), k


def test_above_the_caps_the_numbers_are_null_with_the_reason(monkeypatch):
    inst, _, W = _gaussian()
    monkeypatch.setattr(nc, "MAX_PAIRWISE_CLASSES", 3)
    monkeypatch.setattr(nc, "MAX_NCC_WORK", 10.0)
    monkeypatch.setattr(nc, "UFM_MAX_ENTRIES", 100)
    out = nc.collapse(inst, W, ufm=True).to_json()
    assert out["nc1"] is None and "MAX_PAIRWISE_CLASSES" in out["null"]["nc1"]
    assert out["nc4"] is None and "MAX_NCC_WORK" in out["null"]["nc4"]
    assert out["nc2"] is not None and out["nc3"] is not None  # from d x d products: no cap
    assert out["ufm"] is None and "UFM_MAX_ENTRIES" in out["null"]["ufm"]
    json.dumps(out, allow_nan=False)


# ----------------------------------------------------------------------------------- compare --json
def _strict(text: str):
    def refuse(const):
        raise AssertionError(f"{const} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def test_compare_json_has_nc(tmp_path, monkeypatch, capsys):
    from ntpcert.cli.app import main
    from ntpcert.instance.load import load_instance

    monkeypatch.chdir(tmp_path)
    inst = load_instance("paper")
    W = np.random.default_rng(1).standard_normal((inst.V, inst.d))
    np.save("W.npy", W)
    assert main(["compare", "paper", "--W", "W.npy", "--json"]) == 0
    out = _strict(capsys.readouterr().out)["nc"]
    for k in ("nc1", "nc2", "nc3", "nc4"):
        assert isinstance(out[k], float) and math.isfinite(out[k]), k
    feats, dec, _ = reference(inst, inst.embeddings, lambda v: W[v])
    assert out["nc1"] == pytest.approx(feats["cdnv"], rel=AGREE) and out["nc4"] == pytest.approx(dec["ncc_agreement"])
    assert out["W_mm"]["ncc_agreement"] is not None and out["ufm"]["decoder"]["ncc_agreement"] is not None
    assert out["head"]["W_star_rank"] <= inst.V - 1 and out["head"]["dim_F"] is not None
    assert main(["compare", "paper", "--W", "W.npy"]) == 0
    text = capsys.readouterr().out
    assert "neural collapse over 10 token classes" in text and "nc4 NCC agreement" in text


def test_compare_json_says_why_an_nc_number_is_null(tmp_path, monkeypatch, capsys):
    """Two contexts followed by the same three tokens of four in the same proportions: the three class means are
    the same point, so no pair has a CDNV, the centred means are 0 (no ETF error, no self-duality), and every
    class is a nearest mean (NC4 = 1); the fourth token has no samples."""
    from ntpcert.cli.app import main
    from ntpcert.instance.io import write_json

    monkeypatch.chdir(tmp_path)
    write_json(NTPInstance.from_counts(np.array([[1.0, 2.0], [3.0, -1.0]]), [[1, 2, 3, 0], [2, 4, 6, 0]]),
               "One.json")
    np.save("W.npy", np.arange(8.0).reshape(4, 2))
    assert main(["compare", "One.json", "--W", "W.npy", "--json"]) == 0
    out = _strict(capsys.readouterr().out)["nc"]
    assert out["nc1"] is None and "coincides" in out["null"]["nc1"]
    assert out["nc2"] is None and "global mean" in out["null"]["nc2"]
    assert out["nc3"] is None and "nc3" in out["null"]
    assert out["nc4"] == 1.0 and out["classes"]["count"] == 3 and out["classes"]["excluded"] == 1
    assert out["features"]["coincident_pairs"] == 3 and out["features"]["within_ratio"] is None


# ----------------------------------------------------------------------------------- a model's instance
@pytest.mark.slow  # 22 s: building the model and importing torch, then compare twice
def test_a_model_instance_merged_or_not_agrees_with_the_reference(tmp_path, monkeypatch, capsys):
    """A tiny GPT-2 read on a short corpus (64 tokens, some never a next token): the merged instance (its
    unseen tokens one representative, no samples) gives the numbers of the full one, and both the
    reference's, with the model's own decoder; ``compare --model`` reports the same ``nc`` on its dense and
    its merged path (d = 128 > m: separable, so W^mm, weighted on the merged path, is the full one)."""
    pytest.importorskip("torch")
    from ntpcert.cli.app import main
    from ntpcert.dynamics import compare as cm
    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from ntpcert.instance.lm import load_model_data

    from tests.lm_models import small_corpus, tiny_model

    corpus = small_corpus(tmp_path, pydoc_text(250))
    model = tiny_model(tmp_path, "gpt2-untied", d=128, corpus=pydoc_text(250))
    md = load_model_data(corpus, model, merge_unseen=True)
    full = md.full_instance()
    assert md.merge.merged > 0
    merged = nc.collapse(md.instance, md.decoder, merge=md.merge, ufm=False)
    plain = nc.collapse(full, md.decoder, ufm=False)
    feats, dec, classes = reference(full, full.embeddings, lambda v: md.decoder[v])
    for got in (merged, plain):
        _assert_agree(got.features, feats, nc.FEATURE_KEYS)
        _assert_agree(got.decoder, dec, nc.DECODER_KEYS)
        assert got.classes["count"] == len(classes) == md.merge.observed.size
        assert got.classes["excluded"] == md.merge.merged
    assert merged.head["rank"] == plain.head["rank"]
    assert main(["compare", corpus, "--model", model, "--json"]) == 0
    dense = _strict(capsys.readouterr().out)["nc"]
    monkeypatch.setattr(cm, "FULL_VOCAB_MAX_ENTRIES", 0)
    assert main(["compare", corpus, "--model", model, "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["V_instance"] < out["V"]  # the merged path
    got = out["nc"]
    for part, keys in (("features", nc.FEATURE_KEYS), ("decoder", nc.DECODER_KEYS)):
        _assert_agree(got[part], dense[part], keys)
    _assert_agree(got["W_mm"], dense["W_mm"], ("self_duality_error", "ncc_agreement"))
    assert got["decoder"]["ncc_agreement"] == pytest.approx(dec["ncc_agreement"], abs=AGREE)
