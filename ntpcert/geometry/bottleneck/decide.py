r"""Every token's argmaxability under a fixed decoder (W, b): cheap exact witnesses first, LPs for the rest.

Token v is **argmaxable** iff some h makes it the unique argmax of :math:`W h + b` (docs/math.md, the
softmax bottleneck). The stages, each exact in what it concludes:

1. **duplicates**: a row (w, b) that occurs twice is never the unique argmax (its twin ties it);
2. **rows**, in float32 then float64: the direction :math:`h = w_v - \mu` (μ the mean row), rounded to
   small integers, for every token in blocks; the exact argmax screen
   (:class:`ntpcert.exact.argmax.ArgmaxScreen`) names each column's unique argmax exactly, and every token
   so named is argmaxable, whichever token's direction it was (most tokens of a decoder are vertices of
   the hull of its rows and are settled here, at the cost of one product W Wᵀ);
3. **LP**: a cutting-plane margin LP per remaining token (:mod:`ntpcert.geometry.bottleneck.lp`), whose
   point is checked exactly against every row, or whose dual gives an exact convex combination.

Budgets are counted in work, never in seconds: ``max_lp_tokens`` tokens go to the LP, each with at most
``max_lp_rounds`` LPs (and HiGHS' own iteration budget); a token past them is undetermined, with the
option that would settle it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.exact.argmax import ArgmaxScreen
from ntpcert.geometry.bottleneck.format import lifted, natural_bias_entry, row_direction
from ntpcert.geometry.bottleneck.lp import LP_MAX_ROUNDS, Scaled, solve_token
from ntpcert.geometry.bottleneck.result import (ARGMAXABLE, UNARGMAXABLE, UNDETERMINED, BottleneckResult, Witnesses)
from ntpcert.util.budget import budget_text
from ntpcert.util.progress import progress_bar

__all__ = ["ROW_PASSES", "MAX_LP_TOKENS", "argmaxability"]

#: The row-direction passes: (float type of the screen, scale bits, bias entry rule). float32 with 5 bits
#: keeps 2^b ||g||_1 within float32's exact integers for d up to about 10^4 with a useful b; float64 with 20
#: bits settles what the coarse pass could not; the last pass weighs the bias as h = w_v - mu does.
ROW_PASSES = ((np.float32, 5, "natural"), (np.float64, 20, "one"), (np.float64, 20, "natural"))

#: Tokens sent to the LP by default, at most (the rest are undetermined).
MAX_LP_TOKENS = 2_000

#: Tokens per block of the row passes (columns of one product).
BLOCK = 512


def check_decoder(W: Any, b: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """W (V, d) and b (V,) as finite float64 arrays, or an InputError naming what is wrong."""
    W = np.asarray(W)
    if W.dtype.kind not in "fiu" or W.ndim != 2 or W.shape[0] < 1 or W.shape[1] < 1:
        raise InputError(f"W: expected a real matrix of shape (V, d) with V, d >= 1, got shape {W.shape} "
                         f"of dtype {W.dtype.name}")
    W = np.asarray(W, dtype=np.float64)
    if not np.all(np.isfinite(W)):
        i, j = (int(x) for x in np.argwhere(~np.isfinite(W))[0])
        raise InputError(f"W: entry [{i}, {j}] is {float(W[i, j])!r}, not finite")
    if b is not None:
        b = np.asarray(b)
        if b.dtype.kind not in "fiu" or b.shape != (W.shape[0],):
            raise InputError(f"b: expected a real vector of shape ({W.shape[0]},), got shape {b.shape}")
        b = np.asarray(b, dtype=np.float64)
        if not np.all(np.isfinite(b)):
            i = int(np.flatnonzero(~np.isfinite(b))[0])
            raise InputError(f"b: entry [{i}] is {float(b[i])!r}, not finite")
    return W, b


def _duplicates(A: np.ndarray) -> np.ndarray:
    """twin[v]: another token with the same lifted row as v, or -1."""
    V = A.shape[0]
    twin = np.full(V, -1, dtype=np.int64)
    if V < 2:
        return twin
    keys = np.ascontiguousarray(A).view(np.dtype((np.void, A.dtype.itemsize * A.shape[1]))).ravel()
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    same = sk[1:] == sk[:-1]
    for i in np.flatnonzero(same):
        a, c = int(order[i]), int(order[i + 1])
        twin[c] = a
        if twin[a] < 0:
            twin[a] = c
    return twin


def argmaxability(W: Any, b: Any = None, *, max_lp_tokens: int = MAX_LP_TOKENS, max_lp_rounds: int = LP_MAX_ROUNDS,
                  progress: bool | None = None) -> BottleneckResult:
    """Decide, for every token, whether some h makes it the unique argmax of ``W @ h + b``.

    Parameters
    ----------
    W : array_like of shape (V, d)
    b : array_like of shape (V,), optional
    max_lp_tokens : int
        Most tokens decided by LP; the others left are undetermined.
    max_lp_rounds : int
        Most cutting-plane LPs per token.
    progress : bool or None
        Progress bars on stderr (None: when stderr is a terminal).

    Returns
    -------
    BottleneckResult
        A verdict and a witness per token, each checked exactly.
    """
    W, b = check_decoder(W, b)
    t_all = time.perf_counter()
    seconds: dict[str, float] = {}
    V, d = W.shape
    A = lifted(W, b)
    verdict = np.full(V, UNDETERMINED, dtype=np.int8)
    wit = Witnesses.empty(V)
    center = W.mean(axis=0)

    t0 = time.perf_counter()
    twin = _duplicates(A)
    dup = twin >= 0
    verdict[dup] = UNARGMAXABLE
    wit.twin[:] = twin
    seconds["duplicates"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if V == 1:
        verdict[0] = ARGMAXABLE
        wit.alone = True
    else:
        screen = ArgmaxScreen.of(A)
        for dtype, bits, bias_rule in ROW_PASSES:
            if bias_rule == "natural" and dtype is np.float64 and b is None:
                continue
            todo = np.flatnonzero(verdict == UNDETERMINED)
            if todo.size == 0:
                break
            _row_pass(screen, W, b, center, todo, dtype, bits, bias_rule, verdict, wit, progress)
    seconds["rows"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    todo = np.flatnonzero(verdict == UNDETERMINED)
    lp_rounds = 0
    if todo.size:
        scaled = Scaled(W, b)
        bar = progress_bar(progress, total=int(min(todo.size, max_lp_tokens)), desc="bottleneck LPs", unit="token")
        for n, v in enumerate(todo.tolist()):
            if n >= max_lp_tokens:
                wit.why[v] = budget_text(max_lp_tokens, "tokens decided by LP",
                                         "a larger --max-lp-tokens may settle it")
                continue
            x0 = scaled.A[v] - scaled.A.mean(axis=0)
            if b is not None:
                x0[-1] = abs(x0[-1])
            out = solve_token(A, W, b, scaled, v, x0, max_lp_rounds)
            lp_rounds += out.rounds
            if out.verdict is True:
                verdict[v] = ARGMAXABLE
                wit.point[v] = out.point
            elif out.verdict is False:
                verdict[v] = UNARGMAXABLE
                wit.farkas[v] = (out.support, out.weights)
            else:
                wit.why[v] = out.why
            bar.update(1)
        bar.close()
    seconds["lp"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - t_all
    return BottleneckResult(V=V, d=d, bias=b is not None, verdict=verdict, witnesses=wit, center=center,
                            seconds=seconds, lp_tokens=int(min(todo.size, max_lp_tokens)), lp_rounds=lp_rounds,
                            budgets={"max_lp_tokens": int(max_lp_tokens), "max_lp_rounds": int(max_lp_rounds)})


def _row_pass(screen: ArgmaxScreen, W: np.ndarray, b: np.ndarray | None, center: np.ndarray, todo: np.ndarray,
              dtype: type, bits: int, bias_rule: str, verdict: np.ndarray, wit: Witnesses,
              progress: bool | None) -> None:
    """One pass of row directions over ``todo`` (module doc, stage 2): every exactly named argmax that is
    still undetermined becomes argmaxable, with the direction's source, bits and bias entry."""
    nonzero = np.abs(W[todo] - center).max(axis=1) > 0
    todo = todo[nonzero]
    bar = progress_bar(progress, total=int(todo.size), desc=f"bottleneck rows ({np.dtype(dtype).name})", unit="token")
    for s in range(0, todo.size, BLOCK):
        src = todo[s:s + BLOCK]
        if b is None:
            c = None
        elif bias_rule == "one":
            c = np.ones(src.size)
        else:
            c = natural_bias_entry(W, center, src, bits)
        G = row_direction(W, center, src, np.full(src.size, bits), c)
        try:
            win = screen.certify(G, dtype=dtype)
        except ValueError:  # d so large that no slice of W fits this float type's exact integers: next pass
            break
        for j in np.flatnonzero(win >= 0):
            u = int(win[j])
            if verdict[u] == UNDETERMINED:
                verdict[u] = ARGMAXABLE
                wit.source[u] = int(src[j])
                wit.bits[u] = bits
                wit.c[u] = 0.0 if c is None else float(c[j])
        bar.update(int(src.size))
    bar.close()
