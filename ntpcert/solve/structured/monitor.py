r"""Cheap progress measures of the structured solver, read off its state in O(mC).

For the dual per class ``A`` (shape (m, C)) and the logits Z (shape (m, C)):

* dual objective :math:`D = \sum_j \sum_{c \notin S_j} n_c(-A_{jc}) - \tfrac12 \|W\|_F^2`, with
  :math:`\|W\|_F^2 = \sum_c n_c \|w_c\|^2`;
* for context j, :math:`\ell_j = \min_{c \in S_j} Z_{jc}` and :math:`u_j = \max_{c \notin S_j} Z_{jc}`: the
  **margin estimate** :math:`\gamma = \min_j (\ell_j - u_j)` and the **spread**
  :math:`\epsilon = \max_j (\max_{c\in S_j} Z_{jc} - \ell_j)` (the (6a) violation);
* the **gap estimate** :math:`\tfrac12\|W\|_F^2/\gamma^2 - D`. Once :math:`\epsilon` is small, rescaling W by
  :math:`1/\gamma` and repairing (6a) moves the norm by :math:`O(\epsilon)`, so the estimate tracks the
  gap a certificate will prove; it is used only to decide when to certify.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ntpcert.solve.structured.classes import TokenClasses


@dataclass(frozen=True)
class Progress:
    """Progress measures after one epoch (see the module doc).

    Attributes
    ----------
    dual : float
    norm2 : float
        :math:`\\|W\\|_F^2` of the current :math:`W = aH`.
    margin : float
        :math:`\\gamma` (``inf`` without off-support entries).
    spread : float
        :math:`\\epsilon`.
    gap_estimate, relative_gap_estimate : float
        ``inf`` when :math:`\\gamma \\le 0`.
    active : int
        Off-support entries of A below zero.
    """

    dual: float
    norm2: float
    margin: float
    spread: float
    gap_estimate: float
    relative_gap_estimate: float
    active: int


def gap_progress(A: np.ndarray, Z: np.ndarray, sq_norms: np.ndarray, classes: TokenClasses) -> Progress:
    """Progress of the dual ``A`` (m, C) with logits ``Z`` (m, C) and class norms (C,)."""
    mask = classes.mask
    n = classes.sizes
    norm2 = float(n @ sq_norms)
    offA = np.where(mask, 0.0, A)
    dual = float(-(offA @ n).sum()) - 0.5 * norm2
    lo = np.where(mask, Z, np.inf).min(axis=1)
    hi = np.where(mask, Z, -np.inf).max(axis=1)
    up = np.where(mask, -np.inf, Z).max(axis=1)
    margin = float((lo - up).min())
    spread = float((hi - lo).max())
    if margin > 0 and np.isfinite(margin):
        # (sqrt(norm2) / margin)^2, not norm2 / margin**2: a margin below 1e-162 squares to 0.0 (data
        # whose embeddings span 1e-101 to 1e116 reach it), and the quotient is then inf, not an error
        ratio = math.sqrt(max(norm2, 0.0)) / margin  # a norm computed as a difference can round below 0
        primal = 0.5 * ratio * ratio  # a product overflows to inf, where ** raises OverflowError
        gap = primal - dual
        # the rescaled W is feasible only once the in-support logits agree: until then the spread,
        # relative to the margin, bounds how far the estimate can be trusted
        rel = max(abs(gap) / max(1.0, primal), spread / margin)
    elif np.isinf(margin):
        gap, rel = 0.5 * norm2 - dual, abs(0.5 * norm2 - dual) / max(1.0, 0.5 * norm2)
    else:
        gap, rel = np.inf, np.inf
    return Progress(dual, norm2, margin, spread, float(gap), float(rel), int(np.count_nonzero(offA < 0)))
