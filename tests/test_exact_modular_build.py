"""``nmod_matrix`` (through an fmpz_mat) builds the same matrix mod p as ``nmod_mat`` of a flat list."""

from __future__ import annotations

import flint
import numpy as np
import pytest

from ntpcert.exact.modular import PRIMES, nmod_matrix, rank_mod, residues


@pytest.mark.parametrize("p", [2, 65521, 2147483647, *PRIMES[:2]])
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (30, 40), (0, 3), (3, 0)])
def test_nmod_matrix_is_the_flat_list_matrix(p, shape):
    rng = np.random.default_rng(p % 1000 + shape[0])
    R = rng.integers(0, min(p, 1 << 62), size=shape, dtype=np.int64)
    M = nmod_matrix(R, p)
    ref = flint.nmod_mat(shape[0], shape[1], R.ravel().tolist(), p)
    assert (M.nrows(), M.ncols()) == shape
    assert M == ref
    assert rank_mod(R, p) == (int(ref.rank()) if R.size else 0)


def test_rank_mod_of_a_rank_deficient_float_matrix():
    rng = np.random.default_rng(3)
    A = np.ldexp(np.round(np.ldexp(rng.standard_normal((6, 9)), 20)), -20)  # 20-bit dyadics
    A[5] = A[0] - 2 * A[1]  # exact in float64
    p = PRIMES[0]
    assert rank_mod(residues(A, p), p) == 5
