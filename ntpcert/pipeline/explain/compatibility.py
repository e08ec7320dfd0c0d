r"""Why not compatible: an irreducible cycle of log-odds that no linear decoder satisfies.

The equations (4) read :math:`(Wh_j)_z - (Wh_j)_{z_j} = b_{(j,z)} = \log(c_{j,z}/c_{j,z_j})` for
:math:`z \in S_j \setminus \{z_j\}` (anchor :math:`z_j = \min S_j`; :math:`c_j` positive integers
proportional to :math:`p_j`). A left null vector y of their matrix :math:`A_{eq}` combines them into
:math:`0 = \sum_i y_i b_i`: the left-hand sides cancel for every W. When the data give
:math:`\sum_i y_i b_i \ne 0`, no W solves (4); the gap is the **mismatch**, in nats.

**Exactness.** With :math:`\nu_p` the exponent of the prime p,
:math:`b_i = \sum_p E_{i,p}\log p` with :math:`E_{i,p} = \nu_p(c_{j,z}) - \nu_p(c_{j,z_j})`, and the
logarithms of primes are linearly independent over :math:`\mathbb Q`: for rational y,
:math:`y^\top b \ne 0` iff :math:`y^\top E \ne 0`, and then
:math:`y^\top b = \log(\mathrm{num}/\mathrm{den})` with the integers
:math:`\mathrm{num} = \prod_{e_p > 0} p^{e_p}`, :math:`\mathrm{den} = \prod_{e_p<0} p^{-e_p}`,
:math:`e = E^\top y`.

**Shrinking.** A set T of equations is inconsistent iff
:math:`\mathrm{rank}[A_T \mid E_T] > \mathrm{rank}\,A_T` (exact integer ranks; the columns of
:math:`A_T` are scaled by one power of two, which changes no rank). Starting from the support of a
violating y, each equation is deleted in turn when the rest stays inconsistent. What remains is
**irreducible** — deleting any one equation leaves a consistent system — exactly when its left null
space is one-dimensional and spanned by a y without zero entries (a *circuit*): then every proper
subset of the rows is linearly independent, so solvable for any right-hand side. Both facts are
checked in integers; y is checked again on the whole instance
(:func:`ntpcert.pipeline.decide.exact_left_null`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import flint
import numpy as np

from ntpcert.exact.logsum import log_combination_sign, log_combination_value
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.util.budget import Deadline, stop_note
from ntpcert.util.validate import check_int

#: The deletion filter's budget of work: equations tried (each one exact rank of at most the rows left).
#: When it is spent the cycle found so far is reported, not proved irreducible. A null vector with n
#: non-zeros takes n tries; it replaces a limit of 30 s. The largest filter of the default suite tried 10
#: equations, those of the pydoc benchmarks (k = 2, 3) 4.
MAX_TRIES = 5_000
#: Largest exponent sum for which the mismatch is written as an exact ratio of integers.
MAX_EXACT_EXPONENT = 4096


@dataclass(frozen=True)
class LogOddsTerm:
    r""":math:`k \cdot \log(p_{j,u}/p_{j,w})`, one term of the cycle.

    Attributes
    ----------
    context : int
    coefficient : int
        Positive.
    token, versus : int
        The tokens u and w of context ``context``.
    counts : tuple of (int, int)
        :math:`c_{j,u}, c_{j,w}`, integers proportional to the probabilities.
    """

    context: int
    coefficient: int
    token: int
    versus: int
    counts: tuple[int, int]

    @property
    def log_odds(self) -> float:
        return math.log(self.counts[0]) - math.log(self.counts[1])


@dataclass(frozen=True, eq=False)
class WhyNotCompatible:
    r"""An inconsistent set of log-odds equations, irreducible when ``irreducible``.

    Attributes
    ----------
    instance : NTPInstance
    rows : tuple of (int, int)
        The equations ``(j, z)`` (context, token; against the anchor :math:`\min S_j`).
    y : tuple of int
        Coprime integer multipliers of ``rows``, :math:`A_{eq}^\top y = 0`, oriented so that the
        mismatch is positive.
    terms : tuple of LogOddsTerm
        The same combination regrouped per context into token pairs (it sums to the mismatch).
    exponents : dict
        ``{prime: e_p}``, :math:`e = E^\top y \ne 0`: the mismatch is :math:`\sum_p e_p \log p`.
    irreducible : bool or None
        True when the rows' left null space is spanned by y and y has no zero entry (module doc).
    rank : int
        Exact rank of the rows.
    null_checked : bool
        Whether y was checked exactly to be a left null vector of the whole instance's :math:`A_{eq}`.
    start_rows : int
    seconds : float
    note : str
    tries : int
        Equations tried: the work the filter spent (its budget is ``max_tries``).
    """

    instance: NTPInstance
    rows: tuple[tuple[int, int], ...]
    y: tuple[int, ...]
    terms: tuple[LogOddsTerm, ...]
    exponents: dict
    irreducible: bool | None
    rank: int
    null_checked: bool
    start_rows: int
    seconds: float
    note: str = ""
    tries: int = 0

    @property
    def mismatch(self) -> float:
        """:math:`\\sum_i y_i b_i` in nats (positive), evaluated from the exact prime exponents."""
        return log_combination_value(self.exponents)

    def mismatch_ratio(self) -> tuple[int, int] | None:
        """``(num, den)`` with mismatch = log(num/den) exactly, or None when too large to write."""
        if sum(abs(e) * p.bit_length() for p, e in self.exponents.items()) > MAX_EXACT_EXPONENT:
            return None
        num = math.prod(p ** e for p, e in self.exponents.items() if e > 0)
        den = math.prod(p ** -e for p, e in self.exponents.items() if e < 0)
        return num, den

    @property
    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({j for j, _ in self.rows}))

    def to_json(self) -> dict:
        from ntpcert.pipeline.explain.names import context_text, token_text

        inst = self.instance
        ratio = self.mismatch_ratio()
        return {
            "irreducible": self.irreducible,
            "equations": len(self.rows),
            "rank": self.rank,
            "contexts": len(self.contexts),
            "terms": [{"context": t.context, "text": context_text(inst, t.context), "coefficient": t.coefficient,
                       "token": token_text(inst, t.token), "versus": token_text(inst, t.versus),
                       "counts": list(t.counts), "log_odds": t.log_odds} for t in self.terms],
            "rows": [{"context": j, "token": token_text(inst, z), "anchor": token_text(inst, int(inst.support(j)[0])),
                      "y": y} for (j, z), y in zip(self.rows, self.y)],
            "mismatch_nats": self.mismatch,
            "mismatch_exact": None if ratio is None else f"log({ratio[0]}/{ratio[1]})",
            "prime_exponents": {str(p): e for p, e in sorted(self.exponents.items())},
            "null_vector_checked": self.null_checked,
            "start_equations": self.start_rows,
            "note": self.note,
            "seconds": self.seconds,
        }


class _Rows:
    """The integer rows :math:`[A_T \\mid E_T]` of a set of equations, built once."""

    def __init__(self, instance: NTPInstance, rows: list[tuple[int, int]]):
        from ntpcert.exact.compatibility import factorise

        H = instance.embeddings
        self.rows = rows
        ctxs = sorted({j for j, _ in rows})
        ratios = {j: instance.ratio_integers(j) for j in ctxs}
        self.ratios = ratios
        anchors = {j: int(instance.support(j)[0]) for j in ctxs}
        self.anchors = anchors
        facts = {(j, z): factorise(c) for j in ctxs for z, c in ratios[j].items()}
        primes = sorted({p for f in facts.values() for p in f})
        shift = max((float(x).as_integer_ratio()[1].bit_length() - 1 for x in H[ctxs].ravel() if x != 0.0), default=0)
        cols: dict[tuple[int, int], int] = {}
        entries: list[dict[int, int]] = []
        for j, z in rows:
            e: dict[int, int] = {}
            for i in np.flatnonzero(H[j]):
                num, den = float(H[j, i]).as_integer_ratio()
                val = num * ((1 << shift) // den)
                for tok, sgn in ((z, 1), (anchors[j], -1)):
                    c = cols.setdefault((tok, int(i)), len(cols))
                    e[c] = e.get(c, 0) + sgn * val
            entries.append(e)
        self.ncols = len(cols)
        self.primes = primes
        self.E = [[facts[(j, z)].get(p, 0) - facts[(j, anchors[j])].get(p, 0) for p in primes] for j, z in rows]
        self.A = entries

    def matrix(self, idx: list[int], with_e: bool) -> flint.fmpz_mat:
        n = self.ncols + (len(self.primes) if with_e else 0)
        M = flint.fmpz_mat(len(idx), max(n, 1))
        for r, i in enumerate(idx):
            for c, v in self.A[i].items():
                if v:
                    M[r, c] = v
            if with_e:
                for k, v in enumerate(self.E[i]):
                    if v:
                        M[r, self.ncols + k] = v
        return M

    def inconsistent(self, idx: list[int]) -> bool:
        return bool(idx) and self.matrix(idx, True).rank() > self.matrix(idx, False).rank()

    def exponents(self, idx: list[int], y: list[int]) -> dict[int, int]:
        out = {}
        for k, p in enumerate(self.primes):
            e = sum(yi * self.E[i][k] for i, yi in zip(idx, y))
            if e:
                out[p] = e
        return out


def _primitive(col: list[int]) -> list[int]:
    g = 0
    for v in col:
        g = math.gcd(g, v)
    return [v // g for v in col] if g > 1 else col


def _pairs(instance: NTPInstance, R: _Rows, idx: list[int], y: list[int]) -> tuple[LogOddsTerm, ...]:
    """The combination regrouped per context: coefficients over tokens, matched into (+, -) pairs."""
    coef: dict[int, dict[int, int]] = {}
    for i, yi in zip(idx, y):
        j, z = R.rows[i]
        c = coef.setdefault(j, {})
        c[z] = c.get(z, 0) + yi
        a = R.anchors[j]
        c[a] = c.get(a, 0) - yi
    terms = []
    for j in sorted(coef):
        pos = sorted(((v, c) for v, c in coef[j].items() if c > 0), key=lambda t: (-t[1], t[0]))
        neg = sorted(((v, -c) for v, c in coef[j].items() if c < 0), key=lambda t: (-t[1], t[0]))
        pi = ni = 0
        pos = [list(t) for t in pos]
        neg = [list(t) for t in neg]
        while pi < len(pos) and ni < len(neg):
            k = min(pos[pi][1], neg[ni][1])
            u, w = pos[pi][0], neg[ni][0]
            terms.append(LogOddsTerm(j, k, u, w, (R.ratios[j][u], R.ratios[j][w])))
            pos[pi][1] -= k
            neg[ni][1] -= k
            pi += pos[pi][1] == 0
            ni += neg[ni][1] == 0
    return tuple(terms)


def why_not_compatible(instance: NTPInstance, violating: dict, *, system: KeslerSystem | None = None,
                       time_limit: float | None = None, max_tries: int = MAX_TRIES) -> WhyNotCompatible | None:
    r"""Shrink a violating left null vector of :math:`A_{eq}` to an irreducible cycle (module doc).

    Parameters
    ----------
    instance : NTPInstance
    violating : dict
        ``{(j, z): int}``, a left null vector of the equality rows with :math:`y^\top b \ne 0` (e.g. the
        ``y`` of a :class:`~ntpcert.verdict.ViolatingNullVector` witness).
    system : KeslerSystem, optional
        The instance's rows (built here when not given), for the exact re-check of the result.
    time_limit : float, optional
        A user's cap in seconds on the deletion filter, off by default.
    max_tries : int
        The filter's budget of work: equations tried (default :data:`MAX_TRIES`).

    Returns None when ``violating`` is not an inconsistent set of equations (nothing to explain).
    """
    from ntpcert.pipeline.decide import exact_left_null

    check_int("max_tries", max_tries, minimum=1)
    t0 = time.perf_counter()
    deadline = Deadline(time_limit)
    rows = sorted((int(j), int(z)) for (j, z), v in violating.items() if v != 0)
    if not rows:
        return None
    R = _Rows(instance, rows)
    T = list(range(len(rows)))
    if not R.inconsistent(T):
        return None
    note = ""
    tried = 0
    for i in list(T):
        note = stop_note(deadline, tried, max_tries, "equations tried", "every equation was tried", "max_tries")
        if note:
            break
        tried += 1
        rest = [k for k in T if k != i]
        if R.inconsistent(rest):
            T = rest
    X, nullity = R.matrix(T, False).transpose().nullspace()
    nullity = int(nullity)
    y = None
    for c in range(nullity):
        col = _primitive([int(X[r, c]) for r in range(len(T))])
        if R.exponents(T, col):
            y = col
            break
    if y is None:  # cannot happen for an inconsistent T; never guess
        return None
    keep = [k for k, v in enumerate(y) if v]
    T, y = [T[k] for k in keep], [y[k] for k in keep]
    exps = R.exponents(T, y)
    if log_combination_sign(exps) < 0:
        y = [-v for v in y]
        exps = {p: -e for p, e in exps.items()}
    rank = R.matrix(T, False).rank()
    # rank |T| - 1: a one-dimensional left null space, spanned by y, which has no zero entry
    irreducible = True if rank == len(T) - 1 else None
    if irreducible is None and not note:
        note = f"the rows left have rank {rank} < {len(T) - 1}: not a single cycle"
    system = system if system is not None else KeslerSystem.build(instance)
    index = {(int(j), int(z)): i for i, (j, z) in enumerate(zip(system.eq_context, system.eq_token))}
    full = np.zeros(system.n_eq, dtype=np.int64)
    checked = all(abs(v) < 2**62 for v in y)
    if checked:
        for k, v in zip(T, y):
            full[index[R.rows[k]]] = v
        checked = bool(exact_left_null(system, full))
    if not checked:
        irreducible = None
        note = "the cycle fails the exact null-vector check on the whole instance"
    return WhyNotCompatible(instance, tuple(R.rows[k] for k in T), tuple(y), _pairs(instance, R, T, y), exps,
                            irreducible, rank, checked, len(rows), time.perf_counter() - t0, note, tried)


__all__ = ["LogOddsTerm", "MAX_TRIES", "WhyNotCompatible", "why_not_compatible"]
