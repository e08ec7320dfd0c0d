r"""Packed float matrices in a certificate: ``embeddings_f64`` (and ``embeddings_f32``), base64 of the bytes.

A dense matrix of n = m·d floats that are not all integers (Gaussian embeddings) takes about 21
characters an entry as shortest round-tripping decimals; its IEEE 754 binary64 bytes take 8, and their
base64 text 32/3 (the exact value of each entry is the dyadic rational of its 64 bits, as for a JSON
float). The spelling is (docs/certificate-format.md, §3):

* the 8·n bytes of the entries in row-major order, each little-endian binary64;
* as standard base64 (RFC 4648 §4: ``A-Z a-z 0-9 + /``, ``=`` padding, no line breaks or spaces),
  so exactly :math:`4\lceil 8n/3\rceil` characters;
* canonical: the text is exactly ``base64(bytes)`` (the unused low bits of the last character are
  zero), every entry finite (no NaN or infinity bit pattern) and no entry ``-0.0`` (zero is ``+0.0``),
  so every matrix has one spelling and the checksum names it.

:func:`unpack_f64` refuses anything else with a :class:`~ntpcert.errors.CertificateError` naming the
field and, for a bad entry, its index and bits; the writer is
:func:`ntpcert.certificate.encode.pack_f64`.

``embeddings_f32`` is the same with 4-byte little-endian binary32 entries (:math:`4\lceil 4n/3
ceil`
characters): written for an H whose every entry is exactly a binary32 (the h a float32 model gives), half
the size; each entry is the exact rational of its 32 bits, which is also a float64, and the fingerprint
still hashes H's float64 bytes (:func:`unpack_f32` widens them exactly).
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

from ntpcert.errors import CertificateError


def packed_length(n: int, width: int = 8) -> int:
    """The length of the base64 text of ``n`` floats of ``width`` bytes: :math:`4\\lceil wn/3\\rceil`."""
    return 4 * ((width * n + 2) // 3)


def is_float32(A: np.ndarray) -> bool:
    """Whether every entry of the float64 array ``A`` is exactly a binary32 (and finite)."""
    A = np.asarray(A, dtype=np.float64)
    with np.errstate(over="ignore"):
        return bool(np.all(np.isfinite(A)) and np.array_equal(A.astype(np.float32).astype(np.float64), A))


def can_pack(A: np.ndarray) -> bool:
    """Whether ``A`` has a packed spelling: every entry finite and none ``-0.0``."""
    A = np.asarray(A, dtype=np.float64)
    return bool(np.all(np.isfinite(A)) and not np.any(np.signbit(A) & (A == 0)))


def unpack_f64(text: object, shape: tuple[int, int], field: str) -> np.ndarray:
    """The float64 matrix of shape ``shape`` that ``text`` spells (module doc), or
    :class:`CertificateError` naming ``field``: a text of the wrong length (checked before decoding),
    not base64, not the canonical spelling, or with a NaN, infinite or ``-0.0`` entry."""
    return _unpack(text, shape, field, 8)


def unpack_f32(text: object, shape: tuple[int, int], field: str) -> np.ndarray:
    """The matrix of shape ``shape`` that the binary32 text ``text`` spells, widened exactly to float64
    (module doc); the same refusals as :func:`unpack_f64`."""
    return _unpack(text, shape, field, 4)


def _unpack(text: object, shape: tuple[int, int], field: str, width: int) -> np.ndarray:
    kind = {8: "float64", 4: "float32"}[width]
    if type(text) is not str:
        raise CertificateError(f"{field}: expected a base64 string, got {type(text).__name__}")
    rows, cols = shape
    n = rows * cols
    want = packed_length(n, width)
    if len(text) != want:
        raise CertificateError(f"{field}: has {len(text)} characters, expected {want} (base64 of {n} {kind} values, "
                               f"{rows} x {cols})")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CertificateError(f"{field}: not base64 (standard alphabet A-Z a-z 0-9 + /, '=' padding, "
                               "no spaces)") from None
    if len(raw) != width * n or base64.b64encode(raw).decode("ascii") != text:
        raise CertificateError(f"{field}: not the canonical base64 spelling of {n} {kind} values "
                               "(padding or unused bits)")
    with np.errstate(invalid="ignore"):  # a signalling NaN's bits: refused just below
        A = np.frombuffer(raw, dtype="<f8" if width == 8 else "<f4").astype(np.float64).reshape(rows, cols)
    bad = ~np.isfinite(A) | (np.signbit(A) & (A == 0))
    if bad.any():
        j, i = (int(x[0]) for x in np.nonzero(bad))
        bits = raw[width * (j * cols + i): width * (j * cols + i) + width][::-1].hex()
        what = "-0.0 (zero is written +0.0)" if A[j, i] == 0 else "not finite"
        raise CertificateError(f"{field}: entry [{j}][{i}] (bits 0x{bits}) is {what}")
    return A


__all__ = ["can_pack", "is_float32", "packed_length", "unpack_f32", "unpack_f64"]
