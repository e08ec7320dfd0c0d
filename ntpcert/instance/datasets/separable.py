r"""Exactly NTP-separable data on many tokens, with supports of one and two tokens (not a CLI built-in).

The decoder's rows are :math:`w_v = (0, c_v)` with V distinct vertices :math:`c_v` of
:math:`\{-1, 1\}^{d-1}`, which all lie on one sphere, so each is the strict argmax of its own cone. A
one-token context has :math:`h = 3 w_a + \delta`; a two-token one, for vertices a, b that differ in one
entry i, has :math:`h = 3 (w_a + w_b) + \delta` with :math:`\delta_i = 0`, which makes the logits of a and
b exactly equal (:math:`\delta \in \{-1, 0, 1\}^d`, first entry 0). Only contexts whose other logits are
strictly lower are kept, so :math:`W = (w_v)` satisfies (6) up to a scale, in exact arithmetic. Pairs
a, b share many contexts whose embeddings all satisfy :math:`(w_a - w_b)^\top h = 0`, so no pair has a
Farkas ray (``docs/math.md``, witnesses on one pair of tokens): the worst case for the pair screen.
"""

from __future__ import annotations

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance

__all__ = ["hypercube_separable"]


def hypercube_separable(rng: np.random.Generator, m: int, d: int, V: int) -> NTPInstance:
    """The instance (module doc): m contexts, embedding dimension d >= 2, V <= 2^(d-1) tokens, drawn with
    ``rng``; counts 1 to 4 on each support."""
    if d < 2 or V < 2 or V > 2 ** (d - 1):
        raise InputError(f"hypercube_separable: needs d >= 2 and 2 <= V <= 2^(d-1), got d = {d}, V = {V}")
    verts = np.array(np.meshgrid(*[[-1, 1]] * (d - 1), indexing="ij")).reshape(d - 1, -1).T
    W = np.zeros((V, d), dtype=np.int64)
    W[:, 1:] = verts[rng.choice(len(verts), size=V, replace=False)]
    H = np.zeros((m, d))
    C = np.zeros((m, V), dtype=np.int64)
    j = 0
    while j < m:
        delta = rng.integers(-1, 2, size=d)
        delta[0] = 0
        a = int(rng.integers(V))
        near = np.flatnonzero(np.abs(W[:, 1:] - W[a, 1:]).sum(axis=1) == 2)
        if near.size and rng.random() < 0.5:
            b = int(rng.choice(near))
            delta[np.flatnonzero(W[a] != W[b])] = 0
            h, S = 3 * (W[a] + W[b]) + delta, [a, b]
        else:
            h, S = 3 * W[a] + delta, [a]
        z = W @ h
        others = np.setdiff1d(np.arange(V), S)
        if np.all(z[S] == z[S[0]]) and np.all(z[others] < z[S[0]]):
            H[j] = h
            C[j, S] = rng.integers(1, 5, size=len(S))
            j += 1
    return NTPInstance.from_counts(H, C, name=f"hypercube separable m={m} d={d} V={V}")
