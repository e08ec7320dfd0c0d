r"""One-hot separable data labelled by a random linear teacher (not a CLI built-in).

Gaussian embeddings :math:`h_j \sim N(0, I_d)` and a Gaussian teacher :math:`T \in \mathbb R^{V\times d}`;
context j is followed by the single token :math:`\arg\max_v (T h_j)_v`, once. Such data are
separable (T itself separates them) and have F = {0}, the setting in which normalised sign, spectral
and Muon descent are proven to converge to their own-norm max-margin solutions (Fan et al. 2025,
arXiv 2502.04664). Used by the large-margin CE tests and the own-norm benchmarks.
"""

from __future__ import annotations

import numpy as np

from ntpcert.instance.model import NTPInstance
from ntpcert.util.validate import check_int

__all__ = ["teacher"]


def teacher(*, m: int = 40, d: int = 20, V: int = 5, seed: int = 0,
            rng: np.random.Generator | None = None) -> NTPInstance:
    """The teacher instance.

    Parameters
    ----------
    m, d, V : int
        Contexts, embedding dimension, vocabulary size (V ≥ 2; tokens that no context's teacher
        picks stay in the vocabulary).
    seed : int
        Seed of ``numpy.random.default_rng``; ignored when ``rng`` is given.
    rng : numpy.random.Generator, optional

    Returns
    -------
    NTPInstance
        Counts of shape (m, V), one per row, named ``"teacher seed=SEED"``.
    """
    for name, v, low in (("m", m, 1), ("d", d, 1), ("V", V, 2)):
        check_int(name, v, minimum=low)
    g = rng if rng is not None else np.random.default_rng(seed)
    H = g.standard_normal((m, d))
    T = g.standard_normal((V, d))
    y = np.argmax(H @ T.T, axis=1)
    C = np.zeros((m, V), dtype=np.int64)
    C[np.arange(m), y] = 1
    return NTPInstance.from_counts(H, C, name=f"teacher seed={seed}")
