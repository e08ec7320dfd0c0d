r"""Witnesses that make float verdicts definite, each checked exactly (or with a stated error bound).

The float pipeline answers "yes" or "no" only with a witness; everything else is undetermined.

**Compatibility, rank-deficient case.** When :math:`A_{eq}` may be rank deficient
(:class:`~ntpcert.rows.subspace.Subspace` certifies rank at least :math:`\rho`; :math:`k = r - \rho`
directions are in doubt), the near-null eigenvectors :math:`N` (shape (r, k)) are turned into a
rational basis: :math:`N^\top` is brought to reduced row-echelon form on :math:`k` pivot columns
chosen by pivoted QR, each entry is rounded to a fraction with denominator at most
``NULL_MAX_DENOMINATOR``, and each row is scaled to integers :math:`y`. A row counts only when
:math:`A_{eq}^\top y = 0` holds **exactly** (integer coefficients times the dyadic embeddings, in
exact arithmetic). For such y, :math:`y^\top b = \log \prod_i (c_{j_i,z_i}/c_{j_i,a_i})^{y_i}` with the
exact integer count ratios, so :math:`y^\top b = 0` iff that product of rationals is exactly 1:

* a null vector whose product is not 1 proves "not compatible";
* :math:`k` independent exact null vectors span the whole left null space (the rank is at least
  :math:`\rho`), so when all their products are 1 the data are compatible.

Otherwise the verdict stays undetermined, and ``ntpcert certify --exact`` settles it.

**Separability "no".** HiGHS reporting infeasibility is not a witness. A "no" needs a Farkas ray
verified exactly; the structured solver extracts one from its diverging dual iterates
(:mod:`ntpcert.solve.structured.farkas`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ntpcert.exact.left_null import is_exact_left_null, log_odds_sign
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.util.numbers import lcm_all
from ntpcert.verdict import FullRowRank, NoEquations, NullSpaceBasis, Verdict, ViolatingNullVector

#: Largest denominator of a rounded null-vector entry.
NULL_MAX_DENOMINATOR = 1 << 16
#: A rounded entry must agree with the float one to this, relative to the row's largest entry (loose is
#: safe: every rounded vector is checked exactly).
NULL_ROUNDING_TOL = 1e-6
#: Null vectors with an integer entry above this, or more near-null directions than this, are not tried.
NULL_MAX_ENTRY = 1 << 20
NULL_MAX_DIRECTIONS = 2000
#: ... and not on a near-null basis with more than this many entries (r·k): rounding it costs seconds.
NULL_MAX_WORK = 200_000


def rational_null_candidates(N: np.ndarray) -> list[np.ndarray | None] | None:
    """Integer vectors (int64 arrays of shape (r,)), one per row of the reduced echelon form of
    ``N.T`` (N of shape (r, k)), or None for a row that does not round cleanly; None when the
    echelon form cannot be formed."""
    from scipy.linalg import qr, solve

    r, k = N.shape
    if k == 0:
        return []
    _, _, piv = qr(N.T, mode="economic", pivoting=True)
    cols = np.sort(piv[:k])
    B = N.T[:, cols]  # (k, k)
    try:
        R = solve(B, N.T)  # identity at the pivot columns
    except (np.linalg.LinAlgError, ValueError):
        return None
    out: list[np.ndarray | None] = []
    for row in R:
        out.append(_integer_row(row))
    return out


def _integer_row(row: np.ndarray) -> np.ndarray | None:
    scale = float(np.abs(row).max())
    if not np.isfinite(scale) or scale == 0.0:
        return None
    row = row / scale
    nz = np.flatnonzero(np.abs(row) > NULL_ROUNDING_TOL)
    fr = {int(i): Fraction(float(row[i])).limit_denominator(NULL_MAX_DENOMINATOR) for i in nz}
    if any(abs(float(f) - float(row[i])) > NULL_ROUNDING_TOL for i, f in fr.items()):
        return None
    den = lcm_all(f.denominator for f in fr.values())
    ints = np.zeros(row.size, dtype=np.int64)
    for i, f in fr.items():
        v = f.numerator * (den // f.denominator)
        if abs(v) > NULL_MAX_ENTRY:
            return None
        ints[i] = v
    return ints


def float_compatibility(subspace: Subspace) -> Verdict:
    """The float verdict on (4) from the subspace: compatible when :math:`A_{eq}` has certified full row
    rank (its smallest Gram eigenvalue above the rounding bound, :mod:`ntpcert.rows.subspace`); else a
    definite answer where exact null vectors made from the near-null directions show one (module doc);
    else undetermined, saying what would settle it."""
    system = subspace.system
    if system.n_eq == 0:
        return Verdict(True, NoEquations())
    if subspace.method in ("lsmr", "cholesky"):
        from ntpcert.rows.subspace import DENSE_MAX_ROWS

        why = (f"r = {system.n_eq} equality rows > DENSE_MAX_ROWS = {DENSE_MAX_ROWS}" if system.n_eq > DENSE_MAX_ROWS
               else f"the {subspace.method} path was asked for")
        return Verdict.undetermined(f"A_eq's rank was not certified by the float path ({why}); the log-odds along "
                                    "its left null space, if any, decide: run 'ntpcert certify DATA --exact'")
    if subspace.full_row_rank:
        lam_min = float(subspace.eigvals.min())
        return Verdict(True, FullRowRank(system.n_eq, None, "float-rank",
                                         f"A_eq has full row rank (smallest Gram eigenvalue {lam_min:.3g} > rounding "
                                         f"bound {subspace.rank_bound:.3g}): (4) is solvable for every right-hand side"))
    k = system.n_eq - subspace.certified_rank
    before = (f"A_eq may be rank deficient ({k} Gram eigenvalues within the rounding bound "
              f"{subspace.rank_bound:.3g}); the log-odds along its left null space decide")
    N = subspace.near_null
    if N is None or N.shape[1] > NULL_MAX_DIRECTIONS or N.size > NULL_MAX_WORK:
        return Verdict.undetermined(before + "; too many directions to make exact here: run "
                                    "'ntpcert certify DATA --exact' to decide it")
    cands = rational_null_candidates(N)
    exact_null = [] if cands is None else [y for y in cands if y is not None and is_exact_left_null(system, y)]
    signs = []
    for y in exact_null:
        s = log_odds_sign(system, y)
        if s:
            b = system.log_odds()
            return Verdict(False, ViolatingNullVector(
                _as_dict(system, y), "float-null-vectors",
                f"exact left null vector y of A_eq ({int(np.count_nonzero(y))} non-zeros) with "
                f"y^T b = {float(y @ b):.6g} != 0 (sign checked against its rounding bound)"))
        signs.append(s)
    if cands is not None and len(exact_null) == N.shape[1] and all(s == 0 for s in signs):
        return Verdict(True, NullSpaceBasis(
            tuple(_as_dict(system, y) for y in exact_null), subspace.certified_rank, None, "float-null-vectors",
            f"the {N.shape[1]} exact left null vectors of A_eq span its null space (rank certified "
            f"{subspace.certified_rank}) and every y^T b is exactly 0"))
    found = 0 if cands is None else len(exact_null)
    return Verdict.undetermined(before + f"; {found} of {N.shape[1]} directions made exact null vectors, all with "
                                "y^T b = 0; run 'ntpcert certify DATA --exact' to decide it")


def residual_lower_bound(system: KeslerSystem, y: dict) -> tuple[float, float]:
    r"""``(bound, relative)``: what a violating left null vector y (``{(context, token): int}`` over the
    equality rows, :math:`A_{eq}^\top y = 0` checked exactly) shows about every W.

    Since :math:`y^\top A_{eq} = 0`, :math:`y^\top(A_{eq}\mathrm{vec}(W) - b) = -y^\top b` for every W, so by
    Cauchy-Schwarz :math:`\|A_{eq}\mathrm{vec}(W) - b\|_2 \ge |y^\top b| / \|y\|_2`: no W, the
    least-squares point included, fits (4) better. The ratio does not change with the scale of y, so y is
    divided by its largest entry s first (its entries may have thousands of digits): with
    :math:`f_i = \mathrm{fl}(y_i / s)` and the logarithms of the integer count ratios of each context,
    :math:`v = \sum_i f_i(\log c_{z_i} - \log c_{a_i})` is within
    :math:`\beta = 4(n + 3)\,\epsilon \sum_i |f_i|(|\log c_{z_i}| + |\log c_{a_i}|)` of :math:`y^\top b / s`
    (one rounding in each quotient and logarithm, n terms summed; as in
    :func:`ntpcert.exact.left_null.log_odds_sign`), and :math:`\|y\|_2 / s \le
    (1 + (n + 4)\epsilon)\,\mathrm{fl}(\|f\|_2)`. The bound is
    :math:`(1 - 2\epsilon)\max(0, |v| - \beta) / ((1 + (n + 4)\epsilon)\,\mathrm{fl}(\|f\|_2))`;
    ``relative`` divides it by :math:`\max(1, \|b\|_2)`, as the relative residual is."""
    inst = system.instance
    anchors = inst.anchors()
    items = [(int(j), int(z), int(e)) for (j, z), e in y.items() if int(e)]
    if not items:
        return 0.0, 0.0
    s = max(abs(e) for _, _, e in items)
    eps = float(np.finfo(np.float64).eps)
    ratios: dict[int, dict[int, int]] = {}
    value = scale = sq = 0.0
    for j, z, e in items:
        c = ratios.get(j)
        if c is None:
            c = ratios[j] = inst.ratio_integers(j)
        f = e / s  # correctly rounded, |f| <= 1, whatever the size of e
        lz, la = math.log(c[z]), math.log(c[int(anchors[j])])
        value += f * (lz - la)
        scale += abs(f) * (abs(lz) + abs(la))
        sq += f * f
    n = len(items)
    beta = 4 * (n + 3) * eps * scale
    bound = (1 - 2 * eps) * max(0.0, abs(value) - beta) / ((1 + (n + 4) * eps) * math.sqrt(sq))
    return bound, bound / max(1.0, float(np.linalg.norm(system.log_odds())))


def _as_dict(system: KeslerSystem, y: np.ndarray) -> dict:
    return {(int(system.eq_context[i]), int(system.eq_token[i])): int(y[i]) for i in np.flatnonzero(y)}


__all__ = ["float_compatibility", "rational_null_candidates", "residual_lower_bound"]
