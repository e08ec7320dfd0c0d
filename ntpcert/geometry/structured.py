r"""The structured solver of the nuclear-norm NTP-SVM: equal supports merged, then a Burer–Monteiro
factorisation solved by an augmented Lagrangian.

**Merging equal supports** (our derivation). The program of :mod:`ntpcert.geometry.certificate` is invariant
under permuting contexts with the same support, and convex, so averaging an optimum over those
permutations gives an optimum whose columns are equal within each group: the optimum is attained at
:math:`L = M E^\top` with :math:`M \in \mathbb R^{V\times r}` (one column per distinct support) and
:math:`E \in \{0,1\}^{m\times r}` the group indicator. With :math:`N = E^\top E = \mathrm{diag}(n_g)` the
matrix :math:`E N^{-1/2}` has orthonormal columns, so :math:`\|ME^\top\|_* = \|X\|_*` for
:math:`X = M N^{1/2}`, and the program becomes

.. math::

    \min_{X \in \mathbb R^{V\times r},\, c \in \mathbb R^r} \|X\|_* \quad\text{s.t.}\quad
    X_{z,g} = c_g\ (z \in T_g), \qquad X_{v,g} \le c_g - \sqrt{n_g}\ (v \notin T_g)

over the r distinct supports :math:`T_g`. Dual points map back the same way
(:math:`\Lambda = -Y N^{-1/2} E^\top` has the spectral norm of Y), so the certificate is computed on the full
(V, m) pair.

**Burer–Monteiro.** :math:`\|X\|_* = \min_{X = AB^\top} \tfrac12(\|A\|_F^2 + \|B\|_F^2)`, with
:math:`A \in \mathbb R^{V\times p}`, :math:`B \in \mathbb R^{r\times p}` and :math:`p = \min(V, r)` (every X is
reachable, so second-order critical points are global). The constraints are handled by the augmented
Lagrangian with multipliers Y (free on the supports, :math:`\ge 0` off them) and residuals
:math:`R = AB^\top - \mathbf 1c^\top + \mathrm{off}\cdot\sqrt n`:

.. math::

    \mathcal L_\rho = \tfrac12(\|A\|^2 + \|B\|^2) + \sum_{T}\big(Y R + \tfrac\rho2 R^2\big)
    + \tfrac1{2\rho}\sum_{\mathrm{off}}\big((Y + \rho R)_+^2 - Y^2\big),

whose gradient is :math:`(A + \Gamma B,\ B + \Gamma^\top A,\ -\mathbf 1^\top\Gamma)` with
:math:`\Gamma = Y + \rho R` on the supports and :math:`(Y + \rho R)_+` off them. Each outer step minimises
:math:`\mathcal L_\rho` with L-BFGS from the previous point, sets :math:`Y \leftarrow \Gamma`, and raises ρ
when the constraint violation did not fall by :data:`VIOLATION_DECREASE`. It stops when the certified
relative gap of the full pair is at most ``gap_tol``.

The start is the centred support matrix (feasible), factorised by its SVD, with the multipliers from its
polar factor.

**Leaving saddles.** A stationary point of the factorised inner problem solves the convex one only if the
penalty gradient Γ has spectral norm at most 1. Gradient steps keep a null direction of the factors null, so
once a direction has decayed (while ‖Γ‖₂ ≤ 1 in early outer steps) the iterates can sit on a saddle with
‖Γ‖₂ > 1 for ever: the solver stalled so at a certified relative gap of 1.3e-2 on a 5 × 4 pattern with a token
outside every support. Before each inner solve the top singular pair of Γ is checked and, above
1 + :data:`ESCAPE_TOL`, put into the factors as a new rank-one column (:func:`_escape_column`), which lowers
the objective like :math:`t^2(1 - \|\Gamma\|_2)`.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.geometry.certificate import NuclearSVMSolution, average_token_rows, certify_pair, repair_primal
from ntpcert.geometry.lbfgs import lbfgs
from ntpcert.geometry.pattern import SupportPattern
from ntpcert.util.progress import progress_bar

#: Default target of the certified relative duality gap.
GAP_TOL = 1e-10
#: Default target on large merged programs (V·r above LARGE_ENTRIES): there the multipliers converge slowly
#: past ~1e-7 (the built-in pydoc, V = 86 and r = 454, plateaus at 4e-8 after 17 outer steps, minutes),
#: while 1e-6 takes seven outer steps.
GAP_TOL_LARGE, LARGE_ENTRIES = 1e-6, 10_000
#: Stop ("stalled") when the best certified gap has not halved in this many outer steps.
STALL_OUTER = 6
#: Largest V·m the structured solver accepts (the certificate takes SVDs of (V, m) matrices).
STRUCTURED_MAX_ENTRIES = 4_000_000
#: Default number of outer (multiplier) steps.
MAX_OUTER = 60
#: L-BFGS iterations per outer step, and the number of correction pairs it keeps.
MAX_INNER, LBFGS_MEMORY = 5_000, 10
#: Largest gradient entry at which an inner solve stops (it usually stops earlier, at rounding level).
INNER_GTOL = 1e-14
#: Penalty raised tenfold when the violation falls by less than this factor in an outer step.
VIOLATION_DECREASE = 0.25
#: Starting and largest penalty.
RHO0, RHO_MAX = 1.0, 1e8
#: Dual polish: singular values of X below this fraction of the largest count as zero; margins with
#: slack above this (relative to max |X|) count as inactive; LSQR iterations at most.
POLISH_RANK_RTOL, POLISH_SLACK_TOL, POLISH_ITER = 1e-7, 1e-7, 2_000
#: The factors are cut to the detected rank (singular values above TRUNCATE_RANK_RTOL of the largest)
#: once the certified relative gap is below TRUNCATE_FROM_GAP.
TRUNCATE_RANK_RTOL, TRUNCATE_FROM_GAP = 1e-5, 1e-5
#: Gradient-only (Barzilai–Borwein) steps after each L-BFGS solve once the factors are cut to rank:
#: at most BB_ITERS, stopping at a largest gradient entry of BB_GTOL.
BB_ITERS, BB_GTOL = 3_000, 1e-14
#: The dual polish runs once the certified relative gap is below this.
POLISH_FROM_GAP = 1e-4
#: Saddle escape: before each inner solve, when the penalty gradient Γ at the current point has spectral
#: norm above 1 + ESCAPE_TOL, a rank-one column along its top singular pair is put into the factors.
ESCAPE_TOL = 1e-6
#: Step lengths tried along the escape direction (times the square root of the largest singular value).
ESCAPE_STEPS = tuple(2.0 ** -i for i in range(0, 16))


def _expand(pattern: SupportPattern, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The full (V, m) primal (rows of tokens with equal support rows averaged) and dual of a merged pair
    ``(X, Y)``."""
    s = np.sqrt(pattern.multiplicity.astype(np.float64))
    g = pattern.group_of
    return average_token_rows(X[:, g] / s[g], pattern), -Y[:, g] / s[g]


def _bb_refine(grad: Callable[[np.ndarray], np.ndarray], x: np.ndarray, iters: int) -> np.ndarray:
    r"""Barzilai–Borwein steps on the gradient alone, returning the point with the smallest gradient seen.

    L-BFGS stops once the objective stops decreasing in float64, which leaves the gradient near
    :math:`\sqrt{\varepsilon}` times the objective's scale; steps that use gradients only go on to the
    rounding level of the gradient itself, which the certificate needs."""
    g = grad(x)
    best_x, best_g = x, float(np.abs(g).max())
    alpha = 1e-3
    for it in range(iters):
        x_new = x - alpha * g
        g_new = grad(x_new)
        sv, yv = x_new - x, g_new - g
        sy = float(sv @ yv)
        alpha = float(sv @ sv) / sy if sy > 0 else 1e-3 if it % 2 else float(sy / max(float(yv @ yv), 1e-300))
        if not (np.isfinite(alpha) and alpha > 0):
            alpha = 1e-3
        x, g = x_new, g_new
        gn = float(np.abs(g).max())
        if gn < best_g:
            best_x, best_g = x, gn
        if gn <= BB_GTOL:
            break
    return best_x


def _polish_dual(X: np.ndarray, pattern: SupportPattern, rank_rtol: float = POLISH_RANK_RTOL,
                 slack_tol: float = POLISH_SLACK_TOL) -> np.ndarray | None:
    r"""A dual point of the merged program read off a nearly optimal primal X (shape (V, r)) from the
    optimality conditions, or None when X is 0.

    With the thin SVD :math:`X = U_k\Sigma W_k^\top` (rank k at ``rank_rtol``) every subgradient is
    :math:`\Lambda = U_kW_k^\top + U_\perp K W_\perp^\top`; the dual also needs :math:`\mathbf 1^\top\Lambda = 0`
    and :math:`\Lambda_{v,g} = 0` wherever the margin has slack above ``slack_tol`` (complementarity). The
    minimum-Frobenius-norm K solving those linear equations (LSQR, matrix-free) gives Λ; its remaining
    sign and norm defects are repaired by the certificate, so the bound is valid whatever K is."""
    from scipy.sparse.linalg import LinearOperator, lsqr

    V, r = X.shape
    U, sv, Wt = np.linalg.svd(X, full_matrices=True)
    if sv.size == 0 or not sv[0] > 0:
        return None
    k = int(np.sum(sv > rank_rtol * sv[0]))
    Uk, Wk = U[:, :k], Wt[:k].T
    Up, Wp = U[:, k:], Wt[k:].T
    base = Uk @ Wk.T
    if Up.shape[1] == 0 or Wp.shape[1] == 0:
        return base
    T = pattern.groups
    s = np.sqrt(pattern.multiplicity.astype(np.float64))
    c = np.where(T, X, 0.0).sum(axis=0) / T.sum(axis=0)
    slack = c[None, :] - s[None, :] - X
    free = ~T & (slack > slack_tol * max(1.0, float(np.abs(X).max())))
    oneU = Up.sum(axis=0)  # 1^T U_perp
    nK = Up.shape[1] * Wp.shape[1]
    ne = int(free.sum())

    def mv(x: np.ndarray) -> np.ndarray:
        K = x.reshape(Up.shape[1], Wp.shape[1])
        M = Up @ K @ Wp.T
        return np.concatenate([M[free], (oneU @ K) @ Wp.T])

    def rmv(y: np.ndarray) -> np.ndarray:
        E = np.zeros((V, r))
        E[free] = y[:ne]
        return (Up.T @ E @ Wp + np.outer(oneU, y[ne:] @ Wp)).ravel()

    op = LinearOperator((ne + r, nK), matvec=mv, rmatvec=rmv, dtype=np.float64)
    rhs = -np.concatenate([base[free], base.sum(axis=0)])
    K = lsqr(op, rhs, atol=1e-15, btol=1e-15, iter_lim=POLISH_ITER)[0]
    return base + Up @ K.reshape(Up.shape[1], Wp.shape[1]) @ Wp.T


def _escape_column(A: np.ndarray, B: np.ndarray, G: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                         np.ndarray, float] | None:
    r"""Where to leave a saddle of the factorised inner problem, or None at a global minimiser.

    The inner problem is :math:`\min \tfrac12(\|A\|^2 + \|B\|^2) + \psi(AB^\top, c)` with ψ convex, the
    factorised form of the convex :math:`\min \|X\|_* + \psi(X, c)`, whose optimality condition at
    :math:`X = AB^\top` is :math:`\|\nabla_X\psi\|_2 \le 1` besides stationarity. With :math:`G = \nabla_X\psi`
    (shape (V, r)) and its top singular pair :math:`Gv = \sigma u`, a column :math:`(tu, -tv)` put in the
    factors changes the objective by :math:`t^2(1 - \sigma) + O(t^3)`, so for σ > 1 the point is a strict
    saddle. Gradient methods cannot leave it on their own: at a stationary point
    :math:`A = -GB`, :math:`B = -G^\top A`, a direction w with :math:`Aw = Bw = 0` stays null under every
    gradient step, and a direction that decays while σ ≤ 1 (early outer steps) is numerically zero when σ
    later exceeds 1. This is what stalled the solver on patterns with a token outside every support.

    Returns ``(A, B, u, v, sigma)``: the factors rotated so that their last column is the weakest
    direction of :math:`[A; B]`, set to zero (or with a zero column appended when every direction is
    strong), and the singular pair to put there; None when :math:`\sigma \le 1 +` :data:`ESCAPE_TOL`."""
    Ug, sg, Vgt = np.linalg.svd(G, full_matrices=False)
    if sg.size == 0 or not sg[0] > 1.0 + ESCAPE_TOL:
        return None
    V, p = A.shape
    _, sf, Rt = np.linalg.svd(np.vstack([A, B]), full_matrices=True)
    An, Bn = A @ Rt.T, B @ Rt.T  # columns in decreasing strength; the same product AB^T
    weak = sf.size < p or not sf[-1] > TRUNCATE_RANK_RTOL * sf[0]
    if weak:
        An[:, -1] = 0.0
        Bn[:, -1] = 0.0
    else:
        An = np.hstack([An, np.zeros((V, 1))])
        Bn = np.hstack([Bn, np.zeros((B.shape[0], 1))])
    return An, Bn, Ug[:, 0], Vgt[0], float(sg[0])


def default_gap_tol(pattern: SupportPattern) -> float:
    """The gap target used when none is given: :data:`GAP_TOL`, or :data:`GAP_TOL_LARGE` when the merged
    program has more than :data:`LARGE_ENTRIES` entries (V times the number of distinct supports)."""
    return GAP_TOL if pattern.V * pattern.r <= LARGE_ENTRIES else GAP_TOL_LARGE


def solve_nuclear_structured(pattern: SupportPattern, *, gap_tol: float | None = None, max_outer: int = MAX_OUTER,
                             rng: np.random.Generator | None = None, progress: bool = False) -> NuclearSVMSolution:
    """Solve the nuclear-norm NTP-SVM by merging equal supports and an augmented-Lagrangian Burer–Monteiro
    method (module doc).

    Parameters
    ----------
    pattern : SupportPattern
    gap_tol : float, optional
        Stop once the certified relative gap is at most this (default :func:`default_gap_tol`).
    max_outer : int
        Outer (multiplier) steps at most; the best certified pair is returned either way, with
        status ``"gap_tol"``, ``"stalled"`` (no halving of the best gap in :data:`STALL_OUTER` steps) or
        ``"max_outer"``.
    rng : numpy.random.Generator, optional
        For the small random columns that pad the starting factors to p columns (default seed 0).
    progress : bool
        A bar on stderr over the outer steps.

    Raises
    ------
    InputError
        When V·m exceeds :data:`STRUCTURED_MAX_ENTRIES`.
    """
    V, m, r = pattern.V, pattern.m, pattern.r
    if V * m > STRUCTURED_MAX_ENTRIES:
        raise InputError(f"structured: V·m = {V}·{m} = {V * m:,} logits is above the limit of "
                         f"{STRUCTURED_MAX_ENTRIES:,} (the gap needs SVDs of the (V, m) logit matrix); use a smaller "
                         "corpus (--max-chars) or context length")
    t0 = time.perf_counter()
    gap_tol = default_gap_tol(pattern) if gap_tol is None else float(gap_tol)
    if pattern.n_margins == 0:  # every support is the whole vocabulary: L = 0 is the only minimiser
        return certify_pair(np.zeros((V, m)), np.zeros((V, m)), pattern, solver="structured",
                            status="no_margins", seconds=time.perf_counter() - t0, iterations=0)
    rng = np.random.default_rng(0) if rng is None else rng
    T = pattern.groups
    off = ~T
    s = np.sqrt(pattern.multiplicity.astype(np.float64))
    shift = np.where(off, s[None, :], 0.0)
    Tf = T.astype(np.float64)
    X0 = (Tf - Tf.mean(axis=0, keepdims=True)) * s[None, :]
    U, sv, Vt = np.linalg.svd(X0, full_matrices=False)
    p = sv.size  # min(V, r): every X is reachable; _escape_column adds a column where that is not enough
    A = U * np.sqrt(sv)
    B = Vt.T * np.sqrt(sv)
    pad = 1e-3 * float(np.sqrt(sv.mean()))
    A = A + pad * rng.standard_normal(A.shape)
    B = B + pad * rng.standard_normal(B.shape)
    c = np.where(T, X0, 0.0).sum(axis=0) / T.sum(axis=0)
    Y = -np.where(T, 0.0, np.minimum(U @ Vt, 0.0))  # multipliers from the polar factor, >= 0 off
    nA, nB = V * p, r * p

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return x[:nA].reshape(V, p), x[nA:nA + nB].reshape(r, p), x[nA + nB:]

    def residual(Av: np.ndarray, Bv: np.ndarray, cv: np.ndarray) -> np.ndarray:
        return Av @ Bv.T - cv[None, :] + shift

    def gamma(R: np.ndarray, Yv: np.ndarray, rho: float) -> np.ndarray:
        G = Yv + rho * R
        return np.where(T, G, np.maximum(G, 0.0))

    def violation(R: np.ndarray) -> float:
        return float(max(np.abs(np.where(T, R, 0.0)).max(), np.maximum(np.where(off, R, -np.inf), 0.0).max()))

    first = np.array([int(np.flatnonzero(pattern.group_of == g)[0]) for g in range(r)], dtype=np.int64)
    rho = RHO0
    x = np.concatenate([A.ravel(), B.ravel(), c])
    best: NuclearSVMSolution | None = None
    prev_viol = np.inf
    truncated = False
    best_at_mark, mark = np.inf, 0
    bar = progress_bar(bool(progress), total=max_outer, desc="nuclear SVM", unit="step")
    status = "max_outer"
    outer = 0
    try:
        for outer in range(1, max_outer + 1):
            Yc, rhoc = Y, rho

            def fun(xv: np.ndarray) -> tuple[float, np.ndarray]:
                Av, Bv, cv = unpack(xv)
                R = residual(Av, Bv, cv)
                G = gamma(R, Yc, rhoc)
                val = 0.5 * (np.vdot(Av, Av) + np.vdot(Bv, Bv))
                val += float(np.where(T, Yc * R + 0.5 * rhoc * R * R, (G * G - Yc * Yc) / (2.0 * rhoc)).sum())
                grad = np.concatenate([(Av + G @ Bv).ravel(), (Bv + G.T @ Av).ravel(), -G.sum(axis=0)])
                return float(val), grad

            Av, Bv, cv = unpack(x)
            esc = _escape_column(Av, Bv, gamma(residual(Av, Bv, cv), Yc, rhoc))
            if esc is not None:
                An, Bn, u, v, _ = esc
                p = An.shape[1]
                nA, nB = V * p, r * p
                scale = float(np.sqrt(max(np.linalg.norm(Av @ Bv.T, 2), 1.0)))
                trials = []
                for t in ESCAPE_STEPS:
                    An[:, -1], Bn[:, -1] = t * scale * u, -t * scale * v
                    xt = np.concatenate([An.ravel(), Bn.ravel(), cv])
                    trials.append((fun(xt)[0], t, xt))
                x = min(trials, key=lambda e: e[0])[2]

            x = lbfgs(fun, x, maxiter=MAX_INNER, memory=LBFGS_MEMORY, gtol=INNER_GTOL).x
            x = _bb_refine(lambda xv: fun(xv)[1], x, BB_ITERS) if truncated else x
            Av, Bv, cv = unpack(x)
            R = residual(Av, Bv, cv)
            Y = gamma(R, Y, rho)
            viol = violation(R)
            X = Av @ Bv.T
            L, Lam = _expand(pattern, X, Y)
            sol = certify_pair(L, Lam, pattern, solver="structured", status="", seconds=0.0, iterations=outer)
            if sol.relative_gap < POLISH_FROM_GAP:
                Xf = repair_primal(L, pattern)[:, first]  * s[None, :]
                Lp = _polish_dual(Xf, pattern)
                if Lp is not None:
                    pol = certify_pair(L, _expand(pattern, Xf, -Lp)[1], pattern, solver="structured", status="",
                                       seconds=0.0, iterations=outer)
                    if pol.relative_gap < sol.relative_gap:
                        sol = pol
            if best is None or sol.relative_gap < best.relative_gap:
                if best is None or sol.relative_gap <= 0.5 * best_at_mark:
                    best_at_mark, mark = sol.relative_gap, outer
                best = sol
            bar.update(1)
            bar.set_postfix_str(f"gap {sol.relative_gap:.1e} viol {viol:.1e} rho {rho:.0e}")
            if best.relative_gap <= gap_tol:
                status = "gap_tol"
                break
            if outer - mark >= STALL_OUTER:
                status = "stalled"
                break
            if not truncated and sol.relative_gap < TRUNCATE_FROM_GAP:
                # refactor at the detected rank: spare columns make the factorised problem degenerate
                # (flat directions), which stalls L-BFGS near a rank-deficient optimum
                U, sv, Wt = np.linalg.svd(X, full_matrices=False)
                k = max(1, int(np.sum(sv > TRUNCATE_RANK_RTOL * sv[0])))
                p = k
                nA, nB = V * p, r * p
                x = np.concatenate([(U[:, :k] * np.sqrt(sv[:k])).ravel(), (Wt[:k].T * np.sqrt(sv[:k])).ravel(), cv])
                truncated = True
            if viol > VIOLATION_DECREASE * prev_viol:
                rho = min(rho * 10.0, RHO_MAX)
            prev_viol = viol
    finally:
        bar.close()
    if best is None:  # pragma: no cover - max_outer >= 1
        raise SolverError("structured: no outer step ran")
    return NuclearSVMSolution(best.L, best.dual, best.objective, best.dual_objective, best.gap,
                              best.equality_violation, best.min_margin, best.rank, "structured", status,
                              time.perf_counter() - t0, outer)


__all__ = ["GAP_TOL", "GAP_TOL_LARGE", "STRUCTURED_MAX_ENTRIES", "default_gap_tol", "solve_nuclear_structured"]
