"""Experiment grids over random NTP instances, run on dask.distributed, with a crash-safe store.

``spec`` parses the TOML grid, ``generate`` builds the instance at a grid point, ``compute`` the
quantities there, ``store`` keeps one committed row per finished point, ``runner`` farms the missing
points out, and ``plot`` draws phase diagrams from a store. The command line is ``ntpcert sweep`` and
``ntpcert sweep-plot``.
"""

from ntpcert.experiments.sweep.compute import compute_point as compute_point
from ntpcert.experiments.sweep.generate import point_instance as point_instance
from ntpcert.experiments.sweep.runner import SweepSummary as SweepSummary
from ntpcert.experiments.sweep.runner import dask_client as dask_client
from ntpcert.experiments.sweep.runner import run_sweep as run_sweep
from ntpcert.experiments.sweep.spec import GridPoint as GridPoint
from ntpcert.experiments.sweep.spec import SweepSpec as SweepSpec
from ntpcert.experiments.sweep.spec import load_spec as load_spec
from ntpcert.experiments.sweep.spec import parse_spec as parse_spec
from ntpcert.experiments.sweep.store import ResultRow as ResultRow
from ntpcert.experiments.sweep.store import ResultStore as ResultStore

__all__ = [
    "GridPoint",
    "ResultRow",
    "ResultStore",
    "SweepSpec",
    "SweepSummary",
    "compute_point",
    "dask_client",
    "load_spec",
    "parse_spec",
    "point_instance",
    "run_sweep",
]
