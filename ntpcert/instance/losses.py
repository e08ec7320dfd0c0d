r"""The losses people train with, as CE on an equivalent instance where there is one.

Notation of :mod:`ntpcert.instance.model`; derivations in ``docs/math.md``, "Losses other than plain CE"
(our derivation).

* **Label smoothing** with :math:`\varepsilon\in(0,1)`: the targets become
  :math:`\tilde p_j = (1-\varepsilon)p_j + \varepsilon/V`, and the smoothed loss
  :math:`\sum_j\pi_j\sum_v\tilde p_{j,v}(-\log\mathbb S_v(Wh_j))` *is* the CE of the instance with the same
  H and π and laws :math:`\tilde p` (:func:`smoothed_instance`), exactly: its probabilities are the exact
  rationals :math:`(1-\varepsilon)p_{j,v} + \varepsilon/V`. Every token is in every support.
* **Temperature** T > 0: :math:`\mathrm{CE}(Wh_j/T)` is the CE of the instance with embeddings
  :math:`h_j/T` (:func:`tempered_instance`; the division is rounded once to float64).
* **Weighted CE**: per-token class weights :math:`\beta_v > 0` give
  :math:`\sum_j\pi_j\sum_z\beta_zp_{j,z}(-\log\mathbb S_z) = \kappa\,\mathrm{CE}_{q,\pi'}` with
  :math:`B_j = \sum_z\beta_zp_{j,z}`, :math:`q_{j,z} = \beta_zp_{j,z}/B_j`,
  :math:`\pi'_j = \pi_jB_j/\kappa`, :math:`\kappa = \sum_j\pi_jB_j`; per-context weights replace π
  (:func:`weighted_instance`). Supports are unchanged.
* **Logit adjustment** (Menon et al., 2021) with fixed offsets :math:`c\in\mathbb R^V` (:math:`c_v =
  \tau\log\rho_v`, ρ the token prior): :math:`\mathrm{CE}_c(W) = \sum_j\pi_j\sum_zp_{j,z}
  (-\log\mathbb S_z(Wh_j + c))`. It is no CE of another instance in W, but it is the CE of the instance with
  embeddings :math:`(h_j, 1)` at the decoder :math:`(W, c)` (:class:`AdjustedCE`, which reuses the fused
  kernel of :mod:`ntpcert.instance.ce` that way). Its in-support log-odds targets shift by
  :math:`-(c_z - c_{z'})`; when :math:`c_v = (s/t)\log a_v` with rational :math:`a_v > 0` and integers s,
  t > 0, the shifted system is t⁻¹ times the system (4) of the instance with the rational laws
  :math:`q_{j,z}\propto p_{j,z}^t a_z^{-s}` (:func:`adjusted_targets_instance`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.ce import CEKernel
from ntpcert.instance.model import NTPInstance

#: The largest exponent t (the denominator of τ) of :func:`adjusted_targets_instance`: the laws
#: :math:`p^t` have t times the digits of p.
MAX_TAU_DENOMINATOR = 64


def as_fraction(field: str, value: Any) -> Fraction:
    """``value`` (int, Fraction, a string such as ``"1/10"`` or ``"0.1"``, or a float taken as the exact
    dyadic rational it is) as a Fraction; an :class:`InputError` naming ``field`` otherwise."""
    if isinstance(value, bool):
        raise InputError(f"{field}: expected a number, got {value!r}")
    try:
        if isinstance(value, (float, np.floating)):
            if not math.isfinite(float(value)):
                raise ValueError
            return Fraction(float(value))
        if isinstance(value, (int, np.integer)):
            return Fraction(int(value))
        if isinstance(value, (Fraction, str)):
            return Fraction(value)
    except (ValueError, ZeroDivisionError):
        pass
    raise InputError(f"{field}: expected a finite number or a fraction string such as '1/10', got {value!r}")


def _exact_rows(instance: NTPInstance) -> list[tuple[Fraction, ...]]:
    return [instance.exact_row(j) for j in range(instance.m)]


def _weights(instance: NTPInstance) -> list[str]:
    return [str(instance.exact_weight(j)) for j in range(instance.m)]


def _rebuild(instance: NTPInstance, rows: list[list[Fraction]], weights: list[str], name: str,
             embeddings: np.ndarray | None = None) -> NTPInstance:
    H = instance.embeddings if embeddings is None else embeddings
    return NTPInstance.from_probs(H, [[str(f) for f in row] for row in rows], weights,
                                  token_names=instance.token_names, context_names=instance.context_names, name=name)


def smoothed_instance(instance: NTPInstance, epsilon: Any) -> NTPInstance:
    r"""The instance whose CE is the label-smoothed CE of ``instance``: laws
    :math:`\tilde p_{j,v} = (1-\varepsilon)p_{j,v} + \varepsilon/V`, exact rationals, same H and π.

    Parameters
    ----------
    instance : NTPInstance
    epsilon : int, Fraction, str or float
        In (0, 1). A string such as ``"1/10"`` or ``"0.1"`` is that rational exactly; a float is the
        dyadic rational it is (0.1 as a float has a 2^55 denominator, which the exact stages then carry).
    """
    eps = as_fraction("epsilon", epsilon)
    if not 0 < eps < 1:
        raise InputError(f"epsilon: value {epsilon!r} is not in (0, 1)")
    V = instance.V
    rows = [[(1 - eps) * f + eps / V for f in row] for row in _exact_rows(instance)]
    return _rebuild(instance, rows, _weights(instance), f"{instance.name} (label smoothing {eps})")


def tempered_instance(instance: NTPInstance, temperature: float) -> NTPInstance:
    r"""The instance whose CE at W is :math:`\mathrm{CE}(Wh_j/T)` of ``instance``: embeddings
    :math:`h_j/T` (rounded to float64), the same laws and weights, exactly."""
    T = float(temperature)
    if not (math.isfinite(T) and T > 0):
        raise InputError(f"temperature: value {temperature!r} is not a finite positive number")
    H = instance.embeddings / T
    name = f"{instance.name} (temperature {T:g})"
    if instance.has_counts:
        return NTPInstance.from_counts(H, instance.counts, token_names=instance.token_names,
                                       context_names=instance.context_names, name=name)
    return _rebuild(instance, [list(r) for r in _exact_rows(instance)], _weights(instance), name, embeddings=H)



def _exact_weights(field: str, values: Any, n: int, size: str) -> list[Fraction]:
    """``values`` (n entries, numbers or fraction strings) as exact Fractions; all 1 when None."""
    if values is None:
        return [Fraction(1)] * n
    vals = list(np.asarray(values, dtype=object).ravel())
    if len(vals) != n:
        raise InputError(f"{field}: has {len(vals)} entries, expected {size} = {n}")
    return [as_fraction(f"{field}[{i}]", x) for i, x in enumerate(vals)]

def weighted_instance(instance: NTPInstance, token_weights: Any = None,
                      context_weights: Any = None) -> tuple[NTPInstance, Fraction]:
    r"""``(J, κ)`` with the weighted CE of ``instance`` equal to κ times the CE of J (module doc).

    Parameters
    ----------
    token_weights : sequence of shape (V,), optional
        :math:`\beta_v > 0` (numbers or fraction strings, exact as :func:`as_fraction`).
    context_weights : sequence of shape (m,), optional
        Multipliers :math:`\omega_j > 0` of the context terms (π becomes :math:`\propto\omega_j\pi_j`).
    """
    m, V = instance.m, instance.V
    beta = _exact_weights("token_weights", token_weights, V, "V")
    omega = _exact_weights("context_weights", context_weights, m, "m")
    for name, vals in (("token_weights", beta), ("context_weights", omega)):
        for i, b in enumerate(vals):
            if b <= 0:
                raise InputError(f"{name}[{i}]: value {b} is not positive")
    rows, mass = [], []
    for j, row in enumerate(_exact_rows(instance)):
        B = sum((beta[z] * f for z, f in enumerate(row)), Fraction(0))
        rows.append([beta[z] * f / B for z, f in enumerate(row)])
        mass.append(omega[j] * instance.exact_weight(j) * B)
    kappa = sum(mass, Fraction(0))
    inst = _rebuild(instance, rows, [str(w / kappa) for w in mass], f"{instance.name} (weighted CE)")
    return inst, kappa


def token_prior(instance: NTPInstance) -> tuple[Fraction, ...]:
    r"""The token marginal :math:`\rho_v = \sum_j\pi_jp_{j,v}` as exact rationals, shape (V,)."""
    V = instance.V
    rho = [Fraction(0)] * V
    for j, row in enumerate(_exact_rows(instance)):
        w = instance.exact_weight(j)
        for v, f in enumerate(row):
            rho[v] += w * f
    return tuple(rho)


def prior_offsets(instance: NTPInstance, tau: float, prior: Any = None) -> np.ndarray:
    r"""The logit-adjustment offsets :math:`c_v = \tau\log\rho_v`, shape (V,); ρ defaults to
    :func:`token_prior`. A token of prior 0 (in no support) is refused: its offset is infinite."""
    rho = _prior(instance, prior)
    return float(tau) * np.array([math.log(r.numerator) - math.log(r.denominator) for r in rho])


def _prior(instance: NTPInstance, prior: Any) -> tuple[Fraction, ...]:
    V = instance.V
    if prior is None:
        rho = token_prior(instance)
    else:
        pr = list(np.asarray(prior, dtype=object).ravel())
        if len(pr) != V:
            raise InputError(f"prior: has {len(pr)} entries, expected V = {V}")
        rho = tuple(as_fraction(f"prior[{v}]", x) for v, x in enumerate(pr))
    for v, r in enumerate(rho):
        if r <= 0:
            raise InputError(f"prior[{v}]: value {r} is not positive (token {v} is in no support: its offset "
                             "tau log prior would be infinite; drop the token or give the offsets)")
    return rho


def adjusted_targets_instance(instance: NTPInstance, tau: Fraction, prior: Any = None) -> NTPInstance:
    r"""For :math:`\tau = s/t` (t > 0): the instance with the same H and π and the rational laws
    :math:`q_{j,z}\propto p_{j,z}^t\rho_z^{-s}` on :math:`S_j` (0 elsewhere). Its system (4) is t times the
    logit-adjusted one: :math:`\log(q_{j,z}/q_{j,z'}) = t[\log(p_{j,z}/p_{j,z'}) - \tau\log(\rho_z/\rho_{z'})]`,
    so the adjusted targets are reachable iff this instance is compatible, with :math:`W^*_c = W^*_q/t`;
    its supports, and so (6) and :math:`W^{mm}`, are those of ``instance``.

    Raises InputError for t above :data:`MAX_TAU_DENOMINATOR`."""
    tau = as_fraction("tau", tau)
    s, t = tau.numerator, tau.denominator
    if t > MAX_TAU_DENOMINATOR:
        raise InputError(f"tau: denominator {t} of {tau} is above {MAX_TAU_DENOMINATOR} (the laws p^t grow "
                         "t-fold); give a rational with a smaller denominator")
    rho = _prior(instance, prior)
    rows = []
    for row in _exact_rows(instance):
        r = [f ** t / rho[z] ** s if f > 0 else Fraction(0) for z, f in enumerate(row)]
        tot = sum(r, Fraction(0))
        rows.append([x / tot for x in r])
    return _rebuild(instance, rows, _weights(instance), f"{instance.name} (logit adjustment tau = {tau})")


def constant_coordinate(instance: NTPInstance) -> int | None:
    """A column k of H that is the same nonzero number in every row (exactly), or None. With one, any offsets
    c are absorbed: :math:`Wh_j + c = (W + c\\,e_k^\\top/h_{1k})h_j`."""
    H = instance.embeddings
    for k in range(instance.d):
        col = H[:, k]
        if col[0] != 0.0 and np.all(col == col[0]):
            return k
    return None


class AdjustedCE:
    r"""The logit-adjusted CE :math:`\mathrm{CE}_c(W)` of an instance and its gradient
    :math:`\sum_j\pi_j(\mathbb S(Wh_j + c) - p_j)h_j^\top`, through the fused CE kernel of the instance with
    embeddings :math:`(h_j, 1)` at :math:`(W, c)` (module doc).

    Parameters
    ----------
    instance : NTPInstance
    offsets : array_like of shape (V,)
        Finite offsets c.

    The kernel methods :meth:`gradient_into` and :meth:`direction_into` have the signatures of
    :class:`~ntpcert.instance.ce.CEKernel`'s, so a :class:`~ntpcert.dynamics.trajectory.Stepper` runs any
    optimiser on :math:`\mathrm{CE}_c` with them.
    """

    def __init__(self, instance: NTPInstance, offsets: Any) -> None:
        c = np.asarray(offsets, dtype=np.float64)
        if c.shape != (instance.V,):
            raise InputError(f"offsets: expected shape (V,) = ({instance.V},), got {c.shape}")
        if not np.all(np.isfinite(c)):
            v = int(np.flatnonzero(~np.isfinite(c))[0])
            raise InputError(f"offsets[{v}]: value {c[v]!r} is not finite")
        self.instance = instance
        self.offsets = c
        H1 = np.hstack([instance.embeddings, np.ones((instance.m, 1))])
        if instance.has_counts:
            self.augmented = NTPInstance.from_counts(H1, instance.counts, name=f"{instance.name} (h, 1)")
        else:
            self.augmented = _rebuild(instance, [list(r) for r in _exact_rows(instance)], _weights(instance),
                                      f"{instance.name} (h, 1)", embeddings=H1)
        self._kernel = CEKernel(self.augmented)
        self._Wt = np.empty((instance.V, instance.d + 1))
        self._Wt[:, -1] = c
        self._Gt = np.empty_like(self._Wt)

    def _lift(self, W: np.ndarray) -> np.ndarray:
        self._Wt[:, :-1] = W
        return self._Wt

    def gradient_into(self, W: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write :math:`\\nabla\\mathrm{CE}_c(W)` (shape (V, d)) into ``out``; return it."""
        self._kernel.gradient_into(self._lift(W), self._Gt)
        out[...] = self._Gt[:, :-1]
        return out

    def direction_into(self, W: np.ndarray, out: np.ndarray) -> float:
        """The rescaled direction (:meth:`~ntpcert.instance.ce.CEKernel.direction_into`) into ``out``; its
        log-scale."""
        A = self._kernel.direction_into(self._lift(W), self._Gt)
        out[...] = self._Gt[:, :-1]
        return A

    def lifted(self, W: np.ndarray) -> np.ndarray:
        """:math:`(W, c)`, shape (V, d + 1) (a new array)."""
        return np.hstack([np.asarray(W, dtype=np.float64), self.offsets[:, None]])

    def loss(self, W: np.ndarray) -> float:
        r""":math:`\mathrm{CE}_c(W)`."""
        return self.augmented.loss(self.lifted(W))

    def excess_loss(self, W: np.ndarray) -> float:
        r""":math:`\mathrm{CE}_c(W) - \mathcal H` as a sum of KL terms."""
        return self.augmented.excess_loss(self.lifted(W))

    def gradient(self, W: np.ndarray) -> np.ndarray:
        r""":math:`\nabla\mathrm{CE}_c(W)`, shape (V, d)."""
        return self.gradient_into(np.asarray(W, dtype=np.float64), np.empty((self.instance.V, self.instance.d)))


__all__ = ["MAX_TAU_DENOMINATOR", "AdjustedCE", "adjusted_targets_instance", "as_fraction", "constant_coordinate",
           "prior_offsets", "smoothed_instance", "tempered_instance", "token_prior", "weighted_instance"]
