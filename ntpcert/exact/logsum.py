r"""The sign and value of :math:`\sum_p e_p \log p` for integer exponents of any size.

Logarithms of distinct primes are linearly independent over :math:`\mathbb Q`, so
:math:`\sum_p e_p \log p = 0` iff every :math:`e_p = 0`; otherwise its sign is settled by evaluating
the sum in ball arithmetic (python-flint's ``arb``) at a precision that grows until the ball excludes 0.
Exponents from null vectors of data with embeddings spread over hundreds of orders of magnitude have
thousands of digits: ``e * math.log(p)`` then overflows a float, the ball does not.
"""

from __future__ import annotations

import math

import flint

#: First working precision (bits) of the ball sum, doubled until the sign is known.
START_PREC = 64
#: The largest working precision tried (a non-zero sum of this few terms is far from 0 long before).
MAX_PREC = 1 << 20


def _ball(exps: dict[int, int], prec: int) -> flint.arb:
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        total = flint.arb(0)
        for p, e in exps.items():
            if e:
                total += flint.arb(p).log() * flint.arb(e)
        return total
    finally:
        flint.ctx.prec = old


def _nonzero(exps: dict[int, int]) -> tuple[dict[int, int], int]:
    """The non-zero exponents as Python ints, and the bit length of the largest."""
    out = {int(p): int(e) for p, e in exps.items() if e}
    return out, max((abs(e).bit_length() for e in out.values()), default=0)


def log_combination_sign(exps: dict[int, int]) -> int:
    r"""The sign (-1, 0 or 1) of :math:`\sum_p e_p \log p` over primes p (keys) and integers e_p."""
    exps, bits = _nonzero(exps)
    if not exps:
        return 0
    prec = START_PREC + bits
    while prec <= MAX_PREC + bits:
        ball = _ball(exps, prec)
        if ball > 0:
            return 1
        if ball < 0:
            return -1
        prec *= 2
    raise ArithmeticError("the sign of a sum of prime logarithms was not settled at the largest precision")


def log_combination_value(exps: dict[int, int]) -> float:
    r""":math:`\sum_p e_p \log p` as a float (``±inf`` when it is beyond the float range)."""
    exps, bits = _nonzero(exps)
    if not exps:
        return 0.0
    if bits < 1000:
        try:
            return math.fsum(e * math.log(p) for p, e in exps.items())
        except OverflowError:
            pass
    mid = _ball(exps, START_PREC + bits).mid()
    try:
        return float(mid)
    except OverflowError:  # pragma: no cover - arb converts out-of-range values to inf itself
        return math.inf if mid > 0 else -math.inf


__all__ = ["log_combination_sign", "log_combination_value"]
