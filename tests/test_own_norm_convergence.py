"""Normalised sign and spectral descent converge in direction to their own-norm max-margin solutions on
one-hot separable data (Fan, Schmidt, Thrampoulidis, arXiv 2502.04664), now that the gradient direction is
exact at any margin. Slow: 10^6 steps each (benchmarks/bench_own_norm.py measures the same, with Muon)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.dynamics.optimizers import sign, spectral
from ntpcert.dynamics.trajectory import Limits, run
from tests.test_ce import teacher_instance

DECADES = [10**k for k in range(1, 7)]


@pytest.mark.slow
@pytest.mark.parametrize("make, norm", [(lambda: sign(0.1, schedule="inv-sqrt"), "max"),
                                        (lambda: spectral(0.1, schedule="inv-sqrt"), "spectral")])
def test_own_norm_margin_ratio_rises_over_decades_to_099(make, norm):
    inst = teacher_instance(0)
    lim = Limits.compute(inst, norms=(norm,))
    traj = run(inst, make(), DECADES[-1], limits=lim, grid=DECADES)
    ratios = np.array([traj[f"margin_ratio_{norm}"][list(traj.steps).index(t)] for t in DECADES])
    assert np.all(np.diff(ratios) > 0), ratios
    assert ratios[-1] >= 0.99, ratios
    assert ratios[-1] <= 1.0 + 1e-6  # at most 1 up to the own-norm SVM's tolerance
    assert traj.untrusted_from is None
