r"""The frequent-token reduction of (4), as the checker rebuilds it from the instance alone.

A certificate with ``compatibility.frequent_tokens_modulus`` p claims that the left null space of
:math:`A_{eq}` has no more dimensions than the kernel of a much smaller matrix mod p: the rows of the
tokens whose contexts' embeddings are not certified independent (rank mod p), and one sum row per
context that keeps at least two of them (the derivation is in :mod:`ntpcert.pipeline.frequent_tokens`,
which builds its decision on this same construction). :func:`left_null_dimension_bound` builds that
matrix, deterministically, and returns the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.exact.modular import nmod_matrix, residues
from ntpcert.errors import CertificateTooLarge

#: Largest reduced matrix (rows x columns) whose kernel is computed mod p.
MAX_REDUCED_CELLS = 6_000_000

def _independent(Hres: np.ndarray, rows: list[int], p: int) -> bool:
    """Rows of H (their residues mod p) certified independent: rank mod p equals their number."""
    if len(rows) > Hres.shape[1]:
        return False
    sub = Hres[rows]
    if len(rows) == 1:
        return bool(np.any(sub))
    return int(nmod_matrix(sub, p).rank()) == len(rows)


@dataclass(frozen=True, eq=False)
class ReducedSystem:
    """The reduced matrix mod p (module doc): ``A`` (int64 residues) of shape (rows, len(var)), whose
    column i belongs to the pair ``var[i] = (j, z)``; ``tokens`` are the dependent tokens left."""

    A: np.ndarray
    var: list
    tokens: tuple[int, ...]


def reduced_system(instance, p: int, *, max_cells: int = MAX_REDUCED_CELLS) -> ReducedSystem | tuple[int, int]:
    """The reduced system mod p of ``instance`` (module doc), or its shape (rows, columns) when it has
    more than ``max_cells`` cells. Deterministic: the checker rebuilds the same matrix."""
    V = instance.V
    contexts_of: list[list[int]] = [[] for _ in range(V)]
    for j, S in enumerate(instance.supports):
        for z in S.tolist():
            contexts_of[z].append(j)
    Hres = residues(instance.embeddings, p)
    live = {z: list(J) for z, J in enumerate(contexts_of) if len(J) >= 2 or (J and not np.any(Hres[J[0]]))}
    dependent: set[int] = set()  # tokens whose current rows are known not to be certified independent
    while True:  # drop independent tokens, then contexts left with a single dependent token
        changed = False
        for z in list(live):
            if z in dependent:
                continue
            if _independent(Hres, live[z], p):
                del live[z]
                changed = True
            else:
                dependent.add(z)
        per_ctx: dict[int, int] = {}
        for J in live.values():
            for j in J:
                per_ctx[j] = per_ctx.get(j, 0) + 1
        for z in list(live):
            kept = [j for j in live[z] if per_ctx[j] >= 2]
            if len(kept) != len(live[z]):
                changed = True
                dependent.discard(z)  # fewer rows: may be independent now
                if kept:
                    live[z] = kept
                else:
                    del live[z]
        if not changed:
            break
    tokens = tuple(sorted(live))
    var = [(j, z) for z in tokens for j in live[z]]
    blocks = [(z, live[z], np.flatnonzero(np.any(Hres[live[z]] != 0, axis=0))) for z in tokens]
    ctxs = sorted({j for j, _ in var})
    n_rows = sum(u.size for _, _, u in blocks) + len(ctxs)
    if n_rows * len(var) > max_cells:
        return n_rows, len(var)
    col = {v: i for i, v in enumerate(var)}
    A = np.zeros((n_rows, len(var)), dtype=np.int64)
    r0 = 0
    for z, J, used in blocks:
        A[r0:r0 + used.size, [col[(j, z)] for j in J]] = Hres[np.ix_(J, used)].T
        r0 += used.size
    crow = {j: r0 + i for i, j in enumerate(ctxs)}
    for (j, z), c in col.items():
        A[crow[j], c] = 1
    return ReducedSystem(A, var, tokens)


def left_null_dimension_bound(instance, p: int) -> int:
    """An upper bound on dim null(A_eq^T): the kernel dimension of the reduced system mod p (module doc).

    Raises :class:`~ntpcert.errors.CertificateTooLarge` when the reduced system has more than
    :data:`MAX_REDUCED_CELLS` cells: too large to rebuild here, which says nothing about the claim (the
    producer decides by the same construction under the same cap, so it never writes such a certificate)."""
    red = reduced_system(instance, p, max_cells=MAX_REDUCED_CELLS)
    if not isinstance(red, ReducedSystem):
        raise CertificateTooLarge(f"compatibility.frequent_tokens_modulus: the reduced system mod {p} is "
                                  f"{red[0]:,} x {red[1]:,}, over the {MAX_REDUCED_CELLS:,} cells "
                                  "(MAX_REDUCED_CELLS) this checker rebuilds")
    if not red.var:
        return 0
    return len(red.var) - int(nmod_matrix(red.A, p).rank())


__all__ = ["MAX_REDUCED_CELLS", "ReducedSystem", "left_null_dimension_bound", "reduced_system"]
