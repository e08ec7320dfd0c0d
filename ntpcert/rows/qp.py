r"""The NTP-SVM as a conic QP in the standard form shared by the generic backends.

Variables :math:`x = \mathrm{vec}(W)` (order of :mod:`ntpcert.rows.kesler`), objective :math:`\tfrac12 x^\top x`, and

.. math:: \begin{bmatrix} A_{eq} \\ -A_{mar} \end{bmatrix} x + s = \begin{bmatrix} 0 \\ -\mathbf 1\end{bmatrix},
          \quad s \in \{0\}^r \times \mathbb{R}_+^q

(Clarabel's convention). With dual :math:`z = (z_{eq}, z_{mar})`, :math:`z_{mar} \ge 0`, stationarity reads
:math:`x = -A_{eq}^\top z_{eq} + A_{mar}^\top z_{mar}`, so the dual of ``math.md`` is
``a = eq_coefficients(-z_eq) + margin_coefficients(z_mar)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ntpcert.rows.kesler import KeslerSystem

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class QPData:
    """``P`` (n×n, identity), ``A`` ((r+q)×n), ``b`` (r+q,), with ``n_eq = r`` zero-cone rows first."""

    P: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    b: np.ndarray
    n_eq: int
    n_ineq: int


def build_qp(system: KeslerSystem) -> QPData:
    """Stack the Kesler rows into the conic QP above."""
    import scipy.sparse as sp

    n = system.n_vars
    A_eq = system.eq_matrix()
    A_mar = system.margin_matrix()
    A = sp.vstack([A_eq, -A_mar], format="csc")
    b = np.concatenate([np.zeros(system.n_eq), -np.ones(system.n_margin)])
    return QPData(sp.identity(n, format="csc"), np.zeros(n), A, b, system.n_eq, system.n_margin)


def dual_from_cone_multipliers(system: KeslerSystem, z_eq: np.ndarray, z_mar: np.ndarray) -> np.ndarray:
    """Map cone multipliers to the (V, m) dual ``a`` of ``math.md``."""
    return system.eq_coefficients(-np.asarray(z_eq)) + system.margin_coefficients(np.asarray(z_mar))
