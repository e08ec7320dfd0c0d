"""Scale-free optimisers on the exact gradient direction: past exp(-margin) underflow, with Newton–Schulz
normalised at any gradient size, and spectral descent without a rounding direction along 1_V."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.dynamics.optimizers import muon, newton_schulz, polar_factor, sign, spectral
from ntpcert.dynamics.trajectory import Limits, Stepper
from tests.test_ce import teacher_instance


@pytest.fixture(scope="module")
def teacher():
    inst = teacher_instance(0)
    return inst, Limits.compute(inst).W_mm


def test_newton_schulz_is_scale_free(rng):
    """The old +1e-7 in the normaliser switched normalisation off once ||G|| < 1e-7."""
    M = rng.standard_normal((5, 20))
    ref = newton_schulz(M)
    for scale in (1e-3, 1e-9, 1e-200, 1e-310, 1e250):
        assert np.allclose(newton_schulz(scale * M), ref, rtol=0, atol=1e-13)
    assert not np.any(newton_schulz(np.zeros((5, 20))))


def test_polar_factor_drops_rounding_noise_along_ones(rng):
    G = rng.standard_normal((5, 20))
    G -= G.mean(axis=0)  # 1^T G = 0, as for every CE gradient
    noisy = G + 1e-16 * np.linalg.norm(G) * np.outer(np.ones(5), rng.standard_normal(20))
    P = polar_factor(noisy)
    assert np.linalg.norm(np.ones(5) @ P) <= 1e-13
    assert np.sum(np.linalg.svd(P, compute_uv=False) > 0.5) == 4


def test_spectral_descent_stays_orthogonal_to_ones(teacher):
    inst, _ = teacher
    st = Stepper(inst, spectral(0.1, schedule="inv-sqrt"))
    st.advance(3000)
    W = st.W
    assert np.linalg.norm(np.ones(inst.V) @ W) / np.linalg.norm(W) <= 1e-13


@pytest.mark.parametrize("make", [lambda: sign(0.01), lambda: spectral(0.01), lambda: muon(0.01, momentum=0.9)])
def test_scale_free_steps_past_underflow_follow_the_exact_direction(teacher, make):
    """From min margin 1000 (every exp(-margin) is 0 in float64, so the gradient is exactly 0) the fused
    loop still moves along a descent direction of the exact gradient."""
    inst, Wmm = teacher
    assert not np.any(inst.gradient(1000.0 * Wmm))
    far = Stepper(inst, make(), W0=1000.0 * Wmm)
    far.advance(20)
    assert np.linalg.norm(far.W - 1000.0 * Wmm) > 0.01
    D_far, A_far = inst.gradient_direction(1000.0 * Wmm)
    assert A_far < -900.0
    # the first step is the optimiser's normalised map of the exact direction
    one = Stepper(inst, make(), W0=1000.0 * Wmm)
    one.advance(1)
    step = 1000.0 * Wmm - one.W
    assert np.linalg.norm(step) > 0.0
    assert float(np.vdot(step, D_far)) > 0.0  # a descent direction of the exact gradient
