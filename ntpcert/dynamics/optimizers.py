r"""Optimisers on the cross-entropy of an :class:`~ntpcert.NTPInstance`, as pure step functions.

Every optimiser is a frozen value with

* ``init(W) -> OptState``: the state before the first step (step count 0, zero moment buffers);
* ``step(W, grad, state) -> (W_next, state_next)``: one update; it never changes its arguments.

Step ``t = 1, 2, ...`` uses the step size :math:`\eta_t` of its :class:`Schedule` (constant, or
:math:`\eta_0/\sqrt t`). With :math:`G_t = \nabla\mathrm{CE}(W_t)` of shape (V, d):

* ``gd``: :math:`W_{t+1} = W_t - \eta_t G_t` (default :math:`\eta = 1/(2L)`); steepest in the Frobenius norm.
* ``ngd``: :math:`W_{t+1} = W_t - \eta_t G_t/\|G_t\|_F`; Frobenius.
* ``adam``: :math:`m_t = \beta_1 m_{t-1} + (1-\beta_1)G_t`, :math:`v_t = \beta_2 v_{t-1} + (1-\beta_2)G_t^{\odot 2}`,
  :math:`W_{t+1} = W_t - \eta_t \hat m_t/(\sqrt{\hat v_t}+\varepsilon)` with :math:`\hat m_t = m_t/(1-\beta_1^t)`,
  :math:`\hat v_t = v_t/(1-\beta_2^t)`; sign descent for :math:`\beta_1=\beta_2=\varepsilon=0`, so entrywise max-norm.
* ``sign``: :math:`m_t = \beta m_{t-1} + (1-\beta)G_t`, :math:`W_{t+1} = W_t - \eta_t\operatorname{sign}(m_t)`
  (sign descent for β = 0, Signum otherwise); entrywise max-norm.
* ``spectral``: :math:`m_t` as for ``sign``, :math:`W_{t+1} = W_t - \eta_t UV^\top` with :math:`m_t = U\Sigma V^\top`
  (thin SVD, singular values above a relative cut); spectral norm.
* ``muon``: Nesterov momentum :math:`u_t = (1-\beta)G_t + \beta m_t`, then five Newton–Schulz iterations that
  approximately orthogonalise :math:`u_t` (Muon's quintic); spectral norm, approximately.

Each "steepest" norm is the one of which the update is the normalised steepest-descent direction
(:math:`\arg\max_{\|U\|\le 1}\langle G, U\rangle`); on one-hot data each is known to converge in
direction to the max-margin solution in that norm (Fan, Schmidt, Thrampoulidis, arXiv 2502.04664).
Whether the same holds under the NTP constraints (6a, 6b) is open; :mod:`ntpcert.dynamics.trajectory` measures it.

The same update code runs in two ways. ``step`` copies its inputs and applies the in-place kernel
to the copies. :class:`CEKernel` plus :meth:`Optimizer.kernel` advance a trajectory in place
with preallocated buffers (no allocation per step for every optimiser but ``spectral`` and ``muon``,
whose SVD / matrix products allocate), which is what :func:`ntpcert.dynamics.trajectory.run` uses.

Example
-------
>>> import numpy as np
>>> from ntpcert import NTPInstance
>>> from ntpcert.dynamics.optimizers import adam
>>> inst = NTPInstance.from_counts(np.eye(2), [[3, 1, 0], [0, 2, 2]])
>>> opt = adam(lr=0.1)
>>> W = np.zeros((3, 2)); state = opt.init(W)
>>> for _ in range(100):
...     W, state = opt.step(W, inst.gradient(W), state)
>>> bool(inst.excess_loss(W) < 0.1)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance
from ntpcert.instance.ce import CEKernel as CEKernel  # the fused gradient, shared with the rest of the package
from ntpcert.util.validate import check_int

#: Singular values below this fraction of the largest are treated as zero by ``spectral``: the
#: steepest-descent direction in the spectral norm is :math:`UV^\top` on the range of the
#: gradient and is left zero on its null space. The cut is at rounding level (a few ulps times the
#: dimension, as ``numpy.linalg.matrix_rank``): CE gradients satisfy :math:`\mathbf 1^\top G = 0`
#: exactly, and a looser cut (1e-10 before) kept rounding noise along :math:`\mathbf 1_V` as a full
#: unit singular direction.
SPECTRAL_RANK_RTOL = None

#: Newton–Schulz divides its input by its Frobenius norm after rescaling by the largest entry, with
#: no absolute floor: Muon's customary ``+1e-7`` switched normalisation off once
#: :math:`\|G\| < 10^{-7}`, which late in training (gradients of size :math:`e^{-\text{margin}}`)
#: froze the step length.
NEWTON_SCHULZ_EPS = 0.0

#: Muon's quintic Newton–Schulz coefficients :math:`(a, b, c)`: :math:`X \leftarrow aX + (bA + cA^2)X`
#: with :math:`A = XX^\top`; they push every singular value of the normalised input into about [0.7, 1.2].
NEWTON_SCHULZ_COEFFS = (3.4445, -4.7750, 2.0315)

#: Largest step size the command line (``--lr``, ``reproduce --gd-lr/--ngd-lr/--adam-lr``) and sweep
#: specs (``trajectory.step_size``) accept: with embeddings of norm about 1, a larger step sends the
#: iterate past what float64 holds within a few steps. The library takes any finite positive step.
MAX_LR = 1e6

#: Largest number of steps of a trajectory (:func:`ntpcert.dynamics.trajectory.run`, ``--steps``, a
#: sweep's ``trajectory.steps``): hours of the fastest loop. Raise it with ``run(..., max_steps=N)``.
MAX_STEPS = 1_000_000_000

#: How ``muon`` orthogonalises: Muon's quintic Newton–Schulz (``ns_steps`` iterations; with the default 5
#: the singular values of the result lie in about [0.7, 1.2] rather than at 1, an orthogonalisation error
#: that trajectories report as ``orth_error``), or ``"svd"``, the exact polar factor (:func:`polar_factor`).
MUON_ORTHOGONALIZE = ("newton-schulz", "svd")

#: Largest number of Newton–Schulz iterations of ``muon`` (``ns_steps``); Muon uses 5.
MAX_NS_STEPS = 100

#: Adam with ε = 0 divides by :math:`\max(\sqrt{v_t}, \text{this})`; an entry whose gradient has
#: always been 0 then moves by 0 instead of 0/0.
ADAM_DENOM_FLOOR = np.finfo(np.float64).tiny


# ---------------------------------------------------------------------------- schedules
SCHEDULES = ("constant", "inv-sqrt")


@dataclass(frozen=True)
class Schedule:
    r"""Step size of step :math:`t \ge 1`: ``constant`` :math:`\eta_t = \eta_0`, ``inv-sqrt``
    :math:`\eta_t = \eta_0/\sqrt t`."""

    kind: str
    lr: float

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise InputError(f"schedule: unknown value {self.kind!r} (expected one of {', '.join(SCHEDULES)})")
        if isinstance(self.lr, bool) or not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"lr: value {self.lr!r} is not a positive finite number")

    def __call__(self, t: int) -> float:
        return self.lr if self.kind == "constant" else self.lr / math.sqrt(t)


# ---------------------------------------------------------------------------- state
@dataclass(frozen=True, eq=False)
class OptState:
    """The state of an optimiser after ``count`` steps.

    Attributes
    ----------
    count : int
        Number of steps taken.
    buffers : tuple of ndarray of shape (V, d)
        Moment estimates (first for momentum / Adam's :math:`m`, second for Adam's :math:`v`).
    """

    count: int
    buffers: tuple[np.ndarray, ...] = ()


# ---------------------------------------------------------------------------- optimisers
@dataclass(frozen=True)
class Optimizer:
    """Base class: a named update rule with its :class:`Schedule`.

    Subclasses implement :meth:`kernel`, the in-place update; :meth:`step` is its pure form.
    ``schedule`` is None only for ``gd`` before :meth:`resolve` fills in 1/(2L).
    """

    schedule: Schedule | None
    name: str = field(default="", init=False)
    steepest_norm: str = field(default="fro", init=False)
    n_buffers: int = field(default=0, init=False)
    #: The update is unchanged when every gradient is multiplied by one positive number (and the
    #: buffers, all linear in the gradients, by the same): the fused loop then feeds it the rescaled
    #: direction of :meth:`ntpcert.instance.ce.CEKernel.direction_into`, exact past exp underflow.
    scale_free: bool = field(default=False, init=False)

    def init(self, W: np.ndarray) -> OptState:
        """State before the first step: count 0 and zero buffers of W's shape."""
        W = np.asarray(W, dtype=np.float64)
        return OptState(0, tuple(np.zeros_like(W) for _ in range(self.n_buffers)))

    def step(self, W: np.ndarray, grad: np.ndarray, state: OptState) -> tuple[np.ndarray, OptState]:
        """One update from ``W`` (shape (V, d)) with gradient ``grad`` (shape (V, d)).

        Returns the new iterate and state; the arguments are not modified.
        """
        if self.schedule is None:
            raise InputError(f"lr: {self.name} has no step size; call resolve(instance) first")
        W_next = np.array(W, dtype=np.float64, copy=True)
        G = np.array(grad, dtype=np.float64, copy=True)
        bufs = tuple(np.array(b, copy=True) for b in state.buffers)
        t = state.count + 1
        self.kernel(W_next, G, bufs, t, self.schedule(t))
        return W_next, OptState(t, bufs)

    def kernel(self, W: np.ndarray, G: np.ndarray, bufs: tuple[np.ndarray, ...], t: int, lr: float) -> None:
        """Update ``W`` and ``bufs`` in place for step ``t`` with step size ``lr``; ``G`` (the
        gradient) may be overwritten."""
        raise NotImplementedError

    def resolve(self, instance: NTPInstance) -> "Optimizer":
        """This optimiser with every instance-dependent default filled in."""
        return self

    def orthogonalization_error(self, G: np.ndarray, bufs: tuple[np.ndarray, ...]) -> float:
        r"""For the orthogonalising updates (``spectral``, ``muon``): :math:`\max_i|\sigma_i(O(M)) - 1|`
        over the singular values of the orthogonalised matrix on the range of its input M (the one the
        next step would form from the gradient or direction ``G`` and the buffers, which are not
        changed), and the largest singular value off that range; NaN for the others."""
        M = self._orth_input(np.array(G, dtype=np.float64, copy=True), tuple(np.array(b, copy=True) for b in bufs))
        if M is None:
            return float("nan")
        s_in = np.linalg.svd(M, compute_uv=False)
        if s_in.size == 0 or s_in[0] == 0.0:
            return 0.0
        r = int(np.count_nonzero(s_in > max(M.shape) * float(np.finfo(np.float64).eps) * s_in[0]))
        s_out = np.linalg.svd(self._orthogonalize(M), compute_uv=False)
        err = float(np.max(np.abs(s_out[:r] - 1.0)))
        return max(err, float(s_out[r:].max())) if r < s_out.size else err

    def _orth_input(self, G: np.ndarray, bufs: tuple[np.ndarray, ...]) -> np.ndarray | None:
        return None

    def _orthogonalize(self, M: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def hyperparams(self) -> dict[str, Any]:
        """A JSON-ready description: name, schedule, step size and the rule's own constants."""
        out: dict[str, Any] = {"optimizer": self.name}
        if self.schedule is not None:
            out["schedule"] = self.schedule.kind
            out["lr"] = self.schedule.lr
        else:
            out["lr"] = None
        out.update(self._constants())
        return out

    def _constants(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class GD(Optimizer):
    r"""Gradient descent :math:`W_{t+1} = W_t - \eta_t\nabla\mathrm{CE}(W_t)`. Without a step size,
    :meth:`resolve` takes :math:`\eta = 1/(2L)` with :math:`L = \tfrac12\lambda_{\max}(\sum_j\pi_jh_jh_j^\top)`
    (:meth:`NTPInstance.smoothness`), the constant step of the paper's Theorem 2."""

    name: str = field(default="gd", init=False)

    def kernel(self, W, G, bufs, t, lr):
        G *= lr
        W -= G

    def resolve(self, instance: NTPInstance) -> "GD":
        if self.schedule is not None:
            return self
        L = instance.smoothness()
        if not L > 0:
            raise InputError(f"lr: the smoothness bound of {instance.name} is {L!r}, give a step size")
        return replace(self, schedule=Schedule("constant", 1.0 / (2.0 * L)))


@dataclass(frozen=True)
class NGD(Optimizer):
    r"""Normalised gradient descent :math:`W_{t+1} = W_t - \eta_t G_t/\|G_t\|_F` (no step at a
    zero gradient)."""

    name: str = field(default="ngd", init=False)
    scale_free: bool = field(default=True, init=False)

    def kernel(self, W, G, bufs, t, lr):
        nrm = math.sqrt(float(np.vdot(G, G)))
        if nrm > 0.0:
            G *= lr / nrm
            W -= G


@dataclass(frozen=True)
class Adam(Optimizer):
    r"""Adam with bias correction (Kingma and Ba), ε = 0 allowed.

    Computed as :math:`W_{t+1} = W_t - \eta_t\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
    m_t/(\sqrt{v_t} + \varepsilon\sqrt{1-\beta_2^t})`, which is the textbook
    :math:`\eta_t\hat m_t/(\sqrt{\hat v_t}+\varepsilon)` rearranged. Buffers: :math:`m, v` and one scratch.
    """

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    name: str = field(default="adam", init=False)
    steepest_norm: str = field(default="max", init=False)
    n_buffers: int = field(default=3, init=False)

    def __post_init__(self) -> None:
        for key in ("beta1", "beta2"):
            val = getattr(self, key)
            if not (isinstance(val, (int, float)) and 0.0 <= val < 1.0):
                raise InputError(f"{key}: value {val!r} is not in [0, 1)")
        if not (isinstance(self.eps, (int, float)) and math.isfinite(self.eps) and self.eps >= 0.0):
            raise InputError(f"eps: value {self.eps!r} is not a non-negative finite number")

    def kernel(self, W, G, bufs, t, lr):
        m, v, s = bufs
        b1, b2 = self.beta1, self.beta2
        np.multiply(G, G, out=s)
        s *= 1.0 - b2
        v *= b2
        v += s
        m *= b1
        G *= 1.0 - b1
        m += G
        c2 = math.sqrt(1.0 - b2**t)
        np.sqrt(v, out=s)
        if self.eps > 0.0:
            s += self.eps * c2
        else:
            np.maximum(s, ADAM_DENOM_FLOOR, out=s)
        np.divide(m, s, out=s)
        s *= lr * c2 / (1.0 - b1**t)
        W -= s

    def _constants(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}


def _momentum_direction(G: np.ndarray, m: np.ndarray, beta: float) -> np.ndarray:
    r"""In place :math:`m \leftarrow \beta m + (1-\beta) G` and return it; return ``G`` itself when
    :math:`\beta = 0` (no momentum buffer is used). ``G`` may be overwritten."""
    if beta <= 0.0:
        return G
    m *= beta
    G *= 1.0 - beta
    m += G
    return m


def _check_momentum(value: float) -> None:
    if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
        raise InputError(f"momentum: value {value!r} is not in [0, 1)")


@dataclass(frozen=True)
class Sign(Optimizer):
    r"""Sign descent (``momentum = 0``) and Signum: :math:`m_t = \beta m_{t-1} + (1-\beta)G_t`,
    :math:`W_{t+1} = W_t - \eta_t\operatorname{sign}(m_t)`; the normalised steepest descent of the
    entrywise max-norm."""

    momentum: float = 0.0
    name: str = field(default="sign", init=False)
    scale_free: bool = field(default=True, init=False)
    steepest_norm: str = field(default="max", init=False)
    n_buffers: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        _check_momentum(self.momentum)

    def kernel(self, W, G, bufs, t, lr):
        np.sign(_momentum_direction(G, bufs[0], self.momentum), out=G)
        G *= lr
        W -= G

    def _constants(self):
        return {"momentum": self.momentum}


def polar_factor(M: np.ndarray, rtol: float | None = SPECTRAL_RANK_RTOL) -> np.ndarray:
    r""":math:`UV^\top` from the thin SVD :math:`M = U\Sigma V^\top`, keeping singular values above
    ``rtol`` times the largest: :math:`\arg\max_{\|X\|_2\le 1}\langle M, X\rangle` of least rank.

    Parameters
    ----------
    M : ndarray of shape (V, d)
    rtol : float or None
        None: ``max(V, d)`` times the float64 epsilon (rounding level).
    """
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        return np.zeros_like(M)
    if rtol is None:
        rtol = max(M.shape) * float(np.finfo(np.float64).eps)
    k = int(np.count_nonzero(s > rtol * s[0]))
    return U[:, :k] @ Vt[:k]


def newton_schulz(M: np.ndarray, steps: int = 5) -> np.ndarray:
    r"""Muon's approximate orthogonalisation: normalise :math:`X = M/\|M\|_F` (after rescaling by the
    largest entry, so that no square under- or overflows; 0 for M = 0), then
    ``steps`` times :math:`X \leftarrow aX + (bA + cA^2)X` with :math:`A = XX^\top` (on the smaller side),
    with (a, b, c) = ``NEWTON_SCHULZ_COEFFS``.

    Parameters
    ----------
    M : ndarray of shape (V, d)
    """
    a, b, c = NEWTON_SCHULZ_COEFFS
    transposed = M.shape[0] > M.shape[1]
    X = M.T if transposed else M
    top = float(np.max(np.abs(X))) if X.size else 0.0
    if top == 0.0 or not math.isfinite(top):
        return np.zeros_like(M) if top == 0.0 else np.full_like(M, np.nan)
    X = X / top
    X = X / (float(np.linalg.norm(X)) + NEWTON_SCHULZ_EPS)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.T if transposed else X


@dataclass(frozen=True)
class Spectral(Optimizer):
    r"""Spectral descent: :math:`m_t = \beta m_{t-1} + (1-\beta)G_t` and
    :math:`W_{t+1} = W_t - \eta_t\,\mathrm{polar}(m_t)` (:func:`polar_factor`, exact SVD); the
    normalised steepest descent of the spectral norm for ``momentum = 0``."""

    momentum: float = 0.0
    name: str = field(default="spectral", init=False)
    scale_free: bool = field(default=True, init=False)
    steepest_norm: str = field(default="spectral", init=False)
    n_buffers: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        _check_momentum(self.momentum)

    def kernel(self, W, G, bufs, t, lr):
        D = polar_factor(_momentum_direction(G, bufs[0], self.momentum))
        D *= lr
        W -= D

    def _orth_input(self, G, bufs):
        return _momentum_direction(G, bufs[0], self.momentum)

    def _orthogonalize(self, M):
        return polar_factor(M)

    def _constants(self):
        return {"momentum": self.momentum, "orthogonalize": "svd"}


@dataclass(frozen=True)
class Muon(Optimizer):
    r"""Muon-style update: :math:`m_t = \beta m_{t-1} + (1-\beta)G_t`, Nesterov look-ahead
    :math:`u_t = (1-\beta)G_t + \beta m_t`, :math:`W_{t+1} = W_t - \eta_t\,\mathrm{NS}_k(u_t)`
    (:func:`newton_schulz` with ``ns_steps`` = k). Muon's shape-dependent rescaling is left out
    (a constant factor of the step size)."""

    momentum: float = 0.95
    ns_steps: int = 5
    orthogonalize: str = "newton-schulz"
    name: str = field(default="muon", init=False)
    scale_free: bool = field(default=True, init=False)
    steepest_norm: str = field(default="spectral", init=False)
    n_buffers: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        _check_momentum(self.momentum)
        check_int("ns_steps", self.ns_steps, minimum=1, maximum=MAX_NS_STEPS)
        if self.orthogonalize not in MUON_ORTHOGONALIZE:
            raise InputError(f"orthogonalize: unknown value {self.orthogonalize!r} (expected one of "
                             f"{', '.join(MUON_ORTHOGONALIZE)})")

    def kernel(self, W, G, bufs, t, lr):
        (m,) = bufs
        beta = self.momentum
        m *= beta
        G *= 1.0 - beta
        m += G
        G += beta * m
        D = self._orthogonalize(G)
        D *= lr
        W -= D

    def _orth_input(self, G, bufs):
        (m,) = bufs
        beta = self.momentum
        m *= beta
        G *= 1.0 - beta
        m += G
        G += beta * m
        return G

    def _orthogonalize(self, M):
        if self.orthogonalize == "svd":
            return polar_factor(M)
        return newton_schulz(M, self.ns_steps)

    def _constants(self):
        return {"momentum": self.momentum, "ns_steps": self.ns_steps, "orthogonalize": self.orthogonalize}


# ---------------------------------------------------------------------------- constructors
def _schedule(lr: float | None, schedule: str) -> Schedule | None:
    return None if lr is None else Schedule(schedule, lr)


def gd(lr: float | None = None, *, schedule: str = "constant") -> GD:
    """Gradient descent; ``lr=None`` means 1/(2L), filled in by :meth:`Optimizer.resolve`."""
    if lr is None and schedule not in SCHEDULES:
        raise InputError(f"schedule: unknown value {schedule!r} (expected one of {', '.join(SCHEDULES)})")
    return GD(_schedule(lr, schedule))


def ngd(lr: float = 0.01, *, schedule: str = "constant") -> NGD:
    """Normalised gradient descent (default step 0.01, the paper's)."""
    return NGD(Schedule(schedule, lr))


def adam(lr: float = 0.01, *, beta1: float = 0.9, beta2: float = 0.99, eps: float = 1e-8,
         schedule: str = "constant") -> Adam:
    """Adam (defaults: the paper's η = 0.01, β = (0.9, 0.99), and ε = 1e-8)."""
    return Adam(Schedule(schedule, lr), beta1=beta1, beta2=beta2, eps=eps)


def sign(lr: float = 0.01, *, momentum: float = 0.0, schedule: str = "constant") -> Sign:
    """Sign descent (``momentum=0``) or Signum."""
    return Sign(Schedule(schedule, lr), momentum=momentum)


def spectral(lr: float = 0.01, *, momentum: float = 0.0, schedule: str = "constant") -> Spectral:
    """Spectral descent with exact orthogonalisation (SVD)."""
    return Spectral(Schedule(schedule, lr), momentum=momentum)


def muon(lr: float = 0.01, *, momentum: float = 0.95, ns_steps: int = 5, schedule: str = "constant",
         orthogonalize: str = "newton-schulz") -> Muon:
    """Muon-style orthogonalised momentum (Newton–Schulz, or the exact polar factor with ``"svd"``)."""
    return Muon(Schedule(schedule, lr), momentum=momentum, ns_steps=ns_steps, orthogonalize=orthogonalize)


#: Name -> constructor, for the command line.
OPTIMIZERS = {"gd": gd, "ngd": ngd, "adam": adam, "sign": sign, "signum": sign, "spectral": spectral, "muon": muon}


def make_optimizer(name: str, **options: Any) -> Optimizer:
    """Build an optimiser by name; options that are None take the constructor's default.

    ``signum`` is ``sign`` with momentum 0.9 unless given.
    """
    if name not in OPTIMIZERS:
        raise InputError(f"optimizer: unknown value {name!r} (expected one of {', '.join(OPTIMIZERS)})")
    kwargs = {k: v for k, v in options.items() if v is not None}
    if name == "signum":
        kwargs.setdefault("momentum", 0.9)
    ctor = OPTIMIZERS[name]
    import inspect

    known = set(inspect.signature(ctor).parameters)
    for key in kwargs:
        if key not in known:
            raise InputError(f"{key}: not an option of optimizer {name!r} (options: {', '.join(sorted(known))})")
    return ctor(**kwargs)


__all__ = [
    "MAX_LR",
    "MAX_NS_STEPS",
    "MAX_STEPS",
    "Adam",
    "CEKernel",
    "GD",
    "Muon",
    "NGD",
    "OPTIMIZERS",
    "OptState",
    "Optimizer",
    "Schedule",
    "Sign",
    "Spectral",
    "adam",
    "gd",
    "make_optimizer",
    "muon",
    "newton_schulz",
    "ngd",
    "polar_factor",
    "sign",
    "spectral",
]
