r"""The check of a nuclear-norm enclosure file (format ``ntpcert-nuclear-enclosure``, docs/certificate-format.md):
a rational interval proved to hold :math:`L^{mm}`, the value of the logit-domain nuclear-norm NTP-SVM of a support
pattern S (``ntpcert.geometry.certificate``), in exact rational arithmetic (python-flint ``fmpq``), no tolerance.

**Upper end.** L must be exactly feasible: within each column the in-support entries are one value
:math:`c_j`, and every other entry is :math:`\le c_j - 1`. A is a symmetric matrix proved positive definite by
an exact :math:`LDL^\top` (every pivot > 0). Cauchy–Schwarz and :math:`\|\Lambda\|_2\le1`:
:math:`\langle\Lambda, L\rangle = \langle A^{1/2}\Lambda, A^{-1/2}L\rangle \le
\sqrt{\mathrm{tr}(\Lambda^\top A\Lambda)}\,\sqrt{\mathrm{tr}(L^\top A^{-1}L)} \le
\sqrt{\mathrm{tr}A\cdot\mathrm{tr}(L^\top A^{-1}L)}`, so :math:`L^{mm} \le \|L\|_* \le` ``upper`` once
:math:`\mathrm{upper} \ge 0` and :math:`\mathrm{upper}^2 \ge \mathrm{tr}A\cdot\mathrm{tr}(L^\top A^{-1}L)`.
A may be (V, V) (with L) or (m, m) (with :math:`L^\top`).

**Lower end.** Λ is dual feasible: each column sums to 0, its off-support entries are :math:`\le 0`, and
:math:`I - \Lambda^\top\Lambda` (or :math:`I - \Lambda\Lambda^\top`, the smaller) is positive definite by an
exact :math:`LDL^\top`, so :math:`\|\Lambda\|_2 < 1`. Weak duality: for feasible L,
:math:`\|L\|_* \ge \langle\Lambda, L\rangle = \sum_j\sum_{v\notin S_j}\Lambda_{v,j}(L_{v,j} - c_j)
\ge -\sum_{v\notin S_j}\Lambda_{v,j}`, which must be at least ``lower``. Finally lower ≤ upper.
"""

from __future__ import annotations

import re
from typing import Any

import flint

from ntpcert.certificate.checker.common import Invalid, need, num_text
from ntpcert.certificate.format import NUCLEAR_FORMAT, NUCLEAR_VERSION
#: Keys of an enclosure file.
NUCLEAR_KEYS = ("format", "version", "mask", "L", "A", "Lambda", "lower", "upper")
#: Largest V and m, and the longest rational string, accepted (the check is O(n^3) in exact rationals).
NUCLEAR_MAX_SIDE, NUCLEAR_MAX_DIGITS = 200, 4000
_RATIONAL = re.compile(r"-?(0|[1-9][0-9]*)(/[1-9][0-9]*)?")


def _q(x: Any, field: str) -> flint.fmpq:
    need(type(x) is str and len(x) <= NUCLEAR_MAX_DIGITS and _RATIONAL.fullmatch(x) is not None,
         f"{field}: {str(x)[:40]!r} is not a rational string 'p' or 'p/q'")
    v = flint.fmpq(x)
    need(str(v) == x, f"{field}: {x[:40]!r} is not in lowest terms")
    return v


def _matrix(x: Any, rows: int, cols: int, field: str) -> list[list[flint.fmpq]]:
    need(type(x) is list and len(x) == rows and all(type(r) is list and len(r) == cols for r in x),
         f"{field}: expected a list of {rows} rows of {cols} rationals")
    return [[_q(v, f"{field}[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(x)]


def first_nonpositive_pivot(M: list[list[flint.fmpq]]) -> int | None:
    r"""The index of the first pivot :math:`\le 0` of the exact :math:`LDL^\top` of the symmetric M (no pivoting),
    or None when every pivot is > 0, i.e. M is positive definite."""
    a = [list(r) for r in M]
    n = len(a)
    for k in range(n):
        p = a[k][k]
        if not p > 0:
            return k
        for i in range(k + 1, n):
            f = a[i][k] / p
            if f != 0:
                for j in range(k + 1, n):
                    a[i][j] -= f * a[k][j]
    return None


def gram_complement(Lam: list[list[flint.fmpq]]) -> list[list[flint.fmpq]]:
    """I - Lam^T Lam or I - Lam Lam^T, whichever is smaller."""
    M = flint.fmpq_mat(len(Lam), len(Lam[0]), [v for r in Lam for v in r])
    G = M.transpose() * M if M.ncols() <= M.nrows() else M * M.transpose()
    n = G.nrows()
    return [[(1 if i == j else 0) - G[i, j] for j in range(n)] for i in range(n)]


def check_nuclear_enclosure(cert: Any, mask: list[list[bool]] | None = None) -> list[str]:
    """The notes of a valid enclosure file; raises :class:`Invalid` naming the first failed check.
    ``mask``: a (V, m) support matrix the file's own must equal (e.g. from DATA)."""
    need(type(cert) is dict and set(cert) == set(NUCLEAR_KEYS),
         f"enclosure: keys must be exactly {', '.join(NUCLEAR_KEYS)}")
    need(cert["format"] == NUCLEAR_FORMAT and type(cert["version"]) is int and cert["version"] == NUCLEAR_VERSION,
         f"format: {cert['format']!r} version {cert['version']!r} is not {NUCLEAR_FORMAT} version {NUCLEAR_VERSION}")
    S = cert["mask"]
    need(type(S) is list and 2 <= len(S) <= NUCLEAR_MAX_SIDE and type(S[0]) is list
         and 1 <= len(S[0]) <= NUCLEAR_MAX_SIDE, f"mask: expected V rows (2..{NUCLEAR_MAX_SIDE}) of m entries")
    V, m = len(S), len(S[0])
    need(all(type(r) is list and len(r) == m and all(type(b) is int and b in (0, 1) for b in r) for r in S),
         f"mask: every row must hold {m} entries 0 or 1")
    need(all(any(S[z][j] for z in range(V)) for j in range(m)), "mask: a context has an empty support")
    if mask is not None:
        need([[int(bool(b)) for b in r] for r in mask] == S, "mask: not the support matrix of the data given")
    L = _matrix(cert["L"], V, m, "L")
    Lam = _matrix(cert["Lambda"], V, m, "Lambda")
    lower, upper = _q(cert["lower"], "lower"), _q(cert["upper"], "upper")
    # --- L exactly feasible
    for j in range(m):
        inn = [z for z in range(V) if S[z][j]]
        c = L[inn[0]][j]
        for z in inn:
            need(L[z][j] == c, f"L[{z}][{j}]: in-support logits of context {j} are not equal")
        for v in range(V):
            need(S[v][j] or L[v][j] <= c - 1, f"L[{v}][{j}]: margin below 1 in context {j}")
    # --- A positive definite, and the upper end
    A = cert["A"]
    need(type(A) is list and len(A) in (V, m), f"A: expected a ({V}, {V}) or ({m}, {m}) matrix")
    n = len(A)
    A = _matrix(A, n, n, "A")
    need(all(A[i][j] == A[j][i] for i in range(n) for j in range(i)), "A: not symmetric")
    k = first_nonpositive_pivot(A)
    need(k is None, f"A: not positive definite (LDL^T pivot {k} is <= 0)")
    Lm = flint.fmpq_mat(V, m, [v for r in L for v in r])
    if n != V:
        Lm = Lm.transpose()
    Y = flint.fmpq_mat(n, n, [v for r in A for v in r]).solve(Lm)
    quad = sum((Lm[i, j] * Y[i, j] for i in range(Lm.nrows()) for j in range(Lm.ncols())), flint.fmpq(0))
    trace = sum((A[i][i] for i in range(n)), flint.fmpq(0))
    need(upper >= 0 and upper * upper >= trace * quad,
         f"upper: {num_text(upper)} is below sqrt(tr A * tr(L^T A^-1 L)), the proved bound on ||L||_*")
    # --- Lambda dual feasible, and the lower end
    for j in range(m):
        need(sum((Lam[z][j] for z in range(V)), flint.fmpq(0)) == 0, f"Lambda: column {j} does not sum to 0")
        for v in range(V):
            need(S[v][j] or Lam[v][j] <= 0, f"Lambda[{v}][{j}]: positive off the support")
    k = first_nonpositive_pivot(gram_complement(Lam))
    need(k is None, f"Lambda: spectral norm not below 1 (LDL^T of I - Lambda^T Lambda: pivot {k} is <= 0)")
    dual = -sum((Lam[v][j] for j in range(m) for v in range(V) if not S[v][j]), flint.fmpq(0))
    need(lower <= dual, f"lower: {num_text(lower)} is above the dual value {num_text(dual)} of Lambda")
    need(lower <= upper, "lower: above upper")
    width = (upper - lower) / upper if upper > 0 else flint.fmpq(0)
    return [f"nuclear enclosure: V = {V}, m = {m}: L exactly feasible, A positive definite (exact LDL^T), "
            f"||Lambda||_2 < 1 (exact LDL^T)",
            f"{num_text(lower)} <= L^mm <= {num_text(upper)} (relative width {num_text(width)})"]


def is_nuclear_enclosure(cert: Any) -> bool:
    """Whether a parsed file declares the enclosure format (and is to be checked by this module)."""
    return type(cert) is dict and cert.get("format") == NUCLEAR_FORMAT


__all__ = ["Invalid", "NUCLEAR_FORMAT", "NUCLEAR_KEYS", "NUCLEAR_VERSION", "check_nuclear_enclosure",
           "first_nonpositive_pivot", "gram_complement", "is_nuclear_enclosure"]
