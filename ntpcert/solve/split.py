r"""The split of the out-of-support pairs into separable (P) and non-separable (N) ones, in float64.

**Recession cone** (our derivation, ``docs/math.md``). CE(W + sD) stays bounded as s grows iff D lies in

.. math:: K = \{D : (d_z - d_{z'})^\top h_j = 0\ (z, z' \in S_j),\ (d_z - d_v)^\top h_j \ge 0\ (z \in S_j, v \notin S_j)\}.

A pair (j, v), :math:`v \notin S_j`, is *separable* (in P) when some :math:`D \in K` has a positive margin
:math:`(d_{z_j} - d_v)^\top h_j > 0`; otherwise it is an implicit equality of K (in N). One
:math:`D_P \in K` is positive on all of P at once (a sum of one D per pair), so P and N are unique
(Goldman–Tucker); the data are NTP-separable iff N is empty.

**One LP finds both.** With the margin rows :math:`A_{mar}` and the equality rows :math:`A_{eq}` of
:mod:`ntpcert.rows.kesler`,

.. math:: \max \textstyle\sum_i t_i \quad\text{s.t.}\quad A_{mar} D \ge t,\ A_{eq} D = 0,\ 0 \le t \le 1 .

Scaling :math:`D_P` makes every P-margin at least 1, and an N-margin is 0 for every D in K, so the optimum
has :math:`t = 1` on P and :math:`t = 0` on N. Its dual (y >= 0 on the margin rows, u >= 0 on t <= 1,
free :math:`\lambda` on the equality rows) satisfies :math:`A_{mar}^\top y + A_{eq}^\top \lambda = 0` and
:math:`y_i + u_i \ge 1`; complementary slackness (:math:`t_i = 0 < 1` on N) forces :math:`u_i = 0`, so
:math:`y_i \ge 1` on every N pair. Written as one (V, m) array a (column j:
:math:`a_j = (\sum_v y_{jv} - \sum_z \lambda_{jz}) e_{z_j} + \sum_z \lambda_{jz} e_z - \sum_v y_{jv} e_v`),
this is :math:`\sum_j a_j h_j^\top = 0`, :math:`\mathbf 1^\top a_j = 0`, :math:`a_{j,v} \le 0` off the
supports and :math:`a_{j,v} < 0` on N: for every :math:`D \in K`,
:math:`0 = \sum_j a_j^\top D h_j = \sum_{j, v \notin S_j} (-a_{j,v})\,\mathrm{margin}_{jv}(D)`, a sum of
non-negative terms, so every pair where a is negative has margin 0 in all of K.

**Structure used.** Tokens that lie in exactly the same supports are interchangeable
(:class:`~ntpcert.solve.structured.classes.TokenClasses`): swapping two rows of D maps K onto itself, so
the split is the same on a class, and averaging a D over the swaps keeps it in K. The LP is solved on
one token per class (every token that lies in no support, often most of the vocabulary, is one class);
its D is expanded row by row, and its dual a (class c, context j) becomes
:math:`a_{v,j} = a_{c,j}/n_c` for each of the :math:`n_c` tokens v of class c, which keeps both
:math:`\sum_j a_j h_j^\top = 0` and the column sums. The LP is not built past
:data:`~ntpcert.solve.separability_lp.LP_MAX_NONZEROS`; HiGHS' work is bounded by ``max_iterations``
simplex iterations (a count of work, never wall-clock). Nothing here is a proof:
:mod:`ntpcert.exact.split` makes both certificates exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.instance.sparse import SparseCountsInstance
from ntpcert.rows.kesler import sparse_rows
from ntpcert.solve.structured.classes import class_instance

#: The single LP is built up to this many non-zeros; above it the split goes by the small LPs of
#: :mod:`ntpcert.solve.split_screen` (one-token screens for P, a dual LP on the rest for N).
SINGLE_LP_MAX_NONZEROS = 1_000_000
#: The small LPs of :mod:`ntpcert.solve.split_screen` (about 2·C LPs of m rows in d unknowns, C token classes)
#: are tried only where they hold at most this many cells C·m·d in all (decided from the sizes, a bound on
#: work): a model's whole pydoc text (C = 5,711, m = 31,621, d = 768: 1.4·10^11 cells) ran past 10 minutes
#: and 10 GB in them. Callers may pass ``max_cells=None`` for no bound.
SCREEN_MAX_CELLS = 50_000_000
#: Simplex iterations HiGHS may spend on the split LP (a budget of work).
SPLIT_MAX_ITERATIONS = 2_000_000
#: A pair is read as separable when its t is above this, as non-separable when below 1 - this; any
#: t in between, or a P margin or an N multiplier off its side, leaves the split undetermined.
T_THRESHOLD = 0.5
#: Entries of the point and the dual below this (relative to the largest, or to 1) are read as 0.
DUAL_TOL = 1e-9
#: The N-certificate's combination :math:`\sum_j a_j h_j^\top` must vanish to this, relative to the size of
#: its terms :math:`\sum_j |a_j|\,|h_j|^\top` (entrywise), for the float split to be read off: a float
#: measurement, scale-free, not a proof (the exact split makes its own).
DUAL_RESIDUAL_TOL = 1e-7


@dataclass(frozen=True, eq=False)
class Split:
    r"""The float split of the out-of-support pairs (module doc).

    Attributes
    ----------
    status : str
        ``"ok"`` (P and N read off an optimal LP) or ``"undetermined"`` (``reason`` says why).
    reason : str
        Empty when ``status == "ok"``.
    nonseparable : ndarray of int64, shape (n_N, 2)
        The pairs (j, v) of N, :math:`v \notin S_j`, sorted by j then v.
    n_separable : int
        :math:`|P|` (every other out-of-support pair).
    of_token : ndarray of int64, shape (V,)
        Class of each token (tokens of one class lie in the same supports).
    class_sizes : ndarray of int64, shape (C,)
        :math:`n_c`.
    D_classes : ndarray of shape (C, d) or None
        :math:`D_P` per class: a float point of K with margin about >= 1 on P and about 0 on N.
    dual_classes : ndarray of shape (C, m) or None
        The LP's dual on one token per class: :math:`\sum_j a_{c,j} h_j = 0`,
        :math:`\sum_c a_{c,j} = 0`, :math:`a_{c,j} \le -1` (about) on N, 0 on P.
    iterations : int
        Simplex iterations HiGHS spent.
    too_large : bool
        Undetermined because the problem was too large to try (a limit decided by the sizes), not because a
        solver failed: the glue (:func:`nonseparable_split`) is tried only then.
    """

    status: str
    reason: str
    nonseparable: np.ndarray
    n_separable: int
    of_token: np.ndarray
    class_sizes: np.ndarray
    D_classes: np.ndarray | None
    dual_classes: np.ndarray | None
    iterations: int = 0
    too_large: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def n_nonseparable(self) -> int:
        return int(self.nonseparable.shape[0])

    @property
    def D(self) -> np.ndarray | None:
        r""":math:`D_P` of shape (V, d) (class rows expanded)."""
        return None if self.D_classes is None else self.D_classes[self.of_token]

    @property
    def dual(self) -> np.ndarray | None:
        r"""The N-certificate a of shape (V, m): :math:`a_{v,j} = a_{c(v),j} / n_{c(v)}`."""
        if self.dual_classes is None:
            return None
        return (self.dual_classes / self.class_sizes[:, None])[self.of_token]

    def nonseparable_mask(self, m: int, V: int) -> np.ndarray:
        """N as a boolean (m, V) array."""
        out = np.zeros((m, V), dtype=bool)
        out[self.nonseparable[:, 0], self.nonseparable[:, 1]] = True
        return out

    def extended_mask(self, instance: NTPInstance) -> np.ndarray:
        r"""The supports extended by N: :math:`S_j \cup N_j` as a boolean (m, V) array."""
        return instance.support_mask() | self.nonseparable_mask(instance.m, instance.V)

    def to_json(self) -> dict:
        return {"status": self.status, "separable_pairs": int(self.n_separable),
                "nonseparable_pairs": int(self.n_nonseparable), **({"reason": self.reason} if self.reason else {})}


def _expand_pairs(classes, pairs_c: np.ndarray) -> np.ndarray:
    """Class pairs (j, c) to token pairs (j, v), sorted."""
    if pairs_c.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(classes.of_token, kind="stable")
    starts = np.searchsorted(classes.of_token[order], np.arange(classes.count))
    ends = np.append(starts[1:], order.size)
    out = [np.column_stack([np.full(ends[c] - starts[c], j), order[starts[c]:ends[c]]])
           for j, c in pairs_c]
    P = np.concatenate(out).astype(np.int64)
    return P[np.lexsort((P[:, 1], P[:, 0]))]


_rows = sparse_rows


def _too_large_early(instance: NTPInstance, max_nonzeros: int | None, max_cells: int | None,
                     method: str) -> Split | None:
    """The "too large to try" answer of :func:`nonseparable_split` from the token partition alone, before the
    (m, C) class instance is built, where its margin rows alone (at least C·m - Σ k_j, one non-zero each)
    exceed the LP limit and the screens' C·m·d exceeds ``max_cells``; None otherwise."""
    from ntpcert.solve.separability_lp import LP_MAX_NONZEROS
    from ntpcert.solve.structured.classes import partition

    if max_cells is None or method not in ("auto", "screen"):
        return None
    limit = LP_MAX_NONZEROS if max_nonzeros is None else int(max_nonzeros)
    C, m, d = 0, instance.m, instance.d
    of_token, rep = partition(instance)
    C = int(rep.size)
    q_low = C * m - int(instance.support_sizes.sum())
    cells = C * m * d
    if cells <= max_cells or q_low <= limit:
        return None
    nu = instance.token_multiplicity
    sizes = np.bincount(of_token, weights=nu, minlength=C).astype(np.int64)
    return Split("undetermined", f"the split is too large to try here: its small LPs hold C·m·d = {cells} cells on "
                                 f"{C} token classes, more than the limit of {max_cells}, and its single LP more than "
                                 f"{q_low} non-zeros, more than {limit}", np.zeros((0, 2), dtype=np.int64), 0,
                 of_token, sizes, None, None, 0, too_large=True)


def _undetermined(classes, why: str, iterations: int = 0, too_large: bool = False) -> Split:
    return Split("undetermined", why, np.zeros((0, 2), dtype=np.int64), 0, classes.of_token,
                 classes.sizes.astype(np.int64), None, None, iterations, too_large)


#: The whitened retry needs H of full column rank: its smallest singular value at least this times its largest.
WHITEN_MIN_SINGULAR = 1e-12


def _whitened_split(instance: NTPInstance, *, max_iterations: int, max_nonzeros: int | None) -> Split | None:
    r"""The split of ``instance`` solved on :math:`H T` with :math:`T = V\Sigma^{-1}` from the SVD
    :math:`H = U\Sigma V^	op` (orthonormal columns :math:`U`), mapped back; None where H is not of full
    column rank (:data:`WHITEN_MIN_SINGULAR`).

    An invertible T changes no logit matrix the data can reach (:math:`\operatorname{col}(HT) =
    \operatorname{col}(H)`), so P, N and the cone K are the same: a point :math:`D_w` for :math:`HT` is
    :math:`D = D_wT^	op` for H (:math:`Dh_j = D_w T^	op h_j`), and the N-certificate's multipliers are the same
    (:math:`\sum_j a_j (T^	op h_j) = T^	op\sum_j a_j h_j`, zero iff the sum is, T invertible). HiGHS
    solves the whitened LP where the original defeats it (a model's nearly parallel LayerNorm outputs: the
    split LP reported unbounded, though t <= 1 bounds it). In floats HT is H T rounded: the split is, as
    always, re-checked (its point and dual, and exactly where a verdict rests on it)."""
    H = np.asarray(instance.embeddings, dtype=np.float64)
    if H.shape[0] < H.shape[1]:
        return None
    _, S, Vt = np.linalg.svd(H, full_matrices=False)
    if S.size == 0 or not S[-1] > WHITEN_MIN_SINGULAR * S[0]:
        return None
    if not instance.has_counts:  # probabilities: the retry rebuilds count instances only
        return None
    T = Vt.T / S
    try:
        if isinstance(instance, SparseCountsInstance):  # sparse stays sparse
            white = SparseCountsInstance.from_csr(H @ T, instance.csr)
        else:
            white = NTPInstance.from_counts(H @ T, instance.counts)
        if instance.token_multiplicity is not None:
            white = white.with_token_multiplicity(instance.token_multiplicity)
        out = nonseparable_split(white, max_iterations=max_iterations, max_nonzeros=max_nonzeros, whiten=False,
                                 glue=False)
    except (InputError, SolverError):  # the whitened h out of the pipeline's range, say: no retry
        return None
    if not out.ok or out.D_classes is None:
        return out
    import dataclasses

    D = out.D_classes @ T.T
    return dataclasses.replace(out, D_classes=D)


def nonseparable_split(instance: NTPInstance, *, max_iterations: int = SPLIT_MAX_ITERATIONS,
                       max_nonzeros: int | None = None, method: str = "auto",
                       max_cells: int | None = SCREEN_MAX_CELLS, whiten: bool = True, glue: bool = True) -> Split:
    """The split P / N of the out-of-support pairs of ``instance`` by the LP of the module doc, on one
    token per class of interchangeable tokens. A :class:`Split`; never raises for a hard instance
    (the result is then undetermined, naming why). ``max_nonzeros``: the largest LP built (default
    :data:`~ntpcert.solve.separability_lp.LP_MAX_NONZEROS`), decided from the sizes before anything is built.
    ``max_cells``: the small LPs of :mod:`ntpcert.solve.split_screen` (about 2·C LPs of m rows in d unknowns)
    are tried only where C·m·d is at most this (default :data:`SCREEN_MAX_CELLS`; None: no limit).
    ``whiten``: where HiGHS does not solve the LP, solve it once more in whitened coordinates
    (:func:`_whitened_split`) before the screens. ``glue``: where the split was too large to try, glue
    tokens whose rows K makes equal (:mod:`ntpcert.solve.split_glue`) and split the quotient, when the
    quotient can fall within the limits that stopped the split (decided from the sizes). H far from unit
    size is first scaled by a power of two (:mod:`ntpcert.rows.scaling`: HiGHS drops matrix entries below 1e-9
    and reads its tolerances absolutely; on H·1e-20 it read a wrong N as optimal)."""
    from ntpcert.rows.scaling import unit_scaled

    scaled, e = unit_scaled(instance)
    if e:
        out = nonseparable_split(scaled, max_iterations=max_iterations, max_nonzeros=max_nonzeros, method=method,
                                 max_cells=max_cells, whiten=whiten, glue=glue)
        if out.D_classes is None:
            return out
        import dataclasses

        D = np.ldexp(out.D_classes, e)  # D h = D' (2^e h): exact unless D' 2^e leaves float64's range
        if not np.all(np.isfinite(D)):
            return _undetermined_like(out, f"the split's point overflows float64 once H is scaled back by 2^{e}")
        return dataclasses.replace(out, D_classes=D)
    out = _split(instance, max_iterations=max_iterations, max_nonzeros=max_nonzeros, method=method,
                 max_cells=max_cells, whiten=whiten)
    if out.ok or not glue or not out.too_large or method != "auto":
        return out  # a solver that failed fails on the quotient too, as often as not; the screens alone stay so
    lifted = _glued(instance, max_iterations=max_iterations, max_nonzeros=max_nonzeros, method=method,
                    max_cells=max_cells, whiten=whiten)
    return out if lifted is None else lifted


def _undetermined_like(out: Split, why: str) -> Split:
    import dataclasses

    return dataclasses.replace(out, status="undetermined", reason=why, nonseparable=np.zeros((0, 2), dtype=np.int64),
                               n_separable=0, D_classes=None, dual_classes=None)


def _glued(instance: NTPInstance, *, max_cells: int | None, max_nonzeros: int | None, **kw) -> Split | None:
    """:func:`nonseparable_split` through the quotient by glued tokens (:func:`ntpcert.solve.split_glue.lift_split`),
    or None where no token is glued or the quotient cannot fall within ``max_cells`` and ``max_nonzeros``: the
    quotient has at least C - k + 1 classes, k the candidates of :func:`~ntpcert.solve.split_glue.glue_group`."""
    from ntpcert.solve.separability_lp import LP_MAX_NONZEROS
    from ntpcert.solve.split_glue import GLUE_MIN_FRACTION, glue_group
    from ntpcert.solve.structured.classes import partition

    m, d = instance.m, instance.d
    if m < 2 * d:  # fewer contexts than this rarely glue anything (a glued pair needs its contexts to span R^d)
        return None
    of_token, rep = partition(instance)
    n_tok = np.bincount(np.concatenate(instance.supports).astype(np.int64), minlength=instance.V)
    k = int(np.count_nonzero(n_tok[rep] >= max(1, d // GLUE_MIN_FRACTION)))
    if k < 2:
        return None
    C_low = rep.size - k + 1
    limit = LP_MAX_NONZEROS if max_nonzeros is None else int(max_nonzeros)
    if max_cells is not None and C_low * m * d > max_cells and C_low * m - int(instance.support_sizes.sum()) > limit:
        return None
    g = glue_group(instance)
    if g is None:
        return None
    return glued_split(instance, g, lambda q: nonseparable_split(q, max_cells=max_cells, max_nonzeros=max_nonzeros,
                                                                 glue=False, **kw))


def _split(instance: NTPInstance, *, max_iterations: int, max_nonzeros: int | None, method: str,
           max_cells: int | None, whiten: bool) -> Split:
    """:func:`nonseparable_split` without the glue."""
    from scipy.optimize import linprog
    import scipy.sparse as sp

    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.separability_lp import LP_MAX_NONZEROS
    from ntpcert.util.interrupt import interruptible

    if np.all(instance.support_sizes == instance.V):  # every token in every support: one class, no pair
        V = instance.V
        return Split("ok", "", np.zeros((0, 2), dtype=np.int64), 0, np.zeros(V, dtype=np.int64),
                     np.array([V], dtype=np.int64), np.zeros((1, instance.d)), np.zeros((1, instance.m)), 0)
    early = _too_large_early(instance, max_nonzeros, max_cells, method)
    if early is not None:
        return early
    classes, red = class_instance(instance)
    sysr = KeslerSystem.build(red)
    C, d, m = red.V, red.d, red.m
    q, r = sysr.n_margin, sysr.n_eq
    sizes = classes.sizes.astype(np.int64)
    if q == 0:
        return Split("ok", "", np.zeros((0, 2), dtype=np.int64), 0, classes.of_token, sizes,
                     np.zeros((C, d)), np.zeros((C, m)), 0)
    # non-zeros from the sizes alone: a row of context j has 2 nnz(h_j) (one-hot data: 2 or 2k)
    per = 2 * np.count_nonzero(red.embeddings, axis=1).astype(np.int64)
    rows_j = red.V - red.support_sizes.astype(np.int64) + np.maximum(red.support_sizes.astype(np.int64) - 1, 0)
    nnz = int(per @ rows_j) + q
    limit = LP_MAX_NONZEROS if max_nonzeros is None else int(max_nonzeros)
    cells = C * m * d
    tried_screens = False
    if method == "screen" or (method == "auto" and nnz > SINGLE_LP_MAX_NONZEROS):
        if max_cells is not None and cells > max_cells:
            if method == "screen" or nnz > limit:
                single = "" if method == "screen" else f", and its single LP {nnz} non-zeros, more than {limit}"
                return _undetermined(classes, f"the split is too large to try here: its small LPs hold C·m·d = "
                                              f"{cells} cells on {C} token classes, more than the limit of "
                                              f"{max_cells}{single}", too_large=True)
        else:
            out = _screened(instance, classes, red, sysr, limit)
            tried_screens = True
            if out.ok or method == "screen" or nnz > limit:
                return out
    if nnz > limit:
        return _undetermined(classes, f"the split LP is too large to try here: {q + r} rows on {C} token classes "
                                      f"({nnz} non-zeros), more than the limit of {limit}", too_large=True)
    A_mar = _rows(red.embeddings, C, sysr.mar_context, sysr.mar_anchor, sysr.mar_token)
    A_eq = _rows(red.embeddings, C, sysr.eq_context, sysr.eq_token, sysr.eq_anchor)
    n = C * d
    # variables x = (vec D, t); A_mar D - t >= 0  <=>  -A_mar D + t <= 0
    A_ub = sp.hstack([-A_mar, sp.identity(q, format="csr")], format="csr")
    A_e = sp.hstack([A_eq, sp.csr_matrix((r, q))], format="csr") if r else None
    c = np.concatenate([np.zeros(n), -np.ones(q)])
    bounds = [(None, None)] * n + [(0.0, 1.0)] * q
    solve = interruptible(linprog, size=A_ub.nnz + (A_e.nnz if A_e is not None else 0))
    try:
        res = solve(c=c, A_ub=A_ub, b_ub=np.zeros(q), A_eq=A_e, b_eq=np.zeros(r) if r else None,
                    bounds=bounds, method="highs-ds", options={"presolve": True, "maxiter": int(max_iterations)})
        if res.status == 4 and not int(getattr(res, "nit", 0) or 0):
            # HiGHS 1.12's dual simplex can stop at once with model status "Not Set" where the start (t = 0) is
            # nearly optimal (almost every pair in N: a 4-dimensional model's 89 contexts); its interior point
            # method with crossover gives a basic point, read and checked below as the simplex's would be
            res = solve(c=c, A_ub=A_ub, b_ub=np.zeros(q), A_eq=A_e, b_eq=np.zeros(r) if r else None,
                        bounds=bounds, method="highs-ipm", options={"presolve": True, "maxiter": int(max_iterations)})
    except (ValueError, MemoryError) as err:
        raise SolverError(f"split LP: HiGHS failed ({err})") from err
    its = int(getattr(res, "nit", 0) or 0)
    if res.status != 0 or res.x is None:
        from ntpcert.util.budget import highs_stop

        stop = highs_stop(res, max_iterations, None, "a larger max_iterations may settle it")
        why = f"HiGHS did not solve the split LP ({stop or res.message})"
        if whiten:
            out = _whitened_split(instance, max_iterations=max_iterations, max_nonzeros=max_nonzeros)
            if out is not None and out.ok:
                return out
            why += "; in whitened coordinates too" if out is not None else ""
        if method == "auto" and not tried_screens and (max_cells is None or cells <= max_cells):
            # HiGHS 1.12-1.16 can stop at once with "Not Set" on a degenerate start (a model's h with a
            # direction of size 1e-7, every pair in N): the small LPs of the screens are other LPs
            out = _screened(instance, classes, red, sysr, limit)
            if out.ok:
                return out
            why += f"; the screens: {out.reason}"
        return _undetermined(classes, why, its)
    x = np.asarray(res.x, dtype=np.float64)
    D = x[:n].reshape(C, d).copy()
    D[np.abs(D) <= DUAL_TOL * max(np.abs(D).max(initial=0.0), 1.0)] = 0.0  # round-off of a basic point, not data
    t = x[n:]
    # dual: marginals of A_ub x <= 0 are <= 0 (d obj / d b); y = -marginals >= 0
    y = -np.asarray(res.ineqlin.marginals, dtype=np.float64)
    lam = np.asarray(res.eqlin.marginals, dtype=np.float64) if r else np.zeros(0)
    # column j: + y on the anchor, - y on v; lambda on (e_z - e_anchor) (its sign convention fixed below)
    Ym = sysr.margin_coefficients(y)  # sum y (e_anchor - e_v) per context: (C, m)
    Le = sysr.eq_coefficients(lam) if r else np.zeros((C, m))
    H = red.embeddings
    r1 = np.abs((Ym + Le) @ H).max(initial=0.0)
    r2 = np.abs((Ym - Le) @ H).max(initial=0.0)
    a = Ym + Le if r1 <= r2 else Ym - Le
    scale = max(np.abs(a).max(initial=0.0), 1.0)
    a[np.abs(a) <= DUAL_TOL * scale] = 0.0
    size = float((np.abs(a) @ np.abs(H)).max(initial=0.0))
    resid = float(np.abs(a @ H).max(initial=0.0))
    if resid > DUAL_RESIDUAL_TOL * size:
        return _undetermined(classes, f"the split LP's dual does not vanish on H: max |sum_j a_j h_j| = {resid:.3g} "
                                      f"against {size:.3g} for its terms (tolerance {DUAL_RESIDUAL_TOL:g})", its)
    is_p = t > T_THRESHOLD
    margins = sysr.apply_margin(D)
    yv = -a[sysr.mar_token, sysr.mar_context]
    if np.any((t > 1 - T_THRESHOLD) & ~is_p):
        return _undetermined(classes, "the split LP's t is neither 0 nor 1 on some pair", its)
    bad_p = is_p & (margins < 0.5)
    bad_n = ~is_p & (yv < 0.5)
    if np.any(bad_p) or np.any(bad_n):
        return _undetermined(classes, f"the split LP's point and dual disagree with its t on "
                                      f"{int(bad_p.sum()) + int(bad_n.sum())} pairs", its)
    n_pairs = np.column_stack([sysr.mar_context[~is_p], sysr.mar_token[~is_p]])
    N = _expand_pairs(classes, n_pairs)
    total = instance.m * instance.V - int(instance.support_sizes.sum())
    return Split("ok", "", N, total - N.shape[0], classes.of_token, sizes, D, a, its)


def _screened(instance: NTPInstance, classes, red: NTPInstance, sysr, limit: int) -> Split:
    """:func:`nonseparable_split` by :func:`ntpcert.solve.split_screen.screened`, checked as the single
    LP's answer is (the point's margins and the multipliers against N)."""
    from ntpcert.solve.split_screen import screened

    status, why, is_n, D, a = screened(red, max_nonzeros=limit)
    if status != "ok":
        return _undetermined(classes, why)
    margins = sysr.apply_margin(D)
    on_n = is_n[sysr.mar_context, sysr.mar_token]
    yv = -a[sysr.mar_token, sysr.mar_context]
    bad = int(np.count_nonzero(~on_n & (margins < 0.5)) + np.count_nonzero(on_n & (yv < 0.5)))
    if bad:
        return _undetermined(classes, f"the screens' point and multipliers disagree with their split on {bad} pairs")
    N = _expand_pairs(classes, np.argwhere(is_n))
    total = instance.m * instance.V - int(instance.support_sizes.sum())
    return Split("ok", "", N, total - N.shape[0], classes.of_token, classes.sizes.astype(np.int64), D, a, 0)


def lift_split(instance: NTPInstance, glue, quotient_split: Split) -> Split:
    r"""The split of ``instance`` from the split of ``glue.quotient(instance)`` (:mod:`ntpcert.solve.split_glue`):
    N is the glue's pairs and the lifted :math:`\tilde N`; :math:`D_P` is the quotient's point with G's row copied
    to every token of G. The glue's N-certificate is float weights per test, not one (V, m) array, so
    ``dual_classes`` is None (:func:`ntpcert.exact.split.exact_split` then says the split is float only). An
    undetermined quotient split gives an undetermined split naming it."""
    from ntpcert.solve.structured.classes import TokenClasses

    classes = TokenClasses.build(instance)
    sizes = classes.sizes.astype(np.int64)
    names = ", ".join(repr(t) for t in _token_names(instance, glue.group[:8]))
    names += ", ..." if glue.group.size > 8 else ""
    if not quotient_split.ok:
        return Split("undetermined", f"{glue.group.size} tokens are glued ({names}: their rows are equal on the "
                                     f"whole recession cone, {glue.tests} pair tests), and the split of the quotient "
                                     f"is undetermined: {quotient_split.reason}", np.zeros((0, 2), dtype=np.int64), 0,
                     classes.of_token, sizes, None, None, quotient_split.iterations)
    of, Vq = glue.quotient_tokens(instance.V)
    g = Vq - 1
    in_g = glue.mask(instance.V)
    parts = [glue.nonseparable_pairs(instance)]
    qN = np.asarray(quotient_split.nonseparable, dtype=np.int64).reshape(-1, 2)
    off = qN[qN[:, 1] != g]
    if off.size:
        back = np.empty(Vq - 1, dtype=np.int64)
        back[of[~in_g]] = np.flatnonzero(~in_g)
        parts.append(np.column_stack([off[:, 0], back[off[:, 1]]]))
    on = qN[qN[:, 1] == g, 0]
    if on.size:
        parts.append(np.column_stack([np.repeat(on, glue.group.size), np.tile(glue.group, on.size)]))
    N = np.concatenate(parts).astype(np.int64)
    N = N[np.lexsort((N[:, 1], N[:, 0]))]
    total = instance.m * instance.V - int(instance.support_sizes.sum())
    D = None
    if quotient_split.D_classes is not None:
        Dq = quotient_split.D  # (Vq, d)
        D = Dq[of][classes.representative]
    return Split("ok", "", N, total - N.shape[0], classes.of_token, sizes, D, None, quotient_split.iterations)


def _token_names(instance: NTPInstance, tokens: np.ndarray) -> list:
    names = instance.token_names
    return [names[int(t)] if names is not None else int(t) for t in tokens]


def glued_split(instance: NTPInstance, glue, split_quotient) -> Split:
    r"""The split of ``instance`` through the quotient by ``glue`` (a :class:`~ntpcert.solve.split_glue.Glue`):
    ``split_quotient(quotient)`` (a function giving its :class:`Split`) lifted by :func:`lift_split`. Where the
    group holds every token, the quotient has no pair: K holds only the shifts :math:`\mathbf 1 c^\top`, every
    pair is in N."""
    _, Vq = glue.quotient_tokens(instance.V)
    if Vq == 1:
        empty = Split("ok", "", np.zeros((0, 2), dtype=np.int64), 0, np.zeros(1, dtype=np.int64),
                      np.ones(1, dtype=np.int64), np.zeros((1, instance.d)), None, 0)
        return lift_split(instance, glue, empty)
    return lift_split(instance, glue, split_quotient(glue.quotient(instance)))
