"""One optimiser run against the limits (``ntpcert trajectory``): the run, its convergence checks, the
summary JSON and the files.

:func:`run_trajectory` computes the limits (with the NTP-SVMs in the norms asked for), runs the
optimiser from W = 0 on a geometric grid of steps and, unless told not to, the convergence checks per
decade of steps (:func:`ntpcert.dynamics.checks.convergence_checks`). The regularisation-path part
of the checks runs by default only where its Newton solver applies (``path_check="auto"``). The
result, a :class:`TrajectoryRun`, owns its JSON (:meth:`~TrajectoryRun.to_json`, the file
``trajectory.json``; :meth:`~TrajectoryRun.brief_json`, what ``--json`` prints) and its files
(:meth:`~TrajectoryRun.writers`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

#: The files of a run: always, with snapshots, and with figures.
OUTPUT_NAMES = ("metrics.csv", "trajectory.json", "W_final.npy")
SNAPSHOT_NAMES = ("snapshots.npy", "snapshot_steps.npy")
FIGURE_NAMES = ("trajectory.png", "alignment.png", "checks.png")
#: ``path_check`` values: ``auto`` runs the path check where its Newton solver applies.
PATH_CHECK = ("auto", "on", "off")
#: Default number of steps and of logged steps per decade.
DEFAULT_STEPS = 10_000
POINTS_PER_DECADE = 20


def output_names(*, snapshots: bool, figures: bool) -> tuple[str, ...]:
    """Every file a run may write."""
    return OUTPUT_NAMES + (SNAPSHOT_NAMES if snapshots else ()) + (FIGURE_NAMES if figures else ())


def resolve_norms(spec: str, steepest: str, *, field: str = "norms") -> tuple[str, ...]:
    """The other-norm NTP-SVMs to compare with: ``spec`` is a comma list of norm names, ``all``, ``none``
    or ``auto`` (the optimiser's own norm, ``steepest``, when it is not Frobenius)."""
    from ntpcert.dynamics.trajectory import OTHER_NORMS
    from ntpcert.errors import InputError

    t = spec.strip().lower()
    if t == "auto":
        return (steepest,) if steepest in OTHER_NORMS else ()
    if t == "none":
        return ()
    if t == "all":
        return OTHER_NORMS
    out = tuple(dict.fromkeys(x.strip() for x in t.split(",") if x.strip()))
    for n in out:
        if n not in OTHER_NORMS:
            raise InputError(f"{field}: unknown norm {n!r} (expected some of {', '.join(OTHER_NORMS)}, or all, none, "
                             "auto)")
    return out


def check_path_check(value: str, *, field: str = "path_check") -> str:
    """``value`` lower-cased, refused unless one of :data:`PATH_CHECK`."""
    from ntpcert.errors import InputError

    v = value.strip().lower()
    if v not in PATH_CHECK:
        raise InputError(f"{field}: unknown value {value!r} (expected one of {', '.join(PATH_CHECK)})")
    return v


def run_checks(inst, limits, traj, path_check: str = "auto", *, progress: bool = False):
    """The convergence checks of ``traj`` (which holds the decade-step snapshots). ``path_check``
    ``auto`` runs the regularisation path only when its Newton solver applies (V·d at most
    ``NEWTON_MAX_VARS``); otherwise the path cosines are undetermined and the reason is given."""
    from ntpcert.dynamics.checks import convergence_checks
    from ntpcert.dynamics.regpath import NEWTON_MAX_VARS

    path_check = check_path_check(path_check)
    big = inst.V * inst.d > NEWTON_MAX_VARS
    path = path_check == "on" or (path_check == "auto" and not big)
    chk = convergence_checks(traj, limits, path=path and limits.svm is not None, progress=progress)
    if not path:
        why = (f"skipped: V*d = {inst.V * inst.d:,} is above {NEWTON_MAX_VARS:,}, where the path needs the slower "
               "projected solver (--path-check on forces it)" if path_check == "auto" else "skipped (--path-check off)")
        chk = dataclasses.replace(chk, path_error=why)
    return chk


@dataclass(frozen=True, eq=False)
class TrajectoryRun:
    """A run with its limits and checks.

    Attributes
    ----------
    instance : NTPInstance
    limits : Limits
    trajectory : Trajectory
    checks : ConvergenceChecks or None
        None when the checks were not run.
    """

    instance: Any
    limits: Any
    trajectory: Any
    checks: Any = None

    def to_json(self) -> dict[str, Any]:
        """The summary written to ``trajectory.json``: the instance, the limits, the run and its checks."""
        return {
            "instance": self.instance.describe(fingerprint=True),
            "limits": self.limits.to_json(),
            **self.trajectory.to_json(),
            "convergence_checks": None if self.checks is None else self.checks.to_json(),
        }

    def brief_json(self, *, out: str | None = None, files: list[str] | None = None) -> dict[str, Any]:
        """Where the files went (``out``, ``files``), the final metrics, hyperparameters, speed and check
        verdicts (``ntpcert trajectory --json``)."""
        tr, chk = self.trajectory, self.checks
        return {"out": out, "files": files, "final": tr.to_json()["final"], "hyperparams": tr.hyperparams, "steps_per_second": tr.steps_per_second,
                "checks": None if chk is None else {"verdicts": chk.verdicts, "path_error": chk.path_error}}

    def writers(self, *, snapshots: bool = False, figures: bool = True) -> dict[str, Callable[[str], None]]:
        """The files of :func:`output_names`, as writers for :func:`ntpcert.util.files.write_directory`."""
        from ntpcert.util.jsonout import dumps
        from ntpcert.util.files import npy_writer, text_writer

        traj, limits, checks = self.trajectory, self.limits, self.checks
        writers: dict[str, Callable[[str], None]] = {
            "metrics.csv": text_writer(traj.to_csv()),
            "trajectory.json": text_writer(dumps(self.to_json(), indent=2) + "\n"),
            "W_final.npy": npy_writer(traj.W_final),
        }
        if snapshots:
            writers["snapshots.npy"] = npy_writer(traj.snapshots)
            writers["snapshot_steps.npy"] = npy_writer(traj.steps)
        if figures:
            from ntpcert.report import plots
            from ntpcert.report.trajectory_text import short_title

            title = short_title(self.instance, traj)
            writers["trajectory.png"] = lambda path: plots.plot_trajectory(traj, path, title=title)
            if limits.svm is not None:
                writers["alignment.png"] = lambda path: plots.plot_norm_alignment([traj], path, title=title)
            if checks is not None and limits.svm is not None:
                writers["checks.png"] = lambda path: plots.plot_checks(
                    [checks], path, title=f"convergence checks per decade; {title}")
        return writers


def run_trajectory(inst, optimizer, steps: int = DEFAULT_STEPS, *, norms: tuple[str, ...] = (), solver: str | None = None,
                   points_per_decade: int = POINTS_PER_DECADE, checks: bool = True, path_check: str = "auto",
                   snapshots: bool = False, progress: bool = False) -> TrajectoryRun:
    """Run ``optimizer`` (:func:`ntpcert.dynamics.optimizers.make_optimizer`) for ``steps`` steps from W = 0
    against the limits of ``inst`` (module doc). ``snapshots`` keeps every logged iterate; the checks keep
    the decade steps' ones either way."""
    import numpy as np

    from ntpcert.dynamics.trajectory import Limits, decade_steps, geometric_grid, run

    path_check = check_path_check(path_check)
    kw = {} if solver is None else {"solver": solver}
    limits = Limits.compute(inst, norms=norms, progress=progress, **kw)
    grid = geometric_grid(steps, points_per_decade)
    if checks:
        grid = np.union1d(grid, decade_steps(steps))
    keep = True if snapshots else (decade_steps(steps) if checks else False)
    traj = run(inst, optimizer, steps, limits=limits, grid=grid, snapshots=keep, progress=progress)
    chk = run_checks(inst, limits, traj, path_check, progress=progress) if checks else None
    return TrajectoryRun(inst, limits, traj, chk)


__all__ = [
    "DEFAULT_STEPS",
    "FIGURE_NAMES",
    "OUTPUT_NAMES",
    "PATH_CHECK",
    "POINTS_PER_DECADE",
    "SNAPSHOT_NAMES",
    "TrajectoryRun",
    "check_path_check",
    "output_names",
    "resolve_norms",
    "run_checks",
    "run_trajectory",
]
