r"""Direct conic programs for the NTP-SVM in the max, l1, spectral and nuclear norms (no cvxpy).

Each is solved in its **max-margin form**: for the unit ball of the norm,

.. math:: \gamma^\star = \max\ \gamma \quad\text{s.t.}\quad A_{eq}\mathrm{vec}(W) = 0,\quad
          A_{mar}\mathrm{vec}(W) \ge \gamma\mathbf 1,\quad \|W\| \le 1,

whose optimum is :math:`1/\min\{\|W\| : \text{(6a), (6b)}\}` and whose maximiser divided by
:math:`\gamma^\star` solves the NTP-SVM of :mod:`ntpcert.solve.norms`. Its multipliers are the ones
that module's weak-duality bound takes: :math:`\lambda\ge0` of the margin rows (they sum to 1 at the
optimum) and :math:`\nu` of the equality rows, with :math:`aH = A_{mar}^\top\lambda - A_{eq}^\top\nu`.
The sparse matrices are built here from :class:`~ntpcert.rows.kesler.KeslerSystem` (2d non-zeros a row)
and passed to the backend as they are, in the backends' common form
:math:`\min c^\top x` s.t. :math:`Ax + s = b`, :math:`s \in \{0\}^r\times\mathbb R_+^{q+p}\times\mathcal S_+^N`.

The unit balls (our formulations):

* ``max`` (entrywise :math:`\max|W_{vi}|`, the limit candidate of sign descent): an LP, the box
  :math:`-1\le W_{vi}\le 1` as 2Vd non-negative rows.
* ``l1``: an LP in (w, u) with :math:`-u\le w\le u` and :math:`\mathbf 1^\top u\le 1`.
* ``spectral`` (spectral descent, Muon): the linear matrix inequality
  :math:`\begin{pmatrix} I_V & X\\ X^\top & I_k\end{pmatrix}\succeq 0`, one PSD cone of size N = V + k.
* ``nuclear``: :math:`\begin{pmatrix} P & X\\ X^\top & R\end{pmatrix}\succeq 0` with
  :math:`\mathrm{tr}P + \mathrm{tr}R \le 2` (P, R symmetric variables).

For the two unitarily invariant norms the variable is :math:`X = WQ` with Q an orthonormal basis
(d, k) of the embeddings' row space when its rank k is below d: the constraints see W only through
WQ, and :math:`\|WQQ^\top\| \le \|W\|` for both norms, so the optimum is unchanged and the cone shrinks.

**Backends.** ``clarabel`` (interior point) for the LPs and for PSD cones up to
:data:`CLARABEL_MAX_PSD`; past that its dense PSD scaling block (:math:`\sim (N^2/2)^2` entries) makes every
iteration slow (N = 139: 17 iterations, 112 s), and ``scs`` (first-order, one eigendecomposition of
N × N a step) takes over: 6 s on the same program. The nuclear norm always goes to SCS. ``highs``
solves the LPs by HiGHS (its simplex took 2-5x Clarabel's time on ``paper``). Progress goes
to stderr as one line per event (Clarabel: per iteration, at most every :data:`PROGRESS_EVERY` s).

Nothing here is trusted: :func:`ntpcert.solve.norms.solve_norm_svm` repairs the point and recomputes
the gap from the multipliers, exactly as for the cvxpy route.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.util.progress import progress_note

#: Norms with a direct program here.
DIRECT_NORMS = ("max", "l1", "spectral", "nuclear")

#: Backends of :func:`solve_direct` (``auto`` picks by norm and cone size).
BACKENDS = ("auto", "clarabel", "scs", "highs")

#: Largest PSD cone (N = V + k) that ``auto`` gives to Clarabel; larger ones go to SCS.
CLARABEL_MAX_PSD = 80

#: Clarabel's tolerances (gap and feasibility, absolute and relative) and iteration cap.
CLARABEL_TOL = 1e-9
CLARABEL_MAX_ITER = 200

#: SCS's tolerance (absolute and relative) and iteration cap.
SCS_TOL = 1e-8
SCS_MAX_ITERS = 100_000

#: Relative singular-value cut (times max(m, d)) below which a direction of H's row space is dropped.
RANK_RTOL = 1e-12

#: A largest margin at most this times the largest embedding entry counts as zero: the program's optimum
#: is 0 (at W = 0) exactly when the data are not NTP-separable, and a backend returns rounding instead.
MARGIN_FLOOR = 1e-9

#: Seconds between two progress lines of one solve.
PROGRESS_EVERY = 2.0


@dataclass(frozen=True)
class RawSolution:
    """A backend's answer: W (V, d) divided by the margin found (so its smallest margin is about 1),
    the multipliers ``lam`` (q,) of (6b) and ``nu`` (r,) of (6a), and what the backend said."""

    W: np.ndarray
    lam: np.ndarray
    nu: np.ndarray
    margin: float
    status: str
    iterations: int
    seconds: float
    backend: str


@dataclass(frozen=True)
class ConicProgram:
    """:math:`\\min c^\\top x` s.t. :math:`Ax + s = b`, s in zero (r) × non-negative (``n_nonneg``) ×
    PSD (size ``psd``, 0 for none) cones, rows in that order; the first q non-negative rows are the
    margin rows. ``x[:V*k]`` is vec(X) (row-major), ``x[-1]`` is the margin γ; ``Q`` maps X back to
    W = X Qᵀ (None: X = W)."""

    A: Any
    b: np.ndarray
    c: np.ndarray
    n_eq: int
    n_margin: int
    n_nonneg: int
    psd: int
    V: int
    k: int
    Q: np.ndarray | None

    def W(self, x: np.ndarray) -> np.ndarray:
        X = np.asarray(x[: self.V * self.k], dtype=np.float64).reshape(self.V, self.k)
        return X if self.Q is None else X @ self.Q.T

    def describe(self) -> str:
        cone = f", PSD cone of size {self.psd}" if self.psd else ""
        red = "" if self.Q is None else f", rank(H) = {self.k}"
        return (f"{self.A.shape[1]:,} variables, {self.n_eq:,} equalities, {self.n_nonneg:,} inequalities"
                f"{cone}{red}, {self.A.nnz:,} non-zeros")


class _Progress:
    """Lines on stderr when enabled, at most one per ``every`` seconds unless forced."""

    def __init__(self, enabled: bool, norm: str) -> None:
        self.enabled = enabled
        self.norm = norm
        self.t0 = time.perf_counter()
        self.last = -math.inf

    def say(self, text: str, *, every: float = 0.0) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.last < every:
            return
        self.last = now
        progress_note(f"{self.norm}-norm NTP-SVM [{now - self.t0:6.1f} s] {text}", True)


def row_basis(H: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis Q (d, k) of the row space of H (m, d) when its rank k is below d, else None."""
    m, d = H.shape
    if d == 0:
        return None
    _, s, Vt = np.linalg.svd(H, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        return np.zeros((d, 0))
    k = int(np.sum(s > RANK_RTOL * s[0] * max(m, d)))
    return None if k == d else Vt[:k].T.copy()


def svec_index(i: np.ndarray, j: np.ndarray, N: int, backend: str) -> np.ndarray:
    """Position of the symmetric entry {i, j} in the backend's vectorised triangle of an N × N matrix:
    Clarabel stacks the upper triangle by columns, SCS the lower triangle by columns."""
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    if backend == "clarabel":
        return hi * (hi + 1) // 2 + lo
    return lo * N - lo * (lo - 1) // 2 + (hi - lo)


def build_program(system: KeslerSystem, norm: str, backend: str) -> ConicProgram:
    """The max-margin program of ``norm`` (see the module doc), with the PSD triangle in ``backend``'s order."""
    import scipy.sparse as sp

    inst = system.instance
    V = inst.V
    Q = row_basis(inst.embeddings) if norm in ("spectral", "nuclear") else None
    k = inst.d if Q is None else Q.shape[1]
    M = system.margin_matrix()
    E = system.eq_matrix() if system.n_eq else sp.csr_matrix((0, system.n_vars))
    if Q is not None:
        K = sp.kron(sp.identity(V, format="csr"), sp.csr_matrix(Q), format="csr")  # vec(X Qᵀ) = (I ⊗ Q) vec X
        M, E = (M @ K).tocsr(), (E @ K).tocsr()
    q, r = M.shape[0], E.shape[0]
    n = V * k
    n_extra = {"max": 0, "l1": n, "spectral": 0, "nuclear": V * (V + 1) // 2 + k * (k + 1) // 2}[norm]
    nx = n + n_extra + 1  # x = (vec X, extra, gamma)
    gam = sp.csr_matrix(np.ones((q, 1)))

    def cols(block, first: int = 0):
        """``block`` placed at columns first.. of a row block of width nx."""
        left = sp.csr_matrix((block.shape[0], first))
        right = sp.csr_matrix((block.shape[0], nx - first - block.shape[1]))
        return sp.hstack([left, block, right], format="csr")

    rows = [cols(E), sp.hstack([-M, sp.csr_matrix((q, n_extra)), gam], format="csr")]
    b = [np.zeros(r), np.zeros(q)]
    psd = 0
    In = sp.identity(n, format="csr")
    if norm == "max":  # 1 - w >= 0, 1 + w >= 0
        rows += [cols(In), cols(-In)]
        b += [np.ones(n), np.ones(n)]
    elif norm == "l1":  # u - w >= 0, u + w >= 0, 1 - 1ᵀu >= 0
        rows += [sp.hstack([In, -In, sp.csr_matrix((n, 1))], format="csr"),
                 sp.hstack([-In, -In, sp.csr_matrix((n, 1))], format="csr"),
                 cols(sp.csr_matrix(np.ones((1, n))), n)]
        b += [np.zeros(2 * n), np.ones(1)]
    n_nonneg = sum(x.shape[0] for x in rows[1:])
    if norm in ("spectral", "nuclear"):
        N = V + k
        psd = N
        ntri = N * (N + 1) // 2
        vv, cc = np.divmod(np.arange(n), k)
        pos = [svec_index(vv, V + cc, N, backend)]
        var = [np.arange(n)]
        val = [np.full(n, -math.sqrt(2.0))]
        b_psd = np.zeros(ntri)
        if norm == "spectral":
            d_ = np.arange(N)
            b_psd[svec_index(d_, d_, N, backend)] = 1.0
        else:  # the P (V x V) and R (k x k) blocks: their upper triangles, then tr P + tr R <= 2
            col = n
            trace = np.zeros(nx)
            for off, size in ((0, V), (V, k)):
                ii, jj = np.triu_indices(size)
                cnt = ii.size
                pos.append(svec_index(off + ii, off + jj, N, backend))
                var.append(col + np.arange(cnt))
                val.append(np.where(ii == jj, -1.0, -math.sqrt(2.0)))
                trace[col + np.flatnonzero(ii == jj)] = 1.0
                col += cnt
            rows.append(sp.csr_matrix(trace[None, :]))
            b.append(np.array([2.0]))
            n_nonneg += 1
        rows.append(sp.csr_matrix((np.concatenate(val), (np.concatenate(pos), np.concatenate(var))), shape=(ntri, nx)))
        b.append(b_psd)
    A = sp.vstack(rows, format="csc")
    c = np.zeros(nx)
    c[-1] = -1.0
    return ConicProgram(A, np.concatenate(b), c, r, q, n_nonneg, psd, V, k, Q)


def pick_backend(norm: str, system: KeslerSystem) -> str:
    """``auto``'s choice: Clarabel for the LPs and for spectral-norm PSD cones up to
    :data:`CLARABEL_MAX_PSD`, else SCS (always for the nuclear norm, where Clarabel stops with a
    numerical error on ``paper``)."""
    if norm in ("max", "l1"):
        return "clarabel"
    if norm == "nuclear":
        return "scs"
    inst = system.instance
    Q = row_basis(inst.embeddings)
    N = inst.V + (inst.d if Q is None else Q.shape[1])
    return "clarabel" if N <= CLARABEL_MAX_PSD else "scs"


def _run_clarabel(prog: ConicProgram, rep: _Progress):
    import clarabel
    import scipy.sparse as sp

    cones = ([clarabel.ZeroConeT(prog.n_eq)] if prog.n_eq else []) + [clarabel.NonnegativeConeT(prog.n_nonneg)]
    if prog.psd:
        cones.append(clarabel.PSDTriangleConeT(prog.psd))
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = CLARABEL_TOL
    st.max_iter = CLARABEL_MAX_ITER
    st.max_threads = 1
    nx = prog.A.shape[1]
    solver = clarabel.DefaultSolver(sp.csc_matrix((nx, nx)), prog.c, prog.A, prog.b, cones, st)

    def tick(info: Any) -> bool:
        rep.say(f"iteration {info.iterations}: margin {-info.cost_primal:.10g}, relative gap {info.gap_rel:.2e}",
                every=PROGRESS_EVERY)
        return False

    if rep.enabled:
        solver.set_termination_callback(tick)
    sol = solver.solve()
    status = str(sol.status)
    if "Infeasible" in status or "Unbounded" in status:
        raise InfeasibleError(f"Clarabel: {status} (the data are not NTP-separable)")
    if "Solved" not in status:
        raise SolverError(f"Clarabel: status {status}")
    return np.asarray(sol.x), np.asarray(sol.z), status, int(sol.iterations)


def _run_scs(prog: ConicProgram, rep: _Progress):
    import scs

    cone: dict[str, Any] = {"z": prog.n_eq, "l": prog.n_nonneg}
    if prog.psd:
        cone["s"] = [prog.psd]
    solver = scs.SCS({"A": prog.A, "b": prog.b, "c": prog.c}, cone, eps_abs=SCS_TOL, eps_rel=SCS_TOL,
                     max_iters=SCS_MAX_ITERS, verbose=False)
    sol = solver.solve()
    info = sol["info"]
    status = str(info["status"])
    if "infeasible" in status or "unbounded" in status:
        raise InfeasibleError(f"SCS: {status} (the data are not NTP-separable)")
    if not status.startswith("solved"):
        raise SolverError(f"SCS: status {status}")
    return np.asarray(sol["x"]), np.asarray(sol["y"]), status, int(info["iter"])


def _run_highs(prog: ConicProgram, rep: _Progress):
    from scipy.optimize import linprog

    r = prog.n_eq
    A = prog.A.tocsr()
    res = linprog(prog.c, A_ub=A[r:], b_ub=prog.b[r:], A_eq=A[:r] if r else None, b_eq=prog.b[:r] if r else None,
                  bounds=(None, None), method="highs")
    if res.status == 2:
        raise InfeasibleError(f"HiGHS: {res.message} (the data are not NTP-separable)")
    if res.status != 0 or res.x is None:
        raise SolverError(f"HiGHS: status {res.status} ({res.message})")
    z = np.concatenate([-np.asarray(res.eqlin.marginals) if r else np.zeros(0), -np.asarray(res.ineqlin.marginals)])
    return np.asarray(res.x), z, str(res.message), int(getattr(res, "nit", 0) or 0)


def solve_direct(system: KeslerSystem, norm: str, *, backend: str = "auto", progress: bool = False) -> RawSolution:
    """Solve the max-margin program of ``norm`` (one of :data:`DIRECT_NORMS`) with ``backend`` (one of
    :data:`BACKENDS`); the answer is unchecked (see the module doc).

    Raises InfeasibleError when the backend finds the program infeasible or the margin is not positive,
    SolverError when it fails."""
    if norm not in DIRECT_NORMS:
        raise ValueError(f"no direct program for the {norm} norm")
    name = pick_backend(norm, system) if backend == "auto" else backend
    if name not in BACKENDS[1:] or (name == "highs" and norm not in ("max", "l1")):
        raise ValueError(f"backend {backend!r} cannot solve the {norm}-norm program")
    rep = _Progress(progress, norm)
    t0 = time.perf_counter()
    prog = build_program(system, norm, name)
    rep.say(f"{name}: {prog.describe()}")
    runner = {"clarabel": _run_clarabel, "scs": _run_scs, "highs": _run_highs}[name]
    try:
        x, z, status, iters = runner(prog, rep)
    except (ValueError, MemoryError, RuntimeError) as err:
        raise SolverError(f"{name} ({norm}-norm NTP-SVM): {err}") from err
    gamma = float(x[-1])
    floor = MARGIN_FLOOR * float(np.abs(system.instance.embeddings).max(initial=0.0))
    if not gamma > floor:
        raise InfeasibleError(f"{name}: the largest {norm}-norm margin is {gamma:.3g}, zero up to rounding "
                              "(the data are not NTP-separable)")
    secs = time.perf_counter() - t0
    rep.say(f"{name} done: {status}, {iters} iterations, margin {gamma:.10g}")
    r, q = prog.n_eq, prog.n_margin
    return RawSolution(prog.W(x) / gamma, np.asarray(z[r:r + q], dtype=np.float64).copy(),
                       np.asarray(z[:r], dtype=np.float64).copy(), gamma, status, iters, secs, name)


__all__ = ["BACKENDS", "CLARABEL_MAX_PSD", "CLARABEL_TOL", "ConicProgram", "DIRECT_NORMS", "RawSolution", "SCS_TOL",
           "build_program", "pick_backend", "row_basis", "solve_direct", "svec_index"]
