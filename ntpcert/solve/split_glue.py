r"""Glued tokens: rows that every point of the recession cone K makes equal (our derivation, ``docs/math.md``).

**The pair cone.** For two tokens z, v and :math:`u = d_z - d_v`, every :math:`D \in K` (:mod:`ntpcert.solve.split`) has

.. math:: u^\top h_j \ge 0\ (j \in A),\qquad u^\top h_j \le 0\ (j \in B),\qquad u^\top h_j = 0\ (j \in E),

with :math:`A = \{j : z \in S_j \not\ni v\}`, :math:`B = \{j : v \in S_j \not\ni z\}`, :math:`E = \{j : z, v \in S_j\}`
(the margins of the pairs (j, v) and (j, z), and the in-support equalities). Where weights :math:`y > 0` on
:math:`A \cup B` and free :math:`\lambda` on E give

.. math:: \sum_{A} y_j h_j - \sum_{B} y_j h_j + \sum_{E} \lambda_j h_j = 0

(a Stiemke certificate), every such u has :math:`u^\top h_j = 0` on :math:`A \cup B`: the margin of every pair (j, v),
:math:`j \in A`, and (j, z), :math:`j \in B`, is 0 on all of K, so these pairs are in N. Where the :math:`h_j` of
:math:`A \cup B \cup E` span :math:`\mathbb R^d`, u = 0: :math:`d_z = d_v` on all of K. The tokens are *glued*, and
:math:`F_N` contains :math:`(e_z - e_v) \otimes \mathbb R^d`.

**Groups.** Once the rows of a group G are equal on K, G acts as one token (A: :math:`S_j` meets G and misses v;
B: :math:`v \in S_j`, :math:`S_j \cap G = \emptyset`; E: both), and the same test glues a token v to G. A subset
:math:`A' \subseteq A` gives a larger cone, so a certificate on :math:`A' \cup B \cup E` whose :math:`h_j` span
:math:`\mathbb R^d` glues as well; the test keeps every k-th context of A, at most :data:`GLUE_SAMPLE` · d of them.
Tokens that lie in the same supports (a class of :mod:`ntpcert.solve.structured.classes`) are glued together or
not at all (their A, B, E are the same).

**The quotient.** Replace the tokens of G by one token g: :math:`\tilde S_j = (S_j \setminus G) \cup \{g\}` where
:math:`S_j` meets G, :math:`S_j` otherwise. :math:`D \mapsto` (the rows off G, the common row of G) maps K onto the
quotient's cone :math:`\tilde K`, keeping every margin, so

- a pair (j, v) with :math:`v \notin G` is in N iff (j, v) is in :math:`\tilde N`;
- a pair (j, v) with :math:`v \in G \setminus S_j` is in N iff :math:`S_j` meets G or (j, g) is in :math:`\tilde N`;
- :math:`F_N^\perp` is the lift of :math:`\tilde F_{\tilde N}^\perp` (rows equal on G), so :math:`W^{mm}_P` is the
  quotient's with g's row weighted by :math:`|G|`.

**The float test.** The Stiemke weights are :math:`y_i = e^{-x_i^\top u^*}` at the minimiser :math:`u^*` of
:math:`f(u) = \sum_i e^{-x_i^\top u}` over :math:`u \perp \{h_j : j \in E\}` (:math:`x_i = \pm h_i`, + on A, - on B):
:math:`\nabla f(u^*) = -\sum_i y_i x_i = 0` there. f has a minimiser iff no u makes every :math:`x_i^\top u \ge 0`
with one > 0, which is exactly the glue. Newton with an Armijo line search finds it in a few steps where it exists,
and where it does not, :math:`\|u\|` grows without bound; both are read off after at most
:data:`NEWTON_MAX_ITERATIONS` steps (a count of work). It runs on whitened rows :math:`x_i = \pm R^{-\top} h_i`
(:math:`H = QR`): the same cone and certificates (R is invertible), and the direction of a LayerNorm with
:math:`\beta = 0` (every :math:`h_j \perp \gamma^{-1}` up to rounding) no longer makes the Hessian singular.
Nothing here is a proof: the weights come back as floats with their residual.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.instance import NTPInstance

__all__ = ["GLUE_MAX_TESTS", "GLUE_MIN_FRACTION", "GLUE_SAMPLE", "Glue", "GlueEdge", "glue_group",
           "stiemke_weights", "whitened"]

#: Contexts of the group's side A kept for one test: at most this many times d (every k-th).
GLUE_SAMPLE = 4
#: A token is a candidate for the group only where it lies in at least d / this many supports: a token in fewer
#: cannot balance the group's side (its B spans too little), and testing it costs as much as any other.
GLUE_MIN_FRACTION = 8
#: Pair tests one :func:`glue_group` may run (a budget of work, never of time).
GLUE_MAX_TESTS = 400
#: Newton steps of one test.
NEWTON_MAX_ITERATIONS = 60
#: A test stops as "not glued" once its u (whitened coordinates, rows of norm about sqrt(d)) is this large in
#: any coordinate: the infimum is not attained, or the weights :math:`e^{-x^\top u}` underflow float64 anyway.
U_MAX = 30.0
#: The Stiemke residual :math:`\|P_{E^\perp}\sum y_i x_i\| / \sum_i y_i\|x_i\|` a glue needs.
RESIDUAL_TOL = 1e-10


@dataclass(frozen=True, eq=False)
class GlueEdge:
    r"""One pair test that glued token class ``token`` to the group as it stood.

    Attributes
    ----------
    token : int
        The representative token of the class glued.
    pos, neg, eq : ndarray of int64
        The contexts of :math:`A'` (sampled), B and E of the test.
    y : ndarray of float64, shape (len(pos) + len(neg),)
        The Stiemke weights, on ``pos`` then ``neg``, largest 1.
    residual : float
        :math:`\|P_{E^\perp}(\sum_{A'} y_j g_j - \sum_B y_j g_j)\| / \sum_i y_i \|g_i\|` in whitened rows g.
    """

    token: int
    pos: np.ndarray
    neg: np.ndarray
    eq: np.ndarray
    y: np.ndarray
    residual: float


@dataclass(frozen=True, eq=False)
class Glue:
    r"""A group of glued tokens (module doc).

    Attributes
    ----------
    group : ndarray of int64
        The tokens of G, sorted (at least two).
    edges : tuple of GlueEdge
        The tests that glued them, in order (the first token of the group is the seed, the most frequent).
    tests : int
        Pair tests run, glued or not (the Newton test, or the projection that settled it first).
    opened : int
        Tests the projection of the mean h settled (not glued) without Newton.
    """

    group: np.ndarray
    edges: tuple
    tests: int
    opened: int = 0

    def mask(self, V: int) -> np.ndarray:
        """Boolean array of shape (V,): True on the tokens of G."""
        in_g = np.zeros(V, dtype=bool)
        in_g[self.group] = True
        return in_g

    def nonseparable_pairs(self, instance: NTPInstance) -> np.ndarray:
        r"""The pairs (j, v) the glue puts in N: :math:`v \in G \setminus S_j` where :math:`S_j` meets G.
        Shape (n, 2), int64, sorted by j then v."""
        in_g = self.mask(instance.V)
        out = []
        for j, s in enumerate(instance.supports):
            hit = in_g[s]
            if hit.any():
                rest = np.setdiff1d(self.group, s[hit], assume_unique=True)
                if rest.size:
                    out.append(np.column_stack([np.full(rest.size, j, dtype=np.int64), rest]))
        if not out:
            return np.zeros((0, 2), dtype=np.int64)
        return np.concatenate(out).astype(np.int64)

    def quotient_tokens(self, V: int) -> tuple[np.ndarray, int]:
        """``(of_token, V_q)``: each token's quotient token (the group becomes the last, ``V_q - 1``) and the
        quotient's vocabulary size."""
        in_g = self.mask(V)
        keep = np.flatnonzero(~in_g)
        of = np.empty(V, dtype=np.int64)
        of[keep] = np.arange(keep.size)
        of[in_g] = keep.size
        return of, int(keep.size) + 1

    def quotient(self, instance: NTPInstance) -> NTPInstance:
        r"""The quotient instance (module doc): the same H, each support mapped to quotient tokens, as 0/1 counts
        (the split depends on the supports and H only)."""
        import scipy.sparse as sp

        from ntpcert.instance.sparse import SparseCountsInstance

        of, Vq = self.quotient_tokens(instance.V)
        k = instance.support_sizes.astype(np.int64)
        rows = np.repeat(np.arange(instance.m, dtype=np.int64), k)
        cols = of[np.concatenate(instance.supports).astype(np.int64)] if rows.size else np.zeros(0, dtype=np.int64)
        S = sp.csr_array((np.ones(rows.size, dtype=np.int64), (rows, cols)), shape=(instance.m, Vq))
        S.sum_duplicates()
        S.data[:] = 1
        if instance.m * Vq <= 5_000_000:
            return NTPInstance.from_counts(instance.embeddings, S.toarray(), name=instance.name)
        return SparseCountsInstance.from_csr(instance.embeddings, S)


def whitened(H: np.ndarray) -> np.ndarray | None:
    r""":math:`G = H R^{-1}` from :math:`H = QR` (orthonormal columns times nothing: :math:`G = Q`, scaled by
    :math:`\sqrt m` so that rows have norm about :math:`\sqrt d`); None where H is not of full column rank."""
    H = np.asarray(H, dtype=np.float64)
    m, d = H.shape
    if m < d:
        return None
    Q, R = np.linalg.qr(H)
    diag = np.abs(np.diag(R))
    if diag.size == 0 or not diag.min() > 1e-12 * diag.max():
        return None
    return Q * np.sqrt(m)


def stiemke_weights(X: np.ndarray, E: np.ndarray | None = None, *,
                    max_iterations: int = NEWTON_MAX_ITERATIONS) -> tuple[np.ndarray | None, float]:
    r"""Weights :math:`y > 0` with :math:`\sum_i y_i x_i \in \operatorname{span}(E)` and the rows of X spanning
    :math:`\operatorname{span}(E)^\perp` (module doc), or None where the infimum of
    :math:`\sum_i e^{-x_i^\top u}` over :math:`u \perp E` is not attained (some u has every
    :math:`x_i^\top u \ge 0`, one > 0) or Newton does not settle within ``max_iterations`` steps.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The signed rows :math:`x_i`.
    E : ndarray of shape (r, d) or None
        Rows whose span u must be orthogonal to.

    Returns
    -------
    (y, residual) : y of shape (n,) scaled to largest 1, or None; the relative residual
        (mathematically every :math:`y_i = e^{-x_i^\top u^*} > 0`; in float64 a weight below about
        :math:`10^{-308}` of the largest reads 0, and the rows with positive weight still span, which is what
        the glue needs: u = 0 on them, so on all rows)
        :math:`\|P_{E^\perp}\sum_i y_i x_i\| / \sum_i y_i \|x_i\|` (inf when y is None).
    """
    n, d = X.shape
    if E is not None and E.shape[0]:
        Qe, Re = np.linalg.qr(E.T, mode="complete")
        r = int(np.sum(np.abs(np.diag(Re[:min(Re.shape)])) > 1e-10 * max(np.abs(Re).max(), 1e-300)))
        Z = Qe[:, r:]
        Xz = X @ Z
    else:
        Xz = X
    k = Xz.shape[1]
    if k == 0:
        return np.ones(n), 0.0
    if n < k:
        return None, float("inf")
    u = np.zeros(k)
    converged = False
    for _ in range(int(max_iterations)):
        s = Xz @ u
        shift = -s.min()  # f scaled by e^{-shift}: the largest term is 1
        e = np.exp(-s - shift)
        f = e.sum()
        g = -(Xz.T @ e)
        Hs = (Xz * e[:, None]).T @ Xz
        try:
            L = np.linalg.cholesky(Hs)
        except np.linalg.LinAlgError:
            return None, float("inf")  # the rows do not span E's complement (or the weights underflow)
        step = -np.linalg.solve(L.T, np.linalg.solve(L, g))
        dec = float(-g @ step)
        if dec <= 1e-24 * f:
            converged = True
            break
        t = 1.0
        while t > 1e-12 and np.exp(-(Xz @ (u + t * step)) - shift).sum() > f - 0.25 * t * dec:
            t *= 0.5
        u = u + t * step
        if not np.all(np.isfinite(u)) or np.abs(u).max() > U_MAX:
            return None, float("inf")
    if not converged:
        return None, float("inf")
    s = Xz @ u
    y = np.exp(-(s - s.min()))  # may underflow to 0 on some rows: those with y > 0 still span (Cholesky above)
    res = float(np.linalg.norm(Xz.T @ y) / (y @ np.linalg.norm(Xz, axis=1)))
    return (y, res) if res <= RESIDUAL_TOL else (None, res)


def _open_cone(H: np.ndarray, mu: np.ndarray, pos: np.ndarray, flat: np.ndarray) -> bool:
    r"""True when the pair cone is shown not to be {0} on ``pos`` cheaply: :math:`u = \mu` (the mean h) projected
    off the rows ``flat`` (B and E) of ``H`` has :math:`u^\top h_j = 0` there and
    :math:`u^\top h_j > 0` on ``pos``; then no Stiemke weights exist (:math:`\sum_i y_i x_i^\top u > 0`), and the
    Newton test is not run. Only where ``flat`` has fewer rows than d (else the projection is 0)."""
    d = H.shape[1]
    if flat.size >= d:
        return False
    u = mu
    if flat.size:
        Q, _ = np.linalg.qr(H[flat].T)
        u = mu - Q @ (Q.T @ mu)
    if not np.linalg.norm(u) > 1e-9 * np.linalg.norm(mu):
        return False
    s = H[pos] @ u
    tol = 1e-9 * np.linalg.norm(u) * np.sqrt(d)
    return bool(s.min(initial=0.0) >= 0.0 and s.max(initial=0.0) > tol and np.all(s > tol))


def _sample(idx: np.ndarray, cap: int) -> np.ndarray:
    """Every k-th entry of ``idx`` (sorted), at most ``cap`` of them."""
    if idx.size <= cap:
        return idx
    return idx[np.linspace(0, idx.size - 1, cap).round().astype(np.int64)]


def glue_group(instance: NTPInstance, *, max_tests: int = GLUE_MAX_TESTS, G: np.ndarray | None = None) -> Glue | None:
    r"""The group of tokens glued to the most frequent token (the one in most supports), or None where none is.

    Candidates are the token classes in at least ``d / GLUE_MIN_FRACTION`` supports, most frequent first; each is
    tested once against the group as it stands, and those that failed are tested once more after the first pass
    when the group grew (at most ``max_tests`` tests in all). ``G``: the whitened rows (:func:`whitened`), computed
    here when not given. Float: the edges carry their weights and residuals (module doc)."""
    from ntpcert.solve.structured.classes import partition

    m, d, V = instance.m, instance.d, instance.V
    if G is None:
        G = whitened(instance.embeddings)
    if G is None:
        return None
    of_token, rep = partition(instance)
    k = instance.support_sizes.astype(np.int64)
    rows = np.repeat(np.arange(m, dtype=np.int64), k)
    toks = np.concatenate(instance.supports).astype(np.int64) if rows.size else np.zeros(0, dtype=np.int64)
    order = np.argsort(toks, kind="stable")
    ptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.bincount(toks, minlength=V), out=ptr[1:])
    ctx = rows[order]
    n_tok = np.diff(ptr)
    cand = rep[n_tok[rep] >= max(1, d // GLUE_MIN_FRACTION)]
    if cand.size < 2:
        return None
    cand = cand[np.lexsort((cand, -n_tok[cand]))]
    seed = int(cand[0])
    in_group = np.zeros(m, dtype=bool)  # contexts whose support meets the group
    in_group[ctx[ptr[seed]:ptr[seed + 1]]] = True
    members = [seed]
    edges: list[GlueEdge] = []
    tests = opened = 0
    pending = [int(v) for v in cand[1:]]
    H = np.asarray(instance.embeddings, dtype=np.float64)
    mu = H.mean(axis=0)  # a model's h share a direction: H mu > 0 on the benchmark's 31,621 contexts
    cap = GLUE_SAMPLE * d
    for _ in range(2):
        failed = []
        grew = False
        for v in pending:
            if tests >= max_tests:
                failed.append(v)
                continue
            tests += 1
            Jv = np.zeros(m, dtype=bool)
            Jv[ctx[ptr[v]:ptr[v + 1]]] = True
            pos = _sample(np.flatnonzero(in_group & ~Jv), cap)
            neg = np.flatnonzero(Jv & ~in_group)
            eq = np.flatnonzero(Jv & in_group)
            if _open_cone(H, mu, pos, np.concatenate([neg, eq])):
                opened += 1
                failed.append(v)
                continue
            X = np.vstack([G[pos], -G[neg]])
            y, res = stiemke_weights(X, G[eq] if eq.size else None)
            if y is None:
                failed.append(v)
                continue
            edges.append(GlueEdge(v, pos, neg, eq, y, res))
            members.append(v)
            in_group |= Jv
            grew = True
        if not grew or not failed:
            break
        pending = failed
    if len(edges) == 0:
        return None
    cls = np.isin(of_token, of_token[np.asarray(members)])
    return Glue(np.flatnonzero(cls).astype(np.int64), tuple(edges), tests, opened)

