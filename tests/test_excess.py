"""The excess-loss bracket on L* = inf_W CE(W): weak duality, the entropy bound, an independent L-BFGS."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.optimize as so

from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.instance.load import load_instance
from ntpcert.solve.excess import DUAL_TOL, excess_bracket, float_bracket

from .conftest import TOL, random_instance


def _lbfgs_ce(instance: NTPInstance, iters: int, memory: int = 100) -> float:
    """An independent minimisation of CE with scipy's L-BFGS-B (written here, not the package's).

    ``memory`` correction pairs: with scipy's default of 10 the run crawls along the directions that go
    to infinity on a partly separable instance (pydoc: 4.7e-6 above the bracket after 1,500
    iterations); with 100 it converges there in about 760."""
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
                    options={"maxiter": iters, "maxcor": memory, "ftol": 1e-15, "gtol": 1e-12,
                                                "maxfun": 4 * iters})
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
    # an independent L-BFGS lands inside the bracket: never below the lower end (weak duality), and
    # below the upper end once converged
    ce = _pydoc_lbfgs()
    assert b.lower - 1e-12 <= ce <= b.upper


@functools.lru_cache(maxsize=1)
def _pydoc_lbfgs() -> float:
    return _lbfgs_ce(load_instance("pydoc"), 2000)


# ---------------------------------------------------------------------------- exact mode
def _section(inst, tol=1e-7):
    from ntpcert.pipeline.excess_certificate import exact_excess

    return exact_excess(inst, float_bracket(inst, tol=tol))


def _check(inst, sec):
    import copy

    from ntpcert.certificate.checker.excess import check_excess

    checks: list[str] = []
    return check_excess(copy.deepcopy(sec), inst, checks), checks


def test_exact_bracket_on_a_nonseparable_instance_is_checked_and_positive():
    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    ee = _section(inst)
    assert ee.repair == "exact"
    assert 0 < ee.excess_lower <= ee.excess_upper
    slack = TOL["float_ce_rounding"] * ee.float_bracket.upper  # the float ends are CE evaluated in float64
    assert ee.lower <= ee.float_bracket.upper + slack and ee.upper >= ee.float_bracket.lower - slack
    why, checks = _check(inst, ee.section)
    assert why == "" and len(checks) == 3
    ce = _lbfgs_ce(inst, 3000)
    assert ee.lower <= ce  # weak duality: the certified lower end is below any decoder's loss


def test_exact_bracket_paper_contains_zero():
    inst = load_instance("paper")
    ee = _section(inst, tol=1e-8)
    assert ee.excess_lower <= 0.0 <= ee.excess_upper <= 1e-6
    assert _check(inst, ee.section)[0] == ""


@pytest.mark.parametrize("tamper, field", [
    ("q_infeasible", "excess.q"),
    ("q_row_sum", "excess.q"),
    ("q_negative", "excess.q"),
    ("lower_too_high", "excess.lower"),
    ("excess_lower_too_high", "excess.excess_lower"),
    ("upper_too_low", "excess.upper"),
    ("excess_upper_too_low", "excess.excess_upper"),
])
def test_forged_excess_sections_are_rejected(tamper, field):
    from fractions import Fraction

    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    sec = dict(_section(inst).section)
    q = [list(t) for t in sec["q"]]
    if tamper == "q_infeasible":  # move mass between two tokens of one context: rows still sum to 1
        j = q[0][0]
        row = [t for t in q if t[0] == j]
        a, b = row[0], row[1]
        eps = Fraction(1, 10**6)
        a[2] = str(Fraction(a[2]) - eps) if Fraction(a[2]) > eps else str(Fraction(a[2]) + eps)
        b[2] = str(Fraction(b[2]) + (eps if Fraction(a[2]) < Fraction(q[0][2]) + eps else -eps))
        s = sum(Fraction(t[2]) for t in q if t[0] == j)
        b[2] = str(Fraction(b[2]) + 1 - s)  # restore the row sum exactly
    elif tamper == "q_row_sum":
        q[0][2] = str(Fraction(q[0][2]) / 2)
    elif tamper == "q_negative":
        q[0][2] = str(-Fraction(q[0][2]))
    elif tamper == "lower_too_high":
        sec["lower"] = sec["lower"] + 1e-6
    elif tamper == "excess_lower_too_high":
        sec["excess_lower"] = sec["excess_lower"] + 1e-6
    elif tamper == "upper_too_low":
        sec["upper"] = sec["upper"] - 1e-6
    elif tamper == "excess_upper_too_low":
        sec["excess_upper"] = sec["excess_upper"] - 1e-6
    sec["q"] = q
    why, _ = _check(inst, sec)
    assert why.startswith(field), why


def test_forged_section_fails_the_whole_certificate():
    from ntpcert.certificate import jsonio
    from ntpcert.certificate.checker import verify_certificate
    from ntpcert.pipeline.exact_verdicts import exact_certify

    inst = random_instance(np.random.default_rng(7), m=30, d=4, V=5, kmin=1, kmax=3)
    rep = exact_certify(inst, svm=False, excess=True)
    assert rep.check.valid and "excess" in rep.certificate
    assert any(c.startswith("excess: q exactly") for c in rep.check.checks)
    cert = dict(rep.certificate)
    cert["excess"] = dict(cert["excess"], lower=cert["excess"]["lower"] + 1e-3)
    v = verify_certificate(jsonio.seal(cert))
    assert not v.valid and "excess.lower" in v.reason


@pytest.mark.slow
def test_pydoc_exact_bracket_is_certified_and_checked():
    inst = load_instance("pydoc")
    ee = _section(inst)
    assert ee.repair == "exact"
    assert ee.excess_lower > 0
    assert ee.relative_width <= 1e-6
    assert _check(inst, ee.section)[0] == ""
    ce = _pydoc_lbfgs()  # the independent L-BFGS lands inside the certified bracket too
    assert ee.lower <= ce <= ee.upper


def test_the_checker_evaluates_the_bracket_by_itself_and_agrees_with_the_producer():
    """The checker's own balls (ntpcert.certificate.checker.excess, which may not import
    ntpcert.exact.excess) contain the producer's quantities: their ends agree far below the floats'
    rounding, on counts and on exact fraction probabilities with uneven weights."""
    from fractions import Fraction

    import flint

    from ntpcert.certificate.checker import excess as ck
    from ntpcert.certificate.checker.exact import ExactInstance
    from ntpcert.exact import excess as xe

    counts = random_instance(np.random.default_rng(7), m=12, d=3, V=5, kmin=1, kmax=3)
    laws = [[f"{c}/{sum(row)}" for c in row] for row in counts.counts.tolist()]
    probs = NTPInstance.from_probs(counts.embeddings, laws, [f"{j + 1}/78" for j in range(12)])
    for inst in (counts, probs):
        sec = _section(inst).section
        why, checks = _check(inst, sec)
        assert why == "" and len(checks) == 3, why
        data, q = xe.ExactData.of(inst), {(j, v): Fraction(x) for j, v, x in sec["q"]}
        W = [[Fraction(x) for x in row] for row in sec["W"]]
        balls = xe.bracket_balls(data, q, *xe.rational_decoder(W), inst.m, inst.V)
        A, a, b = ck._weights_and_laws(inst)
        pi = [Fraction(x, A) for x in a]
        p = [{v: Fraction(c, x) for v, c in row.items()} for x, row in zip(a, b)]
        old = flint.ctx.prec
        flint.ctx.prec = ck.PREC
        try:
            mine = {"entropy_q": ck._entropy(pi, ck._rows_of(q, inst.m)), "entropy_p": ck._entropy(pi, p),
                    "ce": ck._cross_entropy(ExactInstance(inst), pi, p, W)}
        finally:
            flint.ctx.prec = old
        for key, ball in mine.items():
            lo, hi = ck._ends(ball)
            theirs = getattr(balls, key)
            tiny = Fraction(1, 2**100)
            assert abs(lo - xe.lower_end(theirs)) < tiny and abs(hi - xe.upper_end(theirs)) < tiny
            assert xe.lower_end(theirs) - Fraction(1, 2**120) <= lo <= hi <= xe.upper_end(theirs) + Fraction(1, 2**120)


def test_the_checker_refuses_a_bracket_of_probabilities_off_the_simplex():
    from ntpcert.certificate.checker.excess import check_excess

    inst = NTPInstance.from_probs(np.eye(2), [[0.1, 0.9], [0.5, 0.5]], [0.5, 0.5])  # 0.1 + 0.9 != 1 as dyadics
    sec = {"q": [], "W": [["0", "0"], ["0", "0"]], "lower": 0.0, "upper": 1.0, "excess_lower": 0.0, "excess_upper": 1.0}
    why = check_excess(sec, inst, [])
    assert why.startswith("excess: the exact probabilities of context 0 do not sum to 1"), why
