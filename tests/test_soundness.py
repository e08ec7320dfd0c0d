"""Float and exact verdicts against an independent exact oracle on adversarial small instances.

The oracle is written here, with python-flint rationals and sympy's exact simplex, and imports
nothing from ``ntpcert.exact``:

* compatibility (4): a rational basis Y of the left null space of :math:`A_{eq}` (rows
  :math:`(e_z - e_{a_j}) \\otimes h_j`, the embeddings taken as the exact binary fractions they are);
  compatible iff, for every basis vector y scaled to integers, :math:`\\prod_i r_i^{y_i} = 1` for the
  exact count ratios :math:`r_i` (logarithms of distinct primes are independent over Q);
* separability (6): the LP :math:`A_{eq} x = 0,\\ A_{mar} x \\ge 1` solved by exact rational simplex.

A definite verdict of ``certify`` (float) or ``exact_certify`` that disagrees with the oracle fails
the test, and so does any exception other than a one-line :class:`InputError` for data outside the
supported range. Run many examples with ``HYPOTHESIS_PROFILE=thorough`` (2,000) and print the
undetermined rates with ``-s``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from fractions import Fraction

import flint
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ntpcert import InputError, NTPInstance

FAMILIES = ("gaussian", "duplicated", "scaled", "perturbed", "ill_conditioned", "extreme_scale", "tiny_probs",
            "huge_counts", "singleton_supports", "full_supports", "d_much_less_than_m", "d_at_least_m")

EXAMPLES = {"thorough": 2000, "explore": 400}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 100)

TALLY: Counter = Counter()

#: Every exact run on these sizes (m <= 12, d <= 8, V <= 6) must finish within this many seconds.
EXACT_SECONDS = 30.0


# ---------------------------------------------------------------------------- instances
def adversarial_instance(family: str, seed: int) -> NTPInstance:
    """One instance of a family, m <= 12, d <= 8, V <= 6."""
    rng = np.random.default_rng(seed)
    V = int(rng.integers(2, 7))
    m = int(rng.integers(2, 13))
    d = int(rng.integers(1, 9))
    if family == "d_much_less_than_m":
        m, d = int(rng.integers(8, 13)), int(rng.integers(1, 3))
    if family == "d_at_least_m":
        m = int(rng.integers(2, 7))
        d = int(rng.integers(m, 9))
    H = rng.standard_normal((m, d))
    if family == "duplicated":
        src = rng.integers(0, max(1, m // 2), size=m)
        H = H[src]
    elif family == "scaled":
        H = H * (2.0 ** rng.integers(-30, 31, size=(m, 1))) * rng.choice([1.0, 3.0, 0.1], size=(m, 1))
    elif family == "perturbed":
        src = rng.integers(0, max(1, m // 2), size=m)
        H = H[src] + 1e-12 * rng.standard_normal((m, d))
    elif family == "ill_conditioned":
        U, _, Vt = np.linalg.svd(rng.standard_normal((m, d)), full_matrices=False)
        s = np.logspace(0, -10, min(m, d))
        H = (U * s) @ Vt
    elif family == "extreme_scale":
        H = H * 10.0 ** rng.choice([-300, -150, 150, 300], size=(m, 1))
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        if family == "singleton_supports":
            k = 1
        elif family == "full_supports":
            k = V if rng.random() < 0.7 else V - 1
        else:
            k = int(rng.integers(1, V + 1))
        S = rng.choice(V, size=k, replace=False)
        if family == "huge_counts":
            counts[j, S] = rng.integers(1, 10**12, size=k)
        else:
            counts[j, S] = rng.integers(1, 6, size=k)
    if counts.sum(axis=1).min() == 0 or (counts > 0).sum(axis=1).min() == V and family != "full_supports":
        counts[0, :] = 0
        counts[0, 0] = 1  # the standing assumption: one context with k_j < V
    if family == "tiny_probs":
        probs = []
        for j in range(m):
            row = [Fraction(0)] * V
            S = list(np.flatnonzero(counts[j]))
            for z in S[1:]:
                row[z] = Fraction(1, 10**9)
            row[S[0]] = 1 - sum(row, Fraction(0))
            probs.append([str(x) for x in row])
        return NTPInstance.from_probs(H, probs, [int(c) for c in rng.integers(1, 5, size=m)])
    return NTPInstance.from_counts(H, counts)


# ---------------------------------------------------------------------------- the oracle
def _rows(inst: NTPInstance):
    """Equality rows (j, z, a) and margin rows (j, v, a) with anchor a = the first token of S_j."""
    eq, mar = [], []
    for j in range(inst.m):
        S = [int(z) for z in np.flatnonzero(inst.support_mask()[j])]
        a = S[0]
        eq += [(j, z, a) for z in S[1:]]
        mar += [(j, v, a) for v in range(inst.V) if v not in S]
    return eq, mar


def _row_vector(inst: NTPInstance, j: int, plus: int, minus: int) -> list[Fraction]:
    """vec((e_plus - e_minus) h_j^T) as exact rationals (row-major W of shape (V, d))."""
    out = [Fraction(0)] * (inst.V * inst.d)
    for c in range(inst.d):
        h = Fraction(float(inst.embeddings[j, c]))
        out[plus * inst.d + c] += h
        out[minus * inst.d + c] -= h
    return out


def _ratios(inst: NTPInstance, j: int) -> list[Fraction]:
    """The exact next-token probabilities of context j (any positive scaling would do)."""
    if inst.counts is not None:
        return [Fraction(int(c)) for c in inst.counts[j]]
    return [Fraction(x) for x in inst.exact_probs[j]]


def _prime_exponents(r: Fraction) -> dict[int, int]:
    """{prime: exponent} of a positive rational (sympy's factorint)."""
    from sympy import factorint

    out: dict[int, int] = {}
    for p, e in factorint(r.numerator).items():
        out[p] = out.get(p, 0) + e
    for p, e in factorint(r.denominator).items():
        out[p] = out.get(p, 0) - e
    return out


def oracle_compatible(inst: NTPInstance) -> bool:
    eq, _ = _rows(inst)
    if not eq:
        return True
    n = inst.V * inst.d
    rows = [_row_vector(inst, j, z, a) for (j, z, a) in eq]
    At = _fmpq_mat([[rows[i][c] for i in range(len(eq))] for c in range(n)], len(eq))
    expo = []
    for (j, z, a) in eq:
        p = _ratios(inst, j)
        expo.append(_prime_exponents(p[z] / p[a]))
    primes = sorted({q for e in expo for q in e})
    for y in _null_basis(At):  # a basis of the left null space of A_eq
        # y^T b = sum_p log(p) sum_i y_i e_{i,p}, and the log p are independent over Q
        for q in primes:
            if sum((yi * e.get(q, 0) for yi, e in zip(y, expo)), Fraction(0)) != 0:
                return False
    return True


def _fmpq_mat(rows: list[list[Fraction]], ncols: int) -> flint.fmpq_mat:
    return flint.fmpq_mat(len(rows), ncols, [flint.fmpq(x.numerator, x.denominator) for r in rows for x in r])


def _null_basis(M: flint.fmpq_mat) -> list[list[Fraction]]:
    """A rational basis of the null space of M (from its reduced row-echelon form)."""
    R, rank = M.rref()
    n = M.ncols()
    pivots, row = [], 0
    for col in range(n):
        if row < rank and R[row, col] != 0:
            pivots.append(col)
            row += 1
    out = []
    for f in (c for c in range(n) if c not in pivots):
        v = [Fraction(0)] * n
        v[f] = Fraction(1)
        for i, p in enumerate(pivots):
            v[p] = -Fraction(int(R[i, f].p), int(R[i, f].q))
        out.append(v)
    return out


def _exact_combination(basis: list[list[Fraction]], target: np.ndarray) -> list[Fraction]:
    """The exact vector sum_i c_i basis_i, with c the rounded least-squares fit to ``target``."""
    B = np.array([[float(x) for x in b] for b in basis]).T
    c, *_ = np.linalg.lstsq(B, target, rcond=None)
    cq = [Fraction(float(x)).limit_denominator(1 << 30) for x in c]
    return [sum((ci * b[k] for ci, b in zip(cq, basis)), Fraction(0)) for k in range(len(target))]


def oracle_separable(inst: NTPInstance) -> bool | None:
    """(6) settled by an exactly checked witness built here from a HiGHS candidate: a point of the
    exact null space of A_eq with every margin positive, or a Farkas certificate
    (u, lambda >= 0, A_eq^T u + A_mar^T lambda = 0, sum lambda = 1) made exact on the support of
    lambda. None when neither candidate survives the exact check."""
    from scipy.optimize import linprog

    eq, mar = _rows(inst)
    if not mar:
        return True
    n = inst.V * inst.d
    A = [_row_vector(inst, j, z, a) for (j, z, a) in eq]
    B = [_row_vector(inst, j, a, v) for (j, v, a) in mar]
    Af = np.array([[float(x) for x in r] for r in A]).reshape(len(A), n)
    Bf = np.array([[float(x) for x in r] for r in B])
    scale = np.abs(Bf).max() or 1.0
    res = linprog(np.zeros(n), A_ub=-Bf / scale, b_ub=-np.ones(len(B)), A_eq=Af / scale if A else None,
                  b_eq=np.zeros(len(A)) if A else None, bounds=(None, None), method="highs")
    if res.status == 0:
        basis = _null_basis(_fmpq_mat(A, n)) if A else [[Fraction(int(i == k)) for i in range(n)] for k in range(n)]
        if basis:
            x = _exact_combination(basis, res.x)
            if all(sum((b * xi for b, xi in zip(row, x)), Fraction(0)) > 0 for row in B):
                return True
    # Farkas: variables (u free, lambda >= 0) with [A^T B^T] (u, lambda) = 0 and sum(lambda) = 1
    k, q = len(A), len(B)
    M = np.hstack([Af.T, Bf.T]) / scale if k else Bf.T / scale
    res = linprog(np.zeros(k + q), A_eq=np.vstack([M, np.r_[np.zeros(k), np.ones(q)]]),
                  b_eq=np.r_[np.zeros(n), 1.0], bounds=[(None, None)] * k + [(0, None)] * q, method="highs")
    if res.status != 0:
        return None
    lam = res.x[k:]
    keep = [i for i in range(q) if lam[i] > 1e-12]
    cols = [[A[i][c] for i in range(k)] + [B[i][c] for i in keep] for c in range(n)]  # [A^T | B_S^T]
    basis = _null_basis(_fmpq_mat(cols, k + len(keep)))
    if not basis:
        return None
    y = _exact_combination(basis, np.r_[res.x[:k], lam[keep]])
    ls = y[k:]
    if all(v >= 0 for v in ls) and sum(ls, Fraction(0)) > 0:
        return False
    return None


# ---------------------------------------------------------------------------- the test
@settings(max_examples=EXAMPLES)
@given(family=st.sampled_from(FAMILIES), seed=st.integers(0, 2**32 - 1))
def test_no_definite_verdict_contradicts_the_exact_oracle(family, seed):
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.float_verdicts import certify

    inst = adversarial_instance(family, seed)
    try:
        rep = certify(inst, svm=True)
    except InputError as err:  # data outside the supported range: a clear refusal is allowed there
        assert family == "extreme_scale", f"{family}: {err}"
        assert "\n" not in str(err)
        TALLY["refused (range)"] += 1
        return
    t0 = time.perf_counter()
    ex = exact_certify(inst, svm=True)
    seconds = time.perf_counter() - t0
    TALLY["slowest exact run (s)"] = max(TALLY["slowest exact run (s)"], round(seconds, 2))
    assert seconds <= EXACT_SECONDS, f"{family} seed {seed}: exact_certify took {seconds:.1f} s"
    truth_c, truth_s = oracle_compatible(inst), oracle_separable(inst)
    if truth_s is None:
        TALLY["oracle undetermined (separability)"] += 1
    for name, got, truth in (("float compatible", rep.compatible.holds, truth_c),
                             ("float separable", rep.separable.holds, truth_s),
                             ("exact compatible", ex.compatible.holds, truth_c),
                             ("exact separable", ex.separable.holds, truth_s)):
        TALLY[(name, "undetermined" if got is None else "definite")] += 1
        assert got is None or truth is None or got == truth, \
            f"{family} seed {seed}: {name} says {got}, the oracle {truth}"


def teardown_module(module):
    if TALLY:
        total = {k[0]: 0 for k in TALLY if isinstance(k, tuple)}
        for k, v in TALLY.items():
            if isinstance(k, tuple):
                total[k[0]] += v
        rates = {name: TALLY[(name, "undetermined")] / n for name, n in total.items() if n}
        print("\nundetermined rates:", {k: f"{v:.1%}" for k, v in rates.items()},
              "refused:", TALLY["refused (range)"], "oracle undetermined:",
              TALLY["oracle undetermined (separability)"], "slowest exact run:", TALLY["slowest exact run (s)"], "s")


def test_the_oracle_itself_on_hand_made_cases():
    same = NTPInstance.from_counts([[1.0, 0.0], [1.0, 0.0]], [[1, 2, 0], [0, 1, 1]])
    assert oracle_separable(same) is False
    doubled = NTPInstance.from_counts([[1.0, 0.0], [2.0, 0.0]], [[1, 2, 0], [1, 4, 0]])
    undoubled = NTPInstance.from_counts([[1.0, 0.0], [2.0, 0.0]], [[1, 2, 0], [1, 2, 0]])
    assert oracle_compatible(doubled) is True and oracle_compatible(undoubled) is False
    lemma1 = NTPInstance.from_counts(np.eye(3), [[1, 1, 0], [0, 2, 1], [3, 0, 0]])
    assert oracle_compatible(lemma1) and oracle_separable(lemma1)
