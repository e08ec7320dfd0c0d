"""Convergence checks of ntpcert.dynamics.checks: the decade increment on synthetic trajectories built
from Theorem 2's expansion W_k = W* + ln(k) W^mm + o(ln k), the verdicts, the path cosine, and (slow)
the paper numbers at 10^6 GD steps with Adam as the control."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import ntpcert.dynamics.optimizers as O
from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.dynamics.checks import (
    DECADE_RESIDUAL_MAX,
    F_DISTANCE_MAX,
    PATH_COSINE_MIN,
    convergence_checks,
    decade_increments,
    own_norm,
)
from ntpcert.dynamics.trajectory import Limits, Trajectory, decade_steps, run


@pytest.fixture(scope="module")
def small():
    inst = NTPInstance.from_counts(np.eye(3), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]])
    return inst, Limits.compute(inst)


def _synthetic(limits: Limits, steps: int, offset) -> Trajectory:
    """A trajectory whose decade snapshots are W* + ln(k) W^mm + offset(k)."""
    ks = decade_steps(steps)
    snaps = np.stack([limits.W_star + math.log(k) * limits.W_mm + offset(k) for k in ks])
    return Trajectory("gd", {}, ks, {}, snaps[-1], snaps, 0.0, "synthetic", "", ks)


def test_exact_expansion_passes_every_check(small):
    inst, lim = small
    tr = _synthetic(lim, 10**6, lambda k: 0.0)
    chk = convergence_checks(tr, lim, path=False)
    assert np.allclose(chk.increment_residual, 0.0, atol=1e-12)
    assert np.allclose(chk.increment_ratio, 1.0, atol=1e-12)
    assert np.allclose(chk.increment_one_minus_cos, 0.0, atol=1e-12)
    assert np.all(chk.rel_dist_F <= 1e-12)
    assert chk.verdicts["decade_increment"] is True and chk.verdicts["F_convergence"] is True
    assert chk.verdicts["path_cosine"] is None  # not computed: undetermined, not passed
    assert chk.verdicts["own_norm_margin"] is None  # GD: reported, not judged


def test_decaying_transient_passes_and_a_persistent_one_fails(small, rng):
    inst, lim = small
    E = lim.subspace.project_perp(rng.standard_normal(lim.W_star.shape))  # an F-perp direction not along W^mm
    E *= 3.0 * np.linalg.norm(lim.W_mm) / np.linalg.norm(E)
    good = convergence_checks(_synthetic(lim, 10**6, lambda k: E / math.sqrt(k)), lim, path=False)
    tail = good.increment_residual[-3:]
    assert np.all(np.diff(tail) < 0) and tail[-1] <= DECADE_RESIDUAL_MAX
    assert good.verdicts["decade_increment"] is True
    # a second growth direction: the increment tends to ln10 (W^mm + E/||W^mm|| ...), not ln10 W^mm
    bad = convergence_checks(_synthetic(lim, 10**6, lambda k: math.log(k) * 0.3 * E), lim, path=False)
    assert bad.increment_residual[-1] > DECADE_RESIDUAL_MAX and bad.verdicts["decade_increment"] is False
    # an F-part that does not converge to W*
    F = lim.subspace.project(rng.standard_normal(lim.W_star.shape))
    drift = convergence_checks(_synthetic(lim, 10**6, lambda k: 0.05 * np.linalg.norm(lim.W_star) * F
                                          / np.linalg.norm(F)), lim, path=False)
    assert drift.rel_dist_F[-1] == pytest.approx(0.05, rel=1e-9)
    assert drift.verdicts["F_convergence"] is False and drift.rel_dist_F[-1] > F_DISTANCE_MAX


def test_decade_increments_numbers_by_hand():
    Wmm = np.array([[1.0, 0.0], [0.0, 0.0]])
    L = math.log(10.0)
    perp = np.stack([np.zeros((2, 2)), L * np.array([[1.0, 1.0], [0.0, 0.0]])])
    ratio, omc, res = decade_increments(perp, Wmm)
    assert ratio[0] == pytest.approx(math.sqrt(2.0))
    assert omc[0] == pytest.approx(1.0 - 1.0 / math.sqrt(2.0))
    assert res[0] == pytest.approx(1.0)
    with pytest.raises(InputError, match="W_mm"):
        decade_increments(perp, np.zeros((2, 2)))


def test_too_few_decades_is_undetermined_and_missing_snapshots_refused(small):
    inst, lim = small
    chk = convergence_checks(_synthetic(lim, 100, lambda k: 0.0), lim, path=False)
    assert chk.increment_residual.size == 2 and chk.verdicts["decade_increment"] is None
    tr = run(inst, O.gd(), 50, limits=lim)
    with pytest.raises(InputError, match="snapshots"):
        convergence_checks(tr, lim)


def test_gd_run_follows_the_path_and_adam_does_not(small):
    """Short real runs with the path check: GD's cosine with the norm-matched path is far closer to 1
    than Adam's, and every path point used is KKT-checked."""
    inst, lim = small
    n = 10**4
    gd = convergence_checks(run(inst, O.gd(), n, limits=lim, snapshots=decade_steps(n)), lim)
    assert np.all(gd.path_kkt[np.isfinite(gd.path_cosine)] <= 1e-6)
    assert gd.path_cosine[-1] >= PATH_COSINE_MIN
    assert np.all(np.diff(gd.increment_residual[-3:]) < 0)
    adam = convergence_checks(run(inst, O.adam(0.01), n, limits=lim, snapshots=decade_steps(n)), lim)
    assert 1.0 - adam.path_cosine[-1] > 10.0 * (1.0 - gd.path_cosine[-1])
    js = gd.to_json()
    assert js["verdicts"] == gd.verdicts and js["thresholds"]["path_cosine_min"] == PATH_COSINE_MIN
    assert any("decade" in line for line in gd.lines())


def test_own_norm_names():
    assert own_norm("sign") == "max" and own_norm("muon") == "spectral" and own_norm("gd") == "fro"


@pytest.mark.slow
def test_paper_gd_passes_at_a_million_steps_and_adam_fails():
    """Theorem 2 on ``paper``: GD at 1/(2L) for 10^6 steps; Adam (paper hyperparameters) is the control."""
    from ntpcert.instance.load import load_instance

    inst = load_instance("paper")
    lim = Limits.compute(inst)
    n = 10**6
    t0 = time.perf_counter()
    gd = convergence_checks(run(inst, O.gd(), n, limits=lim, snapshots=decade_steps(n)), lim)
    res = gd.increment_residual
    i3 = int(np.flatnonzero(gd.steps == 1000)[0])  # decades 10^3 -> 10^4 -> 10^5 -> 10^6
    assert np.all(np.diff(res[i3:]) < 0) and res[-1] <= DECADE_RESIDUAL_MAX
    assert gd.rel_dist_F[-1] <= F_DISTANCE_MAX
    assert gd.path_cosine[-1] >= PATH_COSINE_MIN
    assert all(gd.verdicts[k] is True for k in ("decade_increment", "F_convergence", "path_cosine"))
    adam = convergence_checks(run(inst, O.adam(0.01, beta1=0.9, beta2=0.99, eps=1e-8), n, limits=lim,
                                  snapshots=decade_steps(n)), lim)
    assert adam.verdicts["decade_increment"] is False and adam.verdicts["path_cosine"] is False
    print(f"\n{time.perf_counter() - t0:.0f} s; gd residuals {res[i3:]}, F {gd.rel_dist_F[-1]:.3g}, "
          f"path cos {gd.path_cosine[-1]:.5f}; adam residuals {adam.increment_residual[i3:]}, "
          f"F {adam.rel_dist_F[-1]:.3g}, path cos {adam.path_cosine[-1]:.5f}")
