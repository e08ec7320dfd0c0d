r"""The numbers of a decoder's logits on an instance, taken block by block of contexts (never all m·V
logits at once).

For W (V, d) and contexts j with supports :math:`S_j`:

* ``margin`` :math:`\min_j\bigl(\min_{z\in S_j} w_z^\top h_j - \max_{v\notin S_j} w_v^\top h_j\bigr)`, the
  NTP margin: every in-support token against every other one, with no anchor token (over the contexts
  whose support is not the whole vocabulary; NaN when there are none). On a W that meets (6a) (the
  in-support logits equal) it is the smallest (6b) margin :math:`\min A_{mar}\mathrm{vec}(W)`; off (6a)
  the (6b) rows measure from one anchor token per support and can be larger;
* ``support_spread`` :math:`\max_j(\max_{z\in S_j} w_z^\top h_j - \min_{z\in S_j} w_z^\top h_j)`;
* ``log_odds_error`` :math:`\max_j\max_{z\in S_j}|(w_z-w_{z_j})^\top h_j-\log(p_{j,z}/p_{j,z_j})|` with
  :math:`z_j` the smallest token of :math:`S_j` (0 at every point of :math:`W^*+F^\perp`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BLOCK_ROWS", "blocks", "logit_numbers", "ntp_margin"]

#: Contexts per block: a block's logits are (BLOCK_ROWS, V).
BLOCK_ROWS = 512


def blocks(m: int) -> list[slice]:
    return [slice(s, min(s + BLOCK_ROWS, m)) for s in range(0, m, BLOCK_ROWS)]


def logit_numbers(instance: Any, W: np.ndarray) -> dict[str, float]:
    """``margin``, ``support_spread``, ``log_odds_error`` of W (shape (V, d)) on ``instance`` (module doc)."""
    margin, spread, err = np.inf, 0.0, 0.0
    for blk in blocks(instance.m):
        Z = instance.embeddings[blk] @ W.T  # (rows, V)
        P = instance.probs_rows(blk)
        mask = P > 0
        zin = np.where(mask, Z, np.inf).min(axis=1)
        zmax = np.where(mask, Z, -np.inf).max(axis=1)
        out_max = np.where(mask, -np.inf, Z).max(axis=1)
        proper = ~mask.all(axis=1)
        if proper.any():
            margin = min(margin, float(np.min((zin - out_max)[proper])))
        spread = max(spread, float(np.max(zmax - zin)))
        rows, cols = np.nonzero(mask)
        anchor = np.argmax(mask, axis=1)  # the smallest token of each support, z_j
        with np.errstate(divide="ignore"):
            lo = np.log(P[rows, cols]) - np.log(P[rows, anchor[rows]])
        d = (Z[rows, cols] - Z[rows, anchor[rows]]) - lo
        err = max(err, float(np.max(np.abs(d))) if d.size else 0.0)
    return {"margin": margin if np.isfinite(margin) else float("nan"), "support_spread": spread,
            "log_odds_error": err}


def ntp_margin(instance: Any, W: np.ndarray) -> float:
    """The NTP margin of W (shape (V, d)) on ``instance`` (module doc); NaN when every support is the
    whole vocabulary."""
    return logit_numbers(instance, W)["margin"]
