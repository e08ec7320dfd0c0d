r"""The structured solver's budget of work: epochs, scaled by what one epoch costs.

One epoch updates every context's block once. On the kernel path (:math:`d \ge m`) an update moves
:math:`m \times C` logits, on the linear path :math:`C \times d` class rows (C token classes), so an
epoch costs about :math:`m\,C\min(m, d)` multiply-adds, and each block update carries a fixed charge
:data:`BLOCK_OVERHEAD` for the work around it (the closed-form block solve, its bookkeeping). Callers
that bound the solver by work (:mod:`ntpcert.pipeline.decide`, :mod:`ntpcert.pipeline.parts`,
:mod:`ntpcert.solve.svm.auto`, float ``certify``'s NTP-SVM) turn a budget of work units into
``max_epochs`` with :func:`epochs_within`: the count depends on the instance's size alone, never on the
clock, so the same data stop at the same epoch on any machine.

Calibration (``m, d, C``: ms per epoch without polish, on the shared 2-core machine at load 2-3):
``20, 30, 8``: 0.79; ``214, 35, 55``: 6.0; ``200, 300, 50``: 7.3; ``800, 100, 200``: 39;
``1000, 1200, 300``: 79; ``3000, 200, 600``: 321, i.e. 0.23-0.78 ns per work unit, about 1.6e9
units a second.
"""

from __future__ import annotations

from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.structured.classes import TokenClasses

#: Work units charged per block update besides its multiply-adds (about 30 µs of a block update's own
#: work on the machine above, where a unit takes about 0.6 ns).
BLOCK_OVERHEAD = 50_000


def epoch_work(system: KeslerSystem, classes: TokenClasses | None = None) -> int:
    r"""Work units of one epoch: :math:`m\,(C\min(m, d) + \text{BLOCK\_OVERHEAD})`."""
    inst = system.instance
    C = (classes if classes is not None else TokenClasses.build(inst)).count
    return int(inst.m) * (int(C) * min(int(inst.m), int(inst.d)) + BLOCK_OVERHEAD)


def epochs_within(system: KeslerSystem, work: int, cap: int, classes: TokenClasses | None = None) -> int:
    """The epochs that a budget of ``work`` units buys on ``system``: at most ``cap``, at least 1."""
    return int(max(1, min(int(cap), int(work) // max(1, epoch_work(system, classes)))))


__all__ = ["BLOCK_OVERHEAD", "epoch_work", "epochs_within"]
