"""The shared cross-entropy code (ntpcert.instance.ce) against an arbitrary-precision reference.

The reference evaluates the textbook formulas (softmax - p, and KL) in mpmath with enough bits to cover
the whole range of the logits, so that its own cancellation is harmless."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.dynamics.trajectory import Limits
from ntpcert.instance import ce
from ntpcert.instance.datasets.teacher import teacher as teacher_data
from tests.conftest import random_instance

#: The done-when bound of issue 13 on the gradient's direction at margins 40-80.
COS_GAP = 1e-12


def teacher_instance(seed: int = 0, m: int = 40, d: int = 20, V: int = 5) -> NTPInstance:
    """One-hot separable data: Gaussian embeddings, labels argmax_v (T h_j)_v of a random linear teacher T."""
    return teacher_data(m=m, d=d, V=V, seed=seed)


def mp_reference(inst: NTPInstance, W: np.ndarray) -> tuple[list[list], object]:
    """Exact-enough gradient (V x d list of mpf) and excess loss by the textbook formulas."""
    Z = inst.embeddings @ W.T
    spread = float((Z.max(axis=1) - Z.min(axis=1)).max())
    with mp.workprec(int(1.45 * spread) + 200):
        H = [[mp.mpf(float(x)) for x in row] for row in inst.embeddings]
        Wm = [[mp.mpf(float(x)) for x in row] for row in W]
        V, d = W.shape
        G = [[mp.mpf(0)] * d for _ in range(V)]
        excess = mp.mpf(0)
        for j in range(inst.m):
            z = [mp.fsum(a * b for a, b in zip(Wm[v], H[j])) for v in range(V)]
            lse = max(z) + mp.log(mp.fsum(mp.exp(x - max(z)) for x in z))
            pi = mp.mpf(float(inst.weights[j]))
            for v in range(V):
                p = mp.mpf(float(inst.probs[j, v]))
                r = pi * (mp.exp(z[v] - lse) - p)
                for k in range(d):
                    G[v][k] += r * H[j][k]
                if p > 0:
                    excess += pi * p * (mp.log(p) - (z[v] - lse))
        return G, excess


def agreement(Gf: np.ndarray, Gm: list[list]) -> tuple[float, float, float]:
    """(1 - cos, sign agreement over all entries, largest relative entry error) of a float array against
    the reference."""
    with mp.workprec(200):
        flat_m = [x for row in Gm for x in row]
        flat_f = [mp.mpf(float(x)) for x in Gf.ravel()]
        nf = mp.sqrt(mp.fsum(x * x for x in flat_f))
        nm = mp.sqrt(mp.fsum(x * x for x in flat_m))
        cos = mp.fsum(a * b for a, b in zip(flat_f, flat_m)) / (nf * nm) if nf > 0 else mp.mpf(0)
        signs = float(np.mean([float(mp.sign(a)) == float(mp.sign(b)) for a, b in zip(flat_f, flat_m)]))
        top = max(abs(x) for x in flat_m)
        err = max(abs(a * nm / nf - b) for a, b in zip(flat_f, flat_m)) / top if nf > 0 else mp.mpf(1)
        return float(1 - cos), signs, float(err)


@pytest.fixture(scope="module")
def teacher():
    inst = teacher_instance(0)
    return inst, Limits.compute(inst).W_mm


def min_margin(inst: NTPInstance, W: np.ndarray) -> float:
    Z = inst.embeddings @ W.T
    mask = inst.support_mask()
    return float((Z[mask] - np.where(mask, -np.inf, Z).max(axis=1)).min())


@pytest.mark.parametrize("margin", [40.0, 60.0, 80.0])
def test_gradient_matches_mpmath_at_large_margins(teacher, margin):
    """Done when (issue 13): cosine >= 1 - 1e-12 and sign agreement 1.0 against mpmath at margins 40-80,
    where softmax - p keeps no correct digit of the in-support coefficient."""
    inst, Wmm = teacher
    rng = np.random.default_rng(int(margin))
    W = Wmm + 0.05 * rng.standard_normal(Wmm.shape) / np.sqrt(Wmm.size)
    W *= margin / min_margin(inst, W)
    assert min_margin(inst, W) == pytest.approx(margin, rel=1e-12)
    Gm, excess = mp_reference(inst, W)
    for G in (inst.gradient(W), inst.gradient_direction(W)[0]):
        gap, signs, err = agreement(G, Gm)
        assert gap <= COS_GAP
        assert signs == 1.0
        assert err <= 1e-12  # every entry, relative to the largest
    assert inst.excess_loss(W) == pytest.approx(float(excess), rel=1e-12)
    assert inst.excess_loss(W) > 0.0
    assert inst.log_excess_loss(W) == pytest.approx(float(mp.log(excess)), abs=1e-12)
    assert inst.loss(W) == pytest.approx(float(excess) + inst.entropy(), rel=1e-12)


def textbook_gradient(inst: NTPInstance, W: np.ndarray) -> np.ndarray:
    """The gradient as ntpcert computed it before the shared CE code: softmax - p in float64."""
    Z = inst.embeddings @ W.T
    S = np.exp(Z - Z.max(axis=1, keepdims=True))
    S /= S.sum(axis=1, keepdims=True)
    return ((S - inst.probs) * inst.weights[:, None]).T @ inst.embeddings


@pytest.mark.parametrize("margin", [40.0, 60.0, 80.0])
def test_the_textbook_gradient_fails_the_same_check(teacher, margin):
    """The test above has teeth: at the same points softmax - p misses both bounds, since the in-support
    coefficient s - 1 rounds to 0 past margin ~37 and the in-support part of the gradient is lost
    (measured: 1 - cos = 0.32, 0.33, 0.36 and sign agreement 0.76, 0.71, 0.85 at margins 40, 60, 80;
    the shared CE code: 1 - cos below 1e-27, signs 1.0)."""
    inst, Wmm = teacher
    rng = np.random.default_rng(int(margin))
    W = Wmm + 0.05 * rng.standard_normal(Wmm.shape) / np.sqrt(Wmm.size)
    W *= margin / min_margin(inst, W)
    Gm, _ = mp_reference(inst, W)
    gap, signs, err = agreement(textbook_gradient(inst, W), Gm)
    assert gap > 0.1 and signs < 0.9 and err > 0.5


def test_direction_survives_underflow(teacher):
    """At min margin 1000 every exp(-margin) underflows: the gradient is exactly zero in float64, its
    direction is still exact, and the log excess loss still reads -margin + O(1)."""
    inst, Wmm = teacher
    W = 1000.0 * Wmm
    D, A = inst.gradient_direction(W)
    assert not np.any(inst.gradient(W))
    assert A < -990.0
    Gm, excess = mp_reference(inst, W)
    gap, _, err = agreement(D, Gm)
    assert gap <= COS_GAP and err <= 1e-12
    assert inst.log_excess_loss(W) == pytest.approx(float(mp.log(excess)), abs=1e-10)
    assert inst.excess_loss(W) == 0.0


@pytest.mark.parametrize("kmax", [1, 3, 5])
@pytest.mark.parametrize("scale", [0.0, 1.0, 25.0, 400.0])
def test_any_supports_and_logits_match_mpmath(rng, kmax, scale):
    """One-hot (kmax 1), mixed and full supports; logits from 0 to thousands (misclassified contexts
    with a_v past 700 take the per-context path): gradient, direction and excess loss to 1e-11."""
    inst = random_instance(rng, 6, 4, 5, kmin=1, kmax=kmax)
    W = rng.standard_normal((5, 4)) * scale
    Gm, excess = mp_reference(inst, W)
    G = inst.gradient(W)
    D, A = inst.gradient_direction(W)
    assert A <= 0.0
    gap, signs, err = agreement(D, Gm)
    assert err <= 1e-11 and gap <= COS_GAP
    if np.any(G):
        assert agreement(G, Gm)[2] <= 1e-11
    assert np.allclose(D * math.exp(A), G, rtol=1e-14, atol=0.0)
    assert inst.excess_loss(W) == pytest.approx(float(excess), rel=1e-11)


def test_hessian_matches_finite_differences_of_the_gradient(rng):
    inst = random_instance(rng, 8, 3, 4)
    W = rng.standard_normal((4, 3))
    Hs = inst.hessian(W)
    h = 1e-6
    num = np.empty_like(Hs)
    for i in range(W.size):
        E = np.zeros(W.size)
        E[i] = h
        E = E.reshape(W.shape)
        num[:, i] = ((inst.gradient(W + E) - inst.gradient(W - E)) / (2 * h)).ravel()
    assert np.abs(Hs - num).max() <= 1e-7 * np.abs(Hs).max()
    assert np.allclose(Hs, Hs.T, atol=1e-15)


def test_hessian_keeps_its_curvature_at_large_margins(teacher):
    """Along W^mm the curvature is of order exp(-margin): at margin 40 the textbook s(1 - s) rounds
    it to noise; here it matches the mpmath value."""
    inst, Wmm = teacher
    W = 40.0 * Wmm
    Hs = inst.hessian(W)
    w = Wmm.ravel()
    curv = float(w @ Hs @ w)
    Z = inst.embeddings @ W.T
    with mp.workprec(400):
        exact = mp.mpf(0)
        for j in range(inst.m):
            z = [mp.mpf(float(x)) for x in Z[j]]
            lse = max(z) + mp.log(mp.fsum(mp.exp(x - max(z)) for x in z))
            s = [mp.exp(x - lse) for x in z]
            u = [mp.fsum(mp.mpf(float(a)) * mp.mpf(float(b)) for a, b in zip(Wmm[v], inst.embeddings[j]))
                 for v in range(inst.V)]
            mean = mp.fsum(a * b for a, b in zip(s, u))
            exact += mp.mpf(float(inst.weights[j])) * mp.fsum(a * (b - mean) ** 2 for a, b in zip(s, u))
    assert curv == pytest.approx(float(exact), rel=1e-9)


def test_phi_is_accurate_on_both_sides_of_the_series_cut():
    t = np.array([-3.0, -0.5, -0.49, -1e-3, -1e-9, 0.0, 1e-9, 1e-3, 0.49, 0.5, 2.0])
    got = ce.phi(t)
    with mp.workprec(200):
        want = [float(mp.exp(mp.mpf(x)) - 1 - mp.mpf(x)) for x in t]
    assert np.allclose(got, want, rtol=1e-15, atol=0.0)
