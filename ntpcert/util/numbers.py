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


#: Largest composite cofactor factorised (bits): flint factors 128-bit numbers in well under a
#: second, while a product of two 60-digit primes would take hours.
MAX_FACTOR_BITS = 128


def factorise(n: int, *, max_bits: int = MAX_FACTOR_BITS) -> dict[int, int]:
    """Prime factorisation ``{p: exponent}`` of a positive integer, with python-flint.

    Primes below 2^20 are divided out first; a remaining cofactor is kept when it is prime and
    factored when it has at most ``max_bits`` bits. A larger composite cofactor is an
    :class:`~ntpcert.errors.InputError`, rather than a factorisation that may never end.

    >>> factorise(360)
    {2: 3, 3: 2, 5: 1}
    """
    import flint

    from ntpcert.errors import InputError

    if n == 1:
        return {}
    if n.bit_length() <= max_bits:
        return {int(p): int(e) for p, e in flint.fmpz(n).factor()}
    out: dict[int, int] = {}
    for p, e in flint.fmpz(n).factor_smooth(20):  # primes below 2^20, then a cofactor
        q = int(p)
        parts = [(q, 1)] if q < (1 << 20) or flint.fmpz(q).is_prime() else None
        if parts is None:
            if q.bit_length() > max_bits:
                raise InputError(f"an integer of the count ratios has a composite factor of {q.bit_length()} bits; "
                                 f"exact arithmetic factors them only up to {max_bits} bits")
            parts = [(int(r), int(f)) for r, f in flint.fmpz(q).factor()]
        for r, f in parts:
            out[r] = out.get(r, 0) + f * int(e)
    return out


def cosine(A: np.ndarray, B: np.ndarray) -> float:
    r"""Frobenius cosine :math:`\langle A, B\rangle / (\|A\|_F \|B\|_F)`; NaN when either is 0
    (the angle is undefined there, and a 0 would read as "orthogonal")."""
    na, nb = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return float(np.vdot(A, B)) / (na * nb)


#: ``(len(sys.modules), ThreadpoolController)``: the BLAS libraries seen at that many imported modules.
_CONTROLLER: list[Any] = []


def blas_threads(n: int | None) -> Any:
    """A context that runs BLAS/LAPACK on ``n`` threads (None: leave them as they are). Small
    matrix operations are much slower multi-threaded, and on a loaded machine even large ones can
    be; a no-op without threadpoolctl. The BLAS libraries are looked up again (about 4 ms) whenever
    modules were imported since the last look: scipy loads its own OpenBLAS beside numpy's when
    ``scipy.linalg`` is first imported, and a controller made before would not see it."""
    if n is None:
        return nullcontext()
    import sys

    if not _CONTROLLER or _CONTROLLER[0][0] != len(sys.modules):
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl is optional
            ctl = None
        else:
            ctl = ThreadpoolController()
        _CONTROLLER[:] = [(len(sys.modules), ctl)]
    ctl = _CONTROLLER[0][1]
    return nullcontext() if ctl is None else ctl.limit(limits=int(n), user_api="blas")


def single_thread() -> Any:
    """:func:`blas_threads` with one thread."""
    return blas_threads(1)


__all__ = ["blas_threads", "cosine", "factorise", "lcm_all", "single_thread"]
