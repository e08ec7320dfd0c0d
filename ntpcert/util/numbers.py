"""Small numerical helpers shared by the layers: the lcm of many integers, the Frobenius cosine,
and the number of BLAS threads."""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any, Iterable

import numpy as np


def lcm_all(values: Iterable[int], *, limit: int | None = None) -> int | None:
    """The least common multiple of positive integers (1 for none), or None as soon as it
    exceeds ``limit``.

    >>> lcm_all([4, 6, 10]), lcm_all([4, 6, 10], limit=50)
    (60, None)
    """
    out = 1
    for v in values:
        out = math.lcm(out, int(v))
        if limit is not None and out > limit:
            return None
    return out


def cosine(A: np.ndarray, B: np.ndarray) -> float:
    r"""Frobenius cosine :math:`\langle A, B\rangle / (\|A\|_F \|B\|_F)`; NaN when either is 0
    (the angle is undefined there, and a 0 would read as "orthogonal")."""
    na, nb = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return float(np.vdot(A, B)) / (na * nb)


_CONTROLLER: list[Any] = []


def blas_threads(n: int | None) -> Any:
    """A context that runs BLAS/LAPACK on ``n`` threads (None: leave them as they are). Small
    matrix operations are much slower multi-threaded, and on a loaded machine even large ones can
    be; a no-op without threadpoolctl."""
    if n is None:
        return nullcontext()
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl is optional
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    ctl = _CONTROLLER[0]
    return nullcontext() if ctl is None else ctl.limit(limits=int(n), user_api="blas")


def single_thread() -> Any:
    """:func:`blas_threads` with one thread."""
    return blas_threads(1)


__all__ = ["blas_threads", "cosine", "lcm_all", "single_thread"]
