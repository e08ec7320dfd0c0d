"""The compiled kernels of :mod:`ntpcert.solve.structured.compiled`: the block update and one epoch.

They live at module level, so that numba's on-disk cache (``cache=True``) finds them again in the next
process: defined inside a function, the epoch referred to the block update as a closure variable, which
numba's cache index cannot match across processes, and every process compiled both again (about 1.7 s; the
index grew by an entry each time). This module imports numba; import it only where the compiled path runs.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def block(g, off, sizes, weight, c, mu0, out):  # pragma: no cover - compiled
    # the root mu of phi(mu) = sum_S n (g + mu) + sum_off n (1 + g + mu)_+ (block.py); S = not off
    C = g.size
    s = 0.0
    for v in range(C):
        if not off[v]:
            s += sizes[v] * g[v]
    mu = -s / weight if not np.isfinite(mu0) else mu0
    done = False
    for _ in range(3):
        num = s
        den = weight
        for v in range(C):
            if off[v] and 1.0 + g[v] > -mu:
                num += sizes[v] * (1.0 + g[v])
                den += sizes[v]
        new = -num / den
        if new == mu:
            done = True
            break
        mu = new
    if not done:  # sort the candidates still active after Newton's steps
        cand = np.empty(C, np.int64)
        k = 0
        for v in range(C):
            if off[v] and 1.0 + g[v] > -mu:
                cand[k] = v
                k += 1
        u = np.empty(k)
        for i in range(k):
            u[i] = 1.0 + g[cand[i]]
        order = np.argsort(-u, kind="mergesort")
        mu = -s / weight
        acc, wacc = s, weight
        for i in range(k):
            v = cand[order[i]]
            acc += sizes[v] * u[order[i]]
            wacc += sizes[v]
            cand_mu = -acc / wacc
            if u[order[i]] + cand_mu > 0:
                mu = cand_mu
    inv = -1.0 / c
    for v in range(C):
        x = ((1.0 + g[v] + mu) if off[v] else (g[v] + mu)) * inv
        out[v] = x if (x < 0.0 or not off[v]) else 0.0
    return mu


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def dot(a, b):  # pragma: no cover - compiled
    # reassociation lets LLVM vectorise the sum (a strict left-to-right sum runs one lane at a time: a full
    # epoch at V = 500, m = 4,000, d = 64 took 80 ms); only the rounding of the sum changes, no NaN or inf rule
    acc = 0.0
    for k in range(a.size):
        acc += a[k] * b[k]
    return acc


@numba.njit(cache=True, nogil=True)
def epoch(Wc, A, H, order, off, sizes, weight, diag, mu, ptr, idx, full, slack):  # pragma: no cover
    # full: every class of each context, and the kept lists (ptr, idx) are not read; else the classes
    # idx[ptr[j]:ptr[j+1]] of context j only (its support classes and its unshrunk margins)
    m, C = A.shape
    d = H.shape[1]
    g = np.empty(C)
    new = np.empty(C)
    offs = np.empty(C, np.bool_)
    sz = np.empty(C)
    cls = np.empty(C, np.int64)
    for t in range(order.size):
        j = order[t]
        c = diag[j]
        h = H[j]
        if full:
            n = C
            for v in range(C):
                cls[v] = v
        else:
            n = ptr[j + 1] - ptr[j]
            for i in range(n):
                cls[i] = idx[ptr[j] + i]
        for i in range(n):
            v = cls[i]
            g[i] = dot(Wc[v], h) - c * A[j, v]
            offs[i] = off[j, v]
            sz[i] = sizes[v]
        mu[j] = block(g[:n], offs[:n], sz[:n], weight[j], c, mu[j], new[:n])
        for i in range(n):
            v = cls[i]
            dv = new[i] - A[j, v]
            if dv != 0.0:
                for k in range(d):
                    Wc[v, k] += dv * h[k]
                A[j, v] = new[i]
