r"""W^mm in closed form when every context has its own coordinate (one-hot context embeddings).

When row j of H has one non-zero :math:`s_j` in column :math:`c_j` and the :math:`c_j` are distinct
(:attr:`ntpcert.instance.NTPInstance.onehot_columns`), the NTP-SVM splits by context, as (4) does for W*
(:mod:`ntpcert.rows.onehot`; our derivation). The logits of context j are :math:`x_j = s_j W_{:,c_j}`, the
columns of W that no context uses are 0 at the optimum, and
:math:`\tfrac12\|W\|_F^2 = \tfrac12\sum_j\|x_j\|^2/s_j^2`. Each context's problem,
:math:`\min\|x\|^2` with :math:`x` constant on :math:`S_j` and :math:`x_z - x_v \ge 1` for
:math:`z\in S_j, v\notin S_j`, has every margin tight at the optimum: with :math:`x = a` on
:math:`S_j` and :math:`a - 1` off it, :math:`k_ja^2 + (V-k_j)(a-1)^2` is least at :math:`a = 1 - k_j/V`, so

.. math:: x_j = \mathbf 1_{S_j} - \tfrac{k_j}{V}\mathbf 1, \qquad
          W^{mm}_{:,c_j} = x_j / s_j, \qquad
          \tfrac12\|W^{mm}\|_F^2 = \tfrac12\sum_j \frac{k_j(V-k_j)}{V s_j^2}.

The dual point (``math.md``; :math:`W = \sum_j a_j h_j^\top`) :math:`a_j = x_j / s_j^2` is feasible
(:math:`\mathbf 1^\top a_j = 0`, :math:`a_{j,v} = -k_j/(Vs_j^2) \le 0` off the support) and complementary (every
margin is 1), and :math:`\sum_j a_j h_j^\top = W^{mm}`: the pair is optimal, the gap 0. With all
:math:`k_j = 1` and :math:`s_j = 1` this is the hard-margin Crammer–Singer SVM of one-hot features, which
LIBLINEAR's dual coordinate descent approaches over its passes.

**The exact certificate** (:func:`onehot_bound`) is the one every structured solve gives
(:class:`~ntpcert.exact.svm_gap.SVMBound`), built in O(mV) without a product with H. It needs every
:math:`s_j` a power of two (:math:`h_j = e_{c_j}` among them), so that :math:`W_c = \tfrac1V W_q` with
:math:`W_q = (V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j` exact in floats. The dual is the dyadic
:math:`a_j = t\,(V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j^2` with :math:`t` the nearest dyadic to :math:`1/V` of
:data:`T_BITS` bits: its column sums are exactly 0 and its off-support entries negative for every
:math:`t > 0`, so it is exactly feasible, and

.. math:: D(a) = \sum_j \frac{k_j(V-k_j)}{s_j^2}\Bigl(t - \tfrac12 V t^2\Bigr),

which is :math:`\tfrac12\|W_c\|^2 - \tfrac{V}{2}(t - 1/V)^2\sum_j k_j(V-k_j)/s_j^2`: the gap is of order
:math:`2^{-2\,T\_BITS}` relative. The certificate's checker recomputes all of it from the file
(:mod:`ntpcert.certificate.checker`), trusting none of this.
"""

from __future__ import annotations

import dataclasses
import math
import time
from fractions import Fraction

import numpy as np

from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution

__all__ = ["T_BITS", "onehot_bound", "onehot_svm"]

#: Residuals are read in one compiled pass (numba) where V·m is at least this; below it numpy's few passes
#: are as fast and numba's import (about 0.3 s) would dominate.
COMPILED_MIN_CELLS = 200_000

#: Significant bits of the dyadic t ≈ 1/V in the exact dual: with V < 2^12 the entries t(V - k) stay
#: exact in float64.
T_BITS = 40


def _power_of_two(s: np.ndarray) -> bool:
    m, _ = np.frexp(np.abs(s))
    return bool(np.all(m == 0.5))


def onehot_svm(system: KeslerSystem, *, certificate: str = "exact") -> SVMSolution | None:
    """The NTP-SVM's solution in closed form (module doc) when H (m, d) has one non-zero per row in
    distinct columns and no token stands for several; None otherwise (the iterative solve applies).

    With ``certificate="exact"`` the solution carries its exact bound (``exact_bound``; ``info["certificate"]``
    as the iterative solve's) when every non-zero of H is a power of two; otherwise the closed form is
    returned with its float certificate only where ``certificate="float"``, and None where an exact one
    was asked for (the iterative solve gives it)."""
    t0 = time.perf_counter()
    inst = system.instance
    if inst.token_multiplicity is not None:
        return None
    found = inst.onehot_columns
    if found is None:
        return None
    cols, s = found
    exact = certificate == "exact"
    if exact and not (_power_of_two(s) and inst.V < 2 ** (53 - T_BITS)):
        return None
    V, m = inst.V, inst.m
    k = inst.support_sizes
    sup = (np.concatenate(inst.supports), np.repeat(np.arange(m), k))  # (token, context) of every support entry
    mask = np.zeros((V, m), dtype=bool)
    mask[sup] = True
    t = Fraction(round(Fraction(2 ** T_BITS, V)), 2 ** T_BITS)  # the exact dual's dyadic t ~ 1/V
    Wq, W, a = _closed_form(mask, k.astype(np.float64), cols, s, inst.d, float(t) if exact else 0.0)
    info = {"epochs": 0, "path": "onehot-closed-form", "classes": V,
            "why": "one non-zero per row of H in distinct columns: the NTP-SVM splits by context "
                   "(ntpcert.solve.structured.onehot)"}
    bound = None
    if exact:
        bound = onehot_bound(Wq, a, t, k, s, time.perf_counter())
        info["certificate"] = {"kind": "exact", "relative_gap": bound.relative_gap, "gap": bound.gap_float,
                               "distance_bound": bound.distance_bound, "norm_lower": bound.norm_lower,
                               "norm_upper": bound.norm_upper, "margin_lower": bound.margin_lower,
                               "bits": bound.bits, "seconds": bound.seconds}
    sol = _solution(system, W, a, cols, s, mask, seconds=time.perf_counter() - t0)
    if not exact:
        info["certificate"] = {"kind": "float", "relative_gap": sol.relative_gap, "gap": sol.gap}
    return dataclasses.replace(sol, info=info, exact_bound=bound)


def _solution(system: KeslerSystem, W: np.ndarray, a: np.ndarray, cols: np.ndarray, s: np.ndarray,
              mask: np.ndarray, *, seconds: float) -> SVMSolution:
    """The float pair's residuals as :meth:`SVMSolution.from_primal_dual` defines them, read off the
    logits :math:`Z_{v,j} = s_j W_{v,c_j}` (no product with H): O(mV), one compiled pass over (V, m) at
    size (:data:`COMPILED_MIN_CELLS`), a few numpy passes below.

    ``mask`` (V, m) marks the supports."""
    inst = system.instance
    V, m = a.shape
    anchors = inst.anchors()
    if V * m >= COMPILED_MIN_CELLS:
        eq_viol, min_margin, comp, off_sum, off_max, dres, colsum, sq = _compiled_residuals()(W, a, cols, s, mask,
                                                                                              anchors)
    else:
        eq_viol, min_margin, comp, off_sum, off_max, dres, colsum, sq = _residuals(W, a, cols, s, mask, anchors)
    n_mar = system.n_margin
    if not n_mar:
        min_margin, comp, off_max = np.inf, 0.0, 0.0
    prim = max(eq_viol, max(0.0, 1.0 - min_margin) if n_mar else 0.0)
    dres = max(dres, colsum, max(0.0, off_max))
    obj = 0.5 * float(np.einsum("vd,vd->", W, W))
    dobj = -off_sum - 0.5 * float(sq @ (s * s))
    return SVMSolution(W=W, dual=a, objective=obj, dual_objective=dobj, primal_residual=prim, dual_residual=dres,
                       gap=obj - dobj, complementarity=comp, min_margin=min_margin, solver="structured",
                       status="optimal (closed form: one-hot context embeddings)", seconds=seconds, iterations=0)


def _closed_form(mask: np.ndarray, k: np.ndarray, cols: np.ndarray, s: np.ndarray, d: int,
                 t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(W_q, W, a)`` of the module doc: :math:`W_q` (V, d) with column :math:`c_j` equal to
    :math:`(V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j`, :math:`W = W_q/V`, and the dual (V, m): with ``t > 0`` the
    exact dyadic :math:`t(V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j^2`, with ``t = 0`` the float :math:`x_j/s_j^2`."""
    V, m = mask.shape
    # each column takes two values, in and off the support: computed once per column, then placed
    q_in, q_off = (V - k) / s, -k / s
    if t > 0:
        a = np.where(mask, (V - k) * t / (s * s), -k * t / (s * s))
    else:
        a = np.where(mask, (V - k) / (s * s) / V, -k / (s * s) / V)
    if d == m and np.array_equal(cols, np.arange(m)):  # h_j = s_j e_j: the columns in order, no scatter
        return np.where(mask, q_in, q_off), np.where(mask, q_in / V, q_off / V), a
    Wq, W = np.zeros((V, d)), np.zeros((V, d))
    Wq[:, cols] = np.where(mask, q_in, q_off)
    W[:, cols] = np.where(mask, q_in / V, q_off / V)
    return Wq, W, a


def _residuals(W, a, cols, s, mask, anchors):
    """The numpy passes of :func:`_solution`: (largest in-support spread from the anchor, least margin,
    complementarity, sum and max of the off-support duals, max |W_{:,c_j} - s_j a_j|, max |column sum of a|,
    the squared norms of the a_j)."""
    m = a.shape[1]
    Wc = W[:, cols]
    Z = Wc * s
    dres = float(np.abs(Wc - a * s).max()) if Wc.size else 0.0
    za = Z[anchors, np.arange(m)]
    eq = float(np.abs(np.where(mask, Z - za, 0.0)).max()) if Z.size else 0.0
    marg = np.where(mask, np.inf, za - Z)
    min_margin = float(marg.min()) if marg.size else np.inf
    comp = float((np.abs(np.where(mask, 0.0, a)) * np.abs(np.where(mask, 1.0, marg) - 1.0)).max()) if marg.size else 0.0
    off = np.where(mask, 0.0, a)
    off_max = float(np.where(mask, -np.inf, a).max()) if a.size else 0.0
    return (eq, min_margin, comp, float(off.sum()), off_max, dres, float(np.abs(a.sum(axis=0)).max()),
            np.einsum("vj,vj->j", a, a))


_compiled = None


def _compiled_residuals():
    """:func:`_residuals` compiled (numba, cached on disk): one pass over the (v, j) entries, row by row of W."""
    global _compiled
    if _compiled is not None:
        return _compiled
    import numba

    @numba.njit(cache=True, nogil=True)
    def residuals(W, a, cols, s, mask, anchors):  # pragma: no cover - compiled
        V, m = a.shape
        za = np.empty(m)
        for j in range(m):
            za[j] = W[anchors[j], cols[j]] * s[j]
        colsum = np.zeros(m)
        sq = np.zeros(m)
        eq, min_margin, comp, off_sum, off_max, dres = 0.0, np.inf, 0.0, 0.0, -np.inf, 0.0
        for v in range(V):
            for j in range(m):
                w = W[v, cols[j]]
                av = a[v, j]
                z = w * s[j]
                dres = max(dres, abs(w - av * s[j]))
                colsum[j] += av
                sq[j] += av * av
                if mask[v, j]:
                    eq = max(eq, abs(z - za[j]))
                else:
                    mar = za[j] - z
                    min_margin = min(min_margin, mar)
                    comp = max(comp, abs(av) * abs(mar - 1.0))
                    off_sum += av
                    off_max = max(off_max, av)
        return eq, min_margin, comp, off_sum, off_max, dres, np.abs(colsum).max() if m else 0.0, sq

    _compiled = residuals
    return _compiled


def onehot_bound(W_base: np.ndarray, a: np.ndarray, t: Fraction, k: np.ndarray, s: np.ndarray, started: float):
    r"""The exact :class:`~ntpcert.exact.svm_gap.SVMBound` of the closed form (module doc).

    Parameters
    ----------
    W_base : ndarray of shape (V, d)
        :math:`W_q`: column :math:`c_j` is :math:`(V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j`, the others 0.
    a : ndarray of shape (V, m)
        The dual :math:`t(V\mathbf 1_{S_j} - k_j\mathbf 1)/s_j^2`, exact dyadic floats.
    t : Fraction
        The dyadic of :data:`T_BITS` bits nearest :math:`1/V`.
    k, s : ndarray of shape (m,)
        The support sizes and the non-zeros of H, each a power of two.
    started : float
        ``time.perf_counter()`` at the start, for ``seconds``.
    """
    from ntpcert.exact.svm_gap import DEFAULT_BITS, SVMBound

    V = W_base.shape[0]
    # 1/2 ||W_c||^2 and D(a), summed exactly over the distinct (k_j, s_j)
    keys, counts = np.unique(np.stack([k.astype(np.float64), s]), axis=1, return_counts=True)
    total = Fraction(0)
    for (kj, sj), c in zip(keys.T, counts):
        total += int(c) * Fraction(int(kj) * (V - int(kj))) / Fraction(float(sj)) ** 2
    primal = total / (2 * V)
    dual = total * (t - Fraction(V, 2) * t * t)
    gap = primal - dual
    rel = 0.0 if primal == 0 else _up(gap / primal)
    return SVMBound(primal_feasible=True, primal_objective=primal, dual_objective=dual, gap=gap, gap_float=_up(gap),
                    relative_gap=rel, distance_bound=_up_sqrt(2 * gap), norm_lower=_down_sqrt(2 * dual),
                    norm_upper=_up_sqrt(2 * primal), scale=Fraction(1, V), margin_lower=float(V),
                    W_base=W_base, W_delta=(), a=a, reason="", bits=DEFAULT_BITS,
                    seconds=time.perf_counter() - started)


def _up(q: Fraction) -> float:
    f = float(q)
    return f if Fraction(f) >= q else math.nextafter(f, math.inf)


def _up_sqrt(q: Fraction) -> float:
    f = math.sqrt(_up(q))
    while Fraction(f) ** 2 < q:
        f = math.nextafter(f, math.inf)
    return f


def _down_sqrt(q: Fraction) -> float:
    if q <= 0:
        return 0.0
    f = math.sqrt(float(q))
    while f > 0 and Fraction(f) ** 2 > q:
        f = math.nextafter(f, 0.0)
    return f
