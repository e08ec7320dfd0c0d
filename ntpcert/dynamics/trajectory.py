r"""Trajectories of an optimiser on the CE of an instance, measured against their limits.

The paper's Theorem 2 (GD, small constant step): :math:`\mathrm{CE}(W_k)\to\mathcal H`,
:math:`\|W_k\|\to\infty`, :math:`W_k/\|W_k\|\to W^{mm}/\|W^{mm}\|` and :math:`P_F(W_k)\to W^*`.
:func:`run` advances an optimiser with fused in-place steps and logs, on a geometric grid of steps
(:func:`geometric_grid`), the numbers below (:func:`metrics`); :class:`Limits` holds what they are
compared with.

Metrics of an iterate W (all Frobenius unless named; "nan" where undefined, e.g. at W = 0 or
when the instance is not separable so that :math:`W^{mm}` does not exist):

* ``loss`` :math:`\mathrm{CE}(W)`; ``excess_loss`` :math:`\mathrm{CE}(W)-\mathcal H` (sum of KL terms);
  ``log_excess_loss`` its logarithm, computed in the log domain (finite after the excess underflows);
* ``max_out_logprob`` :math:`\max_j\max_{v\notin S_j}\log\mathbb S_v(Wh_j)` (about minus the smallest
  logit margin) and ``direction_error_bound`` (:func:`ntpcert.instance.ce.direction_error_bound`), from
  which :func:`run` derives its ``float64_trusted`` column;
  ``grad_norm`` :math:`\|\nabla\mathrm{CE}(W)\|`; ``norm`` :math:`\|W\|`;
* ``cos_mm`` :math:`\cos(W, W^{mm})` and ``cos_mm_centered`` :math:`\cos(W-W^*, W^{mm})`, with
  :math:`\cos(A,B) = \langle A,B\rangle/(\|A\|\|B\|)`;
* ``dist_F`` :math:`\|P_F(W)-W^*\|` and ``rel_dist_F`` the same divided by :math:`\|W^*\|`;
* ``perp_fraction`` :math:`\|P_{F^\perp}(W)\|/\|W\|`. Since :math:`W^{mm}\in F^\perp`,
  :math:`\cos(W, W^{mm}) = \texttt{perp\_fraction}\cdot\cos(P_{F^\perp}W, W^{mm})`: it is a ceiling on
  ``cos_mm`` set by the size of the F-part (about :math:`\|W^*\|`) against the norm reached;
* ``normalized_margin`` :math:`\min_j(\min_{z\in S_j}w_z^\top h_j-\max_{v\notin S_j}w_v^\top h_j)/\|W\|`,
  the NTP margin of the normalised iterate (:mod:`ntpcert.dynamics.logits`; every in-support token, no
  anchor: where (6a) holds it is :math:`\min A_{mar}\mathrm{vec}(W)/\|W\|`; it tends to
  :math:`1/\|W^{mm}\|` under Theorem 2);
* ``margin_ratio`` :math:`\gamma(P_{F^\perp}W)\,\|W^{mm}\|` with
  :math:`\gamma(X) = \min A_{mar}\mathrm{vec}(X)/\|X\|`: the normalised margin of the part of W that
  satisfies (6a), relative to the largest possible. It is at most 1, with equality exactly when
  :math:`P_{F^\perp}W` points along :math:`W^{mm}` (since :math:`X/\min A_{mar}\mathrm{vec}(X)` is then
  feasible for the NTP-SVM);
* ``eq_violation`` :math:`\|A_{eq}\mathrm{vec}(W)\|_\infty/\|W\|`, the largest violation of (6a) by
  the normalised iterate (tends to 0);
* for every other norm N of :attr:`Limits.norm_svms` (max, spectral, nuclear, l1):
  ``cos_N`` :math:`\cos(W, W^{N})`, ``cos_N_centered`` :math:`\cos(W-W^*, W^N)` and
  ``margin_ratio_N`` :math:`\min A_{mar}\mathrm{vec}(P_{F^\perp}W)\cdot\|W^N\|_N/\|P_{F^\perp}W\|_N`,
  the same ratio in norm N: at most 1 (up to the solver's certified gap), 1 exactly when
  :math:`P_{F^\perp}W` is a max-margin direction in N, and independent of which minimiser the solver
  returned when the N-SVM has several.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ntpcert.util.summary import short_str
from ntpcert.errors import InfeasibleError, InputError, SolverError
from ntpcert.instance import NTPInstance, ce
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.dynamics.logits import ntp_margin
from ntpcert.dynamics.optimizers import MAX_STEPS, CEKernel, Optimizer
from ntpcert.pipeline.float_witness import float_compatibility
from ntpcert.rows.subspace import Subspace, least_squares_fit
from ntpcert.solve.svm import DEFAULT_SOLVER, SVMSolution, solve_separable, solve_svm
from ntpcert.util.numbers import cosine
from ntpcert.util.progress import progress_bar
from ntpcert.solve.norms import NORMS, NormSVMSolution, matrix_norm, solve_norm_svm
from ntpcert.util.validate import check_int

#: Default number of logged steps per decade of the geometric grid.
POINTS_PER_DECADE = 20

#: Largest number of logged steps of a geometric grid (about ``per_decade · log10(steps)``), so the
#: metric columns stay small. Raise it with ``geometric_grid(..., max_points=N)``.
MAX_GRID_POINTS = 100_000

#: Base metric names, in the order of CSV columns (per-norm columns follow).
BASE_METRICS = (
    "loss",
    "excess_loss",
    "grad_norm",
    "norm",
    "cos_mm",
    "cos_mm_centered",
    "dist_F",
    "rel_dist_F",
    "perp_fraction",
    "normalized_margin",
    "margin_ratio",
    "eq_violation",
    "log_excess_loss",
    "max_out_logprob",
    "direction_error_bound",
)

#: Columns :func:`run` adds after the metrics: ``float64_trusted`` (1.0 or 0.0, see
#: :func:`ntpcert.instance.ce.float64_trusted`) and ``orth_error`` (the orthogonalisation error of
#: ``spectral`` / ``muon``, :meth:`Optimizer.orthogonalization_error`; NaN for the others).
RUN_COLUMNS = ("float64_trusted", "orth_error")

#: Norms other than Frobenius whose NTP-SVM can be compared with.
OTHER_NORMS = tuple(n for n in NORMS if n != "fro")


def geometric_grid(steps: int, per_decade: int = POINTS_PER_DECADE, *, max_steps: int | None = MAX_STEPS,
                   max_points: int | None = MAX_GRID_POINTS) -> np.ndarray:
    """Sorted distinct step indices in [0, steps]: 0, every step up to ``per_decade``, then about
    ``per_decade`` per decade, always ending at ``steps``. Shape (n,), int64.

    ``steps`` above ``max_steps`` and grids of more than ``max_points`` points are refused (None: no
    limit) before anything is allocated."""
    check_int("steps", steps, minimum=0)
    if max_steps is not None and steps > max_steps:
        raise InputError(f"steps: value {steps!r} is above the limit of {max_steps:,} steps")
    check_int("per_decade", per_decade, minimum=1)
    if steps == 0:
        return np.zeros(1, dtype=np.int64)
    n = max(2, int(math.ceil(per_decade * math.log10(steps))) + 1)
    if max_points is not None and n > max_points:
        raise InputError(f"per_decade: value {per_decade!r} logs about {n:,} steps, more than the limit of "
                         f"{max_points:,}")
    pts = np.unique(np.round(np.logspace(0.0, math.log10(steps), n)).astype(np.int64))
    return np.unique(np.concatenate([[0], pts, [steps]])).astype(np.int64)


def _separable_incompatible_limit(instance: NTPInstance, W_ls: np.ndarray) -> tuple[np.ndarray, str]:
    r"""The finite part of GD's limit on data that are separable (or have no margin rows) but not compatible:
    W_fin of the split with N empty, the minimiser on F of the loss over the supports alone
    (:func:`ntpcert.solve.finite_limit.finite_limit`; ``docs/math.md``, the split), which the least-squares
    point of (4) is not: ``(W_fin, note)``, or the least-squares point with the reason where W_fin is not
    solved."""
    from ntpcert.solve.finite_limit import finite_limit

    try:
        lim = finite_limit(instance, np.zeros((0, 2), dtype=np.int64))
    except SolverError as e:
        return W_ls, (f"the least-squares point of (4), not the limit: (4) has no solution, and W_fin (the minimiser of "
                      f"the in-support loss on F) was not solved ({e})")
    return lim.W_fin, ("W_fin, the minimiser of the in-support loss on F: the data are separable but (4) has no "
                       "solution, so the limit's finite part is W_fin, not the least-squares point")


def _split_first(system: KeslerSystem) -> Any:
    r"""Where d < m (:math:`m \ge` ``SPLIT_SCREEN_MIN_RATIO``·d, within ``SPLIT_SCREEN_MAX_CELLS``, as
    :func:`ntpcert.pipeline.decide.split_separability`), the split decides (6) before the NTP-SVM is solved:
    the structured solver then searches no Farkas ray on separable data (on the 478-context model instance
    those searches took 25 s of a 35 s solve) and is not started on data that are not separable. The
    :class:`~ntpcert.solve.split.Split` when it is found and its point, with N empty, passes the float
    check of (6); else None (the NTP-SVM decides, as before)."""
    from ntpcert.pipeline.decide import SPLIT_SCREEN_MAX_CELLS, SPLIT_SCREEN_MIN_RATIO
    from ntpcert.solve.point_check import check_point
    from ntpcert.solve.split import nonseparable_split
    from ntpcert.solve.structured.classes import TokenClasses

    inst = system.instance
    if inst.m < SPLIT_SCREEN_MIN_RATIO * inst.d:
        return None
    if TokenClasses.build(inst).count * inst.m * inst.d > SPLIT_SCREEN_MAX_CELLS:
        return None
    split = nonseparable_split(inst)
    if not split.ok:
        return None
    if split.n_nonseparable == 0 and not check_point(system, split.D).ok:
        return None
    return split


@dataclass(frozen=True, eq=False)
class Limits:
    r"""What a trajectory is compared with.

    Attributes
    ----------
    instance : NTPInstance
    system : KeslerSystem
    subspace : Subspace
        F of (5), for :math:`P_F`.
    entropy : float
        :math:`\mathcal H`.
    W_star : ndarray of shape (V, d)
        The minimum-norm solution of (4) (W* when compatible).
    compatible : bool or None
    svm : SVMSolution or None
        The NTP-SVM; None when the data are not separable (then ``W_mm`` is None).
    norm_svms : dict of str to NormSVMSolution
        NTP-SVMs in other norms, by name.
    split : NonseparableLimits or None
        On data that are not separable (the NTP-SVM is infeasible), the split and the limits of
        :mod:`ntpcert.pipeline.nonseparable`. When the split was found, the limits the iterates are
        measured against are the general ones: ``system`` and ``subspace`` are those of the extended
        pattern :math:`S_j\cup N_j` (so :math:`P_F` is :math:`P_{F_N}` and the margin rows are P's),
        ``W_star`` is :math:`W_{fin}` and ``svm`` is the NTP-SVM of the extended pattern, W^mm_P; with
        N = ∅ these are F, W* and W^mm. None on separable data (nothing changes there).
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    instance: NTPInstance
    system: KeslerSystem
    subspace: Subspace
    entropy: float
    W_star: np.ndarray
    compatible: bool | None
    svm: SVMSolution | None
    norm_svms: dict[str, NormSVMSolution] = field(default_factory=dict)
    svm_error: str | None = None
    split: Any = None
    #: The NTP-SVM's infeasibility was shown by a Farkas ray checked in exact arithmetic (the solver's own),
    #: so (6) fails even where the split is undetermined.
    refuted: bool = False
    #: What ``W_star`` is when it is not W* of (4) on separable data: there (4) has no solution, and the
    #: finite part of the limit is W_fin (the split with N empty), not the least-squares point; "" otherwise.
    w_star_note: str = ""

    @property
    def W_mm(self) -> np.ndarray | None:
        """:math:`W^{mm}` (W^mm_P on non-separable data with a split), shape (V, d), or None."""
        return None if self.svm is None else self.svm.W

    @property
    def separable(self) -> bool | None:
        """Whether (6) holds by these limits: the NTP-SVM was solved on the instance itself (True), or the
        split found non-separable pairs, or the solver's Farkas ray was checked exactly (False); None when
        the split is undetermined and no exact ray was found."""
        if self.split is None:
            return self.svm is not None
        N = self.split.nonseparable
        if N is None:
            return False if self.refuted else None
        return len(N) == 0

    @classmethod
    def compute(
        cls,
        instance: NTPInstance,
        *,
        norms: Iterable[str] = (),
        solver: str = DEFAULT_SOLVER,
        norm_solver: str = "auto",
        canonical: bool = False,
        progress: bool = False,
    ) -> "Limits":
        """Compute F, W*, W^mm (``solver``) and the NTP-SVM in each of ``norms`` (``norm_solver``, see
        :func:`ntpcert.solve.norms.solve_norm_svm`; ``progress`` writes each solve's progress and
        checked gap on stderr).

        On a non-separable instance the limits are those of the split (``split``, see the class doc): W_fin,
        F_N, W^mm_P and the other norms' SVMs of the extended pattern; ``svm=None`` and no other-norm
        solutions only when the split is undetermined or P is empty.
        """
        norms = tuple(norms)
        for n in norms:
            if n not in OTHER_NORMS:
                raise InputError(f"norms: unknown value {n!r} (expected some of {', '.join(OTHER_NORMS)})")
        system = KeslerSystem.build(instance)
        sub = Subspace.build(system)
        fit, comp = least_squares_fit(sub), float_compatibility(sub)
        svm: SVMSolution | None = None
        err: str | None = None
        others: dict[str, NormSVMSolution] = {}
        if system.n_margin:
            pre = _split_first(system)
            try:
                if pre is not None and len(pre.nonseparable):
                    raise InfeasibleError(f"not separable: the split finds {len(pre.nonseparable):,} "
                                          "non-separable pairs")
                svm = solve_separable(system, solver=solver) if pre is not None else solve_svm(system, solver=solver)
            except InfeasibleError as e:
                err = str(e)
                refuted = bool(getattr(getattr(e, "certificate", None), "exact", False))
                general = cls._nonseparable(instance, system, sub, fit.W_star, comp.holds, err, solver,
                                            None if pre is None else pre.nonseparable, refuted=refuted)
                if general.svm is not None:  # the other norms' SVMs of the separable pairs, on the extended pattern
                    for n in norms:
                        general.norm_svms[n] = solve_norm_svm(general.system, n, solver=norm_solver,
                                                              canonical=canonical, subspace=general.subspace,
                                                              progress=progress)
                return general
            if svm is not None:
                for n in norms:
                    others[n] = solve_norm_svm(system, n, solver=norm_solver, canonical=canonical, subspace=sub,
                                               progress=progress)
        else:
            err = "no margin constraints (every k_j = V): W^mm is not defined"
        W_star, note = fit.W_star, ""
        if comp.holds is False and (svm is not None or not system.n_margin):
            W_star, note = _separable_incompatible_limit(instance, W_star)
        return cls(instance, system, sub, instance.entropy(), W_star, comp.holds, svm, others, err, w_star_note=note)

    @classmethod
    def _nonseparable(cls, instance: NTPInstance, system: KeslerSystem, sub: Subspace, W_star: np.ndarray,
                      compatible: bool | None, err: str, solver: str, nonseparable: Any = None,
                      refuted: bool = False) -> "Limits":
        """The general limits (``split``) of an instance whose NTP-SVM is infeasible (N given, or found
        here); with an undetermined split, the old limits (no W^mm) carrying the split's reason."""
        from ntpcert.pipeline.nonseparable import nonseparable_limits

        gen = nonseparable_limits(instance, separable=False, solver=solver, nonseparable=nonseparable)
        lim = gen.limit
        if lim is None:
            why = f"{err}; W_fin, W^mm_P: {gen.error or gen.split_note}"
            return cls(instance, system, sub, instance.entropy(), W_star, compatible, None, {}, why, gen, refuted)
        return cls(instance, lim.system, lim.subspace, instance.entropy(), lim.W_fin, compatible, gen.svm, {},
                   gen.svm_error, gen, refuted)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "entropy": self.entropy,
            "compatible": self.compatible,
            "W_star_norm": float(np.linalg.norm(self.W_star)),
            "dim_F": self.subspace.dim,
            "W_mm_norm": None if self.svm is None else self.svm.norm,
            "svm": None if self.svm is None else self.svm.to_json(),
            "svm_error": self.svm_error,
            "norm_svms": {k: v.to_json() for k, v in self.norm_svms.items()},
        }
        if self.w_star_note:
            out["W_star_is"] = self.w_star_note
        if self.split is not None:
            out["limit"] = self.split.to_json()
            out["W_star_is"] = "W_fin" if self.split.limit is not None else "least-squares point of (4)"
            out["dim_F_is"] = "dim F_N" if self.split.limit is not None else "dim F"
            out["svm_is"] = "W^mm_P (the NTP-SVM of the extended pattern S_j u N_j)"
        return out


def metric_names(limits: Limits) -> tuple[str, ...]:
    """Column names for ``limits``: :data:`BASE_METRICS`, then per other norm ``cos_N``,
    ``cos_N_centered``, ``margin_ratio_N``."""
    names = list(BASE_METRICS)
    for n in limits.norm_svms:
        names += [f"cos_{n}", f"cos_{n}_centered", f"margin_ratio_{n}"]
    return tuple(names)


def metrics(W: np.ndarray, limits: Limits, *, grad: np.ndarray | None = None) -> dict[str, float]:
    """All metrics of the module doc at ``W`` (shape (V, d)); ``grad`` saves recomputing the gradient."""
    inst = limits.instance
    W = np.asarray(W, dtype=np.float64)
    nan = float("nan")
    g = inst.gradient(W) if grad is None else grad
    nrm = float(np.linalg.norm(W))
    out: dict[str, float] = {
        "loss": inst.loss(W),
        "excess_loss": inst.excess_loss(W),
        "grad_norm": float(np.linalg.norm(g)),
        "norm": nrm,
    }
    Ws = limits.W_star
    Wmm = limits.W_mm
    out["cos_mm"] = nan if Wmm is None else cosine(W, Wmm)
    out["cos_mm_centered"] = nan if Wmm is None else cosine(W - Ws, Wmm)
    PF = limits.subspace.project(W)
    Wp = W - PF
    dist = float(np.linalg.norm(PF - Ws))
    ws_norm = float(np.linalg.norm(Ws))
    pnorm = float(np.linalg.norm(Wp))
    out["dist_F"] = dist
    out["rel_dist_F"] = dist / ws_norm if ws_norm > 0 else nan
    out["perp_fraction"] = pnorm / nrm if nrm > 0 else nan
    eq = limits.system.apply_eq(W)
    out["normalized_margin"] = ntp_margin(inst, W) / nrm if nrm > 0 else nan
    pmar = limits.system.apply_margin(Wp)
    pmin = float(pmar.min()) if pmar.size else nan
    out["margin_ratio"] = nan if (Wmm is None or pnorm == 0) else pmin * limits.svm.norm / pnorm
    out["eq_violation"] = (float(np.abs(eq).max()) if eq.size else 0.0) / nrm if nrm > 0 else nan
    lay = inst.ce_layout
    terms = ce.context_terms(lay, W)
    out["log_excess_loss"] = inst.log_excess_loss(W)
    out["max_out_logprob"] = float(np.max(terms.max_out_logprob))
    out["direction_error_bound"] = ce.direction_error_bound(lay, W, inst.gradient_direction(W)[1])
    for n, sol in limits.norm_svms.items():
        out[f"cos_{n}"] = cosine(W, sol.W)
        out[f"cos_{n}_centered"] = cosine(W - Ws, sol.W)
        wn = matrix_norm(Wp, n)
        out[f"margin_ratio_{n}"] = pmin * sol.value / wn if wn > 0 else nan
    return out


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Metrics of one optimiser run, logged at ``steps``.

    Attributes
    ----------
    optimizer : str
    hyperparams : dict
        Everything needed to rerun: the optimiser's constants, schedule, step size, steps, start.
    steps : ndarray of shape (n,)
        Logged step indices (0 is the start).
    metrics : dict of str to ndarray of shape (n,)
        One array per metric name (see the module doc).
    W_final : ndarray of shape (V, d)
    snapshots : ndarray of shape (s, V, d) or None
        The iterates at ``snapshot_steps`` when asked for.
    seconds : float
        Wall time of the optimiser steps alone (metrics excluded).
    instance_name, fingerprint : str
    snapshot_steps : ndarray of shape (s,) or None
        The steps of ``snapshots``: every logged step (``run(..., snapshots=True)``) or the ones
        asked for (``run(..., snapshots=[...])``, e.g. :func:`decade_steps`).
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    optimizer: str
    hyperparams: dict[str, Any]
    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    W_final: np.ndarray
    snapshots: np.ndarray | None
    seconds: float
    instance_name: str
    fingerprint: str
    snapshot_steps: np.ndarray | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        return self.metrics[name]

    @property
    def steps_per_second(self) -> float:
        n = int(self.steps[-1])
        return n / self.seconds if self.seconds > 0 else float("inf")

    def snapshot(self, step: int) -> np.ndarray:
        """The iterate at ``step``, shape (V, d).

        Raises InputError when no snapshot was kept at that step."""
        if self.snapshots is not None and self.snapshot_steps is not None:
            hit = np.flatnonzero(self.snapshot_steps == step)
            if hit.size:
                return self.snapshots[int(hit[0])]
        raise InputError(f"step: no snapshot at step {step!r} (run with snapshots=[...] naming it)")

    @property
    def untrusted_from(self) -> int | None:
        """The first logged step at which float64 stopped being trustworthy (the ``float64_trusted``
        column, :func:`ntpcert.instance.ce.float64_trusted`), or None."""
        col = self.metrics.get("float64_trusted")
        if col is None:
            return None
        bad = np.flatnonzero(col == 0.0)
        return int(self.steps[bad[0]]) if bad.size else None

    def trust_warning(self) -> str | None:
        """One line for stderr when some logged step is past float64's trustworthy range, else None."""
        step = self.untrusted_from
        if step is None:
            return None
        i = int(np.flatnonzero(self.steps == step)[0])
        return (f"warning: {self.optimizer}: float64 is not trustworthy from step {step:,} on (largest "
                f"out-of-support log-probability {float(self.metrics['max_out_logprob'][i]):.1f}, direction error "
                f"bound {float(self.metrics['direction_error_bound'][i]):.1e}); later metrics are unreliable")

    def final(self) -> dict[str, float]:
        """The metrics at the last logged step."""
        return {k: float(v[-1]) for k, v in self.metrics.items()}

    def to_csv(self) -> str:
        """CSV text: a ``step`` column then one column per metric, full precision."""
        names = list(self.metrics)
        lines = [",".join(["step", *names])]
        for i, s in enumerate(self.steps):
            lines.append(",".join([str(int(s)), *(repr(float(self.metrics[n][i])) for n in names)]))
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        def clean(x: float) -> float | None:
            return None if not math.isfinite(x) else x

        return {
            "optimizer": self.optimizer,
            "hyperparams": self.hyperparams,
            "instance": self.instance_name,
            "fingerprint": self.fingerprint,
            "seconds": self.seconds,
            "steps_per_second": self.steps_per_second,
            "steps": [int(s) for s in self.steps],
            "metrics": {k: [clean(float(x)) for x in v] for k, v in self.metrics.items()},
            "final": {k: clean(v) for k, v in self.final().items()},
            "float64_trusted": self.untrusted_from is None,
            "untrusted_from": self.untrusted_from,
        }


def run(
    instance: NTPInstance,
    optimizer: Optimizer,
    steps: int,
    *,
    limits: Limits | None = None,
    W0: np.ndarray | None = None,
    grid: Sequence[int] | None = None,
    per_decade: int = POINTS_PER_DECADE,
    snapshots: bool | Sequence[int] = False,
    progress: bool = False,
    max_steps: int | None = MAX_STEPS,
) -> Trajectory:
    """Run ``optimizer`` for ``steps`` steps from ``W0`` (default zeros) and log the metrics.

    Parameters
    ----------
    instance : NTPInstance
    optimizer : Optimizer
        Instance-dependent defaults (GD's 1/(2L)) are filled in by :meth:`Optimizer.resolve`.
    steps : int
    limits : Limits, optional
        Computed with :meth:`Limits.compute` (no other norms) when not given.
    W0 : ndarray of shape (V, d), optional
    grid : sequence of int, optional
        Steps at which to log (``steps`` is always added); default :func:`geometric_grid`
        (``steps``, ``per_decade``).
    snapshots : bool or sequence of int
        True: keep the iterate at every logged step. A sequence of steps in [0, ``steps``]: keep
        the iterate at those steps only (they are added to the logged grid), e.g.
        :func:`decade_steps` for the checks of :mod:`ntpcert.dynamics.checks`.
    progress : bool
        A progress bar on stderr.
    max_steps : int or None
        Refuse more than this many steps (default :data:`MAX_STEPS`; None: no limit).

    Raises
    ------
    SolverError
        When the iterate stops being finite, or its norm overflows (the step size is too large).
    """
    if not isinstance(optimizer, Optimizer):
        raise InputError(f"optimizer: expected an ntpcert.dynamics.optimizers.Optimizer, got {type(optimizer).__name__}")
    if grid is None:
        pts = geometric_grid(steps, per_decade, max_steps=max_steps)
    else:
        if max_steps is not None and isinstance(steps, (int, np.integer)) and steps > max_steps:
            raise InputError(f"steps: value {steps!r} is above the limit of {max_steps:,} steps")
        pts = _check_grid(grid, steps)
    keep: np.ndarray | None = None
    if not isinstance(snapshots, (bool, np.bool_)):
        keep = _check_grid(snapshots, int(pts[-1]), field="snapshots", add_end=False)
        pts = np.union1d(pts, keep).astype(np.int64)
    elif snapshots:
        keep = pts
    opt = optimizer.resolve(instance)
    lim = limits if limits is not None else Limits.compute(instance)
    if lim.instance is not instance and lim.instance.fingerprint() != instance.fingerprint():
        raise InputError("limits: computed for a different instance")
    stepper = Stepper(instance, opt, W0)
    W = stepper.W
    names = metric_names(lim)
    cols = {n: np.empty(pts.size) for n in (*names, *RUN_COLUMNS)}
    snaps = None if keep is None else np.empty((keep.size, *W.shape))
    slot = {int(k): i for i, k in enumerate(keep)} if keep is not None else {}
    bar = progress_bar(bool(progress), total=int(pts[-1]), desc=opt.name, unit="step")
    seconds = 0.0
    try:
        for i, target in enumerate(pts):
            seconds += stepper.advance(int(target) - stepper.t)
            row = metrics(W, lim)
            for n in names:
                cols[n][i] = row[n]
            cols["float64_trusted"][i] = float(ce.float64_trusted(row["max_out_logprob"], row["direction_error_bound"],
                                                                  scale_free=opt.scale_free))
            cols["orth_error"][i] = stepper.orthogonalization_error()
            if snaps is not None and int(target) in slot:
                snaps[slot[int(target)]] = W
            if bar is not None:
                bar.update(int(target) - bar.n)
    finally:
        if bar is not None:
            bar.close()
    hp = opt.hyperparams()
    hp.update({"steps": int(pts[-1]), "start": "zeros" if W0 is None else "given"})
    return Trajectory(opt.name, hp, pts, cols, W.copy(), snaps, seconds, instance.name, instance.fingerprint(),
                      keep)


class Stepper:
    """The fused in-place loop behind :func:`run`: owns the iterate, the optimiser's buffers and the
    gradient workspace, and advances them without allocating (for every optimiser but the spectral ones).

    Parameters
    ----------
    instance : NTPInstance
    optimizer : Optimizer
        Resolved here (GD's default step).
    W0 : ndarray of shape (V, d), optional
        Start; default zeros.
    kernel : optional
        The loss's gradient kernel, with the ``gradient_into`` and ``direction_into`` of
        :class:`~ntpcert.instance.ce.CEKernel` (default: the CE of ``instance``); e.g.
        :class:`ntpcert.instance.losses.AdjustedCE` for the logit-adjusted CE.

    Attributes
    ----------
    W : ndarray of shape (V, d)
        The current iterate (updated in place).
    t : int
        Steps taken.
    """

    def __init__(self, instance: NTPInstance, optimizer: Optimizer, W0: np.ndarray | None = None,
                 kernel: Any = None) -> None:
        self.optimizer = optimizer.resolve(instance)
        self.W = np.zeros((instance.V, instance.d)) if W0 is None else np.array(instance.check_decoder(W0), copy=True)
        self._bufs = self.optimizer.init(self.W).buffers
        self._kernel = CEKernel(instance) if kernel is None else kernel
        self._G = np.empty_like(self.W)
        self._log_scale = -math.inf  # log-scale of the buffers of a scale-free optimiser
        self.t = 0

    def orthogonalization_error(self) -> float:
        """:meth:`Optimizer.orthogonalization_error` of the next step from the current iterate and buffers
        (NaN for optimisers that do not orthogonalise)."""
        if not hasattr(self.optimizer, "_orthogonalize") or type(self.optimizer)._orth_input is Optimizer._orth_input:
            return float("nan")
        G = np.empty_like(self.W)
        with np.errstate(under="ignore"):
            A = self._kernel.direction_into(self.W, G)
        bufs = self._bufs
        if bufs and A != -math.inf and self._log_scale != -math.inf and A != self._log_scale:
            f = math.exp(min(self._log_scale - A, 700.0))
            bufs = tuple(b * f for b in bufs)
        return self.optimizer.orthogonalization_error(G, bufs)

    def advance(self, n: int) -> float:
        """Take ``n`` steps; return their wall time in seconds.

        Raises SolverError when the iterate stops being finite."""
        opt, W, G, bufs, kernel = self.optimizer, self.W, self._G, self._bufs, self._kernel
        grad_into, update, sched = kernel.gradient_into, opt.kernel, opt.schedule
        t = self.t
        t0 = time.perf_counter()
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # finiteness is checked below
            if opt.scale_free:
                # the rescaled direction D_t = e^{-A_t} G_t; buffers (linear in the gradients) are kept in
                # units of e^{A_t}, so the update is the one of the exact gradients at any margin
                direction_into = kernel.direction_into
                A_prev = self._log_scale
                for t in range(self.t + 1, self.t + n + 1):
                    A = direction_into(W, G)
                    if A != A_prev and A != -math.inf:
                        if bufs and A_prev != -math.inf:
                            f = math.exp(min(A_prev - A, 700.0))
                            for b in bufs:
                                b *= f
                        A_prev = A
                    update(W, G, bufs, t, sched(t))
                self._log_scale = A_prev
            else:
                for t in range(self.t + 1, self.t + n + 1):
                    grad_into(W, G)
                    update(W, G, bufs, t, sched(t))
        seconds = time.perf_counter() - t0
        self.t = t
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(np.all(np.isfinite(W))) and math.isfinite(float(np.linalg.norm(W)))
        if not finite:
            raise SolverError(f"{opt.name}: the iterate (or its norm) is not finite at step {t} (lr = "
                              f"{opt.schedule.lr:g}); use a smaller step size")
        return seconds


def _check_grid(grid: Sequence[int], steps: int, *, field: str = "grid", add_end: bool = True) -> np.ndarray:
    g = np.asarray(grid)
    if g.ndim != 1 or g.size == 0 or g.dtype.kind not in "iu":
        raise InputError(f"{field}: expected a non-empty 1-d sequence of integers, got {grid!r}")
    g = np.unique(g.astype(np.int64))
    if g[0] < 0 or g[-1] > steps:
        raise InputError(f"{field}: values must lie in [0, steps = {steps}], got range [{g[0]}, {g[-1]}]")
    return np.unique(np.concatenate([g, [steps]] if add_end else [g])).astype(np.int64)


def decade_steps(steps: int) -> np.ndarray:
    r"""The steps :math:`1, 10, 100, \dots, 10^{\lfloor\log_{10}\text{steps}\rfloor}`, shape (n,), int64
    (empty for ``steps`` = 0): where :mod:`ntpcert.dynamics.checks` compares iterates decade by decade."""
    check_int("steps", steps, minimum=0)
    out = []
    k = 1
    while k <= steps:
        out.append(k)
        k *= 10
    return np.asarray(out, dtype=np.int64)


__all__ = ["BASE_METRICS", "RUN_COLUMNS", "MAX_GRID_POINTS", "MAX_STEPS", "Limits", "Stepper", "Trajectory", "decade_steps", "geometric_grid",
           "metric_names", "metrics", "run"]
