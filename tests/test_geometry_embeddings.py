"""The geometry read off L^mm: balanced embeddings and the statements as checks, on solutions of the cvxpy
path (which does not merge equal supports, so collapse is not built in) and of the structured solver."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert.geometry.cvx import solve_nuclear_cvxpy
from ntpcert.geometry.embeddings import Embeddings, all_checks, check_context_collapse
from ntpcert.geometry.pattern import SupportPattern
from ntpcert.geometry.structured import solve_nuclear_structured
from ntpcert.instance.load import load_instance

#: Every statement must hold on L^mm to this relative defect.
CHECK_TOL = 1e-6


def pattern_with_repeats(rng: np.random.Generator, V: int, r: int, m: int) -> np.ndarray:
    """A (V, m) support matrix built from r distinct supports, so that several contexts share one."""
    base = rng.random((V, r)) < 0.45
    base[rng.integers(V, size=r), np.arange(r)] = True
    base[0, ~(~base).any(axis=0)] = False
    cols = np.concatenate([np.arange(r), rng.integers(r, size=m - r)])
    S = base[:, rng.permutation(cols)]
    S[:, ~S.any(axis=0)] = True
    return S


@pytest.mark.parametrize("seed", range(3))
def test_checks_hold_on_cvxpy_solution(seed: int) -> None:
    rng = np.random.default_rng(seed)
    S = pattern_with_repeats(rng, 6, 4, 10)
    pattern = SupportPattern.from_mask(S)
    sol = solve_nuclear_cvxpy(pattern)
    assert sol.relative_gap <= CHECK_TOL
    for check in all_checks(sol.L, pattern):
        assert check.holds(CHECK_TOL), check


def test_checks_hold_on_dyck() -> None:
    pattern = SupportPattern.from_instance(load_instance("dyck"))
    sol = solve_nuclear_structured(pattern)
    assert sol.relative_gap <= 1e-8
    for check in all_checks(sol.L, pattern):
        assert check.holds(CHECK_TOL), check


def test_checks_detect_violations() -> None:
    S = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=bool)
    pattern = SupportPattern.from_mask(S)
    L = pattern.centered_support()
    assert check_context_collapse(L, pattern).defect == 0.0
    L2 = L.copy()
    L2[:, 1] *= 2.0  # same support as column 0, different column
    assert check_context_collapse(L2, pattern).defect > 0.1
    names = {c.name: c for c in all_checks(L + 1.0, pattern)}
    assert names["centred"].defect > 0.1 and names["feasible"].defect == 0.0


def test_embeddings_are_balanced_and_give_gram_roots() -> None:
    rng = np.random.default_rng(9)
    L = rng.standard_normal((5, 7))
    emb = Embeddings.from_logits(L)
    assert np.allclose(emb.W @ emb.H.T, L)
    w, U = np.linalg.eigh(L @ L.T)
    root = (U * np.sqrt(np.clip(w, 0, None))) @ U.T
    assert np.allclose(emb.word_gram(), root, atol=1e-9)
    assert np.allclose(np.diag(emb.word_cosines()), 1.0)
