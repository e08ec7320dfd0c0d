r"""The closed-form dual block update of one context (``math.md``, "Dual of the NTP-SVM").

Fix every dual block but context j's. With token classes of sizes :math:`n_c` (see
:mod:`ntpcert.solve.structured.classes`), the logits of context j without its own block are
:math:`g = W h_j - \|h_j\|^2 b_j` and :math:`c = \|h_j\|^2 > 0`. Maximising the dual over
:math:`b_j` subject to :math:`\sum_c n_c b_{c,j} = 0` and :math:`b_{c,j} \le 0` off the support gives

.. math:: b_{c,j} = -\frac{g_c + \mu}{c} \;(c \in S_j), \qquad
          b_{c,j} = \min\Bigl(0, -\frac{1 + g_c + \mu}{c}\Bigr) \;(c \notin S_j),

where :math:`\mu` is the root of the increasing piecewise-linear

.. math:: \varphi(\mu) = \sum_{c \in S_j} n_c (g_c + \mu) + \sum_{c \notin S_j} n_c (1 + g_c + \mu)_+ .

**Root.** :math:`\varphi` is convex, increasing and piecewise linear, so Newton's method converges
monotonically from any point right of the root and reaches it after finitely many steps; from a point
left of it the first step lands right of it. Each step freezes the active set
:math:`A(\mu) = \{c \notin S_j : 1 + g_c + \mu > 0\}` and solves the linear piece:
:math:`\mu \leftarrow -(\sum_{S_j} n_c g_c + \sum_{A(\mu)} n_c(1+g_c)) / (\sum_{S_j} n_c + \sum_{A(\mu)} n_c)`.
Started from the previous root of the same context (a warm start), it usually stops after one to
three O(C) passes; otherwise the remaining candidates are sorted.
:math:`\mu_0 = -\sum_{S_j} n_c g_c / \sum_{S_j} n_c` (no off-support term)
is always right of the root and is the cold start.

After the update the logits of context j equal :math:`-\mu` on :math:`S_j` and are at most :math:`-\mu - 1`
off it: context j's constraints (6a), (6b) hold exactly.
"""

from __future__ import annotations

import numpy as np


#: Newton steps before the root is found by sorting the remaining candidates (after one step the
#: iterate is right of the root, so the classes still active then contain the final active set).
NEWTON_STEPS = 3


def block_update(g: np.ndarray, support: np.ndarray, off: np.ndarray, sizes: np.ndarray | None,
                 support_weight: float, c: float, mu_start: float | None = None) -> tuple[np.ndarray, float]:
    r"""The maximiser :math:`b_j` of the dual over context j's block, and the root :math:`\mu`.

    Parameters
    ----------
    g : ndarray of shape (C,)
        Logits of context j without its own block's contribution.
    support : ndarray of int
        Class indices of :math:`S_j`.
    off : ndarray of bool, shape (C,)
        True for classes off the support.
    sizes : ndarray of shape (C,) or None
        Class sizes :math:`n_c`; None when every class is one token.
    support_weight : float
        :math:`\sum_{c \in S_j} n_c`.
    c : float
        :math:`\|h_j\|^2`, positive.
    mu_start : float, optional
        Where Newton's method starts (the previous root of this context); default :math:`\mu_0`.

    Returns
    -------
    (ndarray of shape (C,), float)
    """
    gS = g[support]
    s = float(gS.sum()) if sizes is None else float(sizes[support] @ gS)
    u = g + 1.0
    mu = -s / support_weight if mu_start is None or not np.isfinite(mu_start) else float(mu_start)
    for _ in range(NEWTON_STEPS):
        act = off & (u > -mu)
        if sizes is None:
            new = -(s + float(u[act].sum())) / (support_weight + float(np.count_nonzero(act)))
        else:
            na = sizes[act]
            new = -(s + float(na @ u[act])) / (support_weight + float(na.sum()))
        if new == mu:
            break
        mu = new
    else:
        mu = _root_by_sorting(u, s, off & (u > -mu), sizes, support_weight)
    out = np.minimum(0.0, (u + mu) * (-1.0 / c))
    out[support] = (gS + mu) * (-1.0 / c)
    return out, mu


def _root_by_sorting(u: np.ndarray, s: float, cand_mask: np.ndarray, sizes: np.ndarray | None, weight: float) -> float:
    """The root of :math:`\varphi` when the active classes lie in ``cand_mask``: the largest prefix
    of the candidates sorted by decreasing :math:`u_c` that is consistent."""
    mu = -s / weight
    cand = np.flatnonzero(cand_mask)
    if cand.size:
        uc = u[cand]
        order = np.argsort(-uc, kind="stable")
        uc = uc[order]
        if sizes is None:
            mus = -(s + np.cumsum(uc)) / (weight + np.arange(1, uc.size + 1))
        else:
            nc = sizes[cand][order]
            mus = -(s + np.cumsum(nc * uc)) / (weight + np.cumsum(nc))
        ok = np.flatnonzero(uc + mus > 0)
        if ok.size:
            mu = float(mus[ok[-1]])
    return mu
