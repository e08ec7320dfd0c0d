r"""The certificate file: one JSON object, rationals as strings, naming its instance by a hash.

Layout (``format = "ntpcert-certificate"``, ``version = 1``)::

    {
      "format": "ntpcert-certificate", "version": 1,
      "instance": {"fingerprint": SHA256, "m": .., "d": .., "V": .., "embedded": INSTANCE},
      "probabilities_exact_from_floats": bool,
      "claims": {"compatible": bool|null, "separable": bool|null,
                 "entropy_bound_reachable": bool|null,
                 "svm": {"gap": "p/q", "distance_bound": x, "norm_lower": x, "norm_upper": x} | null},
      "compatibility": {"claim": true, "n_eq": r, "dim_F": k, "primes": [..],
                        "null_space_basis": [[[j, z, "p/q"], ..], ..], "W_star": {...} (optional)}
                     | {"claim": false, ..., "violating_null_vector": [[j, z, "p/q"], ..]},
      "separability": {"claim": true, "W": [["p/q", ..], ..]}            (V rows of d entries)
                    | {"claim": false, "ray": [[v, j, "p/q"], ..]}       (nonzeros of a, shape (V, m))
                    | {"claim": null, "reason": ".."},
      "svm": {"W": [[..]], "a": [[..]], "gap": "p/q", "distance_bound": x,
              "norm_lower": x, "norm_upper": x} | null,
      "checksum": SHA256 of the canonical JSON of every other field
    }

* Rationals are strings ``"p/q"`` or ``"p"`` (integers only), so no value passes through a float.
* Equality rows are named by ``(j, z)``: context j, token :math:`z \in S_j` other than the anchor
  :math:`z_j = \min S_j`; the row is :math:`(e_z - e_{z_j}) \otimes h_j`.
* ``instance.fingerprint`` is :meth:`~ntpcert.instance.NTPInstance.fingerprint` (SHA-256 of the
  embeddings' bytes and the exact counts or probabilities and weights). ``instance.embedded`` holds
  the instance itself (embeddings as shortest round-tripping floats, counts as integers or
  probabilities and weights as fraction strings), so a certificate checks on its own.
* ``checksum`` catches truncation and accidental edits; a deliberate forger can recompute it, which
  is why :mod:`ntpcert.pipeline.verify` re-derives every claim from the instance.
"""

from __future__ import annotations

import hashlib
import json
import os
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.errors import CertificateError, InputError
from ntpcert.instance import NTPInstance
from ntpcert.exact.rational import fraction_str, parse_fraction

FORMAT = "ntpcert-certificate"
VERSION = 1


# ---------------------------------------------------------------------------- instance record
def instance_record(instance: NTPInstance) -> dict[str, Any]:
    """The instance as exact JSON values (see the module doc)."""
    rec: dict[str, Any] = {"name": instance.name, "embeddings": instance.embeddings.tolist()}
    if instance.counts is not None:
        rec["counts"] = instance.counts.tolist()
    else:
        if instance.probs_exact_from_floats:
            rec["probs"] = [[float(f) for f in row] for row in instance.exact_probs]
        else:
            rec["probs"] = [[fraction_str(f) for f in row] for row in instance.exact_probs]
        rec["weights"] = [fraction_str(f) for f in instance.exact_weights]
    if instance.token_names is not None:
        rec["token_names"] = list(instance.token_names)
    if instance.context_names is not None:
        rec["context_names"] = list(instance.context_names)
    return rec


def instance_from_record(rec: Any) -> NTPInstance:
    """Rebuild the embedded instance; raises :class:`CertificateError` when it is malformed."""
    if not isinstance(rec, dict) or "embeddings" not in rec:
        raise CertificateError("instance.embedded: missing or not an object with 'embeddings'")
    names = {k: rec.get(k) for k in ("token_names", "context_names")}
    try:
        if "counts" in rec:
            return NTPInstance.from_counts(rec["embeddings"], rec["counts"], name=str(rec.get("name", "instance")), **names)
        if "probs" in rec:
            return NTPInstance.from_probs(rec["embeddings"], rec["probs"], rec.get("weights"),
                                          name=str(rec.get("name", "instance")), **names)
    except InputError as err:
        raise CertificateError(f"instance.embedded: {err}") from None
    raise CertificateError("instance.embedded: neither 'counts' nor 'probs'")


# ---------------------------------------------------------------------------- rationals
def matrix_strings(M) -> list[list[str]]:
    """An exact matrix (Fractions, ints or dyadic floats) as rows of rational strings."""
    return [[fraction_str(x) for x in row] for row in M]


def matrix_fractions(rows: Any, shape: tuple[int, int], field: str) -> list[list[Fraction]]:
    """Parse rows of rational strings, checking the shape."""
    if not isinstance(rows, list) or len(rows) != shape[0]:
        raise CertificateError(f"{field}: expected {shape[0]} rows")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != shape[1]:
            raise CertificateError(f"{field}[{i}]: expected {shape[1]} entries")
        out.append([parse_fraction(x) for x in row])
    return out


def sparse_list(vec: dict) -> list[list]:
    """``{(i, k): Fraction}`` as sorted ``[[i, k, "p/q"], ...]``."""
    return [[int(i), int(k), fraction_str(v)] for (i, k), v in sorted(vec.items())]


def sparse_dict(items: Any, field: str) -> dict[tuple[int, int], Fraction]:
    """Parse ``[[i, k, "p/q"], ...]``; repeated keys are malformed."""
    if not isinstance(items, list):
        raise CertificateError(f"{field}: expected a list of [i, k, \"p/q\"]")
    out: dict[tuple[int, int], Fraction] = {}
    for t in items:
        if (not isinstance(t, list) or len(t) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in t[:2])):
            raise CertificateError(f"{field}: malformed entry {t!r:.60}")
        key = (t[0], t[1])
        if key in out:
            raise CertificateError(f"{field}: entry {key} repeated")
        out[key] = parse_fraction(t[2])
    return out


# ---------------------------------------------------------------------------- files
def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, ASCII, no NaN: the bytes the checksum is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def checksum(cert: dict) -> str:
    """SHA-256 of the canonical JSON of ``cert`` without its ``checksum`` field."""
    body = {k: v for k, v in cert.items() if k != "checksum"}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def seal(cert: dict) -> dict:
    """A copy of ``cert`` with its checksum set."""
    out = {k: v for k, v in cert.items() if k != "checksum"}
    out["checksum"] = checksum(out)
    return out


def dumps(cert: dict) -> str:
    """The file text of a certificate (sealed)."""
    return json.dumps(seal(cert), sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def save(cert: dict, path: str | os.PathLike) -> None:
    """Write atomically (temporary file in the same directory, then ``os.replace``)."""
    from ntpcert.util.files import atomic_write_bytes

    atomic_write_bytes(path, dumps(cert).encode("ascii"))


def loads(text: str) -> dict:
    """Parse certificate text; raises :class:`CertificateError` (truncated, not JSON, wrong format)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise CertificateError(f"not valid JSON (truncated or corrupted?): {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise CertificateError("not valid JSON: nested too deeply") from None
    if not isinstance(obj, dict):
        raise CertificateError("not a certificate: the JSON value is not an object")
    if obj.get("format") != FORMAT:
        raise CertificateError(f"not a certificate: format is {obj.get('format')!r:.40}, expected {FORMAT!r}")
    if obj.get("version") != VERSION:
        raise CertificateError(f"unsupported certificate version {obj.get('version')!r:.20} (this checker reads {VERSION})")
    return obj


def load(path: str | os.PathLike) -> dict:
    """Read a certificate file.

    Raises
    ------
    InputError
        When the file cannot be read at all (missing, a directory, no permission).
    CertificateError
        When its content is not a certificate (truncated, not JSON, not UTF-8, wrong format).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"CERT: file {p!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"CERT: {p!r} is a directory") from None
    except OSError as err:
        raise InputError(f"CERT: cannot read {p!r} ({err.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CertificateError("not a certificate: the file is not UTF-8 text") from None
    return loads(text)


def to_strings_dyadic(A: np.ndarray) -> list[list[str]]:
    """A float matrix (exact dyadics) as rows of rational strings."""
    return [[fraction_str(float(x)) for x in row] for row in np.asarray(A, dtype=np.float64)]
