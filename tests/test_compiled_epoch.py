"""The compiled linear-path epoch (ntpcert.solve.structured.compiled): the same iterates as the numpy epoch,
shrinking that changes no result, and the structured solver certifying through it where d < m."""

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.instance.datasets.teacher import teacher
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.structured import bcd, compiled
from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.solve.structured.solver import solve as structured
from ntpcert.solve.svm import solve_svm

from .test_svm import assert_kkt


def soft_instance(rng: np.random.Generator, m: int, d: int, V: int) -> NTPInstance:
    """Random supports of 1-3 tokens with counts, and several interchangeable tokens (class sizes > 1)."""
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V - 2, size=int(rng.integers(1, 4)), replace=False)
        counts[j, S] = rng.integers(1, 5, size=S.size)
    counts[:, V - 1] = counts[:, V - 2] = 0  # two tokens in no support: one class of size 2
    return NTPInstance.from_counts(rng.standard_normal((m, d)), counts)


def run_epochs(inst, epochs, compiled_cells, keep_every=None, seed=0):
    cls = TokenClasses.build(inst)
    m, C = cls.mask.shape
    A = np.zeros((m, C))
    state = bcd.make_state(inst.embeddings, A, "linear")
    mu = np.full(m, np.nan)
    keep = np.ones((m, C), dtype=bool) if keep_every else None
    rng = np.random.default_rng(seed)
    old = bcd.COMPILED_MIN_CELLS
    bcd.COMPILED_MIN_CELLS = compiled_cells
    try:
        for ep in range(epochs):
            bcd.epoch(state, A, cls, rng.permutation(m), ~cls.mask, mu, 64, keep=keep,
                      full=keep_every is None or ep % keep_every == 0)
    finally:
        bcd.COMPILED_MIN_CELLS = old
    return A, state


@pytest.mark.parametrize("make", [lambda r: teacher(m=90, d=7, V=6, rng=r), lambda r: soft_instance(r, 80, 6, 9)])
def test_the_compiled_epoch_gives_the_numpy_epochs_iterates(make, rng):
    inst = make(rng)
    A_np, _ = run_epochs(inst, 6, 10**18)
    A_c, st = run_epochs(inst, 6, 0)
    assert np.abs(A_c - A_np).max() <= 1e-12 * max(1.0, np.abs(A_np).max())
    # its class rows are A^T H, kept in place
    assert np.abs(st.Wc - A_c.T @ inst.embeddings).max() <= 1e-12 * max(1.0, np.abs(st.Wc).max())


def test_a_shrunk_pass_leaves_the_shrunk_multipliers_at_zero(rng):
    inst = teacher(m=120, d=6, V=8, rng=rng)
    A, _ = run_epochs(inst, 1, 0)  # one full pass
    cls = TokenClasses.build(inst)
    m, C = cls.mask.shape
    state = bcd.make_state(inst.embeddings, A, "linear")
    keep = np.ones((m, C), dtype=bool)
    mu = np.full(m, np.nan)
    compiled.linear_epoch(state, A, cls, np.arange(m), ~cls.mask, mu, keep, True)  # full: rewrites keep
    assert keep[cls.mask].all() and not keep.all()  # supports kept, some slack margins shrunk
    shrunk = ~keep
    assert (A[shrunk] == 0).all()
    compiled.linear_epoch(state, A, cls, np.random.default_rng(1).permutation(m), ~cls.mask, mu, keep, False)
    assert (A[shrunk] == 0).all()
    assert np.abs(state.Wc - A.T @ inst.embeddings).max() <= 1e-12 * max(1.0, np.abs(state.Wc).max())


@pytest.mark.parametrize("seed", [0, 1])
def test_the_structured_solver_certifies_on_the_compiled_path_with_and_without_shrinking(seed):
    inst = teacher(m=250, d=20, V=20, seed=seed)
    system = KeslerSystem.build(inst)
    assert inst.m * TokenClasses.build(inst).count >= compiled.MIN_CELLS and inst.d < inst.m
    ref = solve_svm(inst, solver="clarabel")
    for shrink in (True, False):
        sol = structured(system, separable=True, shrink=shrink, max_epochs=20_000)
        assert sol.info["certificate"]["relative_gap"] <= 1e-9
        assert abs(sol.norm - ref.norm) <= 1e-6 * ref.norm
        assert_kkt(inst, sol, 1e-6)
