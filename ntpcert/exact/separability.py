r"""NTP-separability (6) settled by an exact witness: a feasible point or a Farkas ray.

**Feasible point.** A float W (from the separability LP or the NTP-SVM) is rounded to a dyadic
grid, repaired exactly onto :math:`F^\perp` and rescaled so that every margin is at least 1
(:meth:`~ntpcert.exact.svm_gap.ExactSVMBounder.primal_point`).

**Farkas ray.** (6) is infeasible iff there is :math:`a \in \mathbb{R}^{V\times m}` with

.. math:: \sum_j a_j h_j^\top = 0,\quad \mathbf 1^\top a_j = 0,\quad a_{j,v} \le 0\ (v \notin S_j),
          \quad \sum_j\sum_{v\notin S_j} (-a_{j,v}) > 0 .

Indeed, for a feasible W with common in-support logit :math:`t_j`,
:math:`0 = \langle \sum_j a_j h_j^\top, W\rangle = \sum_j a_j^\top W h_j = \sum_j\sum_{v \notin S_j}(-a_{j,v})(t_j - (Wh_j)_v) \ge \sum(-a_{j,v}) > 0`.
The ray is found as a vertex of this system (normalised by :math:`\sum(-a_{j,v}) = 1`) with HiGHS'
simplex, then made exact by solving the same equations in rationals on its support.

Neither found or neither exact: the verdict is ``None`` (undetermined), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np
import scipy.sparse as sp

from ntpcert.errors import SolverError
from ntpcert.exact.rational import combinations_vanish, frac
from ntpcert.exact.svm_gap import DEFAULT_BITS, ExactSVMBounder
from ntpcert.instance import NTPInstance

#: Entries of the float ray with magnitude at most this (relative to the largest) are taken as 0.
RAY_SUPPORT_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class ExactPoint:
    r"""An exact rational matrix :math:`\text{scale}\cdot(\text{base} + \Delta)`.

    Attributes
    ----------
    base : ndarray of shape (V, d)
        Exact dyadic floats.
    delta : tuple of (int, int, Fraction)
        Sparse exact corrections.
    scale : Fraction
    """

    base: np.ndarray
    delta: tuple
    scale: Fraction

    def fractions(self) -> np.ndarray:
        """The matrix as an object array of Fractions."""
        out = np.empty(self.base.shape, dtype=object)
        for idx in np.ndindex(self.base.shape):
            out[idx] = frac(self.base[idx])
        for v, i, dl in self.delta:
            out[v, i] += dl
        return out * self.scale

    def to_float(self) -> np.ndarray:
        W = self.base.copy()
        for v, i, dl in self.delta:
            W[v, i] += float(dl)
        return W * float(self.scale)


def exact_feasible_point(instance: NTPInstance, W: np.ndarray, *, bits: int = DEFAULT_BITS,
                         bounder: ExactSVMBounder | None = None) -> tuple[ExactPoint | None, float | None, str]:
    """Make a float candidate W of shape (V, d) exactly feasible for (6); ``(point, ell, reason)``.
    ``bounder``: the instance's exact precomputation, shared with other calls (default: built here)."""
    B = bounder if bounder is not None else ExactSVMBounder(instance)
    if not np.any(B.off):
        return ExactPoint(np.zeros((instance.V, instance.d)), (), Fraction(1)), None, ""
    Wq, delta, ell, reason = B.primal_point(W, bits)
    if reason:
        return None, ell, reason
    return ExactPoint(Wq, tuple(delta), 1 / Fraction(ell)), ell, ""


def float_farkas_ray(instance: NTPInstance, *, time_limit: float | None = None,
                     max_iterations: int | None = None) -> np.ndarray | None:
    """A vertex of the normalised Farkas system in float64 (shape (V, m)), or None when HiGHS finds none
    (within ``max_iterations`` HiGHS iterations, default :func:`ntpcert.util.budget.highs_budget` of the
    LP's size, and the user's ``time_limit`` in seconds, off by default)."""
    return _farkas_lp(instance, time_limit, max_iterations)[0]


def _farkas_lp(instance: NTPInstance, time_limit: float | None, max_iterations: int | None
               ) -> tuple[np.ndarray | None, str]:
    """:func:`float_farkas_ray` and, when it found none, why (HiGHS' answer, its budget or the user's cap)."""
    from scipy.optimize import linprog

    from ntpcert.util.budget import highs_budget, highs_options, highs_stop
    from ntpcert.util.interrupt import interruptible

    V, m = instance.V, instance.m
    H = instance.embeddings
    off = ~instance.support_mask().T  # (V, m)
    if not np.any(off):
        return None, "no off-support entry: no Farkas ray exists"
    n = V * m  # x = vec(a), index v*m + j
    # a H = 0: row (v, i) = sum_j a[v, j] H[j, i]
    AH = sp.kron(sp.identity(V, format="csr"), sp.csr_matrix(H.T), format="csr")  # (V d, V m)
    colsum = sp.kron(sp.csr_matrix(np.ones((1, V))), sp.identity(m, format="csr"), format="csr")  # (m, V m)
    norm = sp.csr_matrix(-off.reshape(1, -1).astype(np.float64))
    A = sp.vstack([AH, colsum, norm], format="csr")
    b = np.zeros(A.shape[0])
    b[-1] = 1.0
    bounds = [(None, 0.0) if o else (None, None) for o in off.ravel()]
    budget = highs_budget(*A.shape) if max_iterations is None else int(max_iterations)
    options = highs_options(budget, time_limit)
    try:
        # off the main thread, so that Ctrl-C stops HiGHS at once (ntpcert.util.interrupt)
        res = interruptible(linprog, size=A.nnz)(np.zeros(n), A_eq=A, b_eq=b, bounds=bounds, method="highs-ds",
                                                 options=options)
    except (ValueError, MemoryError) as err:
        raise SolverError(f"Farkas LP: HiGHS failed ({err})") from err
    if res.status != 0 or res.x is None:
        stop = highs_stop(res, budget, time_limit, "a larger max_iterations may settle it")
        return None, f"the Farkas LP stopped: {stop}" if stop else "no Farkas ray found by the LP"
    return np.asarray(res.x).reshape(V, m), ""


def balanced_instance(instance: NTPInstance) -> tuple[NTPInstance, np.ndarray]:
    r"""The instance with row j of H scaled by :math:`2^{-s_j}` and column i by :math:`2^{-c_i}`
    (powers of two: exact), so that every row and column has largest entry in [1/2, 1); and s (shape (m,)).

    The Farkas system is invariant under this: :math:`b_j = 2^{s_j} a_j` is a ray of the balanced
    instance iff a is one of the original (each feature column is its own set of equations, and a
    positive factor per context keeps the signs and column sums). Separability depends on the
    supports alone, so the balanced instance carries the support pattern as counts. An LP on
    embeddings of scales 3 and 3e-11 misses the ray that the balanced one finds. When scaling would
    lose bits (entries within one row more than 2^1000 apart), the instance is returned unscaled."""
    H = instance.embeddings
    absH = np.abs(H)
    rmax = absH.max(axis=1) if instance.d else np.zeros(instance.m)
    s = np.where(rmax > 0, np.frexp(rmax)[1], 0).astype(np.int64)
    Hr = np.ldexp(H, -s[:, None])
    cmax = np.abs(Hr).max(axis=0) if instance.m else np.zeros(instance.d)
    c = np.where(cmax > 0, np.frexp(cmax)[1], 0).astype(np.int64)
    Hs = np.ldexp(Hr, -c[None, :])
    if not (np.any(s) or np.any(c)) or not np.array_equal(np.ldexp(np.ldexp(Hs, c[None, :]), s[:, None]), H):
        return instance, np.zeros(instance.m, dtype=np.int64)
    mask = instance.support_mask().astype(np.int64)
    return NTPInstance.from_counts(Hs, mask, name=instance.name), s


def unbalance_ray(ray: dict, shifts: np.ndarray) -> dict:
    """A ray ``{(v, j): Fraction}`` of :func:`balanced_instance`'s instance as a ray of the original."""
    return {(v, j): x / (1 << int(shifts[j])) if shifts[j] >= 0 else x * (1 << int(-shifts[j]))
            for (v, j), x in ray.items()}


def exact_ray(instance: NTPInstance, a: np.ndarray) -> dict | None:
    """Solve the Farkas equations exactly on the support of the float ray ``a`` (shape (V, m)).

    Free variables (when the support is not a vertex) keep their float values; returns the ray as
    ``{(v, j): Fraction}`` or None when the system is inconsistent on that support.
    """
    d = instance.d
    amax = float(np.max(np.abs(a))) if a.size else 0.0
    if amax == 0.0:
        return None
    supp = [tuple(int(x) for x in idx) for idx in np.argwhere(np.abs(a) > RAY_SUPPORT_TOL * amax)]
    col = {vj: k for k, vj in enumerate(supp)}
    off = ~instance.support_mask().T
    H = instance.embeddings
    # integer rows: (v, i) -> sum_j a[v,j] H[j,i] * 2^s_i = 0 ; columns j -> sum_v a[v,j] = 0 ; normalisation
    rows: list[list[tuple[int, int]]] = []
    rhs: list[int] = []
    dens = [max(float(x).as_integer_ratio()[1] for x in H[:, i]) for i in range(d)]
    by_v: dict[int, list[tuple[int, int]]] = {}
    by_j: dict[int, list[int]] = {}
    for (v, j), k in col.items():
        by_v.setdefault(v, []).append((j, k))
        by_j.setdefault(j, []).append(k)
    for v, items in by_v.items():
        for i in range(d):
            row = []
            for j, k in items:
                num, den = float(H[j, i]).as_integer_ratio()
                if num:
                    row.append((k, num * (dens[i] // den)))
            if row:
                rows.append(row)
                rhs.append(0)
    for j, ks in by_j.items():
        rows.append([(k, 1) for k in ks])
        rhs.append(0)
    rows.append([(k, -1) for (v, j), k in col.items() if off[v, j]])
    rhs.append(1)
    n = len(supp)
    M = flint.fmpz_mat(len(rows), n + 1)
    for r, row in enumerate(rows):
        for k, val in row:
            M[r, k] = val
        M[r, n] = rhs[r]
    R, den, rank = M.rref()
    pivots = []
    for i in range(rank):
        for c in range(n + 1):
            if R[i, c] != 0:
                pivots.append(c)
                break
    if n in pivots:
        return None  # inconsistent on this support
    free = [c for c in range(n) if c not in set(pivots)]
    x: dict[int, Fraction] = {c: frac(float(a[supp[c]])) for c in free}
    den_i = int(den)
    for i, pc in enumerate(pivots):
        val = Fraction(int(R[i, n]), den_i)
        for c in free:
            coef = R[i, c]
            if coef != 0 and x[c]:
                val -= Fraction(int(coef), den_i) * x[c]
        x[pc] = val * Fraction(den_i, int(R[i, pc]))
    return {supp[c]: v for c, v in x.items() if v != 0}


def check_ray(instance: NTPInstance, ray: dict) -> str:
    """Exact check of the Farkas conditions, touching only the contexts in the ray; returns ``""`` or
    the first failure."""
    colsum: dict[int, Fraction] = {}
    total = Fraction(0)
    for (v, j), val in ray.items():
        colsum[j] = colsum.get(j, Fraction(0)) + val
        if not instance.in_support(int(j), int(v)):
            if val > 0:
                return f"a[{v}, {j}] = {val} > 0 off the support"
            total -= val
    if any(s != 0 for s in colsum.values()):
        return "a column of the ray does not sum to 0"
    if total <= 0:
        return "the ray has no mass off the supports"
    by_v: dict[int, dict[int, Fraction]] = {}
    for (v, j), val in ray.items():
        by_v.setdefault(v, {})[j] = val
    # one integer product over the ray's tokens and contexts only (entries may have thousands of digits)
    if not combinations_vanish(instance.embeddings, by_v):
        return "(a H)[v, :] is not 0 for some token v"
    return ""


def farkas_ray_lp(instance: NTPInstance, *, time_limit: float | None = None,
                  max_iterations: int | None = None) -> tuple[dict | None, str]:
    """A Farkas ray found as a vertex of the normalised Farkas system with HiGHS (on the instance with
    its embeddings rebalanced by powers of two, :func:`balanced_instance`), made exact on its support,
    mapped back and checked exactly (:func:`check_ray`): ``(ray, "")``, or ``(None, why not)``. The LP
    runs within ``max_iterations`` HiGHS iterations (default by its size) and the user's ``time_limit``."""
    balanced, shifts = balanced_instance(instance)
    a, why_none = _farkas_lp(balanced, time_limit, max_iterations)
    if a is None:
        return None, why_none
    ray = exact_ray(balanced, a)
    if ray is None:
        return None, "the float ray is inconsistent on its support in exact arithmetic"
    ray = unbalance_ray(ray, shifts)
    why = check_ray(instance, ray)
    return (None, f"exact ray fails: {why}") if why else (ray, "")
