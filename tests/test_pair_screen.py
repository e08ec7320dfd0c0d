"""The streaming pair screen (:mod:`ntpcert.pipeline.pair_screen`): its rays are exact circuits checked on
the whole instance, it never finds one on separable data (against the exact oracle of
``tests/test_soundness.py`` and the HiGHS LP), and the pipeline's verdicts do not change with it."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.exact.separability import check_ray
from ntpcert.instance.datasets import pydoc
from ntpcert.instance.datasets.separable import hypercube_separable
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline import pair_screen as ps
from ntpcert.pipeline import pairs
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.rows.kesler import KeslerSystem

from .test_soundness import oracle_separable


def random_small(rng: np.random.Generator, family: str) -> NTPInstance:
    """m in [d + 2, 12], d in [1, 4], V in [2, 5]: Gaussian, small-integer or duplicated embeddings with random
    supports, or planted separable data."""
    d = int(rng.integers(1, 5))
    m = int(rng.integers(d + 2, 13))
    V = int(rng.integers(2, 6))
    if family == "planted":  # {-1, 1}^(d-1) needs at least V vertices
        d = max(d, int(np.ceil(np.log2(V))) + 1, 2)
        return hypercube_separable(rng, int(rng.integers(d + 2, 13)), d, V)
    if family == "gaussian":
        H = rng.standard_normal((m, d))
    elif family == "integer":
        H = rng.integers(-2, 3, size=(m, d)).astype(float)
        H[~H.any(axis=1), 0] = 1.0
    else:  # duplicated: contexts that share an embedding
        H = rng.standard_normal((m, d))[rng.integers(0, max(1, m // 2), size=m)]
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(1, V))
        C[j, rng.choice(V, size=k, replace=False)] = rng.integers(1, 6, size=k)
    return NTPInstance.from_counts(H, C)


def assert_circuit(inst: NTPInstance, found: ps.PairRay) -> None:
    """The ray is an exact circuit on one pair: its rows sigma_j h_j have exactly one integer dependency,
    the weights (>= 0 and not all 0 on the split contexts), on at most rank + 1 <= d + 1 contexts; and it
    passes the exact Farkas check on the whole instance. (One dependency among c rows: their rank is c - 1.)"""
    z, v = found.tokens
    S = inst.support_mask()
    ctx = found.contexts
    assert ctx.size <= inst.d + 1
    assert np.array_equal(found.shared, S[ctx, z] & S[ctx, v])
    assert np.all(S[ctx, z] | S[ctx, v])
    sig = np.where(S[ctx, z], 1.0, -1.0)
    G = inst.embeddings[ctx] * sig[:, None]
    basis = pairs.null_vectors(G)
    assert len(basis) == 1
    w = list(found.weights)
    assert basis[0] in (w, [-x for x in w])
    split = [x for x, sh in zip(w, found.shared) if not sh]
    assert split and all(x >= 0 for x in split) and any(x > 0 for x in split)
    assert set(found.ray) == {(t, int(j)) for j, x in zip(ctx, w) for t in (z, v) if x}
    for j, x, s in zip(ctx.tolist(), w, sig.astype(int).tolist()):
        assert found.ray.get((z, j), 0) == s * x and found.ray.get((v, j), 0) == -s * x
    assert check_ray(inst, found.ray) == ""


@pytest.mark.parametrize("k, chars", [(2, 3000), (3, 6000), (5, 20000)])
def test_rays_on_character_corpora_are_exact_circuits(k, chars):
    inst = pydoc(k=k, max_chars=chars)
    assert ps.applies(inst)
    res = ps.screen(inst)
    assert res.found is not None, res.reason
    assert_circuit(inst, res.found)
    assert res.pairs_tried >= 1 and 0 < res.work <= ps.SCREEN_MAX_WORK
    # the text names the pair and the contexts a reader can look up
    text = ps.witness_text(inst, res.found)
    assert inst.token_names[res.found.tokens[0]] in text and str(res.found.contexts.size) in text
    # one changed entry, or one token's entries halved, and the exact check refuses it
    key = next(iter(res.found.ray))
    forged = dict(res.found.ray)
    forged[key] += Fraction(1, 3)
    assert check_ray(inst, forged) != ""
    z = res.found.tokens[0]
    assert check_ray(inst, {kk: (x / 2 if kk[0] == z else x) for kk, x in res.found.ray.items()}) != ""


def test_the_pipeline_decides_by_the_screen_and_agrees_without_it(monkeypatch):
    inst = pydoc(k=3, max_chars=6000)
    system = KeslerSystem.build(inst)
    dec, _ = dm.decide_separability(system)
    assert dec.holds is False and dec.engine == "pair-farkas" and "pair screen" in dec.reason
    assert check_ray(inst, dec.witness.ray) == ""
    monkeypatch.setattr(ps, "applies", lambda instance: False)
    before, _ = dm.decide_separability(system)
    assert before.holds is False and "pair screen" not in before.reason


def test_exact_certificate_carries_the_screen_ray():
    rep = exact_certify(pydoc(k=3, max_chars=6000), svm=False)
    assert rep.check.valid, rep.check.reason
    assert rep.separable.holds is False and rep.float_report.separable.engine == "pair-farkas"
    assert "pair screen" in rep.float_report.separable.reason


def _rare_pair_instance() -> NTPInstance:
    """Separable data on 50 tokens (:func:`hypercube_separable`, d = 7), then tokens 50 and 51 in 5 supports
    at the end of the data: four shared contexts with embeddings e_1, e_2, e_1 + e_2, 2 e_1 + e_2 force
    (w_50 - w_51) h = 0 on the span of e_1, e_2, and one context with e_1 holding 50 alone asks it to be
    >= 1 there: a ray on 2 contexts."""
    rng = np.random.default_rng(7)
    base = hypercube_separable(rng, 2000, 7, 50)
    e = np.eye(7)
    extra_h = np.array([e[1], e[2], e[1] + e[2], 2 * e[1] + e[2], e[1]])
    extra_c = np.zeros((5, 52), dtype=np.int64)
    extra_c[:4, 50], extra_c[:4, 51] = [1, 2, 3, 1], [2, 1, 1, 5]
    extra_c[4, 50] = 1
    C = np.hstack([base.counts, np.zeros((base.m, 2), dtype=np.int64)])
    return NTPInstance.from_counts(np.vstack([base.embeddings, extra_h]), np.vstack([C, extra_c]))


def test_a_rare_pair_that_the_frequent_pairs_miss():
    """The older pair route tries the 12 pairs with the most shared supports among the 48 tokens in the
    most supports; the screen streams over every pair, and finds the ray on the two rarest tokens."""
    inst = _rare_pair_instance()
    assert pairs.separability_witness(inst) is None
    res = ps.screen(inst)
    assert res.found is not None and res.found.tokens == (50, 51)
    assert_circuit(inst, res.found)
    assert res.found.contexts.size == 2 and set(res.found.contexts.tolist()) <= set(range(2000, 2005))


def test_the_budget_is_work_and_the_answer_repeats():
    inst = pydoc(k=3, max_chars=6000)
    a, b = ps.screen(inst), ps.screen(inst)
    assert (a.pairs_tried, a.lps, a.lp_iterations, a.work) == (b.pairs_tried, b.lps, b.lp_iterations, b.work)
    assert a.found.ray == b.found.ray
    starved = ps.screen(inst, max_work=ps.LP_BASE_WORK)  # not one LP iteration fits
    assert starved.found is None and starved.lps == 0 and "budget" in starved.reason
    assert ps.screen(inst, max_pairs=0).found is None
    planted = hypercube_separable(np.random.default_rng(3), 400, 5, 8)
    none = ps.screen(planted)
    assert none.found is None and none.work <= ps.SCREEN_MAX_WORK and none.pairs_tried >= 1


def test_screen_needs_more_contexts_than_dimensions():
    inst = NTPInstance.from_counts(np.eye(3), [[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    res = ps.screen(inst)
    assert res.found is None and not ps.applies(inst) and "d + 1" in res.reason


FAMILIES = ("gaussian", "integer", "duplicated", "planted")


def test_never_a_ray_on_separable_data_and_the_same_verdicts(monkeypatch):
    """200 seeded small instances (m > d + 1): every ray found is an exact circuit and the exact oracle
    never calls those data separable; on data the oracle calls separable the screen finds nothing; and the
    default pipeline (HiGHS first switched off, so that the screen runs) gives the same definite verdicts
    with the screen and without it."""
    monkeypatch.setattr(dm, "SMALL_LP_VARS", 0)
    real_applies = ps.applies
    tally: Counter = Counter()
    for i in range(200):
        family = FAMILIES[i % len(FAMILIES)]
        inst = random_small(np.random.default_rng(1000 + i), family)
        truth = oracle_separable(inst)
        res = ps.screen(inst)
        where = f"{family} #{i}"
        if res.found is not None:
            assert_circuit(inst, res.found)
            assert truth is not True, f"{where}: a ray on data the oracle calls separable"
            tally["ray"] += 1
        if truth is True:
            assert res.found is None, where
            tally["separable"] += 1
        elif truth is False:
            tally["not separable"] += 1
            tally["not separable, no ray on one pair"] += res.found is None
        system = KeslerSystem.build(inst)
        with_screen, _ = dm.decide_separability(system)
        monkeypatch.setattr(ps, "applies", lambda instance: False)
        without, _ = dm.decide_separability(system)
        monkeypatch.setattr(ps, "applies", real_applies)
        if with_screen.holds is not None and without.holds is not None:
            assert with_screen.holds == without.holds, where
        for v in (with_screen, without):
            assert v.holds is None or truth is None or v.holds == truth, where
        tally["decided by the screen"] += with_screen.holds is False and "pair screen" in with_screen.reason
    print(dict(tally))
    # neither side is vacuous
    assert tally["ray"] >= 40 and tally["separable"] >= 30 and tally["decided by the screen"] >= 30, dict(tally)


def test_the_split_section_skips_the_small_lps_past_its_cell_limit(monkeypatch):
    """``certify --exact`` writes the split only where its small LPs hold at most CERTIFY_MAX_CELLS cells
    C·m·d (the whole pydoc text at k = 5 has about 3.4e9 and ran past 14 minutes); past that the split is
    undetermined, naming the sizes, and the verdicts do not wait for it."""
    from ntpcert.pipeline import split_section
    from ntpcert.solve.split import nonseparable_split

    # (0, 2) is in N (tests/test_split_screen.py, _between); tokens 0 and 1 are one class: C·m·d = 2·3·2 = 12
    inst = NTPInstance.from_counts(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]]),
                                   np.array([[1, 1, 0], [0, 0, 1], [0, 0, 1]]))
    small = nonseparable_split(inst, method="screen", max_cells=12)
    assert small.ok
    cut = nonseparable_split(inst, method="screen", max_cells=10)
    assert not cut.ok and "too large to try here" in cut.reason and "cells" in cut.reason
    # past both limits (the single LP's non-zeros and the small LPs' cells): undetermined, nothing solved
    nonzeros = split_section.CERTIFY_MAX_NONZEROS
    monkeypatch.setattr(split_section, "CERTIFY_MAX_CELLS", 10)
    monkeypatch.setattr(split_section, "CERTIFY_MAX_NONZEROS", 0)
    key, section = split_section.exact_split_section(inst)
    assert section is None and key["status"] == "undetermined" and "too large" in key["reason"]
    monkeypatch.setattr(split_section, "CERTIFY_MAX_NONZEROS", nonzeros)  # the single LP decides again
    key, section = split_section.exact_split_section(inst)
    assert section is not None and key["status"] == "exact"


def test_witness_text_names_huge_weights_by_their_size():
    """Circuits of dyadic embeddings (random:256) have integer weights of thousands of digits, past Python's
    limit on int -> str conversion: the reason names their size instead of failing."""
    assert ps._weight_text(-7) == "-7"
    huge = 3 ** 20_000  # 9,543 digits
    text = ps._weight_text(huge)
    assert text.startswith("+(an integer of about 9,5") and "digits" in text
    assert ps._weight_text(-huge).startswith("-(")
