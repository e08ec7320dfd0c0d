"""The experiment layer: hypothesis strategies, parameter sweeps, and the solver benchmark harness.

Parts of it need optional extras: ``strategies`` needs ``hypothesis`` (``pip install
'ntpcert[strategies]'``), ``sweep`` needs dask (``ntpcert[dist]``), ``bench`` the qpsolvers backends
(``ntpcert[bench]``).
"""
