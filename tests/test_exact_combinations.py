"""The integer checks behind the pair witnesses (:func:`ntpcert.exact.rational.combinations_vanish`,
``check_ray``, ``exact_left_null``) against Fractions, and ``certify --exact`` skipping the
least-squares W* once (4) is refuted exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.exact.rational import combinations_vanish, dyadic_int_rows
from ntpcert.exact.separability import check_ray
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline import pairs
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.float_verdicts import certify, compute_limits
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace

from .test_pairs import pair_instance


def _reference(H: np.ndarray, coeffs: dict) -> bool:
    for row in coeffs.values():
        total = [Fraction(0)] * H.shape[1]
        for j, c in row.items():
            for i, x in enumerate(H[j]):
                total[i] += Fraction(c) * Fraction(float(x))
        if any(total):
            return False
    return True


def _spread_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Gaussian rows with exponents spread over 2^-40 .. 2^40, some zeros, one subnormal."""
    H = rng.standard_normal((n, d)) * np.exp2(rng.integers(-40, 40, (n, d)))
    H[rng.random((n, d)) < 0.1] = 0.0
    H[0, 0] = 5e-324
    return H


@pytest.mark.parametrize("seed", range(4))
def test_dyadic_int_rows_are_one_power_of_two_apart(seed):
    H = _spread_rows(np.random.default_rng(seed), 6, 5)
    rows = dyadic_int_rows(H)
    scale = {Fraction(n) / Fraction(float(x)) for r, hr in zip(rows, H) for n, x in zip(r, hr) if x}
    assert len(scale) == 1
    (s,) = scale
    assert s.denominator == 1 and s.numerator & (s.numerator - 1) == 0  # a power of two
    assert all(n == 0 for r, hr in zip(rows, H) for n, x in zip(r, hr) if not x)


@pytest.mark.parametrize("seed", range(6))
def test_combinations_vanish_agrees_with_fractions(seed):
    rng = np.random.default_rng(seed)
    n, d = 7, 6
    H = _spread_rows(rng, n, d)
    (y,) = pairs.null_vectors(H)  # n = d + 1 generic rows: one dependency, with huge entries
    exact = {0: dict(enumerate(y)), 3: {j: Fraction(-2 * c, 7) for j, c in enumerate(y)}}
    assert _reference(H, exact) and combinations_vanish(H, exact)
    k = int(rng.integers(n))
    for bad in ({0: {**exact[0], k: exact[0][k] + 1}}, {1: {k: Fraction(1, 3)}},
                {**exact, 5: {k: 1, (k + 1) % n: 1}}):
        assert _reference(H, bad) == combinations_vanish(H, bad)
    assert combinations_vanish(H, {}) and combinations_vanish(H, {2: {0: 0}})


@pytest.mark.parametrize("seed", range(4))
def test_ray_and_null_vector_checks_catch_a_changed_entry(seed):
    inst = pair_instance(seed)
    ray, _ = pairs.separability_witness(inst)
    assert check_ray(inst, ray) == ""
    # moving mass between the pair's two tokens in a context whose support holds both keeps the
    # column sums and the signs, and breaks sum_j a_j h_j^T = 0
    S = inst.support_mask()
    j = next(j for (v, j) in ray if S[j, 0] and S[j, 1])
    forged = dict(ray)
    forged[(0, j)] = forged.get((0, j), Fraction(0)) + 1
    forged[(1, j)] = forged.get((1, j), Fraction(0)) - 1
    assert "(a H)" in check_ray(inst, forged)
    system = KeslerSystem.build(inst)
    comp = dm.decide_compatibility(system)
    idx = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(system.eq_context, system.eq_token))}
    y = np.zeros(system.n_eq, dtype=object)
    for key, val in comp.witness.y.items():
        y[idx[key]] = val
    assert dm.exact_left_null(system, y) and comp.check(inst) == ""
    y[np.flatnonzero(y)[0]] += 1
    assert not dm.exact_left_null(system, y)


def _incompatible() -> NTPInstance:
    """h_2 = 2 h_1 with log-odds log 2 and log 5: not compatible."""
    h = np.array([0.5, -1.0, 0.75])
    return NTPInstance.from_counts(np.array([h, 2 * h, [1.0, 0.0, 0.0]]), [[1, 2, 0], [1, 5, 0], [0, 3, 1]])


@pytest.mark.parametrize("make", [_incompatible, lambda: pair_instance(0)])
def test_exact_certify_fits_no_least_squares_point_once_refuted(make):
    inst = make()
    rep = exact_certify(inst)
    assert rep.check.valid and rep.compatible.holds is False
    fl = rep.float_report
    assert fl.fit.W_star is None and fl.subspace.method == "none"
    js = rep.to_json()["compatible"]
    assert js["least_squares"]["method"] == "none" and js["W_star_norm"] is None and js["residual"] is None
    # nor does the float pipeline by default (``ntpcert certify``): the witness bounds every W's residual
    plain = certify(inst)
    assert plain.compatible.holds is False and plain.fit.W_star is None and plain.subspace.method == "none"
    lower = plain.to_json()["compatible"]["residual_lower_bound"]
    assert lower > 0 and js["residual_lower_bound"] == lower
    # ``limits`` (compute_limits) fits its least-squares point, which the bound holds below
    fitted = compute_limits(inst)
    assert fitted.compatible.holds is False and fitted.fit.W_star is not None
    assert fitted.to_json()["compatible"]["W_star_norm"] >= 0
    assert fitted.fit.residual >= lower * (1 - 1e-12) and fitted.fit.residual_lower_bound == lower


def test_unsolved_subspace_refuses_what_needs_F():
    sub = Subspace.unsolved(KeslerSystem.build(_incompatible()))
    assert sub.dim is None and sub.method == "none"
    W = np.zeros((3, 3))
    for call in (lambda: sub.project(W), sub.basis, lambda: sub.min_norm_solution(np.zeros(2))):
        with pytest.raises(InputError, match="Subspace.unsolved"):
            call()


def test_a_pair_ray_is_checked_once_by_the_pipeline(monkeypatch):
    """The exact pipeline does not check again a ray that decide checked on the whole instance; the
    certificate checker still checks it (and a ray that fails there makes the certificate INVALID)."""
    from ntpcert.exact import separability as xs

    calls = []
    real = xs.check_ray
    monkeypatch.setattr(xs, "check_ray", lambda inst, ray: calls.append(len(ray)) or real(inst, ray))
    rep = exact_certify(pair_instance(1, m=1000))  # V (d + m) above the size that goes to HiGHS first
    assert rep.float_report.separable.engine == "pair-farkas"
    assert rep.check.valid and rep.separable.holds is False
    assert len(calls) == 1
