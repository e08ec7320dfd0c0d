r"""One epoch of dual block-coordinate ascent on the linear path, compiled (numba).

Where :math:`d < m` the structured solver keeps the class rows :math:`W_c = A^\top H` (shape (C, d)) and each
block update needs context j's logits :math:`g = W_c h_j - \|h_j\|^2 A_j`, a (C, d)(d,) product of a few
thousand flops. In numpy each update costs about 150 µs of interpreter overhead, a hundred times its
arithmetic (teacher data, V = 50, m = 1,000, d = 64: 0.17 s an epoch, where LIBLINEAR's compiled
ascent takes under 2 ms). This module runs the same sequential ascent as
:func:`ntpcert.solve.structured.bcd.epoch` — the same closed-form block update
(:mod:`ntpcert.solve.structured.block`), the same order of contexts — as one compiled loop:

.. math:: g \leftarrow W_c h_j - c A_j,\qquad b \leftarrow \text{block}(g),\qquad
          W_c \mathrel{+}= (b - A_j) h_j^\top,\qquad A_j \leftarrow b .

The iterates equal those of the numpy epoch up to the rounding of the regrouped sums. Compiled once per
machine (``cache=True``: a few seconds the first time, then loaded from numba's cache).
"""

from __future__ import annotations

import numpy as np

#: The compiled epoch is used on the linear path when m·C is at least this (below it the numpy epoch is
#: as fast and numba's import, about 0.3 s, would dominate a small solve).
MIN_CELLS = 4_000

#: A slack margin is shrunk when its hinge term :math:`1 + g_v + \mu` is below minus this (a margin at least
#: 1 + SHRINK_SLACK after the update).
SHRINK_SLACK = 0.0

#: Every this many epochs the pass is full (no class shrunk), and rewrites the shrunk set; the structured solver
#: reads its progress measures and refreshes its state as often (:func:`full_pass`). A full pass visits all C
#: classes of every context and the measures cost a product with all of them, so on many classes they are most
#: of an epoch's cost: teacher data, V = 500, m = 4,000, d = 64, 3,240 epochs took 17.1 s with a full pass every
#: 30 epochs and a refresh every 10, 9.6 s every 90 (V = 50: 9.7 s and 3.95 s).
FULL_EVERY = 90
#: ... and every this many during the first :data:`FULL_EARLY_EPOCHS` epochs: most instances certify there, and
#: every 90 from the start they waited for their readings (V = 10, m = 500, d = 64 went past ``auto``'s budget
#: of epochs and fell back to the working set: 0.30 s against 0.05 s).
FULL_EVERY_EARLY = 30
FULL_EARLY_EPOCHS = 300


def full_pass(k: int) -> bool:
    """Whether epoch ``k`` (counted from 0) is a full pass (:data:`FULL_EVERY`, :data:`FULL_EVERY_EARLY`)."""
    if k < FULL_EARLY_EPOCHS:
        return k % FULL_EVERY_EARLY == 0
    return (k - FULL_EARLY_EPOCHS) % FULL_EVERY == 0

_kernel = None
_layout: dict = {}


def available() -> bool:
    """True when numba imports."""
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - numba is a dependency
        return False
    return True


def _build():
    from ntpcert.solve.structured._kernels import epoch

    return epoch


def linear_epoch(state, A: np.ndarray, classes, order: np.ndarray, off: np.ndarray, mu: np.ndarray,
                 keep: np.ndarray | None = None, full: bool = True) -> None:
    r"""One compiled pass over the contexts in ``order``, in place on ``A`` (m, C), ``state.Wc`` (C, d) and
    ``mu`` (m,): the epoch of :func:`ntpcert.solve.structured.bcd.epoch` on a
    :class:`~ntpcert.solve.structured.bcd.LinearState`.

    **Shrinking** (as LIBLINEAR's Crammer–Singer solver shrinks its inactive variables). ``keep`` is a
    boolean array of shape (m, C) or None. A full pass (``full``) visits every class and, when ``keep`` is
    given, rewrites it: the support classes, the classes with a non-zero multiplier, and those whose margin
    is within :data:`SHRINK_SLACK` of being active. A shrunk pass (``full=False``) updates context j on the
    classes with ``keep[j, v]`` only (a list per context, so its cost follows the kept classes, not C),
    treating the others as slack margins whose multipliers are 0 and stay 0. The caller alternates full and
    shrunk passes (:func:`full_pass`); every certificate and progress measure is taken on the whole
    state, so a stale shrink only delays convergence, never changes a result."""
    global _kernel
    if _kernel is None:
        _kernel = _build()
    if _layout.get("classes") is not classes:
        _layout.update(sizes=np.ascontiguousarray(classes.sizes, dtype=np.float64),
                       weight=np.ascontiguousarray(classes.support_weight, dtype=np.float64), classes=classes,
                       kept=None)
    full = keep is None or full
    offc = np.ascontiguousarray(off)
    if full or _layout.get("kept") is None or _layout["kept"][0] is not keep:
        ptr, idx = np.zeros(A.shape[0] + 1, np.int64), np.zeros(0, np.int64)
    else:
        _, ptr, idx = _layout["kept"]
    _kernel(state.Wc, A, state.H, np.ascontiguousarray(order, dtype=np.int64), offc, _layout["sizes"],
            _layout["weight"], np.ascontiguousarray(state.diag), mu, ptr, idx, bool(full) or idx.size == 0,
            float(SHRINK_SLACK))
    if keep is not None and full:
        # the kept classes: supports, non-zero multipliers, and margins within SHRINK_SLACK of active
        # (logits of the whole state, one product)
        Z = state.H @ state.Wc.T
        t = np.where(classes.mask, Z, np.inf).min(axis=1)  # the in-support logit (equal after the pass)
        keep[...] = classes.mask | (A < 0) | (Z > (t - 1.0 - SHRINK_SLACK)[:, None])
        rows, cols = np.nonzero(keep)
        ptr = np.zeros(A.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=A.shape[0]), out=ptr[1:])
        _layout["kept"] = (keep, ptr, cols.astype(np.int64))
