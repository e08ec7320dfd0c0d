r"""The certificate schema, as data: one table that the producer and the checker both read.

:data:`SCHEMA` lists, per section, its keys and the kind of each value; :func:`check_section` checks an
object against it. The checker (:func:`ntpcert.certificate.structure.check_schema`) applies it to a file
it reads; the producer (:func:`ntpcert.certificate.encode.build_certificate`) applies the same
table to every section it writes (:func:`check_produced`), so a field the checker would refuse is
never written: a 26-digit prime of a count ratio is written, and read, as the kind ``primes``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from fractions import Fraction
from typing import Any

import flint

from ntpcert.errors import CertificateError
from ntpcert.certificate.format import LIMITS
from ntpcert.certificate.provenance import READER_SCHEMA, SOURCE_SCHEMA, VOCABULARY_SCHEMA
from ntpcert.exact.modular import MODULUS_BOUND

#: The most digits a JSON *integer literal* may have (Python's default int-string limit). Integers
#: of any length travel as rational strings; the integers of the schema are sizes and indices.
MAX_JSON_INTEGER_DIGITS = LIMITS["json_integer_digits"]

#: The most digits of a prime in ``compatibility.primes`` or a prime key: what the reader accepts.
MAX_PRIME_DIGITS = MAX_JSON_INTEGER_DIGITS
PRIME_BOUND = 10 ** MAX_PRIME_DIGITS

#: Every integer the schema reads (sizes, indices, counts) is below this bound.
MAX_SCHEMA_INT = 2**63

#: Every modulus a certificate names (``rank_modulus``, ``embeddings_rank_modulus``,
#: ``frequent_tokens_modulus``, a rank witness's ``modulus``) is a prime below this bound:
#: :data:`ntpcert.exact.modular.MODULUS_BOUND` (residues mod p are exact there), 2^63 as every integer of
#: the schema, and ``tools/ntpcert_check.py``'s.
MAX_MODULUS = MODULUS_BOUND

#: The spelling of a canonical rational: ``p`` or ``p/q`` with q > 1 (lowest terms is checked apart).
RATIONAL_RE = re.compile(r"(-?(?:0|[1-9][0-9]*))(?:/([1-9][0-9]*))?", re.ASCII)

#: A SHA-256 digest as written in a certificate: 64 lowercase hex digits.
SHA256_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)

#: Decimal digits beyond which strings are converted by python-flint (quasi-linear, no length limit).
_FLINT_DIGITS = 1000

#: The schema, as data. Section name -> {key: kind}; a key ending in ``?`` is optional, every other
#: key is required, and any key not listed is refused. Sections written ``name/variant`` are chosen
#: by the section's ``claim`` (``true``, ``false``, ``null``) or, for the embedded instance, by
#: whether it holds ``counts`` or ``probs``. Kinds:
#:
#: ``bool`` true/false only; ``bool|null``; ``int`` a non-negative integer (not a boolean);
#: ``size`` a positive integer; ``str``; ``sha256`` 64 lowercase hex digits; ``float`` a finite
#: JSON float (not an integer, not a boolean); ``rational`` a canonical ``"p/q"`` string;
#: ``list``; ``object``; ``object|null``; ``modulus`` a prime ``2 <= p < 2^63`` (``modulus|null``: or
#: null); ``primes`` an increasing list of integers >= 2 of at most
#: :data:`MAX_PRIME_DIGITS` digits each (any size the reader accepts: count ratios given as fraction
#: strings have primes of any length, far beyond the 2^63 of ``int``).
SCHEMA: dict[str, dict[str, str]] = {
    "certificate": {
        "format": "str", "version": "int", "instance": "object", "probabilities_exact_from_floats": "bool",
        "claims": "object", "compatibility": "object", "separability": "object", "svm": "object|null",
        "excess?": "object|null", "why_not_separable?": "object", "why_not_compatible?": "object",
        "split?": "object", "source?": "object", "checksum": "sha256",
    },
    "instance": {"fingerprint": "sha256", "m": "size", "d": "size", "V": "size", "embedded": "object"},
    "instance.embedded/counts": {
        "name": "str", "embeddings?": "list", "embeddings_f64?": "str", "embeddings_f32?": "str", "embeddings_shape?": "list",
        "embeddings_sparse?": "list",
        "counts": "list", "token_names?": "list", "context_names?": "list",
    },
    "instance.embedded/counts_sparse": {
        "name": "str", "embeddings?": "list", "embeddings_f64?": "str", "embeddings_f32?": "str", "embeddings_shape?": "list",
        "embeddings_sparse?": "list",
        "V": "size", "counts_sparse": "list", "token_names?": "list",
        "context_names?": "list",
    },
    "instance.embedded/probs": {
        "name": "str", "embeddings?": "list", "embeddings_f64?": "str", "embeddings_f32?": "str", "embeddings_shape?": "list",
        "embeddings_sparse?": "list",
        "probs": "list", "weights": "list",
        "token_names?": "list", "context_names?": "list",
    },
    "claims": {"compatible": "bool|null", "separable": "bool|null", "entropy_bound_reachable": "bool|null",
               "svm": "object|null"},
    "claims.svm": {"gap": "rational", "distance_bound": "float", "norm_lower": "float", "norm_upper": "float"},
    "compatibility/true": {"claim": "bool|null", "n_eq": "int", "dim_F": "int", "primes": "primes",
                           "null_space_basis": "list", "W_star?": "object", "rank_modulus?": "modulus",
                           "embeddings_rank_modulus?": "modulus", "particular_solutions?": "object",
                           "embeddings_rank_witness?": "object", "frequent_tokens_modulus?": "modulus"},
    "compatibility/false": {"claim": "bool|null", "n_eq": "int", "dim_F": "int|null", "primes": "primes",
                            "violating_null_vector": "list"},
    "compatibility/null": {"claim": "bool|null", "n_eq": "int", "primes": "primes", "reason": "str"},
    "compatibility.W_star": {"coefficients": "object"},
    "separability/true": {"claim": "bool|null", "W?": "list", "embeddings_rank_modulus?": "modulus",
                          "embeddings_rank_witness?": "object"},
    "rank_witness": {"pivots": "list", "core_rows": "list", "core_cols": "list", "core_rank": "int",
                     "modulus": "modulus|null"},
    "separability/false": {"claim": "bool|null", "ray": "list"},
    "separability/null": {"claim": "bool|null", "reason": "str"},
    "excess": {"q": "list", "W": "list", "lower": "float", "upper": "float", "excess_lower": "float",
               "excess_upper": "float"},
    "why_not_separable": {"contexts": "list", "ray": "list", "deletions": "list"},
    "why_not_separable.deletion": {"context": "int", "cols": "list", "W": "list"},
    "why_not_compatible": {"y": "list"},
    "split": {"nonseparable": "list", "token_class": "list", "D_P": "list", "dual": "list"},
    "source": SOURCE_SCHEMA,  # where the instance was read from (ntpcert.certificate.provenance)
    "source.vocabulary": VOCABULARY_SCHEMA,  # a model's unseen tokens merged into one (ntpcert.instance.lm.merge)
    "source.reader": READER_SCHEMA,  # a model read through a library's API (ntpcert.instance.lm.hooked)
    "svm": {"W?": "list", "W_factored?": "object", "a?": "list", "a_sparse?": "list", "gap": "rational",
            "distance_bound": "float",
            "norm_lower": "float", "norm_upper": "float"},
    "svm.W_factored": {"scale": "rational", "base": "list", "delta": "list"},
}

KIND_TEXT = {
    "bool": "true or false", "bool|null": "true, false or null", "int": "a non-negative integer below 2^63",
    "int|null": "a non-negative integer below 2^63 or null", "modulus": "a prime 2 <= p < 2^63",
    "modulus|null": "a prime 2 <= p < 2^63 or null",
    "size": "a positive integer", "str": "a string", "sha256": "64 lowercase hex digits",
    "float": "a finite JSON float", "rational": "a rational string 'p/q'", "list": "a list",
    "object": "an object", "object|null": "an object or null",
    "primes": "an increasing list of primes",
}


# ---------------------------------------------------------------------------- values in messages
def show(value: Any) -> str:
    """A short, always printable rendering of a JSON value for a one-line message, in JSON spelling
    (``true``, ``null``): never converts a huge integer to decimal, never prints much more than 40
    characters."""
    if value is None or type(value) is bool:
        return json.dumps(value)
    if type(value) is int and value.bit_length() > 128:
        return f"<an integer of {value.bit_length()} bits>"
    if type(value) is str and len(value) > 40:
        return repr(value[:37] + "...")
    if type(value) is list and len(value) <= 4:
        text = "[" + ", ".join(show(x) for x in value) + "]"
        return text if len(text) <= 100 else f"<a list of {len(value)} entries>"
    if isinstance(value, (dict, list)):
        return f"<{'an object' if isinstance(value, dict) else 'a list'} of {len(value)} entries>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def check_kind(value: Any, kind: str, field: str) -> None:
    """Check ``value`` against a schema kind (type-exactly: ``1`` is not ``true``, ``True`` not ``1``)."""
    t = type(value)
    if kind == "bool":
        ok = t is bool
    elif kind == "bool|null":
        ok = t is bool or value is None
    elif kind in ("int", "size"):
        ok = t is int and (1 if kind == "size" else 0) <= value < MAX_SCHEMA_INT
    elif kind == "int|null":
        ok = value is None or (t is int and 0 <= value < MAX_SCHEMA_INT)
    elif kind in ("modulus", "modulus|null"):
        ok = (value is None and kind == "modulus|null") or (t is int and 2 <= value < MAX_MODULUS
                                                            and bool(flint.fmpz(value).is_prime()))
    elif kind == "str":
        ok = t is str
    elif kind == "sha256":
        ok = t is str and SHA256_RE.fullmatch(value) is not None
    elif kind == "float":
        ok = t is float and math.isfinite(value)
    elif kind == "rational":
        parse_rational(value, field)
        return
    elif kind == "primes":
        check_primes(value, field)
        return
    elif kind == "list":
        ok = t is list
    elif kind == "object":
        ok = t is dict
    elif kind == "object|null":
        ok = t is dict or value is None
    else:  # pragma: no cover - a typo in SCHEMA
        raise AssertionError(f"unknown schema kind {kind!r}")
    if not ok:
        raise CertificateError(f"{field}: expected {KIND_TEXT[kind]}, got {type_name(value)} {show(value)}")


def check_section(obj: Any, section: str, field: str) -> None:
    """``obj`` has exactly the keys of ``SCHEMA[section]`` (optional ones may be absent), each of its kind."""
    if type(obj) is not dict:
        raise CertificateError(f"{field or 'certificate'}: expected an object, got {type_name(obj)} {show(obj)}")
    spec = SCHEMA[section]
    allowed = {k.rstrip("?"): (kind, not k.endswith("?")) for k, kind in spec.items()}
    prefix = f"{field}." if field else ""
    for key, (_, required) in allowed.items():
        if required and key not in obj:
            raise CertificateError(f"{prefix}{key}: missing")
    for key in obj:
        if key not in allowed:
            raise CertificateError(f"{field or 'certificate'}: unknown key {show(key)} (allowed: "
                                   f"{', '.join(sorted(allowed))})")
    for key, value in obj.items():
        check_kind(value, allowed[key][0], f"{prefix}{key}")


def check_primes(primes: Any, field: str = "compatibility.primes") -> None:
    """An increasing list of integers from 2 up, each of at most :data:`MAX_PRIME_DIGITS` digits (the
    checker re-derives the primes themselves from the instance)."""
    check_kind(primes, "list", field)
    last = 1
    for k, p in enumerate(primes):
        if not (type(p) is int and 2 <= p < PRIME_BOUND):
            raise CertificateError(f"{field}[{k}]: expected an integer >= 2 of at most {MAX_PRIME_DIGITS} digits, "
                                   f"got {type_name(p)} {show(p)}")
        if p <= last:
            raise CertificateError(f"{field}[{k}]: {show(p)} is not above the previous entry "
                                   "(primes are listed increasing, each at least 2)")
        last = p


def check_prime_key(key: str, field: str) -> None:
    """A key naming a prime: decimal digits, no leading zero, at least 2, at most :data:`MAX_PRIME_DIGITS` digits."""
    if not (key.isascii() and key.isdigit() and len(key) <= MAX_PRIME_DIGITS and key[0] != "0" and int(key) >= 2):
        raise CertificateError(f"{field}: key {show(key)} is not a prime written in decimal")


def parse_rational(text: Any, field: str) -> Fraction:
    """Read a canonical rational string: ``"p"`` or ``"p/q"`` with ``q > 1``, ``gcd(p, q) = 1``, no
    sign but a leading ``-``, no leading zeros, no ``"-0"``; any length (python-flint converts long
    digit strings, so Python's int-string limit does not apply)."""
    if type(text) is not str:
        raise CertificateError(f"{field}: expected a rational string 'p/q', got {type_name(text)} {show(text)}")
    if len(text) > _FLINT_DIGITS:
        got = _long_rational(text)
        if type(got) is str:
            raise CertificateError(f"{field}: {show(text)} {got}")
        return got
    match = RATIONAL_RE.fullmatch(text)
    if match is None or text == "-0":
        raise CertificateError(f"{field}: {show(text)} is not a canonical rational 'p/q'")
    p = digits_to_int(match.group(1))
    if match.group(2) is None:
        return Fraction(p)
    q = digits_to_int(match.group(2))
    if q == 1 or math.gcd(p, q) != 1:
        raise CertificateError(f"{field}: {show(text)} is not in lowest terms")
    return Fraction(p, q)


@functools.lru_cache(maxsize=16)
def _long_rational(text: str) -> Fraction | str:
    """:func:`parse_rational` of a long string (the value, or what is wrong with it), remembered: a
    certificate spells its gap twice, and a checker reads each spelling more than once."""
    match = RATIONAL_RE.fullmatch(text)
    if match is None or text == "-0":
        return "is not a canonical rational 'p/q'"
    p = digits_to_int(match.group(1))
    if match.group(2) is None:
        return Fraction(p)
    q = digits_to_int(match.group(2))
    if q == 1 or flint.fmpz(p).gcd(q) != 1:
        return "is not in lowest terms"
    return Fraction(p, q)


def digits_to_int(digits: str) -> int:
    """``int(digits)``, through python-flint for long strings (no int-string limit, quasi-linear)."""
    return int(digits) if len(digits) <= _FLINT_DIGITS else int(flint.fmpz(digits))


def check_produced(cert: dict) -> None:
    """The sections a producer wrote, against :data:`SCHEMA` (keys and kinds, ``primes`` entry by
    entry; matrices are checked by the reader). Raises :class:`CertificateError` naming the field: a
    producer bug, never written to a file."""
    check_section(cert, "certificate", "")
    check_section(cert["instance"], "instance", "instance")
    check_section(cert["claims"], "claims", "claims")
    if cert["claims"]["svm"] is not None:
        check_section(cert["claims"]["svm"], "claims.svm", "claims.svm")
    for name in ("compatibility", "separability"):
        claim = cert[name]["claim"]
        check_section(cert[name], f"{name}/{'null' if claim is None else str(bool(claim)).lower()}", name)
    comp = cert["compatibility"]
    for key in ("particular_solutions",) + (("W_star",) if "W_star" in comp else ()):
        items = comp.get(key, {})
        items = items.get("coefficients", {}) if key == "W_star" else items
        for p in items:
            check_prime_key(p, f"compatibility.{key}")
    if cert["svm"] is not None:
        check_section(cert["svm"], "svm", "svm")


__all__ = ["KIND_TEXT", "MAX_JSON_INTEGER_DIGITS", "MAX_MODULUS", "MAX_PRIME_DIGITS", "MAX_SCHEMA_INT", "RATIONAL_RE", "SCHEMA",
           "SHA256_RE", "check_kind", "check_primes", "check_prime_key", "check_produced", "check_section",
           "digits_to_int", "parse_rational", "show", "type_name"]
