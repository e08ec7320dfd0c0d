"""Joint training of W and H: the logits turn towards L^mm, the loss towards the entropy, and bad options fail
with one line."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.errors import InputError
from ntpcert.geometry.analysis import analyse
from ntpcert.instance.load import load_instance
from ntpcert.geometry.training import JOINT_METRICS, fit_rate, train_joint


@pytest.fixture(scope="module")
def dyck():
    inst = load_instance("dyck")
    return inst, analyse(inst).solution.L


@pytest.mark.parametrize("optimizer", ["gd", "ngd", "adam"])
def test_joint_training_turns_towards_L_mm(dyck, optimizer: str) -> None:
    inst, L_mm = dyck
    tr = train_joint(inst, L_mm, optimizer=optimizer, steps=2000)
    assert set(tr.metrics) == set(JOINT_METRICS)
    cos = tr.metrics["cos_mm"]
    assert cos[-1] > 0.85 and cos[-1] > cos[len(cos) // 2]
    assert tr.metrics["excess_loss"][-1] < 0.05 * tr.metrics["excess_loss"][0]
    assert fit_rate(tr) < 0  # 1 - cos falls


def test_vanishing_weight_decay_runs(dyck) -> None:
    inst, L_mm = dyck
    tr = train_joint(inst, L_mm, optimizer="gd", steps=500, wd0=1e-2)
    assert np.all(np.isfinite(tr.metrics["cos_mm"]))


@pytest.mark.parametrize("kw,field", [({"optimizer": "sgd"}, "optimizer"), ({"lr": -1.0}, "lr"), ({"d": 0}, "d")])
def test_bad_options(dyck, kw, field) -> None:
    inst, L_mm = dyck
    with pytest.raises(InputError, match=field):
        train_joint(inst, L_mm, steps=1, **kw)
