"""The structured NTP-SVM solver, tested through optimality conditions and independent formulations."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntpcert import InputError, NTPInstance, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.svm import solve_svm
from ntpcert.solve.structured.solver import NotSeparable
from ntpcert.solve.structured.block import _root_by_sorting, block_update  # private: the sorting root is the reference the fast root is checked against
from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.solve.structured.polish import ActiveSetSystem

from .conftest import TOL, random_instance
from .test_svm import assert_kkt, crammer_singer_no_bias


# ---------------------------------------------------------------------------- block update
def _block_objective(b, g, in_support, sizes, c):
    """The dual restricted to one block: sum_off n(-b) - sum_c n (g_c b_c + c b_c^2 / 2)."""
    off = ~in_support
    return float(np.sum(sizes[off] * -b[off]) - np.sum(sizes * (g * b + 0.5 * c * b * b)))


@given(seed=st.integers(0, 10_000), C=st.integers(2, 30), weighted=st.booleans())
def test_block_update_is_the_block_maximiser(seed, C, weighted):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, C + 1))
    in_support = np.zeros(C, bool)
    in_support[rng.choice(C, size=k, replace=False)] = True
    sizes = rng.integers(1, 5, size=C).astype(float) if weighted else np.ones(C)
    g = rng.normal(scale=2.0, size=C)
    c = float(rng.uniform(0.1, 5.0))
    support = np.flatnonzero(in_support)
    b, mu = block_update(g, support, ~in_support, sizes if weighted else None, float(sizes[support].sum()), c)
    # feasibility of the block: weighted sum zero, off-support entries non-positive
    assert abs(sizes @ b) <= TOL["linalg"] * max(1.0, np.abs(sizes * b).sum())
    assert np.all(b[~in_support] <= 0)
    # the logits after the update: equal to -mu on the support, at most -mu - 1 off it
    z = g + c * b
    assert np.allclose(z[in_support], -mu, atol=TOL["linalg"] * max(1.0, abs(mu)))
    assert np.all(z[~in_support] <= -mu - 1 + TOL["linalg"] * max(1.0, abs(mu)))
    # optimality: no feasible direction (pairwise transfers keep the sum) improves the objective
    best = _block_objective(b, g, in_support, sizes, c)
    for _ in range(50):
        i, j = rng.choice(C, size=2, replace=False)
        step = float(rng.uniform(-0.3, 0.3))
        trial = b.copy()
        trial[i] += step / sizes[i]
        trial[j] -= step / sizes[j]
        if np.all(trial[~in_support] <= 0):
            assert _block_objective(trial, g, in_support, sizes, c) <= best + 1e-12


@given(seed=st.integers(0, 10_000))
def test_newton_root_matches_sorted_root(seed):
    rng = np.random.default_rng(seed)
    C = 40
    in_support = np.zeros(C, bool)
    in_support[rng.choice(C, size=int(rng.integers(1, 6)), replace=False)] = True
    sizes = rng.integers(1, 4, size=C).astype(float)
    g = rng.normal(size=C)
    support = np.flatnonzero(in_support)
    w = float(sizes[support].sum())
    s = float(sizes[support] @ g[support])
    ref = _root_by_sorting(g + 1.0, s, ~in_support, sizes, w)
    for start in (None, ref + 3.0, ref - 3.0, float(rng.normal())):
        _, mu = block_update(g, support, ~in_support, sizes, w, 1.0, start)
        assert abs(mu - ref) <= TOL["linalg"] * max(1.0, abs(ref))


# ---------------------------------------------------------------------------- token classes
def test_classes_group_exactly_the_tokens_with_equal_support_columns(rng):
    inst = random_instance(rng, 6, 4, 30, kmin=1, kmax=2)
    cls = TokenClasses.build(inst)
    mask = inst.support_mask()
    for v in range(inst.V):
        for w in range(inst.V):
            same = np.array_equal(mask[:, v], mask[:, w])
            assert same == (cls.of_token[v] == cls.of_token[w])
    assert cls.sizes.sum() == inst.V
    assert np.array_equal(cls.mask[:, cls.of_token], mask)
    X = rng.normal(size=(cls.count, 3))
    assert np.allclose(cls.collapse_rows(cls.expand_rows(X)), X)


# ---------------------------------------------------------------------------- solves
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("path", ["kernel", "linear"])
def test_kkt_and_agreement_with_clarabel(seed, path):
    rng = np.random.default_rng(seed)
    inst = random_instance(rng, 12, 16, 7, kmin=1, kmax=4)
    sol = solve_svm(inst, solver="structured", path=path)
    assert sol.info["path"] == path
    assert sol.info["certificate"]["kind"] == "exact"
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    assert_kkt(inst, sol, TOL["kkt"])
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.objective - ref.objective) <= TOL["solver_agreement"] * max(1.0, ref.objective)
    assert np.linalg.norm(sol.W - ref.W) <= 1e-4 * max(1.0, np.linalg.norm(ref.W))


@pytest.mark.parametrize("seed", range(3))
def test_many_unseen_tokens_collapse_and_keep_the_optimum(seed):
    rng = np.random.default_rng(50 + seed)
    inst = random_instance(rng, 10, 14, 40, kmin=1, kmax=2)  # most tokens occur in no support
    sol = solve_svm(inst, solver="structured")
    assert sol.info["classes"] < inst.V
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.objective - ref.objective) <= TOL["solver_agreement"] * max(1.0, ref.objective)
    assert_kkt(inst, sol, TOL["kkt"])


def test_float_certificate_and_warm_start(rng):
    inst = random_instance(rng, 15, 20, 6, kmin=1, kmax=3)
    cold = solve_svm(inst, solver="structured", certificate="float", polish=False)
    assert cold.info["certificate"]["kind"] == "float"
    assert cold.relative_gap <= 1e-9
    warm = solve_svm(inst, solver="structured", certificate="float", warm_start=cold.dual)
    assert warm.info["epochs"] <= 2 < cold.info["epochs"]
    assert abs(warm.objective - cold.objective) <= TOL["solver_agreement"] * cold.objective


def test_one_hot_supports_give_the_multiclass_svm():
    rng = np.random.default_rng(7)
    m, d, V = 12, 14, 4
    y = np.concatenate([np.arange(V), rng.integers(0, V, size=m - V)])
    C = np.zeros((m, V), dtype=int)
    C[np.arange(m), y] = 1
    H = rng.standard_normal((m, d))
    sol = solve_svm(NTPInstance.from_counts(H, C), solver="structured")
    Wcs = crammer_singer_no_bias(H, y, V)
    assert np.linalg.norm(sol.W - Wcs) <= 1e-5 * max(1.0, np.linalg.norm(Wcs))


# ---------------------------------------------------------------------------- not separable
def _check_ray_exactly(inst, entries):
    """The Farkas conditions, in Fractions, written independently of the solver."""
    A = [[entries.get((v, j), Fraction(0)) for j in range(inst.m)] for v in range(inst.V)]
    Hq = [[Fraction(float(x)) for x in row] for row in inst.embeddings]
    mask = inst.support_mask()
    off_total = Fraction(0)
    for j in range(inst.m):
        assert sum(A[v][j] for v in range(inst.V)) == 0
        for v in range(inst.V):
            if not mask[j, v]:
                assert A[v][j] <= 0
                off_total -= A[v][j]
    assert off_total > 0
    for v in range(inst.V):
        for i in range(inst.d):
            assert sum(A[v][j] * Hq[j][i] for j in range(inst.m)) == 0


def test_same_embedding_different_supports_gives_an_exact_farkas_ray():
    h = np.array([1.0, -2.0, 0.5])
    inst = NTPInstance.from_counts(np.vstack([h, h, [0.0, 1.0, 1.0]]), [[3, 0, 0], [0, 2, 0], [0, 0, 1]])
    with pytest.raises(NotSeparable) as info:
        solve_svm(inst, solver="structured")
    ray = info.value.certificate
    assert ray.exact
    _check_ray_exactly(inst, ray.entries)


def test_zero_embedding_with_off_support_tokens_is_not_separable():
    inst = NTPInstance.from_counts([[0.0, 0.0], [1.0, 2.0]], [[1, 0, 0], [0, 1, 1]])
    with pytest.raises(NotSeparable) as info:
        solve_svm(inst, solver="structured")
    _check_ray_exactly(inst, info.value.certificate.entries)


@pytest.mark.parametrize("seed", range(3))
def test_random_d_below_m_non_separable_rays_verify(seed):
    rng = np.random.default_rng(seed)
    inst = random_instance(rng, 20, 3, 6, kmin=1, kmax=3)
    with pytest.raises(NotSeparable) as info:
        solve_svm(inst, solver="structured")
    ray = info.value.certificate
    assert ray.residual <= 1e-9 and ray.sign_violation == 0
    if ray.exact:
        _check_ray_exactly(inst, ray.entries)


# ---------------------------------------------------------------------------- active-set polish
def test_active_set_solve_on_the_optimal_active_set_returns_the_optimum(rng):
    inst = random_instance(rng, 10, 12, 6, kmin=1, kmax=3)
    sol = solve_svm(inst, solver="clarabel")
    cls = TokenClasses.build(inst)
    A = cls.collapse_rows(sol.dual).T  # (m, C)
    scale = np.abs(A).max()
    active = (A < -1e-7 * scale) & ~cls.mask
    res = ActiveSetSystem(cls, inst.embeddings).pdas(active, 5)
    assert res is not None and res.converged
    W = cls.expand_rows(res.A.T @ inst.embeddings)
    assert np.linalg.norm(W - sol.W) <= 1e-6 * max(1.0, np.linalg.norm(sol.W))


def test_pdas_recovers_from_a_wrong_guess(rng):
    inst = random_instance(rng, 10, 12, 6, kmin=1, kmax=3)
    sol = solve_svm(inst, solver="clarabel")
    cls = TokenClasses.build(inst)
    A = cls.collapse_rows(sol.dual).T
    active = (A < -1e-7 * np.abs(A).max()) & ~cls.mask
    wrong = active.copy()
    idx = np.argwhere(active)
    wrong[tuple(idx[0])] = False  # forget one active margin
    res = ActiveSetSystem(cls, inst.embeddings).pdas(wrong, 10)
    assert res is not None and res.converged and res.steps >= 2
    W = cls.expand_rows(res.A.T @ inst.embeddings)
    assert np.linalg.norm(W - sol.W) <= 1e-6 * max(1.0, np.linalg.norm(sol.W))


# ---------------------------------------------------------------------------- limits and bad options
def test_epoch_limit_raises_solver_error(rng):
    inst = random_instance(rng, 20, 25, 8, kmin=1, kmax=4)
    from ntpcert.errors import BudgetSpent

    with pytest.raises(BudgetSpent, match="budget of 1 epochs spent without a certificate") as err:
        solve_svm(inst, solver="structured", max_epochs=1, polish=False)
    assert isinstance(err.value, SolverError) and "time limit" not in str(err.value)


@pytest.mark.parametrize(
    "options, field",
    [
        ({"path": "sideways"}, "path"),
        ({"certificate": "maybe"}, "certificate"),
        ({"tol": -1.0}, "tol"),
        ({"tol": "small"}, "tol"),
        ({"tol": True}, "tol"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"time_limit": -3}, "time_limit"),
        ({"threads": 0}, "threads"),
        ({"warm_start": np.zeros((2, 2))}, "warm_start"),
    ],
)
def test_bad_options_are_input_errors(rng, options, field):
    inst = random_instance(rng, 4, 5, 3, kmin=1, kmax=2)
    with pytest.raises(InputError, match=field):
        solve_svm(KeslerSystem.build(inst), solver="structured", **options)


# ---------------------------------------------------------------------------- LIBLINEAR Crammer–Singer
def test_structured_matches_liblinear_crammer_singer_on_one_hot_supports():
    pytest.importorskip("sklearn")
    from ntpcert.experiments.liblinear_cs import crammer_singer

    rng = np.random.default_rng(11)
    m, d, V = 40, 30, 6
    y = np.concatenate([np.arange(V), rng.integers(0, V, size=m - V)])
    C = np.zeros((m, V), dtype=int)
    C[np.arange(m), y] = 1
    inst = NTPInstance.from_counts(rng.standard_normal((m, d)), C)
    cs = crammer_singer(inst)
    assert cs.hard_margin
    sol = solve_svm(inst, solver="structured")
    assert np.abs(cs.W - sol.W).max() <= TOL["solver_agreement"] * max(1.0, np.abs(sol.W).max())


@pytest.mark.parametrize("counts, what", [
    ([[1, 1, 0], [0, 1, 0], [0, 0, 1]], "exactly one"),
    ([[1, 0, 0], [0, 1, 0], [1, 0, 0]], "no context's label"),
])
def test_crammer_singer_rejects_instances_it_cannot_represent(counts, what):
    from ntpcert.experiments.liblinear_cs import crammer_singer

    inst = NTPInstance.from_counts(np.eye(3), counts)
    with pytest.raises(InputError, match=what):
        crammer_singer(inst)


# ---------------------------------------------------------------------------- long checks
@pytest.mark.slow
def test_larger_instance_agrees_with_clarabel_and_certifies():
    rng = np.random.default_rng(2024)
    inst = random_instance(rng, 150, 180, 60, kmin=1, kmax=4)
    sol = solve_svm(inst, solver="structured")
    assert sol.info["certificate"]["relative_gap"] <= 1e-9
    ref = solve_svm(inst, solver="clarabel")
    assert abs(sol.objective - ref.objective) <= TOL["solver_agreement"] * ref.objective
    assert_kkt(inst, sol, TOL["kkt"])


@pytest.mark.slow
def test_corpus_bigrams_are_not_separable_with_an_exact_ray():
    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from ntpcert.instance.io import instance_from_text

    inst = instance_from_text(pydoc_text(20_000).lower(), k=2)
    with pytest.raises(NotSeparable) as info:
        solve_svm(inst, solver="structured")
    ray = info.value.certificate
    assert ray.exact and ray.entries
    # the exact ray, checked here entry by entry
    colsum: dict = {}
    for (v, j), val in ray.entries.items():
        colsum[j] = colsum.get(j, Fraction(0)) + val
    assert all(s == 0 for s in colsum.values())
    mask = inst.support_mask()
    assert all(val <= 0 for (v, j), val in ray.entries.items() if not mask[j, v])
    assert sum(-val for (v, j), val in ray.entries.items() if not mask[j, v]) > 0
    H = inst.embeddings
    for v in {v for v, _ in ray.entries}:
        row = [sum(val * Fraction(float(H[j, i])) for (vv, j), val in ray.entries.items() if vv == v)
               for i in range(inst.d)]
        assert all(x == 0 for x in row)


@pytest.mark.parametrize("lemma1", [True, False])
def test_float_certify_skips_the_exact_bound_and_reports_the_same_svm(lemma1):
    """``certify()`` (float gap by default, as the float CLI) solves the same NTP-SVM without the exact
    gap bound; ``svm_certificate="exact"`` keeps it for the exact pipeline to reuse."""
    from ntpcert.pipeline.float_verdicts import certify

    rng = np.random.default_rng(11)
    inst = random_instance(rng, m=12, d=16, V=5, kmin=1, kmax=2)  # d >= m: separable either way
    exact = certify(inst, use_lemma1=lemma1, svm_certificate="exact")
    fl = certify(inst, use_lemma1=lemma1)
    assert exact.separable.holds is True and fl.separable.holds is True
    assert exact.svm.exact_bound is not None and fl.svm.exact_bound is None
    assert fl.svm.info["certificate"]["kind"] == "float" and exact.svm.info["certificate"]["kind"] == "exact"
    assert fl.svm.relative_gap <= 1e-6
    assert np.linalg.norm(fl.svm.W - exact.svm.W) <= 1e-5 * np.linalg.norm(exact.svm.W)
    with pytest.raises(InputError, match="svm_certificate"):
        certify(inst, svm_certificate="interval")


def test_float_certify_passes_the_float_certificate_through_the_structured_decision():
    """Past the small-LP size and without Lemma 1 (d < m), the structured solver decides separability
    and solves the NTP-SVM; the float option reaches that solve too."""
    from ntpcert.pipeline.float_verdicts import certify

    inst = random_instance(np.random.default_rng(3), m=200, d=150, V=40, kmin=1, kmax=2)
    rep = certify(inst, svm_certificate="float")
    assert rep.separable.holds is True and rep.separable.engine == "structured-point"
    assert rep.svm.info["certificate"]["kind"] == "float" and rep.svm.exact_bound is None
