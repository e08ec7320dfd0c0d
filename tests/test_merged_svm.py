"""A model's unseen tokens merged into one representative that weighs as all of them in the NTP-SVM
(NTPInstance.with_token_multiplicity, TokenMerge.weighted): W^mm and W^mm_P of the merged instance, expanded
to the full vocabulary, are the full vocabulary's."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance
from ntpcert.instance.lm.contexts import ContextCounts
from ntpcert.instance.lm.merge import merge_unseen
from ntpcert.pipeline.nonseparable import nonseparable_limits
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution
from ntpcert.solve.svm import solve_svm

#: The acceptance bound of the merged, weighted solve against the full one (relative Frobenius distance).
REL = 1e-6


def _merged(H, C):
    """(full instance, merged instance, merge) of embeddings H and dense counts C."""
    rows, toks = np.nonzero(C)
    cc = ContextCounts(contexts=tuple((j,) for j in range(C.shape[0])), rows=rows.astype(np.int64),
                       tokens=toks.astype(np.int64), values=C[rows, toks].astype(np.int64), V=C.shape[1],
                       token_frequency=C.sum(axis=0).astype(np.int64))
    Cr, mg = merge_unseen(cc)
    return NTPInstance.from_counts(H, C), NTPInstance.from_counts(H, Cr), mg


def _instance(seed, *, m, d, V, unseen, mirrored=False):
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, d))
    if mirrored:  # contexts h and -c h: the representative's pairs can be non-separable
        H[m // 2:] = -H[: m - m // 2] * rng.uniform(0.5, 2.0, size=(m - m // 2, 1))
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V - unseen, size=int(rng.integers(1, 3)), replace=False)
        C[j, S] = rng.integers(1, 5, size=S.size)
    return _merged(H, C)


def _rel(A, B):
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


@pytest.mark.parametrize("solver", ["structured", "structured-float", "active-set", "auto"])
def test_weighted_merged_svm_is_the_full_vocabularys(solver):
    for seed in range(4):
        full, red, mg = _instance(seed, m=6, d=8, V=12, unseen=5)  # d >= m: separable
        assert mg.merged >= 5
        want = solve_svm(full, solver=solver)
        got = solve_svm(mg.weighted(red), solver=solver)
        assert _rel(mg.expand_rows(got.W), want.W) <= REL
        assert got.norm == pytest.approx(want.norm, rel=REL)
        # without the weight the merged instance's W^mm is another point: the test can tell them apart
        plain = solve_svm(red, solver=solver)
        assert _rel(mg.expand_rows(plain.W), want.W) > 1e3 * REL


def test_the_weighted_pair_expands_to_a_pair_of_the_full_instance_with_the_same_checks():
    full, red, mg = _instance(7, m=5, d=7, V=11, unseen=4)
    sol = solve_svm(mg.weighted(red), solver="structured")
    a_full = mg.expand_rows(sol.dual)  # every unseen token carries the representative's dual row
    back = SVMSolution.from_primal_dual(KeslerSystem.build(full), mg.expand_rows(sol.W), a_full, solver="x",
                                        status="x", seconds=0.0)
    assert back.objective == pytest.approx(sol.objective, rel=1e-12)
    assert back.dual_objective == pytest.approx(sol.dual_objective, rel=1e-9)
    assert back.dual_residual <= 1e-9 and sol.dual_residual <= 1e-9
    bound = sol.info["certificate"]
    assert bound["kind"] == "exact" and bound["relative_gap"] <= 1e-9
    want = solve_svm(full, solver="structured").norm
    assert bound["norm_lower"] <= want * (1 + 1e-12) and want <= bound["norm_upper"] * (1 + 1e-12)


@pytest.mark.parametrize("mirrored", [False, True])
def test_weighted_w_mm_p_is_the_full_vocabularys_on_partly_separable_data(mirrored):
    """P and N both non-empty; with mirrored contexts some pairs of the representative are in N too."""
    seen_rep_in_n = False
    checked = 0
    for seed in range(60):
        full, red, mg = _instance(seed, m=6 if mirrored else 7, d=3, V=8, unseen=3, mirrored=mirrored)
        if mg.merged == 0:
            continue
        want = nonseparable_limits(full)
        if want.nonseparable is None or len(want.nonseparable) == 0 or want.svm is None:
            continue
        got = nonseparable_limits(mg.weighted(red))
        assert mg.expand_pairs(got.nonseparable).tolist() == want.nonseparable.tolist()
        assert got.to_json()["separable_pairs"] == want.to_json()["separable_pairs"]
        assert _rel(mg.expand_rows(got.svm.W), want.svm.W) <= REL
        rep_in_n = bool(np.any(got.nonseparable[:, 1] == red.V - 1))
        seen_rep_in_n |= rep_in_n
        if rep_in_n:  # W_fin is not the full one there: not computed, saying why
            assert got.limit is None and "in N" in got.error
        else:  # no unseen token in N: W_fin (0 on the unseen rows) and L* are the full ones
            assert np.linalg.norm(mg.expand_rows(got.W_fin) - want.W_fin) <= REL * max(1.0, np.linalg.norm(want.W_fin))
            assert got.limit.L_star == pytest.approx(want.limit.L_star, rel=1e-9)
        checked += 1
        if checked >= 4:
            break
    assert checked >= 4 and seen_rep_in_n == mirrored


def test_multiplicity_is_validated_and_refused_where_it_is_not_read():
    full, red, mg = _instance(1, m=5, d=7, V=10, unseen=4)
    w = mg.weighted(red)
    assert w.token_multiplicity.tolist() == [1] * (red.V - 1) + [mg.merged]
    assert red.with_token_multiplicity(np.ones(red.V, dtype=int)).token_multiplicity is None
    with pytest.raises(InputError, match=r"token_multiplicity: expected shape"):
        red.with_token_multiplicity([1, 2])
    with pytest.raises(InputError, match=r"token_multiplicity\[0\]: 0"):
        red.with_token_multiplicity(np.r_[0, np.ones(red.V - 1, dtype=int)])
    with pytest.raises(InputError, match="expected integers"):
        red.with_token_multiplicity(np.ones(red.V))
    with pytest.raises(InputError, match="support of context 0"):
        red.with_token_multiplicity(np.where(red.support_mask()[0], 2, 1))
    with pytest.raises(InputError, match="does not weigh tokens"):
        solve_svm(w, solver="clarabel")
    from ntpcert.pipeline.exact_verdicts import exact_certify

    with pytest.raises(InputError, match="multiplicities"):
        exact_certify(w, svm=False)
    with pytest.raises(InputError, match="the merge keeps"):
        mg.weighted(full)


def test_expand_pairs_maps_the_representative_to_every_unseen_token():
    full, red, mg = _instance(2, m=4, d=3, V=9, unseen=4)
    nobs = mg.observed.size
    pairs = np.array([[0, nobs], [1, 0]])
    out = mg.expand_pairs(pairs)
    assert out.tolist() == sorted([[0, int(u)] for u in mg.unseen()] + [[1, int(mg.observed[0])]])
