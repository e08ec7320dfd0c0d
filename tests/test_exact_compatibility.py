"""Exact NTP-compatibility: known answers, prime exponents, null vectors and W* in closed form."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.exact.compatibility import (
    eq_rows,
    exact_null_space,
    factorise,
    prime_exponents,
    w_star_closed_form,
)
from ntpcert.pipeline.exact_witness import compatibility_exact
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace, least_squares_fit

from .conftest import TOL, random_instance


def _doubled(rng, probs_second):
    h = rng.standard_normal(4)
    return NTPInstance.from_probs(np.array([h, 2 * h]), [["1/3", "2/3"], probs_second])


def test_doubled_embedding_with_doubled_log_odds_is_compatible(rng):
    # log(2/1) for h and log(4/1) = 2 log 2 for 2h: W with (w_1 - w_0).h = log 2 solves both
    inst = _doubled(rng, ["1/5", "4/5"])
    verdict = compatibility_exact(inst)
    assert verdict.holds is True and verdict.engine == "exact-null-space"
    assert verdict.check(inst) == ""
    res = exact_null_space(inst)
    assert res.null_dim == 1 and res.rank == 1
    assert verdict.witness.rank == 1 and len(verdict.witness.basis) == 1
    assert res.violating is None


def test_changing_one_count_breaks_compatibility(rng):
    h = rng.standard_normal(4)
    ok = NTPInstance.from_counts(np.array([h, 2 * h]), [[1, 2], [1, 4]])
    bad = NTPInstance.from_counts(np.array([h, 2 * h]), [[1, 2], [1, 5]])
    assert compatibility_exact(ok).holds is True
    assert exact_null_space(ok).violating is None
    verdict = compatibility_exact(bad)
    assert verdict.holds is False and verdict.engine == "exact-null-space"
    assert verdict.check(bad) == ""
    res = exact_null_space(bad)
    y = res.violating
    assert y is not None and verdict.witness.y == {k: int(v) for k, v in y.items()}
    # y^T A_eq = 0: y_0 h + y_1 (2h) = 0, and y^T b = y_0 log 2 + y_1 log 5 != 0
    assert y[(0, 1)] + 2 * y[(1, 1)] == 0
    assert res.violating_exponents == {2: y[(0, 1)], 5: y[(1, 1)]}


def test_float_probabilities_are_taken_as_their_exact_dyadic_values(rng):
    h = rng.standard_normal(3)
    H = np.array([h, 2 * h])
    # log-odds log 9 and log 81 = 2 log 9: compatible as fractions ...
    strings = NTPInstance.from_probs(H, [["1/10", "9/10"], ["1/82", "81/82"]])
    res = exact_null_space(strings)
    assert compatibility_exact(strings).holds is True
    assert res.violating is None and res.probabilities_from_floats is False
    # ... but 0.9/0.1 is not 9 in binary floating point, so the float data are not
    floats = NTPInstance.from_probs(H, [[1 / 10, 9 / 10], [1 / 82, 81 / 82]])
    res = exact_null_space(floats)
    assert res.probabilities_from_floats is True
    assert res.violating is not None
    assert compatibility_exact(floats).holds is False


def test_prime_exponent_matrix_reproduces_the_log_odds(rng):
    inst = random_instance(rng, 6, 3, 5, 2, 4, max_count=60)
    primes, E = prime_exponents(inst)
    b = KeslerSystem.build(inst).log_odds()
    recon = np.array([[float(x) for x in row] for row in E]) @ np.log(np.array(primes, dtype=float))
    assert np.allclose(recon, b, rtol=0, atol=TOL["linalg"] * max(1.0, np.abs(b).max()))
    assert [(j, z) for j, z, _ in eq_rows(inst)] == list(zip(KeslerSystem.build(inst).eq_context.tolist(),
                                                              KeslerSystem.build(inst).eq_token.tolist()))


@pytest.mark.parametrize("n", [1, 2, 12, 97, 360, 2**20 * 3**5 * 101])
def test_factorise(n):
    f = factorise(n)
    prod = 1
    for p, e in f.items():
        assert e > 0 and all(p % q for q in range(2, int(p**0.5) + 1))
        prod *= p**e
    assert prod == n


def test_lemma1_instances_have_a_trivial_left_null_space(rng):
    inst = random_instance(rng, 8, 12, 6, 1, 5)
    res = exact_null_space(inst)
    assert compatibility_exact(inst).holds is True
    assert res.violating is None and res.null_dim == 0
    assert res.rank == res.n_eq


def test_null_basis_is_in_the_left_null_space_and_counts_match_the_rank(rng):
    inst = random_instance(rng, 9, 2, 5, 2, 4)  # d < m: dependencies
    res = exact_null_space(inst)
    sysm = KeslerSystem.build(inst)
    index = {(j, z): i for i, (j, z) in enumerate(zip(sysm.eq_context.tolist(), sysm.eq_token.tolist()))}
    A = sysm.eq_matrix().toarray()
    assert res.rank == np.linalg.matrix_rank(A)
    assert res.null_dim == A.shape[0] - res.rank
    for y in res.null_basis:
        vec = np.zeros(A.shape[0])
        for key, v in y.items():
            vec[index[key]] = float(v)
        assert np.abs(vec @ A).max() <= TOL["linalg"] * np.abs(vec).max() * np.abs(A).max() * A.shape[0]


def test_w_star_closed_form_matches_the_float_min_norm_solution(rng):
    inst = random_instance(rng, 4, 6, 4, 2, 3, max_count=12)
    res = exact_null_space(inst)
    assert res.violating is None
    assert compatibility_exact(inst).holds is True
    ws = w_star_closed_form(inst, res)
    Wf = least_squares_fit(Subspace.build(KeslerSystem.build(inst))).W_star
    assert np.abs(ws.to_float() - Wf).max() <= TOL["linalg"] * max(1.0, np.abs(Wf).max())
    # each R_p lies in F and carries the exponents of p exactly
    sysm = KeslerSystem.build(inst)
    A = sysm.eq_matrix().toarray()
    primes, E = prime_exponents(inst)
    for pi, p in enumerate(primes):
        R = ws.R(p)
        lhs = [sum((Fraction(*float(A[i, k]).as_integer_ratio()) * R.ravel()[k] for k in range(A.shape[1])
                    if A[i, k]), Fraction(0)) for i in range(A.shape[0])]
        assert lhs == [Fraction(int(e)) for e in E[:, pi]]


def test_w_star_expression_is_symbolic_in_the_logs_of_primes():
    h = np.array([0.5, -1.25, 2.0])
    inst = NTPInstance.from_probs(np.array([h, 2 * h]), [["1/3", "2/3"], ["1/5", "4/5"]])
    ws = w_star_closed_form(inst)
    expr = ws.expression()
    import sympy

    assert expr.free_symbols == set()
    assert all(sympy.simplify(x / sympy.log(2)).is_rational for x in expr if x != 0)
    assert abs(float(ws.norm(40)) - float(np.linalg.norm(ws.to_float()))) <= TOL["linalg"]


def test_w_star_refused_when_incompatible(rng):
    h = rng.standard_normal(3)
    inst = NTPInstance.from_counts(np.array([h, 2 * h]), [[1, 2], [1, 5]])
    with pytest.raises(ValueError, match="not NTP-compatible"):
        w_star_closed_form(inst)
