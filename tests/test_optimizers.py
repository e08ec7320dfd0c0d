"""Optimisers: pure steps against textbook formulas, the fused kernels against the pure steps,
descent on the CE, and input validation."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.dynamics.optimizers import (
    CEKernel,
    Schedule,
    adam,
    gd,
    make_optimizer,
    muon,
    newton_schulz,
    ngd,
    polar_factor,
    sign,
    spectral,
)

from .conftest import TOL, random_instance

ALL = {
    "gd": lambda: gd(0.3),
    "ngd": lambda: ngd(0.05),
    "adam": lambda: adam(0.05),
    "adam_eps0": lambda: adam(0.05, eps=0.0),
    "sign": lambda: sign(0.02),
    "signum": lambda: sign(0.02, momentum=0.9),
    "spectral": lambda: spectral(0.05),
    "spectral_momentum": lambda: spectral(0.05, momentum=0.5),
    "muon": lambda: muon(0.05),
    "gd_inv_sqrt": lambda: gd(0.3, schedule="inv-sqrt"),
    "sign_inv_sqrt": lambda: sign(0.05, schedule="inv-sqrt"),
}


@pytest.fixture
def inst(rng) -> NTPInstance:
    return random_instance(rng, m=6, d=9, V=5, kmin=2, kmax=4)


def _close(a, b, scale=1.0):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) <= TOL["linalg"] * max(1.0, scale)


# ---------------------------------------------------------------------------- textbook references
def _reference_trajectory(name: str, inst: NTPInstance, steps: int) -> np.ndarray:
    """The updates written the obvious way, allocating freely."""
    W = np.zeros((inst.V, inst.d))
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    for t in range(1, steps + 1):
        g = inst.gradient(W)
        if name == "gd":
            W = W - 0.3 * g
        elif name == "gd_inv_sqrt":
            W = W - 0.3 / np.sqrt(t) * g
        elif name == "ngd":
            W = W - 0.05 * g / np.linalg.norm(g)
        elif name in ("adam", "adam_eps0"):
            eps = 1e-8 if name == "adam" else 0.0
            m = 0.9 * m + 0.1 * g
            v = 0.99 * v + 0.01 * g * g
            mh, vh = m / (1 - 0.9**t), v / (1 - 0.99**t)
            W = W - 0.05 * mh / (np.sqrt(vh) + eps)
        elif name == "sign":
            W = W - 0.02 * np.sign(g)
        elif name == "sign_inv_sqrt":
            W = W - 0.05 / np.sqrt(t) * np.sign(g)
        elif name == "signum":
            m = 0.9 * m + 0.1 * g
            W = W - 0.02 * np.sign(m)
        elif name in ("spectral", "spectral_momentum"):
            beta = 0.0 if name == "spectral" else 0.5
            m = beta * m + (1 - beta) * g
            U, s, Vt = np.linalg.svd(m, full_matrices=False)
            k = int(np.sum(s > 1e-10 * s[0]))
            W = W - 0.05 * U[:, :k] @ Vt[:k]
        elif name == "muon":
            m = 0.95 * m + 0.05 * g
            u = 0.05 * g + 0.95 * m
            W = W - 0.05 * newton_schulz(u)
        else:  # pragma: no cover
            raise AssertionError(name)
    return W


@pytest.mark.parametrize("name", sorted(ALL))
def test_pure_step_matches_textbook_and_does_not_mutate(name, inst):
    opt = ALL[name]()
    W = np.zeros((inst.V, inst.d))
    state = opt.init(W)
    for _ in range(25):
        g = inst.gradient(W)
        W_before, g_before = W.copy(), g.copy()
        bufs_before = [b.copy() for b in state.buffers]
        W_next, state_next = opt.step(W, g, state)
        assert np.array_equal(W, W_before) and np.array_equal(g, g_before)
        assert all(np.array_equal(a, b) for a, b in zip(state.buffers, bufs_before))
        assert state_next.count == state.count + 1
        W, state = W_next, state_next
    ref = _reference_trajectory(name, inst, 25)
    assert _close(W, ref, float(np.abs(ref).max()))


@pytest.mark.parametrize("name", sorted(ALL))
def test_fused_run_equals_pure_steps(name, inst):
    from ntpcert.dynamics.trajectory import Limits, run

    opt = ALL[name]()
    W = np.zeros((inst.V, inst.d))
    state = opt.init(W)
    for _ in range(40):
        W, state = opt.step(W, inst.gradient(W), state)
    traj = run(inst, opt, 40, limits=Limits.compute(inst))
    assert _close(traj.W_final, W, float(np.abs(W).max()))


def test_ce_kernel_matches_gradient(rng):
    inst = random_instance(rng, m=7, d=4, V=6, kmin=1, kmax=5)
    k = CEKernel(inst)
    out = np.empty((inst.V, inst.d))
    for scale in (0.0, 1.0, 50.0, 500.0):  # large logits exercise the max-shift
        W = scale * rng.standard_normal((inst.V, inst.d))
        g = inst.gradient(W)
        assert k.gradient_into(W, out) is out
        assert _close(out, g)


# ---------------------------------------------------------------------------- descent
@pytest.mark.parametrize("name", sorted(ALL))
def test_first_update_is_a_descent_direction_and_ce_decreases(name, inst):
    opt = ALL[name]()
    W0 = np.zeros((inst.V, inst.d))
    g = inst.gradient(W0)
    W1, _ = opt.step(W0, g, opt.init(W0))
    assert float(np.vdot(g, W1 - W0)) < 0.0
    W, state = W0, opt.init(W0)
    for _ in range(300):
        W, state = opt.step(W, inst.gradient(W), state)
    assert inst.loss(W) < inst.loss(W0) - 0.05 * inst.excess_loss(W0)


def test_gd_with_default_step_is_monotone(rng):
    """The descent lemma with η = 1/(2L) ≤ 1/L: CE never increases (checks the smoothness bound)."""
    inst = random_instance(rng, m=8, d=5, V=4, kmin=1, kmax=3)
    opt = gd().resolve(inst)
    assert opt.schedule.lr == pytest.approx(1.0 / (2.0 * inst.smoothness()))
    W, state = np.zeros((inst.V, inst.d)), opt.init(np.zeros((inst.V, inst.d)))
    losses = [inst.loss(W)]
    for _ in range(400):
        W, state = opt.step(W, inst.gradient(W), state)
        losses.append(inst.loss(W))
    assert np.all(np.diff(losses) <= TOL["linalg"] * losses[0])
    assert losses[-1] < losses[0]


def test_gd_without_step_needs_resolve(inst):
    with pytest.raises(InputError, match="lr"):
        gd().step(np.zeros((inst.V, inst.d)), np.ones((inst.V, inst.d)), gd().init(np.zeros((inst.V, inst.d))))


def test_adam_eps_zero_with_exactly_zero_gradient_entries():
    """A coordinate no embedding touches has gradient 0 forever; ε = 0 must not make it NaN."""
    H = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    H = np.concatenate([H, np.zeros((3, 1))], axis=1)  # third coordinate never used
    inst = NTPInstance.from_counts(H, [[3, 1, 0], [0, 2, 2], [1, 0, 5]])
    opt = adam(0.1, eps=0.0)
    W, state = np.zeros((3, 3)), opt.init(np.zeros((3, 3)))
    for _ in range(50):
        W, state = opt.step(W, inst.gradient(W), state)
    assert np.all(np.isfinite(W))
    assert np.all(W[:, 2] == 0.0)
    assert inst.loss(W) < inst.loss(np.zeros((3, 3)))


# ---------------------------------------------------------------------------- steepest directions
def test_sign_and_polar_are_steepest_directions(rng):
    G = rng.standard_normal((5, 7))
    # <G, sign G> = ||G||_1, the dual of the max-norm, over the unit max-norm ball
    assert float(np.vdot(G, np.sign(G))) == pytest.approx(np.abs(G).sum())
    P = polar_factor(G)
    assert np.allclose(np.linalg.svd(P, compute_uv=False), 1.0)
    assert float(np.vdot(G, P)) == pytest.approx(np.linalg.norm(G, "nuc"))
    # a rank-deficient gradient: the direction keeps its rank and is 0 on the null space
    R = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 7))
    PR = polar_factor(R)
    s = np.linalg.svd(PR, compute_uv=False)
    assert np.sum(s > 0.5) == 2 and np.all(s[2:] < 1e-8)
    assert float(np.vdot(R, PR)) == pytest.approx(np.linalg.norm(R, "nuc"))


def test_newton_schulz_keeps_singular_vectors_and_squeezes_values(rng):
    M = rng.standard_normal((6, 9)) @ np.diag(np.geomspace(1, 20, 9))
    X = newton_schulz(M)
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    sx = np.linalg.svd(X, compute_uv=False)
    assert np.all(sx > 0.3) and np.all(sx < 1.3)
    # X = U f(Σ) Vᵀ for an odd polynomial f: U^T X V is diagonal
    D = U.T @ X @ Vt.T
    assert np.max(np.abs(D - np.diag(np.diag(D)))) < 1e-8
    assert np.allclose(newton_schulz(M.T), X.T)


# ---------------------------------------------------------------------------- schedules and validation
def test_schedules():
    assert Schedule("constant", 0.5)(100) == 0.5
    assert Schedule("inv-sqrt", 0.5)(4) == pytest.approx(0.25)
    assert ngd(0.2, schedule="inv-sqrt").hyperparams() == {"optimizer": "ngd", "schedule": "inv-sqrt", "lr": 0.2}


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: gd(0.0), "lr"),
        (lambda: ngd(-1.0), "lr"),
        (lambda: ngd(float("nan")), "lr"),
        (lambda: ngd(0.1, schedule="cosine"), "schedule"),
        (lambda: adam(0.1, beta1=1.0), "beta1"),
        (lambda: adam(0.1, beta2=-0.1), "beta2"),
        (lambda: adam(0.1, eps=-1e-8), "eps"),
        (lambda: sign(0.1, momentum=1.0), "momentum"),
        (lambda: spectral(0.1, momentum=-0.5), "momentum"),
        (lambda: muon(0.1, ns_steps=0), "ns_steps"),
        (lambda: make_optimizer("lbfgs"), "optimizer"),
        (lambda: make_optimizer("gd", momentum=0.9), "momentum"),
    ],
)
def test_invalid_arguments(call, field):
    with pytest.raises(InputError, match=field):
        call()


def test_make_optimizer_defaults():
    assert make_optimizer("signum").momentum == 0.9
    assert make_optimizer("sign").momentum == 0.0
    assert make_optimizer("adam", lr=None, eps=0.0).eps == 0.0
    assert make_optimizer("muon").steepest_norm == "spectral"
    assert make_optimizer("adam").steepest_norm == "max"
    assert make_optimizer("gd").schedule is None
