"""The NTP-SVM in closed form on one-hot context embeddings (:mod:`ntpcert.solve.structured.onehot`): the
same W^mm as a generic QP solver, an exact bound that both checkers accept, and the iterative solve where the
closed form's exact certificate does not apply."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.structured.onehot import onehot_svm
from ntpcert.solve.svm import solve_svm

from .standalone import standalone


def onehot(rng: np.random.Generator, m: int, V: int, *, kmax: int = 1, d: int | None = None,
           scales: np.ndarray | None = None) -> NTPInstance:
    """h_j = s_j e_{c_j} in distinct columns c_j of R^d (d >= m), supports of 1..kmax tokens."""
    d = m if d is None else d
    cols = rng.permutation(d)[:m]
    H = np.zeros((m, d))
    H[np.arange(m), cols] = 1.0 if scales is None else scales
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, kmax + 1)), replace=False)
        C[j, S] = rng.integers(1, 5, size=S.size)
    return NTPInstance.from_counts(H, C)


@pytest.mark.parametrize(("m", "V", "kmax", "d"), [(12, 5, 1, None), (10, 6, 3, 14), (8, 4, 4, None)])
def test_the_closed_form_is_the_qp_solution(m, V, kmax, d):
    rng = np.random.default_rng(m + V)
    inst = onehot(rng, m, V, kmax=kmax, d=d, scales=2.0 ** rng.integers(-3, 4, size=m))
    system = KeslerSystem.build(inst)
    sol = solve_svm(system)
    assert sol.info["path"] == "onehot-closed-form" and sol.info["epochs"] == 0
    ref = solve_svm(system, solver="clarabel")
    assert np.abs(sol.W - ref.W).max() <= 1e-6 * max(1.0, np.abs(ref.W).max())
    assert sol.min_margin == pytest.approx(1.0, abs=1e-12) and sol.primal_residual <= 1e-12
    # the dual is exact for t, the dyadic of T_BITS = 40 bits nearest 1/V: W - aH is of order 2^-40 |a| s
    assert sol.dual_residual <= 2.0 ** -36 * np.abs(sol.dual).max() * 8 and sol.relative_gap <= 1e-12
    bound = sol.exact_bound
    assert bound.primal_feasible and 0 <= bound.gap and bound.relative_gap <= 1e-20
    assert bound.norm_lower <= np.linalg.norm(ref.W) * (1 + 1e-7) and np.linalg.norm(ref.W) <= bound.norm_upper * (1 + 1e-7)
    # the residuals are the generic ones, read off the logits without H
    generic = type(sol).from_primal_dual(system, sol.W, sol.dual, solver="x", status="x", seconds=0.0)
    for key in ("objective", "dual_objective", "primal_residual", "dual_residual", "complementarity", "min_margin"):
        assert getattr(sol, key) == pytest.approx(getattr(generic, key), rel=1e-12, abs=1e-14), key


def test_both_checkers_accept_its_certificate_and_refuse_it_forged():
    inst = onehot(np.random.default_rng(3), 9, 4, kmax=2, scales=np.array([1, 2, 0.5, 1, 4, 1, 1, 0.25, 1.0]))
    rep = exact_certify(inst)
    assert rep.separable.holds is True
    assert rep.float_report.svm.info["path"] == "onehot-closed-form" and rep.svm is rep.float_report.svm.exact_bound
    svm = rep.certificate["svm"]
    assert svm is not None
    text = jsonio.dumps(rep.certificate, reseal=False)
    assert verify_text(text).valid
    ok, line = standalone(text)
    assert ok and "svm: exact gap" in line, line
    forged = jsonio.loads(text)  # the dual's entry of an off-support token made positive: no longer feasible
    a = forged["svm"]["a"]
    j = 0
    v = next(i for i in range(inst.V) if inst.probs[j, i] == 0)
    a[v][j] = "1"
    bad = jsonio.dumps(forged, reseal=True)
    assert not verify_text(bad).valid
    assert not standalone(bad)[0]


def test_scales_that_are_not_powers_of_two_get_the_iterative_exact_certificate():
    inst = onehot(np.random.default_rng(4), 7, 4, scales=np.array([1.0, 3.0, 0.7, 1.0, 2.0, 5.0, 1.0]))
    system = KeslerSystem.build(inst)
    assert onehot_svm(system, certificate="exact") is None
    exact = solve_svm(system)
    assert exact.info["path"] != "onehot-closed-form" and exact.exact_bound is not None
    closed = onehot_svm(system, certificate="float")
    assert closed is not None and closed.info["certificate"]["kind"] == "float"
    assert np.abs(closed.W - exact.W).max() <= 1e-6 * np.abs(exact.W).max()


@pytest.mark.parametrize("H", [
    np.array([[1.0, 0.0], [1.0, 0.0]]),  # the same column twice
    np.array([[1.0, 1.0], [0.0, 1.0]]),  # two non-zeros in a row
    np.array([[0.0, 0.0], [0.0, 1.0]]),  # a zero row
])
def test_embeddings_that_are_not_one_hot_take_the_iterative_path(H):
    inst = NTPInstance.from_counts(H, np.array([[1, 0, 0], [0, 1, 0]]))
    assert onehot_svm(KeslerSystem.build(inst)) is None


def test_the_compiled_pass_gives_the_numpy_numbers(monkeypatch):
    """At size the residuals are one compiled pass, below it numpy's: the same numbers. With H = I the
    columns are placed without a scatter: the same pair as with the columns permuted."""
    import ntpcert.solve.structured.onehot as oh

    inst = onehot(np.random.default_rng(9), 30, 7, kmax=3, d=41, scales=2.0 ** (np.arange(30) % 7 - 3))
    eye = NTPInstance.from_counts(np.eye(30), inst.counts)
    perm = np.random.default_rng(1).permutation(30)
    shuffled = NTPInstance.from_counts(np.eye(30)[:, perm], inst.counts)
    a, b = onehot_svm(KeslerSystem.build(eye)), onehot_svm(KeslerSystem.build(shuffled))
    assert np.array_equal(a.W[:, perm], b.W) and np.array_equal(a.dual, b.dual)
    assert np.array_equal(a.exact_bound.W_base[:, perm], b.exact_bound.W_base)
    system = KeslerSystem.build(inst)
    for certificate in ("exact", "float"):
        small = onehot_svm(system, certificate=certificate)
        monkeypatch.setattr(oh, "COMPILED_MIN_CELLS", 0)
        big = onehot_svm(system, certificate=certificate)
        monkeypatch.undo()
        assert small is not None and big is not None
        assert np.array_equal(small.W, big.W) and np.array_equal(small.dual, big.dual)
        if certificate == "exact":
            assert np.array_equal(small.exact_bound.W_base, big.exact_bound.W_base)
        for key in ("objective", "dual_objective", "primal_residual", "dual_residual", "complementarity", "min_margin"):
            assert getattr(small, key) == pytest.approx(getattr(big, key), rel=1e-12, abs=1e-15), key


@pytest.mark.parametrize("scale", [2.0 ** -479, 2.0 ** 479])
def test_the_exact_bound_at_the_bounds_of_the_format(scale):
    """The exact dual t (V 1_S - k)/s^2 and W_q = (V 1_S - k)/s stay exact floats at the embeddings' range
    (2^-480, 2^480) and the largest V the closed form's exact bound takes (2^(53 - T_BITS) - 1): both
    checkers accept the certificate."""
    from ntpcert.solve.structured.onehot import T_BITS

    V, m = 2 ** (53 - T_BITS) - 1, 4
    C = np.zeros((m, V), dtype=np.int64)
    C[np.arange(m), np.arange(m)] = 1
    C[0, 7] = 2
    rep = exact_certify(NTPInstance.from_counts(np.eye(m) * scale, C))
    assert rep.float_report.svm.info["path"] == "onehot-closed-form" and rep.svm.relative_gap < 1e-20
    text = jsonio.dumps(rep.certificate, reseal=False)
    assert verify_text(text).valid and standalone(text)[0]
