"""ntpcert.dynamics.compare on small random instances (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.dynamics import compare as cmp_mod
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
    monkeypatch.setattr(cmp_mod, "BLOCK_ROWS", 5)
    blocked = cmp_mod.compare(W, limits, bracket=whole.bracket)
    for key in cmp_mod.COMPARE_METRICS:
        assert blocked.values[key] == pytest.approx(whole.values[key], rel=TOL["linalg"], abs=TOL["linalg"])
    assert [b["excess_share"] for b in blocked.bins] == pytest.approx([b["excess_share"] for b in whole.bins],
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
    assert sum(b["excess_share"] for b in whole.bins) == pytest.approx(whole.values["excess_loss"], rel=TOL["linalg"])


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
