r"""Compatibility (4) of large sparse systems, reduced to the tokens that constrain it.

Write (4) with one shift per context (our derivation): W solves (4) iff there are :math:`c_j` with
:math:`w_z^\top h_j = \log p_{j,z} + c_j` for every j and :math:`z \in S_j`. Token z's unknown
:math:`w_z` meets the contexts :math:`J_z = \{j : z \in S_j\}`, so (4) is solvable iff some c makes
:math:`H_{J_z} w_z = (\log p_{j,z} + c_j)_{j \in J_z}` solvable for every z. A token whose rows
:math:`H_{J_z}` are independent (certified by a rank mod p equal to :math:`|J_z|`) is solvable for any
right-hand side: it puts no constraint on c. Only the *dependent* tokens D do.

Dually, the left null vectors of this shift system are the arrays :math:`\eta_{j,z}` (:math:`z \in S_j`)
with :math:`\sum_{j} \eta_{j,z} h_j = 0` for every token and :math:`\sum_{z \in S_j} \eta_{j,z} = 0` for
every context; independence of :math:`H_{J_z}` forces :math:`\eta_{\cdot,z} = 0` off D, and a context with
a single token of D left forces its entry to 0 (repeated until nothing changes). The survivors form a
much smaller matrix A (per token of D the columns of H its contexts use, per context one sum row).
Every :math:`\eta` in its kernel, restricted to the non-anchor pairs, is a left null vector
:math:`y` of :math:`A_{eq}` with :math:`y^\top b = \eta^\top \log p` (the anchors' entries are
:math:`-\sum` of the others), and conversely. So:

* **not compatible**: a kernel vector with :math:`y^\top b \ne 0`, found mod p, lifted by rational
  reconstruction and checked exactly on the whole system (the existing ``violating_null_vector``);
* **compatible**: k = dim ker(A mod p) vectors lifted, each checked exactly in the kernel with
  :math:`y^\top b = 0` exactly; they are independent (mod p they are the basis found, scaled), and
  dim ker A over Q is at most k (a rank mod p is a lower bound), so they span it and every left null
  vector of :math:`A_{eq}` has :math:`y^\top b = 0`.

Lifting works when the kernel has small rational entries (0/1 embeddings such as one-hot k-grams). For
Gaussian embeddings a kernel vector's entries are minors of about d·53 bits each; then the reduction
reports the sizes and stops (nothing is claimed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcert.certificate.checker.reduction import (  # the checker's construction, rebuilt there from the instance
    MAX_REDUCED_CELLS, ReducedSystem, reduced_system,
)
from ntpcert.exact.modular import PRIMES, lift_vector, nmod_matrix
from ntpcert.rows.kesler import KeslerSystem

#: Kernel vectors lifted at most (a violation is usually the first).
MAX_KERNEL = 4000


@dataclass(frozen=True, eq=False)
class Reduction:
    """What the frequent-token reduction settled (module doc).

    Attributes
    ----------
    holds : bool or None
        False with ``violating``, True with ``basis``, None when it settled nothing (``why``).
    violating : ndarray of shape (r,) or None
        An exact integer left null vector of :math:`A_{eq}` with :math:`y^\\top b \\ne 0`.
    basis : list of ndarray of shape (r,) or None
        Exact left null vectors spanning the left null space of :math:`A_{eq}`, each with
        :math:`y^\\top b = 0`.
    dependent : tuple of int
        The tokens of D that survived the reduction.
    shape : tuple of int
        (rows, columns) of the reduced matrix.
    modulus : int
    why : str
        What was done, in words (and, when ``holds`` is None, what stopped it).
    seconds : float
    """

    holds: bool | None
    violating: np.ndarray | None
    basis: list | None
    dependent: tuple[int, ...]
    shape: tuple[int, int]
    modulus: int
    why: str
    seconds: float


def reduce_compatibility(system: KeslerSystem, *, p: int = PRIMES[0],
                         max_cells: int = MAX_REDUCED_CELLS) -> Reduction:
    """Decide (4) through the dependent tokens (module doc); every definite answer is checked exactly."""
    from ntpcert.exact.left_null import exact_left_null, log_odds_sign

    t0 = time.perf_counter()
    inst = system.instance

    def out(holds, why, y=None, basis=None, tokens=(), shape=(0, 0)):
        return Reduction(holds, y, basis, tokens, shape, p, why, time.perf_counter() - t0)

    red = reduced_system(inst, p, max_cells=max_cells)
    if not isinstance(red, ReducedSystem):
        return out(None, f"the dependent tokens give a reduced system of {red[0]:,} x {red[1]:,}, more than the "
                   f"{max_cells:,} cells solved mod p here", shape=red)
    tokens, var, shape = red.tokens, red.var, red.A.shape
    if not var:
        return out(True, f"every token's contexts have independent embeddings (rank mod {p}): (4) is solvable for "
                   "every right-hand side", basis=[])
    X, k = nmod_matrix(red.A, p).nullspace()
    k = int(k)
    what = (f"{len(tokens)} dependent tokens, reduced system {shape[0]:,} x {shape[1]:,}, kernel dimension {k} "
            f"mod {p}")
    if k == 0:
        return out(True, what + ": (4) is solvable for every right-hand side", basis=[], tokens=tokens, shape=shape)
    if k > MAX_KERNEL:
        return out(None, what + f", more than {MAX_KERNEL} vectors to lift", tokens=tokens, shape=shape)
    index = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(system.eq_context, system.eq_token))}
    anchors = inst.anchors()
    basis, etas = [], []
    for c in range(k):
        eta = lift_vector([int(X[i, c]) for i in range(len(var))], p)
        if eta is None:
            return out(None, what + f"; kernel vector {c + 1} does not lift to small integers (its exact entries are "
                       "large: nothing is claimed)", tokens=tokens, shape=shape)
        y = np.zeros(system.n_eq, dtype=np.int64)
        for (j, z), e in zip(var, eta.tolist()):
            if e and z != int(anchors[j]):
                y[index[(j, z)]] += e
        if not np.any(y) or not exact_left_null(system, y):
            return out(None, what + f"; lifted kernel vector {c + 1} fails the exact check", tokens=tokens,
                       shape=shape)
        s = log_odds_sign(system, y)
        if s:
            return out(False, what + f"; an exact left null vector of A_eq with {int(np.count_nonzero(y))} non-zeros "
                       "has y^T b != 0", y=y, tokens=tokens, shape=shape)
        if s is None:
            return out(None, what + "; the sign of y^T b was not decided", tokens=tokens, shape=shape)
        basis.append(y)
        etas.append(eta % p)
    if int(nmod_matrix(np.array(etas, dtype=np.int64), p).rank()) != k:
        return out(None, what + "; the lifted kernel vectors are dependent mod p", tokens=tokens, shape=shape)
    return out(True, what + f"; the {k} lifted kernel vectors are exact left null vectors of A_eq with y^T b = 0 "
               "and span that null space", basis=basis, tokens=tokens, shape=shape)


__all__ = ["MAX_KERNEL", "Reduction", "reduce_compatibility"]
