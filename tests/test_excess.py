"""The excess-loss bracket on L* = inf_W CE(W): weak duality, the entropy bound, an independent L-BFGS."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.instance.load import load_instance
from ntpcert.solve.excess import DUAL_TOL, excess_bracket, float_bracket

from .conftest import random_instance


def _lbfgs_ce(instance: NTPInstance, iters: int) -> float:
    """An independent minimisation of CE with scipy's L-BFGS-B (written here, not the package's)."""
    H, P, pi, V, d = instance.embeddings, instance.probs, instance.weights, instance.V, instance.d

    def fg(w):
        Z = H @ w.reshape(V, d).T
        zm = Z.max(axis=1, keepdims=True)
        E = np.exp(Z - zm)
        s = E.sum(axis=1, keepdims=True)
        f = pi @ (zm[:, 0] + np.log(s[:, 0]) - (P * Z).sum(axis=1))
        g = (((E / s) - P) * pi[:, None]).T @ H
        return f, g.ravel()

    r = so.minimize(fg, np.zeros(V * d), jac=True, method="L-BFGS-B",
                    options={"maxiter": iters, "ftol": 1e-15, "gtol": 1e-12})
    return float(r.fun)


def test_paper_bracket_contains_zero():
    inst = load_instance("paper")
    b = excess_bracket(inst)
    assert b.excess_lower <= 0.0 <= b.excess_upper
    assert b.excess_upper <= 1e-6
    assert b.lower <= b.upper
    assert abs(b.per_context_excess.sum() - b.excess_upper) <= 1e-12


def test_nonseparable_bracket_is_consistent_with_independent_lbfgs():
    # m > d with small supports: neither separable nor compatible in general, so L* > H.
    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    b = excess_bracket(inst, tol=1e-7)
    assert b.excess_lower > 0
    assert b.lower <= b.upper
    assert b.dual_residual <= DUAL_TOL
    ce = _lbfgs_ce(inst, 3000)
    assert ce >= b.lower - 1e-12  # weak duality: no decoder beats the certified lower end
    assert ce - b.upper <= 1e-6  # and L-BFGS gets close to the same infimum
    # the repaired dual point is in the simplex and meets the constraints
    q = b.q
    assert q.min() >= 0 and np.allclose(q.sum(axis=1), 1.0, atol=1e-12)
    G = ((q - inst.probs) * inst.weights[:, None]).T @ inst.embeddings
    assert np.abs(G).max() <= DUAL_TOL
    assert np.all(b.per_context_excess >= 0)


def test_lower_end_is_a_true_lower_bound_for_random_decoders():
    inst = random_instance(np.random.default_rng(3), m=20, d=3, V=4, kmin=1, kmax=3)
    b = excess_bracket(inst, tol=1e-7)
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert inst.loss(rng.standard_normal((inst.V, inst.d)) * 3) >= b.lower - 1e-12


@pytest.mark.parametrize("tol", [0.0, 1.0, "1e-6", -1e-3])
def test_bad_tolerance_is_refused(tol):
    inst = load_instance("paper")
    with pytest.raises(InputError, match="tol"):
        float_bracket(inst, tol=tol)


def test_exact_mode_not_in_float_layer():
    with pytest.raises(InputError, match="exact"):
        excess_bracket(load_instance("paper"), exact=True)


@pytest.mark.slow
def test_pydoc_bracket_width_and_independent_lbfgs():
    inst = load_instance("pydoc")
    b = excess_bracket(inst, tol=1e-7)
    assert b.excess_lower > 0
    assert b.relative_width <= 1e-6
    ce = _lbfgs_ce(inst, 400)
    assert ce >= b.lower - 1e-12
