r"""W* in closed form when every context has its own coordinate (one non-zero per row of H).

When row j of H has one non-zero :math:`s_j` in column :math:`c_j`, and the :math:`c_j` are distinct
(one-hot context embeddings: H is a permutation of the identity), the logits of context j are
:math:`Z_{:,j} = s_j\,W_{:,c_j}` and the constraints of (4) on different contexts touch different
columns of W. The minimum-norm solution therefore splits by context (our derivation):
:math:`\|W\|_F^2 = \sum_j \|Z_{:,j}\|^2 / s_j^2` plus the columns no context uses (zero at the
optimum), and the shortest :math:`Z_{:,j}` with fixed differences
:math:`Z_{z,j} - Z_{z_j,j} = \log(p_{j,z}/p_{j,z_j})` on :math:`S_j` is

.. math:: Z^*_{z,j} = \log p_{j,z} - \frac{1}{k_j}\sum_{z' \in S_j} \log p_{j,z'} \ (z \in S_j), \qquad
          Z^*_{v,j} = 0 \ (v \notin S_j),

so :math:`W^*_{:,c_j} = Z^*_{:,j} / s_j`. It costs O(r) with no solve. This is W* of the paper (the
unique solution of (4) in F) because (4) is solvable here (Lemma 1) and the minimum-norm solution lies
in F.
"""

from __future__ import annotations

import numpy as np

from ntpcert.instance.onehot import onehot_columns
from ntpcert.rows.kesler import KeslerSystem


def onehot_w_star(system: KeslerSystem, columns: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W* of shape (V, d) in closed form (module doc) and the residual vector :math:`A_{eq} W^* - b` of
    shape (r,), computed through the logits (rounding only).

    Parameters
    ----------
    system : KeslerSystem
    columns, scales : ndarray of shape (m,)
        From :func:`onehot_columns` of the instance's embeddings.
    """
    inst = system.instance
    m = inst.m
    W = np.zeros((inst.V, inst.d))
    b = system.log_odds()
    ctx, tok, anc = system.eq_context, system.eq_token, system.eq_anchor
    k = inst.support_sizes.astype(np.float64)
    mean = np.bincount(ctx, weights=b, minlength=m) / k  # the anchor's log-odds is 0
    W[tok, columns[ctx]] = (b - mean[ctx]) / scales[ctx]
    has = np.flatnonzero(inst.support_sizes > 1)
    W[inst.anchors()[has], columns[has]] = -mean[has] / scales[has]
    res = scales[ctx] * (W[tok, columns[ctx]] - W[anc, columns[ctx]]) - b
    return W, res




#: The closed form replaces the general fit (whose subspace also projects onto F) only on systems with
#: at least this many unknowns V·d, where that fit is the bulk of the run (25 s at V = d = 2,212).
CLOSED_FORM_MIN_VARS = 1_000_000


def onehot_fit(system: KeslerSystem):
    """W* in closed form (module doc), as a :class:`~ntpcert.rows.subspace.LeastSquaresFit`, for a system
    whose (4) is already proved (e.g. by Lemma 1) and whose H has one non-zero per row in distinct
    columns with at least :data:`CLOSED_FORM_MIN_VARS` unknowns; None otherwise (the general fit applies)."""
    from ntpcert.rows.subspace import LeastSquaresFit

    inst = system.instance
    if inst.V * inst.d < CLOSED_FORM_MIN_VARS:
        return None
    found = inst.onehot_columns
    if found is None:
        return None
    W, res = onehot_w_star(system, *found)
    b = system.log_odds()
    residual = float(np.linalg.norm(res))
    return LeastSquaresFit(residual, residual / max(1.0, float(np.linalg.norm(b))), W, system.n_eq,
                           solver={"method": "closed-form", "why": "one non-zero per row of H in distinct "
                                   "columns: W* splits by context (ntpcert.rows.onehot)", "residual": residual})


__all__ = ["CLOSED_FORM_MIN_VARS", "onehot_columns", "onehot_fit", "onehot_w_star"]
