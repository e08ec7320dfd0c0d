r"""The limits of an instance whatever its separability: the split into separable pairs P and
non-separable pairs N, W_fin and L* (:mod:`ntpcert.solve.finite_limit`) and W^mm_P, as the commands
report them (``limits``, ``compare``, ``trajectory``, ``explain``).

**Where the split comes from.** :func:`_split_pairs` is the one place that computes N. It returns
``(nonseparable, why)``: an int64 array of shape (n_N, 2) of rows (j, v), or None with the reason the
split is undetermined. It is :func:`ntpcert.solve.split.nonseparable_split`, one LP on the classes of
interchangeable tokens,

.. math::
    \max \sum_i t_i \quad\text{over } D\in\mathbb R^{V\times d},\ 0\le t\le 1, \qquad
    A_{eq}\,\mathrm{vec}(D) = 0,\quad A_{mar}\,\mathrm{vec}(D)\ge t,

whose optimum has :math:`t_i = 1` exactly on P and :math:`t_i = 0` on N; an LP past
:data:`SPLIT_LP_MAX_NONZEROS` non-zeros, or one HiGHS does not solve within its iteration budget, gives
None ("undetermined", naming why). These float pairs feed the float limits (W_fin, W^mm_P); the exact
split of a certificate (:mod:`ntpcert.exact.split`) checks its own. Separable data (the float or exact
verdict says so) have N = ∅ and need no LP (:func:`split_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.finite_limit import FiniteLimit, extended_pattern, finite_limit, solve_mm_p_system

__all__ = ["SPLIT_LP_MAX_NONZEROS", "NonseparableLimits", "nonseparable_limits", "nonseparable_weight",
           "pair_groups", "split_for", "split_of"]

#: The float split LP is built only up to this many non-zeros of its constraint matrix (2d per row).
SPLIT_LP_MAX_NONZEROS = 2_000_000


def _split_pairs(instance: NTPInstance) -> tuple[np.ndarray | None, str]:
    """N of ``instance`` as rows (j, v), or None and why it is undetermined (module doc)."""
    _, N, note = split_of(instance)
    return N, note


def split_of(instance: NTPInstance):
    """``(split, N, note)``: the float :class:`~ntpcert.solve.split.Split` itself (for its :math:`D_P`, which
    the excess bracket uses), N as rows (j, v) or None, and how N was found or why it is undetermined."""
    from ntpcert.solve.split import nonseparable_split

    split = nonseparable_split(instance, max_nonzeros=SPLIT_LP_MAX_NONZEROS)
    if not split.ok:
        return split, None, f"undetermined: {split.reason}"
    return split, split.nonseparable, f"the split LP on {split.class_sizes.size} token classes (HiGHS)"


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
        nu = inst.multiplicity()  # a token standing for several counts each of their pairs
        q = inst.m * int(nu.sum()) - sum(int(nu[s].sum()) for s in inst.supports)
        out: dict[str, Any] = {"split": self.split_note}
        if self.nonseparable is None:
            out.update({"separable_pairs": None, "nonseparable_pairs": None})
        else:
            out.update({"separable_pairs": q - int(nu[self.nonseparable[:, 1]].sum()),
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
    lim, error = None, None
    try:
        lim = finite_limit(instance, N)
    except SolverError as e:
        error = str(e)
    sol, err = None, None
    if svm:
        try:
            system = lim.system if lim is not None else KeslerSystem.build(extended_pattern(instance, N))
            sol = solve_mm_p_system(system, solver=solver, **(svm_options or {}))
        except (InfeasibleError, SolverError) as e:
            err = f"W^mm_P not solved: {e}"
        if sol is None and err is None:
            err = "P is empty: every out-of-support pair is non-separable, W^mm_P is not defined"
    return NonseparableLimits(instance, N, note, lim, sol, error=error, svm_error=err)


def pair_groups(instance: NTPInstance, nonseparable: np.ndarray) -> list[dict[str, Any]]:
    r"""The non-separable pairs grouped by token pair (z, v): z a support token of context j and v a token
    with (j, v) in N (no direction of the recession cone can lift z over v after j). A pair (j, v) with
    :math:`|S_j| = k` belongs to the k token pairs (z, v), z in :math:`S_j`, and carries weight
    :math:`\pi_j p_{j,z}` into each: how often the data show z after a context where v cannot be told
    apart from it. So a pair's weights over its k groups sum to :math:`\pi_j`, and the weights of all
    groups sum to N's weight :math:`\sum_{(j, v)\in N}\pi_j` (:func:`nonseparable_weight`).

    Each item: ``support_token`` (z), ``token`` (v), ``contexts`` (the ids j, largest
    :math:`\pi_j p_{j,z}` first) and ``weight``; the heaviest groups first (ties: more contexts, then
    z, then v)."""
    N = np.asarray(nonseparable, dtype=np.int64).reshape(-1, 2)
    if N.shape[0] == 0:
        return []
    P, pi, V = np.asarray(instance.probs, dtype=np.float64), np.asarray(instance.weights, dtype=np.float64), instance.V
    rows_j, rows_z = np.nonzero(P > 0)  # the support entries, sorted by context
    starts = np.searchsorted(rows_j, N[:, 0], side="left")
    counts = np.searchsorted(rows_j, N[:, 0], side="right") - starts
    offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    idx = np.repeat(starts, counts) + offs
    J, Z, Vv = rows_j[idx], rows_z[idx], np.repeat(N[:, 1], counts)
    w = pi[J] * P[J, Z]
    keys, inv = np.unique(Z.astype(np.int64) * V + Vv, return_inverse=True)
    weight = np.bincount(inv, weights=w, minlength=keys.size)
    order = np.lexsort((J, -w, inv))  # by group, then its heaviest contexts first
    bounds = np.searchsorted(inv[order], np.arange(keys.size + 1))
    items = [{"support_token": int(k // V), "token": int(k % V), "contexts": J[order[bounds[g]:bounds[g + 1]]].tolist(),
              "weight": float(weight[g])} for g, k in enumerate(keys.tolist())]
    items.sort(key=lambda it: (-it["weight"], -len(it["contexts"]), it["support_token"], it["token"]))
    return items


def nonseparable_weight(instance: NTPInstance, nonseparable: np.ndarray) -> float:
    r"""N's weight :math:`\sum_{(j, v)\in N}\pi_j`: each non-separable pair weighs its context's frequency."""
    N = np.asarray(nonseparable, dtype=np.int64).reshape(-1, 2)
    return float(np.asarray(instance.weights, dtype=np.float64)[N[:, 0]].sum()) if N.shape[0] else 0.0
