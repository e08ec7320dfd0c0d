r"""Active-set Newton polish: solve the NTP-SVM exactly on a guessed set of active constraints.

Write :math:`t_j` for the common in-support logit of context j. Given, for every token class c, the
set :math:`J_c` of contexts where its logit is pinned (:math:`c \in S_j`, pinned to :math:`t_j`, or
:math:`c \notin S_j` with an active margin, pinned to :math:`t_j - 1`), the KKT conditions restricted
to that guess are linear. With :math:`B_c = K_{J_c J_c}` and :math:`o_c \in \{0,1\}^{J_c}` marking the
off-support entries, the dual rows are

.. math:: b_c|_{J_c} = B_c^{-1} (t_{J_c} - o_c), \qquad b_c = 0 \text{ elsewhere,}

and the coupling :math:`\sum_c n_c b_{c,j} = 0` becomes one symmetric positive definite m×m system
(every context has a support class, so every row of M is covered):

.. math:: M t = r, \quad M = \sum_c n_c P_c^\top B_c^{-1} P_c, \quad r = \sum_c n_c P_c^\top B_c^{-1} o_c .

**More pinned contexts than dimensions** (:math:`d < m`, a frequent token in many supports). Then
:math:`B_c` is singular: :math:`w_c = H_{J_c}^\top b_c` is still unique, but :math:`t_{J_c} - o_c` must lie in the
range of :math:`B_c` and :math:`b_c` is free along its null space. With the eigendecomposition
:math:`B_c = Q_c\Lambda_c Q_c^\top`, :math:`B_c^+` its pseudo-inverse and :math:`N_c` an orthonormal basis of
its null space (eigenvalues below :data:`RANK_RTOL` times the largest),
:math:`b_c|_{J_c} = B_c^+(t_{J_c} - o_c) + N_c\nu_c/n_c`, and the coupling and the range conditions
:math:`N_c^\top(t_{J_c} - o_c) = 0` form one symmetric saddle-point system of size m + Σ dim N_c:

.. math:: \begin{pmatrix} M & G \\ G^\top & 0 \end{pmatrix} \begin{pmatrix} t \\ \nu \end{pmatrix}
          = \begin{pmatrix} r \\ g \end{pmatrix}, \quad M = \sum_c n_c P_c^\top B_c^+ P_c,\;
          G = (P_c^\top N_c)_c,\; g = (N_c^\top o_c)_c .

It is solved densely up to :data:`MAX_SADDLE` unknowns (least squares when it is singular, as it is when
the pinned set is degenerate); larger guesses are not polished.

**In the space of the pinned rows** (used where some class is wide and the rows are few enough). Each pinned
entry is one row :math:`a_r = (e_u - e_v)\otimes h_j` of the primal QP
:math:`\min \tfrac12\sum_c n_c\|w_c\|^2`: an in-support equation (u the anchor class of j, v another support
class, target 0) or an active margin (u the anchor, v off the support, target 1). With multipliers
:math:`\nu_r`, stationarity gives :math:`n_c w_c = \sum_r \nu_r([u_r = c] - [v_r = c])h_{j_r}`, so the rows'
values are :math:`Q\nu` with the symmetric positive semi-definite

.. math:: Q_{rr'} = h_{j}\!\cdot h_{j'}\Big(\frac{[u=u'] - [u=v']}{n_u} + \frac{[v=v'] - [v=u']}{n_v}\Big),

and the restricted solve is one Cholesky factorisation of Q (:math:`\tfrac13 R^3` for R rows, against
:math:`\tfrac23(m + \sum_c\dim N_c)^3` for the LU of the saddle-point matrix above; teacher data with V = 50,
m = 2,000, d = 64: R = 2,784 against 3,650 unknowns). The dual rows are
:math:`b_{c,j} = \sum_{r: j_r = j}\nu_r([u_r = c] - [v_r = c])/n_c`, so a margin's :math:`b_{v,j} = -\nu_r/n_v` is
negative exactly when its multiplier is positive. Q is singular when the rows are dependent (more than
(C - 1)·d of them, or a degenerate pinned set): then the saddle-point system above is solved instead.

When the guess is right the result is the optimum up to rounding. :class:`ActiveSetSystem` runs
primal-dual active-set steps (drop pinned margins whose multiplier has the wrong sign, pin violated
ones) and keeps :math:`B_c^{-1}` of the classes whose pinned set did not change, so later steps cost
little more than the m×m solve.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.util.numbers import single_thread

#: A class's pinned set is padded up to a multiple of this size, so that factorisations batch.
PAD = 8

#: Relative slack of the margin test: a logit above :math:`t_j - 1` by more than this (times the scale
#: of t) counts as a violated margin.
MARGIN_SLACK = 1e-12

#: An eigenvalue of :math:`B_c` below this times its largest counts as 0 (the block is rank deficient).
RANK_RTOL = 1e-11

#: Largest saddle-point system (m + Σ dim N_c unknowns) the polish solves; a dense (n, n) float64 array.
MAX_SADDLE = 6000

#: Largest row-space solve (pinned rows, a dense (R, R) Gram) the polish factorises.
MAX_ROWS = 8000

#: Active-set steps end early when this many in a row did not lower the count of violated and wrong-signed
#: margins below its best (from a rough guess the steps can cycle).
PDAS_PATIENCE = 3

#: Rounds of iterative refinement of each restricted solve (on the residuals of its KKT system).
REFINE = 2

#: The restricted solve goes to the space of the pinned rows when they are at most this many times the
#: unknowns of the saddle-point system (a Cholesky factorisation of R rows costs about half an LU of as many
#: unknowns).
ROWS_FACTOR = 1.25

#: The row-space Cholesky factor is refused (the saddle-point system solves instead) when a pivot is below this
#: times the largest: the rows are then nearly dependent.
ROWS_PIVOT_RTOL = 1e-7


@dataclass(frozen=True)
class PolishResult:
    """Dual rows from one active-set solve.

    Attributes
    ----------
    A : ndarray of shape (m, C)
        The dual per class; rows are contexts.
    t : ndarray of shape (m,)
        The common in-support logits.
    steps : int
        Active-set steps taken.
    converged : bool
        True when the last step found no wrong sign and no violated margin.
    """

    A: np.ndarray
    t: np.ndarray
    steps: int
    converged: bool


def pinned_rows(classes: TokenClasses, active: np.ndarray) -> int:
    """Rows of the row-space solve of the pinned sets ``active | classes.mask`` (``active`` of shape (m, C)): the
    active margins and each context's in-support equations."""
    return int(np.count_nonzero(active & ~classes.mask)) + int((classes.mask.sum(axis=1) - 1).sum())


def row_gram(H: np.ndarray, j: np.ndarray, u: np.ndarray, v: np.ndarray, n: np.ndarray,
             K: np.ndarray | None = None) -> np.ndarray:
    r"""The (R, R) Gram Q of the rows :math:`(e_{u_r} - e_{v_r})\otimes h_{j_r}` in the metric of
    :math:`\tfrac12\sum_c n_c\|w_c\|^2` (module doc): :math:`Q = (HH^\top)_{jj}\circ X N^{-1}X^\top`.

    Parameters
    ----------
    H : ndarray of shape (m, d)
    j, u, v : ndarray of shape (R,)
        Context, plus class and minus class of each row.
    n : ndarray of shape (C,)
        Class sizes.
    K : ndarray of shape (m, m), optional
        :math:`HH^\top`, when at hand.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if K is not None:
            Q = K[np.ix_(j, j)]
        else:
            Hj = H[j]
            Q = Hj @ Hj.T
        Q *= _row_coefficients(u, v, n)
    return Q


def _row_coefficients(u: np.ndarray, v: np.ndarray, n: np.ndarray) -> np.ndarray:
    r"""The (R, R) factor :math:`X N^{-1} X^\top` of Q, with row r of X equal to :math:`e_{u_r} - e_{v_r}` (module doc):
    non-zero only where two rows share a class, so it is formed as a sparse product."""
    import scipy.sparse as sp

    R, C = u.size, n.size
    rows = np.repeat(np.arange(R), 2)
    cols = np.stack([u, v], axis=1).ravel()
    vals = np.tile([1.0, -1.0], R) / np.sqrt(n[cols])
    X = sp.csr_matrix((vals, (rows, cols)), shape=(R, C))
    return (X @ X.T).toarray()


class ActiveSetSystem:
    """Restricted KKT solves for changing pinned sets, reusing unchanged blocks.

    Parameters
    ----------
    classes : TokenClasses
    H : ndarray of shape (m, d)
    K : ndarray of shape (m, m), optional
        :math:`HH^\\top`; when omitted the blocks are formed from H.
    """

    def __init__(self, classes: TokenClasses, H: np.ndarray, K: np.ndarray | None = None) -> None:
        self.classes = classes
        self.H = H
        self.K = K
        m, C = classes.mask.shape
        self.cols: list[np.ndarray | None] = [None] * C
        self.inv: list[np.ndarray | None] = [None] * C
        self.null: list[np.ndarray | None] = [None] * C  # N_c when B_c is singular (then inv is B_c^+)
        self.M: np.ndarray | None = None  # flat m*m, kept up to date across steps

    def _gram(self, idx: np.ndarray) -> np.ndarray:
        if self.K is not None:
            return self.K[np.ix_(idx, idx)]
        Hi = self.H[idx]
        return Hi @ Hi.T

    def logits(self, A: np.ndarray) -> np.ndarray:
        """Logits of shape (m, C) of the dual A."""
        if self.K is not None:
            return self.K @ A
        return self.H @ (A.T @ self.H).T

    def _refactor(self, pinned: np.ndarray) -> bool:
        C = pinned.shape[1]
        changed = []
        for c in range(C):
            J = np.flatnonzero(pinned[:, c])
            old = self.cols[c]
            if old is None or old.size != J.size or not np.array_equal(old, J):
                self.cols[c] = J
                self.inv[c] = None
                if J.size:
                    changed.append(c)
        if not changed:
            return True
        d = self.H.shape[1]
        wide = [c for c in changed if self.cols[c].size > d]  # singular for certain: more rows than d
        narrow = [c for c in changed if self.cols[c].size <= d]
        lengths = np.array([self.cols[c].size for c in narrow], dtype=np.int64)
        padded = (lengths + PAD - 1) // PAD * PAD
        for size in np.unique(padded):
            group = [narrow[i] for i in np.flatnonzero(padded == size)]
            stack = np.broadcast_to(np.eye(size), (len(group), size, size)).copy()
            for i, c in enumerate(group):
                n = self.cols[c].size
                stack[i, :n, :n] = self._gram(self.cols[c])
            try:
                inv = np.linalg.inv(stack)
                ok = bool(np.all(np.isfinite(inv)))
            except np.linalg.LinAlgError:
                ok = False
            if not ok:  # a singular block among them: each by its eigendecomposition
                wide.extend(group)
                continue
            for i, c in enumerate(group):
                n = self.cols[c].size
                self.inv[c] = inv[i, :n, :n].copy()
                self.null[c] = None
        for c in wide:
            if self.K is None:  # from H_J itself: a thin SVD and a QR, not an eigendecomposition of its Gram
                ok = self._wide_from_h(c)
            else:
                lam, Q = np.linalg.eigh(self._gram(self.cols[c]))
                ok = bool(np.all(np.isfinite(lam)))
                if ok:
                    keep = lam > RANK_RTOL * max(float(lam[-1]), 0.0)
                    Qr = Q[:, keep]
                    self.inv[c] = (Qr / lam[keep]) @ Qr.T
                    self.null[c] = Q[:, ~keep] if not keep.all() else None
            if not ok:
                return False
        return True

    def _wide_from_h(self, c: int) -> bool:
        r""":math:`B_c^+` and :math:`N_c` of a wide class from :math:`H_J = U\Sigma V^\top` (thin SVD, :math:`|J|\times d`):
        :math:`B_c = U\Sigma^2U^\top`, so the kept columns :math:`U_r` give :math:`B_c^+ = U_r\Sigma_r^{-2}U_r^\top`, and
        the last :math:`|J| - r` columns of a complete QR of :math:`U_r` span the null space. The same blocks as
        the eigendecomposition of :math:`B_c` (the same :data:`RANK_RTOL` on :math:`\sigma^2`) at a fraction of its
        cost: :math:`O(|J| d^2 + |J|^2 r)` against :math:`O(|J|^3)` (teacher data, V = 10, m = 1,000, d = 64: 279
        eigendecompositions took 50 s)."""
        Hj = self.H[self.cols[c]]
        U, s, _ = np.linalg.svd(Hj, full_matrices=False)
        with np.errstate(over="ignore"):
            lam = s * s
        if not np.all(np.isfinite(lam)):  # as the eigendecomposition of an overflowing Gram: no polish
            return False
        keep = lam > RANK_RTOL * max(float(lam[0]) if lam.size else 0.0, 0.0)
        Ur = U[:, keep]
        self.inv[c] = (Ur / lam[keep]) @ Ur.T
        n, r = Hj.shape[0], int(keep.sum())
        self.null[c] = np.linalg.qr(Ur, mode="complete")[0][:, r:] if r < n else None
        return True

    def _contribution(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices into M and the values :math:`n_c B_c^{-1}` of class c."""
        J, m = self.cols[c], self.classes.mask.shape[0]
        return (J[:, None] * m + J[None, :]).ravel(), self.classes.sizes[c] * self.inv[c].ravel()

    def solve(self, active: np.ndarray) -> PolishResult | None:
        """One restricted solve for the pinned sets ``active | classes.mask`` (one step): in the space of the
        pinned rows where :meth:`rows_first` says so and Q is regular, else by the saddle-point system."""
        if self.rows_first(active):
            res = self._solve_rows(active)
            if res is not None:
                return res
        return self._solve_saddle(active)

    def rows_first(self, active: np.ndarray) -> bool:
        r"""Whether the restricted solve goes to the space of the pinned rows: some class is pinned in more
        contexts than d (the saddle-point system is needed otherwise, and its M is then a cheap Cholesky), and
        the rows are at most (C - 1)·d (they lie in the rows of W with :math:`\sum_c w_c = 0`: more are
        dependent), at most :data:`MAX_ROWS`, and fewer than :data:`ROWS_FACTOR` times the saddle-point
        system's unknowns or that system is too large (:data:`MAX_SADDLE`)."""
        cls = self.classes
        m, C = cls.mask.shape
        d = self.H.shape[1]
        pinned = (active | cls.mask).sum(axis=0)
        if not (pinned > d).any():
            return False
        rows = pinned_rows(cls, active)
        saddle = m + int(np.maximum(pinned - d, 0).sum())
        return rows <= min((C - 1) * d, MAX_ROWS) and (saddle > MAX_SADDLE or rows <= ROWS_FACTOR * saddle)


    def _rows(self, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The pinned rows ``(j, u, v, target)`` of :meth:`solve`'s row space: equations first, then margins."""
        cls = self.classes
        anchor = np.array([s[0] for s in cls.support], dtype=np.int64)
        ej, ev = np.nonzero(cls.mask)
        keep = ev != anchor[ej]
        ej, ev = ej[keep], ev[keep]
        aj, av = np.nonzero(active & ~cls.mask)
        j = np.concatenate([ej, aj])
        v = np.concatenate([ev, av])
        target = np.concatenate([np.zeros(ej.size), np.ones(aj.size)])
        return j, anchor[j], v, target

    def _solve_rows(self, active: np.ndarray) -> PolishResult | None:
        """One restricted solve in the space of the pinned rows (module doc), or None when Q is singular."""
        import scipy.linalg as sla

        cls = self.classes
        m, C = cls.mask.shape
        j, u, v, target = self._rows(active)
        if j.size == 0:
            return None
        n = cls.sizes
        Q = row_gram(self.H, j, u, v, n, self.K)
        if not np.all(np.isfinite(Q)):
            return None
        try:
            factor = sla.cho_factor(Q, lower=False, check_finite=False)
        except np.linalg.LinAlgError:
            return None
        diag = np.abs(np.diag(factor[0]))
        if not (diag.min() > ROWS_PIVOT_RTOL * diag.max()):  # nearly dependent rows: the saddle-point system
            return None

        def dual(nu: np.ndarray) -> np.ndarray:
            A = np.zeros((m, C))
            np.add.at(A, (j, u), nu / n[u])
            np.add.at(A, (j, v), -nu / n[v])
            return A

        nu = sla.cho_solve(factor, target, check_finite=False)
        for _ in range(REFINE + 1):
            A = dual(nu)
            if not np.all(np.isfinite(A)):
                return None
            Z = self.logits(A)
            res = target - (Z[j, u] - Z[j, v])
            if _ == REFINE:
                break
            nu = nu + sla.cho_solve(factor, res, check_finite=False)
        anchor = np.array([s[0] for s in cls.support], dtype=np.int64)
        t = Z[np.arange(m), anchor]
        return PolishResult(A, t, 1, False)

    def _solve_saddle(self, active: np.ndarray) -> PolishResult | None:
        """One restricted solve by the saddle-point system of the module doc."""
        cls = self.classes
        pinned = active | cls.mask
        m, C = pinned.shape
        with single_thread():
            old_cols = list(self.cols)
            old_inv = list(self.inv)
            if not self._refactor(pinned):
                return None
            if self.M is None:
                parts = [self._contribution(c) for c in range(C) if self.inv[c] is not None]
                idx = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
                val = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
                # float64 always: numpy returns int64 for an empty input even with weights
                self.M = np.bincount(idx, weights=val, minlength=m * m).astype(np.float64)
            else:  # replace the contributions of the classes whose pinned set changed
                for c in range(C):
                    if self.inv[c] is old_inv[c]:
                        continue
                    if old_inv[c] is not None:
                        J = old_cols[c]
                        self.M[(J[:, None] * m + J[None, :]).ravel()] -= cls.sizes[c] * old_inv[c].ravel()
                    if self.inv[c] is not None:
                        fi, fv = self._contribution(c)
                        self.M[fi] += fv
        Mm = self.M.reshape(m, m)
        nulls = [c for c in range(C) if self.null[c] is not None and self.inv[c] is not None]
        lin = self._factor(Mm, nulls)
        if lin is None:
            return None
        rho = [None if self.cols[c] is None else (~cls.mask[self.cols[c], c]).astype(np.float64) for c in range(C)]
        A, t = self._kkt(lin, nulls, rho, np.zeros(m))
        for _ in range(REFINE):  # iterative refinement on the residuals of the restricted KKT system
            if not (np.all(np.isfinite(A)) and np.all(np.isfinite(t))):
                return None
            Z = self.logits(A)
            res = [None if self.cols[c] is None else Z[self.cols[c], c] - t[self.cols[c]]
                   + (~cls.mask[self.cols[c], c]) for c in range(C)]
            dA, dt = self._kkt(lin, nulls, res, -(A @ cls.sizes))
            A, t = A + dA, t + dt
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(t))):
            return None
        return PolishResult(A, t, 1, False)

    def _factor(self, Mm: np.ndarray, nulls: list[int]):
        """A solver of the restricted system's matrix (Cholesky of M, or LU of the saddle-point matrix
        of the module doc), or None when M is not positive definite or the system is too large."""
        m = Mm.shape[0]
        if not nulls:  # numpy, not scipy.linalg: scipy stays out of the structured solver's start-up
            if not np.all(np.isfinite(Mm)):
                return None
            try:
                np.linalg.cholesky(Mm)  # M = sum_c n_c B_c^{-1} must be positive definite
                inv = np.linalg.inv(Mm)
            except np.linalg.LinAlgError:
                return None
            return lambda rhs: inv @ rhs

        import scipy.linalg as sla  # the saddle-point system (d < m) only
        dims = [self.null[c].shape[1] for c in nulls]
        n = m + int(sum(dims))
        if n > MAX_SADDLE:
            return None
        K = np.zeros((n, n))
        K[:m, :m] = Mm
        at = m
        for c, q in zip(nulls, dims):
            J, N = self.cols[c], self.null[c]
            K[J, at:at + q] = N
            K[at:at + q, J] = N.T
            at += q
        try:
            with warnings.catch_warnings():  # a singular matrix is handled below, by its pseudo-inverse
                warnings.simplefilter("ignore", sla.LinAlgWarning)
                f = sla.lu_factor(K, check_finite=True)
        except (np.linalg.LinAlgError, ValueError):
            return None
        if not np.all(np.isfinite(f[0])) or np.min(np.abs(np.diag(f[0]))) <= 1e-14 * np.max(np.abs(np.diag(f[0]))):
            # singular (a degenerate pinned set): the least-norm solution, by K's eigenvectors (K is
            # symmetric; eigh costs about a third of pinv's SVD)
            lam, Q = np.linalg.eigh(K)
            keep = np.abs(lam) > 1e-15 * max(1.0, float(np.abs(lam).max())) * n
            Qk, lk = Q[:, keep], lam[keep]

            def least_norm(rhs):
                with np.errstate(invalid="ignore", over="ignore"):  # a non-finite rhs: the caller returns None
                    return Qk @ ((Qk.T @ rhs) / lk)
            return least_norm
        return lambda rhs: sla.lu_solve(f, rhs)

    def _kkt(self, lin, nulls: list[int], rho: list, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""``(A, t)`` solving :math:`B_c b_c - P_c t = -\rho_c` for every class and
        :math:`\sum_c n_c P_c^\top b_c = q` (``rho`` per class on its pinned contexts; with
        :math:`\rho_c = o_c` and q = 0 the restricted KKT system itself)."""
        cls = self.classes
        m, C = cls.mask.shape
        r = q.copy()
        for c in range(C):
            J, Bi = self.cols[c], self.inv[c]
            if Bi is not None and J.size:
                r[J] += cls.sizes[c] * (Bi @ rho[c])
        if nulls:
            r = np.concatenate([r] + [self.null[c].T @ rho[c] for c in nulls])
        x = lin(r)
        t = x[:m]
        A = np.zeros((m, C))
        for c in range(C):
            J, Bi = self.cols[c], self.inv[c]
            if Bi is not None and J.size:
                A[J, c] = Bi @ (t[J] - rho[c])
        at = m
        for c in nulls:
            N = self.null[c]
            A[self.cols[c], c] += N @ x[at:at + N.shape[1]] / cls.sizes[c]
            at += N.shape[1]
        return A, t

    def pdas(self, active: np.ndarray, steps: int) -> PolishResult | None:
        """Up to ``steps`` primal-dual active-set steps from the guess ``active`` (m, C): each drops the
        pinned margins whose multiplier has the wrong sign and pins, in each context, its most violated
        margin."""
        off = ~self.classes.mask
        res = None
        best, stalled = np.inf, 0
        for k in range(1, steps + 1):
            res = self.solve(active)
            if res is None:
                return None
            Z = self.logits(res.A)
            slack = MARGIN_SLACK * max(1.0, float(np.abs(res.t).max()))
            excess = Z - (res.t[:, None] - 1.0 + slack)
            viol = off & ~active & (excess > 0)
            wrong = active & (res.A > 0)
            if not viol.any() and not wrong.any():
                return PolishResult(res.A, res.t, k, True)
            bad = int(np.count_nonzero(viol) + np.count_nonzero(wrong))
            best, stalled = (bad, 0) if bad < best else (best, stalled + 1)
            if stalled >= PDAS_PATIENCE:  # the steps cycle rather than converge: leave it to the caller
                return PolishResult(res.A, res.t, k, False)
            # pin only the most violated margin of each context: pinning every violated one at once
            # overshoots from a rough guess (the pinned set grows tenfold and the steps diverge)
            rows = np.flatnonzero(viol.any(axis=1))
            top = np.zeros_like(viol)
            top[rows, np.where(viol[rows], excess[rows], -np.inf).argmax(axis=1)] = True
            active = (active & ~wrong) | top
        return PolishResult(res.A, res.t, steps, False)
