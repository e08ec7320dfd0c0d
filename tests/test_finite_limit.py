"""W_fin, L* and W^mm_P of data that are not separable, against solves written here: scipy L-BFGS on this
file's own CE_N in this file's own basis of F_N, and cvxpy/Clarabel on the NTP-SVM of the separable pairs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.optimize import minimize

from ntpcert import NTPInstance
from ntpcert.errors import InputError
from ntpcert.pipeline.nonseparable import _split_pairs, nonseparable_limits
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace, least_squares_fit
from ntpcert.solve.finite_limit import GRAD_TOL, check_nonseparable, finite_limit, reduced_excess, reduced_loss

#: W_fin, L* and W^mm_P agree with the independent solves to this (relative).
AGREE = 1e-6


# ---------------------------------------------------------------------------- this file's own instances
def gaussian_instance(seed: int) -> NTPInstance:
    """m > d Gaussian contexts with random supports of 1 or 2 tokens (often partly separable)."""
    rng = np.random.default_rng(seed)
    m, d, V = int(rng.integers(5, 9)), int(rng.integers(2, 4)), int(rng.integers(3, 6))
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, 3)), replace=False)
        C[j, S] = rng.integers(1, 9, size=S.size)
    return NTPInstance.from_counts(rng.standard_normal((m, d)), C)


def duplicated_instance(seed: int) -> NTPInstance:
    """Gaussian contexts (m <= d, separable on their own) plus a copy of context 0 scaled by a positive
    number, followed by another token: the pair of context 0 with that token, and the copy's pair with
    context 0's token, are non-separable; the rest stays separable."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 5))
    m0, V = d, int(rng.integers(3, 5))
    H = rng.standard_normal((m0, d))
    H = np.vstack([H, float(rng.uniform(0.5, 2.0)) * H[0]])
    C = np.zeros((m0 + 1, V), dtype=np.int64)
    for j in range(m0):
        C[j, int(rng.integers(V))] = int(rng.integers(1, 9))
    z0 = int(np.flatnonzero(C[0])[0])
    C[m0, (z0 + 1) % V] = int(rng.integers(1, 9))
    return NTPInstance.from_counts(H, C)


def partly_separable(count: int) -> list[NTPInstance]:
    """The first ``count`` instances of both families with P and N both non-empty."""
    out = []
    for seed in range(200):
        for make in (gaussian_instance, duplicated_instance):
            inst = make(seed)
            N, _ = _split_pairs(inst)
            q = inst.m * inst.V - int(inst.support_sizes.sum())
            if N is not None and 0 < len(N) < q:
                out.append(inst)
            if len(out) == count:
                return out
    return out


# ---------------------------------------------------------------------------- this file's own CE_N and F_N
def ext_mask(inst: NTPInstance, N: np.ndarray) -> np.ndarray:
    mask = inst.probs > 0
    mask = mask.copy()
    for j, v in N:
        mask[j, v] = True
    return mask


def own_basis(inst: NTPInstance, ext: np.ndarray) -> np.ndarray:
    """An orthonormal basis (columns, V*d rows) of span{(e_z - e_u) h_j^T : z, u in S_j u N_j}, by SVD."""
    V, d = inst.V, inst.d
    rows = []
    for j in range(inst.m):
        E = np.flatnonzero(ext[j])
        for z in E[1:]:
            r = np.zeros((V, d))
            r[z] += inst.embeddings[j]
            r[E[0]] -= inst.embeddings[j]
            rows.append(r.ravel())
    if not rows:
        return np.zeros((V * d, 0))
    U, s, _ = np.linalg.svd(np.array(rows).T, full_matrices=False)
    return U[:, s > 1e-10 * s[0]]


def own_ce_n(inst: NTPInstance, ext: np.ndarray, W: np.ndarray) -> tuple[float, np.ndarray]:
    """CE_N and its gradient, written out: sum_j pi_j sum_{z in S_j} p_jz (logsumexp_{S_j u N_j} - z)."""
    Z = inst.embeddings @ W.T
    Zm = np.where(ext, Z, -np.inf)
    top = Zm.max(axis=1, keepdims=True)
    e = np.exp(Zm - top)
    lse = top[:, 0] + np.log(e.sum(axis=1))
    P, pi = inst.probs, inst.weights
    f = float(pi @ (lse - (P * Z).sum(axis=1)))
    s = e / e.sum(axis=1, keepdims=True)
    G = ((s - P) * pi[:, None]).T @ inst.embeddings
    return f, G


def lbfgs_limit(inst: NTPInstance, N: np.ndarray) -> tuple[np.ndarray, float]:
    ext = ext_mask(inst, N)
    B = own_basis(inst, ext)
    V, d = inst.V, inst.d

    def fun(c):
        f, G = own_ce_n(inst, ext, (B @ c).reshape(V, d))
        return f, B.T @ G.ravel()

    res = minimize(fun, np.zeros(B.shape[1]), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 20000, "maxcor": 50})
    W = (B @ res.x).reshape(V, d)
    return W, own_ce_n(inst, ext, W)[0]


INSTANCES = partly_separable(8)


def test_the_generator_gives_partly_separable_instances():
    assert len(INSTANCES) == 8


@pytest.mark.parametrize("k", range(8))
def test_W_fin_and_L_star_match_an_independent_lbfgs(k):
    inst = INSTANCES[k]
    N, _ = _split_pairs(inst)
    lim = finite_limit(inst, N)
    W_ref, L_ref = lbfgs_limit(inst, N)
    assert lim.converged and lim.grad_norm <= GRAD_TOL
    assert np.linalg.norm(lim.W_fin - W_ref) <= AGREE * max(1.0, np.linalg.norm(W_ref))
    assert abs(lim.L_star - L_ref) <= 1e-10 * max(1.0, L_ref)
    assert lim.dim_F_N == own_basis(inst, ext_mask(inst, N)).shape[1]
    # L* - H as a sum of non-negative terms agrees with the difference
    assert abs(lim.excess - (L_ref - inst.entropy())) <= 1e-10
    # W_fin lies in F_N: its projection is itself
    assert np.allclose(lim.project(lim.W_fin), lim.W_fin, atol=1e-10 * max(1.0, np.linalg.norm(lim.W_fin)))


@pytest.mark.parametrize("k", range(8))
def test_W_mm_P_matches_clarabel(k):
    cp = pytest.importorskip("cvxpy")
    inst = INSTANCES[k]
    gen = nonseparable_limits(inst)
    ext = ext_mask(inst, gen.nonseparable)
    V, d, H = inst.V, inst.d, inst.embeddings
    W = cp.Variable((V, d))
    cons = []
    for j in range(inst.m):
        E = np.flatnonzero(ext[j])
        cons += [(W[z] - W[E[0]]) @ H[j] == 0 for z in E[1:]]
        cons += [(W[E[0]] - W[v]) @ H[j] >= 1 for v in np.flatnonzero(~ext[j])]
    cp.Problem(cp.Minimize(cp.sum_squares(W)), cons).solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                                                           tol_feas=1e-10)
    assert gen.svm is not None, gen.svm_error
    assert np.linalg.norm(gen.svm.W - W.value) <= AGREE * np.linalg.norm(W.value)
    # W^mm_P is orthogonal to F_N and W_fin lies in F_N
    assert abs(float(np.sum(gen.svm.W * gen.W_fin))) <= 1e-6 * np.linalg.norm(gen.svm.W) * max(1.0, np.linalg.norm(gen.W_fin))


def test_L_star_is_the_infimum_of_CE_along_the_ray():
    """CE(W_fin + t W^mm_P) decreases to L* (the rest of the loss is exp(-t)-small)."""
    inst = INSTANCES[0]
    gen = nonseparable_limits(inst)
    L = [inst.loss(gen.W_fin + t * gen.W_mm) for t in (0.0, 5.0, 20.0, 60.0)]
    assert all(a >= b for a, b in zip(L, L[1:]))
    assert abs(L[-1] - gen.limit.L_star) <= 1e-12 * max(1.0, gen.limit.L_star)
    assert L[0] > gen.limit.L_star + 1e-6  # the P pairs still cost something at W_fin itself


def test_separable_compatible_W_fin_is_W_star_and_L_star_is_the_entropy():
    rng = np.random.default_rng(7)
    C = rng.integers(0, 4, size=(4, 5))
    C[:, 0] += 1
    inst = NTPInstance.from_counts(rng.standard_normal((4, 6)), C)  # m <= d: compatible and separable
    lim = finite_limit(inst, np.zeros((0, 2), dtype=np.int64))
    W_star = least_squares_fit(Subspace.build(KeslerSystem.build(inst), method="eigh")).W_star
    assert np.linalg.norm(lim.W_fin - W_star) <= AGREE * np.linalg.norm(W_star)
    assert abs(lim.L_star - inst.entropy()) <= 1e-12
    assert lim.excess <= 1e-20


def test_N_empty_incompatible_W_fin_is_the_best_in_support_fit():
    rng = np.random.default_rng(3)
    H = np.vstack([np.eye(2), [[1.0, 1.0]]])  # h_3 = h_1 + h_2: the log-odds of context 3 are forced
    C = np.array([[3, 1, 0], [1, 2, 0], [1, 5, 0]])
    inst = NTPInstance.from_counts(H, C)
    lim = finite_limit(inst, np.zeros((0, 2), dtype=np.int64))
    W_ref, L_ref = lbfgs_limit(inst, np.zeros((0, 2), dtype=np.int64))
    assert np.linalg.norm(lim.W_fin - W_ref) <= AGREE * max(1.0, np.linalg.norm(W_ref))
    assert lim.L_star > inst.entropy() + 1e-3  # incompatible: the in-support fit stays above H
    assert abs(lim.L_star - L_ref) <= 1e-10
    del rng


def test_reduced_loss_is_blind_to_F_N_perp():
    inst = INSTANCES[1]
    N, _ = _split_pairs(inst)
    lim = finite_limit(inst, N)
    rng = np.random.default_rng(0)
    D = lim.subspace.project_perp(rng.standard_normal((inst.V, inst.d)))
    assert abs(reduced_loss(inst, N, lim.W_fin + 3 * D) - lim.L_star) <= 1e-12
    assert abs(reduced_excess(inst, N, lim.W_fin) - lim.excess) <= 1e-15


@pytest.mark.parametrize("bad, field", [
    (np.array([[0, 0, 0]]), "shape"),
    (np.array([[99, 0]]), "outside the instance"),
    (np.array([[0.5, 1.0]]), "integers"),
])
def test_malformed_N_is_refused_naming_it(bad, field):
    inst = INSTANCES[0]
    with pytest.raises(InputError, match="nonseparable") as e:
        check_nonseparable(inst, bad)
    assert field in str(e.value)


def test_a_support_pair_or_a_repeated_pair_is_refused():
    inst = INSTANCES[0]
    z = int(inst.support(0)[0])
    with pytest.raises(InputError, match="in the support of context 0"):
        check_nonseparable(inst, np.array([[0, z]]))
    N, _ = _split_pairs(inst)
    with pytest.raises(InputError, match="twice"):
        check_nonseparable(inst, np.vstack([N[:1], N[:1]]))


@given(seed=st.integers(0, 10 ** 6), duplicated=st.booleans())
def test_property_W_fin_matches_lbfgs_on_random_partly_separable_instances(seed, duplicated):
    inst = (duplicated_instance if duplicated else gaussian_instance)(seed)
    N, _ = _split_pairs(inst)
    q = inst.m * inst.V - int(inst.support_sizes.sum())
    assume(N is not None and 0 < len(N) < q)
    lim = finite_limit(inst, N)
    W_ref, L_ref = lbfgs_limit(inst, N)
    assert lim.converged
    assert np.linalg.norm(lim.W_fin - W_ref) <= AGREE * max(1.0, np.linalg.norm(W_ref))
    assert abs(lim.L_star - L_ref) <= 1e-10 * max(1.0, L_ref)
    # L* is below CE everywhere: at W_fin itself and at W_fin plus any direction
    rng = np.random.default_rng(seed)
    for W in (lim.W_fin, lim.W_fin + rng.standard_normal(lim.W_fin.shape)):
        assert inst.loss(W) >= lim.L_star - 1e-12


def test_the_search_directions_fall_back_from_newton_to_levenberg_marquardt_to_the_gradient():
    """Each step tries Newton's direction, then (H + |g| I)^{-1} g, then the gradient, each only with a negative
    slope: a Hessian that makes Newton's direction an ascent one leaves the other two, in that order."""
    from ntpcert.solve.finite_limit import _directions

    g = np.array([1.0, -2.0])
    gn = float(np.linalg.norm(g))
    H = np.diag([1.0, 4.0])
    got = list(_directions(-np.linalg.solve(H, g), H, g, gn))
    assert len(got) == 3 and all(slope < 0 for _, slope in got)
    np.testing.assert_allclose(got[1][0], -np.linalg.solve(H + gn * np.eye(2), g))
    np.testing.assert_allclose(got[2][0], -g)
    g = np.array([2.0, -1.0])
    gn = float(np.linalg.norm(g))
    H_bad = np.diag([-1.0, 4.0])  # indefinite: Newton's "direction" climbs along the first coordinate
    newton = -np.linalg.solve(H_bad, g)
    assert g @ newton > 0
    got = list(_directions(newton, H_bad, g, gn))
    assert len(got) == 2 and np.allclose(got[0][0], -np.linalg.solve(H_bad + gn * np.eye(2), g))
    assert got[0][1] < 0 and np.allclose(got[1][0], -g)


@pytest.mark.parametrize("scale", [2.0**-70, 1e-20, 1e20])
def test_the_limits_of_the_split_do_not_change_with_the_scale_of_H(scale):
    """H·s has the same split, L*, W_fin/s and W^mm_P/s. With an absolute gradient tolerance Newton stopped at
    W = 0 on H·1e-20 (L* = log V), and Clarabel called the extended pattern of H·1e-20 infeasible; the gradient
    tolerance now scales with H, and the NTP-SVM is solved on H scaled to unit size (ntpcert.rows.scaling)."""
    from .test_split_glue import glue_instance

    inst = glue_instance(3, m=20, d=3, V=8)
    base = nonseparable_limits(inst, separable=False)
    scaled = nonseparable_limits(NTPInstance.from_counts(inst.embeddings * scale, inst.counts), separable=False)
    assert base.limit is not None and scaled.limit is not None
    assert np.array_equal(base.nonseparable, scaled.nonseparable)
    assert scaled.limit.L_star == pytest.approx(base.limit.L_star, rel=1e-9)
    assert base.limit.L_star < np.log(inst.V) - 0.1  # not the loss of W = 0
    assert np.linalg.norm(scaled.W_fin * scale - base.W_fin) <= 1e-6 * np.linalg.norm(base.W_fin)
    assert scaled.limit.converged and base.limit.converged
    assert base.svm is not None and scaled.svm is not None, scaled.svm_error
    assert scaled.svm.norm * scale == pytest.approx(base.svm.norm, rel=1e-6)
    assert np.linalg.norm(scaled.svm.W * scale - base.svm.W) <= 1e-6 * np.linalg.norm(base.svm.W)
    assert scaled.svm.relative_gap <= 1e-8 and scaled.svm.min_margin >= 1 - 1e-7
