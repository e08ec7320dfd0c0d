r"""Certificate text: strict parsing, canonical JSON, the checksum and the seal, files.

* :func:`loads` / :func:`load` read certificate text strictly (a repeated key, a non-finite number, an
  integer literal over :data:`~ntpcert.certificate.schema.MAX_JSON_INTEGER_DIGITS` digits, a file over
  :data:`~ntpcert.certificate.format.MAX_CERTIFICATE_BYTES` are refused), and check the format and
  version before anything else reads the object;
* :func:`canonical_json` is the text the checksum is taken over; :func:`seal` and :func:`seal_canonical`
  set the checksum, :func:`sealed_text_matches` compares a sealed text with its object by hash;
* :func:`dumps` / :func:`save` write a sealed certificate (atomically).

Exact witnesses hold integers of any size (a null vector of d + 1 dyadic embeddings has entries of
about 66 d bits: over 5,000 digits at d = 256), and Python >= 3.11 refuses str <-> int beyond 4,300
digits. The limit is lifted only inside :func:`unlimited_int_digits`, around the reading and writing
of such values, and restored after: importing ntpcert changes no interpreter setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from ntpcert.certificate.format import FORMAT, MAX_CERTIFICATE_BYTES, NUCLEAR_FORMAT, VERSION
from ntpcert.certificate.schema import MAX_JSON_INTEGER_DIGITS, show
from ntpcert.errors import CertificateError, CertificateTooLarge, InputError


@contextlib.contextmanager
def unlimited_int_digits() -> Iterator[None]:
    """Lift the interpreter's int-string conversion limit inside the block (or the decorated
    function), and restore whatever it was after, also on an error."""
    if not hasattr(sys, "set_int_max_str_digits"):  # Python < 3.11: no limit
        yield
        return
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(old)


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


def seal_canonical(cert: dict) -> tuple[dict, str]:
    """``(seal(cert), canonical_json(seal(cert)))`` from one encoding pass: when ``checksum`` sorts
    before every other top-level key, the sealed text is the body's canonical text with
    ``"checksum":"..."`` put first (a large certificate's encoding takes seconds)."""
    body = {k: v for k, v in cert.items() if k != "checksum"}
    text = canonical_json(body)
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()
    sealed = {**body, "checksum": digest}
    if body and min(body) > "checksum":
        return sealed, '{"checksum":"' + digest + '",' + text[1:]
    return sealed, canonical_json(sealed)


def sealed_text_matches(cert: dict, text: str) -> bool:
    """Whether ``text`` is in the form :func:`seal_canonical` makes for ``cert`` as far as a hash shows
    without encoding ``cert`` again: ``{"checksum":"<cert's checksum>",`` followed by a body whose
    SHA-256 is that checksum, with the body's first key one of ``cert``'s."""
    digest = cert.get("checksum")
    if type(digest) is not str:
        return False
    head = '{"checksum":"' + digest + '",'
    if not text.startswith(head) or not text.endswith("}"):
        return False
    body = "{" + text[len(head):]
    if not any(body.startswith('{"' + k + '":') for k in cert if k != "checksum"):
        return False
    return hashlib.sha256(body.encode("ascii")).hexdigest() == digest


#: Certificates whose matrices hold more entries than this, V·(d + m) by the header, are written
#: in the compact canonical form (no indentation): the indented form needs Python's pure-Python
#: JSON encoder, which took 17-27 s on V = 2000, m = 1000, d = 1024, against about 1 s.
PRETTY_MAX_ENTRIES = 200_000


def dumps(cert: dict, *, reseal: bool = True, canonical: str | None = None) -> str:
    """The file text of a certificate (sealed): indented by one space, or the canonical JSON of
    :func:`canonical_json` when it is large (:data:`PRETTY_MAX_ENTRIES`). Both read the same.
    ``reseal=False`` writes the checksum ``cert`` carries (a certificate just sealed and checked)
    instead of computing it again; ``canonical``, with it, is that certificate's canonical text
    already made (:func:`seal_canonical`)."""
    if reseal or "checksum" not in cert:
        sealed, canonical = seal(cert), None
    else:
        sealed = cert
    head = sealed.get("instance") if isinstance(sealed.get("instance"), dict) else {}
    sizes = [head.get(k) for k in ("V", "d", "m")]
    if all(type(x) is int for x in sizes) and sizes[0] * (sizes[1] + sizes[2]) > PRETTY_MAX_ENTRIES:
        return (canonical if canonical is not None else canonical_json(sealed)) + "\n"
    return json.dumps(sealed, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def save(cert: dict, path: str | os.PathLike, *, reseal: bool = True, canonical: str | None = None) -> None:
    """Write atomically (temporary file in the same directory, then ``os.replace``); ``reseal`` and
    ``canonical`` as in :func:`dumps`."""
    from ntpcert.util.files import atomic_write_bytes

    text = dumps(cert, reseal=reseal, canonical=canonical)
    check_size(text, f"the certificate for {os.fspath(path)!r}")  # nothing is written
    atomic_write_bytes(path, text.encode("ascii"))


def _size_error(size: int, what: str) -> CertificateTooLarge:
    return CertificateTooLarge(f"{what} is {size} bytes, over the cap of {MAX_CERTIFICATE_BYTES} bytes "
                               f"({MAX_CERTIFICATE_BYTES / 2**20:g} MiB, MAX_CERTIFICATE_BYTES)")


def check_size(text: str, what: str = "the certificate") -> None:
    """Raise :class:`~ntpcert.errors.CertificateTooLarge` when ``text`` (ASCII: one byte a character) is
    over :data:`~ntpcert.certificate.format.MAX_CERTIFICATE_BYTES`: what a producer calls before it
    writes, so that no file it writes is refused by a reader for its size."""
    if len(text) > MAX_CERTIFICATE_BYTES:
        raise _size_error(len(text), what)


def loads(text: str) -> dict:
    """Parse certificate text; raises :class:`CertificateError` (over the size cap, truncated, not
    JSON, a repeated key, a non-finite number, an oversized integer literal, wrong format or version),
    with the strict reader that data files share (:func:`ntpcert.util.strict_json.strict_loads`).
    The schema itself is checked by :func:`check_schema`."""
    from ntpcert.util.strict_json import StrictJSONError, strict_loads

    check_size(text, "the certificate text")  # every character is at least one byte
    try:
        obj = strict_loads(text, max_int_digits=MAX_JSON_INTEGER_DIGITS,
                           cap_note=" (MAX_JSON_INTEGER_DIGITS); large integers belong in rational strings")
    except StrictJSONError as err:
        raise CertificateError(str(err)) from None
    except json.JSONDecodeError as err:
        raise CertificateError(f"not valid JSON (truncated or corrupted?): {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise CertificateError("not valid JSON: nested too deeply") from None
    if type(obj) is not dict:
        raise CertificateError("not a certificate: the JSON value is not an object")
    if obj.get("format") == NUCLEAR_FORMAT:  # an enclosure file: its version is checked by checker.nuclear
        return obj
    if obj.get("format") != FORMAT or type(obj.get("format")) is not str:
        raise CertificateError(f"not a certificate: format is {show(obj.get('format'))}, expected {FORMAT!r}")
    if type(obj.get("version")) is not int or obj.get("version") != VERSION:
        raise CertificateError(f"unsupported certificate version {show(obj.get('version'))} (this checker reads {VERSION})")
    return obj


def load(path: str | os.PathLike) -> dict:
    """Read a certificate file (at most :data:`MAX_CERTIFICATE_BYTES`, refused before reading).

    Raises
    ------
    InputError
        When the file cannot be read at all (missing, a directory, no permission).
    CertificateError
        When it is over the size cap, or its content is not a certificate (see :func:`loads`).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_CERTIFICATE_BYTES:
                raise _size_error(size, f"CERT {p!r}")
            raw = fh.read(MAX_CERTIFICATE_BYTES + 1)  # a file that grows, or reports no size, is still capped
    except FileNotFoundError:
        raise InputError(f"CERT: file {p!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"CERT: {p!r} is a directory") from None
    except OSError as err:
        raise InputError(f"CERT: cannot read {p!r} ({err.strerror})") from None
    if len(raw) > MAX_CERTIFICATE_BYTES:
        raise _size_error(len(raw), f"CERT {p!r}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CertificateError("not a certificate: the file is not UTF-8 text") from None
    return loads(text)


__all__ = ["PRETTY_MAX_ENTRIES", "canonical_json", "check_size", "checksum", "dumps", "load", "loads", "save", "seal",
           "seal_canonical", "sealed_text_matches", "unlimited_int_digits"]
