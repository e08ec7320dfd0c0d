r"""Farkas certificates of non-separability, found from the structured solver's diverging dual.

The data are not NTP-separable iff the dual of ``math.md`` is unbounded, i.e. iff there is a ray
:math:`r \in \mathbb{R}^{V \times m}` with

.. math:: \sum_j r_j h_j^\top = 0, \qquad \mathbf 1^\top r_j = 0, \qquad r_{v,j} \le 0 \;(v \notin S_j),
          \qquad \sum_j \sum_{v \notin S_j} (-r_{v,j}) > 0 .

Along such a ray the dual objective grows linearly, so block-coordinate ascent on non-separable
data drifts along it. :func:`find_ray` takes the drift :math:`A_k - A_{k'}` between two iterates
(per token class), keeps its support, and solves the ray conditions as a small linear program on
that support only (HiGHS); the answer is normalised to :math:`\sum (-r_{\text{off}}) = 1`.

**Exact check.** The ray is rounded to rationals with small denominators, scaled to integers and
checked in exact arithmetic (integer sums; the products :math:`r H` through
:func:`ntpcert.exact.dyadic.exact_matmul`). When that fails (embeddings that are not small
rationals), the ray equations are solved in rationals on the ray's support
(:func:`ntpcert.exact.separability.exact_ray`) and checked there. A ray that passes is a proof; one
that does not is reported with its float residuals.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.util.numbers import lcm_all

#: Entries of the drift below this fraction of its largest entry are left out of the ray's support.
SUPPORT_RTOL = 1e-7

#: Relative residual :math:`\|rH\|_\infty / (\|r\|_\infty \max_j \|h_j\|_1)` below which a float ray is accepted.
RAY_RTOL = 1e-9

#: Largest denominator tried when rounding the ray's entries to rationals.
MAX_DENOMINATOR = 10**6

#: Largest integer (after clearing denominators) kept exactly in float64.
MAX_EXACT_INT = 2**52

#: Largest ray LP (non-zeros of its equality rows, support x d) that :func:`find_ray` builds.
MAX_RAY_LP_NONZEROS = 5_000_000

#: Largest ray support (entries per token) solved exactly in rationals.
EXACT_MAX_SUPPORT = 3000


@dataclass(frozen=True, eq=False)
class FarkasRay:
    """A certificate that the NTP-SVM has no feasible point.

    Attributes
    ----------
    a : ndarray of shape (V, m)
        The ray r (column j is :math:`r_j`), normalised to :math:`\\sum(-r_{\\text{off}}) = 1`.
    residual : float
        :math:`\\|rH\\|_\\infty` relative to :math:`\\|r\\|_\\infty \\max_j\\|h_j\\|_1`.
    sum_violation, sign_violation : float
        :math:`\\max_j |\\mathbf 1^\\top r_j|` and :math:`\\max_{\\text{off}} (r_{v,j})_+`.
    exact : bool
        True when an exact rational ray was found and passed the exact check.
    support : int
        Number of non-zero entries (per token).
    entries : dict or None
        The exact ray as ``{(v, j): Fraction}`` (non-zero entries of the (V, m) ray, any positive
        scaling), when ``exact``.
    """

    a: np.ndarray
    residual: float
    sum_violation: float
    sign_violation: float
    exact: bool
    support: int
    entries: dict | None = None

    def to_json(self) -> dict:
        return {
            "kind": "farkas_ray",
            "residual": self.residual,
            "sum_violation": self.sum_violation,
            "sign_violation": self.sign_violation,
            "verified_exactly": self.exact,
            "support": self.support,
        }


def check_ray(classes: TokenClasses, H: np.ndarray, X: np.ndarray) -> tuple[float, float, float]:
    """Float residuals ``(residual, sum_violation, sign_violation)`` of a class ray X (m, C)
    normalised so that the off-support total is 1."""
    mask = classes.mask
    scale = max(float(np.abs(X).max()), 1e-300) * max(float(np.abs(H).sum(axis=1).max()), 1e-300)
    res = float(np.abs(X.T @ H).max()) / scale
    sums = float(np.abs(X @ classes.sizes).max())
    sign = float(max(0.0, np.where(mask, -np.inf, X).max()))
    return res, sums, sign


def find_ray(classes: TokenClasses, H: np.ndarray, drift: np.ndarray, *,
             time_limit: float | None = None) -> np.ndarray | None:
    """A class ray X of shape (m, C) on the support of ``drift`` (m, C), or None.

    Solves, over the entries in the support, :math:`\\sum_j X_{jc} h_j = 0` for every class,
    :math:`\\sum_c n_c X_{jc} = 0` for every context, :math:`X \\le 0` off the support and
    :math:`\\sum_{\\text{off}} n_c(-X_{jc}) = 1`, with HiGHS, within its default iteration budget
    (:func:`ntpcert.util.budget.highs_budget`) and the user's ``time_limit`` (seconds, off by default).
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    from ntpcert.util.budget import highs_budget, highs_options
    from ntpcert.util.interrupt import interruptible

    mask = classes.mask
    n = classes.sizes
    big = float(np.abs(drift).max()) if drift.size else 0.0
    if not big > 0:
        return None
    keep = np.abs(drift) > SUPPORT_RTOL * big
    rows_ctx = np.flatnonzero(keep.any(axis=1))
    keep[rows_ctx] |= mask[rows_ctx]  # in-support entries of those contexts are free
    if not np.any(keep & ~mask):
        return None
    jj, cc = np.nonzero(keep)
    nvar = jj.size
    m, d = H.shape
    if nvar * d > MAX_RAY_LP_NONZEROS:
        return None  # the LP would not fit in memory (the caller reports no ray)
    # class equations: for class c and coordinate i, sum_j X_jc h_ji = 0
    cls_ids, cls_pos = np.unique(cc, return_inverse=True)
    r1 = (cls_pos[:, None] * d + np.arange(d)[None, :]).ravel()
    c1 = np.repeat(np.arange(nvar), d)
    v1 = H[jj].ravel()
    nz = v1 != 0
    # context equations: sum_c n_c X_jc = 0
    ctx_ids, ctx_pos = np.unique(jj, return_inverse=True)
    r2 = cls_ids.size * d + ctx_pos
    A_eq = sp.csr_matrix(
        (np.concatenate([v1[nz], n[cc]]), (np.concatenate([r1[nz], r2]), np.concatenate([c1[nz], np.arange(nvar)]))),
        shape=(cls_ids.size * d + ctx_ids.size, nvar),
    )
    off = ~mask[jj, cc]
    norm_row = sp.csr_matrix(np.where(off, -n[cc], 0.0)[None, :])
    A_eq = sp.vstack([A_eq, norm_row], format="csr")
    b_eq = np.zeros(A_eq.shape[0])
    b_eq[-1] = 1.0
    bounds = np.column_stack([np.full(nvar, -np.inf), np.where(off, 0.0, np.inf)])
    # a budget of HiGHS iterations by the LP's size; the user's cap, when one is set, as well
    options = highs_options(highs_budget(*A_eq.shape), None if time_limit is None else max(time_limit, 0.1))
    try:
        res = interruptible(linprog, size=A_eq.nnz)(np.zeros(nvar), A_eq=A_eq, b_eq=b_eq, bounds=bounds,
                                                    method="highs", options=options)
    except (ValueError, MemoryError):
        return None
    if res.status != 0 or res.x is None:
        return None
    X = np.zeros(mask.shape)
    X[jj, cc] = res.x
    return X


def _rationalise(X: np.ndarray) -> np.ndarray | None:
    """Integer-valued float array proportional to a rational rounding of X, or None."""
    nzi = np.flatnonzero(X)
    if nzi.size == 0:
        return None
    vals = X.ravel()[nzi]
    vals = vals / np.abs(vals).max()
    fr = [Fraction(float(v)).limit_denominator(MAX_DENOMINATOR) for v in vals]
    lcm = lcm_all((f.denominator for f in fr), limit=MAX_EXACT_INT)
    if lcm is None:
        return None
    ints = [f.numerator * (lcm // f.denominator) for f in fr]
    if max(abs(i) for i in ints) > MAX_EXACT_INT:
        return None
    out = np.zeros(X.size)
    out[nzi] = np.array(ints, dtype=np.float64)
    return out.reshape(X.shape)


def verify_exactly(classes: TokenClasses, H: np.ndarray, X: np.ndarray) -> np.ndarray | None:
    """An integer-valued class ray proportional to a rounding of X that satisfies every ray
    condition in exact arithmetic, or None."""
    from ntpcert.errors import ExactArithmeticError
    from ntpcert.exact.dyadic import exact_matmul

    Xi = _rationalise(X)
    if Xi is None:
        return None
    mask = classes.mask
    ints = Xi.astype(np.int64)
    sizes = classes.sizes.astype(np.int64)
    if np.any(ints[~mask] > 0):
        return None
    jj, cc = np.nonzero(ints)
    sums: dict[int, int] = {}
    off_total = 0
    for j, c in zip(jj.tolist(), cc.tolist()):
        term = int(ints[j, c]) * int(sizes[c])
        sums[j] = sums.get(j, 0) + term
        if not mask[j, c]:
            off_total += term
    if any(v != 0 for v in sums.values()) or off_total >= 0:
        return None
    cols = np.flatnonzero(ints.any(axis=0))
    try:
        prod = exact_matmul(np.ascontiguousarray(Xi[:, cols].T), H)
    except ExactArithmeticError:
        return None
    if prod.sq_norm() != 0:
        return None
    return Xi


def token_ray(classes: TokenClasses, X: np.ndarray) -> np.ndarray:
    """The class ray X (m, C) as a token ray of shape (V, m), normalised to an off-support total of 1."""
    a = X[:, classes.of_token].T
    tot = float(-(np.where(classes.mask, 0.0, X) @ classes.sizes).sum())
    return a / tot if tot > 0 else a


def certify_ray(classes: TokenClasses, H: np.ndarray, X: np.ndarray, instance=None) -> FarkasRay | None:
    """Check a class ray in floats and exactly; None when it fails the float check.

    The exact check first rounds the ray to small rationals; when that fails and ``instance`` is
    given, the ray equations are solved exactly on the ray's support."""
    tot = float(-(np.where(classes.mask, 0.0, X) @ classes.sizes).sum())
    if not tot > 0:
        return None
    Xn = X / tot
    res, sums, sign = check_ray(classes, H, Xn)
    if res > RAY_RTOL or sums > RAY_RTOL * max(1.0, float(np.abs(Xn).max())) or sign > 0:
        return None
    exact = verify_exactly(classes, H, Xn)
    entries = None
    if exact is not None:
        tot_e = float(-(np.where(classes.mask, 0.0, exact) @ classes.sizes).sum())
        Xn = exact / tot_e
        res, sums, sign = check_ray(classes, H, Xn)
        entries = {}
        for j, c in zip(*np.nonzero(exact)):
            for v in np.flatnonzero(classes.of_token == c):
                entries[(int(v), int(j))] = Fraction(int(exact[j, c]))
    a = token_ray(classes, Xn)
    if entries is None and instance is not None:
        entries = _exact_ray_on_support(instance, a)
    return FarkasRay(a, res, sums, sign, entries is not None, int(np.count_nonzero(a)), entries)


def _exact_ray_on_support(instance, a: np.ndarray) -> dict | None:
    """Solve the ray equations in rationals on the support of ``a`` and check them
    (:func:`ntpcert.exact.separability.exact_ray`), for supports up to ``EXACT_MAX_SUPPORT``."""
    if np.count_nonzero(a) > EXACT_MAX_SUPPORT:
        return None
    try:
        from ntpcert.exact.separability import check_ray as exact_check, exact_ray
    except ImportError:  # pragma: no cover - the exact module ships with the package
        return None
    ray = exact_ray(instance, a)
    return ray if ray is not None and exact_check(instance, ray) == "" else None
