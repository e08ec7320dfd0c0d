"""Raw input values read into checked arrays and exact fractions: counts as int64 (never rounded,
never wrapped around), finite float matrices, fraction strings such as ``"1/3"``, probability rows and
context weights. Every refusal is an :class:`~ntpcert.errors.InputError` that names the field, the
index and the value; :class:`~ntpcert.instance.model.NTPInstance`'s constructors call these, once.
"""

from __future__ import annotations

import decimal
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.errors import InputError

#: Float probabilities given without counts must sum to one within this absolute tolerance;
#: exact fractions must sum to one exactly.
PROB_SUM_TOL = 1e-9


def frozen(a: np.ndarray, *, owned: bool = False) -> np.ndarray:
    """A read-only array: a copy, or ``a`` itself when ``owned`` (built here, referenced nowhere else;
    the copy of an m·V array is 624 MB at m = V = 8,831)."""
    a = a if owned else np.array(a, copy=True)
    a.setflags(write=False)
    return a


def show(value: Any) -> str:
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


def count_value(name: str, idx: tuple[int, ...], value: Any) -> int:
    """One count as an exact Python int; floats only when they are unambiguous integers."""
    where = _at(name, idx)
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"{where}: value {bool(value)!r} is a boolean, expected an integer count")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Rational):
        if value.denominator != 1:
            raise InputError(f"{where}: value {show(value)} is not an integer")
        return int(value.numerator)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise InputError(f"{where}: value {show(value)} is not finite")
        if value != value.to_integral_value():
            raise InputError(f"{where}: value {show(value)} is not an integer")
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
    raise InputError(f"{where}: value {show(value)} is not a number, expected an integer count")


def as_count_matrix(counts: Any) -> np.ndarray:
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
                count_value("counts", idx, raw[idx])  # raises with the message for this entry
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
                ints[j] = [c if type(c) is int else count_value("counts", (j, z), c) for z, c in enumerate(row)]
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


def checked_row_sums(C: np.ndarray) -> np.ndarray:
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


#: Integers of magnitude up to this are held exactly by float64 (its 53-bit significand).
FLOAT_EXACT_INT = 2**53


def _exact_real(name: str, idx: tuple[int, ...], v: Any) -> None:
    """One entry of a real matrix: a string is refused, so is an integer float64 cannot hold exactly."""
    if isinstance(v, (str, bytes, np.str_, np.bytes_)):
        raise InputError(f"{_at(name, idx)}: value {show(v)} is a string, expected a number")
    if isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_)):
        iv = int(v)
        if -FLOAT_EXACT_INT <= iv <= FLOAT_EXACT_INT:
            return
        try:
            exact = int(float(iv)) == iv
        except OverflowError:
            exact = False
        if not exact:
            raise InputError(f"{_at(name, idx)}: value {_show_int(iv)} is an integer that float64 cannot hold "
                             "exactly (|value| > 2^53 and not a multiple of its spacing there); real entries are "
                             "read as float64 and are never rounded, so give one float64 holds")


def check_exact_reals(name: str, value: Any) -> None:
    """Refuse what :func:`as_float_matrix` would round or parse: integers past 2^53 that float64 does not
    hold exactly, and strings, each named by its entry. Arrays are checked vectorised; lists (as JSON gives
    them) row by row, skipping rows of plain floats."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        kind = value.dtype.kind
        if kind in "US":
            if value.size:
                idx = (0,) * value.ndim
                _exact_real(name, idx, value[idx])
        elif kind in "iu" and value.size:
            big = np.argwhere((value > FLOAT_EXACT_INT) | ((value < -FLOAT_EXACT_INT) if kind == "i" else False))
            for idx in big:
                t = tuple(int(i) for i in idx)
                _exact_real(name, t, int(value[t]))
        return
    if isinstance(value, np.ndarray):
        for idx, v in np.ndenumerate(value):
            _exact_real(name, tuple(int(i) for i in idx), v)
        return
    if not isinstance(value, (list, tuple)):
        return
    for j, row in enumerate(value):
        if isinstance(row, (list, tuple)):
            types = set(map(type, row))
            if types <= {float}:
                continue
            if types <= {int, float} and -FLOAT_EXACT_INT <= min(row) and max(row) <= FLOAT_EXACT_INT:
                continue  # (a NaN first makes min/max NaN, which fails the test: then entry by entry)
            for i, v in enumerate(row):
                if isinstance(v, (list, tuple, np.ndarray)):
                    check_exact_reals(f"{name}[{j}]", v)
                elif type(v) is not float:
                    _exact_real(name, (j, i), v)
        elif isinstance(row, np.ndarray):
            check_exact_reals(f"{name}[{j}]", row)
        elif type(row) is not float:
            _exact_real(name, (j,), row)


def as_float_matrix(name: str, value: Any, *, ndim: int) -> np.ndarray:
    """A finite float64 array of numbers; strings (``"0.5"``, which numpy would parse) and integers that
    float64 cannot hold exactly are refused, each naming its entry (:func:`check_exact_reals`)."""
    check_exact_reals(name, value)
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


def parse_fraction(name: str, idx: tuple[int, ...], value: Any) -> Fraction:
    """Read one probability: an int, a float (taken as the exact dyadic rational it is),
    or a string such as ``"1/3"`` or ``"0.25"`` (at most ``MAX_FRACTION_CHARS`` characters, decimal
    exponents at most ``MAX_DECIMAL_EXPONENT`` in size)."""
    where = f"{name}[{', '.join(map(str, idx))}]"
    if isinstance(value, bool):
        raise InputError(f"{where}: value {value!r} is not a number")
    if isinstance(value, str):
        s = value.strip()
        if len(s) > MAX_FRACTION_CHARS:
            raise InputError(f"{where}: value {show(value)} is longer than {MAX_FRACTION_CHARS} characters")
        mant, sep, exp = s.lower().partition("e")
        if sep:
            try:
                big = abs(int(exp)) > MAX_DECIMAL_EXPONENT
            except ValueError:
                big = False  # not a number: reported below
            if big:
                raise InputError(f"{where}: value {show(value)} has a decimal exponent beyond "
                                 f"±{MAX_DECIMAL_EXPONENT}")
    frac = read_fraction(where, value)
    if max(frac.numerator.bit_length(), frac.denominator.bit_length()) > MAX_FRACTION_BITS:
        raise InputError(f"{where}: value {show(value)} has a numerator or denominator of more than "
                         f"{MAX_FRACTION_BITS} bits (exact compatibility would have to factor it)")
    return frac


def read_fraction(where: str, value: Any) -> Fraction:
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
        raise InputError(f"{where}: value {show(value)} is not a number or fraction") from None
    return frac


def exact_prob_rows(raw: np.ndarray, *, exact: bool) -> tuple[tuple[Fraction, ...], ...]:
    """The rows of ``probs`` (an object array of shape (m, V)) as exact fractions, each checked: no
    negative entry, a positive sum, and a sum of exactly 1 when ``exact`` (fraction strings were given),
    else within :data:`PROB_SUM_TOL`."""
    m, V = raw.shape
    rows: list[tuple[Fraction, ...]] = []
    for j in range(m):
        row = tuple(parse_fraction("probs", (j, z), raw[j, z]) for z in range(V))
        for z, f in enumerate(row):
            if f < 0:
                raise InputError(f"probs[{j}, {z}]: value {show(raw[j, z])} is negative")
        total = sum(row, Fraction(0))
        if total == 0:
            raise InputError(f"probs[{j}]: row sums to 0, so context {j} has an empty support")
        if exact:
            if total != 1:
                raise InputError(f"probs[{j}]: row sums to {total}, not exactly 1")
        elif abs(float(total) - 1.0) > PROB_SUM_TOL:
            raise InputError(f"probs[{j}]: row sums to {float(total)!r}, not 1 (tolerance {PROB_SUM_TOL:g})")
        rows.append(row)
    return tuple(rows)


def exact_weights(weights: Any, m: int) -> tuple[Fraction, ...]:
    """The context weights as exact fractions normalised to sum to one (uniform when ``weights`` is None)."""
    if weights is None:
        return tuple(Fraction(1, m) for _ in range(m))
    wr = np.asarray(weights, dtype=object)
    if wr.ndim != 1 or wr.shape[0] != m:
        raise InputError(f"weights: expected shape ({m},) to match probs, got shape {wr.shape}")
    wf = [parse_fraction("weights", (j,), wr[j]) for j in range(m)]
    for j, f in enumerate(wf):
        if f <= 0:
            raise InputError(f"weights[{j}]: value {show(wr[j])} is not positive")
    tot = sum(wf, Fraction(0))
    return tuple(f / tot for f in wf)


__all__ = [
    "COUNT_MAX",
    "MAX_DECIMAL_EXPONENT",
    "MAX_FRACTION_BITS",
    "MAX_FRACTION_CHARS",
    "PROB_SUM_TOL",
    "as_count_matrix",
    "as_float_matrix",
    "checked_row_sums",
    "count_value",
    "exact_prob_rows",
    "exact_weights",
    "frozen",
    "parse_fraction",
    "read_fraction",
    "show",
]
