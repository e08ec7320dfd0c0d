"""Experiment grids over random NTP instances, run on dask.distributed, with a crash-safe store.

``spec`` parses the TOML grid, ``generate`` builds the instance at a grid point, ``compute`` the
quantities there, ``store`` keeps one committed row per finished point, ``runner`` farms the missing
points out, and ``plot`` draws phase diagrams from a store. The command line is ``ntpcert sweep`` and
``ntpcert sweep-plot``.
"""

from .compute import compute_point as compute_point
from .generate import point_instance as point_instance
from .runner import SweepSummary as SweepSummary
from .runner import dask_client as dask_client
from .runner import run_sweep as run_sweep
from .spec import GridPoint as GridPoint
from .spec import SweepSpec as SweepSpec
from .spec import load_spec as load_spec
from .spec import parse_spec as parse_spec
from .store import ResultRow as ResultRow
from .store import ResultStore as ResultStore

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
