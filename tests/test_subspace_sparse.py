"""The sparse (LSMR) path of :class:`ntpcert.rows.subspace.Subspace` against the dense eigh path."""

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.errors import InputError, SolverError
from ntpcert.experiments.bench.families import gaussian_instance
from ntpcert.rows import subspace as S
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.float_witness import float_compatibility
from ntpcert.rows.subspace import Subspace, least_squares_fit

#: Relative agreement of the LSMR path with the eigh path (LSMR stops at atol = btol = 1e-12 relative
#: to ||A|| ||x||, so a few orders above rounding); belongs with conftest's TOL table.
AGREE = 1e-8


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _dup_instance(seed: int, same_counts: bool) -> NTPInstance:
    """Every embedding row twice: A_eq has exactly repeated rows (rank deficient); with different counts
    on the copies the log-odds are inconsistent."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((5, 7))
    C = rng.integers(1, 9, size=(5, 6)) * (rng.random((5, 6)) < 0.7)
    C[:, 0] += 1  # every support non-empty
    C2 = C if same_counts else C + (C > 0) * rng.integers(1, 5, size=C.shape)
    return NTPInstance.from_counts(np.vstack([H, H]), np.vstack([C, C2]))


CASES = {
    "gauss-full-rank": lambda s: gaussian_instance(np.random.default_rng(s), V=6, m=8, d=12, kmin=1, kmax=4),
    "gauss-d-below-rows": lambda s: gaussian_instance(np.random.default_rng(s), V=5, m=20, d=3, kmin=2, kmax=4),
    "duplicates-consistent": lambda s: _dup_instance(s, True),
    "duplicates-inconsistent": lambda s: _dup_instance(s, False),
}
#: (rank deficient, inconsistent log-odds) per case, checked so that every case tests what it says.
KIND = {"gauss-full-rank": (False, False), "gauss-d-below-rows": (True, True),
        "duplicates-consistent": (True, False), "duplicates-inconsistent": (True, True)}


def _pair(inst: NTPInstance) -> tuple[Subspace, Subspace]:
    sy = KeslerSystem.build(inst)
    return Subspace.build(sy, method="eigh"), Subspace.build(sy, method="lsmr")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", list(CASES))
def test_lsmr_agrees_with_eigh(case, seed):
    E, L = _pair(CASES[case](seed))
    sy = E.system
    b = sy.log_odds()
    deficient, inconsistent = KIND[case]
    assert (E.dim < sy.n_eq) is deficient
    We = E.min_norm_solution(b)
    assert bool(np.linalg.norm(sy.apply_eq(We) - b) > 1e-3 * np.linalg.norm(b)) is inconsistent
    Wl = L.min_norm_solution(b)
    assert _rel(Wl, We) < AGREE
    # a right-hand side other than the log-odds (a fresh LSMR solve)
    b2 = np.random.default_rng(seed + 100).standard_normal(b.shape)
    assert _rel(L.min_norm_solution(b2), E.min_norm_solution(b2)) < AGREE
    X = np.random.default_rng(seed).standard_normal((sy.instance.V, sy.instance.d))
    assert _rel(L.project(X), E.project(X)) < AGREE
    assert _rel(L.project_perp(X), E.project_perp(X)) < AGREE
    info = L.solve_info
    assert info["method"] == "lsmr" and info["converged"] and info["istop"] in S.LSMR_CONVERGED
    assert info["iterations"] > 0


@pytest.mark.parametrize("case", list(CASES))
def test_lsmr_projection_is_orthogonal_and_idempotent(case):
    _, L = _pair(CASES[case](7))
    sy = L.system
    X = np.random.default_rng(1).standard_normal((sy.instance.V, sy.instance.d))
    P = L.project(X)
    scale = np.linalg.norm(X)
    assert np.linalg.norm(L.project(P) - P) < AGREE * scale
    Q = L.project_perp(X)
    assert np.allclose(P + Q, X)
    # X - P_F(X) is orthogonal to every row of A_eq, and P_F(X) is not (X is generic)
    A = sy.eq_matrix()
    norm_A = np.sqrt(A.multiply(A).sum())
    assert np.linalg.norm(A @ Q.ravel()) < AGREE * norm_A * scale
    assert np.linalg.norm(A @ P.ravel()) > 1e-3 * scale
    assert abs(np.sum(P * Q)) < AGREE * scale ** 2
    # W* lies in F and satisfies the normal equations
    W = L.min_norm_solution(sy.log_odds())
    assert np.linalg.norm(L.project(W) - W) < AGREE * max(np.linalg.norm(W), 1.0)
    r = A @ W.ravel() - sy.log_odds()
    assert np.linalg.norm(A.T @ r) < AGREE * norm_A * max(np.linalg.norm(r), 1.0)


def test_kesler_operator_agrees_with_csr():
    sy = KeslerSystem.build(CASES["gauss-d-below-rows"](4))
    C = Subspace.build(sy, method="lsmr", operator="csr")
    K = Subspace.build(sy, method="lsmr", operator="kesler")
    assert K.solve_info["operator"] == "kesler"
    assert _rel(K.min_norm_solution(sy.log_odds()), C.min_norm_solution(sy.log_odds())) < AGREE
    X = np.random.default_rng(0).standard_normal((sy.instance.V, sy.instance.d))
    assert _rel(K.project(X), C.project(X)) < AGREE


def test_auto_switches_at_dense_max_rows(monkeypatch):
    sy = KeslerSystem.build(CASES["gauss-full-rank"](0))
    r = sy.n_eq
    monkeypatch.setattr(S, "DENSE_MAX_ROWS", r)
    assert Subspace.build(sy).method == "eigh"
    monkeypatch.setattr(S, "DENSE_MAX_ROWS", r - 1)
    assert Subspace.build(sy).method == "eigh"  # r^3 is small next to V d: eigh is still cheaper
    monkeypatch.setattr(S, "DENSE_MAX_ROWS_WIDE", r - 1)
    L = Subspace.build(sy)
    assert L.method == "lsmr"
    assert L.dim is None and L.full_row_rank is False and L.certified_rank == 0 and L.near_null is None
    with pytest.raises(InputError, match=rf"r = {r} .*DENSE_MAX_ROWS is {r - 1}.*method='eigh'"):
        L.basis()
    assert f"DENSE_MAX_ROWS = {r - 1}" in float_compatibility(L).reason
    # forcing a path overrides the switch both ways
    assert Subspace.build(sy, method="eigh").method == "eigh"
    monkeypatch.setattr(S, "DENSE_MAX_ROWS", 10 ** 9)
    assert Subspace.build(sy, method="lsmr").method == "lsmr"


def test_eigh_path_unchanged_by_default():
    E = Subspace.build(KeslerSystem.build(CASES["gauss-full-rank"](2)))
    assert E.method == "eigh" and E.solve_info == {"method": "eigh"}
    assert E.full_row_rank and E.dim == E.system.n_eq and E.basis().shape[0] == E.dim


def test_check_compatibility_on_both_paths():
    E, L = _pair(CASES["gauss-full-rank"](1))
    ce, cl = least_squares_fit(E), least_squares_fit(L)
    assert float_compatibility(E).holds is True and ce.dim_F == E.dim
    vl = float_compatibility(L)
    assert vl.holds is None and cl.dim_F is None and "not certified" in vl.reason
    assert _rel(cl.W_star, ce.W_star) < AGREE
    assert cl.solver["method"] == "lsmr" and cl.solver["iterations"] == L.solve_info["iterations"]
    assert cl.solver["residual"] == pytest.approx(cl.residual)
    b = L.system.log_odds()
    assert cl.residual == pytest.approx(float(np.linalg.norm(L.system.apply_eq(cl.W_star) - b)), rel=1e-6, abs=1e-12)
    assert "asked for" in vl.reason
    for c in (ce, cl):
        js = c.to_json()["least_squares"]
        assert js["method"] in ("eigh", "lsmr")
        assert js["residual"] < 1e-8 and js["normal_residual"] < 1e-8
    # the float verdict on the lsmr path stays undetermined, without crashing, and says what settles it
    assert "--exact" in vl.reason


def test_inconsistent_least_squares_record():
    _, L = _pair(CASES["duplicates-inconsistent"](0))
    c = least_squares_fit(L)
    assert c.solver["residual"] > 1e-3  # inconsistent: a true least-squares residual ...
    assert c.solver["normal_residual"] < AGREE * c.solver["residual"] * c.solver["norm_A_estimate"]  # ... at optimum
    assert c.solver["istop"] in (2, 5)


def test_no_equations_is_trivial_whatever_the_method():
    inst = NTPInstance.from_counts(np.eye(3), np.eye(3, dtype=np.int64) * 4)
    sub = Subspace.build(KeslerSystem.build(inst), method="lsmr")
    assert sub.dim == 0 and float_compatibility(sub).holds is True
    assert np.all(sub.project(np.ones((3, 3))) == 0)


def test_bad_arguments_are_rejected():
    sy = KeslerSystem.build(CASES["gauss-full-rank"](0))
    with pytest.raises(InputError, match="method: unknown value 'qr'"):
        Subspace.build(sy, method="qr")
    with pytest.raises(InputError, match="operator: unknown value 'dense'"):
        Subspace.build(sy, method="lsmr", operator="dense")


def test_lsmr_that_does_not_converge_raises_or_reports_it(monkeypatch):
    sy = KeslerSystem.build(CASES["gauss-d-below-rows"](0))
    monkeypatch.setattr(S, "LSMR_ITER_FACTOR", 0)
    monkeypatch.setattr(S, "LSMR_MIN_ITER", 2)
    with pytest.raises(SolverError, match="istop 7"):
        S.lsmr_solve(S.eq_operator(sy, "csr"), sy.log_odds())
    sub = Subspace.build(sy, method="lsmr")  # W* is kept, flagged as not converged, with its residuals
    assert sub.solve_info["converged"] is False and sub.solve_info["iterations"] == 2
    assert least_squares_fit(sub).to_json()["least_squares"]["converged"] is False


def test_auto_weighs_eigh_against_lsmr_iterations(monkeypatch):
    """Above DENSE_MAX_ROWS, ``auto`` keeps eigh while r^3 <= DENSE_WORK_FACTOR (2 d r + V d), the
    work of that many LSMR iterations, and r <= DENSE_MAX_ROWS_WIDE."""
    sy = KeslerSystem.build(CASES["gauss-full-rank"](0))
    inst, r = sy.instance, sy.n_eq
    monkeypatch.setattr(S, "DENSE_MAX_ROWS", 0)
    work = 2 * inst.d * r + inst.V * inst.d
    monkeypatch.setattr(S, "DENSE_WORK_FACTOR", r ** 3 / work)  # exactly at the limit: eigh
    assert S.dense_preferred(sy) and Subspace.build(sy).method == "eigh"
    monkeypatch.setattr(S, "DENSE_WORK_FACTOR", 0.999 * r ** 3 / work)
    assert not S.dense_preferred(sy) and Subspace.build(sy).method == "lsmr"


# ----------------------------------------------------------------------------- the Cholesky path
@pytest.mark.parametrize("seed", range(4))
def test_gram_by_tokens_is_the_dense_gram(seed):
    inst = gaussian_instance(np.random.default_rng(seed), V=9, m=30, d=6, kmin=1, kmax=5)
    system = KeslerSystem.build(inst)
    assert system.n_eq > 0
    np.testing.assert_allclose(S.gram_by_tokens(system), system.eq_gram(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_cholesky_path_gives_the_eigh_w_star_and_projection(seed):
    rng = np.random.default_rng(seed)
    inst = gaussian_instance(rng, V=8, m=12, d=20, kmin=1, kmax=4)  # d large: A_eq has full row rank
    system = KeslerSystem.build(inst)
    dense = Subspace.build(system, method="eigh")
    chol = Subspace.build(system, method="cholesky")
    assert dense.full_row_rank and chol.method == "cholesky" and chol.dim is None and not chol.full_row_rank
    fd, fc = least_squares_fit(dense), least_squares_fit(chol)
    assert _rel(fc.W_star, fd.W_star) <= AGREE and fc.residual <= 1e-10 * max(1.0, np.linalg.norm(system.log_odds()))
    W = rng.standard_normal((inst.V, inst.d))
    assert _rel(chol.project(W), dense.project(W)) <= AGREE
    with pytest.raises(InputError, match="cholesky"):
        chol.basis()
    assert float_compatibility(chol).holds is None  # the path certifies no rank


def test_cholesky_path_falls_back_to_lsmr_where_g_is_singular(monkeypatch):
    inst = _dup_instance(0, True)  # repeated rows: G singular
    system = KeslerSystem.build(inst)
    sub = Subspace.build(system, method="cholesky")
    assert sub.method == "lsmr" and "not numerically positive definite" in sub.solve_info["cholesky"]
    monkeypatch.setattr(S, "CHOL_MAX_ROWS", 1)
    sub = Subspace.build(KeslerSystem.build(gaussian_instance(np.random.default_rng(0), V=6, m=8, d=12, kmin=2,
                                                                 kmax=4)), method="cholesky")
    assert sub.method == "lsmr" and "CHOL_MAX_ROWS" in sub.solve_info["cholesky"]


@pytest.mark.parametrize("r,block", [(1, 4), (7, 3), (64, 16), (65, 16), (200, 1024)])
def test_blocked_cholesky_is_the_cholesky_factor(r, block):
    rng = np.random.default_rng(r)
    A = rng.standard_normal((r, r + 3))
    G = A @ A.T
    L = np.tril(S.blocked_cholesky(G.copy(), block=block))
    np.testing.assert_allclose(L, np.linalg.cholesky(G), rtol=1e-9, atol=1e-9)
    bad = G.copy()
    bad[r // 2, r // 2] = -1.0
    with pytest.raises(np.linalg.LinAlgError):
        S.blocked_cholesky(bad, block=block)


def test_limits_fits_w_star_where_certify_left_it_out():
    import dataclasses

    from ntpcert.pipeline.float_verdicts import certify
    from ntpcert.pipeline.limits import with_fit
    from ntpcert.rows.subspace import LeastSquaresFit

    inst = gaussian_instance(np.random.default_rng(5), V=6, m=10, d=20, kmin=1, kmax=4)
    rep = certify(inst, svm=False)
    assert rep.fit.W_star is not None
    bare = dataclasses.replace(rep, fit=LeastSquaresFit.none(rep.fit.dim_F, "a pair ray first"))
    got = with_fit(bare)
    assert _rel(got.fit.W_star, rep.fit.W_star) <= AGREE and got.fit.residual <= 1e-9
    assert with_fit(rep) is rep  # nothing to do
