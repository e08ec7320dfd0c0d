"""Properties of the paper's statements on random sparsity patterns (hypothesis): on the cvxpy solution,
which does not merge equal supports, every optimum is collapsed, centred and feasible, and its certified gap is
small; the centred support matrix is feasible with unit margins and never beats L^mm."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ntpcert.geometry.cvx import solve_nuclear_cvxpy
from ntpcert.geometry.embeddings import all_checks
from ntpcert.geometry.pattern import SupportPattern
from ntpcert.geometry.certificate import nuclear_norm

#: Relative defect allowed on an interior-point solution (its own certified gap is checked too).
PROP_TOL = 1e-6


@st.composite
def support_patterns(draw, *, max_V: int = 6, max_r: int = 4, max_m: int = 8) -> np.ndarray:
    """A (V, m) support matrix from at most ``max_r`` distinct non-empty supports, not all full."""
    V = draw(st.integers(2, max_V))
    r = draw(st.integers(1, max_r))
    base = draw(arrays(bool, (V, r)))
    base[0, ~base.any(axis=0)] = True
    if base.all():
        base[-1, 0] = False
        base[0, 0] = True
    m = draw(st.integers(r, max_m))
    cols = list(range(r)) + draw(st.lists(st.integers(0, r - 1), min_size=m - r, max_size=m - r))
    perm = draw(st.permutations(cols))
    return base[:, perm]


@given(support_patterns())
def test_statements_hold_on_every_optimum(S: np.ndarray) -> None:
    pattern = SupportPattern.from_mask(S)
    sol = solve_nuclear_cvxpy(pattern)
    assert sol.relative_gap <= PROP_TOL
    for check in all_checks(sol.L, pattern):
        assert check.holds(PROP_TOL), check


@given(support_patterns())
def test_centred_support_is_feasible_and_not_better(S: np.ndarray) -> None:
    pattern = SupportPattern.from_mask(S)
    St = pattern.centered_support()
    assert pattern.equality_violation(St) == 0.0
    assert abs(pattern.min_margin(St) - 1.0) <= 1e-12
    sol = solve_nuclear_cvxpy(pattern)
    assert nuclear_norm(St) >= sol.dual_objective * (1 - PROP_TOL)
