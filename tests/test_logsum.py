"""Signs of sums of prime logarithms with exponents of any size (ntpcert.exact.logsum)."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from ntpcert.exact.logsum import log_combination_sign, log_combination_value

from .conftest import TOL

PRIMES = (2, 3, 5, 7, 11, 13)


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(PRIMES), st.integers(-40, 40), max_size=4))
def test_sign_agrees_with_the_exact_products(exps):
    num = math.prod(p**e for p, e in exps.items() if e > 0)
    den = math.prod(p**-e for p, e in exps.items() if e < 0)
    assert log_combination_sign(exps) == (num > den) - (num < den)


def test_exponents_beyond_the_float_range():
    huge = 10**400  # e * log(p) would overflow a float (OverflowError: int too large to convert to float)
    assert log_combination_sign({2: huge, 3: -huge}) == -1  # log 2 < log 3
    assert log_combination_sign({2: -huge, 3: huge}) == 1
    assert log_combination_sign({3: huge * 2, 2: -huge * 3}) == 1  # 9 > 8
    assert log_combination_value({2: huge}) == math.inf
    assert abs(log_combination_value({2: 3, 3: -2}) - math.log(8 / 9)) <= TOL["linalg"]
    assert log_combination_sign({5: 0}) == 0 and log_combination_value({}) == 0.0
