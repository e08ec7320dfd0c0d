r"""H scaled by a power of two, for solvers whose tolerances are absolute.

HiGHS, Clarabel and a Newton solve stopped by a gradient tolerance read their tolerances absolutely, so an
instance whose embeddings are far from unit size is, for them, another problem: on H·1e-20 the split LP read
a wrong N as optimal, Newton stopped at W = 0, and Clarabel called separable data infeasible. Scaling H by
:math:`2^e` is exact in floats (while no entry leaves the normal range), changes no verdict of (4) or (6), no
split and no :math:`L^*`, and maps the limits back exactly: a decoder W for :math:`2^eH` is :math:`2^eW` for
H (:math:`(2^eW)h = W(2^eh)`), and the NTP-SVM's dual :math:`a` (:math:`W = aH`) is :math:`2^{2e}a`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ntpcert.instance.values import frozen

#: H is scaled only where its largest entry lies outside :math:`[2^{-E}, 2^E]`, E this: moderate data keep
#: every result bit for bit.
SCALE_EXPONENT = 8


def unit_exponent(H: np.ndarray) -> int:
    """The e with H's largest entry times :math:`2^e` in [1, 2), where that entry lies outside
    :math:`[2^{-E}, 2^E]` (:data:`SCALE_EXPONENT`) and the scaling is exact on every entry; else 0. Scaling
    down stops where the smallest non-zero entry would leave the supported range
    (:data:`~ntpcert.rows.kesler.EMBEDDING_RANGE`)."""
    H = np.asarray(H, dtype=np.float64)
    top = float(np.abs(H).max(initial=0.0))
    if not (top > 0 and np.isfinite(top)):
        return 0
    e = 1 - int(np.frexp(top)[1])
    if e < 0:  # scaling down: the smallest non-zero entry must stay within the supported range
        from ntpcert.rows.kesler import EMBEDDING_RANGE

        A = np.abs(H)
        lo = float(A[A > 0].min())
        e = max(e, int(np.frexp(EMBEDDING_RANGE[0] / lo)[1]))  # lo·2^e > EMBEDDING_RANGE[0]
    if abs(e) <= SCALE_EXPONENT:
        return 0
    if not np.array_equal(np.ldexp(np.ldexp(H, e), -e), H):  # an entry tiny against the largest lost bits
        return 0
    return e


def unit_scaled(instance):
    """``(instance with H·2^e, e)`` for e = :func:`unit_exponent` (``(instance, 0)`` where it is 0)."""
    e = unit_exponent(instance.embeddings)
    if not e:
        return instance, 0
    Hs = np.ldexp(np.asarray(instance.embeddings, dtype=np.float64), e)
    return dataclasses.replace(instance, embeddings=frozen(Hs, owned=True)), e
