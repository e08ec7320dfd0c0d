r"""The limits of data that are not NTP-separable, given the split: W_fin, L* and W^mm_P.

Notation (``docs/math.md``, "Data that are not separable"; our derivation). N is the set of
out-of-support pairs (j, v), :math:`v\notin S_j`, that no direction of the recession cone K of CE makes
positive, :math:`N_j = \{v : (j, v)\in N\}`, and P the other out-of-support pairs. Given N (an int64
array of rows ``(j, v)``, as the split returns it):

* **The extended pattern.** :math:`F_N` = span of :math:`(e_z - e_{z'})h_j^\top` for
  :math:`z, z'\in S_j\cup N_j`: F of the same H with the supports extended to :math:`S_j\cup N_j`.
  :func:`extended_pattern` builds that instance (count 1 on every pair of :math:`S_j\cup N_j`, 0
  elsewhere). Only its support pattern is used: F, the Kesler rows and the NTP-SVM read nothing else,
  so its counts, frequencies and laws carry no meaning and it never leaves this module's callers. P is
  then exactly its out-of-support pairs, and that pattern is separable (the direction :math:`D_P` of
  the split is constant on :math:`S_j\cup N_j` and positive on P).
* **The reduced loss.** :math:`\mathrm{CE}_N(W) = \sum_j\pi_j\sum_{z\in S_j}p_{j,z}
  (\log\sum_{u\in S_j\cup N_j}e^{w_u^\top h_j} - w_z^\top h_j)`, the CE with each context's softmax
  restricted to :math:`S_j\cup N_j`. It depends on W only through the logit differences inside
  :math:`S_j\cup N_j`, i.e. through :math:`P_{F_N}W`; it is strictly convex and coercive on
  :math:`F_N`, so it has one minimiser :math:`W_{fin}\in F_N`, and :math:`L^* = \inf\mathrm{CE} =
  \mathrm{CE}_N(W_{fin})` (proofs in ``docs/math.md``).
* **W^mm_P** is the NTP-SVM of the extended pattern: :math:`\min\|W\|_F` over :math:`W\in F_N^\perp`
  with :math:`(w_z - w_v)^\top h_j\ge 1` on P (:func:`solve_mm_p`). With N = ∅ it is the paper's W^mm.

**Newton on F_N** (:func:`finite_limit`). With the equality rows :math:`A` of the extended pattern (one
anchor per context), the Gram eigenpairs :math:`AA^\top = Q\Lambda Q^\top` (kept :math:`\lambda > \tau`,
:class:`~ntpcert.rows.subspace.Subspace`) give the orthonormal basis :math:`f_i = A^\top q_i/\sqrt{\lambda_i}`
of :math:`F_N`. In the coordinates c of :math:`W = \sum_i c_if_i` the anchored logit differences are
:math:`g = A\,\mathrm{vec}(W) = Mc` with :math:`M = Q\Lambda^{1/2}`, and

.. math::
    \nabla_c = M^\top\big(\pi_j(s_{j,z} - p_{j,z})\big)_{(j,z)}, \qquad
    \nabla^2_c = M^\top\Big(\bigoplus_j \pi_j(\mathrm{diag}(s'_j) - s'_js_j'^\top)\Big)M,

with :math:`s_j` the softmax of :math:`Wh_j` over :math:`S_j\cup N_j` and :math:`s'_j` its entries off
the anchor. Newton's step :math:`-\nabla^2_c{}^{-1}\nabla_c` is damped by a backtracking (Armijo) line
search on :math:`\mathrm{CE}_N`, from c = 0 (near the minimiser, where the predicted decrease is below
float64's resolution of :math:`\mathrm{CE}_N`, the full step is taken when it does not raise the loss by
more than that resolution, and the gradient decides; where Newton's line search finds no decrease, the
Levenberg–Marquardt step :math:`-(\nabla^2_c + \|\nabla_c\|I)^{-1}\nabla_c` and then the gradient are tried,
:func:`_directions`); it stops once :math:`\|\nabla\mathrm{CE}_N(W)\|_F` (which
lies in :math:`F_N` and equals :math:`\|\nabla_c\|`) is at most :data:`GRAD_TOL`, after at most
:data:`MAX_NEWTON_STEPS` steps, or when the line search can no longer decrease the loss in float64; the
final gradient norm is reported as ``grad_norm`` with ``converged`` = grad_norm ≤ GRAD_TOL. These are
float64 measurements: nothing here is a proof, and the tolerance only says when to stop.

The dense Hessian has dim :math:`F_N` rows: instances with more than :data:`MAX_DENSE_ROWS` equality rows
of the extended pattern, or more than :data:`MAX_LOGIT_ENTRIES` logits, are refused (:class:`~ntpcert.errors.SolverError`, saying so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.instance.ce import phi
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace

__all__ = ["GRAD_TOL", "MAX_DENSE_ROWS", "MAX_LOGIT_ENTRIES", "MAX_NEWTON_STEPS", "FiniteLimit", "check_nonseparable",
           "extended_mask", "extended_pattern", "finite_limit", "reduced_excess", "reduced_gradient",
           "reduced_loss", "solve_mm_p", "solve_mm_p_system"]

#: Newton stops once :math:`\|\nabla\mathrm{CE}_N(W)\|_F` is at most this (float64; reported, not a proof),
#: times :math:`2^{-e}` where H's largest entry is outside :math:`[2^{-8}, 2^8]` and :math:`2^e` brings it into
#: [1, 2) (:func:`gradient_scale`): the gradient scales with H, and on H·1e-20 an absolute tolerance stopped Newton
#: at W = 0 (L* = log V instead of the L* of H).
GRAD_TOL = 1e-10
#: At most this many Newton steps.
MAX_NEWTON_STEPS = 200
#: Largest number of equality rows of the extended pattern (the Gram eigen-decomposition and the
#: dense Hessian are of this order).
MAX_DENSE_ROWS = 3000
#: Largest m·V: each Newton step forms the (m, V) logits a few times.
MAX_LOGIT_ENTRIES = 20_000_000
#: Armijo constant and the smallest step of the backtracking line search.
_ARMIJO = 1e-4
_MIN_STEP = 2.0 ** -40
#: Relative resolution of a float64 CE_N value (a sum of m·V rounded terms, with room).
_NOISE = 64 * float(np.finfo(np.float64).eps)


def check_nonseparable(instance: NTPInstance, nonseparable: Any) -> np.ndarray:
    """``nonseparable`` as an int64 array of shape (n, 2) of distinct rows (j, v) with v outside
    :math:`S_j`; an :class:`~ntpcert.errors.InputError` naming the row and the value otherwise."""
    arr = np.asarray(nonseparable)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(f"nonseparable: expected shape (n, 2) of rows (j, v), got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise InputError(f"nonseparable: expected integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    m, V = instance.m, instance.V
    mask = instance.support_mask()
    for i, (j, v) in enumerate(arr):
        if not (0 <= j < m and 0 <= v < V):
            raise InputError(f"nonseparable[{i}]: ({int(j)}, {int(v)}) is outside the instance (m = {m}, V = {V})")
        if mask[j, v]:
            raise InputError(f"nonseparable[{i}]: token {int(v)} is in the support of context {int(j)}")
    if np.unique(arr, axis=0).shape[0] != arr.shape[0]:
        raise InputError("nonseparable: a pair (j, v) is listed twice")
    return arr


def extended_mask(instance: NTPInstance, nonseparable: np.ndarray) -> np.ndarray:
    """The (m, V) boolean mask of :math:`S_j\\cup N_j`."""
    mask = instance.support_mask().copy()
    if len(nonseparable):
        mask[nonseparable[:, 0], nonseparable[:, 1]] = True
    return mask


def extended_pattern(instance: NTPInstance, nonseparable: np.ndarray) -> NTPInstance:
    """The instance with the same H whose supports are :math:`S_j\\cup N_j` (count 1 on each of their
    pairs). Internal: only its pattern means anything (module doc)."""
    mask = extended_mask(instance, nonseparable)
    ext = NTPInstance.from_counts(instance.embeddings, mask.astype(np.int64), token_names=instance.token_names,
                                  context_names=instance.context_names, name=f"{instance.name} (S u N)")
    if instance.token_multiplicity is not None:  # W^mm_P of a merged vocabulary weighs its rows too
        ext = ext.with_token_multiplicity(instance.token_multiplicity)
    return ext


def _log_softmax_ext(instance: NTPInstance, W: np.ndarray, ext: np.ndarray) -> np.ndarray:
    """:math:`\\log` of the softmax of :math:`Wh_j` over :math:`S_j\\cup N_j` (-inf elsewhere), shape (m, V)."""
    Z = instance.embeddings @ np.asarray(W, dtype=np.float64).T
    Z = np.where(ext, Z, -np.inf)
    top = Z.max(axis=1, keepdims=True)
    Z = Z - top
    with np.errstate(divide="ignore"):
        return Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))


def reduced_loss(instance: NTPInstance, nonseparable: np.ndarray, W: np.ndarray) -> float:
    """:math:`\\mathrm{CE}_N(W)` (module doc); W of shape (V, d)."""
    ext = extended_mask(instance, check_nonseparable(instance, nonseparable))
    return _reduced_loss(instance, ext, W)


def _reduced_loss(instance: NTPInstance, ext: np.ndarray, W: np.ndarray) -> float:
    L = _log_softmax_ext(instance, W, ext)
    P = instance.probs
    S = P > 0
    return float(instance.weights @ np.where(S, -P * np.where(S, L, 0.0), 0.0).sum(axis=1))


def reduced_excess(instance: NTPInstance, nonseparable: np.ndarray, W: np.ndarray) -> float:
    r""":math:`\mathrm{CE}_N(W) - \mathcal H = \sum_j\pi_j(\log(1+Q_j) + \sum_{z\in S_j}p_{j,z}\varphi(t_{j,z}))`,
    a sum of non-negative terms (as :mod:`ntpcert.instance.ce`, with :math:`Q_j` over :math:`N_j` only)."""
    ext = extended_mask(instance, check_nonseparable(instance, nonseparable))
    Z = instance.embeddings @ np.asarray(W, dtype=np.float64).T
    S = instance.probs > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        zin = np.where(S, Z, -np.inf)
        top = zin.max(axis=1, keepdims=True)
        lS = top + np.log(np.exp(zin - top).sum(axis=1, keepdims=True))  # in-support log-sum-exp
        A = np.where(ext & ~S, Z - lS, -np.inf)
        amax = A.max(axis=1, keepdims=True)
        safe = np.where(np.isfinite(amax), amax, 0.0)
        log_q = np.where(np.isfinite(amax[:, 0]), safe[:, 0] + np.log(np.exp(A - safe).sum(axis=1)), -np.inf)
        T = np.where(S, Z - lS - np.log(np.where(S, instance.probs, 1.0)), 0.0)
    kl = np.where(S, instance.probs * phi(T), 0.0).sum(axis=1)
    return float(instance.weights @ (np.logaddexp(0.0, log_q) + kl))


def reduced_gradient(instance: NTPInstance, nonseparable: np.ndarray, W: np.ndarray) -> np.ndarray:
    r""":math:`\nabla\mathrm{CE}_N(W) = \sum_j\pi_j(s_j - p_j)h_j^\top`, shape (V, d); it lies in :math:`F_N`."""
    ext = extended_mask(instance, check_nonseparable(instance, nonseparable))
    return _reduced_gradient(instance, ext, W)


def _reduced_gradient(instance: NTPInstance, ext: np.ndarray, W: np.ndarray) -> np.ndarray:
    s = np.exp(_log_softmax_ext(instance, W, ext))
    R = (s - instance.probs) * instance.weights[:, None]
    return R.T @ instance.embeddings


@dataclass(frozen=True, eq=False)
class FiniteLimit:
    """W_fin and L* of an instance given its non-separable pairs N (module doc).

    Attributes
    ----------
    W_fin : ndarray of shape (V, d)
        The minimiser of :math:`\\mathrm{CE}_N` in :math:`F_N`.
    L_star : float
        :math:`\\mathrm{CE}_N(W_{fin}) = \\inf\\mathrm{CE}`; ``excess`` is :math:`L^* - \\mathcal H` as a
        sum of non-negative terms (:func:`reduced_excess`).
    entropy : float
    dim_F_N : int
        The numerical rank of the extended pattern's equality rows (:class:`~ntpcert.rows.subspace.Subspace`).
    grad_norm : float
        :math:`\\|\\nabla\\mathrm{CE}_N(W_{fin})\\|_F`, the residual; ``converged`` is grad_norm ≤ ``tol``
        (:data:`GRAD_TOL`).
    iterations : int
        Newton steps taken.
    nonseparable : ndarray of shape (n, 2)
        N, the rows (j, v).
    extended : NTPInstance
        The extended pattern (:func:`extended_pattern`).
    system, subspace
        Its Kesler rows and :math:`F_N`, for :math:`P_{F_N}`.
    seconds : float
    """

    W_fin: np.ndarray
    L_star: float
    excess: float
    entropy: float
    dim_F_N: int
    grad_norm: float
    iterations: int
    converged: bool
    nonseparable: np.ndarray
    extended: NTPInstance
    system: KeslerSystem
    subspace: Subspace
    seconds: float
    tol: float = GRAD_TOL
    history: tuple = field(default=(), repr=False)

    def project(self, W: np.ndarray) -> np.ndarray:
        """:math:`P_{F_N}W`, shape (V, d)."""
        return self.subspace.project(W)

    def to_json(self) -> dict[str, Any]:
        return {
            "L_star": self.L_star, "L_star_minus_entropy": self.excess, "entropy": self.entropy,
            "dim_F_N": self.dim_F_N, "W_fin_norm": float(np.linalg.norm(self.W_fin)),
            "W_fin_residual": self.grad_norm, "W_fin_residual_is": "||grad CE_N(W_fin)||_F",
            "W_fin_tolerance": self.tol, "W_fin_converged": self.converged, "newton_steps": self.iterations,
            "seconds": self.seconds,
        }


def gradient_scale(H: np.ndarray) -> float:
    """:math:`2^{-e}` for e = :func:`ntpcert.rows.scaling.unit_exponent` (1 for moderate data)."""
    from ntpcert.rows.scaling import unit_exponent

    return float(np.ldexp(1.0, -unit_exponent(H)))


def finite_limit(instance: NTPInstance, nonseparable: Any, *, tol: float = GRAD_TOL,
                 max_steps: int = MAX_NEWTON_STEPS) -> FiniteLimit:
    """W_fin and L* by damped Newton on :math:`\\mathrm{CE}_N` restricted to :math:`F_N` (module doc).

    Raises
    ------
    InputError
        For a malformed ``nonseparable`` (:func:`check_nonseparable`).
    SolverError
        When the extended pattern has more than :data:`MAX_DENSE_ROWS` equality rows.
    """
    t0 = time.perf_counter()
    N = check_nonseparable(instance, nonseparable)
    tol = tol * gradient_scale(instance.embeddings)
    nu = instance.token_multiplicity
    if nu is not None and N.shape[0] and np.any(nu[N[:, 1]] > 1):
        v = int(N[np.argmax(nu[N[:, 1]] > 1), 1])
        raise SolverError(f"W_fin: token {v} stands for {int(nu[v])} tokens and is in N; CE_N counts each of them and "
                          "F_N holds their differences, which the merged instance does not (solve the instance with "
                          "every token)")
    if instance.m * instance.V > MAX_LOGIT_ENTRIES:
        raise SolverError(f"W_fin: m·V = {instance.m * instance.V:,} is more than the {MAX_LOGIT_ENTRIES:,} logits the "
                          "dense Newton solve forms")
    ext_inst = extended_pattern(instance, N)
    system = KeslerSystem.build(ext_inst)
    if system.n_eq > MAX_DENSE_ROWS:
        raise SolverError(f"W_fin: the extended pattern has {system.n_eq} equality rows, more than the "
                          f"{MAX_DENSE_ROWS} the dense Newton solve takes")
    sub = Subspace.build(system, method="eigh")
    ext = ext_inst.support_mask()
    V, d = instance.V, instance.d
    lam, Q = sub.eigvals, sub.eigvecs
    k = int(lam.size)
    if k == 0:
        W = np.zeros((V, d))
        return _result(instance, N, ext_inst, system, sub, ext, W, 0, tol, t0, ())
    M = Q * np.sqrt(lam)  # g = A vec(W) = M c
    to_y = Q / np.sqrt(lam)  # W = A^T (to_y c)
    ctx, tok = system.eq_context, system.eq_token
    pi = instance.weights
    P = instance.probs

    def W_of(c: np.ndarray) -> np.ndarray:
        return system.apply_eq_T(to_y @ c)

    c = np.zeros(k)
    W = np.zeros((V, d))
    f = _reduced_loss(instance, ext, W)
    history = []
    steps = 0
    prev = np.inf
    for steps in range(1, max_steps + 1):
        s = np.exp(_log_softmax_ext(instance, W, ext))
        sp = s[ctx, tok]  # s' (entries off the anchor)
        gg = pi[ctx] * (sp - P[ctx, tok])
        grad = M.T @ gg
        gnorm = float(np.linalg.norm(grad))
        history.append((f, gnorm))
        if gnorm <= tol * 1e-2 or (gnorm <= tol and gnorm >= 0.5 * prev):  # polished past the tolerance, or
            steps -= 1  # within it and no longer falling (the rounding floor)
            break
        prev = gnorm
        Dg = pi[ctx] * sp
        Hc = (M * Dg[:, None]).T @ M
        v = np.zeros((instance.m, k))
        np.add.at(v, ctx, sp[:, None] * M)
        Hc -= (v * pi[:, None]).T @ v
        Hc = 0.5 * (Hc + Hc.T)
        try:
            step = -np.linalg.solve(Hc, grad)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(Hc, grad, rcond=None)[0]
        noise = _NOISE * max(1.0, abs(f))
        for step, slope in _directions(step, Hc, grad, gnorm):
            t = 1.0
            while True:
                c_new = c + t * step
                W_new = W_of(c_new)
                f_new = _reduced_loss(instance, ext, W_new)
                if f_new <= f + _ARMIJO * t * slope:
                    break
                if t == 1.0 and -slope <= noise and f_new <= f + noise:  # the decrease is below float64's
                    break  # resolution of CE_N: near the minimiser, take the full step and let the gradient judge
                if f_new <= f and gnorm <= tol:
                    break
                t *= 0.5
                if t < _MIN_STEP:
                    break
            if t >= _MIN_STEP:
                break
        if t < _MIN_STEP:  # no decrease left in float64, along Newton's direction or the gradient
            steps -= 1
            break
        c, W, f = c_new, W_new, f_new
    return _result(instance, N, ext_inst, system, sub, ext, W, steps, tol, t0, tuple(history))


def _directions(newton: np.ndarray, Hc: np.ndarray, grad: np.ndarray, gnorm: float):
    r"""The search directions of one step, each with its slope, tried in turn until a line search decreases
    CE_N: Newton's; where its line search finds no decrease (a nearly singular Hessian far from W_fin, where
    the softmax saturates: a trained 8-dimensional model's instance stalled at ||grad|| = 0.13 after 16
    steps), the regularised step :math:`-(\nabla^2 + \|g\|I)^{-1}g` (Levenberg–Marquardt with the gradient
    norm as damping, which vanishes at W_fin, so the local rate is kept; it converged there in 43 steps);
    then the gradient. A direction without a negative slope in float64 is skipped."""
    slope = float(grad @ newton)
    if slope < 0:
        yield newton, slope
    try:
        lm = -np.linalg.solve(Hc + gnorm * np.eye(Hc.shape[0]), grad)
    except np.linalg.LinAlgError:
        lm = None
    if lm is not None and float(grad @ lm) < 0:
        yield lm, float(grad @ lm)
    yield -grad, -gnorm * gnorm


def _result(instance, N, ext_inst, system, sub, ext, W, steps, tol, t0, history) -> FiniteLimit:
    gnorm = float(np.linalg.norm(_reduced_gradient(instance, ext, W)))
    L = _reduced_loss(instance, ext, W)
    exc = reduced_excess(instance, N, W)
    dim = int(sub.eigvals.size)
    return FiniteLimit(W, L, exc, instance.entropy(), dim, gnorm, int(steps), bool(gnorm <= tol), N, ext_inst,
                       system, sub, time.perf_counter() - t0, tol, history)


def solve_mm_p(limit: FiniteLimit, *, solver: str = "auto", **options: Any):
    """W^mm_P: the NTP-SVM of the extended pattern (``limit.system``) by ``solver``
    (:func:`ntpcert.solve.svm.solve_svm`, with the backend's exact gap where it has one). None when P is
    empty (every out-of-support pair is in N: W^mm_P is not defined).

    Raises whatever :func:`~ntpcert.solve.svm.solve_svm` raises (an InfeasibleError would mean that the
    given N is not the split's: the extended pattern is separable by construction)."""
    return solve_mm_p_system(limit.system, solver=solver, **options)


def solve_mm_p_system(system: KeslerSystem, *, solver: str = "auto", **options: Any):
    """W^mm_P from the extended pattern's Kesler rows (:func:`extended_pattern`; as :func:`solve_mm_p`, also
    where W_fin was not computed)."""
    from ntpcert.solve.svm import solve_separable

    if system.n_margin == 0:
        return None
    return solve_separable(system, solver=solver, **options)

