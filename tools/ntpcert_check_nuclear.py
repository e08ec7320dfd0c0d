"""The enclosure file kind (format ntpcert-nuclear-enclosure, docs/certificate-format.md) for tools/ntpcert_check.py:
lower <= L^mm <= upper for the nuclear-norm SVM of the support matrix, in exact rationals. L exactly feasible
(equal in-support logits c_j, every other logit <= c_j - 1); A symmetric positive definite (exact LDL^T, pivots
> 0) with upper >= 0 and upper^2 >= tr A * tr(L^T A^-1 L) (A (V, V) with L or (m, m) with L^T); Lambda with zero
column sums, off-support entries <= 0 and I - Lambda^T Lambda (the smaller Gram) positive definite, and
lower <= -(sum of Lambda off the supports) (weak duality); lower <= upper."""

import re

import flint

from ntpcert_check_exact import Invalid, refuse

NUCLEAR_FORMAT = "ntpcert-nuclear-enclosure"
KEYS = {"format", "version", "mask", "L", "A", "Lambda", "lower", "upper"}
RATIONAL = re.compile(r"-?(0|[1-9][0-9]*)(/[1-9][0-9]*)?")


def rat(x, field):
    refuse(type(x) is not str or len(x) > 4000 or not RATIONAL.fullmatch(x), f"{field}: not a rational string")
    v = flint.fmpq(x)
    refuse(str(v) != x, f"{field}: not in lowest terms")
    return v


def mat(x, rows, cols, field):
    refuse(type(x) is not list or len(x) != rows or any(type(r) is not list or len(r) != cols for r in x),
           f"{field}: expected {rows} rows of {cols} rationals")
    return flint.fmpq_mat(rows, cols, [rat(v, f"{field}[{i}][{j}]") for i, r in enumerate(x) for j, v in enumerate(r)])


def positive_definite(M):
    """Whether the exact LDL^T of the symmetric fmpq_mat M has every pivot > 0."""
    n = M.nrows()
    a = [[M[i, j] for j in range(n)] for i in range(n)]
    for k in range(n):
        if not a[k][k] > 0:
            return False
        for i in range(k + 1, n):
            f = a[i][k] / a[k][k]
            for j in range(k + 1, n):
                a[i][j] -= f * a[k][j]
    return True


def check_nuclear(cert):
    refuse(set(cert) != KEYS, f"enclosure: keys must be exactly {sorted(KEYS)}")
    refuse(type(cert["version"]) is not int or cert["version"] != 1, f"version: {cert['version']!r} is not 1")
    S = cert["mask"]
    refuse(type(S) is not list or not 2 <= len(S) <= 200 or type(S[0]) is not list or not 1 <= len(S[0]) <= 200,
           "mask: expected V rows of m entries")
    V, m = len(S), len(S[0])
    refuse(any(type(r) is not list or len(r) != m or any(type(b) is not int or b not in (0, 1) for b in r) for r in S),
           "mask: entries must be 0 or 1")
    refuse(any(not any(S[z][j] for z in range(V)) for j in range(m)), "mask: a context has an empty support")
    L, Lam = mat(cert["L"], V, m, "L"), mat(cert["Lambda"], V, m, "Lambda")
    lower, upper = rat(cert["lower"], "lower"), rat(cert["upper"], "upper")
    for j in range(m):
        c = L[[z for z in range(V) if S[z][j]][0], j]
        for v in range(V):
            refuse(S[v][j] and L[v, j] != c, f"L[{v}][{j}]: in-support logits of context {j} are not equal")
            refuse(not S[v][j] and L[v, j] > c - 1, f"L[{v}][{j}]: margin below 1 in context {j}")
        refuse(sum((Lam[v, j] for v in range(V)), flint.fmpq(0)) != 0, f"Lambda: column {j} does not sum to 0")
        refuse(any(not S[v][j] and Lam[v, j] > 0 for v in range(V)), f"Lambda: positive off the support of {j}")
    n = len(cert["A"]) if type(cert["A"]) is list else 0
    refuse(n not in (V, m), f"A: expected ({V}, {V}) or ({m}, {m})")
    A, M = mat(cert["A"], n, n, "A"), (L if n == V else L.transpose())
    refuse(A != A.transpose() or not positive_definite(A), "A: not symmetric positive definite (exact LDL^T)")
    Y = A.solve(M)
    quad = sum((M[i, j] * Y[i, j] for i in range(M.nrows()) for j in range(M.ncols())), flint.fmpq(0))
    refuse(upper < 0 or upper * upper < sum((A[i, i] for i in range(n)), flint.fmpq(0)) * quad,
           "upper: below sqrt(tr A * tr(L^T A^-1 L)), the proved bound on ||L||_*")
    G = Lam.transpose() * Lam if m <= V else Lam * Lam.transpose()
    k = G.nrows()
    refuse(not positive_definite(flint.fmpq_mat(k, k, [int(i == j) for i in range(k) for j in range(k)]) - G),
           "Lambda: spectral norm not below 1 (exact LDL^T of I - Lambda^T Lambda)")
    dual = -sum((Lam[v, j] for v in range(V) for j in range(m) if not S[v][j]), flint.fmpq(0))
    refuse(lower > dual, "lower: above the dual value of Lambda")
    refuse(lower > upper, "lower: above upper")
    return [f"nuclear enclosure: V = {V}, m = {m}: L feasible, A and I - Lambda^T Lambda positive definite (exact)",
            f"{float(lower):.17g} <= L^mm <= {float(upper):.17g}"]
