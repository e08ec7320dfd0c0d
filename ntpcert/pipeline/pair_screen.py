r"""A streaming screen of token pairs for a Farkas ray of (6), with a budget of work (our derivation).

For two tokens :math:`z \ne v` let :math:`A` be the contexts whose support holds both, :math:`X` those
whose support holds exactly one of them, and :math:`\sigma_j = +1` when that one is z, :math:`-1` when it
is v. Restricted to :math:`u = w_z - w_v`, (6) asks :math:`h_j^\top u = 0` on A and
:math:`\sigma_j h_j^\top u \ge 1` on X. By Farkas' lemma this part is infeasible iff some
:math:`y` with :math:`y_X \ge 0`, :math:`y_X \ne 0` (:math:`y_A` free) has

.. math:: \sum_{j\in A\cup X} y_j\, g_j = 0,\qquad g_j = \sigma_j h_j\ (\sigma_j = 1 \text{ on } A),

and then :math:`a_{j,z} = \sigma_j y_j`, :math:`a_{j,v} = -\sigma_j y_j` (all other entries 0) is a
Farkas ray of the whole of (6) (:mod:`ntpcert.exact.separability`): its columns sum to 0, its rows
:math:`z` and :math:`v` are :math:`\pm\sum_j y_j g_j = 0`, and its only off-support entries are
:math:`-y_j \le 0` on X, with mass :math:`\sum_X y_j > 0`. A minimal such y is supported on a *circuit*
(its vectors :math:`g_j` have a one-dimensional space of dependencies), so on at most
:math:`\operatorname{rank}\{h_j\} + 1 \le d + 1` contexts (``docs/math.md``, "The pair screen").

The screen never builds an LP over all contexts or all pairs:

* **Pairs** are taken in a fixed order, most shared contexts first (then most split ones, then the
  token indices), from the product :math:`S^\top S` of the (m, V) support mask; pairs that share no
  support (A empty: a ray is then a conic dependency among the split contexts alone) come last, and only
  where V is at most :data:`ALL_PAIRS_MAX_TOKENS` (past that, :math:`S^\top S` is kept sparse).
* **Contexts** of a pair stream in: its LP (unknowns y, :math:`d + 1` equality rows: the vector
  equation and :math:`\mathbf 1^\top y_X = 1`) is solved on the first
  :data:`FIRST_CONTEXTS` of its contexts (A and X in data order, half from each where both have
  enough), then on :data:`ROUND_GROWTH` times as many, up to all of them or :data:`ROUND_MAX`
  :math:`\cdot (d + 1)`; small
  first rounds keep the circuit small (4 to 35 contexts on the character corpora measured).
  A ray on some of a pair's contexts, padded with zeros, is a ray on all of them, so this loses nothing
  that is found; a pair whose LP has no solution on all its contexts has no ray, and one past the cap is
  left.
* **Exact.** HiGHS' dual simplex gives a basic y (at most :math:`d + 1` non-zeros). Its support is solved
  again in integers (``fmpz_mat.nullspace`` of the dyadic rows, :func:`ntpcert.pipeline.pairs.null_vectors`):
  a one-dimensional null space, signed so that its X entries are :math:`\ge 0`, is the circuit itself;
  a larger one is combined with rational weights close to the float y. The ray is kept only when its
  X entries are non-negative and not all 0, and it passes :func:`ntpcert.exact.separability.check_ray`
  on the whole instance. Nothing is claimed from a float answer.
* **Work, not time.** At most :data:`SCREEN_MAX_PAIRS` pairs and :data:`SCREEN_MAX_WORK` units of LP work
  (each LP counts :data:`LP_BASE_WORK` plus its non-zeros times (1 + its simplex iterations), and gets
  what is left as its iteration limit), so the same input gives the same answer on any machine and
  under any load.

The screen can only say "not separable". Data that are not separable may have no ray on one pair (a
ray may need three tokens); the engines after it (parts, the structured solver) then decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ntpcert.instance import NTPInstance

#: Pairs the screen tries, at most (a budget of work).
SCREEN_MAX_PAIRS = 256
#: Work of all the screen's LPs together, at most: each LP counts LP_BASE_WORK plus its non-zeros times
#: (1 + its simplex iterations), a count that does not depend on the machine (a budget of work: about
#: 2.5 s of HiGHS on a quiet 2-core machine, 10 s at load 7; on the character corpora measured a ray took 1
#: to 3 LPs of 0 to 4 iterations).
SCREEN_MAX_WORK = 200_000_000
#: What one LP counts before its non-zeros: the set-up of a HiGHS call (about 0.5 million of them in time).
LP_BASE_WORK = 500_000
#: A pair's first LP has this many of its contexts; each next round has ROUND_GROWTH times as many ...
FIRST_CONTEXTS = 32
ROUND_GROWTH = 4
#: ... up to ROUND_MAX·(d + 1) contexts (a size rule: larger pairs are cut there).
ROUND_MAX = 32
#: Up to this many tokens, the pairs that share no support are screened too (after the others).
ALL_PAIRS_MAX_TOKENS = 512
#: Entries of the float y at most this times its largest are read as 0 (its support).
SUPPORT_TOL = 1e-9
#: Largest denominator of the rational weights that combine a null space of more than one vector.
WEIGHT_DENOMINATOR = 10**6
#: Contexts named in a witness's text, at most.
TEXT_CONTEXTS = 4


@dataclass(frozen=True, eq=False)
class PairRay:
    """A Farkas ray of (6) on one pair of tokens, exact and checked on the whole instance.

    Attributes
    ----------
    ray : dict
        ``{(v, j): Fraction}``, the Farkas ray (:mod:`ntpcert.exact.separability`).
    tokens : tuple of int
        The pair (z, v).
    contexts : ndarray of shape (c,)
        The contexts of the circuit, in increasing order.
    weights : tuple of int
        y on those contexts (integers with gcd 1; >= 0 on the split ones).
    shared : ndarray of shape (c,) of bool
        Whether each context's support holds both tokens (else exactly one).
    """

    ray: dict
    tokens: tuple
    contexts: np.ndarray
    weights: tuple
    shared: np.ndarray


@dataclass(frozen=True, eq=False)
class ScreenResult:
    """What the screen did.

    Attributes
    ----------
    found : PairRay or None
    pairs_tried : int
        Pairs whose LPs ran.
    lp_iterations : int
        Simplex iterations of all its LPs.
    lps : int
        LPs solved.
    work : int
        Their work: the sum over LPs of :data:`LP_BASE_WORK` + non-zeros times (1 + simplex iterations).
    reason : str
        Why nothing was found (empty when a ray was).
    """

    found: PairRay | None
    pairs_tried: int
    lp_iterations: int
    lps: int
    work: int
    reason: str = ""


def applies(instance: NTPInstance) -> bool:
    """Where the pairs of :mod:`ntpcert.pipeline.pairs` apply: m > d + 1 (a ray on one pair needs dependent
    embeddings among the pair's contexts, which m <= d + 1 generic ones do not have) and V >= 2."""
    from ntpcert.pipeline import pairs

    return pairs.applies(instance)


def pair_order(instance: NTPInstance, S=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z, v, shared)``: the pairs z < v split by some context (one token in its support, the other
    not), most shared contexts first, then most split ones, then by (z, v); ``shared`` their numbers of
    shared contexts. Pairs that share no support come last, and only where V <= :data:`ALL_PAIRS_MAX_TOKENS`.
    ``S``: the support mask as a scipy CSC matrix of shape (m, V), when the caller has it."""
    import scipy.sparse as sp

    S = sp.csc_matrix(instance.support_csr.astype(np.int32)) if S is None else S.astype(np.int32)
    n = np.diff(S.indptr).astype(np.int64)
    V = S.shape[1]
    if V <= ALL_PAIRS_MAX_TOKENS:
        z, v = np.triu_indices(V, 1)
        b = np.asarray((S.T @ S).todense(), dtype=np.int64)[z, v]
        z, v = z.astype(np.int64), v.astype(np.int64)
    else:
        both = sp.triu(S.T @ S, k=1).tocoo()
        z, v, b = both.row.astype(np.int64), both.col.astype(np.int64), both.data.astype(np.int64)
    split = n[z] + n[v] - 2 * b
    keep = split > 0
    z, v, b, split = z[keep], v[keep], b[keep], split[keep]
    order = np.lexsort((v, z, -split, -b))
    return z[order], v[order], b[order]


def _rounds(n_a: int, n_x: int, d: int):
    """Sizes (contexts of A, contexts of X) of a pair's LPs: FIRST_CONTEXTS contexts, then ROUND_GROWTH times
    as many each round, half from each side where both have enough, up to all or ROUND_MAX·(d + 1)."""
    total = n_a + n_x
    n = FIRST_CONTEXTS
    while True:
        n = min(n, total, ROUND_MAX * (d + 1))
        a = min(n_a, max(n // 2, n - n_x))
        yield a, min(n_x, n - a)
        if n >= total or n >= ROUND_MAX * (d + 1):
            return
        n *= ROUND_GROWTH


def _pair_lp(G: np.ndarray, on_x: np.ndarray, max_work: int):
    """The pair's LP on the rows ``G`` (shape (c, d)): a basic y with ``sum_j y_j G_j = 0``,
    ``y >= 0`` and summing to 1 on ``on_x``. ``(y or None, iterations, work)``, with HiGHS' iterations capped
    so that the work (:data:`LP_BASE_WORK` + non-zeros times (1 + iterations)) stays within ``max_work``;
    work 0 (no LP) when not even one iteration fits."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    c = G.shape[0]
    A = sp.vstack([sp.csr_matrix(G.T), sp.csr_matrix(on_x.astype(np.float64)[None, :])], format="csr")
    nnz = max(int(A.nnz), 1)
    cap = (max_work - LP_BASE_WORK) // nnz - 1
    if cap < 1:
        return None, 0, 0
    b = np.zeros(A.shape[0])
    b[-1] = 1.0
    bounds = np.column_stack([np.where(on_x, 0.0, -np.inf), np.full(c, np.inf)])
    res = linprog(np.zeros(c), A_eq=A, b_eq=b, bounds=bounds, method="highs-ds",
                  options={"presolve": True, "maxiter": int(cap)})
    its = int(getattr(res, "nit", 0) or 0)
    work = LP_BASE_WORK + nnz * (1 + its)
    if res.status != 0 or res.x is None:
        return None, its, work
    return np.asarray(res.x, dtype=np.float64), its, work


def exact_circuit(G: np.ndarray, on_x: np.ndarray, y: np.ndarray) -> list[int] | None:
    """Integer weights w on the rows of ``G`` (shape (c, d), dyadic floats) with ``sum_j w_j G_j = 0``
    exactly, ``w >= 0`` on ``on_x`` and not 0 there, found on the support of the float y; or None.

    The support's integer null space (:func:`ntpcert.pipeline.pairs.null_vectors`) is the circuit when it
    is one vector; when it is larger (a float support with a spurious entry), it is combined with rational
    weights from a least-squares fit to y, which keeps the sum exactly 0."""
    from ntpcert.pipeline.pairs import null_vectors

    ymax = float(np.abs(y).max(initial=0.0))
    if ymax == 0.0:
        return None
    supp = np.flatnonzero(np.abs(y) > SUPPORT_TOL * ymax)
    if supp.size == 0 or supp.size > G.shape[1] + 1 or not on_x[supp].any():
        return None
    basis = null_vectors(G[supp])
    if not basis:
        return None
    if len(basis) == 1:
        w = basis[0]
    else:
        Nf = np.array(basis, dtype=np.float64).T  # (|supp|, k)
        coef, *_ = np.linalg.lstsq(Nf, y[supp], rcond=None)
        q = [Fraction(float(c)).limit_denominator(WEIGHT_DENOMINATOR) for c in coef]
        den = math.lcm(*(f.denominator for f in q))
        ints = [int(f * den) for f in q]
        w = [sum(c * vec[i] for c, vec in zip(ints, basis)) for i in range(supp.size)]
    xs = [wi for wi, x in zip(w, on_x[supp]) if x]
    if all(wi <= 0 for wi in xs):
        w = [-wi for wi in w]
        xs = [-wi for wi in xs]
    if any(wi < 0 for wi in xs) or not any(xs):
        return None
    g = math.gcd(*w) or 1
    full = [0] * G.shape[0]
    for i, wi in zip(supp, w):
        full[int(i)] = wi // g
    return full


def _ray(z: int, v: int, ctx: np.ndarray, sig: np.ndarray, w: list[int]) -> dict:
    ray: dict[tuple[int, int], Fraction] = {}
    for j, s, c in zip(ctx.tolist(), sig.tolist(), w):
        if c:
            ray[(z, j)] = Fraction(int(s) * c)
            ray[(v, j)] = Fraction(-int(s) * c)
    return ray


def screen(instance: NTPInstance, *, max_pairs: int = SCREEN_MAX_PAIRS,
           max_work: int = SCREEN_MAX_WORK) -> ScreenResult:
    """Stream over the pairs of :func:`pair_order` for an exact Farkas ray on one pair (module doc)."""
    from ntpcert.exact.separability import check_ray

    if not applies(instance):
        return ScreenResult(None, 0, 0, 0, 0, f"m = {instance.m} <= d + 1 = {instance.d + 1}: no pair has "
                                              "dependent contexts")
    import scipy.sparse as sp

    d = instance.d
    H = np.asarray(instance.embeddings, dtype=np.float64)
    S = sp.csc_matrix(instance.support_csr.astype(bool))
    zs, vs, _ = pair_order(instance, S)
    cols = [S.indices[S.indptr[t]:S.indptr[t + 1]].astype(np.int64) for t in range(instance.V)]
    tried = its = lps = work = 0
    for z, v in zip(zs.tolist(), vs.tolist()):
        if tried >= max_pairs or work >= max_work:
            break
        tried += 1
        cz, cv = cols[z], cols[v]
        A = np.intersect1d(cz, cv, assume_unique=True)
        X = np.setxor1d(cz, cv, assume_unique=True)
        x_is_z = np.isin(X, cz, assume_unique=True)
        for n_a, n_x in _rounds(A.size, X.size, d):
            left = max_work - work
            if left <= 0:
                break
            ctx = np.concatenate([A[:n_a], X[:n_x]])
            sig = np.concatenate([np.ones(n_a), np.where(x_is_z[:n_x], 1.0, -1.0)])
            on_x = np.concatenate([np.zeros(n_a, dtype=bool), np.ones(n_x, dtype=bool)])
            G = H[ctx] * sig[:, None]
            y, k, w_lp = _pair_lp(G, on_x, left)
            if not w_lp:
                work = max_work  # its first pass does not fit: the budget is spent
                break
            its, work, lps = its + k, work + w_lp, lps + 1
            if y is None:
                continue  # no ray on these contexts (or the budget ran out): more contexts, or the next pair
            w = exact_circuit(G, on_x, y)
            if w is None:
                break  # a ray in floats that is not exact on its support: the next pair
            ray = _ray(z, v, ctx, sig, w)
            if check_ray(instance, ray):
                break
            keep = np.flatnonzero(w)
            order = np.argsort(ctx[keep], kind="stable")
            keep = keep[order]
            return ScreenResult(PairRay(ray, (z, v), ctx[keep], tuple(int(w[i]) for i in keep), ~on_x[keep]),
                                tried, its, lps, work)
    why = (f"no Farkas ray on the first {tried} of {zs.size} token pairs ({lps} LPs, {its} "
           f"simplex iterations, work {work}; budget {max_pairs} pairs, work {max_work})")
    return ScreenResult(None, tried, its, lps, work, why)


def _weight_text(w: int) -> str:
    """An integer weight for a reader: in full up to 12 digits, else its sign and order of magnitude (the
    circuits of dyadic embeddings can have weights of thousands of digits, past Python's limit on int -> str)."""
    w = int(w)
    if abs(w) < 10 ** 12:
        return f"{w:+d}"
    digits = int(abs(w).bit_length() * 0.30102999566398) + 1
    return f"{'+' if w > 0 else '-'}(an integer of about {digits:,} digits)"


def witness_text(instance: NTPInstance, found: PairRay) -> str:
    """The ray in words, for a reader: the pair, how many contexts of each kind, and the first few."""
    from ntpcert.pipeline.pairs import pair_text

    n_sh = int(found.shared.sum())
    names = instance.context_names
    shown = []
    for j, w, sh in list(zip(found.contexts.tolist(), found.weights, found.shared.tolist()))[:TEXT_CONTEXTS]:
        label = repr(names[j]) if names is not None else f"#{j}"
        shown.append(f"{label} {'both' if sh else 'one'} {_weight_text(w)}")
    more = ", ..." if found.contexts.size > TEXT_CONTEXTS else ""
    return (f"Farkas ray on the pair of tokens {pair_text(instance, *found.tokens)} from the pair screen: a circuit "
            f"of {found.contexts.size} contexts ({n_sh} holding both tokens, {found.contexts.size - n_sh} one of "
            f"them; {', '.join(shown)}{more}), {len(found.ray)} non-zero entries")


def separability_verdict(instance: NTPInstance):
    """``Verdict(False, FarkasRay)`` from :func:`screen` (engine ``pair-farkas``; :func:`screen` has checked
    the ray exactly on the whole instance), or None when the screen finds no ray within its budget."""
    from ntpcert.verdict import FarkasRay, Verdict

    res = screen(instance)
    if res.found is None:
        return None
    text = (witness_text(instance, res.found) + f" ({res.pairs_tried} pairs, {res.lp_iterations} simplex iterations),"
            " verified exactly on the whole instance")
    return Verdict(False, FarkasRay(res.found.ray, "pair-farkas", text))  # checked once, by screen()


__all__ = ["PairRay", "ScreenResult", "applies", "exact_circuit", "pair_order", "screen", "separability_verdict",
           "witness_text"]
