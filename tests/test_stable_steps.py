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


def test_trajectories_flag_where_float64_stops_being_trustworthy(teacher):
    """GD's gradient underflows past margin ~708 (flagged from the start when started at margin 800);
    sign descent steps on the rescaled direction there (trusted); both report it in metrics and JSON."""
    from ntpcert.dynamics.optimizers import gd

    inst, Wmm = teacher
    lim = Limits.compute(inst)
    from ntpcert.dynamics.trajectory import run

    far = run(inst, gd(1.0), 10, limits=lim, W0=800.0 * Wmm, per_decade=1)
    assert far.untrusted_from == 0
    assert far["max_out_logprob"][0] < -708.0
    assert "float64 is not trustworthy from step 0" in far.trust_warning()
    assert far.to_json()["float64_trusted"] is False
    assert np.isfinite(far["log_excess_loss"][0]) and far["excess_loss"][0] == 0.0
    ok = run(inst, sign(0.01), 10, limits=lim, W0=800.0 * Wmm, per_decade=1)
    assert ok.untrusted_from is None and ok.trust_warning() is None and ok.to_json()["float64_trusted"] is True
    near = run(inst, gd(1.0), 10, limits=lim, W0=5.0 * Wmm, per_decade=1)
    assert near.untrusted_from is None


def test_paper_direction_error_grows_once_f_is_reached():
    """With a nontrivial F the in-support rounding (absolute, ~eps |z|) is magnified by exp(margin) in the
    rescaled direction: at W* + c W^mm the bound passes TRUST_RTOL as c grows, and the flag follows."""
    from ntpcert.dynamics.trajectory import run
    from ntpcert.instance.ce import TRUST_RTOL
    from ntpcert.instance.load import load_instance

    inst = load_instance("paper")
    lim = Limits.compute(inst)
    bounds = []
    for c in (1.0, 30.0, 100.0):
        t = run(inst, sign(0.01), 1, limits=lim, W0=lim.W_star + c * lim.W_mm, per_decade=1)
        bounds.append(float(t["direction_error_bound"][0]))
        assert (t.untrusted_from is None) == (bounds[-1] <= TRUST_RTOL)
    assert bounds[0] < TRUST_RTOL < bounds[-1]
    assert bounds == sorted(bounds)


def test_orthogonalization_error_is_measured_and_stated(teacher):
    """Spectral descent and Muon with "svd" orthogonalise exactly (error at rounding level); Muon's five
    quintic Newton-Schulz steps leave singular values in about [0.7, 1.2] (error well above rounding, below
    0.35); every logged step reports it."""
    from ntpcert.dynamics.trajectory import run

    inst, _ = teacher
    lim = Limits.compute(inst)
    exact = [run(inst, o, 300, limits=lim, per_decade=2)["orth_error"]
             for o in (spectral(0.1, schedule="inv-sqrt"), muon(0.1, schedule="inv-sqrt", orthogonalize="svd"))]
    for col in exact:
        assert np.all(col[1:] <= 1e-12)
    ns = run(inst, muon(0.1, schedule="inv-sqrt"), 300, limits=lim, per_decade=2)["orth_error"]
    assert np.all((ns[1:] > 1e-3) & (ns[1:] < 0.35))
    assert np.isnan(run(inst, sign(0.1), 10, limits=lim, per_decade=1)["orth_error"]).all()
