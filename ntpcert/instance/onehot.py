"""One-hot context embeddings: each context its own coordinate (one non-zero per row of H, in distinct
columns). Several closed forms apply there (W* in :mod:`ntpcert.rows.onehot`, W^mm in
:mod:`ntpcert.solve.structured.onehot`), and the range check of the embeddings reads the non-zeros alone
(:func:`ntpcert.rows.kesler.check_embedding_range`); :attr:`NTPInstance.onehot_columns` finds them once."""

from __future__ import annotations

import numpy as np

__all__ = ["onehot_columns"]


def onehot_columns(H: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(columns, scales)`` of shape (m,) when every row of H (m, d) has exactly one non-zero and the
    columns are distinct; else None."""
    H = np.asarray(H)
    if H.ndim != 2 or H.shape[0] == 0 or H.shape[1] == 0:
        return None
    m, d = H.shape
    if np.count_nonzero(H) != m:
        return None
    cols = (H != 0).argmax(axis=1)  # m non-zeros in all: one in each row iff each row's first is non-zero
    if not np.all(H[np.arange(m), cols] != 0) or np.unique(cols).size != m:
        return None
    return cols, H[np.arange(m), cols].astype(np.float64)
