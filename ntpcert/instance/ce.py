r"""The cross-entropy of a linear decoder, its gradient, gradient direction and Hessian, computed
without cancellation. Every part of the package that evaluates CE (:class:`NTPInstance` methods, the
optimisers' fused loop, the regularisation path) calls this module.

Per context j, with logits :math:`z = Wh_j`, support :math:`S = S_j` and the in-support log-sum-exp
:math:`\ell_S = \log\sum_{z\in S}e^{z_z}`, write

* :math:`\sigma_z = e^{z_z - \ell_S}` (:math:`z\in S`), the softmax restricted to the support;
* :math:`a_v = z_v - \ell_S` (:math:`v\notin S`) and :math:`Q = \sum_{v\notin S} e^{a_v}`, the
  out-of-support mass relative to the in-support mass (:math:`e^{a_v}\approx e^{-\text{margin}}`);
* :math:`t_z = z_z - \ell_S - \log p_z` (:math:`z\in S`), so that :math:`\sum_{z\in S}p_ze^{t_z} = 1`.

Then :math:`\mathbb S_v(z) = e^{a_v}/(1+Q)` off the support, :math:`\mathbb S_z(z) = \sigma_z/(1+Q)` on it,
and the gradient coefficients :math:`r = \mathbb S - p` are

.. math::
    r_v = \frac{e^{a_v}}{1+Q}\ (v\notin S), \qquad
    r_z = p_z\,\mathrm{expm1}(t_z) - \sigma_z\frac{Q}{1+Q}\ (z\in S),

so that :math:`\nabla\mathrm{CE}(W) = \sum_j\pi_j r_jh_j^\top`. Nothing here subtracts two numbers
close to one: ``softmax - p`` would lose every digit of :math:`r_z` once :math:`Q < 2^{-53}` (margins
past about 37), while :math:`Q/(1+Q)` keeps its relative precision at any margin. The one rounding
that remains is that of the logits themselves (absolute :math:`\approx\epsilon\,|z|`); for a one-hot
context (:math:`k_j = 1`), :math:`t_z = 0` and :math:`\sigma_z = 1` exactly.

The excess loss is a sum of non-negative terms,

.. math::
    \mathrm{CE}_j - \mathcal H_j = \mathrm{KL}(p_j\,\|\,\mathbb S(z)) = \log(1+Q) + \sum_{z\in S}p_z\,\varphi(t_z),
    \qquad \varphi(t) = e^t - 1 - t \ge 0,

(since :math:`\sum_S p_z(e^{t_z}-1) = 0`), and :func:`log_excess_loss` gives its logarithm without
ever forming :math:`Q` itself, so it stays finite after :math:`e^{-\text{margin}}` underflows.

**Direction.** Scale-free updates (NGD, sign, spectral, Muon) need only the gradient's direction.
:meth:`CEKernel.direction_into` returns :math:`D = e^{-A}\nabla\mathrm{CE}(W)` and the log-scale
:math:`A \le 0`, where :math:`e^{A}` is the largest :math:`e^{a_v}` over all contexts' out-of-support tokens,
or the largest :math:`|p_z\mathrm{expm1}(t_z)|` when that is larger (A = 0 when some :math:`a_v > 0`, a
misclassified context: then every context takes its own offset). Every term is formed as
:math:`e^{a_v - A}` in the log domain, so D keeps full relative precision after :math:`e^{a_v}` itself
underflows (margins past about 708 for a normal float, 745 for zero). :meth:`CEKernel.gradient_into`
is :math:`e^{A}D`.

**Hessian.** :func:`hessian` is :math:`\sum_j\pi_j(\mathrm{diag}(s_j)-s_js_j^\top)\otimes h_jh_j^\top` with
:math:`s_j = \mathbb S(z)`, the diagonal :math:`s_v(1-s_v)` formed with :math:`1 - s_v = \sum_{u\ne v}s_u`
(a sum of small terms for the dominant token, not a difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: :math:`\log` of the smallest normal float64 (about -708.40): an :math:`e^{a}` below it is subnormal
#: (it has lost relative precision); below :math:`\log 2^{-1075}\approx -745.13` it is zero.
LOG_TINY = math.log(np.finfo(np.float64).tiny)

#: :math:`\log 2^{-54}`: below it, :math:`1 + x` rounds to 1 in float64.
_LOG_HALF_ULP = -54 * math.log(2.0)

#: |t| below this: :math:`\varphi(t) = e^t - 1 - t` by its Taylor series (``expm1(t) - t`` cancels).
_PHI_SERIES = 0.5
_PHI_TERMS = 18  # t^20/20! / (t^2/2) < 1e-19 for |t| <= 0.5


def phi(t: np.ndarray) -> np.ndarray:
    r""":math:`\varphi(t) = e^t - 1 - t \ge 0` to full relative precision (array in, array out)."""
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    small = np.abs(t) < _PHI_SERIES
    ts = t[small]
    acc = np.zeros_like(ts)
    for k in range(_PHI_TERMS + 1, 1, -1):  # Horner for sum_{k>=2} t^k/k!
        acc = (acc + 1.0 / math.factorial(k)) * ts
    out[small] = acc * ts
    big = ~small
    with np.errstate(over="ignore"):
        out[big] = np.expm1(t[big]) - t[big]
    return out


@dataclass(frozen=True, eq=False)
class CELayout:
    r"""The arrays every CE evaluation needs, in the transposed (V, m) layout of the logits
    :math:`Z^\top = WH^\top` (reductions over contexts' tokens run along the leading axis).

    Attributes
    ----------
    H : ndarray of shape (m, d)
    HT : ndarray of shape (d, m)
    pi : ndarray of shape (m,)
    PT : ndarray of shape (V, m)
        :math:`p_{j,z}` at ``[z, j]``.
    neg_in : ndarray of shape (V, m)
        0 on supports, :math:`-\infty` off them.
    neg_out : ndarray of shape (V, m)
        :math:`-\infty` on supports, 0 off them.
    neg_logp : ndarray of shape (V, m)
        :math:`-\log p_{j,z}` on supports, :math:`-\infty` off them.
    onehot : bool
        Every :math:`k_j = 1`.
    label_index : ndarray of shape (m,)
        For one-hot data, the flat index ``y_j * m + j`` of each context's token in a (V, m) array.
    entropy_rows : ndarray of shape (m,)
        :math:`\mathcal H_j = -\sum_z p_{j,z}\log p_{j,z}`.
    """

    H: np.ndarray
    HT: np.ndarray
    pi: np.ndarray
    PT: np.ndarray
    neg_in: np.ndarray
    neg_out: np.ndarray
    neg_logp: np.ndarray
    onehot: bool
    label_index: np.ndarray
    entropy_rows: np.ndarray

    @classmethod
    def build(cls, instance: Any) -> "CELayout":
        """From an :class:`~ntpcert.instance.model.NTPInstance` (its embeddings, probs, weights, supports)."""
        H = np.ascontiguousarray(instance.embeddings, dtype=np.float64)
        P = np.asarray(instance.probs, dtype=np.float64)
        m, V = P.shape
        mask = np.zeros((V, m), dtype=bool)
        for j, s in enumerate(instance.supports):
            mask[s, j] = True
        PT = np.ascontiguousarray(P.T)
        neg_in = np.where(mask, 0.0, -np.inf)
        neg_out = np.where(mask, -np.inf, 0.0)
        with np.errstate(divide="ignore"):
            neg_logp = np.where(mask, -np.log(np.where(mask, PT, 1.0)), -np.inf)
            plogp = np.where(mask, PT * np.log(np.where(mask, PT, 1.0)), 0.0)
        sizes = mask.sum(axis=0)
        onehot = bool(np.all(sizes == 1))
        labels = np.argmax(mask, axis=0) if onehot else np.zeros(m, dtype=np.int64)
        label_index = (labels * m + np.arange(m)).astype(np.intp)
        arrays = [H, np.ascontiguousarray(H.T), np.array(instance.weights, dtype=np.float64), PT, neg_in,
                  neg_out, neg_logp]
        for a in arrays:
            a.setflags(write=False)
        return cls(*arrays, onehot, label_index, -plogp.sum(axis=0))

    @property
    def m(self) -> int:
        return int(self.H.shape[0])

    @property
    def d(self) -> int:
        return int(self.H.shape[1])

    @property
    def V(self) -> int:
        return int(self.PT.shape[0])


# ---------------------------------------------------------------------------- per-context terms
@dataclass(frozen=True, eq=False)
class ContextTerms:
    r"""The per-context quantities of the module doc at one W (all of shape (m,)).

    Attributes
    ----------
    log_q : ndarray
        :math:`\log Q_j` (:math:`-\infty` when :math:`S_j = [V]`).
    kl_in : ndarray
        :math:`\mathrm{KL}(p_j\|\sigma_j) = \sum_{z\in S_j}p_z\varphi(t_z) \ge 0`.
    max_out_logprob : ndarray
        :math:`\max_{v\notin S_j}\log\mathbb S_v(Wh_j) = \max_v a_v - \log(1+Q_j)`.
    """

    log_q: np.ndarray
    kl_in: np.ndarray
    max_out_logprob: np.ndarray

    @property
    def log1p_q(self) -> np.ndarray:
        r""":math:`\log(1+Q_j)`, accurate for tiny and huge :math:`Q_j`."""
        return np.logaddexp(0.0, self.log_q)

    @property
    def excess(self) -> np.ndarray:
        r""":math:`\mathrm{CE}_j - \mathcal H_j = \log(1+Q_j) + \mathrm{KL}(p_j\|\sigma_j)`."""
        return self.log1p_q + self.kl_in

    @property
    def log_excess(self) -> np.ndarray:
        r""":math:`\log(\mathrm{CE}_j - \mathcal H_j)`, finite while :math:`\log Q_j` is."""
        lq = self.log_q
        with np.errstate(divide="ignore", invalid="ignore"):
            # log(log1p(Q)): for Q < 1e-8, log1p(Q) = Q(1 - Q/2 + ...), so its log is log Q - Q/2
            tiny = lq < -18.0
            q = np.exp(np.where(tiny, -np.inf, lq))
            log_l1p = np.where(tiny, lq - 0.5 * np.exp(lq), np.log(np.log1p(q)))
            return np.logaddexp(log_l1p, np.log(self.kl_in))


def context_terms(layout: CELayout, W: np.ndarray) -> ContextTerms:
    """:class:`ContextTerms` at ``W`` (shape (V, d)); allocating, for metrics and losses."""
    Zt = np.asarray(W, dtype=np.float64) @ layout.HT
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mS = np.max(Zt + layout.neg_in, axis=0)
        Zt = Zt - mS
        lS = np.log(np.sum(np.exp(Zt + layout.neg_in), axis=0))
        Zt -= lS  # log sigma on supports, a_v off them
        T = Zt + layout.neg_logp  # t_z on supports, -inf off them
        kl = np.sum(np.where(np.isfinite(T), layout.PT * phi(np.where(np.isfinite(T), T, 0.0)), 0.0), axis=0)
        A = Zt + layout.neg_out
        amax = np.max(A, axis=0)
        safe = np.where(np.isfinite(amax), amax, 0.0)
        log_q = safe + np.log(np.sum(np.exp(A - safe), axis=0))
        log_q = np.where(np.isfinite(amax), log_q, -np.inf)
        top = amax - np.logaddexp(0.0, log_q)
    return ContextTerms(log_q, kl, top)


def excess_loss(layout: CELayout, W: np.ndarray) -> float:
    r""":math:`\mathrm{CE}(W) - \mathcal H = \sum_j\pi_j\mathrm{KL}(p_j\|\mathbb S(Wh_j))`, a sum of
    non-negative terms."""
    return float(layout.pi @ context_terms(layout, W).excess)


def loss(layout: CELayout, W: np.ndarray) -> float:
    r""":math:`\mathrm{CE}(W) = \sum_j\pi_j(\mathcal H_j + \mathrm{KL}_j)`."""
    return float(layout.pi @ (layout.entropy_rows + context_terms(layout, W).excess))


def log_excess_loss(layout: CELayout, W: np.ndarray) -> float:
    r""":math:`\log(\mathrm{CE}(W) - \mathcal H)`, computed in the log domain: finite (and exact to
    rounding) at margins where :math:`\mathrm{CE} - \mathcal H` itself underflows; :math:`-\infty` only
    at an exact minimiser."""
    lx = context_terms(layout, W).log_excess
    with np.errstate(divide="ignore"):
        v = np.log(layout.pi) + lx
    top = float(np.max(v))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(v - top))))


# ---------------------------------------------------------------------------- the fused kernel
def _scale_in_place(X: np.ndarray, log_factor: float) -> None:
    """``X *= exp(log_factor)`` without overflowing the factor (two half steps past 700)."""
    if log_factor == 0.0:
        return
    if abs(log_factor) < 700.0:
        X *= math.exp(log_factor)
    else:
        half = math.exp(0.5 * log_factor)
        X *= half
        X *= half


class CEKernel:
    r"""In-place :math:`\nabla\mathrm{CE}(W)` and its rescaled direction with preallocated buffers
    (no allocation per call), in the layout and the formulas of the module doc.

    One-hot instances (every :math:`k_j = 1`) take a shorter path (about a dozen NumPy calls: two
    matrix products, and O(mV) passes); others also form :math:`\sigma`, :math:`t` and
    :math:`p\,\mathrm{expm1}(t)`.

    Parameters
    ----------
    instance : NTPInstance, or a CELayout
    """

    def __init__(self, instance: Any) -> None:
        lay = instance if isinstance(instance, CELayout) else CELayout.build(instance)
        self.layout = lay
        self.H = lay.H
        V, m = lay.V, lay.m
        self._Zt = np.empty((V, m))
        self._T = np.empty((V, m))
        self._Sig = np.empty((V, m))
        self._U = np.empty((V, m))
        self._r1 = np.empty(m)
        self._r2 = np.empty(m)
        self._r3 = np.empty(m)
        self._log_V = math.log(V)

    def gradient_into(self, W: np.ndarray, out: np.ndarray) -> np.ndarray:
        r"""Write :math:`\nabla\mathrm{CE}(W)` (``W`` and ``out`` of shape (V, d)) into ``out``; return it.
        Entries below the smallest float64 are subnormal or zero, as the exact values would round to."""
        A = self.direction_into(W, out)
        if A != 0.0:
            if A == -math.inf:
                out.fill(0.0)
            else:
                _scale_in_place(out, A)
        return out

    def direction_into(self, W: np.ndarray, out: np.ndarray) -> float:
        r"""Write :math:`D = e^{-A}\nabla\mathrm{CE}(W)` into ``out`` (shape (V, d)) and return the
        log-scale :math:`A \le 0` (:math:`-\infty` and D = 0 at an exact stationary point). The largest
        coefficient of D is of order 1 whatever the margins."""
        lay = self.layout
        Zt = self._Zt
        np.matmul(W, lay.HT, out=Zt)
        if lay.onehot:
            return self._onehot(Zt, out)
        return self._general(Zt, out)

    # M = the largest out-of-support a_v. For M <= 0 (every out-of-support logit below the in-support
    # log-sum-exp) one offset serves every context: coefficients exp(a - M) / (1 + Qs e^M), scale e^M, with
    # Qs = sum_v exp(a_v - M) and 1 + Qs e^M >= 1. For M > 0 (some context misclassified) each context
    # takes its own offset (_misclassified) and the scale is 1.
    def _inv_denominator(self, M: float, Qs: np.ndarray, inv: np.ndarray) -> np.ndarray:
        """``pi / (1 + Q)`` for M <= 0 (in ``inv``, or ``pi`` itself when every ``1 + Q`` rounds to 1:
        Q <= V e^M < 2^-54)."""
        if M + self._log_V < _LOG_HALF_ULP:
            return self.layout.pi
        np.multiply(Qs, math.exp(M), out=inv)
        inv += 1.0
        np.divide(self.layout.pi, inv, out=inv)
        return inv

    def _misclassified(self, Zt: np.ndarray, out: np.ndarray, X: np.ndarray | None) -> float:
        """The coefficients with a per-context offset (``Zt`` holds a_v off supports, -inf on them;
        ``X`` the in-support p expm1(t), or None for one-hot data); scale 1."""
        lay = self.layout
        amax, Qs, c = self._r1, self._r2, self._r3
        np.maximum.reduce(Zt, axis=0, out=amax)
        np.maximum(amax, -1e300, out=amax)  # a context without out-of-support tokens: no nan below
        np.subtract(Zt, amax, out=Zt)
        np.exp(Zt, out=Zt)
        np.add.reduce(Zt, axis=0, out=Qs)
        with np.errstate(divide="ignore"):
            np.log(Qs, out=c)
        c += amax  # log Q
        np.logaddexp(0.0, c, out=c)
        np.subtract(amax, c, out=c)
        np.exp(c, out=c)  # e^{amax} / (1 + Q)
        np.multiply(c, lay.pi, out=c)
        np.multiply(Zt, c, out=Zt)  # out-of-support coefficients times pi
        np.multiply(Qs, c, out=Qs)  # Q / (1 + Q) times pi
        if X is None:
            np.negative(Qs, out=Qs)
            np.put(Zt, lay.label_index, Qs)
        else:
            np.multiply(X, lay.pi, out=X)
            Zt += X
            np.multiply(self._Sig, Qs, out=self._Sig)
            Zt -= self._Sig
        np.matmul(Zt, lay.H, out=out)
        return 0.0

    def _onehot(self, Zt: np.ndarray, out: np.ndarray) -> float:
        lay = self.layout
        idx = lay.label_index
        zy, Qs, inv = self._r1, self._r2, self._r3
        np.take(Zt, idx, out=zy)
        np.subtract(Zt, zy, out=Zt)  # a_v = z_v - z_y; 0 at the label
        np.put(Zt, idx, -np.inf)
        M = float(Zt.max())
        if M > 0.0:
            return self._misclassified(Zt, out, None)
        np.subtract(Zt, M, out=Zt)
        np.exp(Zt, out=Zt)
        np.add.reduce(Zt, axis=0, out=Qs)
        inv = self._inv_denominator(M, Qs, inv)
        np.multiply(Zt, inv, out=Zt)
        np.multiply(Qs, inv, out=zy)
        np.negative(zy, out=zy)
        np.put(Zt, idx, zy)
        np.matmul(Zt, lay.H, out=out)
        return M

    def _general(self, Zt: np.ndarray, out: np.ndarray) -> float:
        lay = self.layout
        T, Sig = self._T, self._Sig
        mS, sS, inv = self._r1, self._r2, self._r3
        np.add(Zt, lay.neg_in, out=T)
        np.maximum.reduce(T, axis=0, out=mS)
        np.subtract(Zt, mS, out=Zt)
        np.add(Zt, lay.neg_in, out=T)
        np.exp(T, out=T)
        np.add.reduce(T, axis=0, out=sS)
        np.divide(T, sS, out=Sig)  # sigma on supports, 0 off them
        np.log(sS, out=sS)
        np.subtract(Zt, sS, out=Zt)  # log sigma on supports, a_v off them
        np.add(Zt, lay.neg_logp, out=T)  # t on supports, -inf off them
        np.expm1(T, out=T)
        np.multiply(T, lay.PT, out=T)  # X = p expm1(t) on supports, (-0) off them
        np.abs(T, out=self._U)
        xmax = float(self._U.max())
        np.add(Zt, lay.neg_out, out=Zt)  # a_v off supports, -inf on them
        amax = float(Zt.max())
        if amax > 0.0:
            return self._misclassified(Zt, out, T)
        M = max(amax, math.log(xmax) if xmax > 0.0 else -math.inf)
        if M == -math.inf:  # no out-of-support token anywhere and sigma = p exactly
            out.fill(0.0)
            return -math.inf
        np.subtract(Zt, M, out=Zt)
        np.exp(Zt, out=Zt)
        Qs = mS
        np.add.reduce(Zt, axis=0, out=Qs)
        inv = self._inv_denominator(M, Qs, inv)
        np.multiply(Zt, inv, out=Zt)  # out-of-support coefficients (times pi)
        np.multiply(T, lay.pi, out=T)
        _scale_in_place(T, -M)  # |X| <= e^M, so X e^{-M} stays finite
        Zt += T
        np.multiply(Qs, inv, out=sS)  # Q/(1+Q) e^{-M} pi
        np.multiply(Sig, sS, out=Sig)
        Zt -= Sig
        np.matmul(Zt, lay.H, out=out)
        return M


#: A trajectory point counts as float64-trustworthy while :func:`direction_error_bound` is at most this
#: (a worst-case bound: typical errors are about sqrt(d) times smaller; a relative error of 1e-3 in the
#: direction moves its cosine with the exact one by at most 5e-7).
TRUST_RTOL = 1e-3


def direction_error_bound(layout: CELayout, W: np.ndarray, log_scale: float) -> float:
    r"""A bound on the relative rounding error of the rescaled direction at W (shape (V, d)).

    The logits carry an absolute error of at most :math:`\delta = \gamma_{d+2}\max_{j,v}(|W||h_j|)_v`
    (:math:`\gamma_n = n\epsilon/(1-n\epsilon)`, the dot-product bound, plus the shift by the
    log-sum-exp). Each out-of-support term :math:`e^{a_v - A}` then has relative error at most about
    :math:`2\delta`. In-support deviations :math:`p_z\mathrm{expm1}(t_z)` of a context with
    :math:`k_j \ge 2` have *absolute* error about :math:`2\delta`, which the rescaling by
    :math:`e^{-A}` (``log_scale`` = A) magnifies: once :math:`e^{A}` (about :math:`e^{-\text{margin}}`)
    falls to :math:`\delta`, rounding in the F-part dominates the direction. One-hot data have no such
    term (:math:`t_z = 0` exactly). Returned: :math:`2\delta(1 + e^{-A}[\exists j: k_j\ge2]) + 8\epsilon`."""
    eps = float(np.finfo(np.float64).eps)
    n = layout.d + 2
    gamma = n * eps / (1.0 - n * eps)
    delta = gamma * float(np.max(np.abs(np.asarray(W, dtype=np.float64)) @ np.abs(layout.HT)))
    bound = 2.0 * delta + 8.0 * eps
    if not layout.onehot and delta > 0.0:
        if log_scale == -math.inf:
            return math.inf
        bound += 2.0 * delta * math.exp(min(-log_scale, 700.0))
    return bound


def float64_trusted(max_out_logprob: float, direction_error: float, *, scale_free: bool) -> bool:
    r"""Whether a float64 trajectory point is trustworthy for an optimiser.

    Scale-free updates use the rescaled direction: trusted while its error bound is at most
    :data:`TRUST_RTOL`. Others (GD, Adam) use the gradient itself, whose out-of-support terms
    :math:`e^{a_v}` lose relative precision below the smallest normal float (``max_out_logprob`` <
    :data:`LOG_TINY`, margins past about 708) and vanish past about 745, where such a run stops moving."""
    ok = bool(direction_error <= TRUST_RTOL)
    if not scale_free:
        ok = ok and bool(max_out_logprob >= LOG_TINY)
    return ok


def gradient(layout: CELayout, W: np.ndarray) -> np.ndarray:
    r""":math:`\nabla\mathrm{CE}(W)`, shape (V, d)."""
    W = np.asarray(W, dtype=np.float64)
    return CEKernel(layout).gradient_into(W, np.empty_like(W))


def direction(layout: CELayout, W: np.ndarray) -> tuple[np.ndarray, float]:
    r"""``(D, A)`` with :math:`\nabla\mathrm{CE}(W) = e^{A}D`, D of shape (V, d) with largest
    coefficient of order 1 (:meth:`CEKernel.direction_into`)."""
    W = np.asarray(W, dtype=np.float64)
    D = np.empty_like(W)
    A = CEKernel(layout).direction_into(W, D)
    return D, A


def softmax_rows(layout: CELayout, W: np.ndarray) -> np.ndarray:
    r""":math:`\mathbb S(Wh_j)` for every j, shape (m, V); each entry to full relative precision."""
    Z = layout.H @ np.asarray(W, dtype=np.float64).T
    Z = Z - Z.max(axis=1, keepdims=True)
    Z -= np.log(np.exp(Z).sum(axis=1, keepdims=True))
    return np.exp(Z)


def hessian(layout: CELayout, W: np.ndarray, *, flush: float = 0.0) -> np.ndarray:
    r"""Dense Hessian of CE at W, shape (Vd, Vd) in the row-major vec order of W (entry
    ``v*d + k``): :math:`\sum_j\pi_j(\mathrm{diag}(s_j)-s_js_j^\top)\otimes h_jh_j^\top`.

    The diagonal :math:`s_v(1-s_v)` takes :math:`1 - s_v` as the sum of the other probabilities for
    each context's largest one (no cancellation when it is near 1). Probabilities below ``flush`` are
    set to 0 first (subnormal products slow BLAS down a hundredfold)."""
    S = softmax_rows(layout, W)
    m, V = S.shape
    d = layout.d
    if flush > 0.0:
        S[S < flush] = 0.0
    top = np.argmax(S, axis=1)
    rows = np.arange(m)
    comp = 1.0 - S
    others = S.copy()
    others[rows, top] = 0.0
    comp[rows, top] = others.sum(axis=1)
    A = -S[:, :, None] * S[:, None, :]
    A[:, np.arange(V), np.arange(V)] = S * comp
    A *= layout.pi[:, None, None]
    H = layout.H
    HH = (H[:, :, None] * H[:, None, :]).reshape(m, d * d)
    T = A.reshape(m, V * V).T @ HH  # (V*V, d*d)
    return T.reshape(V, V, d, d).transpose(0, 2, 1, 3).reshape(V * d, V * d)


__all__ = [
    "LOG_TINY",
    "TRUST_RTOL",
    "CEKernel",
    "CELayout",
    "ContextTerms",
    "context_terms",
    "direction",
    "direction_error_bound",
    "float64_trusted",
    "excess_loss",
    "gradient",
    "hessian",
    "log_excess_loss",
    "loss",
    "phi",
    "softmax_rows",
]
