r"""The limits of an instance whatever its separability: the split into separable pairs P and
non-separable pairs N, W_fin and L* (:mod:`ntpcert.solve.finite_limit`) and W^mm_P, as the commands
report them (``limits``, ``compare``, ``trajectory``, ``explain``).

**Where the split comes from.** :func:`_split_pairs` is the one place that computes N. It returns
``(nonseparable, why)``: an int64 array of shape (n_N, 2) of rows (j, v), or None with the reason the
split is undetermined. Its present body is a plain float LP (HiGHS through
:func:`scipy.optimize.linprog`), for small instances only:

.. math::
    \max \sum_i t_i \quad\text{over } D\in\mathbb R^{V\times d},\ 0\le t\le 1, \qquad
    A_{eq}\,\mathrm{vec}(D) = 0,\quad A_{mar}\,\mathrm{vec}(D)\ge t.

Its optimum has :math:`t_i = 1` exactly on P (a single :math:`D_P` is positive on all of P, scaled to
margins ≥ 1) and :math:`t_i = 0` on N (no D in K is positive there), so the optimal t is unique and a
pair is classed by :math:`t_i > 1/2`. A float optimum with some :math:`t_i` further than
:data:`SPLIT_T_TOL` from 0 and 1, a solver that does not report an optimum, or an LP past
:data:`SPLIT_LP_MAX_NONZEROS` non-zeros gives None ("undetermined", naming why). This is a float
classification, not a certificate: the exact split (with rational :math:`D_P` and y) replaces it.
Separable data (the float or exact verdict says so) have N = ∅ and need no LP (:func:`split_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.solve.finite_limit import FiniteLimit, finite_limit, solve_mm_p

__all__ = ["SPLIT_LP_MAX_NONZEROS", "SPLIT_T_TOL", "NonseparableLimits", "nonseparable_limits", "pair_groups",
           "split_for"]

#: The float split LP is built only up to this many non-zeros of its constraint matrix (2d per row).
SPLIT_LP_MAX_NONZEROS = 2_000_000
#: A float LP optimum classes a pair only when its t is within this of 0 or 1.
SPLIT_T_TOL = 1e-6


def _split_pairs(instance: NTPInstance) -> tuple[np.ndarray | None, str]:
    """N of ``instance`` as rows (j, v), or None and why it is undetermined (module doc)."""
    from ntpcert.rows.kesler import KeslerSystem

    system = KeslerSystem.build(instance)
    q, r, V, d = system.n_margin, system.n_eq, instance.V, instance.d
    if q == 0:
        return np.zeros((0, 2), dtype=np.int64), "no out-of-support pairs"
    nnz = 2 * d * (q + r) + q
    if nnz > SPLIT_LP_MAX_NONZEROS:
        return None, (f"undetermined: the float split LP would have {nnz:,} non-zeros, more than the "
                      f"{SPLIT_LP_MAX_NONZEROS:,} it is built for")
    import scipy.sparse as sp
    from scipy.optimize import linprog

    A_mar = system.margin_matrix()
    A_ub = sp.hstack([-A_mar, sp.identity(q, format="csr")], format="csr")
    A_eq = sp.hstack([system.eq_matrix(), sp.csr_matrix((r, q))], format="csr") if r else None
    c = np.concatenate([np.zeros(V * d), -np.ones(q)])
    bounds = [(None, None)] * (V * d) + [(0.0, 1.0)] * q
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(q), A_eq=A_eq, b_eq=np.zeros(r) if r else None, bounds=bounds,
                  method="highs")
    if res.status != 0 or res.x is None:
        return None, f"undetermined: the float split LP (HiGHS) stopped with status {res.status} ({res.message})"
    t = res.x[V * d:]
    unsure = (t > SPLIT_T_TOL) & (t < 1.0 - SPLIT_T_TOL)
    if unsure.any():
        i = int(np.flatnonzero(unsure)[0])
        return None, (f"undetermined: the float split LP left {int(unsure.sum())} pair(s) between 0 and 1 (first: "
                      f"context {int(system.mar_context[i])}, token {int(system.mar_token[i])}, t = {t[i]:.3g})")
    nsep = t < 0.5
    N = np.stack([system.mar_context[nsep], system.mar_token[nsep]], axis=1).astype(np.int64)
    return N, "float split LP (HiGHS)"


def split_for(instance: NTPInstance, separable: bool | None = None) -> tuple[np.ndarray | None, str]:
    """N for ``instance``: empty without an LP when ``separable`` is True (a verdict already shown),
    else :func:`_split_pairs`."""
    if separable is True:
        return np.zeros((0, 2), dtype=np.int64), "separable: N is empty"
    return _split_pairs(instance)


@dataclass(frozen=True, eq=False)
class NonseparableLimits:
    """The split, W_fin, L* and W^mm_P of one instance.

    Attributes
    ----------
    instance : NTPInstance
    nonseparable : ndarray of shape (n_N, 2), or None
        N as rows (j, v); None when the split is undetermined (``split_note`` says why).
    split_note : str
    limit : FiniteLimit or None
        W_fin and L* (None when the split is undetermined or the Newton solve was refused, ``error``).
    svm : SVMSolution or None
        W^mm_P (None when P is empty or its solve failed, ``svm_error``).
    """

    instance: NTPInstance
    nonseparable: np.ndarray | None
    split_note: str
    limit: FiniteLimit | None = None
    svm: Any = None
    error: str | None = None
    svm_error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def W_fin(self) -> np.ndarray | None:
        return None if self.limit is None else self.limit.W_fin

    @property
    def W_mm(self) -> np.ndarray | None:
        return None if self.svm is None else self.svm.W

    def to_json(self) -> dict[str, Any]:
        """The ``limit`` object of ``limits --json``: ``separable_pairs`` (how many), ``nonseparable_pairs``
        (the list of [j, v]), ``L_star``, ``dim_F_N``, ``W_fin_residual``, ``W_mm_P_norm`` and how each was
        computed."""
        inst = self.instance
        q = int(inst.m * inst.V - int(inst.support_sizes.sum()))
        out: dict[str, Any] = {"split": self.split_note}
        if self.nonseparable is None:
            out.update({"separable_pairs": None, "nonseparable_pairs": None})
        else:
            out.update({"separable_pairs": q - int(len(self.nonseparable)),
                        "nonseparable_pairs": [[int(j), int(v)] for j, v in self.nonseparable]})
        if self.limit is not None:
            out.update(self.limit.to_json())
        else:
            out.update({"L_star": None, "dim_F_N": None, "W_fin_residual": None})
        out["W_mm_P_norm"] = None if self.svm is None else self.svm.norm
        out["svm_P"] = None if self.svm is None else self.svm.to_json()
        if self.error:
            out["error"] = self.error
        if self.svm_error:
            out["svm_P_error"] = self.svm_error
        return out


def nonseparable_limits(instance: NTPInstance, *, separable: bool | None = None, nonseparable: Any = None,
                        solver: str = "auto", svm: bool = True, svm_options: dict | None = None) -> NonseparableLimits:
    """The split (given as ``nonseparable``, or :func:`split_for`), W_fin and L*, and (``svm``) W^mm_P by
    ``solver``. Nothing raises for an undetermined split or a refused solve: the fields say why."""
    if nonseparable is None:
        N, note = split_for(instance, separable)
    else:
        N, note = np.asarray(nonseparable, dtype=np.int64).reshape(-1, 2), "given"
    if N is None:
        return NonseparableLimits(instance, None, note)
    try:
        lim = finite_limit(instance, N)
    except SolverError as e:
        return NonseparableLimits(instance, N, note, error=str(e))
    sol, err = None, None
    if svm:
        try:
            sol = solve_mm_p(lim, solver=solver, **(svm_options or {}))
        except (InfeasibleError, SolverError) as e:
            err = f"W^mm_P not solved: {e}"
        if sol is None and err is None:
            err = "P is empty: every out-of-support pair is non-separable, W^mm_P is not defined"
    return NonseparableLimits(instance, N, note, lim, sol, svm_error=err)


def pair_groups(instance: NTPInstance, nonseparable: np.ndarray) -> list[dict[str, Any]]:
    """The non-separable pairs grouped by token pair: for each (z, v) with z a support token of the
    context and v its non-separable token, the contexts and their total weight; the most frequent
    groups (largest total :math:`\\pi_j`) first. Each item: ``support``, ``token`` (ids), ``contexts``
    (ids), ``weight``."""
    groups: dict[tuple[tuple[int, ...], int], list[int]] = {}
    for j, v in np.asarray(nonseparable, dtype=np.int64):
        key = (tuple(int(z) for z in instance.support(int(j))), int(v))
        groups.setdefault(key, []).append(int(j))
    items = [{"support": list(k[0]), "token": k[1], "contexts": js,
              "weight": float(np.sum(instance.weights[js]))} for k, js in groups.items()]
    items.sort(key=lambda it: (-it["weight"], -len(it["contexts"]), it["token"]))
    return items
