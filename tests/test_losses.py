"""Label smoothing, logit adjustment, temperature and weighted CE: their limits against independent
minimisations written here, GD under each loss against those limits with the decade checks, and the exact
verdicts of the smoothed and adjusted instances with both checkers."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import logsumexp

import ntpcert.dynamics.optimizers as O
from ntpcert import NTPInstance
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.dynamics.checks import convergence_checks
from ntpcert.dynamics.losses import (adjustment_limits, adjustment_verdict, run_adjusted, smoothing_limits,
                                     smoothing_verdict, tempered_limits, weighted_limits)
from ntpcert.dynamics.trajectory import Limits, decade_steps, run
from ntpcert.errors import InputError
from ntpcert.instance.losses import (AdjustedCE, adjusted_targets_instance, prior_offsets, smoothed_instance,
                                     tempered_instance, weighted_instance)

from .standalone import standalone

#: Relative agreement of the library's minimiser with the test's own L-BFGS one (on centred logits).
ARGMIN_RTOL = 1e-6
#: Relative agreement of minimum values (both converge far below this).
VALUE_RTOL = 1e-9


@st.composite
def count_instances(draw, max_m=4, max_d=3, max_V=4, min_d=1):
    """Small integer instances: H with entries in -2..2 (often rank deficient, so both compatible and
    incompatible smoothed instances come up), counts 0..4 with positive rows."""
    m = draw(st.integers(1, max_m), label="m")
    d = draw(st.integers(min_d, max_d), label="d")
    V = draw(st.integers(2, max_V), label="V")
    H = np.array(draw(st.lists(st.integers(-2, 2), min_size=m * d, max_size=m * d)), dtype=float).reshape(m, d)
    assume(np.all(np.abs(H).sum(axis=1) > 0))
    C = np.array(draw(st.lists(st.integers(0, 4), min_size=m * V, max_size=m * V))).reshape(m, V)
    assume(np.all(C.sum(axis=1) > 0))
    return NTPInstance.from_counts(H, C)


def _ce(H, pi, P, c, w, V):
    """The test's own CE of the targets P with offsets c, as a function of vec(W), and its gradient."""
    W = w.reshape(V, -1)
    Z = H @ W.T + c
    lse = logsumexp(Z, axis=1)
    val = float(pi @ (lse - (P * Z).sum(axis=1)))
    S = np.exp(Z - lse[:, None])
    return val, (((S - P) * pi[:, None]).T @ H).ravel()


def _lbfgs(fun, n):
    res = minimize(fun, np.zeros(n), jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "maxcor": 50, "gtol": 1e-13, "ftol": 1e-16})
    return res.x


def _centred(Z, mask=None):
    """Logits centred on each row (over ``mask``'s entries): what the loss sees of them."""
    if mask is None:
        return Z - Z.mean(axis=1, keepdims=True)
    Zm = np.where(mask, Z, 0.0)
    return np.where(mask, Z - Zm.sum(axis=1, keepdims=True) / mask.sum(axis=1, keepdims=True), 0.0)


def _close(A, B, rtol):
    return float(np.linalg.norm(A - B)) <= rtol * max(1.0, float(np.linalg.norm(B)))


# ---------------------------------------------------------------------------- label smoothing
@settings(max_examples=50)
@given(inst=count_instances(), k=st.integers(1, 10))
def test_smoothed_limit_is_the_minimiser_of_the_smoothed_ce(inst, k):
    """The limit of label smoothing minimises the test's own smoothed CE (targets (1-e)p + e/V in float):
    the same logits up to the invariant directions, the same minimum, in F; and the minimum is the entropy of
    the smoothed targets exactly when the smoothed log-odds are reachable."""
    eps = Fraction(k, 20)
    lim = smoothing_limits(inst, eps)
    m, V = inst.m, inst.V
    P = (1 - float(eps)) * inst.probs + float(eps) / V
    H, pi = inst.embeddings, inst.weights
    w = _lbfgs(lambda x: _ce(H, pi, P, np.zeros(V), x, V), V * inst.d)
    Z_ref = _centred(H @ w.reshape(V, -1).T)
    Z = _centred(H @ lim.W_limit.T)
    assert _close(Z, Z_ref, ARGMIN_RTOL), (Z, Z_ref)
    ref = _ce(H, pi, P, np.zeros(V), w, V)[0]
    assert abs(lim.minimum - ref) <= VALUE_RTOL * max(1.0, abs(ref))
    assert np.linalg.norm(lim.limits.subspace.project_perp(lim.W_limit)) <= 1e-9 * max(1.0, np.linalg.norm(lim.W_limit))
    entropy = float(-(pi @ (P * np.log(P)).sum(axis=1)))
    assert abs(lim.entropy - entropy) <= 1e-12
    assert lim.finite and lim.W_mm is None
    event(f"smoothed instance compatible: {lim.compatible}")
    if lim.compatible is True:
        assert abs(lim.minimum - entropy) <= VALUE_RTOL
    elif lim.compatible is False:
        assert lim.minimum - entropy > 1e-9


def test_smoothed_instance_is_exact_and_every_token_is_in_every_support():
    inst = NTPInstance.from_counts(np.eye(2), [[3, 0, 1], [0, 0, 5]])
    sm = smoothed_instance(inst, "1/10")
    assert sm.exact_row(0) == (Fraction(9, 10) * Fraction(3, 4) + Fraction(1, 30), Fraction(1, 30),
                               Fraction(9, 10) * Fraction(1, 4) + Fraction(1, 30))
    assert sm.exact_weight(1) == Fraction(5, 9)
    assert list(sm.support_sizes) == [3, 3]
    for bad in (0, 1, "3/2", -0.1, "x"):
        with pytest.raises(InputError, match="epsilon"):
            smoothed_instance(inst, bad)


#: One compatible smoothed instance (H full row rank) and one that is not (three contexts on a line).
SMOOTH_CASES = {
    "compatible": (np.eye(3), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]], True),
    "incompatible": (np.array([[1.0, 0], [0, 1], [1, 1]]), [[3, 1, 0, 0], [0, 2, 2, 0], [1, 0, 1, 4]], False),
}


@pytest.mark.parametrize("case", sorted(SMOOTH_CASES))
def test_gd_under_label_smoothing_converges_to_the_smoothed_limit(case):
    """GD on the smoothed CE (the trajectory code on the smoothed instance, unchanged) meets the F-convergence
    check of every decade and stays bounded: the limit is finite, W_eps in either case."""
    H, C, comp = SMOOTH_CASES[case]
    lim = smoothing_limits(NTPInstance.from_counts(H, C), "1/10")
    assert lim.compatible is comp and (lim.solve is None) == comp
    steps = 10_000
    tr = run(lim.instance, O.gd(), steps, limits=lim.limits, snapshots=decade_steps(steps))
    chk = convergence_checks(tr, lim.limits, path=False)
    assert chk.verdicts["F_convergence"] is True
    assert chk.verdicts["decade_increment"] is None  # no W^mm: every token is in every support
    assert chk.rel_dist_F[-1] <= 1e-9 and np.all(np.diff(chk.rel_dist_F) <= 1e-12)
    assert abs(tr["loss"][-1] - lim.minimum) <= 1e-12
    assert np.max(tr["norm"]) <= 1.01 * np.linalg.norm(lim.W_limit)


@pytest.mark.parametrize("case", sorted(SMOOTH_CASES))
def test_exact_smoothing_verdict_is_accepted_by_both_checkers(case):
    H, C, comp = SMOOTH_CASES[case]
    rep = smoothing_verdict(NTPInstance.from_counts(H, C), "1/10")
    assert rep.compatible.holds is comp and rep.separable.holds is True
    text = jsonio.dumps(rep.certificate, reseal=False)
    assert verify_text(text).valid
    ok, line = standalone(text)
    assert ok, line
    assert f"compatible: {str(comp).lower()}" in line


@settings(max_examples=15)
@given(inst=count_instances(max_m=3, max_V=3), k=st.integers(1, 9))
def test_exact_smoothing_verdict_agrees_with_the_float_limit(inst, k):
    """Where float64 decides the smoothed instance's compatibility, the exact certificate agrees."""
    lim = smoothing_limits(inst, Fraction(k, 10))
    rep = smoothing_verdict(inst, Fraction(k, 10), svm=False)
    assert rep.check.valid
    if lim.compatible is not None and rep.compatible.holds is not None:
        assert rep.compatible.holds is lim.compatible


# ---------------------------------------------------------------------------- logit adjustment
@settings(max_examples=50)
@given(inst=count_instances(min_d=2), seed=st.integers(0, 2 ** 16))
def test_adjusted_limit_minimises_the_adjusted_ce(inst, seed):
    """On separable data the finite part W_c minimises the test's own adjusted CE restricted to the supports
    (the in-support logits it converges to), and the adjusted CE along W_c + t W^mm falls to that minimum."""
    c = np.random.default_rng(seed).normal(size=inst.V)
    lim = adjustment_limits(inst, c)
    assume(lim.limits.split is None and lim.W_mm is not None)
    event(f"adjusted targets compatible: {lim.compatible}")
    H, pi, V = inst.embeddings, inst.weights, inst.V
    mask = inst.support_mask()

    def reduced(x):  # softmax over S_j only: -inf off the supports
        W = x.reshape(V, -1)
        Z = np.where(mask, H @ W.T + c, -np.inf)
        lse = logsumexp(Z, axis=1)
        S = np.exp(Z - lse[:, None])
        Zs = np.where(mask, Z, 0.0)
        return float(pi @ (lse - (inst.probs * Zs).sum(axis=1))), (((S - inst.probs) * pi[:, None]).T @ H).ravel()

    w = _lbfgs(reduced, V * inst.d)
    Z_ref = _centred(H @ w.reshape(V, -1).T, mask)
    Z = _centred(H @ lim.W_limit.T, mask)
    assert _close(Z, Z_ref, ARGMIN_RTOL)
    ref = reduced(w)[0]
    assert abs(lim.minimum - ref) <= VALUE_RTOL * max(1.0, abs(ref))
    loss = AdjustedCE(inst, c)
    vals = [loss.loss(lim.W_limit + t * lim.W_mm) for t in (5.0, 10.0, 20.0)]
    assert vals[0] >= vals[1] >= vals[2] >= ref - 1e-12
    # W^mm is in F-perp with margins >= 1: each out-of-support log-odds a_{j,v} at W_c falls by t or more, and
    # log(1 + x) <= x bounds the rest of the excess
    Z = H @ lim.W_limit.T + c
    a = Z - logsumexp(np.where(mask, Z, -np.inf), axis=1, keepdims=True)
    assert vals[2] - ref <= float(pi @ np.where(mask, 0.0, np.exp(a - 20.0)).sum(axis=1)) * (1 + 1e-9) + 1e-14


def test_adjusted_gradient_matches_its_own_finite_differences():
    rng = np.random.default_rng(3)
    inst = NTPInstance.from_counts(rng.normal(size=(3, 2)), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]])
    loss = AdjustedCE(inst, rng.normal(size=4))
    W = rng.normal(size=(4, 2))
    ref = _ce(inst.embeddings, inst.weights, inst.probs, loss.offsets, W.ravel(), 4)
    assert abs(loss.loss(W) - ref[0]) <= 1e-13
    assert np.allclose(loss.gradient(W).ravel(), ref[1], rtol=0, atol=1e-14)


ADJUST_CASES = {  # (H, counts): separable with W^mm; compatible, and adjusted-compatible, by rank
    "full_rank": (np.eye(3), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]]),
    "gaussian": (np.random.default_rng(7).normal(size=(3, 4)), [[1, 2, 0, 0, 1], [0, 3, 1, 0, 0], [2, 0, 0, 1, 0]]),
}


@pytest.mark.parametrize("case", sorted(ADJUST_CASES))
def test_gd_under_logit_adjustment_meets_the_decade_checks_against_the_new_limits(case):
    """GD on the adjusted CE: P_F W_k -> W*_c (not W*) and the F-perp increments -> ln 10 W^mm of the instance,
    by the decade checks."""
    H, C = ADJUST_CASES[case]
    inst = NTPInstance.from_counts(H, C)
    lim = adjustment_limits(inst, tau=1)
    assert lim.compatible is True and lim.W_mm is not None
    plain = Limits.compute(inst)
    assert np.linalg.norm(lim.W_limit - plain.W_star) > 1e-3  # the adjustment moves the finite part
    assert np.allclose(lim.W_mm, plain.W_mm)
    steps = 100_000
    tr = run_adjusted(lim, O.gd(), steps, snapshots=decade_steps(steps))
    chk = convergence_checks(tr, lim.limits, path=False)
    assert chk.verdicts["decade_increment"] is True
    assert chk.verdicts["F_convergence"] is True
    assert chk.rel_dist_F[-1] < chk.rel_dist_F[-2] < chk.rel_dist_F[-3]
    assert tr["excess_loss"][-1] < tr["excess_loss"][1]
    # against the unadjusted limits, the F-part misses
    old = dataclasses.replace(lim.limits, W_star=plain.W_star)
    assert convergence_checks(tr, old, path=False).verdicts["F_convergence"] is False


@pytest.mark.parametrize("tau", [1, Fraction(1, 2), Fraction(-3, 2)])
def test_rational_tau_limit_is_the_rational_instance_limit_over_t(tau):
    """For tau = s/t, W*_c = W*_q / t with q ~ p^t rho^-s, and q's exact verdict is accepted by both checkers."""
    H, C = ADJUST_CASES["gaussian"]
    inst = NTPInstance.from_counts(H, C)
    lim = adjustment_limits(inst, tau=tau)
    q = adjusted_targets_instance(inst, tau)
    W_q = Limits.compute(q).W_star
    assert _close(lim.W_limit, W_q / Fraction(tau).denominator, 1e-9)
    v = adjustment_verdict(inst, tau)
    assert v.how == "rational" and v.compatible.holds is True
    text = jsonio.dumps(v.report.certificate, reseal=False)
    assert verify_text(text).valid
    ok, line = standalone(text)
    assert ok and "compatible: true" in line, line


def test_adjusted_verdict_when_the_shift_breaks_compatibility():
    """Two contexts share h, so (4) needs equal log-odds on their common pair: counts 1:2 and 2:4 are
    compatible; with tau = 1 and a prior that differs the shifted log-odds stay equal (the shift is per
    token), so compatibility is kept; a non-constant H decides it exactly through q."""
    H = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    inst = NTPInstance.from_counts(H, [[1, 2, 0], [2, 4, 0], [0, 3, 5]])
    v = adjustment_verdict(inst, 1)
    assert v.how == "rational" and v.compatible.holds is True
    inst2 = NTPInstance.from_counts(H, [[1, 2, 0], [2, 3, 0], [0, 3, 5]])
    v2 = adjustment_verdict(inst2, 1)
    assert v2.compatible.holds is False
    assert adjustment_limits(inst2, tau=1).compatible is False


def test_absorbed_offsets_keep_the_instance_verdict_and_shift_w_star_by_the_offsets():
    """With a constant coordinate the offsets are a decoder C: CE_c(W) = CE(W + C), so the verdict is the
    instance's own (for any real tau) and W*_c = W* - P_F C."""
    H = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
    inst = NTPInstance.from_counts(H, [[3, 1, 0], [1, 2, 2], [0, 1, 4]])
    c = prior_offsets(inst, 0.7)
    v = adjustment_verdict(inst, 0.7)
    assert v.how == "absorbed" and v.report.check.valid
    plain = Limits.compute(inst)
    lim = adjustment_limits(inst, c)
    Cmat = np.zeros((3, 2))
    Cmat[:, 0] = c
    assert abs(AdjustedCE(inst, c).loss(np.ones((3, 2))) - inst.loss(np.ones((3, 2)) + Cmat)) <= 1e-13
    assert _close(lim.W_limit, plain.W_star - plain.subspace.project(Cmat), 1e-9)
    assert lim.compatible is plain.compatible


def test_float_tau_without_a_small_denominator_is_undetermined_and_says_why():
    H, C = ADJUST_CASES["gaussian"]
    v = adjustment_verdict(NTPInstance.from_counts(H, C), 0.7)
    assert v.how == "undetermined" and v.compatible.holds is None
    assert "fraction string" in v.compatible.reason
    assert adjustment_verdict(NTPInstance.from_counts(H, C), 0.5).how == "rational"


def test_zero_prior_token_is_refused():
    inst = NTPInstance.from_counts(np.eye(2), [[1, 0, 1], [1, 0, 2]])
    with pytest.raises(InputError, match=r"prior\[1\]"):
        prior_offsets(inst, 1.0)


# ---------------------------------------------------------------------------- temperature, weights
@pytest.mark.parametrize("T", [0.5, 2.0, 3.0])
def test_temperature_scales_the_limits_and_the_trajectory(T):
    """CE(Wh/T): W*_T = T W*, W^mm_T = T W^mm, and GD with step eta on it is T times GD with step eta/T^2 on CE."""
    H, C = ADJUST_CASES["full_rank"]
    inst = NTPInstance.from_counts(H, C)
    plain = Limits.compute(inst)
    lim = tempered_limits(inst, T)
    assert _close(lim.W_limit, T * plain.W_star, 1e-9)
    assert _close(lim.W_mm, T * plain.W_mm, 1e-5)
    eta = 0.5
    a = run(lim.instance, O.gd(eta), 200, limits=lim.limits, per_decade=2)
    b = run(inst, O.gd(eta / T ** 2), 200, limits=plain, per_decade=2)
    assert np.allclose(a.W_final, T * b.W_final, rtol=1e-12, atol=1e-12)
    x = np.random.default_rng(0).normal(size=(inst.V, inst.d))
    assert abs(tempered_instance(inst, T).loss(x) - inst.loss(x / T)) <= 1e-12


def test_weighted_ce_is_kappa_times_the_weighted_instance_ce():
    H, C = ADJUST_CASES["gaussian"]
    inst = NTPInstance.from_counts(H, C)
    beta = ["1/2", 2, 3, "1", "5/4"]
    omega = [1, 3, "1/2"]
    J, kappa = weighted_instance(inst, beta, omega)
    b = np.array([float(Fraction(x)) for x in beta])
    o = np.array([float(Fraction(x)) for x in omega])
    rng = np.random.default_rng(1)
    for _ in range(3):
        W = rng.normal(size=(inst.V, inst.d))
        Z = H @ W.T
        logS = Z - logsumexp(Z, axis=1, keepdims=True)
        own = float((o * inst.weights) @ -(b * inst.probs * logS).sum(axis=1))
        assert abs(float(kappa) * J.loss(W) - own) <= 1e-12 * max(1.0, abs(own))
    assert [list(s) for s in J.supports] == [list(s) for s in inst.supports]
    assert weighted_limits(inst, beta, omega).scale == float(kappa)


def test_offset_limit_with_zero_offsets_is_w_fin_and_adjusted_w_fin_minimises_its_reduced_loss():
    """On data that are not separable: with c = 0 the Newton solve gives the split's W_fin; with offsets, W_fin,c
    minimises the test's own CE_N with offsets (softmax over S_j u N_j), and GD on CE_c approaches it."""
    H = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])  # tokens 0 and 1 both follow h and -h: not separable
    inst = NTPInstance.from_counts(H, [[2, 1, 0], [1, 3, 0], [0, 1, 2]])
    plain = Limits.compute(inst)
    assert plain.split is not None and plain.split.limit is not None and len(plain.split.nonseparable)
    zero = adjustment_limits(inst, np.zeros(3))
    assert _close(zero.W_limit, plain.W_star, 1e-9)
    c = np.array([0.3, -0.5, 0.9])
    lim = adjustment_limits(inst, c)
    mask = lim.limits.system.instance.support_mask()  # S_j u N_j
    V = inst.V

    def reduced(x):
        W = x.reshape(V, -1)
        Z = np.where(mask, H @ W.T + c, -np.inf)
        lse = logsumexp(Z, axis=1)
        S = np.exp(Z - lse[:, None])
        Zs = np.where(inst.probs > 0, Z, 0.0)
        return (float(inst.weights @ (lse - (inst.probs * Zs).sum(axis=1))),
                (((S - inst.probs) * inst.weights[:, None]).T @ H).ravel())

    w = _lbfgs(reduced, V * inst.d)
    assert _close(_centred(H @ lim.W_limit.T, mask), _centred(H @ w.reshape(V, -1).T, mask), ARGMIN_RTOL)
    steps = 100_000
    tr = run_adjusted(lim, O.gd(), steps, snapshots=decade_steps(steps))
    chk = convergence_checks(tr, lim.limits, path=False)
    assert chk.verdicts["F_convergence"] is True
    assert abs(tr["loss"][-1] - lim.minimum) <= 1e-3
