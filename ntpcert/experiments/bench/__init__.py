"""The NTP-SVM solver benchmark: instance families, a runner with time limits, and reports.

Run it with ``ntpcert bench`` or ``python benchmarks/bench_solvers.py``; see ``docs/solvers.md``.
"""
