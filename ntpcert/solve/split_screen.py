r"""The split P / N by small LPs: one-token screens for P, one LP on the rest for N (float64).

The single LP of :mod:`ntpcert.solve.split` has a row per out-of-support pair and C·d unknowns; on a
model's data (m of several hundred, C of a few hundred classes, d = 64) that is 10^5 rows, which the
simplex does not finish in minutes. Three facts let small LPs do the same work.

1. **Sub-cones of K give P.** A point of K with only one non-zero row is cheap to find. Lowering one
   token, :math:`D = -e_v c^\top`, lies in K iff :math:`c^\top h_j \ge 0` for :math:`j \notin J_v`,
   :math:`c^\top h_j \le 0` for the contexts whose support is :math:`\{v\}` and :math:`= 0` where v shares
   a larger support (:math:`J_v`: the contexts whose support holds v); its margin on the pair (j, v) is
   :math:`c^\top h_j`. Raising one token, :math:`D = e_z c^\top`, lies in K iff :math:`c^\top h_j \ge 0`
   where the support is :math:`\{z\}`, :math:`= 0` where z shares a larger one and :math:`\le 0` for
   :math:`j \notin J_z`; its margin on every pair (j, u) of a context with support :math:`\{z\}` is
   :math:`c^\top h_j`. Raising a whole support S the same way, :math:`D = 1_S c^\top` lies in K iff
   :math:`c^\top h_j \ge 0` where :math:`S_j \subseteq S`, :math:`= 0` where :math:`S_j` meets S only in
   part and :math:`\le 0` where it misses S; its margin on (j, u), :math:`S_j \subseteq S \not\ni u`, is
   :math:`c^\top h_j`. Each is an LP of m rows in d unknowns (the binary "separable part" LP), and often
   none is needed: with a direction u of :math:`H u > 0`, the projection of u off the :math:`h_j` of
   :math:`J_v` lowers v on every other context where it stays positive. A sum of points of K is in K, so
   the sum of the screens' points is one :math:`D \in K` positive on every pair they found.
2. **N lives on what is left.** Every vanishing combination :math:`y \ge 0` (module doc of
   :mod:`ntpcert.solve.split`) is 0 on every pair that some point of K makes positive, since
   :math:`0 = \sum_i y_i\,\mathrm{margin}_i(D)` is a sum of non-negative terms. So N is found by the dual
   LP on the pairs U the screens left, with unknowns :math:`y_U \ge 0`, the free in-support multipliers
   :math:`\lambda` and :math:`0 \le s \le \min(y, 1)`: maximise :math:`\sum s` subject to
   :math:`\sum_U y_{jv} (e_{z_j} - e_v) h_j^\top + \sum \lambda (e_z - e_{z_j}) h_j^\top = 0`. By
   Goldman–Tucker its optimum has s = 1 exactly on N (a sum of the certificates of each N pair is one),
   and s = 0 on the pairs of U that are in P.
3. **The rest of U needs a point of K.** For the pairs R of U left in P, the LP of :mod:`ntpcert.solve.split`
   is solved with D restricted to the rows of the tokens T that R touches (its tokens and its contexts'
   supports), and t only on R: a point of a sub-cone of K again, with about m·|T| rows.

Nothing here trusts a tolerance for a verdict: every point and multiplier comes back as a
:class:`~ntpcert.solve.split.Split`, which :mod:`ntpcert.exact.split` makes exact; a pair that no step
settles leaves the split undetermined, naming how many. Work is bounded by simplex iterations per LP.
"""

from __future__ import annotations

import numpy as np

from ntpcert.instance import NTPInstance

#: Simplex iterations HiGHS may spend on one screening LP (a budget of work).
SCREEN_MAX_ITERATIONS = 200_000
#: Upper bound on each multiplier y of the dual LP: keeps its vertex well scaled, so that its support is
#: read off cleanly when it is made exact (a certificate with y in [1, Y_MAX] on N exists unless N's
#: multipliers must spread over more than this ratio, when the split is left undetermined).
Y_MAX = 1e3
#: Relative size below which a float margin is read as 0 (and a negative one beyond it as leaving K).
ZERO_TOL = 1e-9


def _linprog(**kw):
    from scipy.optimize import linprog

    return linprog(method="highs-ds", **kw)


def _part_lp(G_pos: np.ndarray, want: np.ndarray, G_le: np.ndarray, G_eq: np.ndarray, max_iterations: int):
    r"""The binary separable-part LP: a c with :math:`G_{pos} c \ge 0` (:math:`\ge t`, t in [0, 1], on the rows
    flagged ``want``, maximising :math:`\sum t`), :math:`G_{le} c \le 0`, :math:`G_{eq} c = 0`. Returns
    ``(c, achieved)``: c scaled so that every achieved wanted row is >= 1 (None when HiGHS fails or
    nothing is achieved), ``achieved`` a mask over the rows of ``G_pos``."""
    import scipy.sparse as sp

    p, d = G_pos.shape
    w = np.flatnonzero(want)
    nt = w.size
    T = sp.csr_matrix((np.ones(nt), (w, np.arange(nt))), shape=(p, nt))
    A_ub = sp.vstack([sp.hstack([sp.csr_matrix(-G_pos), T]),
                      sp.hstack([sp.csr_matrix(G_le), sp.csr_matrix((G_le.shape[0], nt))])], format="csr")
    A_eq = sp.hstack([sp.csr_matrix(G_eq), sp.csr_matrix((G_eq.shape[0], nt))], format="csr") if len(G_eq) else None
    res = _linprog(c=np.r_[np.zeros(d), -np.ones(nt)], A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq,
                   b_eq=np.zeros(len(G_eq)) if len(G_eq) else None, bounds=[(None, None)] * d + [(0.0, 1.0)] * nt,
                   options={"presolve": True, "maxiter": int(max_iterations)})
    achieved = np.zeros(p, dtype=bool)
    if res.status != 0 or res.x is None:
        return None, achieved
    return _accept(res.x[:d], G_pos, want, G_le, G_eq)


def _accept(c: np.ndarray, G_pos, want, G_le, G_eq):
    """``(c scaled, achieved)`` when c satisfies the part's constraints to :data:`ZERO_TOL` (else
    ``(None, nothing)``): achieved are the wanted rows where it is clearly positive."""
    achieved = np.zeros(G_pos.shape[0], dtype=bool)
    g = G_pos @ c
    scale = max(np.abs(g).max(initial=0.0), np.abs(G_le @ c).max(initial=0.0), np.abs(G_eq @ c).max(initial=0.0))
    if scale == 0.0:
        return None, achieved
    tol = ZERO_TOL * scale
    if np.any(g < -tol) or np.any(G_le @ c > tol) or np.any(np.abs(G_eq @ c) > tol):
        return None, achieved
    achieved = want & (g > 1e3 * tol)
    if not achieved.any():
        return None, achieved
    return c / g[achieved].min(), achieved


def _positive_direction(H: np.ndarray, max_iterations: int) -> np.ndarray | None:
    r"""A central u with H u > 0 when one exists (None otherwise): the u of :math:`|u|_\infty \le 1`
    maximising :math:`\min_j h_j^\top u`, whose projections off a few :math:`h_j` stay positive longest."""
    m, d = H.shape
    A = np.hstack([-H, np.ones((m, 1))])
    res = _linprog(c=np.r_[np.zeros(d), -1.0], A_ub=A, b_ub=np.zeros(m), bounds=[(-1.0, 1.0)] * d + [(None, None)],
                   options={"presolve": True, "maxiter": int(max_iterations)})
    if res.status != 0 or res.x is None or res.x[d] <= 0:
        return None
    return np.asarray(res.x[:d])


def screen(red: NTPInstance, *, max_iterations: int = SCREEN_MAX_ITERATIONS):
    r"""The one-token screens of the module doc on ``red`` (one token per class). Returns ``(covered, D)``:
    ``covered`` the (m, C) mask of the out-of-support pairs found in P, D of shape (C, d) in K with margin
    >= 1 (about) on each of them."""
    H = red.embeddings
    m, d = H.shape
    C = red.V
    mask = red.support_mask()
    k = mask.sum(axis=1)
    single = k == 1
    covered = np.zeros((m, C), dtype=bool)
    D = np.zeros((C, d))
    u = _positive_direction(H, max_iterations)
    for v in range(C):
        J = mask[:, v]
        want = ~J & ~covered[:, v]
        if not want.any():
            continue
        G_pos, G_le, G_eq = H[~J], H[J & single], H[J & ~single]
        w = want[~J]
        c, got = None, np.zeros(w.size, dtype=bool)
        if u is not None:
            HJ = H[J]
            cu = u - HJ.T @ np.linalg.lstsq(HJ @ HJ.T, HJ @ u, rcond=None)[0] if J.any() else u
            c, got = _accept(cu, G_pos, w, G_le, G_eq)
        if c is None or not np.array_equal(got, w):
            c2, got2 = _part_lp(G_pos, w, G_le, G_eq, max_iterations)
            if c2 is not None and got2.sum() > got.sum():
                c, got = c2, got2
        if c is not None:
            D[v] -= c
            covered[np.flatnonzero(~J)[got], v] = True
    # raise each support S that still has uncovered pairs: D = 1_S c^T
    left = np.flatnonzero(((covered | mask).sum(axis=1) < C))
    supports = {}
    for j in left:
        supports.setdefault(tuple(np.flatnonzero(mask[j])), []).append(j)
    for S in supports:
        inS = np.zeros(C, dtype=bool)
        inS[list(S)] = True
        sub = (mask & ~inS).sum(axis=1) == 0           # S_j' inside S
        meet = (mask & inS).any(axis=1)
        rows = sub
        want = np.zeros(m, dtype=bool)
        want[supports[S]] = True
        want &= rows
        c, got = _part_lp(H[rows], want[rows], H[~meet], H[meet & ~sub], max_iterations)
        if c is not None:
            D[list(S)] += c
            js = np.flatnonzero(rows)[got]
            covered[js] |= ~inS[None, :] & ~mask[js]
    return covered, D


def _pair_rows(red: NTPInstance, pairs: np.ndarray, anchor: np.ndarray, eqs: np.ndarray):
    """The columns :math:`\\mathrm{vec}((e_{z_j} - e_v) h_j^\\top)` of the pairs and
    :math:`\\mathrm{vec}((e_z - e_{z_j}) h_j^\\top)` of the in-support equalities, as a sparse (C·d, n) matrix."""
    import scipy.sparse as sp

    H = red.embeddings
    d = H.shape[1]
    plus = np.r_[anchor[pairs[:, 0]], eqs[:, 1]].astype(np.int64)
    minus = np.r_[pairs[:, 1], anchor[eqs[:, 0]]].astype(np.int64)
    ctx = np.r_[pairs[:, 0], eqs[:, 0]].astype(np.int64)
    n = ctx.size
    cols = np.repeat(np.arange(n), 2 * d)
    rows = np.concatenate([plus[:, None] * d + np.arange(d), minus[:, None] * d + np.arange(d)], axis=1).ravel()
    vals = np.concatenate([H[ctx], -H[ctx]], axis=1).ravel()
    return sp.csr_matrix((vals, (rows, cols)), shape=(red.V * d, n))


def nonseparable_dual(red: NTPInstance, U: np.ndarray, *, max_iterations: int = SCREEN_MAX_ITERATIONS):
    r"""The dual LP of the module doc (fact 2) on the class pairs U (rows (j, c)). Returns ``(is_n, a)``:
    ``is_n`` a mask over U (s = 1), a of shape (C, m) the certificate (:math:`\le -1` about on N), or
    ``(None, None)`` when HiGHS fails."""
    import scipy.sparse as sp

    mask = red.support_mask()
    m, C = mask.shape
    anchor = np.argmax(mask, axis=1)
    eqs = np.array([(j, z) for j in range(m) for z in np.flatnonzero(mask[j])[1:]], dtype=np.int64).reshape(-1, 2)
    M = _pair_rows(red, U, anchor, eqs)
    M = M[np.flatnonzero(np.diff(M.indptr) > 0)]
    nu, ne = U.shape[0], eqs.shape[0]
    A_eq = sp.hstack([M, sp.csr_matrix((M.shape[0], nu))], format="csr")
    A_ub = sp.hstack([-sp.identity(nu), sp.csr_matrix((nu, ne)), sp.identity(nu)], format="csr")
    res = _linprog(c=np.r_[np.zeros(nu + ne), -np.ones(nu)], A_ub=A_ub, b_ub=np.zeros(nu), A_eq=A_eq,
                   b_eq=np.zeros(M.shape[0]), bounds=[(0.0, Y_MAX)] * nu + [(None, None)] * ne + [(0.0, 1.0)] * nu,
                   options={"presolve": True, "maxiter": int(max_iterations)})
    if res.status != 0 or res.x is None:
        return None, None
    y, lam, s = res.x[:nu], res.x[nu:nu + ne], res.x[nu + ne:]
    is_n = s > 0.5
    if is_n.any():  # a vertex of {y >= 1 on N, 0 elsewhere, vanishing}: min sum y; rounds well when made exact
        Un = U[is_n]
        Mn = _pair_rows(red, Un, anchor, eqs)
        keep = np.flatnonzero(np.diff(Mn.indptr) > 0)
        nn = Un.shape[0]
        res2 = _linprog(c=np.r_[np.ones(nn), np.zeros(ne)], A_eq=Mn[keep], b_eq=np.zeros(keep.size),
                        bounds=[(1.0, None)] * nn + [(None, None)] * ne,
                        options={"presolve": True, "maxiter": int(max_iterations)})
        if res2.status == 0 and res2.x is not None:
            U, y, lam = Un, res2.x[:nn], res2.x[nn:]
        else:
            U, y = U[is_n], y[is_n]
    else:
        U, y = U[:0], y[:0]
    a = np.zeros((C, m))
    np.add.at(a, (anchor[U[:, 0]], U[:, 0]), y)
    np.add.at(a, (U[:, 1], U[:, 0]), -y)
    if ne:
        np.add.at(a, (eqs[:, 1], eqs[:, 0]), lam)
        np.add.at(a, (anchor[eqs[:, 0]], eqs[:, 0]), -lam)
    return is_n, a


def restricted_point(red: NTPInstance, R: np.ndarray, *, max_iterations: int = SCREEN_MAX_ITERATIONS,
                     max_nonzeros: int = 2_000_000):
    r"""Fact 3 of the module doc: a point of K with non-zero rows only on the tokens T that the class pairs
    R touch, and margin >= 1 (about) on as many of R as it can. Returns ``(got, D)`` (a mask over R and
    D of shape (C, d), or ``(nothing, None)``)."""
    import scipy.sparse as sp

    H = red.embeddings
    m, d = H.shape
    C = red.V
    mask = red.support_mask()
    anchor = np.argmax(mask, axis=1)
    T = np.unique(np.r_[R[:, 1], np.flatnonzero(mask[np.unique(R[:, 0])].any(axis=0))])
    pos = np.full(C, -1)
    pos[T] = np.arange(T.size)
    nT = T.size
    # margin rows (j, a_j, u), u out of S_j, non-trivial when a_j or u is in T; u outside T collapse to one
    r_ctx, r_plus, r_minus = [], [], []
    for j in range(m):
        inT_a = pos[anchor[j]] >= 0
        outs = np.flatnonzero(~mask[j])
        outsT = outs[pos[outs] >= 0]
        if inT_a and outsT.size < outs.size:
            r_ctx.append(j), r_plus.append(anchor[j]), r_minus.append(-1)
        for u in outsT:
            r_ctx.append(j), r_plus.append(anchor[j] if inT_a else -1), r_minus.append(u)
    e_ctx, e_plus, e_minus = [], [], []
    for j in range(m):
        for z in np.flatnonzero(mask[j])[1:]:
            if pos[z] >= 0 or pos[anchor[j]] >= 0:
                e_ctx.append(j), e_plus.append(z), e_minus.append(anchor[j])

    def build(ctx, plus, minus):
        ctx, plus, minus = (np.asarray(x, dtype=np.int64) for x in (ctx, plus, minus))
        rows, cols, vals = [], [], []
        for sign, tok in ((1.0, plus), (-1.0, minus)):
            ok = tok >= 0
            ok &= pos[np.where(tok >= 0, tok, 0)] >= 0
            ii = np.flatnonzero(ok)
            rows.append(np.repeat(ii, d))
            cols.append((pos[tok[ii]][:, None] * d + np.arange(d)).ravel())
            vals.append((sign * H[ctx[ii]]).ravel())
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(ctx.size, nT * d))

    A = build(r_ctx, r_plus, r_minus)
    E = build(e_ctx, e_plus, e_minus)
    if A.nnz + E.nnz > max_nonzeros:
        return np.zeros(R.shape[0], dtype=bool), None
    key = {(int(j), int(p), int(q)): i for i, (j, p, q) in enumerate(zip(r_ctx, r_plus, r_minus))}
    want = np.array([key[(int(j), int(anchor[j]) if pos[anchor[j]] >= 0 else -1, int(v))] for j, v in R])
    q = A.shape[0]
    nt = want.size
    Tm = sp.csr_matrix((np.ones(nt), (want, np.arange(nt))), shape=(q, nt))
    A_ub = sp.hstack([-A, Tm], format="csr")
    A_e = sp.hstack([E, sp.csr_matrix((E.shape[0], nt))], format="csr") if E.shape[0] else None
    res = _linprog(c=np.r_[np.zeros(nT * d), -np.ones(nt)], A_ub=A_ub, b_ub=np.zeros(q), A_eq=A_e,
                   b_eq=np.zeros(E.shape[0]) if E.shape[0] else None,
                   bounds=[(None, None)] * (nT * d) + [(0.0, 1.0)] * nt,
                   options={"presolve": True, "maxiter": int(max_iterations)})
    if res.status != 0 or res.x is None:
        return np.zeros(nt, dtype=bool), None
    x = res.x[:nT * d]
    g = A @ x
    scale = max(np.abs(g).max(initial=0.0), 1e-300)
    if np.any(g < -ZERO_TOL * scale) or (E.shape[0] and np.abs(E @ x).max() > ZERO_TOL * scale):
        return np.zeros(nt, dtype=bool), None
    got = g[want] > 1e3 * ZERO_TOL * scale
    if not got.any():
        return got, None
    D = np.zeros((C, d))
    D[T] = x.reshape(nT, d) / g[want][got].min()
    return got, D


def screened(red: NTPInstance, *, max_iterations: int = SCREEN_MAX_ITERATIONS, max_nonzeros: int = 2_000_000):
    r"""The split of ``red`` (one token per class) by the three facts of the module doc. Returns
    ``(status, reason, is_n, D, a)``: ``is_n`` the (m, C) mask of N, D of shape (C, d) (margin >= 1 about on
    every other out-of-support pair, 0 on N), a of shape (C, m) (<= -1 about on N); ``status`` "ok" or
    "undetermined" (``reason`` names what is left)."""
    mask = red.support_mask()
    m, C = mask.shape
    covered, D = screen(red, max_iterations=max_iterations)
    U = np.argwhere(~mask & ~covered)
    is_n = np.zeros((m, C), dtype=bool)
    a = np.zeros((C, m))
    if U.shape[0]:
        n_u, a_u = nonseparable_dual(red, U, max_iterations=max_iterations)
        if n_u is None:
            return "undetermined", f"HiGHS did not solve the dual LP on the {U.shape[0]} pairs the screens left", \
                is_n, None, None
        is_n[U[n_u, 0], U[n_u, 1]] = True
        a = a_u
        R = U[~n_u]
        if R.shape[0]:
            got, D_r = restricted_point(red, R, max_iterations=max_iterations, max_nonzeros=max_nonzeros)
            if D_r is not None:
                D = D + D_r
            if not got.all():
                return "undetermined", (f"{int((~got).sum())} pairs are in neither certificate: no vanishing "
                                        f"combination is positive on them, and no point of K with rows on the "
                                        f"tokens they touch is positive there"), is_n, None, None
    return "ok", "", is_n, D, a
