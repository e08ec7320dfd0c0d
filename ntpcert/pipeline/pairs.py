r"""Witnesses on pairs of tokens, for instances with many more contexts than dimensions (m >> d).

For two tokens :math:`z \ne z'` let :math:`B` be the contexts whose support holds both, and
:math:`X` those whose support holds exactly one of them. Only the difference
:math:`u = w_z - w_{z'}` enters the constraints of (4) and (6) restricted to these two tokens:

* (4) asks :math:`h_j^\top u = \log(c_{j,z}/c_{j,z'})` for :math:`j \in B` (the difference of the
  equality rows :math:`(j, z)` and :math:`(j, z')`, a row on the anchor being zero);
* (6) asks :math:`h_j^\top u = 0` for :math:`j \in B` and :math:`\pm h_j^\top u \ge 1` for
  :math:`j \in X` (+ when z is the one in :math:`S_j`).

With :math:`|B| > d` the rows :math:`h_j` (:math:`j \in B`) are dependent, so there is an integer
:math:`y \ne 0` with :math:`\sum_{j\in B} y_j h_j = 0`, found exactly (``fmpz_mat.nullspace`` of at
most d + 1 integer rows: the embeddings are dyadic, scaled by one power of 2).

**Not compatible** (``pair-null-vector``). :math:`\tilde y` with :math:`\tilde y_{(j,z)} = y_j`,
:math:`\tilde y_{(j,z')} = -y_j` (rows on the anchor dropped) is a left null vector of the whole
:math:`A_{eq}`, and :math:`\tilde y^\top b = \sum_p \log p \sum_j y_j\,(\nu_p(c_{j,z}) - \nu_p(c_{j,z'}))`
is non-zero exactly when some prime's exponent sum is (logarithms of primes are linearly independent
over :math:`\mathbb Q`). That is what ``ntpcert verify`` checks for ``violating_null_vector``.

**Not separable** (``pair-farkas``). With :math:`j_0 \in X` and a null vector of the rows
:math:`\{h_j\}_{j \in B'} \cup \{h_{j_0}\}` (:math:`B' \subseteq B`, :math:`|B'| \le d`) whose
:math:`j_0` entry :math:`y_{j_0} \ne 0`, signed so that the token of :math:`z, z'` outside
:math:`S_{j_0}` gets a negative entry, :math:`a_{j,z} = y_j,\ a_{j,z'} = -y_j` is a Farkas ray of
(6) (:mod:`ntpcert.exact.separability`): :math:`\mathbf 1^\top a_j = 0`, :math:`\sum_j a_j h_j^\top = 0`,
and its only off-support entry is negative. It is checked again exactly on the whole instance.

**Not separable, fewer than d shared contexts** (``pair-farkas`` by LP). With :math:`\sigma_j = +1`
when z is the token of the pair in :math:`S_j` and :math:`-1` otherwise (:math:`j \in X`), the pair's
part of (6) is infeasible exactly when some :math:`y` with :math:`y_X \ge 0`, :math:`y_X \ne 0` has
:math:`\sum_{j\in B} y_j h_j + \sum_{j \in X} y_j \sigma_j h_j = 0` (Farkas). A float LP
(HiGHS dual simplex, :math:`\mathbf 1^\top y_X = 1`) finds a basic such y; its support, at most
d + 1 contexts, is then re-solved exactly (``fmpz_mat.nullspace``), and the ray
:math:`a_{j,z} = \sigma_j y_j,\ a_{j,z'} = -\sigma_j y_j` (:math:`\sigma_j = 1` on B) is kept only
when that null space is one vector whose X entries all have one sign. Random embeddings with m >> d
give such pairs long before any pair shares d contexts (the whitespace-split pydoc text: m = 8,831,
d = 256, at most 170 shared contexts, a ray from the first pair).

Pairs are taken among the :data:`PAIR_TOKENS` tokens in the most supports, most shared contexts
first; nothing is claimed from a pair that does not yield a checked witness.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from ntpcert.instance import NTPInstance

#: Pairs are formed among this many tokens (those in the most supports).
PAIR_TOKENS = 48
#: At most this many pairs are tried for each question: the screen's budget of work (it replaces a
#: limit of 20 s; a pair costs one exact null space of at most d + 1 rows, and the whole-text pydoc
#: corpora, the largest benchmarks, settle on their first pair).
PAIRS_MAX = 12
#: Xor contexts tried per pair for a Farkas ray.
XOR_TRIES = 3
#: The LP route (module doc): at most this many pairs (replacing a limit of 30 s), each LP within the
#: default HiGHS budget (:func:`ntpcert.util.budget.highs_budget`), and pairs with at most this many
#: contexts in B and X together (its LP has d + 1 rows and that many columns).
LP_PAIRS_MAX = 6
LP_MAX_CONTEXTS = 20_000


def applies(instance: NTPInstance) -> bool:
    """Pairs can help only when some pair may share more than d contexts: m > d + 1."""
    return instance.m > instance.d + 1 and instance.V >= 2


def pairs(instance: NTPInstance) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """``(z, z', B, X)`` for pairs of frequent tokens, most shared contexts first: B the contexts
    with both tokens in the support, X those with exactly one (arrays of context indices, in order)."""
    S = instance.support_csr  # (m, V) sparse: no m·V cells
    freq = np.bincount(S.indices, minlength=instance.V)
    top = np.argsort(-freq, kind="stable")[:PAIR_TOKENS]
    St = S[:, top].astype(np.int32).tocsc()
    both = (St.T @ St).toarray()
    iu = np.triu_indices(len(top), 1)
    for k in np.argsort(-both[iu], kind="stable")[:PAIRS_MAX]:
        a, b = int(iu[0][k]), int(iu[1][k])
        z, zp = int(top[a]), int(top[b])
        ca = St.indices[St.indptr[a]:St.indptr[a + 1]]
        cb = St.indices[St.indptr[b]:St.indptr[b + 1]]
        B = np.intersect1d(ca, cb).astype(np.int64)
        X = np.setxor1d(ca, cb).astype(np.int64)
        yield z, zp, B, X


def integer_rows(H: np.ndarray) -> list[list[int]]:
    """Rows of the dyadic float matrix H (shape (n, d)) times one power of 2, as exact integers."""
    from ntpcert.exact.rational import dyadic_int_rows

    return dyadic_int_rows(H)


def null_vectors(H: np.ndarray) -> list[list[int]]:
    """A basis of the integer vectors y (length n) with :math:`\\sum_j y_j h_j = 0`, for H of shape (n, d)."""
    import flint

    rows = integer_rows(H)
    n, d = len(rows), H.shape[1]
    Mt = flint.fmpz_mat(d, n, [rows[j][i] for i in range(d) for j in range(n)])
    X, k = Mt.nullspace()
    out = []
    for c in range(int(k)):
        col = [int(X[i, c]) for i in range(n)]
        g = 0
        for v in col:
            g = math.gcd(g, v)
        out.append([v // g for v in col] if g > 1 else col)
    return out


def _exponent_sum(instance: NTPInstance, z: int, zp: int, contexts: np.ndarray, y: list[int]) -> dict[int, int]:
    r""":math:`\sum_j y_j(\nu_p(c_{j,z}) - \nu_p(c_{j,z'}))` for every prime p (non-zero ones only)."""
    from ntpcert.util.numbers import factorise

    out: dict[int, int] = {}
    for j, c in zip(contexts, y):
        if not c:
            continue
        r = instance.ratio_integers(int(j))
        for tok, sign in ((z, 1), (zp, -1)):
            for p, e in factorise(int(r[tok])).items():
                out[p] = out.get(p, 0) + sign * c * e
    return {p: v for p, v in out.items() if v}


def _whole_rows(instance: NTPInstance, z: int, zp: int, contexts: np.ndarray, y: list[int]) -> dict:
    """The pair's vector as ``{(j, t): int}`` over the whole instance's equality rows (module doc)."""
    anchors = instance.anchors()
    out: dict[tuple[int, int], int] = {}
    for j, c in zip(contexts, y):
        if not c:
            continue
        j = int(j)
        for tok, sign in ((z, c), (zp, -c)):
            if tok != int(anchors[j]):
                out[(j, tok)] = out.get((j, tok), 0) + sign
    return {k: v for k, v in out.items() if v}


def pair_text(instance: NTPInstance, z: int, zp: int) -> str:
    """Two tokens as a witness names them: ``"e", "i" (43, 47)`` with names, ``(43, 47)`` without."""
    names = instance.token_names
    if names is None:
        return f"({int(z)}, {int(zp)})"
    return f'"{names[int(z)]}", "{names[int(zp)]}" ({int(z)}, {int(zp)})'


def compatibility_witness(instance: NTPInstance) -> tuple[dict, str] | None:
    """``(y, text)``: a left null vector of :math:`A_{eq}` over the whole instance's equality rows with
    :math:`y^\\top b \\ne 0` (certified by its prime exponents), found on a pair; or None."""
    if not applies(instance):
        return None
    d = instance.d
    for z, zp, B, _ in pairs(instance):
        if B.size < 2:
            break
        ctx = B[: d + 1]
        for y in null_vectors(instance.embeddings[ctx]):
            if _exponent_sum(instance, z, zp, ctx, y):
                whole = _whole_rows(instance, z, zp, ctx, y)
                text = (f"exact left null vector y of A_eq on the pair of tokens {pair_text(instance, z, zp)} and "
                        f"{len(whole)} "
                        f"equality rows of {int(np.count_nonzero(y))} contexts, with y^T b != 0 (a non-zero "
                        "exponent of a prime in the product of count ratios)")
                return whole, text
    return None


def separability_witness(instance: NTPInstance) -> tuple[dict, str] | None:
    """``(ray, text)``: a Farkas ray ``{(v, j): Fraction}`` of (6) found on a pair (module doc), not yet
    checked on the whole instance; or None."""
    if not applies(instance):
        return None
    d = instance.d
    for z, zp, B, X in pairs(instance):
        if B.size < 1:
            break
        if X.size == 0:
            continue
        base = B[:d]
        for j0 in X[:XOR_TRIES]:
            ctx = np.append(base, j0)
            for y in null_vectors(instance.embeddings[ctx]):
                y0 = y[-1]
                if not y0:
                    continue
                # the token outside S_{j0} must get a negative entry: a_{j0,z'} = -y0 when z is in S_{j0}
                want_positive = instance.in_support(int(j0), z)
                if (y0 > 0) != want_positive:
                    y = [-v for v in y]
                ray: dict[tuple[int, int], Fraction] = {}
                for j, c in zip(ctx, y):
                    if c:
                        ray[(z, int(j))] = Fraction(c)
                        ray[(zp, int(j))] = Fraction(-c)
                text = (f"Farkas ray on the pair of tokens {pair_text(instance, z, zp)}: "
                        f"{int(np.count_nonzero(y))} contexts, "
                        f"{len(ray)} non-zero entries")
                return ray, text
    return _lp_separability_witness(instance)


def _lp_separability_witness(instance: NTPInstance) -> tuple[dict, str] | None:
    """The LP route of the module doc over the first :data:`LP_PAIRS_MAX` pairs; None when none gives
    an exact ray."""
    d = instance.d
    for n, (z, zp, B, X) in enumerate(pairs(instance)):
        if n >= LP_PAIRS_MAX:
            break
        if X.size == 0 or B.size + X.size <= d or B.size + X.size > LP_MAX_CONTEXTS:
            continue
        found = _lp_pair_ray(instance, z, zp, B, X)
        if found is not None:
            return found
    return None


def _lp_pair_ray(instance: NTPInstance, z: int, zp: int, B: np.ndarray, X: np.ndarray) -> tuple[dict, str] | None:
    from scipy.optimize import linprog

    from ntpcert.util.budget import highs_budget, highs_options

    H = np.asarray(instance.embeddings, dtype=np.float64)
    ctx = np.concatenate([B, X])
    in_z = np.array([instance.in_support(int(j), z) for j in X], dtype=bool)
    sig = np.concatenate([np.ones(B.size), np.where(in_z, 1.0, -1.0)])
    rows = H[ctx] * sig[:, None]  # (|B| + |X|, d)
    A_eq = np.vstack([rows.T, np.concatenate([np.zeros(B.size), np.ones(X.size)])])
    b_eq = np.zeros(instance.d + 1)
    b_eq[-1] = 1.0
    bounds = [(None, None)] * B.size + [(0, None)] * X.size
    res = linprog(np.zeros(ctx.size), A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs-ds",
                  options=highs_options(highs_budget(*A_eq.shape)))
    if res.status != 0 or res.x is None:
        return None  # the pair's part of (6) is (numerically) feasible: nothing to claim
    supp = np.flatnonzero(np.abs(res.x) > 1e-12 * max(1.0, float(np.abs(res.x).max())))
    if supp.size > instance.d + 1:
        return None
    basis = null_vectors(rows[supp])
    if len(basis) != 1:
        return None
    y = basis[0]
    on_x = supp >= B.size
    xs = [v for v, x in zip(y, on_x) if x]
    if not xs or not (all(v > 0 for v in xs) or all(v < 0 for v in xs)):
        return None
    if xs[0] < 0:
        y = [-v for v in y]
    ray: dict[tuple[int, int], Fraction] = {}
    for i, c in zip(supp, y):
        if c:
            j, sj = int(ctx[i]), int(sig[i])
            ray[(z, j)] = Fraction(sj * c)
            ray[(zp, j)] = Fraction(-sj * c)
    text = (f"Farkas ray on the pair of tokens {pair_text(instance, z, zp)} by LP: {len(supp)} of its {B.size} "
            "shared and "
            f"{X.size} separating contexts, {len(ray)} non-zero entries")
    return ray, text


__all__ = ["applies", "compatibility_witness", "null_vectors", "pair_text", "pairs", "separability_witness"]
