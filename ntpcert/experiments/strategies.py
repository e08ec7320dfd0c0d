r"""Hypothesis strategies for NTP data: supports, counts, probabilities, embeddings, whole instances.

Use them to property-test conjectures about next-token prediction. Every strategy takes keyword-only
bounds, rejects invalid arguments with :class:`hypothesis.errors.InvalidArgument` naming the argument
and its value, and shrinks towards small, readable data: few contexts, low dimension, small vocabularies,
supports ``{0, 1, ...}``, counts of one, small integer embeddings.

.. code-block:: pycon

    >>> from hypothesis import given
    >>> from ntpcert.experiments import strategies as nst
    >>> nst.support_masks(m=3, V=4, min_k=1, max_k=2).example()
    array([[ True, False, False,  True],
           [ True, False, False, False],
           [False,  True,  True, False]])
    >>> nst.ntp_instances(max_m=2, max_d=2, max_V=3).example()
    NTPInstance.from_counts(embeddings=[[1], [3]], counts=[[1, 2, 4], [0, 2, 0]])

    >>> @given(nst.ntp_instances(min_d=4, max_m=3, embedding="gaussian"))
    ... def test_lemma_1(inst):   # d > m and rank H = m imply separability
    ...     ...

Drawn instances are :class:`ExampleInstance` objects, an :class:`~ntpcert.instance.NTPInstance`
whose ``repr`` is the constructor call that rebuilds it, so a falsifying example can be pasted
back into Python; :func:`describe` prints the same instance as a table of contexts.

Supports and overlap
--------------------
``overlap`` chooses how the supports :math:`S_j` relate: ``"any"`` (independent), ``"identical"``
(all equal), ``"nested"`` (a chain: :math:`S_i \subseteq S_j` whenever :math:`k_i \le k_j`) or
``"disjoint"`` (pairwise disjoint, so :math:`\sum_j k_j \le V`). One-hot supports are
``min_k=max_k=1`` (the multiclass case, :math:`\mathcal H = 0`); full supports are ``min_k=max_k=V``.

Embedding families
------------------
``"integer"`` (entries in ``[-max_abs, max_abs]``), ``"gaussian"`` (:func:`ntpcert.instance.embeddings.random_gaussian`
from a drawn seed: generic position), ``"low-rank"`` (:math:`H = A\,[I_r\ C]` with integer factors, so
:math:`\operatorname{rank} H \le r`), ``"duplicated"`` (contexts copy one of a few integer rows) and
``"scaled"`` (contexts are positive integer multiples of a few integer rows). Unless ``allow_zero_rows``,
no row is zero (a zero embedding makes any context with :math:`k_j < V` non-separable on its own).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ntpcert.util.extras import require

st = require("hypothesis.strategies", "strategies", "ntpcert.experiments.strategies")
InvalidArgument = require("hypothesis.errors", "strategies", "ntpcert.experiments.strategies").InvalidArgument

from ntpcert.instance.embeddings import random_gaussian
from ntpcert.instance import NTPInstance
from ntpcert.util.numbers import lcm_all

__all__ = [
    "partly_separable_instances",
    "OVERLAPS",
    "EMBEDDING_FAMILIES",
    "DISTRIBUTIONS",
    "ExampleInstance",
    "describe",
    "support_masks",
    "counts",
    "probabilities",
    "embeddings",
    "ntp_instances",
]

OVERLAPS = ("any", "identical", "nested", "disjoint")
EMBEDDING_FAMILIES = ("integer", "gaussian", "low-rank", "duplicated", "scaled")
#: How :func:`ntp_instances` states the next-token laws: integer counts, exact fractions, or floats.
DISTRIBUTIONS = ("counts", "fractions", "floats")

#: Largest seed drawn for the ``"gaussian"`` family.
_MAX_SEED = 2**32 - 1
#: Reprs longer than this are written one row a line.
_ONE_LINE = 100


# ---------------------------------------------------------------------------- argument checks
def _int(name: str, value: Any, *, low: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name}={value!r} must be an integer")
    if low is not None and value < low:
        raise InvalidArgument(f"{name}={value!r} must be at least {low}")
    return int(value)


def _bounds(lo_name: str, lo: Any, hi_name: str, hi: Any, *, low: int) -> tuple[int, int]:
    lo = _int(lo_name, lo, low=low)
    hi = _int(hi_name, hi, low=low)
    if hi < lo:
        raise InvalidArgument(f"{hi_name}={hi!r} must be at least {lo_name}={lo!r}")
    return lo, hi


def _choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise InvalidArgument(f"{name}={value!r} must be one of {', '.join(map(repr, options))}")
    return value


# ---------------------------------------------------------------------------- readable instances
def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))


def _matrix(rows: list[list[str]], indent: str) -> str:
    lines = ["[" + ", ".join(r) + "]" for r in rows]
    return "[" + (",\n" + indent + " ").join(lines) + "]"


class ExampleInstance(NTPInstance):
    """An :class:`~ntpcert.instance.NTPInstance` whose ``repr`` is the call that rebuilds it.

    Integer-valued embeddings print as integers, counts as counts, exact probabilities as fraction
    strings; ``eval(repr(inst), {"NTPInstance": NTPInstance})`` has the same
    :meth:`~ntpcert.instance.NTPInstance.fingerprint`.
    """

    def _parts(self) -> tuple[str, list[tuple[str, list[list[str]]]], list[str] | None]:
        H = [[_num(x) for x in row] for row in self.embeddings]
        if self.counts is not None:
            return "from_counts", [("embeddings", H), ("counts", [[str(int(c)) for c in r] for r in self.counts])], None
        if self.probs_exact_from_floats:
            P = [[_num(float(f)) for f in row] for row in self.exact_probs]
        else:
            P = [[str(f) if f.denominator == 1 else f'"{f}"' for f in row] for row in self.exact_probs]
        w = self.exact_weights
        lcm = lcm_all(f.denominator for f in w)
        ints = [int(f * lcm) for f in w]
        return "from_probs", [("embeddings", H), ("probs", P)], [str(i) for i in ints]

    def __repr__(self) -> str:
        ctor, mats, weights = self._parts()
        tail = "" if weights is None else f", weights=[{', '.join(weights)}]"
        flat = ", ".join(f"{k}={_matrix(v, '').replace(chr(10), '')}" for k, v in mats)
        line = f"NTPInstance.{ctor}({flat}{tail})"
        if len(line) <= _ONE_LINE:
            return line
        body = [f"    {k}={_matrix(v, ' ' * (5 + len(k)))}," for k, v in mats]
        if weights is not None:
            body.append(f"    weights=[{', '.join(weights)}],")
        return f"NTPInstance.{ctor}(\n" + "\n".join(body) + "\n)"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Hypothesis' and IPython's pretty printer: the same text as ``repr``."""
        for i, line in enumerate(repr(self).splitlines()):
            if i:
                p.break_()
            p.text(line)


def describe(inst: NTPInstance) -> str:
    r"""A table of the contexts of ``inst``: embedding :math:`h_j`, support :math:`S_j` and the
    next-token law on it (counts, fractions or floats), one context a line.

    >>> print(describe(NTPInstance.from_counts([[1], [1]], [[1, 0], [0, 1]])))
    m=2 contexts, d=1, V=2, H = 0 nats
      j  h_j  S_j  law on S_j
      0  [1]  {0}  [1]
      1  [1]  {1}  [1]
    """
    head = f"m={inst.m} contexts, d={inst.d}, V={inst.V}, H = {inst.entropy() + 0.0:.4g} nats"
    rows = []
    for j in range(inst.m):
        S = [int(z) for z in inst.support(j)]
        h = "[" + ", ".join(_num(x) for x in inst.embeddings[j]) + "]"
        if inst.counts is not None:
            law = [str(int(inst.counts[j, z])) for z in S]
        else:
            law = [str(inst.exact_probs[j][z]) if not inst.probs_exact_from_floats else _num(inst.probs[j, z])
                   for z in S]
        rows.append((str(j), h, "{" + ", ".join(map(str, S)) + "}", "[" + ", ".join(law) + "]"))
    cols = [("j", "h_j", "S_j", "law on S_j")] + rows
    widths = [max(len(r[i]) for r in cols) for i in range(4)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cols]
    return "\n".join([head] + lines)


# ---------------------------------------------------------------------------- supports
@st.composite
def _masks(draw: Callable, m: int, V: int, min_k: int, max_k: int, overlap: str) -> np.ndarray:
    mask = np.zeros((m, V), dtype=bool)
    # a k-subset is the head of a drawn permutation: no rejection, and it shrinks to {0, ..., k-1}
    if overlap == "any":
        for j in range(m):
            k = draw(st.integers(min_k, max_k))
            mask[j, draw(st.permutations(range(V)))[:k]] = True
    elif overlap == "identical":
        k = draw(st.integers(min_k, max_k))
        mask[:, draw(st.permutations(range(V)))[:k]] = True
    elif overlap == "nested":
        order = draw(st.permutations(range(V)))
        for j in range(m):
            mask[j, order[: draw(st.integers(min_k, max_k))]] = True
    else:  # disjoint
        order = draw(st.permutations(range(V)))
        start = 0
        for j in range(m):
            room = V - start - min_k * (m - j - 1)
            k = draw(st.integers(min_k, min(max_k, room)))
            mask[j, order[start: start + k]] = True
            start += k
    return mask


def support_masks(*, m: int, V: int, min_k: int = 1, max_k: int | None = None,
                  overlap: str = "any") -> st.SearchStrategy[np.ndarray]:
    r"""Support patterns: boolean arrays of shape (m, V) with :math:`k_j = |S_j| \in [\text{min\_k}, \text{max\_k}]`.

    Parameters
    ----------
    m : int
        Number of contexts, at least 1.
    V : int
        Vocabulary size, at least 2.
    min_k, max_k : int
        Bounds on every support size, ``1 <= min_k <= max_k <= V`` (``max_k`` defaults to V).
    overlap : {"any", "identical", "nested", "disjoint"}
        How the supports relate (see the module doc). ``"disjoint"`` needs ``m * min_k <= V``.

    Shrinks towards supports of size ``min_k`` made of the first tokens.

    >>> support_masks(m=2, V=3, min_k=1, max_k=1).example()       # one-hot (multiclass)
    array([[ True, False, False],
           [False,  True, False]])
    """
    m = _int("m", m, low=1)
    V = _int("V", V, low=2)
    min_k, max_k = _bounds("min_k", min_k, "max_k", V if max_k is None else max_k, low=1)
    if max_k > V:
        raise InvalidArgument(f"max_k={max_k!r} must be at most V={V!r}")
    overlap = _choice("overlap", overlap, OVERLAPS)
    if overlap == "disjoint" and m * min_k > V:
        raise InvalidArgument(f"overlap='disjoint' needs m * min_k <= V, got m={m}, min_k={min_k}, V={V}")
    return _masks(m, V, min_k, max_k, overlap)


# ---------------------------------------------------------------------------- laws on the supports
def _positive_ints(mask: np.ndarray, max_count: int) -> st.SearchStrategy[np.ndarray]:
    mask = np.asarray(mask, dtype=bool)
    cells = int(mask.sum())

    def fill(values: list[int]) -> np.ndarray:
        out = np.zeros(mask.shape, dtype=np.int64)
        out[mask] = values
        return out

    return st.lists(st.integers(1, max_count), min_size=cells, max_size=cells).map(fill)


def _check_mask(mask: Any) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.ndim != 2 or arr.dtype != bool:
        raise InvalidArgument(f"mask={_short(mask)} must be a 2-d boolean array")
    empty = np.flatnonzero(~arr.any(axis=1))
    if empty.size:
        raise InvalidArgument(f"mask={_short(mask)} has an empty row {int(empty[0])}")
    return arr


def _short(x: Any) -> str:
    text = repr(x).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def counts(mask: np.ndarray, *, max_count: int = 5) -> st.SearchStrategy[np.ndarray]:
    """Integer next-token counts of shape (m, V): in ``[1, max_count]`` on the support, 0 off it.

    Parameters
    ----------
    mask : ndarray of bool of shape (m, V)
        The supports, every row non-empty (e.g. drawn from :func:`support_masks`).
    max_count : int
        Largest count, at least 1. With ``max_count=1`` every law is uniform on its support.

    Shrinks towards all counts 1 (uniform laws).
    """
    mask = _check_mask(mask)
    return _positive_ints(mask, _int("max_count", max_count, low=1))


def probabilities(mask: np.ndarray, *, exact: bool = True, max_count: int = 5) -> st.SearchStrategy[np.ndarray]:
    r"""Next-token probabilities of shape (m, V) supported exactly on ``mask``.

    Each row is :math:`p_{j,z} = c_{j,z} / \sum_{z'} c_{j,z'}` with integers :math:`c_{j,z} \in [1, \text{max\_count}]`
    on the support. With ``exact=True`` the entries are :class:`fractions.Fraction` (an object array;
    pass ``str`` of them to :meth:`NTPInstance.from_probs` to keep them exact), otherwise float64.
    """
    mask = _check_mask(mask)
    if not isinstance(exact, bool):
        raise InvalidArgument(f"exact={exact!r} must be a bool")
    ints = _positive_ints(mask, _int("max_count", max_count, low=1))

    def to_probs(C: np.ndarray) -> np.ndarray:
        if not exact:
            return C / C.sum(axis=1, keepdims=True)
        P = np.empty(C.shape, dtype=object)
        for j, row in enumerate(C):
            tot = int(row.sum())
            P[j] = [Fraction(int(c), tot) for c in row]
        return P

    return ints.map(to_probs)


# ---------------------------------------------------------------------------- embeddings
def _nonzero_rows(H: np.ndarray) -> np.ndarray:
    H = H.copy()
    H[~H.any(axis=1), 0] = 1
    return H


def _int_matrix(rows: int, cols: int, max_abs: int) -> st.SearchStrategy[np.ndarray]:
    n = rows * cols
    return st.lists(st.integers(-max_abs, max_abs), min_size=n, max_size=n).map(
        lambda v: np.array(v, dtype=np.int64).reshape(rows, cols))


@st.composite
def _embeddings(draw: Callable, m: int, d: int, family: str, max_abs: int, rank: int | None,
                allow_zero_rows: bool) -> np.ndarray:
    fix = (lambda A: A) if allow_zero_rows else _nonzero_rows
    if family == "gaussian":
        return random_gaussian(m, d, np.random.default_rng(draw(st.integers(0, _MAX_SEED))))
    if family == "integer":
        return fix(draw(_int_matrix(m, d, max_abs))).astype(np.float64)
    if family == "low-rank":
        r = rank if rank is not None else draw(st.integers(1, min(m, d)))
        A = fix(draw(_int_matrix(m, r, max_abs)))
        C = draw(_int_matrix(r, d - r, max_abs))
        return (A @ np.hstack([np.eye(r, dtype=np.int64), C])).astype(np.float64)
    # duplicated / scaled: fewer base rows than contexts, each context takes one of them
    u = draw(st.integers(1, max(1, m - 1)))
    base = fix(draw(_int_matrix(u, d, max_abs)))
    which = draw(st.lists(st.integers(0, u - 1), min_size=m, max_size=m))
    H = base[which]
    if family == "scaled":
        scale = draw(st.lists(st.integers(1, max_abs), min_size=m, max_size=m))
        H = H * np.array(scale, dtype=np.int64)[:, None]
    return H.astype(np.float64)


def embeddings(*, m: int, d: int, family: str = "integer", max_abs: int = 3, rank: int | None = None,
               allow_zero_rows: bool = False) -> st.SearchStrategy[np.ndarray]:
    r"""Context embeddings H of shape (m, d), float64.

    Parameters
    ----------
    m, d : int
        Number of contexts and embedding dimension, at least 1.
    family : {"integer", "gaussian", "low-rank", "duplicated", "scaled"}
        See the module doc. All but ``"gaussian"`` have integer entries.
    max_abs : int
        Largest absolute value of an integer entry (of a factor, for ``"low-rank"``; the largest
        multiplier, for ``"scaled"``).
    rank : int, optional
        For ``"low-rank"``: the inner dimension r, ``1 <= r <= min(m, d)`` (drawn when omitted).
    allow_zero_rows : bool
        Allow :math:`h_j = 0`. Otherwise a zero row gets a 1 in its first entry.

    >>> embeddings(m=3, d=2, family="duplicated").example()
    array([[ 3.,  3.],
           [ 3.,  3.],
           [-1.,  2.]])
    """
    m = _int("m", m, low=1)
    d = _int("d", d, low=1)
    family = _choice("family", family, EMBEDDING_FAMILIES)
    max_abs = _int("max_abs", max_abs, low=1)
    if not isinstance(allow_zero_rows, bool):
        raise InvalidArgument(f"allow_zero_rows={allow_zero_rows!r} must be a bool")
    if rank is not None:
        if family != "low-rank":
            raise InvalidArgument(f"rank={rank!r} applies only to family='low-rank', not family={family!r}")
        rank = _int("rank", rank, low=1)
        if rank > min(m, d):
            raise InvalidArgument(f"rank={rank!r} must be at most min(m, d) = {min(m, d)}")
    return _embeddings(m, d, family, max_abs, rank, allow_zero_rows)


# ---------------------------------------------------------------------------- whole instances
@st.composite
def _instances(draw: Callable, b: dict) -> ExampleInstance:
    m_hi = b["max_m"] if b["overlap"] != "disjoint" else min(b["max_m"], b["max_V"] // b["min_k"])
    m = draw(st.integers(b["min_m"], m_hi))
    d = draw(st.integers(b["min_d"], b["max_d"]))
    v_lo = max(b["min_V"], b["min_k"] + b["standing_assumption"])
    if b["overlap"] == "disjoint":
        v_lo = max(v_lo, m * b["min_k"])
    V = draw(st.integers(v_lo, b["max_V"]))
    max_k = V if b["max_k"] is None else min(b["max_k"], V)
    mask = draw(_masks(m, V, b["min_k"], max_k, b["overlap"]))
    if b["standing_assumption"] and mask.all():
        mask[0, V - 1] = False  # the paper's standing assumption: some k_j < V
    H = draw(_embeddings(m, d, b["embedding"], b["max_abs"], None, b["allow_zero_rows"]))
    C = draw(_positive_ints(mask, b["max_count"]))
    if b["distribution"] == "counts":
        return ExampleInstance.from_counts(H, C)
    w = draw(st.lists(st.integers(1, b["max_count"]), min_size=m, max_size=m))
    if b["distribution"] == "floats":
        return ExampleInstance.from_probs(H, C / C.sum(axis=1, keepdims=True), w)
    P = [[str(Fraction(int(c), int(row.sum()))) for c in row] for row in C]
    return ExampleInstance.from_probs(H, P, [str(x) for x in w])


def ntp_instances(
    *,
    min_m: int = 1,
    max_m: int = 4,
    min_d: int = 1,
    max_d: int = 4,
    min_V: int = 2,
    max_V: int = 4,
    min_k: int = 1,
    max_k: int | None = None,
    overlap: str = "any",
    embedding: str = "integer",
    max_abs: int = 3,
    distribution: str = "counts",
    max_count: int = 5,
    standing_assumption: bool = True,
    allow_zero_rows: bool = False,
) -> st.SearchStrategy[ExampleInstance]:
    r"""Whole NTP instances with m, d, V and the support sizes k within the given bounds.

    Parameters
    ----------
    min_m, max_m : int
        Bounds on the number of contexts m (``min_m >= 1``).
    min_d, max_d : int
        Bounds on the embedding dimension d (``min_d >= 1``).
    min_V, max_V : int
        Bounds on the vocabulary size V (``min_V >= 2``).
    min_k, max_k : int
        Bounds on every support size :math:`k_j` (``max_k`` defaults to V; it is capped at the drawn V).
    overlap : {"any", "identical", "nested", "disjoint"}
        Relation between supports (see :func:`support_masks`).
    embedding : {"integer", "gaussian", "low-rank", "duplicated", "scaled"}
        Embedding family (see :func:`embeddings`).
    max_abs : int
        Largest absolute integer entry of the integer families.
    distribution : {"counts", "fractions", "floats"}
        Build with :meth:`NTPInstance.from_counts` (counts in ``[1, max_count]`` on the support), or
        with :meth:`NTPInstance.from_probs` from exact fraction strings or from floats, with integer
        weights in ``[1, max_count]``.
    max_count : int
        Largest count (or weight numerator).
    standing_assumption : bool
        Keep the paper's standing assumption that some :math:`k_j < V` (default). Set it to False
        to allow all supports full, e.g. with ``min_k=max_k=max_V=min_V``.
    allow_zero_rows : bool
        Allow zero embeddings.

    Shrinks towards m = min_m, d = min_d, V as small as allowed, supports of the first tokens, counts of
    one and embeddings with small entries, so falsifying examples come out small and readable.

    >>> ntp_instances(min_m=2, max_m=2, max_d=1, max_V=2, min_k=1, max_k=1).example()
    NTPInstance.from_counts(embeddings=[[-3], [3]], counts=[[3, 0], [0, 5]])
    """
    min_m, max_m = _bounds("min_m", min_m, "max_m", max_m, low=1)
    min_d, max_d = _bounds("min_d", min_d, "max_d", max_d, low=1)
    min_V, max_V = _bounds("min_V", min_V, "max_V", max_V, low=2)
    min_k = _int("min_k", min_k, low=1)
    if max_k is not None:
        min_k, max_k = _bounds("min_k", min_k, "max_k", max_k, low=1)
    overlap = _choice("overlap", overlap, OVERLAPS)
    embedding = _choice("embedding", embedding, EMBEDDING_FAMILIES)
    distribution = _choice("distribution", distribution, DISTRIBUTIONS)
    max_abs = _int("max_abs", max_abs, low=1)
    max_count = _int("max_count", max_count, low=1)
    for name, flag in (("standing_assumption", standing_assumption), ("allow_zero_rows", allow_zero_rows)):
        if not isinstance(flag, bool):
            raise InvalidArgument(f"{name}={flag!r} must be a bool")
    if min_k + standing_assumption > max_V:
        need = "min_k < max_V (the standing assumption needs some k_j < V)" if standing_assumption else "min_k <= max_V"
        raise InvalidArgument(f"min_k={min_k!r} with max_V={max_V!r}: need {need}")
    if overlap == "disjoint" and min_m * min_k > max_V:
        raise InvalidArgument(f"overlap='disjoint' needs min_m * min_k <= max_V, got min_m={min_m}, "
                              f"min_k={min_k}, max_V={max_V}")
    return _instances(dict(
        min_m=min_m, max_m=max_m, min_d=min_d, max_d=max_d, min_V=min_V, max_V=max_V, min_k=min_k, max_k=max_k,
        overlap=overlap, embedding=embedding, max_abs=max_abs, distribution=distribution, max_count=max_count,
        standing_assumption=int(standing_assumption), allow_zero_rows=allow_zero_rows,
    ))


# ---------------------------------------------------------------------------- partly separable instances
@st.composite
def _partly_separable(draw: Callable, min_m: int, max_m: int, max_d: int, max_V: int, max_abs: int,
                      max_count: int) -> ExampleInstance:
    d = draw(st.integers(2, max_d))
    m = draw(st.integers(max(min_m, 3), max_m))
    V = draw(st.integers(3, max_V))
    rest = draw(_int_matrix(m, d - 1, max_abs))
    H = np.hstack([np.ones((m, 1), dtype=np.int64), rest])
    H[1] = H[0] * draw(st.integers(1, 2))  # context 1 repeats context 0's direction
    mask = draw(_masks(m, V - 1, 1, V - 1, "any"))
    mask = np.hstack([mask, np.zeros((m, 1), dtype=bool)])  # token V - 1 lies in no support
    mask[0, :] = False
    mask[1, :] = False
    mask[0, 0] = True
    mask[1, 1] = True
    C = draw(_positive_ints(mask, max_count))
    return ExampleInstance.from_counts(H.astype(np.float64), C)


def partly_separable_instances(*, min_m: int = 3, max_m: int = 8, max_d: int = 3, max_V: int = 5,
                               max_abs: int = 2, max_count: int = 3) -> st.SearchStrategy[ExampleInstance]:
    r"""Instances whose out-of-support pairs are partly separable: both P and N of the split
    (:mod:`ntpcert.solve.split`) are non-empty, by construction.

    Every embedding has a first entry 1 (a bias feature), the rest small integers. Token V - 1 lies in no
    support, so :math:`D = -e_{V-1} e_1^\top` lies in the recession cone K with margin 1 on every pair
    (j, V - 1): P is not empty. Context 1 repeats context 0's direction (:math:`h_1 = c\,h_0`, c in {1, 2})
    with supports :math:`\{0\}` and :math:`\{1\}`: every D in K has
    :math:`(d_0 - d_1)^\top h_0 \ge 0` and :math:`(d_1 - d_0)^\top h_0 \ge 0`, so the pairs (0, 1) and (1, 0)
    are in N. The other contexts and supports are drawn freely (m >= 3, d >= 2, V >= 3), which mixes
    further pairs of both kinds.
    """
    min_m, max_m = _bounds("min_m", min_m, "max_m", max_m, low=3)
    max_d = _int("max_d", max_d, low=2)
    max_V = _int("max_V", max_V, low=3)
    max_abs = _int("max_abs", max_abs, low=1)
    max_count = _int("max_count", max_count, low=1)
    return _partly_separable(min_m, max_m, max_d, max_V, max_abs, max_count)
