"""The checker's limb products with a sparse left factor (CSR) are the exact integer products."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.certificate.checker import limbs


@pytest.mark.parametrize("fill", [0.01, 0.1, 0.15, 0.6])
def test_sparse_limb_product_is_the_exact_integer_product(fill):
    rng = np.random.default_rng(int(fill * 1000))
    inner = 1000
    c = limbs.limb_width(inner)
    X = rng.integers(-(1 << 62), 1 << 62, size=(30, inner), dtype=np.int64)
    X[rng.random(X.shape) >= fill] = 0
    X[0, :] = (1 << 62) - 1  # one dense row of extremes
    X[5] = 0
    Y = rng.integers(-(1 << 62), 1 << 62, size=(inner, 4), dtype=np.int64)
    Y[:, 0] = -((1 << 62) - 1)
    n = limbs.limbs_needed(62, c)
    Xl = limbs.int_limbs(X, c, n)
    sparse = [np.count_nonzero(x) <= limbs.SPARSE_LIMB_MAX_FILL * x.size for x in Xl]
    assert all(sparse) == (fill <= 0.1)  # both paths are exercised across the table
    Q = limbs.limb_product(Xl, limbs.int_limbs(Y, c, n))
    exact = X.astype(object) @ Y.astype(object)
    value = np.zeros(exact.shape, dtype=object)
    for u, q in enumerate(Q):
        assert q.dtype == np.int64
        value = value + q.astype(object) * (1 << (c * u))
    assert (value == exact).all()
