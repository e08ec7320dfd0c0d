r"""The NTP-SVM by Clarabel (DAQP on few class rows, or a bound-constrained QP in the space of the working set's
rows where those are few) on a working set of margins, grown until every margin holds: the backend ``active-set`` (:mod:`ntpcert.solve.svm.active_set`), and the structured solver's polish
where its active-set steps fail (:data:`~ntpcert.solve.structured.solver.WORKING_SET_MAX_VARS`).

Where d < m the NTP-SVM has far more margin rows (about m·C on C token classes) than are active at
:math:`W^{mm}`: each context's margin is tight against a few tokens only. The QP is solved on one token per
class of interchangeable tokens (:class:`~ntpcert.solve.structured.classes.TokenClasses`), with each
class's row weighted by its size :math:`n_c` (all tokens of a class share their row at the optimum, so
:math:`\|W\|_F^2 = \sum_c n_c \|w_c\|^2`):

.. math:: \min_{w}\ \tfrac12 \textstyle\sum_c n_c \|w_c\|^2 \quad\text{s.t.}\quad
          (w_{z_j} - w_c)^\top h_j \ge 1\ ((j, c) \in \mathcal W),\quad (w_z - w_{z_j})^\top h_j = 0\ (z \in S_j),

the working set :math:`\mathcal W` starting from each context's :data:`START_PER_CONTEXT` most frequent
competing classes and taking in, each round, each context's :data:`ADD_PER_CONTEXT` most violated margins,
until none is below :math:`1 - \mathrm{tol}`. A working set's optimum is a lower bound of the full one and
the final point is feasible for all rows, so the optimum is the full QP's (the usual cutting-plane
argument). Its multipliers give the dual: :math:`n_c w_c = \sum_j a_{c,j} h_j` on the classes and
:math:`a_{v,j} = a_{c(v),j}/n_{c(v)}` on the tokens, which keeps W = aH and the column sums; the pair is then
checked as every :class:`~ntpcert.solve.solution.SVMSolution` is. Work is bounded by rounds, not seconds.
"""

from __future__ import annotations

import time

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution

#: Competing classes per context in the first working set (the classes in the most supports).
START_PER_CONTEXT = 4
#: Most violated margins per context added in each round.
ADD_PER_CONTEXT = 8
#: Rounds of the working set (a budget of work).
MAX_ROUNDS = 40
#: Up to this many unknowns C·d the working-set QP is solved densely by DAQP (a dual active-set method for small
#: dense QPs; :func:`_dense`) in place of Clarabel, whose sparse interior-point steps cost far more there (soft
#: supports, V = 10, m = 500, d = 64, all 3,913 margin rows: DAQP 0.22 s, Clarabel 4.0 s). Its active-set steps
#: grow with the square of the unknowns: at V = 50 (C·d = 3,200) five rounds took 105 s.
DENSE_MAX_VARS = 1_000
#: ... and where all margin rows times the unknowns left by the equalities are at most this many cells, the one
#: working set is every margin (one DAQP solve: 0.22 s against 0.8 s in five growing rounds on that instance),
#: unless the caller gives a start (the margins coordinate ascent found active: 0.22 s in three rounds there, and
#: 0.89 s against 2.62 s at m = 2,000).
DENSE_ALL_CELLS = 20_000_000
#: Above :data:`DENSE_MAX_VARS` unknowns and given a dual to start from (the structured solver's), a working set
#: of at most this many rows (equations and margins) is solved in the space of its rows (:func:`_rows`; a dense
#: (R, R) Gram), larger ones by Clarabel. Its active-set steps need that start: from zero multipliers on a
#: working set of several times (C - 1)·d rows they cycle (teacher and soft-support data with V = 6-9, d = 4-8:
#: 60 steps without settling).
ROWS_MAX = 8_000
#: The row space's proximal regularisation, relative to the largest diagonal entry of its Gram.
ROWS_RHO = 1e-9
#: Rounds of iterative refinement (proximal-point steps) of each row-space solve.
ROWS_REFINE = 4
#: Up to this many token classes (and no in-support equations) a working set's QP goes to the dense interior
#: point (:func:`_ipm_qp`) when it has more rows than (C - 1)·d, and the first one when no dual start is given;
#: its normal matrix is formed by class pairs, at most C(C - 1)/2 of them.
IPM_MAX_CLASSES = 80
#: ... and at most this many unknowns C·d (its normal matrix is a dense (C·d, C·d) array: 288 MB here).
IPM_MAX_VARS = 6_000
#: Interior-point steps per QP (a budget of work).
IPM_STEPS = 80
#: Regularisation of the interior point's normal equations, relative to their largest diagonal entry.
IPM_REG = 1e-13
#: The interior point's residuals and complementarity (relative to the objective) are driven below this; the
#: crossover to the row space's active-set steps does the rest.
IPM_TOL = 1e-8
#: Active-set steps per working set in the row space before it gives way to Clarabel.
ROWS_STEPS = 40


def solve(system: KeslerSystem, *, tol: float = 1e-9, time_limit: float | None = None, verbose: bool = False,
          progress: bool = False, max_rounds: int = MAX_ROUNDS, start: np.ndarray | None = None,
          dual: np.ndarray | None = None) -> SVMSolution:
    r"""Solve the NTP-SVM of ``system`` by the working set of the module doc. ``time_limit`` caps each
    Clarabel (or DAQP) solve (a user's cap: it can only end the run as a :class:`SolverError`). ``start``, a
    boolean array of shape (m, C) over the token classes (:class:`~ntpcert.solve.structured.classes.TokenClasses`),
    is the first working set in place of the most frequent classes (the structured solver passes the margins
    its coordinate ascent found active); entries inside a support are ignored. ``dual``, of the same shape, is
    a dual over the classes (rows of the structured solver's A, :math:`n_c w_c = \sum_j a_{j,c} h_j`) whose
    multipliers start the row space's first round (:func:`_rows`). Raises
    :class:`InfeasibleError` when a working set is already infeasible (Clarabel's or DAQP's claim;
    not checked here) and :class:`SolverError` when ``max_rounds`` rounds leave a margin violated."""
    import scipy.sparse as sp

    from ntpcert.rows.kesler import sparse_rows
    from ntpcert.solve.structured.classes import class_instance

    t0 = time.perf_counter()
    inst = system.instance
    classes, red = class_instance(inst)
    rs = KeslerSystem.build(red)
    C, d, m = red.V, red.d, red.m
    H = red.embeddings
    n_c = classes.sizes.astype(np.float64)
    A_mar = sparse_rows(H, C, rs.mar_context, rs.mar_anchor, rs.mar_token).tocsr()
    A_eq = sparse_rows(H, C, rs.eq_context, rs.eq_token, rs.eq_anchor).tocsr()
    q = A_mar.shape[0]
    # the first working set: per context, the competing classes in the most supports
    popularity = red.support_mask().sum(axis=0)
    score = popularity[rs.mar_token] + 1e-9 * np.arange(q)[::-1]
    work = np.zeros(q, dtype=bool)
    if start is not None:
        start = np.asarray(start, dtype=bool)
        if start.shape != (m, C):
            raise ValueError(f"start: expected shape (m, C) = ({m}, {C}), got {start.shape}")
        work[start[rs.mar_context, rs.mar_token]] = True
    else:
        order = np.lexsort((-score, rs.mar_context))
        starts = np.searchsorted(rs.mar_context[order], np.arange(m))
        rank = np.arange(q) - np.repeat(starts, np.diff(np.append(starts, q)))
        work[order[rank < START_PER_CONTEXT]] = True
    if C * d <= DENSE_MAX_VARS:
        return _dense(system, classes, rs, A_mar, A_eq, n_c, work, tol, max_rounds, progress, t0, time_limit,
                      start is None)
    ipm = rs.eq_context.size == 0 and C <= IPM_MAX_CLASSES and C * d <= IPM_MAX_VARS
    if (dual is not None or ipm) and rs.eq_context.size + int(work.sum()) <= ROWS_MAX:
        try:
            return _rows(system, classes, rs, A_mar, n_c, work, tol, max_rounds, progress, t0, dual, time_limit)
        except _RowsStalled as why:  # Clarabel goes on from the working set reached (its multipliers unused)
            if progress:
                import sys
                sys.stderr.write(f"active-set: {why}; Clarabel goes on\n")
    import clarabel

    P = sp.diags(np.repeat(n_c, d)).tocsc()
    settings = clarabel.DefaultSettings()
    settings.verbose = verbose
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tol
    if time_limit is not None:
        settings.time_limit = float(time_limit)
    iters = 0
    for rnd in range(1, int(max_rounds) + 1):
        rows = np.flatnonzero(work)
        A = sp.vstack([A_eq, -A_mar[rows]], format="csc")
        b = np.r_[np.zeros(A_eq.shape[0]), -np.ones(rows.size)]
        cones = ([clarabel.ZeroConeT(A_eq.shape[0])] if A_eq.shape[0] else []) + [clarabel.NonnegativeConeT(rows.size)]
        try:
            sol = clarabel.DefaultSolver(P, np.zeros(C * d), A, b, cones, settings).solve()
        except BaseException as err:  # the Rust extension raises PanicException (a BaseException)
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            raise SolverError(f"active-set: clarabel: {err}") from err
        status = str(sol.status)
        iters += int(sol.iterations)
        if "PrimalInfeasible" in status:
            raise InfeasibleError(f"active-set: clarabel: {status} on a working set of {rows.size} margins "
                                  "(the data are not NTP-separable)")
        if status not in ("Solved", "AlmostSolved"):
            raise SolverError(f"active-set: clarabel stopped with status {status} in round {rnd}")
        x = np.asarray(sol.x)
        margins = A_mar @ x
        bad = _violated(margins, tol, progress, f"round {rnd}, working set {rows.size}, {int(sol.iterations)} "
                                                "iterations", t0)
        if not bad.any():
            z = np.asarray(sol.z)
            return _solution(system, classes, rs, x.reshape(C, d), z[:A_eq.shape[0]], rows, z[A_eq.shape[0]:],
                             t0, iters, rnd, int(rows.size))
        if not (bad & ~work).any():
            raise SolverError(f"active-set: round {rnd} leaves margins below 1 inside its own working set")
        _grow(work, bad, margins, rs.mar_context, m)
    raise SolverError(f"active-set: {max_rounds} rounds leave margins below 1 (working set {int(work.sum())} "
                      f"of {q} margins)")


class _RowsStalled(Exception):
    """The row-space engine's steps did not settle (or its working set outgrew :data:`ROWS_MAX`)."""


def _rows(system, classes, rs, A_mar, n_c, work, tol, max_rounds, progress, t0, dual=None,
          time_limit=None) -> SVMSolution:
    r"""The working set's rounds with each QP solved in the space of its rows (:data:`ROWS_MAX`).

    With the rows :math:`a_r = (e_{u_r} - e_{v_r})\otimes h_{j_r}` of the equations (free multipliers, target 0)
    and of the working set's margins (multipliers :math:`\nu_r \ge 0`, target 1), and their Gram
    :math:`Q_{rr'} = a_r^\top N^{-1} a_{r'}` (:func:`~ntpcert.solve.structured.polish.row_gram`, N the class sizes
    repeated d times), the working set's dual is the bound-constrained QP

    .. math:: \min_\nu\ \tfrac12\nu^\top Q\nu - t^\top\nu \quad\text{s.t.}\quad \nu_r \ge 0 \text{ on margins,}

    with :math:`Nw = \sum_r \nu_r a_r`. It is solved by primal-dual active-set steps (Hintermüller, Ito and
    Kunisch 2002): the free rows' system :math:`Q_{FF}\nu_F = t_F` is solved by a Cholesky factor of
    :math:`Q_{FF} + \rho I` (:data:`ROWS_RHO` times the largest diagonal entry) and :data:`ROWS_REFINE` rounds of
    iterative refinement, which is the proximal-point iteration: it converges to the solution where
    :math:`Q_{FF}` is regular and stays bounded along its null space where it is not (more free rows than the
    (C - 1)·d dimensions of W, or a degenerate set). A margin leaves the free set when its multiplier turns
    negative and joins it when its gradient :math:`(Q\nu - t)_r` does; the steps end when the sets repeat. A user's
    ``time_limit`` is read between rounds and ends the run as a :class:`SolverError`.
    Each step costs one Cholesky factorisation of the free rows (against an interior-point solve of the C·d
    unknowns by Clarabel: teacher data, V = 50, m = 4,000, d = 64, 7 s per round)."""
    import scipy.linalg as sla

    from ntpcert.solve.structured.polish import row_gram

    C, d, m = rs.instance.V, rs.instance.d, rs.instance.m
    H = rs.instance.embeddings
    ne = rs.eq_context.size
    nu_mar = np.zeros(rs.n_margin)  # the last round's multipliers: the next round starts from them
    nu_eq = np.zeros(ne)
    if dual is not None:  # b_{c,j} = -nu/n_c on a margin (j, c), +nu/n_c on an equation's token class
        dual = np.asarray(dual, dtype=np.float64)
        if dual.shape != (m, C):
            raise ValueError(f"dual: expected shape (m, C) = ({m}, {C}), got {dual.shape}")
        nu_mar = np.maximum(-dual[rs.mar_context, rs.mar_token] * n_c[rs.mar_token], 0.0)
        nu_eq = dual[rs.eq_context, rs.eq_token] * n_c[rs.eq_token]
    steps, engine = 0, "rows"
    for rnd in range(1, int(max_rounds) + 1):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise SolverError(f"active-set: time limit of {time_limit:g} s reached in round {rnd} (row space)")
        rows = np.flatnonzero(work)
        if ne + rows.size > ROWS_MAX:
            raise _RowsStalled(f"round {rnd}: working set of {rows.size} margins, more than the row space's "
                               f"{ROWS_MAX} rows")
        j = np.concatenate([rs.eq_context, rs.mar_context[rows]])
        u = np.concatenate([rs.eq_token, rs.mar_anchor[rows]])
        v = np.concatenate([rs.eq_anchor, rs.mar_token[rows]])
        t = np.concatenate([np.zeros(ne), np.ones(rows.size)])
        is_mar = np.arange(j.size) >= ne
        Q = row_gram(H, j, u, v, n_c)
        if not np.all(np.isfinite(Q)):
            raise _RowsStalled("the rows' Gram overflows")
        if ne:  # dependent equations (contexts of one support pair spanning fewer dimensions) make every free set
            # singular: only a maximal independent set of them is kept (the others hold with it; multipliers 0)
            keep = np.r_[_independent(Q[:ne, :ne]), np.arange(ne, j.size)]
            Q, t, is_mar = Q[np.ix_(keep, keep)], t[keep], is_mar[keep]
            j, u, v = j[keep], u[keep], v[keep]
            kept_eq = keep[:np.count_nonzero(~is_mar)]
        else:
            kept_eq = np.zeros(0, np.int64)
        if ne == 0 and C <= IPM_MAX_CLASSES and C * d <= IPM_MAX_VARS and \
                ((rnd == 1 and dual is None) or rows.size > (C - 1) * d):
            # no start, or a working set of more rows than dimensions (the active-set steps cycle there, from
            # the start or once the new margins join): this round by the interior point
            nu, k = _ipm_qp(H, j, u, v, n_c, Q, t0, time_limit)
            engine = "ipm+rows"
        else:
            nu, k = _bounded_qp(Q, t, is_mar, np.concatenate([nu_eq[kept_eq], nu_mar[rows]]))
        steps += k
        if nu is None:
            raise _RowsStalled(f"round {rnd}: the active-set steps cycled or did not settle in {ROWS_STEPS}")
        nu = np.where(is_mar, np.maximum(nu, 0.0), nu)
        nu_eq = np.zeros(ne)
        nu_eq[kept_eq] = nu[:kept_eq.size]
        nu_mar[rows] = nu[kept_eq.size:]
        Wc = _row_sum(nu, u, v, H[j], C) / n_c[:, None]
        margins = A_mar @ Wc.ravel()
        bad = _violated(margins, tol, progress, f"round {rnd}, working set {rows.size}, {steps} row-space steps", t0)
        if not bad.any():
            return _solution(system, classes, rs, Wc, nu_eq, rows, nu_mar[rows], t0, steps, rnd, int(rows.size),
                             engine=engine)
        if not (bad & ~work).any():
            raise _RowsStalled(f"round {rnd} leaves margins below 1 inside its own working set")
        _grow(work, bad, margins, rs.mar_context, m)
    raise SolverError(f"active-set: {max_rounds} rounds leave margins below 1 (working set {int(work.sum())} "
                      f"of {rs.n_margin} margins)")


def _ipm_qp(H: np.ndarray, j: np.ndarray, u: np.ndarray, v: np.ndarray, n_c: np.ndarray, Q: np.ndarray,
            t0: float, time_limit: float | None) -> tuple[np.ndarray, int]:
    r"""The multipliers of one working set's QP :math:`\min\tfrac12\sum_c n_c\|w_c\|^2` s.t.
    :math:`(w_{u_r} - w_{v_r})^\top h_{j_r} \ge 1` (margin rows only), by a dense primal-dual interior point
    in the C·d unknowns and a crossover; ``Q`` is the rows' Gram (:func:`~ntpcert.solve.structured.polish.row_gram`).

    In the scaled unknowns :math:`x = \sqrt{n}\odot w` the QP is :math:`\min\tfrac12\|x\|^2` s.t.
    :math:`Bx \ge 1`. Mehrotra's predictor-corrector steps solve the normal equations
    :math:`(I + B^\top D B)\Delta x = r` with :math:`D = ZS^{-1}`, and :math:`B^\top DB` is formed block by
    block: a row of context j between classes u and v adds :math:`D_r h_jh_j^\top` to the blocks (u, u)/n_u and
    (v, v)/n_v and subtracts it from (u, v) and (v, u) over :math:`\sqrt{n_un_v}`, so the matrix costs
    :math:`O(Rd^2)` and each step one Cholesky factorisation of C·d unknowns (against Clarabel's sparse
    factorisation of the whole KKT system: teacher data, V = 10, m = 4,000, d = 256, 16 s a round). Once the
    residuals and the complementarity are below :data:`IPM_TOL` the crossover takes over: the row space's
    active-set steps (:func:`_bounded_qp`) from the interior point's multipliers, which give them to rounding
    (the last interior-point steps are ill-conditioned, D spanning 1e-20..1e20). Steps are counted
    (:data:`IPM_STEPS`); a user's ``time_limit`` is read between them. Raises :class:`_RowsStalled` when either
    part does not converge."""
    import scipy.linalg as sla

    C, d = n_c.size, H.shape[1]
    n = C * d
    s_cls = 1.0 / np.sqrt(n_c)
    Hr = H[j]
    R = j.size
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    order = np.lexsort((hi, lo))
    pair = lo[order] * C + hi[order]
    groups = [(g, Hr[g]) for g in np.split(order, np.flatnonzero(np.diff(pair)) + 1)]
    # B is 0 on the d directions x_c = sqrt(n_c) y (every row is (e_u - e_v) h_j^T): there M is I while B^T D B
    # grows like 1/mu, so those directions are lifted to M's scale (x stays 0 on them, where it starts)
    lift_dirs = np.einsum("a,b,ij->aibj", np.sqrt(n_c), np.sqrt(n_c), np.eye(d)).reshape(n, n) / float(n_c.sum())

    def Bx(x):
        X = x.reshape(C, d) * s_cls[:, None]
        return np.einsum("ij,ij->i", Hr, X[u] - X[v])

    def Btz(z):
        return (_row_sum(z, u, v, Hr, C) * s_cls[:, None]).ravel()

    def normal(D):
        M = np.zeros((n, n))
        Mv = M.reshape(C, d, C, d)
        for g, Hg in groups:
            a, b = lo[g[0]], hi[g[0]]
            P = (Hg.T * D[g]) @ Hg
            Mv[a, :, a, :] += P / n_c[a]
            Mv[b, :, b, :] += P / n_c[b]
            Mv[a, :, b, :] -= P * (s_cls[a] * s_cls[b])
            Mv[b, :, a, :] -= P * (s_cls[a] * s_cls[b])
        top = float(np.diag(M).max()) + 1.0
        M += top * lift_dirs
        M.flat[::n + 1] += 1.0 + IPM_REG * top  # the identity of the objective, and a relative regularisation
        return M

    x, sl, z = np.zeros(n), np.ones(R), np.ones(R)
    for k in range(1, IPM_STEPS + 1):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise SolverError(f"active-set: time limit of {time_limit:g} s reached (interior point)")
        r_d = x - Btz(z)
        r_p = Bx(x) - sl - 1.0
        mu = float(sl @ z) / R
        # the crossover needs the active set, not the multipliers to rounding: the dual residual is held loosely
        if np.abs(r_p).max() <= IPM_TOL and np.abs(r_d).max() <= 1e3 * IPM_TOL * max(1.0, np.abs(x).max()) \
                and mu * R <= IPM_TOL * max(1.0, 0.5 * float(x @ x)):
            break
        D = z / sl
        try:
            factor = sla.cho_factor(normal(D), check_finite=False)
        except (np.linalg.LinAlgError, ValueError) as err:
            raise _RowsStalled(f"interior point: normal equations not positive definite ({err})") from None

        def step(r_c):
            dx = sla.cho_solve(factor, -r_d - Btz(D * (r_p + r_c / z)), check_finite=False)
            dz = -D * (r_p + r_c / z + Bx(dx))
            return dx, -(r_c + sl * dz) / z, dz

        def longest(val, dv):
            neg = dv < 0
            return min(1.0, float((-val[neg] / dv[neg]).min())) if neg.any() else 1.0

        dx, ds, dz = step(sl * z)
        a_aff = min(longest(sl, ds), longest(z, dz))
        sigma = (float((sl + a_aff * ds) @ (z + a_aff * dz)) / R / mu) ** 3
        dx, ds, dz = step(sl * z + ds * dz - sigma * mu)
        alpha = 0.99 * min(longest(sl, ds), longest(z, dz))
        x, sl, z = x + alpha * dx, sl + alpha * ds, z + alpha * dz
    else:
        raise _RowsStalled(f"the interior point did not converge in {IPM_STEPS} steps")
    nu, steps = _bounded_qp(Q, np.ones(R), np.ones(R, dtype=bool), z)
    if nu is None:
        raise _RowsStalled("the crossover from the interior point did not settle")
    return nu, k + steps


def _row_sum(nu: np.ndarray, u: np.ndarray, v: np.ndarray, Hr: np.ndarray, C: int) -> np.ndarray:
    r""":math:`\sum_r \nu_r (e_{u_r} - e_{v_r}) h_r^\top` of shape (C, d), for rows ``Hr`` of shape (R, d)."""
    X = np.zeros((C, Hr.shape[1]))
    np.add.at(X, u, nu[:, None] * Hr)
    np.add.at(X, v, -nu[:, None] * Hr)
    return X


def _independent(G: np.ndarray) -> np.ndarray:
    """Indices of a maximal independent set of the rows whose Gram is G (positive semi-definite), by a pivoted
    Cholesky factorisation (LAPACK's dpstrf) with a tolerance of 1e-10 times the largest diagonal entry."""
    from scipy.linalg import lapack

    if G.shape[0] == 0:
        return np.zeros(0, np.int64)
    _, piv, rank, info = lapack.dpstrf(G, lower=1, tol=1e-10 * max(float(np.diag(G).max()), np.finfo(float).tiny))
    if info < 0:
        raise _RowsStalled(f"the equations' pivoted Cholesky failed (info {info})")
    return np.sort(piv[:rank] - 1).astype(np.int64)


def _bounded_qp(Q: np.ndarray, t: np.ndarray, is_mar: np.ndarray, nu: np.ndarray) -> tuple[np.ndarray | None, int]:
    r""":math:`\min \tfrac12\nu^\top Q\nu - t^\top\nu` over :math:`\nu_r \ge 0` where ``is_mar`` (Q positive
    semi-definite), from ``nu``, by primal-dual active-set steps (see :func:`_rows`). The first bound set holds
    the margins whose coordinate Newton step from ``nu`` ends at or below 0. Returns the point and the steps
    taken, or None when the steps cycle or :data:`ROWS_STEPS` of them do not settle."""
    import scipy.linalg as sla

    nu = np.where(is_mar, np.maximum(nu, 0.0), nu)
    rho = ROWS_RHO * max(float(np.diag(Q).max(initial=0.0)), np.finfo(float).tiny)
    g = Q @ nu - t
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = is_mar & (nu - g / np.diag(Q) <= 0)
    seen = set()
    for k in range(1, ROWS_STEPS + 1):
        F = np.flatnonzero(~bound)
        QFF = Q[np.ix_(F, F)]
        QFF.flat[::F.size + 1] += rho
        try:
            factor = sla.cho_factor(QFF, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return None, k
        QFF.flat[::F.size + 1] -= rho
        x = nu[F]
        for _ in range(ROWS_REFINE):
            x = x + sla.cho_solve(factor, t[F] - QFF @ x, check_finite=False)
        nu = np.zeros_like(nu)
        nu[F] = x
        g = Q @ nu - t
        scale = max(1.0, float(np.abs(nu).max(initial=0.0)))
        new = is_mar & ((bound & (g >= 0)) | (~bound & (nu <= 1e-14 * scale)))
        if np.array_equal(new, bound):
            return nu, k
        key = np.flatnonzero(new).tobytes()
        if key in seen:  # the steps cycle
            return None, k
        seen.add(key)
        bound = new
    return None, ROWS_STEPS


def _violated(margins: np.ndarray, tol: float, progress: bool, what: str, t0: float) -> np.ndarray:
    """The margins below 1 (to ``tol``, relative to the largest), with a progress line on stderr."""
    if progress:
        import sys
        sys.stderr.write(f"active-set: {what}, smallest margin {float(margins.min(initial=np.inf)):.6g}, "
                         f"{time.perf_counter() - t0:.1f} s\n")
    return margins < 1.0 - 10 * tol * max(1.0, float(np.abs(margins).max(initial=0.0)))


def _grow(work: np.ndarray, bad: np.ndarray, margins: np.ndarray, context: np.ndarray, m: int) -> None:
    """Add each context's :data:`ADD_PER_CONTEXT` most violated margins outside ``work`` to it (in place)."""
    cand = np.flatnonzero(bad & ~work)
    o = cand[np.lexsort((margins[cand], context[cand]))]
    st = np.searchsorted(context[o], np.arange(m))
    rk = np.arange(o.size) - np.repeat(st, np.diff(np.append(st, o.size)))
    work[o[rk < ADD_PER_CONTEXT]] = True


def _dense(system, classes, rs, A_mar, A_eq, n_c, work, tol, max_rounds, progress, t0,
           time_limit=None, all_rows: bool = True) -> SVMSolution:
    r"""The working set's rounds with each QP solved densely (:data:`DENSE_MAX_VARS`). In the scaled unknowns
    :math:`x = \sqrt{n}\odot w` the objective is :math:`\tfrac12\|x\|^2`; the equalities are eliminated by
    an orthonormal basis Z of the null space of :math:`A_{eq}\,\mathrm{diag}(n)^{-1/2}` (an SVD), so each round
    is the least-distance problem :math:`\min\tfrac12\|u\|^2` s.t. :math:`Bu\ge 1`,
    :math:`B = A_{mar}[\mathcal W]\,\mathrm{diag}(n)^{-1/2}Z`, which DAQP solves with its multipliers y
    (:math:`u = B^\top y`). The equality multipliers are then the least-squares solution of the stationarity
    :math:`n\odot w = A_{mar}^\top y + A_{eq}^\top\lambda`; the pair is checked as every solution is."""
    import daqp
    import scipy.sparse as sp

    C, d, m = rs.instance.V, rs.instance.d, rs.instance.m
    s = np.repeat(1.0 / np.sqrt(n_c), d)
    Eq = A_eq.toarray() * s
    if Eq.shape[0]:
        _, S, Vt = np.linalg.svd(Eq, full_matrices=Eq.shape[0] < Eq.shape[1])  # Vt square either way
        rank = int(np.count_nonzero(S > S[0] * max(Eq.shape) * np.finfo(float).eps)) if S.size else 0
        Z = Vt[rank:].T
    else:
        Z = np.eye(C * d)
    if all_rows and rs.n_margin * Z.shape[1] <= DENSE_ALL_CELLS:
        work[:] = True
    iters = 0
    lam_all = np.zeros(rs.n_margin)  # the last round's multipliers, DAQP's warm start (its signs: the active set)
    for rnd in range(1, int(max_rounds) + 1):
        rows = np.flatnonzero(work)
        B = (A_mar[rows] @ sp.diags(s)) @ Z
        cap = 0 if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - t0))  # DAQP: 0 is none
        u, _, flag, info = daqp.solve(np.eye(Z.shape[1]), np.zeros(Z.shape[1]), np.ascontiguousarray(B),
                                      np.full(rows.size, np.inf), np.ones(rows.size), np.zeros(rows.size, np.intc),
                                      primal_tol=tol, iter_limit=100_000, time_limit=cap,
                                      dual_start=np.ascontiguousarray(lam_all[rows]))
        iters += int(info.get("iterations", 0))
        lam_all[rows] = np.asarray(info["lam"], dtype=np.float64)
        if flag == -1:
            raise InfeasibleError(f"active-set: DAQP: infeasible on a working set of {rows.size} margins (the data "
                                  "are not NTP-separable)")
        if flag not in (1, 2):
            raise SolverError(f"active-set: DAQP stopped with exit flag {flag} in round {rnd}")
        w = s * (Z @ np.asarray(u))
        margins = A_mar @ w
        bad = _violated(margins, tol, progress, f"round {rnd}, working set {rows.size}, DAQP "
                                                f"{info.get('iterations')} iterations", t0)
        if not bad.any():
            y = np.abs(np.asarray(info["lam"], dtype=np.float64))
            if np.abs(B.T @ y - u).max() > 1e-6 * max(1.0, np.abs(u).max()):  # |lam|: DAQP signs lower bounds
                raise SolverError("active-set: DAQP's multipliers do not give its point (u = B^T y)")
            g = np.repeat(n_c, d) * w - A_mar[rows].T @ y
            lam = np.linalg.lstsq(A_eq.T.toarray(), g, rcond=None)[0] if A_eq.shape[0] else np.zeros(0)
            return _solution(system, classes, rs, w.reshape(C, d), lam, rows, y, t0, iters, rnd, int(rows.size),
                             engine="daqp")
        if not (bad & ~work).any():
            raise SolverError(f"active-set: round {rnd} leaves margins below 1 inside its own working set")
        _grow(work, bad, margins, rs.mar_context, m)
    raise SolverError(f"active-set: {max_rounds} rounds leave margins below 1 (working set {int(work.sum())} "
                      f"of {rs.n_margin} margins)")


def _solution(system, classes, rs, Wc, z_eq, rows, z_mar, t0, iters, rounds, size,
              engine: str = "clarabel") -> SVMSolution:
    """The token-level pair of the class-level solve (module doc), checked by ``from_primal_dual``."""
    y = np.zeros(rs.n_margin)
    y[rows] = z_mar
    n_c = classes.sizes.astype(np.float64)
    H = rs.instance.embeddings
    Ym = rs.margin_coefficients(y)
    Le = rs.eq_coefficients(z_eq) if z_eq.size else np.zeros_like(Ym)
    target = n_c[:, None] * Wc
    a_c = Ym - Le if np.abs((Ym - Le) @ H - target).max() <= np.abs((Ym + Le) @ H - target).max() else Ym + Le
    of = classes.of_token
    W = Wc[of]
    a = a_c[of] / n_c[of][:, None]
    return SVMSolution.from_primal_dual(system, W, a, solver="active-set", status="Solved",
                                        seconds=time.perf_counter() - t0, iterations=iters,
                                        info={"rounds": rounds, "working_set": size, "classes": int(n_c.size),
                                              "engine": engine})
