r"""Certified lower bounds on rank H by the cheapest sound route, and their exact re-check.

Lemma 1 needs :math:`\mathrm{rank}\,H = m` for the (m, d) embeddings (which forces :math:`d \ge m`;
the paper states :math:`d > m`, but its argument uses only that :math:`Z \mapsto W H^\top` is onto,
which rank m gives: :math:`W = Z (HH^\top)^{-1} H`). The witness here proves
:math:`\mathrm{rank}\,H \ge \text{bound}` in two parts:

**Peeling** (structure). A column with exactly one non-zero among the rows not yet peeled pins that
row: record the pair (row, column), remove the row, repeat. Ordered by peel time, the peeled rows
:math:`r_1, \dots, r_t` and their columns :math:`c_1, \dots, c_t` form a submatrix
:math:`T_{ik} = H_{r_i c_k}` with :math:`T_{ik} = 0` for :math:`i > k` (row :math:`r_i` was still
unpeeled when :math:`c_k` was its only non-zero) and a non-zero diagonal: T is triangular, so
:math:`\det T \ne 0`. Every column :math:`c_k` is zero on the rows never peeled (R), so with
O the other columns, :math:`H = \begin{pmatrix} T & X \\ 0 & H_{RO}\end{pmatrix}` up to order and
:math:`\mathrm{rank}\,H = t + \mathrm{rank}\,H_{RO}`. One-hot context embeddings (a permutation) peel
completely; one-hot k-gram rows (a selection of k ones) peel as far as their structure allows. The
check costs one pass over the pivots' columns.

**The core mod p.** :math:`\mathrm{rank}(H_{RO} \bmod p) \le \mathrm{rank}\,H_{RO}`
(:mod:`ntpcert.exact.modular`), and so is the rank of any column selection :math:`H_{RC'}` with
:math:`C' \subseteq O` (a projection :math:`H_{RO}P` by a 0/1 matrix P): when d is much larger than the
core's rows, a selection of as many columns as rows (``projected-mod-p``) proves full row rank at the
cost of a square matrix. The witness names p and the selected columns; the checker reduces the same
integers mod the same prime.

So ``bound = t + core_rank`` is a certified lower bound, and ``bound == m`` proves Lemma 1's premise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.exact.modular import PRIMES, is_modulus, rank_mod, residues

#: The largest core whose rank mod p is computed, in elimination work :func:`rank_work`
#: (:math:`\min(r, c)^2 \max(r, c)` for an r x c core): a size limit, decided before any work, never by a
#: clock. Larger cores are skipped and named so. It is what a limit of 20 s predicted from the size gave
#: (a flint ``nmod_mat`` rank took about 0.6 s for 1000 x 1024), e.g. a square core of 3,240 rows.
CORE_RANK_MAX_WORK = 34_000_000_000
#: Measured cost of a flint ``nmod_mat`` rank: about 0.6 s for 1000 x 1024, cubic in the size.
_RANK_SECONDS_PER_CELL = 0.6 / (1000 * 1000 * 1024)


def rank_work(rows: int, cols: int) -> int:
    r"""Elimination work of a rank mod p of a ``rows`` x ``cols`` matrix: :math:`\min^2 \cdot \max`."""
    n = min(int(rows), int(cols))
    return n * n * max(int(rows), int(cols))


#: A core with more columns than this multiple of its rows is projected onto a column selection.
PROJECT_RATIO = 1.5


def predicted_rank_seconds(rows: int, cols: int) -> float:
    """Predicted seconds of a flint rank mod p of a ``rows`` x ``cols`` matrix (cubic model; informative
    only: what is tried is decided by :data:`CORE_RANK_MAX_WORK`)."""
    n = min(rows, cols)
    return _RANK_SECONDS_PER_CELL * n * n * max(rows, cols)


@dataclass(frozen=True)
class RankWitness:
    r"""A certified lower bound ``bound`` on rank H (module doc).

    Attributes
    ----------
    m, d : int
        Shape of H.
    pivots : tuple of (int, int)
        The peeled (row, column) pairs, in peel order.
    core_rows, core_cols : tuple of int
        The rows never peeled, and the columns whose rank mod ``modulus`` is ``core_rank``
        (all non-pivot columns, or a selection of them when ``route`` is ``projected-mod-p``).
    core_rank : int
        Rank of ``H[core_rows][:, core_cols]`` mod ``modulus`` (0 when not computed).
    modulus : int or None
        The prime of the core's rank; None when the core is empty or was not tried.
    route : str
        ``permutation`` (every row peeled, one non-zero per row), ``triangular`` (every row peeled),
        ``sparse-mod-p`` (peeled rows plus a core mod p), ``dense-mod-p``, ``projected-mod-p``,
        or ``not-full`` (the bound falls short of m).
    skipped : str
        Why the core's rank was not computed (empty when it was, or when there was no core).
    """

    m: int
    d: int
    pivots: tuple[tuple[int, int], ...]
    core_rows: tuple[int, ...]
    core_cols: tuple[int, ...]
    core_rank: int
    modulus: int | None
    route: str
    skipped: str = ""

    @classmethod
    def impossible(cls, m: int, d: int) -> "RankWitness":
        """The witness of nothing when d < m (rank m is impossible; nothing is computed)."""
        return cls(m, d, (), (), (), 0, None, "not-full", skipped=f"d = {d} < m = {m}: rank m is impossible")

    @property
    def certificate_entry(self) -> tuple[str, object]:
        """``(key, value)`` for a certificate section: ``embeddings_rank_modulus`` p when the witness is the
        rank of the whole of H mod p, else ``embeddings_rank_witness`` (:meth:`to_json`)."""
        if self.route == "dense-mod-p" and len(self.core_cols) == self.d:
            return "embeddings_rank_modulus", self.modulus
        return "embeddings_rank_witness", self.to_json()

    @property
    def bound(self) -> int:
        """The certified lower bound on rank H."""
        return len(self.pivots) + self.core_rank

    @property
    def full(self) -> bool:
        """True when the bound proves rank H = m."""
        return self.bound == self.m

    def describe(self) -> str:
        """The witness in words."""
        t = len(self.pivots)
        if self.route in ("permutation", "triangular"):
            kind = "a permutation" if self.route == "permutation" else "a triangular structure"
            return f"H ({self.m} x {self.d}) contains {kind} on all {self.m} rows (peeled column singletons): rank m"
        core = (f"a core of {len(self.core_rows)} x {len(self.core_cols)} with rank {self.core_rank} mod the prime "
                f"{self.modulus}" if self.modulus is not None else "no core rank")
        text = (f"rank H >= {self.bound} of m = {self.m}: {t} rows peeled (triangular) plus {core}" if t else
                f"rank H >= {self.bound} of m = {self.m}: {core}")
        if self.skipped:
            text += f" ({self.skipped})"
        return text

    def to_json(self) -> dict:
        """The certificate form (``embeddings_rank_witness``)."""
        return {"pivots": [[int(r), int(c)] for r, c in self.pivots], "core_rows": [int(r) for r in self.core_rows],
                "core_cols": [int(c) for c in self.core_cols], "core_rank": int(self.core_rank),
                "modulus": self.modulus}


def _csc(H: np.ndarray):
    import scipy.sparse as sp

    return sp.csc_matrix(np.asarray(H, dtype=np.float64))


def peel(H: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Peel column singletons (module doc). Returns the pivots in peel order and a boolean mask of shape
    (m,) of the rows never peeled. Costs O(nnz(H))."""
    m, d = H.shape
    C = _csc(H)
    R = C.tocsr()
    alive = np.ones(m, dtype=bool)
    count = np.diff(C.indptr).astype(np.int64)
    stack = [int(c) for c in np.flatnonzero(count == 1)]
    pivots: list[tuple[int, int]] = []
    cind, cptr, rind, rptr = C.indices, C.indptr, R.indices, R.indptr
    while stack:
        c = stack.pop()
        if count[c] != 1:
            continue
        rows = cind[cptr[c]:cptr[c + 1]]
        live = rows[alive[rows]]
        r = int(live[0])
        pivots.append((r, c))
        alive[r] = False
        for c2 in rind[rptr[r]:rptr[r + 1]]:
            count[c2] -= 1
            if count[c2] == 1:
                stack.append(int(c2))
    return pivots, alive


def certify_rank(H: np.ndarray, *, max_work: int = CORE_RANK_MAX_WORK,
                 primes: tuple[int, ...] = PRIMES[:2]) -> RankWitness:
    """The cheapest certified lower bound on the rank of ``H`` (array of shape (m, d)), aiming at m.

    Peels the structure first; then the rank mod p of the core (or of a column selection of it when it
    is much wider than tall), unless its elimination work :func:`rank_work` exceeds ``max_work``: then
    the witness says so in ``skipped`` (naming the core's size and the limit) and the bound stays at the
    peeled rows."""
    H = np.asarray(H, dtype=np.float64)
    m, d = H.shape
    pivots, alive = peel(H)
    rest = np.flatnonzero(alive)
    if rest.size == 0:
        one_per_row = bool(np.all(np.count_nonzero(H, axis=1) == 1))
        return RankWitness(m, d, tuple(pivots), (), (), 0, None, "permutation" if one_per_row else "triangular")
    used = np.zeros(d, dtype=bool)
    used[[c for _, c in pivots]] = True
    other = np.flatnonzero(~used)
    core = H[np.ix_(rest, other)]
    nonzero_cols = other[np.any(core != 0, axis=0)]
    route = "sparse-mod-p" if pivots else "dense-mod-p"
    cols = other
    if nonzero_cols.size > PROJECT_RATIO * rest.size:
        cols = _selection(H, rest, nonzero_cols)
        route = "projected-mod-p"
    if nonzero_cols.size < rest.size:  # fewer usable columns than rows: the core cannot have full rank
        route = "not-full"
    n_rows, n_cols = int(rest.size), int(cols.size)
    need = rank_work(n_rows, n_cols)
    if need > max_work:
        return RankWitness(m, d, tuple(pivots), tuple(int(r) for r in rest), (), 0, None, "not-full",
                           skipped=f"the rank mod p of the {n_rows} x {n_cols} core was skipped: too large to "
                                   f"try here ({need:.3g} cells of elimination work min^2·max, more than "
                                   f"CORE_RANK_MAX_WORK = {max_work:.3g})")
    sub = H[np.ix_(rest, cols)]
    best = (0, None)
    for p in primes:
        r = rank_mod(residues(sub, p), p) if sub.size else 0
        if r > best[0]:
            best = (r, p)
        if r == n_rows:
            break
    r, p = best
    if len(pivots) + r < m:
        route = "not-full"
    return RankWitness(m, d, tuple(pivots), tuple(int(x) for x in rest), tuple(int(c) for c in cols), r, p, route)


def _selection(H: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """A column selection of ``cols`` about as wide as ``rows`` is long: the columns in order, skipping
    none, but at least len(rows) of them with a margin for ranks that drop mod p."""
    k = min(cols.size, rows.size + max(8, rows.size // 50))
    return np.sort(cols[:k])


# ============================================================================ the checker
def check_rank_witness(H: np.ndarray, witness: dict, want: int) -> str:
    """Re-check a rank witness (the JSON form of :class:`RankWitness`) against ``H`` (shape (m, d)),
    exactly, without trusting its producer: the pivots' triangular structure (module doc), the core's
    rows being exactly the unpeeled rows, its columns avoiding the pivots, and its rank mod the prime
    recomputed. Returns ``""`` when it proves ``rank H >= want``, else what fails."""
    H = np.asarray(H, dtype=np.float64)
    m, d = H.shape
    try:
        pairs = witness["pivots"]
        if type(pairs) is not list or any(type(rc) is not list or len(rc) != 2 for rc in pairs):
            return "pivots: expected a list of [row, column] pairs"
        pivots = [(r, c) for r, c in pairs]
        core_rows, core_cols, core_rank, p = (witness["core_rows"], witness["core_cols"], witness["core_rank"],
                                              witness["modulus"])
    except (KeyError, TypeError) as e:
        return f"malformed rank witness ({e})"
    for name, xs in (("pivots", [x for rc in pivots for x in rc]), ("core_rows", core_rows),
                     ("core_cols", core_cols), ("core_rank", [core_rank])):
        if type(xs) is not list or any(type(x) is not int for x in xs):  # integers only: not 5.0, not true
            bad = xs if type(xs) is not list else next(x for x in xs if type(x) is not int)
            return f"{name}: {bad!r} is not an integer"
    rows = [r for r, _ in pivots]
    cols = [c for _, c in pivots]
    if any(not (0 <= r < m) for r in rows + core_rows) or any(not (0 <= c < d) for c in cols + core_cols):
        return "an index is out of range"
    if len(set(rows)) != len(rows) or len(set(cols)) != len(cols):
        return "a pivot row or column repeats"
    if sorted(core_rows) != sorted(set(range(m)) - set(rows)):
        return "core_rows are not exactly the rows that were not peeled"
    if set(core_cols) & set(cols) or len(set(core_cols)) != len(core_cols):
        return "core_cols repeat or meet a pivot column"
    if len(pivots) + core_rank < want:
        return f"the witness bounds the rank by {len(pivots) + core_rank}, less than {want}"
    # triangular: H[r_i, c_k] == 0 for i > k (r_i peeled after c_k), and H[r_k, c_k] != 0;
    # columns c_k vanish on the core rows
    order = np.full(m, len(pivots), dtype=np.int64)  # peel time; unpeeled rows come last
    order[rows] = np.arange(len(pivots))
    if pivots:
        block = _csc(H)[:, cols].tocoo()  # (m, t), its exact non-zeros
        nz_r, nz_k = block.row.astype(np.int64), block.col.astype(np.int64)
        late = order[nz_r] > nz_k
        if np.any(late):
            i = int(np.flatnonzero(late)[0])
            return f"pivot column {cols[nz_k[i]]} is non-zero at row {int(nz_r[i])}, which was peeled later or never"
        if np.any(H[rows, cols] == 0):
            return "a pivot entry is zero"
    if p is not None and not is_modulus(p) or core_rank and p is None:
        return f"modulus {p!r} is not a prime 2 <= p < 2^63"
    if core_rank:
        if core_rank > min(len(core_rows), len(core_cols)):
            return "core_rank exceeds the core's size"
        sub = H[np.ix_(core_rows, core_cols)]
        got = rank_mod(residues(sub, p), p)
        if got < core_rank:
            return f"the core has rank {got} mod {p}, not {core_rank}"
    return ""


__all__ = ["CORE_RANK_MAX_WORK", "RankWitness", "certify_rank", "check_rank_witness", "peel",
           "predicted_rank_seconds", "rank_work"]

