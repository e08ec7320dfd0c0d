r"""What a bottleneck certificate says, shared by the code that writes it and the checker that reads it:
the decoder's fingerprint, the lifted matrix, and the rule that turns a row into a witness direction.

A **row witness** ``(source, bits, c)`` of token v is the integer vector

.. math:: g = \big(\mathrm{rint}(2^{\,\mathrm{bits} - e}\,(w_s - \mu)),\ c\big),
          \qquad 2^{e-1} \le \max_j |w_{s,j} - \mu_j| < 2^e ,

with s the source token, :math:`\mu` the certificate's ``center`` (float64 values), the subtraction and the
scaling done in float64 (correctly rounded, scaling by a power of two exact), and the last entry c
(a positive integer) only when the decoder has a bias. It says: with :math:`h = g_{1..d} / c` (or
:math:`h = g` without a bias), token v is the unique argmax of :math:`W h + b`. The checker recomputes g
from the decoder and checks that claim exactly; the rule only makes certificates small.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["FORMAT", "VERSION", "decoder_sha256", "lifted", "natural_bias_entry", "row_direction"]

#: The certificate's ``format`` and ``version``.
FORMAT = "ntpcert-bottleneck-certificate"
VERSION = 1


def lifted(W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``[W, b]`` (V, d + 1) with a bias, else W (V, d), as C-ordered float64 (-0.0 read as 0.0)."""
    W = np.asarray(W, dtype=np.float64)
    A = W if b is None else np.hstack([W, np.asarray(b, dtype=np.float64).reshape(-1, 1)])
    return np.ascontiguousarray(A + 0.0)


def decoder_sha256(W: np.ndarray, b: np.ndarray | None) -> str:
    """SHA-256 of the decoder: the shape (V, d) and the bias flag as text, then W's float64 little-endian
    bytes in C order, then b's."""
    W = np.ascontiguousarray(np.asarray(W, dtype="<f8") + 0.0)
    h = hashlib.sha256(f"{W.shape[0]},{W.shape[1]},{int(b is not None)};".encode())
    h.update(W.tobytes())
    if b is not None:
        h.update(np.ascontiguousarray(np.asarray(b, dtype="<f8") + 0.0).tobytes())
    return h.hexdigest()


def row_direction(W: np.ndarray, center: np.ndarray, sources: np.ndarray, bits: np.ndarray,
                  c: np.ndarray | None) -> np.ndarray:
    """The integer witness vectors of the row rule (see the module doc), as float64 columns (D, k).

    Parameters
    ----------
    W : ndarray of shape (V, d)
    center : ndarray of shape (d,)
    sources, bits : ndarray of shape (k,)
        Source tokens and scale bits (0 <= bits <= 40).
    c : ndarray of shape (k,) or None
        The bias entries (positive integers), or None without a bias.
    """
    X = np.asarray(W, dtype=np.float64)[np.asarray(sources, dtype=np.int64)] - np.asarray(center, dtype=np.float64)
    amax = np.abs(X).max(axis=1)
    e = np.frexp(amax)[1].astype(np.int64)  # amax < 2^e (0 for a zero row)
    G = np.rint(np.ldexp(X, (np.asarray(bits, dtype=np.int64) - e)[:, None]))
    if c is not None:
        G = np.hstack([G, np.asarray(c, dtype=np.float64).reshape(-1, 1)])
    return np.ascontiguousarray(G.T)


def natural_bias_entry(W: np.ndarray, center: np.ndarray, sources: np.ndarray, bits: int) -> np.ndarray:
    """The c that makes a row witness h = w_s - mu itself (rounded): 2^(bits - e), at least 1 and at most
    2^(bits + 8) (a row within 2^-8 of the center takes a relatively smaller bias)."""
    X = np.asarray(W, dtype=np.float64)[sources] - center
    e = np.frexp(np.abs(X).max(axis=1))[1].astype(np.int64)
    return np.clip(np.ldexp(1.0, bits - e), 1.0, 2.0 ** (bits + 8))

