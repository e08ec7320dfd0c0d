r"""NTP-compatibility (4) decided exactly, although its right-hand side is irrational.

(4) reads :math:`A_{eq}\,\mathrm{vec}(W) = b` with :math:`b_{(j,z)} = \log(c_{j,z}/c_{j,z_j})`, where
:math:`c_{j,\cdot}` are positive integers proportional to :math:`p_j` on :math:`S_j` (the counts, or the
exact probabilities scaled to integers). It is solvable iff :math:`y^\top b = 0` for every y in the left
null space of :math:`A_{eq}`, which is the null space of the Gram matrix :math:`G = A_{eq}A_{eq}^\top`.

Write every ratio by its prime factorisation: :math:`b = E\,\log(\mathbf p)` with the integer
**prime-exponent matrix** :math:`E_{(j,z),p} = \nu_p(c_{j,z}) - \nu_p(c_{j,z_j})`. Logarithms of distinct
primes are linearly independent over :math:`\mathbb Q`, so for rational y, :math:`y^\top b = 0` iff
:math:`y^\top E = 0`. Hence, with Y a rational basis of :math:`\mathrm{null}(G)`,

.. math:: \text{(4) is solvable} \iff Y^\top E = 0 .

When it fails, a column y of Y with :math:`y^\top E \ne 0` is the certificate. When it holds,
:math:`W^* = \sum_p \log(p)\, R_p` with :math:`R_p = A_{eq}^\top g_p` and :math:`G g_p = E_{:,p}`: every
:math:`R_p` is an exact rational matrix inside F, so :math:`W^*` is the solution of (4) in F.

**Cost.** Every quantity is an exact integer computation with python-flint. G is block diagonal
over the connected components of the tokens linked by equality rows, and is formed exactly from
:math:`K = HH^\top` (computed by :func:`~ntpcert.exact.dyadic.exact_matmul`); ranks and null spaces of the
blocks are fraction-free. The closed form of :math:`W^*` solves one system per prime whose solution
can have tens of thousands of digits for Gaussian embeddings, so it is computed only on request.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from ntpcert.errors import ExactArithmeticError, InputError
from ntpcert.instance import NTPInstance
from ntpcert.exact.dyadic import exact_matmul
from ntpcert.exact.rational import frac
from ntpcert.util.numbers import factorise as util_factorise


def factorise(n: int) -> dict[int, int]:
    """Prime factorisation ``{p: exponent}`` of a positive integer (see
    :func:`ntpcert.util.numbers.factorise`; a cofactor too large to factor is an InputError)."""
    if n < 1:
        raise ExactArithmeticError(f"cannot factorise {n}")
    return util_factorise(n)


def eq_rows(instance: NTPInstance) -> list[tuple[int, int, int]]:
    """The equality rows ``(j, z, z_j)`` in Kesler order: contexts in order, tokens increasing,
    anchor :math:`z_j = \\min S_j`."""
    out = []
    for j in range(instance.m):
        S = [int(z) for z in instance.support(j)]
        for z in S[1:]:
            out.append((j, z, S[0]))
    return out


def prime_exponents(instance: NTPInstance) -> tuple[tuple[int, ...], np.ndarray]:
    """``(primes, E)``: the primes of all ratios and the integer matrix E of shape (r, #primes)."""
    rows = eq_rows(instance)
    facts: dict[int, dict[int, dict[int, int]]] = {}
    for j in range(instance.m):
        c = instance.ratio_integers(j)
        facts[j] = {z: factorise(v) for z, v in c.items()}
    primes = sorted({p for fj in facts.values() for f in fj.values() for p in f})
    col = {p: i for i, p in enumerate(primes)}
    E = np.zeros((len(rows), len(primes)), dtype=object)
    for i, (j, z, a) in enumerate(rows):
        for p, e in facts[j][z].items():
            E[i, col[p]] += e
        for p, e in facts[j][a].items():
            E[i, col[p]] -= e
    return tuple(primes), E


def token_components(instance: NTPInstance) -> list[np.ndarray]:
    """Row indices of the diagonal blocks of G: equality rows whose tokens are linked."""
    rows = eq_rows(instance)
    parent = list(range(instance.V))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for _, z, a in rows:
        rz, ra = find(z), find(a)
        if rz != ra:
            parent[rz] = ra
    groups: dict[int, list[int]] = {}
    for i, (_, z, _) in enumerate(rows):
        groups.setdefault(find(z), []).append(i)
    return [np.array(g, dtype=np.int64) for g in groups.values()]


@dataclass(frozen=True, eq=False)
class GramBlocks:
    """The exact Gram matrix :math:`G = A_{eq}A_{eq}^\\top` as integer blocks.

    ``G[np.ix_(rows, rows)] = blocks[k] * 2**exp`` for ``rows = components[k]``; G is zero outside.
    """

    components: tuple[np.ndarray, ...]
    blocks: tuple[flint.fmpz_mat, ...]
    exp: int

    @classmethod
    def build(cls, instance: NTPInstance) -> "GramBlocks":
        rows = eq_rows(instance)
        comps = token_components(instance)
        if not rows:
            return cls((), (), 0)
        K = exact_matmul(instance.embeddings, instance.embeddings.T)
        ctx = np.array([r[0] for r in rows])
        tok = np.array([r[1] for r in rows])
        anc = np.array([r[2] for r in rows])
        blocks = []
        exp = K.exp
        for comp in comps:
            c, z, a = ctx[comp], tok[comp], anc[comp]
            T = ((z[:, None] == z[None, :]).astype(np.int64) - (z[:, None] == a[None, :])
                 - (a[:, None] == z[None, :]) + (a[:, None] == a[None, :]))
            n = comp.size
            nz = np.nonzero(T)
            vals, _ = K.entries_int(c[nz[0]], c[nz[1]])
            M = flint.fmpz_mat(n, n)
            for r_, s_, t_, v in zip(nz[0].tolist(), nz[1].tolist(), T[nz].tolist(), vals):
                M[r_, s_] = t_ * v
            blocks.append(M)
        return cls(tuple(comps), tuple(blocks), exp)


@dataclass(frozen=True, eq=False)
class ExactNullSpace:
    r"""The left null space of :math:`A_{eq}`, exactly, with what it says about the log-odds.

    Attributes
    ----------
    n_eq : int
        r, the number of equality rows.
    rank : int
        :math:`\mathrm{rank}\,A_{eq} = \dim F`, exact.
    primes : tuple of int
        The primes of the count ratios (the columns of E).
    null_basis : tuple of dict
        A basis of :math:`\mathrm{null}(G)` (the left null space of :math:`A_{eq}`), each vector as
        ``{(j, z): Fraction}`` over the equality rows (integer entries).
    violating : dict or None
        A basis vector y with :math:`y^\top E \ne 0`, when there is one ((4) then fails).
    violating_exponents : dict or None
        :math:`y^\top E` (nonzero) as ``{p: Fraction}``, so :math:`y^\top b = \sum_p \log p\,(y^\top E)_p \ne 0`.
    probabilities_from_floats : bool
        The instance's probabilities were floats, taken as the exact dyadic rationals they are.
    seconds : float
    gram, E
        The blocks of G and the prime-exponent matrix, for :func:`w_star_closed_form`.
    """

    n_eq: int
    rank: int
    primes: tuple[int, ...]
    null_basis: tuple[dict, ...]
    violating: dict | None
    violating_exponents: dict | None
    probabilities_from_floats: bool
    seconds: float
    gram: GramBlocks | None = field(default=None, repr=False)
    E: np.ndarray | None = field(default=None, repr=False)

    @property
    def null_dim(self) -> int:
        return self.n_eq - self.rank


def exact_null_space(instance: NTPInstance, gram: GramBlocks | None = None) -> ExactNullSpace:
    """The left null space of :math:`A_{eq}` and, when (4) fails, a basis vector that shows it (module doc)."""
    t0 = time.perf_counter()
    rows = eq_rows(instance)
    primes, E = prime_exponents(instance)
    gram = GramBlocks.build(instance) if gram is None else gram
    basis: list[dict] = []
    rank = 0
    violating = None
    viol_exp = None
    for comp, G in zip(gram.components, gram.blocks):
        X, nullity = G.nullspace()
        rank += comp.size - nullity
        for k in range(nullity):
            col = [int(X[i, k]) for i in range(comp.size)]
            g = 0
            for v in col:
                g = math.gcd(g, v)
            col = [v // g for v in col] if g > 1 else col
            y = {rows[int(comp[i])][:2]: Fraction(v) for i, v in enumerate(col) if v}
            basis.append(y)
            if violating is None:
                yE = _times_E(col, comp, E, primes)
                if yE:
                    violating, viol_exp = y, yE
    return ExactNullSpace(
        n_eq=len(rows),
        rank=rank,
        primes=primes,
        null_basis=tuple(basis),
        violating=violating,
        violating_exponents=viol_exp,
        probabilities_from_floats=bool(instance.probs_exact_from_floats),
        seconds=time.perf_counter() - t0,
        gram=gram,
        E=E,
    )


def _times_E(col: list[int], comp: np.ndarray, E: np.ndarray, primes: tuple[int, ...]) -> dict[int, Fraction]:
    r""":math:`y^\top E` for a null vector given on the rows ``comp`` of one block."""
    out = {}
    for pi, p in enumerate(primes):
        s = sum(v * int(E[int(comp[i]), pi]) for i, v in enumerate(col) if v)
        if s:
            out[p] = Fraction(s)
    return out


# ---------------------------------------------------------------------------- tall systems: particular solutions
#: :func:`check_compatibility_by_columns` runs when the rows outnumber the used columns and
#: r times that number of columns is at most this.
COLUMNS_MAX_CELLS = 20_000_000
#: ... and the columns (token, feature) that the rows use are at most this many ...
COLUMNS_MAX = 2_000
#: ... and r n^2 (the work of forming the n x n normal matrix) is at most this.
COLUMNS_MAX_WORK = 500_000_000


def used_columns(instance: NTPInstance) -> np.ndarray:
    """``(V, d)`` booleans: the columns ``(token, feature)`` of :math:`A_{eq}` that some equality row
    touches (token in the support of a context with two or more tokens, feature non-zero in its
    embedding); one sparse product, no loop over the rows."""
    import scipy.sparse as sp

    multi = instance.support_sizes >= 2
    S = sp.csr_matrix(instance.support_csr[multi].astype(np.float64))  # (m', V), sparse
    nz = (instance.embeddings[multi] != 0.0).astype(np.float64)  # (m', d)
    return np.asarray(S.T @ nz) > 0


def check_compatibility_by_columns(instance: NTPInstance) -> tuple[int, dict] | None:
    r"""Prove (4) for a tall system by one exact particular solution per prime.

    With :math:`b = E\log\mathbf p`, any rational :math:`R_p` with :math:`A_{eq}\,\mathrm{vec}(R_p) =
    E_{:,p}` for every prime p gives :math:`W = \sum_p \log(p) R_p` solving (4); such :math:`R_p` exist
    iff (4) is solvable (module doc). When the rows outnumber the n columns of :math:`A_{eq}` that they
    use, this works in the n-dimensional column space instead of the r-dimensional row space: the
    normal equations :math:`A^\top A x = A^\top E_{:,p}` (integer matrix :math:`2^{s}A` of the dyadic
    embeddings) are solved by one fraction-free row reduction of :math:`[A^\top A \mid A^\top E]`,
    each x is checked in :math:`A x = E_{:,p}` exactly, and :math:`\dim F = \mathrm{rank}\,A =
    \mathrm{rank}\,A^\top A` comes from the same reduction. With no primes (every in-support ratio
    1, b = 0) W = 0 solves (4) and only the rank is computed.

    Returns ``(rank, particular)``: rank :math:`A_{eq}` and ``{p: {(v, i): Fraction}}``, the nonzero
    entries of every :math:`R_p`; None when it does not apply (not tall, too large) or when some
    :math:`E_{:,p}` is not in the column space, i.e. (4) fails: a violating null vector is then found by
    :func:`exact_null_space`.
    """
    r = int(np.maximum(instance.support_sizes - 1, 0).sum())
    used = used_columns(instance)
    n = int(used.sum())
    if not r or n >= r or n > COLUMNS_MAX or r * n > COLUMNS_MAX_CELLS or r * n * n > COLUMNS_MAX_WORK:
        return None
    rows = eq_rows(instance)
    cols = [(int(v), int(i)) for v, i in zip(*np.nonzero(used))]
    primes, E = prime_exponents(instance)
    H = instance.embeddings
    num_den = {}
    shift = 0
    for j in {j for j, _, _ in rows}:
        for i in np.flatnonzero(H[j]).tolist():
            nm, dn = float(H[j, i]).as_integer_ratio()
            num_den[(j, i)] = (nm, dn)
            shift = max(shift, dn.bit_length() - 1)
    col = {c: k for k, c in enumerate(cols)}
    A = flint.fmpz_mat(r, n)
    for k, (j, z, a) in enumerate(rows):
        for i in np.flatnonzero(H[j]).tolist():
            nm, dn = num_den[(j, i)]
            v = nm * ((1 << shift) // dn)  # 2^shift * h_{j,i}, an integer
            A[k, col[(z, i)]] += v
            A[k, col[(a, i)]] -= v
    At = A.transpose()
    P = len(primes)
    Em = flint.fmpz_mat(r, max(P, 1), [int(E[k, q]) if q < P else 0 for k in range(r) for q in range(max(P, 1))])
    N = At * A
    M = flint.fmpz_mat(n, n + max(P, 1))
    rhs = At * Em
    for x in range(n):
        for y in range(n):
            M[x, y] = N[x, y]
        for q in range(P):
            M[x, n + q] = rhs[x, q]
    R, den, _ = M.rref()  # fraction-free: R / den is the reduced echelon form, pivots equal den
    pivots = []
    for x in range(n):
        lead = next((y for y in range(n) if R[x, y] != 0), None)
        if lead is None:
            break
        pivots.append((x, lead))
    rank = len(pivots)
    particular: dict[int, dict[tuple[int, int], Fraction]] = {}
    for q, p in enumerate(primes):
        xs = flint.fmpz_mat(n, 1)
        for x, lead in pivots:  # the free variables at 0: x_lead = R[x, rhs] / den
            xs[lead, 0] = R[x, n + q]
        d = int(den)
        if not _column_solves(A, xs, Em, q, d):
            return None
        # A_int x = d E  with A_int = 2^shift A  =>  A (2^shift x / d) = E
        particular[p] = {cols[k]: Fraction(int(xs[k, 0]) << shift, d) for k in range(n) if xs[k, 0] != 0}
    return rank, particular


def _column_solves(A: flint.fmpz_mat, xs: flint.fmpz_mat, Em: flint.fmpz_mat, q: int, d: int) -> bool:
    r""":math:`A x = d\,E_{:,q}` exactly."""
    Ax = A * xs
    return all(Ax[k, 0] == d * Em[k, q] for k in range(A.nrows()))


# ---------------------------------------------------------------------------- W* in closed form
@dataclass(frozen=True, eq=False)
class WStarClosedForm:
    r""":math:`W^* = \sum_p \log(p)\, R_p` with :math:`R_p = A_{eq}^\top g_p` exact.

    Attributes
    ----------
    instance : NTPInstance
    primes : tuple of int
    coefficients : dict
        ``{p: {(j, z): Fraction}}``, the vectors :math:`g_p` over the equality rows.
    """

    instance: NTPInstance
    primes: tuple[int, ...]
    coefficients: dict

    @property
    def terms(self) -> tuple[int, ...]:
        """The primes p with :math:`g_p \ne 0`: the terms of the sum (the certificate stores these)."""
        return tuple(p for p in self.primes if any(v != 0 for v in self.coefficients[p].values()))

    def R(self, p: int) -> np.ndarray:
        """:math:`R_p` as an object array of Fractions, shape (V, d)."""
        inst = self.instance
        U = np.zeros((inst.V, inst.m), dtype=object)
        U[:] = Fraction(0)
        anchors = inst.anchors()
        for (j, z), g in self.coefficients[p].items():
            U[z, j] += g
            U[int(anchors[j]), j] -= g
        H = np.vectorize(frac, otypes=[object])(inst.embeddings)
        return U.dot(H)

    def expression(self):
        """A sympy ``Matrix`` expression :math:`\\sum_p \\log(p) R_p` (exact; small instances)."""
        import sympy

        inst = self.instance
        total = sympy.zeros(inst.V, inst.d)
        for p in self.primes:
            R = self.R(p)
            total += sympy.log(sympy.Integer(p)) * sympy.Matrix(
                inst.V, inst.d, [sympy.Rational(x.numerator, x.denominator) for x in R.ravel()])
        return total

    def evaluate(self, digits: int = 30) -> np.ndarray:
        """:math:`W^*` to ``digits`` significant digits, as an object array of ``mpmath.mpf``."""
        import mpmath

        with mpmath.workdps(digits + 10):
            inst = self.instance
            out = np.empty((inst.V, inst.d), dtype=object)
            out[:] = mpmath.mpf(0)
            for p in self.primes:
                lp = mpmath.log(p)
                R = self.R(p)
                for idx in np.ndindex(R.shape):
                    f = R[idx]
                    if f:
                        out[idx] += lp * mpmath.mpf(f.numerator) / f.denominator
        return out

    def to_float(self) -> np.ndarray:
        """:math:`W^*` in float64, shape (V, d)."""
        return np.array([[float(x) for x in row] for row in self.evaluate(20)], dtype=np.float64)

    def norm(self, digits: int = 30):
        """:math:`\\|W^*\\|_F` as an ``mpmath.mpf`` with ``digits`` digits."""
        import mpmath

        with mpmath.workdps(digits + 10):
            W = self.evaluate(digits)
            return mpmath.sqrt(mpmath.fsum(x * x for x in W.ravel()))


def w_star_closed_form(instance: NTPInstance, null_space: ExactNullSpace | None = None) -> WStarClosedForm:
    """Solve :math:`G g_p = E_{:,p}` exactly for every prime (instance must be compatible).

    Raises
    ------
    InputError
        When the instance is not compatible.
    """
    ns = exact_null_space(instance) if null_space is None or null_space.gram is None else null_space
    if ns.violating is not None:
        raise InputError("W* has no closed form: the instance is not NTP-compatible")
    rows = eq_rows(instance)
    gram, E, primes = ns.gram, ns.E, ns.primes
    coeffs: dict[int, dict] = {p: {} for p in primes}
    scale = 1 << -gram.exp if gram.exp < 0 else None
    post = 1 << gram.exp if gram.exp > 0 else 1  # G_true = G 2^exp, exp > 0: g = (G^-1 E) / 2^exp
    for comp, G in zip(gram.components, gram.blocks):
        n = comp.size
        rhs_cols = [pi for pi in range(len(primes)) if any(E[int(i), pi] for i in comp)]
        if not rhs_cols:
            continue
        # G_true = G * 2^exp, so G g = E  <=>  G_int g = E * 2^-exp (scaled on the right when exp < 0,
        # on the solution when exp > 0: embeddings that are all large integers)
        aug = flint.fmpz_mat(n, n + len(rhs_cols))
        for r_ in range(n):
            for c_ in range(n):
                aug[r_, c_] = G[r_, c_]
            for k, pi in enumerate(rhs_cols):
                e = int(E[int(comp[r_]), pi])
                aug[r_, n + k] = e * scale if scale is not None else e
        R, den, rank = aug.rref()
        pivots = []
        for i in range(rank):
            for c_ in range(n + len(rhs_cols)):
                if R[i, c_] != 0:
                    pivots.append(c_)
                    break
        if any(pc >= n for pc in pivots):
            raise ExactArithmeticError("inconsistent system: the instance is not NTP-compatible")
        for k, pi in enumerate(rhs_cols):
            p = primes[pi]
            for i, pc in enumerate(pivots):
                val = R[i, n + k]
                if val != 0:
                    coeffs[p][rows[int(comp[pc])][:2]] = Fraction(int(val), int(den) * post)
    return WStarClosedForm(instance, primes, coeffs)
