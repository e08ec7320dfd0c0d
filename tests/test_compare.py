"""ntpcert.dynamics.compare on small random instances (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.dynamics import compare as cmp_mod
from ntpcert.dynamics import logits as logits_mod
from ntpcert.dynamics.trajectory import Limits

from tests.conftest import TOL, random_instance


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(7)
    inst = random_instance(rng, m=12, d=16, V=9, kmin=1, kmax=4)
    limits = Limits.compute(inst)
    W = rng.standard_normal((inst.V, inst.d))
    return inst, limits, W


def test_blocked_numbers_equal_the_direct_ones(case, monkeypatch):
    inst, limits, W = case
    whole = cmp_mod.compare(W, limits)
    monkeypatch.setattr(logits_mod, "BLOCK_ROWS", 5)
    blocked = cmp_mod.compare(W, limits, bracket=whole.bracket)
    for key in cmp_mod.COMPARE_METRICS:
        assert blocked.values[key] == pytest.approx(whole.values[key], rel=TOL["linalg"], abs=TOL["linalg"])
    assert [b["excess_nats"] for b in blocked.bins] == pytest.approx([b["excess_nats"] for b in whole.bins],
                                                                      rel=TOL["linalg"], abs=TOL["linalg"])
    # brute force: margins, spread and log-odds error over every (j, z in S_j, v not in S_j)
    Z = inst.embeddings @ W.T
    margin, spread, err = np.inf, 0.0, 0.0
    for j in range(inst.m):
        S = inst.support(j)
        out = np.setdiff1d(np.arange(inst.V), S)
        if out.size:
            margin = min(margin, Z[j, S].min() - Z[j, out].max())
        spread = max(spread, Z[j, S].max() - Z[j, S].min())
        a = S[0]
        err = max(err, np.max(np.abs(Z[j, S] - Z[j, a] - np.log(inst.probs[j, S] / inst.probs[j, a]))))
    assert whole.values["margin"] == pytest.approx(margin, rel=TOL["linalg"])
    assert whole.values["support_spread"] == pytest.approx(spread, rel=TOL["linalg"])
    assert whole.values["log_odds_error"] == pytest.approx(err, rel=TOL["linalg"], abs=TOL["linalg"])
    assert sum(b["excess_nats"] for b in whole.bins) == pytest.approx(whole.values["excess_loss"], rel=TOL["linalg"])
    assert sum(b["excess_fraction"] for b in whole.bins) == pytest.approx(1.0, rel=TOL["linalg"])
    for b in whole.bins:
        assert b["excess_fraction"] == pytest.approx(b["excess_nats"] / whole.values["excess_loss"], rel=1e-12)


def test_at_the_limits_the_F_part_and_the_direction_match(case):
    inst, limits, _ = case
    assert limits.W_mm is not None and limits.compatible  # d = 16 > m = 12: Lemma 1
    W = limits.W_star + 50.0 * limits.W_mm
    c = cmp_mod.compare(W, limits)
    assert c.values["rel_dist_F"] <= 1e-6 and c.values["cos_perp_mm"] == pytest.approx(1.0, abs=1e-6)
    assert c.values["norm_matched_distance"] <= 1e-3 and c.values["log_odds_error"] <= 1e-6


def test_frequency_bins_are_powers_of_two():
    bins = cmp_mod.frequency_bins(np.array([0, 1, 2, 3, 4, 9, 0]))
    assert [(label, idx.tolist()) for label, idx in bins] == [("0", [0, 6]), ("1", [1]), ("2-3", [2, 3]),
                                                              ("4-7", [4]), ("8-15", [5])]


#: The numbers that were already invariant under W + D (D h_j in span(1)): computed on W as given, they
#: are what compare reported before it quotiented; the rest are the same formulas at P(W).
INVARIANT = ("loss", "excess_loss", "grad_norm", "dist_F", "rel_dist_F", "log_excess_loss", "max_out_logprob",
             "margin", "support_spread", "log_odds_error", "excess_over_bracket")


@pytest.mark.parametrize(("m", "d", "V"), [(12, 16, 9), (20, 4, 6), (3, 8, 5)])
def test_the_invariant_numbers_are_unchanged_and_the_others_are_of_W_modulo_N(m, d, V):
    from ntpcert.dynamics.invariance import SoftmaxQuotient
    from ntpcert.dynamics.trajectory import metrics

    rng = np.random.default_rng(m + d + V)
    inst = random_instance(rng, m=m, d=d, V=V, kmin=1, kmax=min(4, V - 1))
    limits = Limits.compute(inst)
    W = rng.standard_normal((inst.V, inst.d)) + 3.0  # not centred: P moves it
    got = cmp_mod.compare(W, limits)
    raw = {**metrics(W, limits), **logits_mod.logit_numbers(limits.instance, W)}
    raw["excess_over_bracket"] = raw["excess_loss"] - got.bracket["excess_upper"]
    for key in INVARIANT:
        assert got.values[key] == pytest.approx(raw[key], rel=TOL["linalg"], abs=TOL["linalg"]), key
    P = SoftmaxQuotient.of(inst.embeddings).project(W)
    assert np.allclose(P.sum(axis=0), 0.0) and float(np.linalg.norm(P)) < float(np.linalg.norm(W))
    at_P = metrics(P, limits)
    for key in ("norm", "cos_mm", "cos_mm_centered", "perp_fraction", "normalized_margin", "margin_ratio", "eq_violation"):
        assert got.values[key] == pytest.approx(at_P[key], rel=TOL["linalg"], abs=TOL["linalg"], nan_ok=True), key
        if not np.isnan(at_P[key]) and key != "cos_mm_centered":
            assert at_P[key] != pytest.approx(metrics(W, limits)[key], rel=1e-6), key  # the old value moved
    assert got.values["raw_norm"] == float(np.linalg.norm(W))
    assert got.values["raw_invariant_norm"] == pytest.approx(float(np.linalg.norm(W - P)), rel=TOL["linalg"])


@pytest.mark.parametrize(("m", "d"), [(3, 7), (9, 4), (4, 4)])
def test_the_quotient_is_the_orthogonal_projection_on_the_complement_of_N(m, d):
    """P(W) = C W Q: idempotent, symmetric, zero exactly on N = {1a^T} + {E : E H^T = 0}, and it keeps
    every logit difference; F, W* and W^mm lie in its range."""
    from ntpcert.dynamics.invariance import SoftmaxQuotient

    rng = np.random.default_rng(m * d)
    H = rng.standard_normal((m, 2)) @ rng.standard_normal((2, d)) if m == 4 else rng.standard_normal((m, d))
    inst = random_instance(rng, m=m, d=d, V=6, kmin=1, kmax=3)
    inst = type(inst).from_counts(H, inst.counts)
    q = SoftmaxQuotient.of(H)
    assert q.rank == np.linalg.matrix_rank(H) == min(m, d, 2 if m == 4 else d)
    A, B = rng.standard_normal((2, 6, d))
    PA, PB = q.project(A), q.project(B)
    assert np.allclose(q.project(PA), PA) and np.isclose(np.vdot(PA, B), np.vdot(A, PB))
    null = np.linalg.svd(H)[2][q.rank:].T
    D = np.outer(np.ones(6), rng.standard_normal(d)) + (rng.standard_normal((6, d - q.rank)) @ null.T if
                                                         q.rank < d else 0.0)
    assert np.abs(q.project(D)).max() <= 1e-12 * np.abs(D).max()
    Z, ZP = H @ A.T, H @ PA.T
    assert np.allclose(Z - Z[:, :1], ZP - ZP[:, :1])
    limits = Limits.compute(inst)
    for X in (limits.W_star, limits.W_mm, limits.subspace.project(A)):
        if X is not None:
            assert np.allclose(q.project(X), X, atol=1e-9 * max(1.0, np.abs(X).max()))


def test_a_bins_cosine_with_w_mm_rows_inside_the_solutions_distance_bound_is_undefined():
    """W^mm rows of norm below sqrt(2 gap) may be 0 exactly (a model's unseen tokens under W^mm_P): their cosine
    is NaN, not the cosine with the solver's residue; rows above the bound keep their cosine."""
    from types import SimpleNamespace

    from ntpcert.dynamics.compare import _bin_cosine

    Wp = np.array([[1.0, 0.0], [0.0, 1.0]])
    residue = np.array([[8e-6, 0.0], [0.0, 0.0]])
    assert np.isnan(_bin_cosine(Wp, residue, SimpleNamespace(gap=2.5e-4)))
    assert _bin_cosine(Wp, residue, SimpleNamespace(gap=0.0)) == pytest.approx(1 / np.sqrt(2))
    assert _bin_cosine(Wp, 3 * Wp, SimpleNamespace(gap=2.5e-4)) == pytest.approx(1.0)


def test_bin_distances_share_the_whole_one_and_a_bin_where_w_star_is_about_0_has_no_ratio(case):
    import dataclasses

    inst, limits, W = case
    freq = np.array([0, 1, 1, 2, 3, 4, 5, 8, 9][:inst.V], dtype=np.int64)
    got = cmp_mod.compare(W, limits, frequency=freq)
    shares = np.array([b["dist_F_share"] for b in got.bins])
    assert np.sum(shares ** 2) == pytest.approx(got.values["rel_dist_F"] ** 2, rel=1e-9)
    # W* about 0 on one bin's rows (as on tokens seen only in one-token supports): no ratio there, a share still
    idx = dict(cmp_mod.frequency_bins(freq))["1"]
    tiny = limits.W_star.copy()
    tiny[idx] *= 1e-12
    lim2 = dataclasses.replace(limits, W_star=tiny)
    out = cmp_mod.compare(W, lim2, frequency=freq)
    row = next(b for b in out.bins if b["label"] == "1")
    assert np.isnan(row["rel_dist_F"]) and np.isfinite(row["dist_F_share"])
    assert "BIN_W_STAR_FLOOR" in out.notes["null"]
    rows = dict(cmp_mod.frequency_bins(freq))
    for b in out.bins:  # the other bins keep their ratio wherever W* has rows there
        if b["label"] != "1" and np.linalg.norm(tiny[rows[b["label"]]]) > 0:
            assert np.isfinite(b["rel_dist_F"])


def test_the_snapshot_figure_has_a_log_t_axis_with_w0_and_says_whose_limits(case, monkeypatch, tmp_path):
    from ntpcert.report import compare_figure as cf

    inst, limits, W = case
    series = [(t, cmp_mod.compare(W * (1 + t), limits)) for t in (0, 1, 10, 100)]
    seen = {}
    monkeypatch.setattr(cf, "save_figure", lambda fig, path: seen.setdefault("fig", fig) and path)
    cf.plot_series(series, str(tmp_path / "s.png"), title="run")
    fig = seen["fig"]
    assert all(ax.get_xscale() == "symlog" for ax in fig.axes)
    assert "the same h for every W_t" in fig._suptitle.get_text()
    seen.clear()
    cf.plot_series(series[1:], str(tmp_path / "s.png"))
    assert all(ax.get_xscale() == "log" for ax in seen["fig"].axes)
