r"""The data model: an NTP training set summarised by its distinct contexts.

A training set of n (context, next token) pairs over a vocabulary ``[V]`` is summarised by its
m distinct contexts ``j``; context ``j`` has

* a fixed embedding :math:`h_j \in \mathbb{R}^d` (row ``j`` of ``embeddings``),
* a frequency :math:`\pi_j` (``weights[j]``, the weights sum to one),
* a next-token distribution :math:`p_j \in \Delta^{V-1}` (row ``j`` of ``probs``) with support
  :math:`S_j = \{z : p_{j,z} > 0\}` and :math:`k_j = |S_j|`.

The loss of a linear decoder :math:`W \in \mathbb{R}^{V \times d}` is

.. math:: \mathrm{CE}(W) = -\sum_j \pi_j \sum_{z \in S_j} p_{j,z} \log \mathbb{S}_z(W h_j)

and its lower bound is the entropy :math:`\mathcal{H} = -\sum_j \pi_j \sum_{z\in S_j} p_{j,z}\log p_{j,z}`.

All input validation of the package happens here, once: constructors raise
:class:`~ntpcert.errors.InputError` with a message that names the field and the offending value.
"""

from __future__ import annotations

import decimal
import hashlib
import math
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance import ce
from ntpcert.instance.ce import CELayout
from ntpcert.util.numbers import lcm_all

#: Float probabilities given without counts must sum to one within this absolute tolerance;
#: exact fractions must sum to one exactly.
PROB_SUM_TOL = 1e-9


def _frozen(a: np.ndarray, *, owned: bool = False) -> np.ndarray:
    """A read-only array: a copy, or ``a`` itself when ``owned`` (built here, referenced nowhere else;
    the copy of an m·V array is 624 MB at m = V = 8,831)."""
    a = a if owned else np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: Largest count, row sum and total n accepted: counts are kept as an int64 array.
COUNT_MAX = int(np.iinfo(np.int64).max)


def _show_int(c: int) -> str:
    """``c`` in decimal, or its sign, leading digits and length when it has more than 40 digits."""
    if abs(c).bit_length() <= 132:
        return str(c)
    digits = int(abs(c).bit_length() * 0.30102999566398120) + 1  # within one of the true length
    lead = abs(c) >> (abs(c).bit_length() - 64)
    return f"{'-' if c < 0 else ''}an integer of about {digits} digits (leading bits {lead:#x})"


def _at(name: str, idx: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(map(str, idx))}]"


def _float_count_bound(dtype: np.dtype) -> int:
    """Floats of this dtype stand for one integer unambiguously only below ``2**(nmant + 1)``
    (``2**53`` for float64): above it, neighbouring integers round to the same float."""
    return 2 ** (int(np.finfo(dtype).nmant) + 1)


def _count_value(name: str, idx: tuple[int, ...], value: Any) -> int:
    """One count as an exact Python int; floats only when they are unambiguous integers."""
    where = _at(name, idx)
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"{where}: value {bool(value)!r} is a boolean, expected an integer count")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Rational):
        if value.denominator != 1:
            raise InputError(f"{where}: value {_show(value)} is not an integer")
        return int(value.numerator)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise InputError(f"{where}: value {_show(value)} is not finite")
        if value != value.to_integral_value():
            raise InputError(f"{where}: value {_show(value)} is not an integer")
        return int(value)
    if isinstance(value, (float, np.floating)):
        fv = value if isinstance(value, np.floating) else np.float64(value)
        shown = repr(float(fv)) if fv.dtype.itemsize <= 8 else str(fv)
        if not np.isfinite(fv):
            raise InputError(f"{where}: value {shown} is not finite")
        if fv != np.floor(fv):
            raise InputError(f"{where}: value {shown} is not an integer")
        iv = int(fv)
        if iv < 0:
            raise InputError(f"{where}: value {shown} is negative")
        bound = _float_count_bound(fv.dtype)
        if iv >= bound:
            raise InputError(
                f"{where}: value {shown} is not an exactly representable integer count (a float count must be "
                f"an integer below 2^{bound.bit_length() - 1}); give it as an integer"
            )
        return iv
    raise InputError(f"{where}: value {_show(value)} is not a number, expected an integer count")


def _as_count_matrix(counts: Any) -> np.ndarray:
    """Read counts into an int64 array without ever rounding a value.

    Non-object numpy arrays are checked vectorised; everything else (lists such as JSON gives,
    object arrays) element by element, so that one float in a list of ints does not turn the
    ints into floats. Floats are accepted only as integers below ``2**53`` (float64; the
    dtype's own bound for narrower floats), values past int64 are refused."""
    if isinstance(counts, np.ndarray) and counts.dtype != object:
        raw = counts
        if raw.ndim != 2:
            raise InputError(f"counts: expected a 2-d array, got shape {raw.shape}")
        kind = raw.dtype.kind
        if kind == "i":
            C = raw.astype(np.int64)
        elif kind == "u":
            big = raw > np.uint64(COUNT_MAX)
            if np.any(big):
                idx = tuple(int(i) for i in np.argwhere(big)[0])
                raise InputError(
                    f"{_at('counts', idx)}: value {int(raw[idx])} exceeds the largest supported count "
                    f"2^63 - 1 = {COUNT_MAX}"
                )
            C = raw.astype(np.int64)
        elif kind == "f" and raw.dtype.itemsize <= 8:
            rawf = raw.astype(np.float64)  # exact for float16/32/64
            bad = ~np.isfinite(rawf) | (rawf != np.floor(np.where(np.isfinite(rawf), rawf, 0.0)))
            bad |= rawf < 0
            bad |= np.abs(np.where(np.isfinite(rawf), rawf, 0.0)) >= float(_float_count_bound(raw.dtype))
            if np.any(bad):
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                _count_value("counts", idx, raw[idx])  # raises with the message for this entry
            C = rawf.astype(np.int64)
        else:
            raise InputError(f"counts: expected integers, got dtype {raw.dtype}")
    else:
        try:
            raw = np.asarray(counts, dtype=object)
        except (TypeError, ValueError) as err:
            raise InputError(f"counts: cannot read as numbers ({err})") from None
        if raw.ndim != 2:
            raise InputError(f"counts: expected a 2-d array, got shape {raw.shape}")
        m, V = raw.shape
        ints = raw.tolist()
        for j, row in enumerate(ints):
            if set(map(type, row)) - {int}:  # plain Python ints (all of JSON's) need no conversion
                ints[j] = [c if type(c) is int else _count_value("counts", (j, z), c) for z, c in enumerate(row)]
        try:
            C = np.array(ints, dtype=np.int64).reshape(m, V)
        except OverflowError:
            C = None
        if C is None or np.any(C < 0):
            for j, row in enumerate(ints):
                for z, c in enumerate(row):
                    if c < 0:
                        raise InputError(f"counts[{j}, {z}]: value {_show_int(c)} is negative")
                    if c > COUNT_MAX:
                        raise InputError(
                            f"counts[{j}, {z}]: value {_show_int(c)} exceeds the largest supported count 2^63 - 1 = {COUNT_MAX}"
                        )
            raise AssertionError("unreachable: an int64 overflow without an entry past int64")  # pragma: no cover
    if np.any(C < 0):
        idx = tuple(int(i) for i in np.argwhere(C < 0)[0])
        raise InputError(f"{_at('counts', idx)}: value {int(C[idx])} is negative")
    return C


def _checked_row_sums(C: np.ndarray) -> np.ndarray:
    """Row sums of non-negative int64 counts, refusing any row sum or total past int64 (where
    numpy would wrap around silently)."""
    m = C.shape[0]
    # float64 sums are within a tiny relative error of the true sums: below 2^62 nothing can wrap
    approx = C.sum(axis=1, dtype=np.float64)
    limit = float(2**62)
    if approx.size and (approx.max() >= limit or approx.sum() >= limit):
        exact = [sum(int(c) for c in C[j].tolist()) for j in range(m)]
        for j, t in enumerate(exact):
            if t > COUNT_MAX:
                raise InputError(
                    f"counts[{j}]: row sums to {t}, past the largest supported row sum 2^63 - 1 = {COUNT_MAX}"
                )
        total = sum(exact)
        if total > COUNT_MAX:
            raise InputError(
                f"counts: the counts sum to n = {total}, past the largest supported total 2^63 - 1 = {COUNT_MAX}"
            )
    return C.sum(axis=1)


def _as_float_matrix(name: str, value: Any, *, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        raise InputError(f"{name}: cannot read as numbers ({err})") from None
    if arr.ndim != ndim:
        raise InputError(f"{name}: expected a {ndim}-d array, got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise InputError(f"{name}[{', '.join(map(str, idx))}]: value {arr[idx].item()!r} is not finite")
    return arr


#: Longest probability or weight string read (characters), and the largest decimal exponent in
#: one: "1e-100000000" would otherwise build a 332-million-bit integer before anything else runs.
MAX_FRACTION_CHARS = 1000
MAX_DECIMAL_EXPONENT = 400

#: Largest numerator or denominator of an exact probability or weight (bits, about 120 digits).
MAX_FRACTION_BITS = 400


def _parse_fraction(name: str, idx: tuple[int, ...], value: Any) -> Fraction:
    """Read one probability: an int, a float (taken as the exact dyadic rational it is),
    or a string such as ``"1/3"`` or ``"0.25"`` (at most ``MAX_FRACTION_CHARS`` characters, decimal
    exponents at most ``MAX_DECIMAL_EXPONENT`` in size)."""
    where = f"{name}[{', '.join(map(str, idx))}]"
    if isinstance(value, bool):
        raise InputError(f"{where}: value {value!r} is not a number")
    if isinstance(value, str):
        s = value.strip()
        if len(s) > MAX_FRACTION_CHARS:
            raise InputError(f"{where}: value {_show(value)} is longer than {MAX_FRACTION_CHARS} characters")
        mant, sep, exp = s.lower().partition("e")
        if sep:
            try:
                big = abs(int(exp)) > MAX_DECIMAL_EXPONENT
            except ValueError:
                big = False  # not a number: reported below
            if big:
                raise InputError(f"{where}: value {_show(value)} has a decimal exponent beyond "
                                 f"±{MAX_DECIMAL_EXPONENT}")
    frac = _read_fraction(where, value)
    if max(frac.numerator.bit_length(), frac.denominator.bit_length()) > MAX_FRACTION_BITS:
        raise InputError(f"{where}: value {_show(value)} has a numerator or denominator of more than "
                         f"{MAX_FRACTION_BITS} bits (exact compatibility would have to factor it)")
    return frac


def _read_fraction(where: str, value: Any) -> Fraction:
    try:
        if isinstance(value, Fraction):
            frac = value
        elif isinstance(value, str):
            frac = Fraction(value.strip())
        elif isinstance(value, (int, np.integer)):
            frac = Fraction(int(value))
        else:
            fv = float(value)
            if not np.isfinite(fv):
                raise InputError(f"{where}: value {value!r} is not finite")
            frac = Fraction(fv)
    except (ValueError, ZeroDivisionError, TypeError):
        raise InputError(f"{where}: value {_show(value)} is not a number or fraction") from None
    return frac


@dataclass(frozen=True, eq=False)
class NTPInstance:
    r"""An NTP dataset: m distinct contexts with embeddings, frequencies and next-token laws.

    Build it with :meth:`from_counts` or :meth:`from_probs`; the constructor itself expects
    already-validated arrays and is not meant to be called directly.

    Attributes
    ----------
    embeddings : ndarray of shape (m, d)
        Row ``j`` is :math:`h_j`.
    probs : ndarray of shape (m, V)
        Row ``j`` is :math:`p_j`, non-negative, summing to one.
    weights : ndarray of shape (m,)
        The frequencies :math:`\pi_j`, positive, summing to one.
    counts : ndarray of shape (m, V) of int64, or None
        The integer counts the instance was built from, when it was. Every count, every row
        sum and the total ``n`` are at most :data:`COUNT_MAX` (``2**63 - 1``), so numpy sums
        of them never overflow.
    exact_probs : tuple of tuples of Fraction, or None
        ``p_{j,z}`` as exact rationals when the instance was built from probabilities (floats are
        the dyadic rationals they are). Built from counts, use :meth:`exact_row`.
    exact_weights : tuple of Fraction, or None
        :math:`\pi_j` as exact rationals when built from probabilities.
    token_names, context_names : tuple of str, or None
        Optional labels used in reports.
    """

    embeddings: np.ndarray
    probs: np.ndarray
    weights: np.ndarray
    counts: np.ndarray | None = None
    exact_probs: tuple[tuple[Fraction, ...], ...] | None = None
    exact_weights: tuple[Fraction, ...] | None = None
    token_names: tuple[str, ...] | None = None
    context_names: tuple[str, ...] | None = None
    name: str = "instance"
    _from_floats: bool = field(default=False, repr=False)
    _supports: tuple[np.ndarray, ...] = field(default=(), repr=False)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_counts(
        cls,
        embeddings: Any,
        counts: Any,
        *,
        token_names: Sequence[str] | None = None,
        context_names: Sequence[str] | None = None,
        name: str = "instance",
    ) -> "NTPInstance":
        """Build an instance from integer next-token counts.

        Parameters
        ----------
        embeddings : array_like of shape (m, d)
            Finite context embeddings, one row per distinct context.
        counts : array_like of shape (m, V)
            Non-negative integers; ``counts[j, z]`` is how often token z followed context j.
            Every row needs a positive sum. Then :math:`\\pi_j = n_j / n` and
            :math:`p_{j,z} = \\mathrm{counts}_{j,z} / n_j` exactly.

        Counts are never rounded. Lists (as JSON gives them) and object arrays are read entry by
        entry, so Python ints stay exact whatever else the list holds. A count given as a float
        (a float entry, or a float array) is accepted only when it is an integer below ``2**53``
        (float64; ``2**24`` for float32, ``2**11`` for float16), the range where the float
        stands for exactly one integer; otherwise an :class:`InputError` asks for an integer.
        Counts are kept as an int64 array: a count, a row sum :math:`n_j` or the total
        :math:`n` past ``2**63 - 1`` (:data:`COUNT_MAX`) is refused, never wrapped around.
        Booleans, strings, NaN and infinities are refused.
        """
        H = _as_float_matrix("embeddings", embeddings, ndim=2)
        C = _as_count_matrix(counts)
        cls._check_shapes(H, C.shape, "counts")
        totals = _checked_row_sums(C)
        empty = np.flatnonzero(totals == 0)
        if empty.size:
            raise InputError(f"counts[{int(empty[0])}]: row sums to 0, so context {int(empty[0])} has an empty support")
        n = int(totals.sum())
        probs = C / totals[:, None]
        weights = totals / n
        # C (from _as_count_matrix), probs and weights are new arrays: frozen without a copy
        return cls._build(H, probs, weights, C, None, None, token_names, context_names, name, owned=True)

    @classmethod
    def from_probs(
        cls,
        embeddings: Any,
        probs: Any,
        weights: Any = None,
        *,
        token_names: Sequence[str] | None = None,
        context_names: Sequence[str] | None = None,
        name: str = "instance",
    ) -> "NTPInstance":
        """Build an instance from next-token probabilities and context weights.

        Parameters
        ----------
        embeddings : array_like of shape (m, d)
        probs : array_like of shape (m, V)
            Non-negative, each row summing to one. Entries may be numbers or exact fraction
            strings such as ``"1/3"``; fractions must sum to one exactly, floats within
            ``PROB_SUM_TOL``. Floats are kept as the exact dyadic rationals they are.
        weights : array_like of shape (m,), optional
            Positive context frequencies; normalised to sum to one. Default: uniform.
        """
        H = _as_float_matrix("embeddings", embeddings, ndim=2)
        raw = np.asarray(probs, dtype=object)
        if raw.ndim != 2:
            raise InputError(f"probs: expected a 2-d array, got shape {raw.shape}")
        cls._check_shapes(H, raw.shape, "probs")
        m, V = raw.shape
        has_string = any(isinstance(x, (str, Fraction)) for x in raw.flat)
        rows: list[tuple[Fraction, ...]] = []
        for j in range(m):
            row = tuple(_parse_fraction("probs", (j, z), raw[j, z]) for z in range(V))
            for z, f in enumerate(row):
                if f < 0:
                    raise InputError(f"probs[{j}, {z}]: value {_show(raw[j, z])} is negative")
            total = sum(row, Fraction(0))
            if total == 0:
                raise InputError(f"probs[{j}]: row sums to 0, so context {j} has an empty support")
            if has_string:
                if total != 1:
                    raise InputError(f"probs[{j}]: row sums to {total}, not exactly 1")
            elif abs(float(total) - 1.0) > PROB_SUM_TOL:
                raise InputError(f"probs[{j}]: row sums to {float(total)!r}, not 1 (tolerance {PROB_SUM_TOL:g})")
            rows.append(row)
        P = np.array([[float(f) for f in row] for row in rows], dtype=np.float64).reshape(m, V)
        P = P / P.sum(axis=1, keepdims=True)
        if weights is None:
            w_exact = tuple(Fraction(1, m) for _ in range(m))
        else:
            wr = np.asarray(weights, dtype=object)
            if wr.ndim != 1 or wr.shape[0] != m:
                raise InputError(f"weights: expected shape ({m},) to match probs, got shape {wr.shape}")
            wf = [_parse_fraction("weights", (j,), wr[j]) for j in range(m)]
            for j, f in enumerate(wf):
                if f <= 0:
                    raise InputError(f"weights[{j}]: value {_show(wr[j])} is not positive")
            tot = sum(wf, Fraction(0))
            w_exact = tuple(f / tot for f in wf)
        W = np.array([float(f) for f in w_exact], dtype=np.float64)
        from_floats = not has_string and any(isinstance(x, (float, np.floating)) for x in raw.flat)
        return cls._build(H, P, W, None, tuple(rows), w_exact, token_names, context_names, name,
                          from_floats=from_floats)

    @staticmethod
    def _check_shapes(H: np.ndarray, shape: tuple[int, ...], what: str) -> None:
        m, d = H.shape
        if m == 0:
            raise InputError("embeddings: no contexts (shape has m = 0)")
        if d == 0:
            raise InputError("embeddings: embedding dimension d = 0")
        if shape[0] != m:
            raise InputError(f"{what}: has {shape[0]} rows but embeddings has {m} (shape {shape} vs {H.shape})")
        if shape[1] < 2:
            raise InputError(f"{what}: vocabulary size V = {shape[1]}, need at least 2 tokens")

    @classmethod
    def _build(cls, H, P, W, C, exact, exact_w, token_names, context_names, name, *,
               from_floats: bool = False, owned: bool = False) -> "NTPInstance":
        """``owned``: P, W and C were made by the caller for this instance and are frozen without a copy."""
        m, V = P.shape
        tn = cls._names("token_names", token_names, V)
        cn = cls._names("context_names", context_names, m)
        if exact is not None:
            supports = tuple(np.array([z for z, f in enumerate(row) if f > 0], dtype=np.int64) for row in exact)
        else:
            supports = tuple(np.flatnonzero(C[j] > 0).astype(np.int64) for j in range(m))
        for s in supports:
            s.setflags(write=False)
        return cls(
            embeddings=_frozen(H),
            probs=_frozen(P, owned=owned),
            weights=_frozen(W, owned=owned),
            counts=None if C is None else _frozen(C, owned=owned),
            exact_probs=exact,
            exact_weights=exact_w,
            token_names=tn,
            context_names=cn,
            name=name,
            _supports=supports,
            _from_floats=from_floats,
        )

    @staticmethod
    def _names(field_name: str, names: Sequence[str] | None, n: int) -> tuple[str, ...] | None:
        if names is None:
            return None
        out = tuple(str(x) for x in names)
        if len(out) != n:
            raise InputError(f"{field_name}: has {len(out)} entries, expected {n}")
        return out

    # ------------------------------------------------------------------ sizes and supports
    @property
    def m(self) -> int:
        """Number of distinct contexts."""
        return int(self.embeddings.shape[0])

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return int(self.embeddings.shape[1])

    @property
    def V(self) -> int:
        """Vocabulary size."""
        return int(self.probs.shape[1])

    def support(self, j: int) -> np.ndarray:
        """Sorted token indices :math:`S_j` with :math:`p_{j,z} > 0` (read-only int array)."""
        return self._supports[j]

    @property
    def supports(self) -> tuple[np.ndarray, ...]:
        """All supports :math:`S_1, \\dots, S_m`."""
        return self._supports

    @property
    def support_sizes(self) -> np.ndarray:
        """Array of shape (m,) with :math:`k_j = |S_j|`."""
        return np.array([s.size for s in self._supports], dtype=np.int64)

    def support_mask(self) -> np.ndarray:
        """Boolean array of shape (m, V): ``mask[j, z]`` iff :math:`z \\in S_j`."""
        mask = np.zeros((self.m, self.V), dtype=bool)
        for j, s in enumerate(self._supports):
            mask[j, s] = True
        return mask

    def anchors(self) -> np.ndarray:
        """Array of shape (m,): the anchor token :math:`z_j = \\min S_j` used for the equations of (4)."""
        return np.array([int(s[0]) for s in self._supports], dtype=np.int64)

    def exact_row(self, j: int) -> tuple[Fraction, ...]:
        """Row ``j`` of the probabilities as exact rationals."""
        if self.counts is not None:
            row = self.counts[j]
            tot = int(row.sum())
            return tuple(Fraction(int(c), tot) for c in row)
        return self.exact_probs[j]

    def exact_weight(self, j: int) -> Fraction:
        r""":math:`\pi_j` as an exact rational."""
        if self.counts is not None:
            return Fraction(int(self.counts[j].sum()), int(self.counts.sum()))
        return self.exact_weights[j]

    def ratio_integers(self, j: int) -> dict[int, int]:
        r"""Positive integers ``c_z`` for ``z`` in :math:`S_j` with :math:`p_{j,z} \propto c_z`
        exactly (the counts themselves, or fractions scaled by the lcm of their denominators).
        The log-odds of (4) are :math:`\log(c_z / c_{z_j})`."""
        S = self.support(j)
        if self.counts is not None:
            return {int(z): int(self.counts[j, z]) for z in S}
        row = self.exact_probs[j]
        lcm = lcm_all(row[int(z)].denominator for z in S)
        ints = {int(z): int(row[int(z)] * lcm) for z in S}
        g = 0
        for c in ints.values():
            g = math.gcd(g, c)
        return {z: c // g for z, c in ints.items()}

    @property
    def probs_exact_from_floats(self) -> bool:
        """True when probabilities were given as floats (then treated as the exact dyadic
        rationals they are, which may differ from the fractions the user had in mind)."""
        return self._from_floats

    @property
    def n(self) -> int | None:
        """Number of training pairs, when built from counts."""
        return None if self.counts is None else int(self.counts.sum())

    # ------------------------------------------------------------------ loss
    def entropy(self) -> float:
        r""":math:`\mathcal{H} = -\sum_j \pi_j \sum_{z \in S_j} p_{j,z} \log p_{j,z}` in nats."""
        P = self.probs
        rows, cols = np.nonzero(P > 0)  # the support entries only: no m·V temporaries
        p = P[rows, cols]
        per_context = np.bincount(rows, weights=p * np.log(p), minlength=self.m)
        return float(-(self.weights @ per_context))

    def logits(self, W: np.ndarray) -> np.ndarray:
        """Logits of shape (m, V): row j is :math:`W h_j`."""
        return self.embeddings @ self.check_decoder(W).T

    @cached_property
    def ce_layout(self) -> CELayout:
        """The arrays of :mod:`ntpcert.instance.ce` for this instance (built once)."""
        return CELayout.build(self)

    def loss(self, W: np.ndarray) -> float:
        r"""Cross-entropy :math:`\mathrm{CE}(W)`, eq. (2). ``W`` has shape (V, d).

        Computed as :math:`\sum_j\pi_j(\mathcal H_j + \mathrm{KL}_j)` (:mod:`ntpcert.instance.ce`), so
        :math:`\mathrm{CE} - \mathcal H` never loses digits to cancellation; see :meth:`excess_loss`."""
        return ce.loss(self.ce_layout, self.check_decoder(W))

    def gradient(self, W: np.ndarray) -> np.ndarray:
        r""":math:`\nabla \mathrm{CE}(W) = \sum_j \pi_j (\mathbb{S}(W h_j) - p_j) h_j^\top`, shape (V, d),
        with the in-support coefficients formed in the log domain from the out-of-support mass
        (:mod:`ntpcert.instance.ce`): accurate at any margin."""
        return ce.gradient(self.ce_layout, self.check_decoder(W))

    def gradient_direction(self, W: np.ndarray) -> tuple[np.ndarray, float]:
        r"""``(D, A)`` with :math:`\nabla\mathrm{CE}(W) = e^{A}D`, ``D`` of shape (V, d) and largest
        coefficient of order 1: the gradient's direction, exact after :math:`e^{-\text{margin}}`
        underflows (:meth:`ntpcert.instance.ce.CEKernel.direction_into`)."""
        return ce.direction(self.ce_layout, self.check_decoder(W))

    def hessian(self, W: np.ndarray) -> np.ndarray:
        r"""Dense Hessian of CE at W, shape (Vd, Vd), rows and columns in the row-major order of W
        (:func:`ntpcert.instance.ce.hessian`)."""
        return ce.hessian(self.ce_layout, self.check_decoder(W))

    def excess_loss(self, W: np.ndarray) -> float:
        r""":math:`\mathrm{CE}(W) - \mathcal{H} = \sum_j \pi_j \mathrm{KL}(p_j \| \mathbb{S}(W h_j)) \ge 0`,
        computed as :math:`\sum_j\pi_j(\log(1+Q_j) + \mathrm{KL}(p_j\|\sigma_j))`, a sum of non-negative
        terms with no cancellation (:mod:`ntpcert.instance.ce`); it underflows to 0 only where
        :math:`e^{-\text{margin}}` does (margins past about 745)."""
        return ce.excess_loss(self.ce_layout, self.check_decoder(W))

    def log_excess_loss(self, W: np.ndarray) -> float:
        r""":math:`\log(\mathrm{CE}(W) - \mathcal H)`, finite at any margin (:func:`ntpcert.instance.ce.log_excess_loss`)."""
        return ce.log_excess_loss(self.ce_layout, self.check_decoder(W))

    def smoothness(self) -> float:
        r"""Upper bound :math:`L \le \tfrac12 \lambda_{\max}(\sum_j \pi_j h_j h_j^\top)` on the
        Lipschitz constant of :math:`\nabla \mathrm{CE}` (Frobenius norm)."""
        Hs = self.embeddings * np.sqrt(self.weights)[:, None]
        s = np.linalg.norm(Hs, ord=2) if min(Hs.shape) > 0 else 0.0
        return 0.5 * float(s) ** 2

    def check_decoder(self, W: np.ndarray) -> np.ndarray:
        """``W`` as a float64 array of shape (V, d); an :class:`InputError` for another shape."""
        W = np.asarray(W, dtype=np.float64)
        if W.shape != (self.V, self.d):
            raise InputError(f"W: expected shape (V, d) = ({self.V}, {self.d}), got {W.shape}")
        return W

    # ------------------------------------------------------------------ identity
    def fingerprint(self) -> str:
        """SHA-256 of the instance's exact content (embeddings bytes, exact probabilities and
        weights), used by certificates to name the instance they speak of. Computed once: the arrays
        are read-only (about 4 s for the 8,831 x 8,831 one-hot corpus, asked for four times by
        ``certify --exact``)."""
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.m},{self.d},{self.V};".encode())
        h.update(np.ascontiguousarray(self.embeddings, dtype="<f8").tobytes())
        if self.counts is not None:
            h.update(b"counts;")
            h.update(np.ascontiguousarray(self.counts, dtype="<i8").tobytes())
        else:
            h.update(b"probs;")
            for row in self.exact_probs:
                h.update((",".join(f"{f.numerator}/{f.denominator}" for f in row) + ";").encode())
        if self.exact_weights is not None:
            h.update(",".join(f"{f.numerator}/{f.denominator}" for f in self.exact_weights).encode())
        return h.hexdigest()

    def describe(self, *, embedding_rank: int | None = None) -> dict[str, Any]:
        """A JSON-ready summary: sizes, support sizes, n and ℋ.

        ``embedding_rank`` is the rank of H when the caller already knows it (for example certified
        mod a prime); otherwise a float SVD rank is computed when H has at most 4,000,000 entries.
        """
        k = self.support_sizes
        if embedding_rank is None and self.m * self.d <= 4_000_000:
            embedding_rank = int(np.linalg.matrix_rank(self.embeddings))
        return {
            "name": self.name,
            "m": self.m,
            "d": self.d,
            "V": self.V,
            "n": self.n,
            "support_size_min": int(k.min()),
            "support_size_max": int(k.max()),
            "support_size_mean": float(k.mean()),
            "entropy": self.entropy(),
            "embedding_rank": embedding_rank,
        }

    def __repr__(self) -> str:
        return f"NTPInstance(name={self.name!r}, m={self.m}, d={self.d}, V={self.V})"
