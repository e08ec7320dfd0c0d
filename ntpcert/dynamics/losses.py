r"""Limits, exact verdicts and trajectories of the losses people train with (``docs/math.md``, "Losses other
than plain CE"; our derivation).

* **Label smoothing** (:func:`smoothing_limits`, :func:`smoothing_verdict`): the smoothed loss is the CE of
  the smoothed instance :math:`\tilde p` (:func:`ntpcert.instance.losses.smoothed_instance`), in which every
  token is in every support: (6) holds vacuously, there is no :math:`W^{mm}`, and GD from any start converges
  to a finite point. Its limit is the unique minimiser :math:`W_\varepsilon` of :math:`\mathrm{CE}_\varepsilon`
  in F (the centred decoders with rows in the row space of H), plus the start's part in :math:`F^\perp`,
  which GD never moves. When the smoothed log-odds are reachable (the smoothed instance is compatible),
  :math:`W_\varepsilon = W^*_\varepsilon`, the minimum-norm solution of its (4), and the minimum is the
  entropy of :math:`\tilde p`; otherwise the minimum exceeds it. The exact verdict is that of
  :func:`~ntpcert.pipeline.exact_verdicts.exact_certify` on the smoothed instance (rational laws), with its
  certificate. The trajectory code runs on the smoothed instance unchanged.
* **Logit adjustment** with offsets c (:func:`adjustment_limits`, :func:`adjustment_verdict`,
  :func:`run_adjusted`): supports, (6), the split and :math:`W^{mm}` (:math:`W^{mm}_P`) are those of the
  instance; the finite part is the minimiser :math:`W_c` over :math:`F_E` of the reduced loss with offsets
  (:mod:`ntpcert.solve.offset_limit`), the minimum-norm solution :math:`W^*_c` of
  :math:`(w_z - w_{z'})^\top h_j = \log(p_{j,z}/p_{j,z'}) - (c_z - c_{z'})` when that system is solvable.
* **Temperature** and **weighted CE** (:func:`tempered_limits`, :func:`weighted_limits`): the limits of the
  equivalent instance (:math:`W^*_T = TW^*`, :math:`W^{mm}_T = TW^{mm}`).

Each ``*_limits`` returns :class:`LossLimits`, whose ``limits`` (a
:class:`~ntpcert.dynamics.trajectory.Limits` with ``W_star`` the finite part of the limit) is what
:func:`~ntpcert.dynamics.trajectory.run` and :func:`~ntpcert.dynamics.checks.convergence_checks` take.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import NTPInstance
from ntpcert.instance.losses import (MAX_TAU_DENOMINATOR, AdjustedCE, adjusted_targets_instance, as_fraction,
                                     constant_coordinate, prior_offsets, smoothed_instance, tempered_instance,
                                     weighted_instance)
from ntpcert.dynamics.optimizers import Optimizer
from ntpcert.dynamics.trajectory import Limits, Stepper, Trajectory, geometric_grid, POINTS_PER_DECADE
from ntpcert.rows.subspace import COMPAT_TOL, INCOMPAT_TOL
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.subspace import Subspace
from ntpcert.solve.offset_limit import OffsetLimit, offset_limit, reduced_value
from ntpcert.util.numbers import cosine
from ntpcert.util.summary import short_str
from ntpcert.verdict import Verdict

#: The metrics :func:`run_adjusted` logs, in column order.
ADJUSTED_METRICS = ("loss", "excess_loss", "grad_norm", "norm", "dist_F", "rel_dist_F", "cos_mm", "perp_fraction")


@dataclass(frozen=True, eq=False)
class LossLimits:
    r"""The limits of GD under one loss.

    Attributes
    ----------
    loss : str
        ``label_smoothing``, ``logit_adjustment``, ``temperature`` or ``weighted``.
    parameters : dict
        The loss's parameters, JSON-ready.
    instance : NTPInstance
        The instance the trajectory code runs on: the equivalent instance (smoothed, tempered, weighted), or
        the instance itself for logit adjustment (run it with :func:`run_adjusted`).
    limits : Limits
        ``W_star`` is the finite part of the limit (:math:`W_\varepsilon`, :math:`W_c`, :math:`TW^*`), ``svm``
        the NTP-SVM (None under label smoothing, where the limit is finite).
    compatible : bool or None
        Whether the loss's log-odds targets are reachable, by float64 (the exact verdict is separate).
    minimum : float
        The infimum of the loss: :math:`\mathrm{CE}_\varepsilon(W_\varepsilon)`; for logit adjustment the
        reduced loss at :math:`W_c`, which the loss approaches along the limit; for temperature and weighted CE
        the entropy of the equivalent instance where it is compatible and separable, else NaN.
    entropy : float
        The entropy of the targets (the infimum exactly when ``compatible`` and (6) hold).
    offsets : ndarray of shape (V,) or None
    solve : OffsetLimit or None
        The Newton solve of the finite part, where one was made (not when the least-squares point of a
        solvable system is it).
    scale : float
        The loss is ``scale`` times the CE of ``instance`` (weighted CE; 1 otherwise).
    """

    __str__ = short_str

    loss: str
    parameters: dict
    instance: NTPInstance
    limits: Limits
    compatible: bool | None
    minimum: float
    entropy: float
    offsets: np.ndarray | None = None
    solve: OffsetLimit | None = None
    scale: float = 1.0

    @property
    def W_limit(self) -> np.ndarray:
        """The finite part of the limit, shape (V, d)."""
        return self.limits.W_star

    @property
    def W_mm(self) -> np.ndarray | None:
        return self.limits.W_mm

    @property
    def finite(self) -> bool:
        """Whether GD's limit itself is finite (no margin direction: every token in every support)."""
        return self.limits.system.n_margin == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "loss": self.loss, "parameters": self.parameters, "instance": self.instance.name,
            "compatible": self.compatible, "minimum": self.minimum, "entropy": self.entropy,
            "minimum_minus_entropy": self.minimum - self.entropy, "finite_limit": self.finite,
            "W_limit_norm": float(np.linalg.norm(self.W_limit)),
            "W_mm_norm": None if self.W_mm is None else float(np.linalg.norm(self.W_mm)),
            "newton": None if self.solve is None else {"grad_norm": self.solve.grad_norm,
                                                       "converged": self.solve.converged,
                                                       "steps": self.solve.iterations},
            "scale": self.scale,
        }


def _shifted_fit(system: KeslerSystem, sub: Subspace, offsets: np.ndarray | None) -> tuple[np.ndarray, bool | None]:
    """The minimum-norm least-squares solution of (4) with the log-odds shifted by the offsets' differences,
    and whether it solves it (relative residual below COMPAT_TOL: True; above INCOMPAT_TOL: False; else None)."""
    b = system.log_odds()
    if offsets is not None and b.size:
        b = b - (offsets[system.eq_token] - offsets[system.eq_anchor])
    W = sub.min_norm_solution(b)
    if not b.size:
        return W, True
    rel = float(np.linalg.norm(system.apply_eq(W) - b)) / max(1.0, float(np.linalg.norm(b)))
    return W, (True if rel <= COMPAT_TOL else False if rel >= INCOMPAT_TOL else None)


def smoothing_limits(instance: NTPInstance, epsilon: Any, **limits_options: Any) -> LossLimits:
    r"""The limit of GD on the label-smoothed CE (module doc): :math:`W^*_\varepsilon` when the smoothed
    instance is compatible, else the Newton minimiser :math:`W_\varepsilon` in F."""
    sm = smoothed_instance(instance, epsilon)
    lim = Limits.compute(sm, **limits_options)
    W, comp = _shifted_fit(lim.system, lim.subspace, None)
    solve = None
    if comp is not True:
        solve = offset_limit(sm)
        W = solve.W
    lim = dataclasses.replace(lim, W_star=W, compatible=comp)
    return LossLimits("label_smoothing", {"epsilon": str(as_fraction("epsilon", epsilon))}, sm, lim, comp,
                      sm.loss(W), sm.entropy(), None, solve)


def adjustment_limits(instance: NTPInstance, offsets: Any = None, *, tau: Any = None, prior: Any = None,
                      **limits_options: Any) -> LossLimits:
    r"""The limits of GD on the logit-adjusted CE with ``offsets`` c, or :math:`c_v = \tau\log\rho_v`
    (``tau``, ``prior``; :func:`~ntpcert.instance.losses.prior_offsets`): :math:`W^{mm}` (or :math:`W^{mm}_P`)
    of the instance and the finite part :math:`W_c` (module doc)."""
    if (offsets is None) == (tau is None):
        raise InputError("offsets: give either offsets or tau (with an optional prior), not both or neither")
    c = prior_offsets(instance, float(as_fraction("tau", tau)), prior) if offsets is None else \
        AdjustedCE(instance, offsets).offsets
    lim = Limits.compute(instance, **limits_options)
    N: Any = ()
    if lim.split is not None and lim.split.limit is not None:
        N = lim.split.nonseparable
    if lim.split is None:
        W, comp = _shifted_fit(lim.system, lim.subspace, c)
    else:  # lim's rows are the extended pattern's: the shifted (4) is the instance's own
        system = KeslerSystem.build(instance)
        W, comp = _shifted_fit(system, Subspace.build(system), c)
    solve = None
    if lim.split is not None or comp is not True:
        solve = offset_limit(instance, c, N)
        W = solve.W
    lim = dataclasses.replace(lim, W_star=W, compatible=comp)
    ext = lim.system.instance.support_mask()
    params: dict[str, Any] = {"offsets": [float(x) for x in c]}
    if tau is not None:
        params["tau"] = str(as_fraction("tau", tau))
    return LossLimits("logit_adjustment", params, instance, lim, comp, reduced_value(instance, W, c, ext),
                      instance.entropy(), c, solve)


def tempered_limits(instance: NTPInstance, temperature: float, **limits_options: Any) -> LossLimits:
    r"""The limits of GD on :math:`\mathrm{CE}(Wh/T)`: those of the tempered instance (:math:`TW^*`,
    :math:`TW^{mm}`)."""
    inst = tempered_instance(instance, temperature)
    lim = Limits.compute(inst, **limits_options)
    return LossLimits("temperature", {"temperature": float(temperature)}, inst, lim, lim.compatible,
                      _entropy_if_reached(inst, lim), inst.entropy())


def weighted_limits(instance: NTPInstance, token_weights: Any = None, context_weights: Any = None,
                    **limits_options: Any) -> LossLimits:
    r"""The limits of GD on the weighted CE: those of the weighted instance (the loss is κ times its CE, so
    GD with step η on the loss is GD with step κη on it)."""
    inst, kappa = weighted_instance(instance, token_weights, context_weights)
    lim = Limits.compute(inst, **limits_options)
    params = {"token_weights": None if token_weights is None else [str(as_fraction("w", x)) for x in token_weights],
              "context_weights": None if context_weights is None else
              [str(as_fraction("w", x)) for x in context_weights]}
    return LossLimits("weighted", params, inst, lim, lim.compatible, _entropy_if_reached(inst, lim), inst.entropy(),
                      scale=float(kappa))


def _entropy_if_reached(inst: NTPInstance, lim: Limits) -> float:
    """The infimum of the equivalent instance's CE where the float limits show it is the entropy (compatible
    and separable); NaN otherwise (its W_fin and L* are :mod:`ntpcert.pipeline.nonseparable`'s)."""
    return inst.entropy() if (lim.compatible is True and lim.separable is True) else math.nan


# ---------------------------------------------------------------------------- exact verdicts
def smoothing_verdict(instance: NTPInstance, epsilon: Any, **certify_options: Any):
    r"""The exact verdicts on the label-smoothed instance, with their certificate
    (:func:`~ntpcert.pipeline.exact_verdicts.exact_certify` on
    :func:`~ntpcert.instance.losses.smoothed_instance`; ``certificate_out`` writes it). Its ``compatible`` says
    whether the infimum of the smoothed CE is the entropy of :math:`\tilde p`; (6) holds vacuously."""
    from ntpcert.pipeline.exact_verdicts import exact_certify

    return exact_certify(smoothed_instance(instance, epsilon), **certify_options)


@dataclass(frozen=True, eq=False)
class AdjustmentVerdict:
    r"""The exact verdict on the logit-adjusted targets :math:`c_v = \tau\log\rho_v`.

    Attributes
    ----------
    how : str
        ``absorbed`` (H has a constant coordinate, so the offsets are a decoder's: the verdict is that of the
        instance itself), ``rational`` (:math:`\tau = s/t`: the verdict of
        :func:`~ntpcert.instance.losses.adjusted_targets_instance`) or ``undetermined``.
    compatible : Verdict
        Whether the adjusted log-odds are reachable; (6) is the instance's own.
    report : ExactReport or None
        The exact report (and certificate) of the instance that decided, ``certified`` its instance.
    certified : NTPInstance or None
    """

    __str__ = short_str

    how: str
    compatible: Verdict
    report: Any = None
    certified: NTPInstance | None = None

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "compatible": self.compatible.to_json(),
                "certified_instance": None if self.certified is None else self.certified.name}


def adjustment_verdict(instance: NTPInstance, tau: Any, prior: Any = None, **certify_options: Any) -> AdjustmentVerdict:
    r"""Decide exactly whether :math:`\log(p_{j,z}/p_{j,z'}) - \tau\log(\rho_z/\rho_{z'})` is reachable.

    * H with a constant coordinate: the offsets are absorbed (:math:`Wh_j + c = (W + C)h_j`), the verdict is the
      instance's own, for any real τ;
    * τ a rational s/t with t at most :data:`~ntpcert.instance.losses.MAX_TAU_DENOMINATOR` (an int, a fraction
      string, or a float that is such a rational exactly, e.g. 0.5): t times the system is (4) of the rational
      instance :math:`q\propto p^t\rho^{-s}`, decided with the prime-factor machinery;
    * otherwise undetermined, saying what settles it.
    """
    from ntpcert.pipeline.exact_verdicts import exact_certify

    if constant_coordinate(instance) is not None:
        rep = exact_certify(instance, **certify_options)
        return AdjustmentVerdict("absorbed", rep.compatible, rep, instance)
    t = as_fraction("tau", tau)
    if t.denominator > MAX_TAU_DENOMINATOR:
        why = (f"tau = {tau!r} is the rational {t} with denominator {t.denominator} > {MAX_TAU_DENOMINATOR}, so the "
               "adjusted log-odds are no small-exponent rational log-ratios; give tau as a fraction string such as "
               "'7/10' (a float is the dyadic rational it is), or embeddings with a constant coordinate (offsets "
               "absorbed)")
        return AdjustmentVerdict("undetermined", Verdict.undetermined(why))
    q = adjusted_targets_instance(instance, t, prior)
    rep = exact_certify(q, **certify_options)
    return AdjustmentVerdict("rational", rep.compatible, rep, q)


# ---------------------------------------------------------------------------- trajectories
def adjusted_metrics(W: np.ndarray, loss: AdjustedCE, limits: LossLimits) -> dict[str, float]:
    """The :data:`ADJUSTED_METRICS` at W (shape (V, d)): the adjusted loss and its excess over the entropy,
    :math:`\\|\\nabla\\|`, :math:`\\|W\\|`, :math:`\\|P_FW - W_c\\|` (and relative), :math:`\\cos(W, W^{mm})`
    and :math:`\\|P_{F^\\perp}W\\|/\\|W\\|`."""
    nan = math.nan
    lim = limits.limits
    PF = lim.subspace.project(W)
    dist = float(np.linalg.norm(PF - lim.W_star))
    wn = float(np.linalg.norm(lim.W_star))
    nrm = float(np.linalg.norm(W))
    return {
        "loss": loss.loss(W), "excess_loss": loss.excess_loss(W), "grad_norm": float(np.linalg.norm(loss.gradient(W))),
        "norm": nrm, "dist_F": dist, "rel_dist_F": dist / wn if wn > 0 else nan,
        "cos_mm": nan if lim.W_mm is None else cosine(W, lim.W_mm),
        "perp_fraction": float(np.linalg.norm(W - PF)) / nrm if nrm > 0 else nan,
    }


def run_adjusted(limits: LossLimits, optimizer: Optimizer, steps: int, *, W0: np.ndarray | None = None,
                 per_decade: int = POINTS_PER_DECADE, snapshots: Sequence[int] = ()) -> Trajectory:
    """Run ``optimizer`` on the logit-adjusted CE of ``limits`` (from :func:`adjustment_limits`) with the fused
    loop of :class:`~ntpcert.dynamics.trajectory.Stepper` and :class:`~ntpcert.instance.losses.AdjustedCE` as its
    kernel; log :data:`ADJUSTED_METRICS` on the geometric grid and keep the iterates at ``snapshots`` (e.g.
    :func:`~ntpcert.dynamics.trajectory.decade_steps`, for :func:`~ntpcert.dynamics.checks.convergence_checks`
    with ``limits.limits`` and ``path=False``: the regularisation path is plain CE's)."""
    if limits.loss != "logit_adjustment":
        raise InputError(f"limits: run_adjusted needs logit-adjustment limits, got {limits.loss!r} (run the "
                         "equivalent instance with ntpcert.dynamics.trajectory.run)")
    inst = limits.instance
    loss = AdjustedCE(inst, limits.offsets)
    keep = np.unique(np.asarray(list(snapshots), dtype=np.int64))
    pts = np.union1d(geometric_grid(steps, per_decade), keep).astype(np.int64)
    stepper = Stepper(inst, optimizer, W0, kernel=loss)
    cols = {n: np.empty(pts.size) for n in ADJUSTED_METRICS}
    snaps = np.empty((keep.size, inst.V, inst.d))
    seconds = 0.0
    for i, target in enumerate(pts):
        seconds += stepper.advance(int(target) - stepper.t)
        row = adjusted_metrics(stepper.W, loss, limits)
        for n in ADJUSTED_METRICS:
            cols[n][i] = row[n]
        hit = np.flatnonzero(keep == target)
        if hit.size:
            snaps[int(hit[0])] = stepper.W
    hp = stepper.optimizer.hyperparams()
    hp.update({"steps": int(pts[-1]), "start": "zeros" if W0 is None else "given", "loss": "logit_adjustment",
               "offsets": [float(x) for x in limits.offsets]})
    return Trajectory(stepper.optimizer.name, hp, pts, cols, stepper.W.copy(), snaps if keep.size else None,
                      seconds, inst.name, inst.fingerprint(), keep if keep.size else None)


__all__ = ["ADJUSTED_METRICS", "AdjustmentVerdict", "LossLimits", "adjusted_metrics", "adjustment_limits",
           "adjustment_verdict", "run_adjusted", "smoothing_limits", "smoothing_verdict", "tempered_limits",
           "weighted_limits"]
