"""Pairs of tokens on m >> d instances (:mod:`ntpcert.pipeline.pairs`): witnesses checked against the
HiGHS path and the exact checks, and forged pair witnesses rejected."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.pipeline.exact_witness import separability_exact
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline import pairs
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.verdict import FarkasRay


def pair_instance(seed: int, *, m: int = 40, d: int = 4, V: int = 5) -> NTPInstance:
    """Gaussian embeddings; every context has tokens 0 and 1 in its support half of the time, one of
    them otherwise, plus random others; counts random, so the log-odds are generic."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, d))
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        both = rng.random() < 0.5
        first = rng.random() < 0.5
        C[j, 0] = rng.integers(1, 9) if (both or first) else 0
        C[j, 1] = rng.integers(1, 9) if (both or not first) else 0
        for v in range(2, V):
            if rng.random() < 0.3:
                C[j, v] = rng.integers(1, 9)
    return NTPInstance.from_counts(H, C)


@pytest.mark.parametrize("seed", range(6))
def test_pair_decides_like_highs(seed):
    inst = pair_instance(seed)
    system = KeslerSystem.build(inst)
    ray_text = pairs.separability_witness(inst)
    assert ray_text is not None
    ray, _ = ray_text
    assert FarkasRay(ray, "structured-farkas").check(inst) == ""
    highs, _ = dm.decide_separability(system, separability_solver="highs")
    assert highs.holds is False
    dec = dm.pair_separability(inst)
    assert dec.holds is False and dec.engine == "pair-farkas"
    assert dec.check(inst) == ""
    assert dm.decide_separability(system)[0].holds is False
    assert separability_exact(inst, None, try_ray=True).holds is False

    comp = dm.decide_compatibility(system)
    assert comp.holds is False and comp.engine == "pair-null-vector"
    idx = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(system.eq_context, system.eq_token))}
    y = np.zeros(system.n_eq, dtype=object)
    for k, v in comp.witness.y.items():
        y[idx[k]] = v
    assert dm.exact_left_null(system, y)
    assert abs(float(y.astype(float) @ system.log_odds())) > 1e-9


def test_exact_certify_with_pairs_is_valid():
    rep = exact_certify(pair_instance(1, m=900), svm=False)  # V (d + m) > SMALL_LP_VARS: HiGHS is not first
    assert rep.check.valid, rep.check.reason
    assert rep.compatible.holds is False and rep.separable.holds is False
    assert rep.float_report.compatible.engine == "pair-null-vector"
    assert rep.float_report.separable.engine == "pair-farkas"


def test_forged_pair_ray_rejected():
    inst = pair_instance(2)
    ray, _ = pairs.separability_witness(inst)
    key = next(iter(ray))
    forged = dict(ray)
    forged[key] = ray[key] + Fraction(1, 3)
    assert FarkasRay(forged, "structured-farkas").check(inst) != ""
    # every entry halved on one token only: 1^T a_j = 0 fails
    z = key[0]
    forged = {k: (v / 2 if k[0] == z else v) for k, v in ray.items()}
    assert FarkasRay(forged, "structured-farkas").check(inst) != ""


def test_no_pair_when_d_covers_m():
    inst = pair_instance(0, m=6, d=8)
    assert pairs.separability_witness(inst) is None
    assert pairs.compatibility_witness(inst) is None


def test_null_vectors_exact():
    rng = np.random.default_rng(0)
    H = rng.standard_normal((5, 4))
    ys = pairs.null_vectors(H)
    assert len(ys) == 1
    rows = pairs.integer_rows(H)
    assert all(sum(y * r[i] for y, r in zip(ys[0], rows)) == 0 for i in range(4))
    assert [Fraction(x) for x in rows[0]] != [0] * 4


def _few_shared(seed: int, *, m: int = 60, d: int = 6, V: int = 5, shared: int = 2) -> NTPInstance:
    """Tokens 0 and 1 share only ``shared`` < d contexts; in the others exactly one of them follows,
    at random: the pair's part of (6) is infeasible (60 random signs in 4 free dimensions), but no
    d + 1 shared contexts exist for the null-vector route."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, d))
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        if j < shared:
            C[j, 0], C[j, 1] = rng.integers(1, 9, size=2)
        else:
            C[j, int(rng.random() < 0.5)] = rng.integers(1, 9)
        for v in range(2, V):
            if rng.random() < 0.3:
                C[j, v] = rng.integers(1, 9)
    return NTPInstance.from_counts(H, C)


def _lp_ray_on_tokens_0_1(inst: NTPInstance):
    S = inst.support_mask()
    return pairs._lp_pair_ray(inst, 0, 1, np.flatnonzero(S[:, 0] & S[:, 1]), np.flatnonzero(S[:, 0] ^ S[:, 1]))


@pytest.mark.parametrize("seed", range(5))
def test_lp_route_finds_an_exact_ray_with_fewer_than_d_shared_contexts(seed):
    inst = _few_shared(seed)
    S = inst.support_mask()
    assert int((S[:, 0] & S[:, 1]).sum()) < inst.d
    found = _lp_ray_on_tokens_0_1(inst)
    assert found is not None
    ray, text = found
    assert "by LP" in text
    assert FarkasRay(ray, "structured-farkas").check(inst) == ""  # exact, on the whole instance
    assert dm.decide_separability(KeslerSystem.build(inst), separability_solver="highs")[0].holds is False
    forged = {k: (v * 2 if k[1] == next(iter(ray))[1] else v) for k, v in ray.items() if k[0] == 0}
    forged.update({k: v for k, v in ray.items() if k[0] != 0})
    assert FarkasRay(forged, "structured-farkas").check(inst) != ""


def test_lp_route_claims_nothing_on_a_separable_pair():
    rng = np.random.default_rng(0)
    m, d = 30, 6
    H = rng.standard_normal((m, d))
    u = rng.standard_normal(d)
    C = np.zeros((m, 4), dtype=np.int64)
    C[np.arange(m), (H @ u < 0).astype(int)] = 1  # token 0 where h_j . u > 0: separable by u
    C[:, 2] = 1
    inst = NTPInstance.from_counts(H, C)
    assert _lp_ray_on_tokens_0_1(inst) is None


def _open_compatibility(m: int) -> NTPInstance:
    """Tokens 0 and 1 share two contexts and split the rest at random; token 2 follows everywhere with
    the same count: (6) fails on the pair (0, 1), while no pair's null vector refutes (4) (b = 0)."""
    rng = np.random.default_rng(0)
    H = rng.standard_normal((m, 6))
    C = np.zeros((m, 3), dtype=np.int64)
    C[:2, :2] = 1
    C[2 + np.arange(m - 2), (rng.random(m - 2) < 0.5).astype(int)] = 1
    C[:, 2] = 1
    return NTPInstance.from_counts(H, C)


def _without_tall_route(monkeypatch) -> None:
    """Keep (4) open in the decision engine: the instance is tall (rows outnumber the 18 columns), so
    particular solutions would settle it before the order of the other witnesses matters."""
    import ntpcert.pipeline.decide as decide

    monkeypatch.setattr(decide, "check_compatibility_by_columns", lambda instance: None)


def test_float_certify_skips_the_fit_once_pairs_refute_separability(monkeypatch):
    """Past the dense path (LSMR) and with (4) left open by the exact witnesses, a pair's exact ray
    settles (6) first and W* (which needs both conditions) is not fitted, by default (``ntpcert
    certify``); with fit_when_refuted (``ntpcert limits``) a least-squares point is."""
    from ntpcert.pipeline.float_verdicts import certify
    from ntpcert.rows.subspace import dense_preferred

    _without_tall_route(monkeypatch)

    inst = _open_compatibility(600)
    assert not dense_preferred(KeslerSystem.build(inst))
    rep = certify(inst, svm=False)
    assert rep.separable.holds is False and rep.separable.engine == "pair-farkas"
    assert rep.fit.W_star is None and rep.fit.solver["method"] == "none"
    assert "refuted exactly first" in rep.fit.solver["why"]
    assert rep.compatible.holds is None  # left open by the engines; the float route was not needed
    fitted = certify(inst, svm=False, fit_when_refuted=True)
    assert fitted.fit.W_star is not None and fitted.separable.holds is False
    # the limits' fit is only reported: cut at REFUTED_LSMR_ITER, and its residual decides nothing
    assert fitted.separable.engine == "pair-farkas"
    assert fitted.compatible.holds is None and "decides nothing" in fitted.compatible.reason
    assert fitted.fit.solver["maxiter"] <= 100


def test_exact_certify_skips_the_fit_once_pairs_refute_separability(monkeypatch):
    """The same through certify --exact: a valid certificate without the fit. The exact stage proves
    (4) by particular solutions (900 rows on 18 columns), not by a 900 x 900 null space (that took
    about a minute with its re-check)."""
    _without_tall_route(monkeypatch)  # in the float stage only
    rep = exact_certify(_open_compatibility(900), svm=False)
    assert rep.check.valid, rep.check.reason
    assert rep.separable.holds is False
    fl = rep.float_report
    assert fl.separable.engine == "pair-farkas"
    assert fl.fit.W_star is None and "refuted exactly first" in fl.fit.solver["why"]
    assert rep.compatible.holds is True and rep.compatibility.engine == "particular-solutions"
