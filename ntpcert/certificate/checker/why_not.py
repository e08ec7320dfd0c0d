r"""The independent check of a certificate's ``why_not_separable`` and ``why_not_compatible`` sections.

Called by :func:`ntpcert.certificate.checker.verify_certificate` with its exact forms of the instance
(integer embeddings :math:`\mathrm{Hint} = 2^s H`, supports, prime exponents of the count ratios); it
imports no solver. It re-derives, from the instance alone:

* **why_not_separable**: the set C is non-separable on its own and every one-context deletion is
  separable, so C is *irreducible*:

  - the ray a is a Farkas ray of (6) (:math:`\sum_j a_j h_j^\top = 0`, :math:`\mathbf 1^\top a_j = 0`,
    :math:`a_{j,v} \le 0` off :math:`S_j`, positive mass off the supports) whose contexts are exactly C;
  - for each :math:`j \in C`, the rational W of its deletion gives, on every context
    :math:`c \in C \setminus \{j\}` (whose embedding is zero outside ``cols``), equal logits on
    :math:`S_c` and strictly smaller ones off it. Logits are compared in integers:
    :math:`D\,W\,\mathrm{Hint}_c^\top` for the common denominator D of W, a positive multiple of
    :math:`Wh_c`.
* **why_not_compatible**: the rows T of y form an irreducible inconsistent set of equations (4):
  :math:`A_T^\top y = 0` with no zero entry in y, :math:`y^\top E \ne 0` (so :math:`y^\top b \ne 0`, the
  logarithms of primes being independent over :math:`\mathbb Q`), and :math:`\operatorname{rank} A_T =
  |T| - 1` (exact integer rank): the left null space of :math:`A_T` is spanned by y, so every proper
  subset of the rows is independent and solvable for any right-hand side.

Each section is admitted only beside the matching false claim.
"""

from __future__ import annotations

import math
from typing import Any

import flint

from ntpcert.exact.logsum import log_combination_sign, log_combination_value
from ntpcert.certificate.decode import matrix_fractions, sparse_dict
from ntpcert.certificate.schema import show


def check_why_not(cert: dict, ex: Any, compat: bool | None, sep: bool | None, checks: list[str]) -> str:
    """Check both sections (each optional). ``ex`` is the checker's exact instance
    (:class:`~ntpcert.certificate.checker.exact.ExactInstance`); ``compat`` and ``sep`` the claims already checked. Returns
    ``""`` when every present section holds, else the reason (one line naming the field); appends the
    checks that passed to ``checks``."""
    for key, claim, what, check in (("why_not_separable", sep, "separability", _separable),
                                     ("why_not_compatible", compat, "compatibility", _compatible)):
        if key not in cert:
            continue
        if claim is not False:
            return f"{key}: present, but the {what} claim is not false"
        why = check(cert[key], ex, checks)
        if why:
            return why
    return ""


def _separable(sec: dict, ex: Any, checks: list[str]) -> str:
    field = "why_not_separable"
    C = list(sec["contexts"])  # strictly increasing indices < m (schema)
    a = sparse_dict(sec["ray"], f"{field}.ray")
    a = {k: x for k, x in a.items() if x != 0}
    touched = sorted({j for _, j in a})
    if touched != C:
        return (f"{field}.ray: its contexts {_short(touched)} are not the set {_short(C)}")
    mass, _ = ex.aH_zero_and_sums(a, f"{field}.ray", require_zero_aH=True)
    if mass <= 0:
        return f"{field}.ray: no mass off the supports"
    for k, (j, rec) in enumerate(zip(C, sec["deletions"])):
        name = f"{field}.deletions[{k}]"
        if rec["context"] != j:
            return f"{name}.context: {show(rec['context'])}, the set's context in that place is {j}"
        rest = [c for c in C if c != j]
        why = _separates(rec, rest, ex, name)
        if why:
            return why
    checks.append(f"why_not_separable: {len(C)} contexts, non-separable on their own (Farkas ray, "
                  f"{len(a)} non-zeros) and irreducible (each one-context deletion separated by an exact W)")
    return ""


def _separates(rec: dict, rest: list[int], ex: Any, name: str) -> str:
    """``""`` when the deletion's W separates the contexts ``rest`` exactly (module doc)."""
    if not rest:
        return ""
    cols = list(rec["cols"])
    if not cols:
        return f"{name}.W: no columns, but {len(rest)} contexts are left to separate"
    W = matrix_fractions(rec["W"], (ex.V, len(cols)), f"{name}.W")
    D = 1
    for row in W:
        for x in row:
            D = D * x.denominator // math.gcd(D, x.denominator)
    Wi = flint.fmpz_mat(ex.V, len(cols), [int(x * D) for row in W for x in row])
    inside = set(cols)
    Hc = []
    for c in rest:
        h = ex.hint_row(c)
        if any(h[i] for i in range(ex.d) if i not in inside):
            return f"{name}.cols: the embedding of context {c} is not zero outside them"
        Hc.append([h[i] for i in cols])
    Z = Wi * flint.fmpz_mat(len(cols), len(rest), [Hc[r][i] for i in range(len(cols)) for r in range(len(rest))])
    for r, c in enumerate(rest):
        S = ex.in_S[c]
        t = Z[ex.anchor[c], r]
        for v in range(ex.V):
            z = Z[v, r]
            if v in S and z != t:
                return f"{name}.W: context {c}'s in-support logits differ (tokens {ex.anchor[c]} and {v})"
            if v not in S and z >= t:
                return f"{name}.W: context {c}'s token {v} (off the support) is not below the in-support logit"
    return ""


def _compatible(sec: dict, ex: Any, checks: list[str]) -> str:
    field = "why_not_compatible.y"
    y = sparse_dict(sec["y"], field)
    if any(x == 0 for x in y.values()):
        return f"{field}: a zero entry (the rows of a cycle carry non-zero multipliers)"
    if not y:
        return f"{field}: empty"
    den = 1
    for x in y.values():
        den = den * x.denominator // math.gcd(den, x.denominator)
    yi = {}
    for key, x in y.items():
        if key not in ex.row_index:
            return f"{field}: ({key[0]}, {key[1]}) is not an equality row"
        yi[key] = int(x * den)
    if not ex.left_null(yi):
        return f"{field}: not in the left null space of A_eq"
    _, Erows = ex.E()
    e: dict[int, int] = {}
    for key, c in yi.items():
        for p, k in Erows[key].items():
            e[p] = e.get(p, 0) + c * k
    e = {p: k for p, k in e.items() if k}
    if not e:
        return f"{field}: y^T E = 0, so the cycle's log-odds agree"
    rows = sorted(yi)
    cols: dict[tuple[int, int], int] = {}
    entries = []
    for j, z in rows:
        h = ex.hint_row(j)
        row: dict[int, int] = {}
        for i, x in enumerate(h):
            if x:
                for tok, sgn in ((z, 1), (ex.anchor[j], -1)):
                    col = cols.setdefault((tok, i), len(cols))
                    row[col] = row.get(col, 0) + sgn * x
        entries.append(row)
    A = flint.fmpz_mat(len(rows), max(len(cols), 1))
    for r, row in enumerate(entries):
        for col, x in row.items():
            if x:
                A[r, col] = x
    rank = int(A.rank())
    if rank != len(rows) - 1:
        return (f"{field}: its {len(rows)} rows have rank {rank}, not {len(rows) - 1}: not a single cycle "
                "(a proper subset is already inconsistent)")
    if log_combination_sign(e) < 0:
        e = {p: -k for p, k in e.items()}
    mismatch = log_combination_value(e)
    checks.append(f"why_not_compatible: {len(rows)} log-odds equations in a circuit (rank {rank}), mismatch "
                  f"y^T b = {_log_sum(e)} = {mismatch:.6g} nats")
    return ""


def _log_sum(e: dict[int, int]) -> str:
    """``log(2) + 4 log(3) - log(5)`` for ``{2: 1, 3: 4, 5: -1}``."""
    out = ""
    for p, k in sorted(e.items()):
        term = f"log({p})" if abs(k) == 1 else f"{abs(k)} log({p})"
        out += (term if k > 0 else f"-{term}") if not out else (f" + {term}" if k > 0 else f" - {term}")
    return out


def _short(xs: list[int]) -> str:
    return str(xs) if len(xs) <= 8 else f"[{', '.join(map(str, xs[:8]))}, ... ({len(xs)} in all)]"
