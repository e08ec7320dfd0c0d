"""NTP-SVM backend ``active-set``: Clarabel (DAQP on few class rows) on a working set of margins, grown until
every margin holds (:mod:`ntpcert.solve.structured.working_set`, where the mathematics and the budget are)."""

from ntpcert.solve.structured.working_set import solve

__all__ = ["solve"]
