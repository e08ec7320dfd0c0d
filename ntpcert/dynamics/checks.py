r"""Convergence checks that follow the theory, decade by decade of steps.

Theorem 2 of the paper (GD with a small constant step, NTP-compatible and separable data) gives
:math:`P_F(W_k)\to W^*` and :math:`W_k/\|W_k\|\to W^{mm}/\|W^{mm}\|`, without rates. Cosines with
:math:`W^{mm}` climb slowly (the F-part of size :math:`\|W^*\|` caps them at a given norm), so a
cosine alone cannot tell a run that converges slowly from one that goes elsewhere. The checks below
use what the theory says more sharply. All are computed from iterates kept at the decade steps
:math:`k = 1, 10, 100, \dots` (:func:`ntpcert.dynamics.trajectory.decade_steps`); all norms are
Frobenius unless named.

* **F-convergence**: :math:`\|P_F W_k - W^*\|/\|W^*\|` at each decade step (tends to 0).
* **The decade increment** (GD): with an exponential tail the component of :math:`W_k` orthogonal
  to F grows like :math:`\ln(k)\,W^{mm}` (plus a bounded part that converges), so

  .. math:: D_k = P_{F^\perp}(W_{10k}) - P_{F^\perp}(W_k) \;\to\; \ln(10)\,W^{mm}.

  Reported per decade: the length ratio :math:`\|D_k\|/(\ln 10\,\|W^{mm}\|)` (tends to 1),
  :math:`1-\cos(D_k, W^{mm})` (tends to 0) and the relative residual
  :math:`r_k = \|D_k - \ln 10\,W^{mm}\|/\|\ln 10\,W^{mm}\|` (tends to 0). Unlike
  :math:`\cos(W_k, W^{mm})` it is not held back by the transient that :math:`W_k` accumulated early.
* **The norm-matched path**: :math:`\cos(W_k, \hat W(\|W_k\|))` with :math:`\hat W(B)` the
  regularisation path :math:`\arg\min_{\|W\|\le B}\mathrm{CE}(W)` (Theorem 1) at the iterate's own
  norm, computed by :func:`ntpcert.dynamics.regpath.regularization_path`. Both tend to the same
  limits, and at equal norms they carry the same F-part, so this cosine tends to 1 much faster
  than :math:`\cos(W_k, W^{mm})`. When the path solver cannot certify a budget (it fails its KKT
  check), the cosine there is undetermined (NaN) and the reason is reported.
* **Own-norm margin ratio**: for an optimiser that is normalised steepest descent in a norm N
  (sign descent: max; spectral descent and Muon: spectral; Adam: max, as sign descent's
  relative), :math:`\gamma_N(P_{F^\perp}W_k)\,\|W^N\|_N` with
  :math:`\gamma_N(X) = \min A_{mar}\mathrm{vec}(X)/\|X\|_N`, against the N-norm NTP-SVM
  (``margin_ratio_N`` of :mod:`ntpcert.dynamics.trajectory`). It is at most 1 (up to the N-SVM's
  certified gap) and 1 exactly at a max-margin direction in N. For GD and NGD, N is Frobenius, and
  the ratio is reported without a verdict: it tends to 1 only like the cosine, with no rate that
  Theorem 2 gives (0.55 after 10⁶ GD steps on ``paper``).

Each check has a verdict against the named thresholds below (``True``: the run behaves as
Theorem 2 predicts at this length; ``False``: it does not; ``None``: undetermined, e.g. too few
decades, no :math:`W^{mm}`, or a path point that could not be certified). The thresholds are those of
a 10⁶-step GD run on ``paper``; shorter runs are expected to miss them, and the per-decade numbers
show the trend.

Example
-------
>>> import numpy as np
>>> from ntpcert import NTPInstance
>>> import ntpcert.dynamics.optimizers as O
>>> from ntpcert.dynamics.trajectory import Limits, decade_steps, run
>>> from ntpcert.dynamics.checks import convergence_checks
>>> inst = NTPInstance.from_counts(np.eye(3), [[3, 1, 0, 0], [0, 2, 2, 0], [0, 0, 1, 4]])
>>> lim = Limits.compute(inst)
>>> tr = run(inst, O.gd(), 1000, limits=lim, snapshots=decade_steps(1000))
>>> chk = convergence_checks(tr, lim)
>>> [int(s) for s in chk.steps]
[1, 10, 100, 1000]
>>> bool(chk.increment_residual[-1] < chk.increment_residual[0])
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.util.numbers import cosine
from ntpcert.dynamics.trajectory import Limits, Trajectory, decade_steps
from ntpcert.solve.norms import matrix_norm

#: The decade-increment verdict: the relative residual must fall over this many consecutive decade
#: increments at the end of the run ...
DECADE_TREND_COUNT = 3
#: ... and be at most this in the last one.
DECADE_RESIDUAL_MAX = 0.1
#: Residuals both below this count as falling (rounding: a trajectory already on its limit).
NEGLIGIBLE_RESIDUAL = 1e-9
#: The F-convergence verdict: :math:`\|P_FW_k - W^*\|/\|W^*\|` at the last decade step at most this.
F_DISTANCE_MAX = 2e-3
#: The path verdict: :math:`\cos(W_k, \hat W(\|W_k\|))` at the last decade step at least this.
PATH_COSINE_MIN = 0.995
#: The own-norm verdict: the margin ratio in the optimiser's own norm at least this at the end.
OWN_NORM_RATIO_MIN = 0.99
#: Decade steps at which the iterate's norm is below this are not sent to the regularisation path
#: (the path is trivial there: a budget below it is a point near W = 0).
PATH_MIN_NORM = 1e-8

#: Budgets sent to the regularisation path are filled in geometrically so that consecutive ones
#: differ by at most this factor: the path's warm starts fail on large jumps.
PATH_BUDGET_FACTOR = 1.5
#: A path point whose KKT residual (:func:`ntpcert.dynamics.ball.kkt_residual`) exceeds this is
#: not trusted: the cosine there is undetermined.
PATH_KKT_MAX = 1e-6

#: Names of the verdicts, in report order.
VERDICTS = ("decade_increment", "F_convergence", "path_cosine", "own_norm_margin")


@dataclass(frozen=True, eq=False)
class ConvergenceChecks:
    r"""The checks of the module doc for one trajectory.

    Attributes
    ----------
    optimizer : str
    steps : ndarray of shape (n,)
        The decade steps :math:`1, 10, \dots` used.
    norm, rel_dist_F : ndarray of shape (n,)
        :math:`\|W_k\|` and :math:`\|P_FW_k - W^*\|/\|W^*\|` at each decade step.
    increment_ratio, increment_one_minus_cos, increment_residual : ndarray of shape (n - 1,)
        For the decade from ``steps[i]`` to ``steps[i + 1]``: :math:`\|D_k\|/(\ln 10\|W^{mm}\|)`,
        :math:`1-\cos(D_k, W^{mm})` and :math:`\|D_k-\ln 10\,W^{mm}\|/\|\ln 10\,W^{mm}\|`.
    path_cosine : ndarray of shape (n,)
        :math:`\cos(W_k, \hat W(\|W_k\|))`, NaN where undetermined.
    path_kkt : ndarray of shape (n,)
        The path solver's KKT residual at each budget (NaN where not computed).
    path_error : str or None
        Why some path cosines are undetermined.
    own_norm : str
        The norm the optimiser is steepest descent in (``fro`` for GD and NGD).
    own_margin_ratio : ndarray of shape (n,)
        The margin ratio in ``own_norm`` at each decade step (NaN when that norm's SVM was not
        computed; see ``Limits.compute(norms=...)``).
    own_norm_gap : float or None
        The certified relative gap of the own-norm SVM (the ratio is exact only up to it).
    orthogonalization_error : float or None
        For spectral descent and Muon: the measured error of the orthogonalisation step, when the
        optimiser reports one.
    float_trusted : bool or None
        Whether float64 still resolves the gradient at the last step (None when not assessed).
    verdicts : dict of str to bool or None
        One per name in :data:`VERDICTS`.
    """

    optimizer: str
    steps: np.ndarray
    norm: np.ndarray
    rel_dist_F: np.ndarray
    increment_ratio: np.ndarray
    increment_one_minus_cos: np.ndarray
    increment_residual: np.ndarray
    path_cosine: np.ndarray
    path_kkt: np.ndarray
    path_error: str | None
    own_norm: str
    own_margin_ratio: np.ndarray
    own_norm_gap: float | None
    orthogonalization_error: float | None
    float_trusted: bool | None
    verdicts: dict[str, bool | None]

    def to_json(self) -> dict[str, Any]:
        def clean(a: np.ndarray) -> list[float | None]:
            return [float(x) if math.isfinite(float(x)) else None for x in a]

        return {
            "optimizer": self.optimizer,
            "steps": [int(s) for s in self.steps],
            "norm": clean(self.norm),
            "rel_dist_F": clean(self.rel_dist_F),
            "decade_increment": {
                "ratio": clean(self.increment_ratio),
                "one_minus_cos": clean(self.increment_one_minus_cos),
                "relative_residual": clean(self.increment_residual),
            },
            "path_cosine": clean(self.path_cosine),
            "path_kkt": clean(self.path_kkt),
            "path_error": self.path_error,
            "own_norm": self.own_norm,
            "own_margin_ratio": clean(self.own_margin_ratio),
            "own_norm_gap": self.own_norm_gap,
            "orthogonalization_error": self.orthogonalization_error,
            "float_trusted": self.float_trusted,
            "verdicts": dict(self.verdicts),
            "thresholds": thresholds(),
        }

    def lines(self) -> list[str]:
        """A few human-readable lines: the per-decade numbers and the verdicts."""
        out = []
        for i in range(self.increment_residual.size):
            out.append(f"  decade {int(self.steps[i]):>8} -> {int(self.steps[i + 1]):<8}: "
                       f"|D|/(ln10 |W^mm|) = {_f(self.increment_ratio[i])}, "
                       f"1 - cos(D, W^mm) = {_f(self.increment_one_minus_cos[i])}, "
                       f"residual = {_f(self.increment_residual[i])}")
        for i, s in enumerate(self.steps):
            out.append(f"  step {int(s):>9}: |W| = {_f(self.norm[i])}, |P_F W - W*|/|W*| = {_f(self.rel_dist_F[i])}, "
                       f"cos(W, path(|W|)) = {_f(self.path_cosine[i])}, "
                       f"margin ratio ({self.own_norm}) = {_f(self.own_margin_ratio[i])}")
        if self.path_error:
            out.append(f"  path check undetermined in part: {self.path_error}")
        if self.orthogonalization_error is not None:
            out.append(f"  orthogonalisation error: {_f(self.orthogonalization_error)}")
        out.append("  verdicts (Theorem 2 at this length): " + ", ".join(
            f"{k} {_word(v)}" for k, v in self.verdicts.items()))
        return out


def _f(x: float) -> str:
    x = float(x)
    if not math.isfinite(x):
        return "undetermined"
    return f"{x:.4g}"


def _word(v: bool | None) -> str:
    return "undetermined" if v is None else ("passes" if v else "fails")


def thresholds() -> dict[str, float | int]:
    """The named thresholds of the verdicts."""
    return {"decade_trend_count": DECADE_TREND_COUNT, "decade_residual_max": DECADE_RESIDUAL_MAX,
            "F_distance_max": F_DISTANCE_MAX, "path_cosine_min": PATH_COSINE_MIN,
            "own_norm_ratio_min": OWN_NORM_RATIO_MIN}


def own_norm(optimizer: str) -> str:
    """The norm of which ``optimizer`` (a name of :data:`ntpcert.dynamics.optimizers.OPTIMIZERS`) is
    normalised steepest descent: ``max`` for sign / Signum / Adam, ``spectral`` for spectral descent
    and Muon, ``fro`` for GD and NGD."""
    return {"sign": "max", "signum": "max", "adam": "max", "spectral": "spectral", "muon": "spectral"}.get(
        optimizer, "fro")


def decade_increments(W_perp: np.ndarray, W_mm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The decade-increment numbers of consecutive F⊥-parts.

    Parameters
    ----------
    W_perp : ndarray of shape (n, V, d)
        :math:`P_{F^\perp}W_k` at decade steps :math:`k, 10k, 100k, \dots`.
    W_mm : ndarray of shape (V, d)

    Returns
    -------
    ratio, one_minus_cos, residual : ndarray of shape (n - 1,)
        :math:`\|D\|/(\ln 10\|W^{mm}\|)`, :math:`1-\cos(D, W^{mm})`,
        :math:`\|D-\ln 10\,W^{mm}\|/(\ln 10\|W^{mm}\|)` with :math:`D` the difference of consecutive
        entries.
    """
    W_perp = np.asarray(W_perp, dtype=np.float64)
    target = math.log(10.0) * np.asarray(W_mm, dtype=np.float64)
    tn = float(np.linalg.norm(target))
    if tn == 0.0:
        raise InputError("W_mm: zero matrix; the decade increment has no target")
    n = max(0, W_perp.shape[0] - 1)
    ratio, omc, res = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        D = W_perp[i + 1] - W_perp[i]
        ratio[i] = float(np.linalg.norm(D)) / tn
        c = cosine(D, target)
        omc[i] = 1.0 - c if math.isfinite(c) else math.nan
        res[i] = float(np.linalg.norm(D - target)) / tn
    return ratio, omc, res


def path_cosines(limits: Limits, iterates: np.ndarray, *, progress: bool = False
                 ) -> tuple[np.ndarray, np.ndarray, str | None]:
    r""":math:`\cos(W_i, \hat W(\|W_i\|))` for each iterate, through one regularisation path.

    Parameters
    ----------
    limits : Limits
    iterates : ndarray of shape (n, V, d)

    Returns
    -------
    cosines, kkt : ndarray of shape (n,)
        NaN where undetermined (a zero iterate, or a budget the path could not certify).
    error : str or None
        The path solver's message when some budget failed.

    The budgets are solved together, in increasing order, so each warm-starts the next, with
    extra budgets in between so that consecutive ones differ by at most ``PATH_BUDGET_FACTOR``.
    Every path point is checked (KKT residual at most ``PATH_KKT_MAX``, norm equal to its budget);
    one that fails costs only its own cosine, which is then undetermined, and the path goes on from
    the last point that passed.
    """
    from ntpcert.dynamics.regpath import regularization_path

    its = np.asarray(iterates, dtype=np.float64)
    n = its.shape[0]
    cos = np.full(n, math.nan)
    kkt = np.full(n, math.nan)
    norms = np.array([float(np.linalg.norm(W)) for W in its])
    todo = [i for i in range(n) if norms[i] > PATH_MIN_NORM]
    if not todo:
        return cos, kkt, None
    budgets = sorted({float(norms[i]) for i in todo})
    grid = _fill(budgets, PATH_BUDGET_FACTOR)
    rp = regularization_path(limits.instance, grid, limits=limits, kkt_max=PATH_KKT_MAX, on_failure="mark",
                             progress=progress)
    where = {float(b): j for j, b in enumerate(rp.budgets)}
    bad = []
    for i in todo:
        j = where[float(norms[i])]
        kkt[i] = rp.kkt[j]
        if rp.certified[j]:
            cos[i] = cosine(its[i], rp.W[j])
        else:
            bad.append(f"B = {norms[i]:.4g}")
    error = None
    if bad:
        error = f"no checked path point at {', '.join(bad)}: " + "; ".join(rp.failures)
    return cos, kkt, error


def _fill(budgets: list[float], factor: float) -> list[float]:
    """``budgets`` (sorted) with geometric points inserted so that consecutive ratios are at most ``factor``."""
    out = [budgets[0]]
    for b in budgets[1:]:
        lo = out[-1]
        k = int(math.ceil(math.log(b / lo) / math.log(factor))) if b > lo else 0
        out.extend(float(x) for x in np.geomspace(lo, b, k + 1)[1:-1])
        out.append(b)
    return out


def convergence_checks(traj: Trajectory, limits: Limits, *, path: bool = True, progress: bool = False,
                       orthogonalization_error: float | None = None,
                       float_trusted: bool | None = None) -> ConvergenceChecks:
    """The checks of the module doc for ``traj``, which must hold snapshots at every decade step
    (``run(..., snapshots=decade_steps(steps))``).

    Parameters
    ----------
    traj : Trajectory
    limits : Limits
        Those the trajectory was logged against; the own-norm ratio needs that norm's SVM in
        ``limits.norm_svms`` (or the Frobenius SVM).
    path : bool
        Compute the norm-matched path cosines (one regularisation path; the slowest part).
    progress : bool
        A progress bar on stderr for the path.
    orthogonalization_error, float_trusted : optional
        Reported as given (measured elsewhere).

    Raises
    ------
    InputError
        When a decade step has no snapshot.
    """
    steps = decade_steps(int(traj.steps[-1]))
    if traj.snapshot_steps is None or not np.all(np.isin(steps, traj.snapshot_steps)):
        raise InputError("traj: no snapshots at the decade steps; run with snapshots=decade_steps(steps)")
    Ws = np.stack([traj.snapshot(int(s)) for s in steps]) if steps.size else np.zeros((0, *traj.W_final.shape))
    n = steps.size
    nan = math.nan
    sub = limits.subspace
    W_star = limits.W_star
    ws_norm = float(np.linalg.norm(W_star))
    perp = np.stack([sub.project_perp(W) for W in Ws]) if n else Ws
    norm = np.array([float(np.linalg.norm(W)) for W in Ws])
    rel_F = np.array([float(np.linalg.norm(W - P - W_star)) / ws_norm if ws_norm > 0 else nan
                      for W, P in zip(Ws, perp)])
    W_mm = limits.W_mm
    if W_mm is not None and n >= 2:
        ratio, omc, res = decade_increments(perp, W_mm)
    else:
        ratio = omc = res = np.full(max(0, n - 1), nan)
    pcos, pkkt, perr = np.full(n, nan), np.full(n, nan), None
    if path and W_mm is not None and n:
        pcos, pkkt, perr = path_cosines(limits, Ws, progress=progress)
    name = own_norm(traj.optimizer)
    own = np.full(n, nan)
    gap: float | None = None
    if W_mm is not None and n:
        if name == "fro":
            value, gap = limits.svm.norm, float(getattr(limits.svm, "relative_gap", 0.0) or 0.0)
        elif name in limits.norm_svms:
            sol = limits.norm_svms[name]
            value, gap = sol.value, sol.relative_gap
        else:
            value = None
        if value is not None:
            for i, P in enumerate(perp):
                mar = limits.system.apply_margin(P)
                pn = matrix_norm(P, name)
                own[i] = float(mar.min()) * value / pn if (mar.size and pn > 0) else nan
    verdicts = _verdicts(res, rel_F, pcos, own, name, traj.optimizer)
    return ConvergenceChecks(traj.optimizer, steps, norm, rel_F, ratio, omc, res, pcos, pkkt, perr, name, own,
                             gap, orthogonalization_error, float_trusted, verdicts)


def _verdicts(res: np.ndarray, rel_F: np.ndarray, pcos: np.ndarray, own: np.ndarray, norm: str,
              optimizer: str) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    if res.size >= DECADE_TREND_COUNT and np.all(np.isfinite(res[-DECADE_TREND_COUNT:])):
        tail = res[-DECADE_TREND_COUNT:]
        falls = (np.diff(tail) < 0) | (np.maximum(tail[:-1], tail[1:]) <= NEGLIGIBLE_RESIDUAL)
        out["decade_increment"] = bool(np.all(falls) and tail[-1] <= DECADE_RESIDUAL_MAX)
    else:
        out["decade_increment"] = None
    out["F_convergence"] = bool(rel_F[-1] <= F_DISTANCE_MAX) if rel_F.size and math.isfinite(rel_F[-1]) else None
    out["path_cosine"] = bool(pcos[-1] >= PATH_COSINE_MIN) if pcos.size and math.isfinite(pcos[-1]) else None
    if norm == "fro":  # GD / NGD: Theorem 2 gives no rate for the margin; the ratio is reported, not judged
        out["own_norm_margin"] = None
    else:
        out["own_norm_margin"] = bool(own[-1] >= OWN_NORM_RATIO_MIN) if own.size and math.isfinite(own[-1]) else None
    return out


__all__ = [
    "DECADE_RESIDUAL_MAX",
    "DECADE_TREND_COUNT",
    "F_DISTANCE_MAX",
    "OWN_NORM_RATIO_MIN",
    "PATH_BUDGET_FACTOR",
    "PATH_KKT_MAX",
    "PATH_COSINE_MIN",
    "VERDICTS",
    "ConvergenceChecks",
    "convergence_checks",
    "decade_increments",
    "own_norm",
    "path_cosines",
    "thresholds",
]
