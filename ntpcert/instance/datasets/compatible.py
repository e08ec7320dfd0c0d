r"""Tall, NTP-compatible count data whose log-odds are integer combinations of log 2 and log 3 (not a
CLI built-in).

Embeddings with entries in {-1, 0, 1} and two integer teachers :math:`T_1, T_2 \in \{-1,0,1\}^{V\times d}`
give integer logits :math:`l_1 = HT_1^\top`, :math:`l_2 = HT_2^\top`; context j has a random support
:math:`S_j` and counts :math:`c_{j,z} = 2^{l_{1,jz} - \min_{S_j} l_1}\,3^{l_{2,jz} - \min_{S_j} l_2}`, so
:math:`W = \log(2)T_1 + \log(3)T_2` solves (4) exactly. With ``gaussian``, Gaussian embeddings and
equal counts (b = 0, W = 0). With many contexts and few tokens the equality rows outnumber the
columns they use: the setting of :func:`ntpcert.exact.compatibility.check_compatibility_by_columns`.
"""

from __future__ import annotations

import numpy as np

from ntpcert.instance.model import NTPInstance

__all__ = ["integer_log_odds"]


def integer_log_odds(rng: np.random.Generator, m: int, d: int, V: int, *, gaussian: bool = False) -> NTPInstance:
    """The instance (module doc): m contexts, embedding dimension d, V tokens, supports of 1 to V
    tokens drawn with ``rng``."""
    if gaussian:
        H = rng.standard_normal((m, d))
        L1 = L2 = np.zeros((m, V), dtype=np.int64)
    else:
        H = rng.integers(-1, 2, (m, d)).astype(float)
        L1 = (H @ rng.integers(-1, 2, (V, d)).T).astype(np.int64)
        L2 = (H @ rng.integers(-1, 2, (V, d)).T).astype(np.int64)
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, V + 1)), replace=False)
        C[j, S] = (2 ** (L1[j, S] - L1[j, S].min())) * (3 ** (L2[j, S] - L2[j, S].min()))
    kind = "equal counts" if gaussian else "integer log-odds"
    return NTPInstance.from_counts(H, C, name=f"{kind} m={m} d={d} V={V}")
