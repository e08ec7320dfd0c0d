r"""The best loss of a linear decoder, :math:`L^* = \inf_W \mathrm{CE}(W)`, bracketed from both sides.

Duality. With :math:`\operatorname{lse}(\ell) = \max_{q \in \Delta} \langle q, \ell\rangle + H(q)`,

.. math:: L^* = \max\Big\{ \sum_j \pi_j H(q_j) \;:\; q_j \in \Delta_V,\;
          \sum_j \pi_j (q_j - p_j) h_j^\top = 0 \Big\},

since for every feasible q and every W,
:math:`\mathrm{CE}(W) \ge \sum_j \pi_j H(q_j) + \langle \sum_j \pi_j (q_j - p_j) h_j^\top, W\rangle = \sum_j \pi_j H(q_j)`.
So any W gives an upper bound :math:`\mathrm{CE}(W)` and any feasible q a lower bound; q = p is
feasible and gives the entropy bound :math:`\mathcal H`, hence :math:`L^* - \mathcal H \ge 0`.

Primal. :math:`\mathrm{CE}` may have no minimiser (when part of the data is separable, the infimum is
approached along a separating direction and :math:`\|W\| \to \infty`), while the dual maximum is always
attained. An inexact damped Newton method with conjugate gradients (:math:`\nabla^2\mathrm{CE}` is
applied, never formed; CG stops at the relative residual :math:`\min(0.5, \|G\|_\infty^{1/2})`, and a step
moves no centred logit by more than :data:`STEP_CAP`) gives the upper end. Solving the Newton system
accurately far from the optimum is harmful here: the separable face makes it nearly singular, and the
accurate solution is a step of 1e12 that the line search cuts back to nothing.

Reduced problem (the lower end). Off-support entries of :math:`\mathbb S(Wh_j)` below :data:`FACE_TOL`
(the separable face, where the optimal q vanishes) are removed from the softmax. The reduced CE is
below the full one at every W, so its infimum is still a lower bound on :math:`L^*` (equal to it when
the removed entries vanish at the optimum); with no separable direction left, a few Newton steps on it
converge, and its softmax is repaired as below. On pydoc (k = 2) the first attempt is within 1e-9.

With the split (our derivation; ``docs/math.md``). When the split P / N of the out-of-support pairs is
known (:mod:`ntpcert.solve.split`, float or exact) and N is not empty, the face is P itself, not a guess
by :data:`FACE_TOL`. The reduced CE is then :math:`\mathrm{CE}_N`, whose infimum is :math:`L^*` itself
(:math:`L^* = \mathrm{CE}_N(W_{fin})`), and it has no recession direction left on :math:`F_N`, so Newton
converges to :math:`W_{fin}` (up to a component in :math:`F_N^\perp`, which it does not see):

* lower end: the repair of :math:`\mathbb S_{S_j\cup N_j}(W h_j)` on the face P (no tolerance), as below;
* upper end: CE at the decoder :math:`W + sD_P`. :math:`D_P` is constant on :math:`S_j\cup N_j` and
  below it by :math:`\mu_{jv} > 0` on P, so, per context,
  :math:`\mathrm{CE}_j(W + sD_P) = \mathrm{CE}_{N,j}(W) + \log(1 + \sum_{v\in P_j}
  e^{z_{jv} - \mathrm{lse}_{S_j\cup N_j}(z_j) - s\mu_{jv}})` with :math:`z = Wh_j`, and
  :math:`0 \le \mathrm{CE}(W + sD_P) - \mathrm{CE}_N(W) \le e^{-s\mu_{min}}\,T_0`, :math:`T_0 =
  \sum_j\pi_j\sum_{v\in P_j}e^{z_{jv}-\mathrm{lse}_{S_j\cup N_j}(z_j)}`. s is taken so that this tail is
  :data:`SPLIT_TAIL` times the target width (``direction_scale``, ``tail_estimate``).

Both ends then close around :math:`\mathrm{CE}_N(W_{fin}) - \mathcal H` (``limit_excess`` is
:math:`\mathrm{CE}_N(W) - \mathcal H` at the final W). Soundness never rests on the split: any W gives an
upper bound and any feasible q a lower one; a wrong split would only leave the bracket wide. Without a
determined split, on separable data (N empty) or when :math:`D_P`'s float margins are not positive, the
bracket is computed as before, and the key ``face`` says which face was used and why.

Dual repair. From W take :math:`q_j = \mathbb S(W h_j)`; its constraint residual is the gradient
:math:`G = \nabla\mathrm{CE}(W) = \sum_j \pi_j (q_j - p_j) h_j^\top`. The correction is the
linearisation of the softmax: with :math:`A_j = \operatorname{diag}(q_j) - q_j q_j^\top` and X solving
:math:`\nabla^2\mathrm{CE}(W)[X] = \sum_j \pi_j A_j X h_j h_j^\top = -G` (by CG),

.. math:: \tilde q_j = q_j + A_j X h_j, \qquad \tilde q_{j,z} = q_{j,z}\,(1 + y_{j,z} - \langle q_j, y_j\rangle),\; y_j = X h_j.

It keeps :math:`\mathbf 1^\top \tilde q_j = 1`, meets the constraints up to the CG residual (reported as
``dual_residual``), and moves each entry by a relative amount, so entries that are about zero (the
separable part) stay about zero and non-negative as soon as the step is small
(:math:`|y_{j,z} - \langle q_j, y_j\rangle| < 1`). This is the minimiser of
:math:`\sum_j \pi_j \sum_z \delta_{j,z}^2 / q_{j,z}` over corrections that meet the constraints (the
Fisher metric). Before the repair, entries below :data:`FACE_TOL` off the supports (the separable face, where the
optimal q vanishes) are set to zero; small negative entries after it (down to :data:`CLIP_TOL`) are
clipped and the residual recomputed. Should an entry still come out negative, :math:`\tilde q` is mixed with p (feasible):
:math:`(1-t)\tilde q + t p`, with the smallest t that restores non-negativity when all negative entries lie
in the supports; otherwise the lower bound falls back to :math:`\mathcal H` (q = p).

Per-context excess. ``per_context_excess[j]`` is :math:`\pi_j \mathrm{KL}(p_j \,\|\, \mathbb S(W h_j))` at the
final decoder W: non-negative, and summing to ``excess_upper`` exactly (up to rounding); it differs from
the same quantity at the optimum by at most the bracket's width in total.

Float tolerance: a repaired q counts only when its constraint residual r (max abs entry) is at most
:data:`DUAL_TOL`, and the lower end is :math:`\\sum_j\\pi_j H(\\tilde q_j) - |\\langle r, W\\rangle|`
(the first-order entropy cost of moving q̃ onto the constraints) minus :data:`LOWER_SLACK`.

Every number is float64 and named with its tolerance: ``primal_residual`` is :math:`\|G\|_\infty` at W,
``dual_residual`` the largest entry of :math:`|\sum_j \pi_j(\tilde q_j - p_j) h_j^\top|`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.util.budget import budget_text, cap_text

__all__ = ["EXCESS_TOL", "ExcessBracket", "excess_bracket", "float_bracket", "dual_repair", "split_face"]

#: Default target: stop when the bracket's width is at most this times max(excess_upper, 1e-12)... relative.
EXCESS_TOL = 1e-8
#: The bracket is also accepted when its width is at most this (nats), for instances where L* = ℋ.
ABS_TOL = 1e-14
#: Floor of the CG preconditioner's diagonal, relative to its largest entry.
PRECOND_FLOOR = 1e-6
#: The bracket's budget of work: Newton steps (each one CG solve of at most :data:`NEWTON_CG` products and
#: a line search). When it is spent the best bracket so far is returned, its ``status`` saying so. It now
#: also stands for the 120 s that ``certify`` and ``explain`` gave the bracket. In the default suite the
#: bracket converged within 66 steps where it converged (116 of 124 runs; up to m·V = 78,432); two toys
#: (m·V = 4 and 15) spend all 200, as they did before.
MAX_NEWTON = 200
#: Largest number of CG iterations per Newton step / per repair.
MAX_CG = 300
#: Entries of softmax(W h_j) below this, off the support, are taken as the separable face (set to 0)
#: before the repair: the Hessian is near-singular along them and the repair would step far.
FACE_TOL = 1e-6
#: Rounds of the repair: off-support entries that come out negative join the face and it is redone.
FACE_ROUNDS = 4
#: Negative entries of the repaired q down to -CLIP_TOL are clipped to 0 (rows renormalised); the
#: constraint residual is recomputed afterwards.
CLIP_TOL = 1e-9
#: Float slack taken off the lower end (nats): q̃ meets the constraints only up to DUAL_TOL, and its
#: entropy can exceed the true L* by about that much (seen: 7e-11 on ``paper``, where only q = p is feasible).
LOWER_SLACK = 1e-9
#: CG iterations per Newton step.
NEWTON_CG = 300
#: Inexact Newton (Eisenstat-Walker forcing): the CG of a Newton step stops at the relative residual
#: ``min(FORCING_MAX, max(FORCING_MIN, |G|_inf ** FORCING_POWER))``. Far from the optimum a loose solve
#: keeps the step out of the near-flat directions of the separable face (solving them accurately there
#: gave steps of 1e12 that the line search cut back to nothing: 20 s lost on pydoc k = 2).
FORCING_MAX = 0.5
FORCING_MIN = 1e-8
FORCING_POWER = 0.5
#: A Newton step is scaled down so that no centred logit moves by more than this (nats).
STEP_CAP = 20.0
#: A repaired q counts for the lower bound only when its constraint residual (max abs entry) is at most this.
DUAL_TOL = 1e-9
#: Newton steps on the reduced problem per dual-side attempt, and its gradient target.
REDUCED_NEWTON = 12
REDUCED_GRAD = 1e-11
#: After the first dual-side attempt, the next ones come every this many Newton steps (each costs
#: up to REDUCED_NEWTON steps; the first one is usually within 1e-9 of the optimum already).
DUAL_EVERY = 15
#: The dual repair is tried once the gradient's max abs entry is below this.
REPAIR_AT = 1e-5
#: With the split: D_P counts when, in float64, its logits on S_j u N_j agree and its P margins exceed this
#: times its largest logit.
SPLIT_D_TOL = 1e-9
#: With the split: the tail of the upper end's decoder W + s D_P is at most this times the target width.
SPLIT_TAIL = 1e-6


@dataclass(frozen=True, eq=False)
class ExcessBracket:
    r"""A bracket on :math:`L^* = \inf_W \mathrm{CE}(W)` and on :math:`L^* - \mathcal H \ge 0`.

    Attributes
    ----------
    lower, upper : float
        :math:`\sum_j \pi_j H(\tilde q_j) \le L^* \le \mathrm{CE}(W)`.
    entropy : float
        :math:`\mathcal H`.
    excess_lower, excess_upper : float
        ``max(lower - entropy, 0)`` (q = p is feasible) and ``upper - entropy`` computed as
        :math:`\sum_j \pi_j \mathrm{KL}(p_j\|\mathbb S(Wh_j))`.
    per_context_excess : ndarray of shape (m,)
        :math:`\pi_j \mathrm{KL}(p_j\|\mathbb S(Wh_j))` (see the module doc).
    W : ndarray of shape (V, d)
        The decoder of the upper bound.
    q : ndarray of shape (m, V)
        The repaired dual point of the lower bound.
    primal_residual, dual_residual : float
        :math:`\|\nabla \mathrm{CE}(W)\|_\infty` and the constraint residual of q (max abs entry).
    method, status : str
    seconds : float
    iterations : int
    exact : bool
        True only when both ends were certified in exact arithmetic.
    info : dict
        Merged into the JSON: ``face`` (the split's P, or the tolerance and why) and, with the split,
        ``limit_excess`` (:math:`\mathrm{CE}_N(W_N) - \mathcal H` at the Newton point :math:`W_N`, W being
        :math:`W_N + sD_P`), ``limit_residual`` (max abs entry of :math:`\nabla\mathrm{CE}_N(W_N)`),
        ``direction_scale`` (s) and ``tail_estimate`` (the float bound on :math:`\mathrm{CE}(W) - \mathrm{CE}_N(W_N)`).
    """

    lower: float
    upper: float
    entropy: float
    excess_lower: float
    excess_upper: float
    per_context_excess: np.ndarray
    W: np.ndarray
    q: np.ndarray
    primal_residual: float
    dual_residual: float
    method: str
    status: str
    seconds: float
    iterations: int
    exact: bool = False
    info: dict = field(default_factory=dict)

    @property
    def width(self) -> float:
        """``excess_upper - excess_lower``."""
        return self.excess_upper - self.excess_lower

    @property
    def relative_width(self) -> float:
        """Width relative to ``excess_upper`` (inf when that is 0 and the width is not)."""
        if self.excess_upper > 0:
            return self.width / self.excess_upper
        return 0.0 if self.width <= 0 else float("inf")

    def to_json(self, *, per_context: bool = True) -> dict[str, Any]:
        """A JSON-ready dict (no W or q)."""
        out = {
            "lower": self.lower,
            "upper": self.upper,
            "entropy": self.entropy,
            "excess_lower": self.excess_lower,
            "excess_upper": self.excess_upper,
            "relative_width": self.relative_width,
            "primal_residual": self.primal_residual,
            "dual_residual": self.dual_residual,
            "method": self.method,
            "status": self.status,
            "seconds": self.seconds,
            "iterations": self.iterations,
            "exact": self.exact,
        }
        if per_context:
            out["per_context_excess"] = [float(x) for x in self.per_context_excess]
        out.update(self.info)
        return out


class _Model:
    """CE, gradient and Hessian-vector products on one instance (H sparse when it pays)."""

    def __init__(self, instance: NTPInstance, face: np.ndarray | None = None):
        #: entries (j, v) removed from the softmax (the reduced problem of the lower end), or None
        self.face = face
        H = np.asarray(instance.embeddings, dtype=np.float64)
        nnz = np.count_nonzero(H)
        self.H = sp.csr_matrix(H) if nnz <= 0.2 * H.size else H
        self.HT = self.H.T.tocsr() if sp.issparse(self.H) else H.T
        self.H2T = (self.H.multiply(self.H)).T.tocsr() if sp.issparse(self.H) else (H * H).T
        self.P = np.asarray(instance.probs, dtype=np.float64)
        self.pi = np.asarray(instance.weights, dtype=np.float64)
        self.V, self.d = instance.V, instance.d
        with np.errstate(divide="ignore"):
            self.logP = np.where(self.P > 0, np.log(np.where(self.P > 0, self.P, 1.0)), 0.0)

    def logits(self, W: np.ndarray) -> np.ndarray:
        return np.asarray(self.H @ W.T)

    def state(self, W: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """(excess, G, Q, kl) at W: excess = Σ π_j KL(p_j‖q_j) ≥ 0 without cancellation."""
        Z = self.logits(W)
        if self.face is not None:
            Z = np.where(self.face, -np.inf, Z)
        Z = Z - Z.max(axis=1, keepdims=True)
        E = np.exp(Z)
        s = E.sum(axis=1, keepdims=True)
        logQ = Z - np.log(s)
        Q = E / s
        with np.errstate(invalid="ignore"):
            kl = np.where(self.P > 0, self.P * (self.logP - logQ), 0.0).sum(axis=1)
        G = np.asarray(self.HT @ ((Q - self.P) * self.pi[:, None])).T
        return float(self.pi @ kl), G, Q, kl

    def hessp(self, Q: np.ndarray, X: np.ndarray) -> np.ndarray:
        """:math:`\\sum_j \\pi_j A_j X h_j h_j^\\top` with :math:`A_j = \\operatorname{diag}(q_j) - q_jq_j^\\top`."""
        return np.asarray(self.HT @ (self.delta(Q, X) * self.pi[:, None])).T

    def delta(self, Q: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Rows :math:`A_j X h_j`, shape (m, V)."""
        Y = self.logits(X)
        return Q * (Y - (Q * Y).sum(axis=1, keepdims=True))

    def cg(self, Q: np.ndarray, B: np.ndarray, *, tol: float, maxiter: int) -> tuple[np.ndarray, int]:
        """Conjugate gradients for :math:`\\nabla^2[X] = B` from X = 0 (B in the range), with the
        Hessian's diagonal :math:`\\sum_j \\pi_j q_{j,z}(1-q_{j,z}) h_{j,k}^2` as preconditioner."""
        Dg = np.asarray(self.H2T @ (Q * (1 - Q) * self.pi[:, None])).T
        Dg = np.maximum(Dg, 1e-300 + PRECOND_FLOOR * float(Dg.max(initial=0.0)))
        X = np.zeros_like(B)
        R = B.copy()
        Zr = R / Dg
        D = Zr.copy()
        rz = float((R * Zr).sum())
        stop = tol * tol * max(float((R * R).sum()), 1e-300)
        rr = float((R * R).sum())
        it = 0
        for it in range(1, maxiter + 1):
            if rr <= stop:
                break
            AD = self.hessp(Q, D)
            dAd = float((D * AD).sum())
            if dAd <= 0:
                break
            a = rz / dAd
            X += a * D
            R -= a * AD
            rr = float((R * R).sum())
            Zr = R / Dg
            rz_new = float((R * Zr).sum())
            D = Zr + (rz_new / rz) * D
            rz = rz_new
        return X, it


def entropy_rows(Q: np.ndarray) -> np.ndarray:
    """:math:`H(q_j)` per row, shape (m,), with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(Q > 0, Q * np.log(np.where(Q > 0, Q, 1.0)), 0.0).sum(axis=1)


def dual_repair(instance: NTPInstance, W: np.ndarray, *, cg_tol: float = 1e-14,
                max_cg: int = MAX_CG) -> tuple[np.ndarray, float, str]:
    """Feasible q from a decoder W (see the module doc).

    Returns
    -------
    q : ndarray of shape (m, V)
    residual : float
        Max abs entry of :math:`\\sum_j \\pi_j (q_j - p_j) h_j^\\top`.
    how : str
        ``"newton-repair"``, ``"newton-repair+mix(t)"`` or ``"p"`` (fell back to q = p).
    """
    model = _Model(instance)
    W = instance.check_decoder(W)
    _, G, Q, _ = model.state(W)
    return _repair(model, Q, G, cg_tol, max_cg)


def _repair(model: _Model, Q: np.ndarray, G: np.ndarray, cg_tol: float, max_cg: int,
            face: np.ndarray | None = None):
    # the face: the separable pairs P when the split gives them (``face``), else the entries below
    # FACE_TOL off the supports (a float guess of P); set them to 0 first. Off-support entries that the
    # repair drives negative join the face, and the repair is redone.
    face = (Q < FACE_TOL) & (model.P <= 0) if face is None else face.copy()
    for _ in range(FACE_ROUNDS):
        Qt, how = _repair_on_face(model, Q, face, cg_tol, max_cg)
        grow = (Qt < -CLIP_TOL) & (model.P <= 0) & ~face
        if not grow.any():
            break
        face = face | grow
    if np.any(Qt < 0) and Qt.min() >= -CLIP_TOL:
        Qt = np.maximum(Qt, 0.0)
        Qt /= Qt.sum(axis=1, keepdims=True)
        how += "+clip"
    if np.any(Qt < 0):
        neg = Qt < 0
        if np.any(neg & (model.P <= 0)):
            return model.P.copy(), 0.0, "p"
        t = float(np.max(-Qt[neg] / (model.P[neg] - Qt[neg])))
        Qt = (1 - t) * Qt + t * model.P
        Qt = np.maximum(Qt, 0.0)
        how += f"+mix({t:.3g})"
    res = np.asarray(model.HT @ ((Qt - model.P) * model.pi[:, None]))
    return Qt, float(np.abs(res).max(initial=0.0)), how


def _repair_on_face(model: _Model, Q: np.ndarray, face: np.ndarray, cg_tol: float, max_cg: int):
    Qf = np.where(face, 0.0, Q)
    Qf /= Qf.sum(axis=1, keepdims=True)
    Gf = np.asarray(model.HT @ ((Qf - model.P) * model.pi[:, None])).T
    X, _ = model.cg(Qf, -Gf, tol=cg_tol, maxiter=max_cg)
    return Qf + model.delta(Qf, X), "newton-repair"


def float_bracket(instance: NTPInstance, *, split: Any = None, **options: Any) -> ExcessBracket:
    r"""The float bracket, with BLAS on one thread: its products are small (m x V), and threads that wait
    for each other doubled or quadrupled its time on a loaded 2-core machine.

    ``split``: the split P / N of the out-of-support pairs, a float :class:`ntpcert.solve.split.Split`
    or an exact :class:`ntpcert.exact.split.ExactSplit`. When it is determined and N is not empty, the
    face is P itself and both ends close around :math:`\mathrm{CE}_N(W_{fin}) - \mathcal H`
    (:func:`_split_bracket`, module doc); otherwise (no split, an undetermined one, N empty, or a
    :math:`D_P` whose float margins are not positive) the face is guessed by :data:`FACE_TOL` as before
    (:func:`_float_bracket`). The key ``face`` of the result says which, and why."""
    from ntpcert.util.numbers import single_thread

    with single_thread():
        face, D, note = split_face(instance, split)
        if face is None:
            b = _float_bracket(instance, **options)
            b.info.update(face=f"tolerance: off-support entries of the softmax below FACE_TOL = {FACE_TOL:g} "
                               f"({note})")
            return b
        return _split_bracket(instance, face, D, note, **options)


def split_face(instance: NTPInstance, split: Any) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    r"""``(P, D, note)``: the separable pairs P as an (m, V) boolean mask and :math:`D_P` of shape (V, d)
    (float64) from ``split``, or ``(None, None, why not)``. Used only when the split is determined, N is
    not empty, and :math:`D_P` has, in float64, the same logit on :math:`S_j \cup N_j` (up to
    :data:`SPLIT_D_TOL` of its largest logit) and a margin above that on every pair of P."""
    if split is None:
        return None, None, "no split given"
    if not split.ok:
        return None, None, f"the split is undetermined: {split.reason}"
    N = np.asarray(split.nonseparable, dtype=np.int64).reshape(-1, 2)
    if N.shape[0] == 0:
        return None, None, "the split has no non-separable pair (separable data: the bracket is as before)"
    S = instance.support_mask()
    ext = S.copy()
    ext[N[:, 0], N[:, 1]] = True
    P = ~ext
    if getattr(split, "D_rows", None) is not None:  # exact split: class rows of Fractions
        rows = np.array([[float(x) for x in row] for row in split.D_rows], dtype=np.float64)
        D = rows[np.asarray(split.of_token, dtype=np.int64)]
    else:
        D = getattr(split, "D", None)
    if D is None:
        return None, None, "the split carries no direction D_P"
    D = np.asarray(D, dtype=np.float64)
    Z = np.asarray(instance.embeddings, dtype=np.float64) @ D.T
    scale = max(float(np.abs(Z).max(initial=0.0)), 1e-300)
    top = np.where(ext, Z, -np.inf).max(axis=1, keepdims=True)
    low = np.where(ext, Z, np.inf).min(axis=1, keepdims=True)
    if float((top - low).max(initial=0.0)) > SPLIT_D_TOL * scale:
        return None, None, "D_P is not constant on S_j u N_j in float64"
    mu = np.where(P, top - Z, np.inf)
    if P.any() and not float(mu.min()) > SPLIT_D_TOL * scale:
        return None, None, "D_P's float margins on P are not positive"
    return P, D, (f"the split: N = {N.shape[0]} pairs, P = {int(P.sum())} pairs "
                  f"({'exact' if getattr(split, 'D_rows', None) is not None else 'float'})")


def _split_bracket(instance: NTPInstance, face: np.ndarray, D: np.ndarray, note: str, *, tol: float = EXCESS_TOL,
                   max_newton: int = MAX_NEWTON, W0: np.ndarray | None = None, time_limit: float | None = None,
                   abs_tol: float = ABS_TOL) -> ExcessBracket:
    r"""The bracket when the split is known (module doc, "With the split"): Newton-CG on
    :math:`\mathrm{CE}_N` (the softmax without the pairs of ``face`` = P), the dual repair of its softmax
    on that face for the lower end, and the decoder :math:`W + sD_P` for the upper end, s chosen so
    that the tail :math:`\sum_j\pi_j\sum_{v\in P_j}e^{z_{jv} - \mathrm{lse}_{S_j\cup N_j}(z_j) - s\mu_{jv}}`
    (float estimate) is at most :data:`SPLIT_TAIL` times the target width."""
    if not (isinstance(tol, float) and 0 < tol < 1):
        raise InputError(f"tol: value {tol!r} is not a float in (0, 1)")
    t0 = time.perf_counter()
    model = _Model(instance)
    red = _Model(instance, face)
    ent = float(instance.entropy())
    H_p = float(model.pi @ entropy_rows(model.P))
    W = np.zeros((instance.V, instance.d)) if W0 is None else instance.check_decoder(W0).copy()
    ex, G, Q, _ = red.state(W)
    best_low, best_q, best_res, best_how = H_p, model.P.copy(), 0.0, "p"
    status = budget_text(max_newton, "Newton steps", "a larger max_newton may narrow the bracket")
    it = 0
    prev_g = np.inf
    for it in range(1, max_newton + 1):
        g = float(np.abs(G).max(initial=0.0))
        if g <= REPAIR_AT:  # the dual side: one CG solve per step, on the face P (G at its rounding
            # floor: CG stops at once and q is the softmax itself, its residual checked as any other)
            Qt, res, how = _repair(red, Q, G, _repair_tolerance(red, Q, G), MAX_CG, face=face)
            if how != "p":
                low = float(model.pi @ entropy_rows(Qt)) - _first_order(model, Qt, W) - LOWER_SLACK
                if res <= DUAL_TOL and low > best_low:
                    best_low, best_q, best_res, best_how = low, Qt, res, "split-" + how
        exc_low = max(best_low - H_p, 0.0)
        stop = _stop_reason(ex, exc_low, tol, abs_tol, time_limit, t0)
        if stop:
            status = stop
            break
        if g <= REDUCED_GRAD and (g <= REDUCED_GRAD * 1e-3 or g > 0.5 * prev_g):
            status = "stalled at the gradient floor"  # CE_N is minimised to float64's resolution
            break
        prev_g = g
        found = _newton_step(red, W, ex, G, Q, g)
        if found is None:
            status = "line search failed"
            break
        W, ex, G, Q, _ = found
    limit_excess = max(ex, 0.0)
    s, tail = _direction_scale(instance, red, face, D, W, max(tol * limit_excess, abs_tol) * SPLIT_TAIL)
    W_up = W + s * D
    ex_up, G_up, _, kl = model.state(W_up)
    ex_up = max(ex_up, 0.0)
    exc_low = max(best_low - H_p, 0.0)
    info = {"face": f"the separable pairs P of {note}", "limit_excess": limit_excess,
            "limit_residual": float(np.abs(G).max(initial=0.0)), "direction_scale": s, "tail_estimate": tail}
    return ExcessBracket(
        lower=ent + exc_low, upper=ent + ex_up, entropy=ent, excess_lower=exc_low, excess_upper=ex_up,
        per_context_excess=model.pi * np.maximum(kl, 0.0), W=W_up, q=best_q,
        primal_residual=float(np.abs(G_up).max(initial=0.0)), dual_residual=best_res,
        method=f"split: newton-cg on CE_N + W_fin + s D_P + {best_how}", status=status,
        seconds=time.perf_counter() - t0, iterations=it, info=info)


def _repair_tolerance(model: _Model, Q: np.ndarray, G: np.ndarray) -> float:
    r"""The relative CG tolerance of the repair: 1e-10, or the relative rounding of G when that is larger.
    G is a sum of terms :math:`\pi_j(q_j - p_j)h_j^	op` with a rounding error of about
    :math:`\epsilon\,\|\,|H|^	op(\pi(Q + P))\|_F`, and that part of G need not lie in the Hessian's range
    (the range is F_N, and CE_N is flat across it): asking CG to resolve it diverges along the flat
    directions (seen: a repair step of 1e16 at :math:`\|G\|_\infty = 10^{-13}`)."""
    gF = float(np.sqrt((G * G).sum()))
    if gF == 0.0:  # the softmax meets the constraints already: CG returns X = 0 at once
        return 1e-10
    absH = abs(model.HT) if sp.issparse(model.HT) else np.abs(model.HT)
    noise = 64 * float(np.finfo(np.float64).eps) * float(np.linalg.norm(np.asarray(absH @ ((Q + model.P) * model.pi[:, None]))))
    return max(1e-10, noise / gF)


def _direction_scale(instance: NTPInstance, red: _Model, face: np.ndarray, D: np.ndarray, W: np.ndarray,
                     target: float) -> tuple[float, float]:
    r"""``(s, tail)``: the smallest s >= 0 (float64) with
    :math:`e^{-s\mu_{min}}\,T_0 \le` ``target``, where :math:`T_0 = \sum_j\pi_j\sum_{v\in P_j}
    e^{z_{jv}-\mathrm{lse}_{S_j\cup N_j}(z_j)}` at W and :math:`\mu_{min}` is :math:`D_P`'s smallest margin on
    P; ``tail`` is :math:`e^{-s\mu_{min}}T_0`, which bounds :math:`\mathrm{CE}(W + sD_P) - \mathrm{CE}_N(W)`
    (since :math:`\log(1+x)\le x`) in exact arithmetic when :math:`D_P` is exactly in K."""
    if not face.any():
        return 0.0, 0.0
    Z = red.logits(W)
    ZN = np.where(face, -np.inf, Z)
    top = ZN.max(axis=1, keepdims=True)
    lse = top + np.log(np.exp(ZN - top).sum(axis=1, keepdims=True))
    T0 = float(red.pi @ np.where(face, np.exp(np.where(face, Z - lse, -np.inf)), 0.0).sum(axis=1))
    ZD = red.logits(D)
    mu = float(np.where(face, np.where(~face, ZD, -np.inf).max(axis=1, keepdims=True) - ZD, np.inf).min())
    if T0 <= target or T0 == 0.0:
        return 0.0, T0
    s = float(np.log(T0 / max(target, 1e-300)) / mu)
    return s, T0 * float(np.exp(-s * mu))


def _float_bracket(instance: NTPInstance, *, tol: float = EXCESS_TOL, max_newton: int = MAX_NEWTON,
                  W0: np.ndarray | None = None, time_limit: float | None = None,
                  abs_tol: float = ABS_TOL) -> ExcessBracket:
    """Newton-CG on CE with a dual repair at every step; stops when the relative width ≤ ``tol``.

    Parameters
    ----------
    instance : NTPInstance
    tol : float
        Target relative width ``(excess_upper - excess_lower) / excess_upper`` (an absolute width
        of ``tol * 1e-12`` when the excess is about 0).
    max_newton : int
    W0 : ndarray of shape (V, d), optional
        Starting decoder (default 0).
    time_limit : float, optional
        A user's cap in seconds, off by default: the best bracket so far is returned with the status
        ``time limit of X s reached (a user's cap)``. The budget of work is ``max_newton`` (its status:
        ``budget of N Newton steps spent``).
    abs_tol : float
        The bracket is also accepted when its width is at most this (nats): where L* = H the relative
        width cannot shrink, and the upper end only approaches H as the decoder grows.
    """
    if not (isinstance(tol, float) and 0 < tol < 1):
        raise InputError(f"tol: value {tol!r} is not a float in (0, 1)")
    t0 = time.perf_counter()
    model = _Model(instance)
    ent = float(instance.entropy())
    H_p = float(model.pi @ entropy_rows(model.P))
    W = np.zeros((instance.V, instance.d)) if W0 is None else instance.check_decoder(W0).copy()
    ex, G, Q, kl = model.state(W)
    best_low, best_q, best_res, best_how = H_p, model.P.copy(), 0.0, "p"
    status = budget_text(max_newton, "Newton steps", "a larger max_newton may narrow the bracket")
    it = tried = last_try = 0
    for it in range(1, max_newton + 1):
        # dual side, once the gradient is small: the reduced problem on the entries above the face
        if float(np.abs(G).max(initial=0.0)) <= REPAIR_AT and (tried == 0 or it - last_try >= DUAL_EVERY):
            tried, last_try = tried + 1, it
            found = _dual_side(instance, model, W, Q)
            if found is not None:
                Qt, res, how, low, Wr = found
                if res <= DUAL_TOL and low > best_low:
                    best_low, best_q, best_res, best_how = low, Qt, res, how
        exc_low = max(best_low - H_p, 0.0)
        stop = _stop_reason(ex, exc_low, tol, abs_tol, time_limit, t0)
        if stop:
            status = stop
            break
        # primal Newton step (inexact, capped) with backtracking
        g = float(np.abs(G).max(initial=0.0))
        found = _newton_step(model, W, ex, G, Q, g ** FORCING_POWER)
        if found is None:
            status = "line search failed"
            break
        Wn, exn, Gn, Qn, kln = found
        W, ex, G, Q, kl = Wn, exn, Gn, Qn, kln
    per_ctx = model.pi * np.maximum(kl, 0.0)
    ex = max(ex, 0.0)
    return ExcessBracket(
        lower=ent + exc_low, upper=ent + ex, entropy=ent, excess_lower=exc_low, excess_upper=ex,
        per_context_excess=per_ctx, W=W, q=best_q, primal_residual=float(np.abs(G).max(initial=0.0)),
        dual_residual=best_res, method=f"newton-cg + {best_how}", status=status,
        seconds=time.perf_counter() - t0, iterations=it,
    )


def _dual_side(instance: NTPInstance, model: _Model, W: np.ndarray, Q: np.ndarray):
    r"""A lower end from the reduced problem: the off-support entries of :math:`\mathbb S(Wh_j)` below
    :data:`FACE_TOL` are removed from the softmax (that CE is below the full one everywhere, so its
    infimum is still a lower bound on :math:`L^*`, equal to it when the removed entries vanish at the
    optimum); a few Newton steps on it (no separable directions left, so they converge fast), then the
    repair of its softmax. Returns (q, residual, how, lower) or None."""
    face = (Q < FACE_TOL) & (model.P <= 0)
    red = _Model(instance, face)
    ex, G, Qr, _ = red.state(W)
    Wr = W
    for _ in range(REDUCED_NEWTON):
        g = float(np.abs(G).max(initial=0.0))
        if g <= REDUCED_GRAD:
            break
        X, _ = red.cg(Qr, -G, tol=min(FORCING_MAX, max(FORCING_MIN, g)), maxiter=NEWTON_CG)
        X = _cap_step(red, Qr, X)
        found = _line_search(red, Wr, ex, X, float((G * X).sum()))
        if found is None:
            break
        Wr, ex, G, Qr, _ = found
    Qt, res, how = _repair(red, Qr, G, 1e-10, MAX_CG)
    if how == "p":
        return None
    low = float(model.pi @ entropy_rows(Qt)) - _first_order(model, Qt, Wr) - LOWER_SLACK
    return Qt, res, "reduced-" + how, low, Wr


def _cap_step(model: _Model, Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    r"""X scaled so that the largest centred logit change :math:`|y_{j,z} - \langle q_j, y_j\rangle|` is at
    most :data:`STEP_CAP`."""
    Y = model.logits(X)
    big = float(np.abs(Y - (Q * Y).sum(axis=1, keepdims=True)).max(initial=0.0))
    return X * (STEP_CAP / big) if big > STEP_CAP else X


def _first_order(model: _Model, Qt: np.ndarray, W: np.ndarray) -> float:
    """:math:`|\\langle r, W\\rangle|` with r the constraint residual of q̃: to first order, the entropy
    lost in moving q̃ onto the constraints (:math:`-\\log \\tilde q_j \\approx` lse − W h_j). Subtracted
    from the float lower bound; it is a float estimate, not a proof (the exact mode is)."""
    r = np.asarray(model.HT @ ((Qt - model.P) * model.pi[:, None])).T
    return abs(float((r * W).sum()))


def _stop_reason(ex: float, exc_low: float, tol: float, abs_tol: float, time_limit: float | None,
                 t0: float) -> str | None:
    """``"converged"`` when the bracket [exc_low, ex] is within its tolerance, the user's cap
    (:func:`~ntpcert.util.budget.cap_text`) past it, else None."""
    if max(ex, 0.0) - exc_low <= max(tol * ex, abs_tol):
        return "converged"
    if time_limit is not None and time.perf_counter() - t0 > time_limit:
        return cap_text(time_limit)
    return None


def _newton_step(model, W, ex, G, Q, forcing: float):
    """One inexact Newton step (CG to the forcing tolerance, capped), with backtracking along it or, failing
    that, along -G: the line search's result, or None when neither direction decreases."""
    X, _ = model.cg(Q, -G, tol=min(FORCING_MAX, max(FORCING_MIN, forcing)), maxiter=NEWTON_CG)
    X = _cap_step(model, Q, X)
    slope = float((G * X).sum())
    if slope >= 0:
        X, slope = -G, -float((G * G).sum())
    return _line_search(model, W, ex, X, slope) or _line_search(model, W, ex, -G, -float((G * G).sum()))


def _line_search(model: _Model, W, ex, X, slope):
    """Backtracking (Armijo) along X; None when no step down to 2**-60 decreases the excess."""
    step = 1.0
    for _ in range(60):
        Wn = W + step * X
        exn, Gn, Qn, kln = model.state(Wn)
        if exn <= ex + 1e-4 * step * slope:
            return Wn, exn, Gn, Qn, kln
        step *= 0.5
    return None


def excess_bracket(instance: NTPInstance, *, exact: bool = False, tol: float = EXCESS_TOL,
                   time_limit: float | None = None, split: Any = None) -> ExcessBracket:
    """The bracket on :math:`L^*` and :math:`L^* - \\mathcal H` (float; ``exact=True`` is refused here:
    exact certification lives in the pipeline layer); ``split`` as in :func:`float_bracket`."""
    if exact:
        raise InputError("exact: value True is not available from ntpcert.solve.excess (float only)")
    return float_bracket(instance, tol=tol, time_limit=time_limit, split=split)
