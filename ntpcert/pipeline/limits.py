"""What ``ntpcert limits`` writes: W*, W^mm and (on request) an orthonormal basis of F as arrays, with the
summary that describes them, from a float :class:`~ntpcert.pipeline.float_verdicts.Report`. The command
only writes the files; every choice (which arrays, when the basis is too large, the dense rebuild of F on
the sparse path) is made here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: The basis of F is written only when it has at most this many entries (dim F · V · d).
MAX_BASIS_ENTRIES = 50_000_000
#: Every file ``limits`` may write.
OUTPUT_NAMES = ("W_star.npy", "W_mm.npy", "W_fin.npy", "F_basis.npy", "summary.json")


@dataclass(frozen=True)
class LimitFiles:
    """The arrays to write (file name -> array; W* and W^mm of shape (V, d), the basis (dim F, V, d)) and
    the summary JSON object (the report's keys, ``files`` with each shape, and ``F_basis_skipped`` with the
    reason when there is no basis)."""

    arrays: dict[str, np.ndarray]
    summary: dict[str, Any]


def output_names(basis: bool) -> tuple[str, ...]:
    """The files ``limits`` may write, with or without the basis."""
    return OUTPUT_NAMES if basis else tuple(n for n in OUTPUT_NAMES if n != "F_basis.npy")


def with_fit(report: Any) -> Any:
    r"""``report`` (a float :class:`~ntpcert.pipeline.float_verdicts.FloatReport`) with W* fitted where
    ``certify`` left it out (a Farkas ray of (6) found first makes W* moot for the verdicts, but ``limits``
    writes it: the solution of (4) in F when the data are compatible, else a least-squares point).
    F is built ``direct`` (:class:`~ntpcert.rows.subspace.Subspace`: eigh, or the Cholesky factor of
    :math:`A_{eq}A_{eq}^\top` where LSMR would be slow), so W* comes with a small residual."""
    if report.fit.W_star is not None or report.subspace.system.n_eq == 0:
        return report
    import dataclasses

    from ntpcert.rows.subspace import Subspace, least_squares_fit

    sub = Subspace.build(report.subspace.system, method="direct")
    fit = least_squares_fit(sub)
    if fit.dim_F is None and report.fit.dim_F is not None:
        fit = dataclasses.replace(fit, dim_F=report.fit.dim_F)
    return dataclasses.replace(report, subspace=sub, fit=fit)


def limit_files(report, *, basis: bool = False, max_basis_entries: int = MAX_BASIS_ENTRIES,
                general=None, merge=None) -> LimitFiles:
    """The files of ``report`` (a float report computed with the NTP-SVM).

    ``general`` (:class:`~ntpcert.pipeline.nonseparable.NonseparableLimits`, optional) adds the summary's
    ``limit`` object; on data with non-separable pairs also ``W_fin.npy``, and (no NTP-SVM in the report)
    its W^mm_P as ``W_mm.npy``.

    On the sparse (LSMR) path F is known through projections only, so a requested basis rebuilds the
    subspace densely (eigh) first; a basis of more than ``max_basis_entries`` entries is skipped, and the
    summary says why.

    ``merge`` (a :class:`~ntpcert.instance.lm.merge.TokenMerge`: the instance was read through a model with its
    unseen tokens merged, and its NTP-SVMs solved weighted): every array is written over the model's V tokens,
    the representative's row copied to each unseen token (:meth:`~ntpcert.instance.lm.merge.TokenMerge.expand_rows`;
    W*, W_fin and F are 0 there, W^mm and W^mm_P are the full vocabulary's), and the non-separable pairs name
    the model's token ids."""
    inst = report.instance
    V = inst.V if merge is None else merge.V
    summary = report.to_json()
    arrays: dict[str, np.ndarray] = {"W_star.npy": report.fit.W_star}
    if report.svm is not None:
        arrays["W_mm.npy"] = report.svm.W
    if general is not None:
        summary["limit"] = general.to_json()
        if general.W_mm is None and report.svm is not None and general.nonseparable is not None \
                and len(general.nonseparable) == 0:  # N empty: W^mm_P is the report's W^mm
            summary["limit"]["W_mm_P_norm"] = report.svm.norm
            summary["limit"]["svm_P"] = "W^mm (N is empty)"
        nonseparable = general.nonseparable is not None and len(general.nonseparable) > 0
        if general.W_fin is not None and nonseparable:  # on separable data the files stay those of W* and W^mm
            arrays["W_fin.npy"] = general.W_fin
        if report.svm is None and general.W_mm is not None:
            arrays["W_mm.npy"] = general.W_mm
            summary["W_mm_is"] = "W^mm_P, the NTP-SVM of the separable pairs (see limit)"
    if not basis:
        summary["F_basis_skipped"] = "not requested (give --basis)"
    else:
        sub = report.subspace
        if sub.dim is None:
            from ntpcert.rows.subspace import Subspace

            sub = Subspace.build(sub.system, method="eigh")
        size = sub.dim * V * inst.d
        if size <= max_basis_entries:
            arrays["F_basis.npy"] = sub.basis()
        else:
            summary["F_basis_skipped"] = f"dim F * V * d = {size} > {max_basis_entries}"
    if merge is not None:
        arrays = {name: _expand(merge, name, arr) for name, arr in arrays.items()}
        summary.update({"V": merge.V, "V_instance": inst.V, "vocabulary": merge.to_json(),
                        "vocabulary_note": "the arrays have the model's V rows: the instance's representative row "
                                           "copied to each unseen token; W^mm (and W^mm_P) solved with that row "
                                           "weighed by the number of tokens it stands for, so they are the full "
                                           "vocabulary's"})
        lim = summary.get("limit")
        if isinstance(lim, dict) and lim.get("nonseparable_pairs"):
            lim["nonseparable_pairs"] = merge.expand_pairs(np.array(lim["nonseparable_pairs"])).tolist()
    summary["files"] = {name: list(np.shape(arr)) for name, arr in arrays.items()}
    summary["W_star_shape_note"] = "W has shape (V, d); F_basis has shape (dim F, V, d)"
    return LimitFiles(arrays, summary)


def _expand(merge, name: str, arr: np.ndarray) -> np.ndarray:
    """An array of the merged instance over the model's V tokens (the basis along its token axis)."""
    if name == "F_basis.npy":
        return np.ascontiguousarray(np.moveaxis(merge.expand_rows(np.moveaxis(arr, 1, 0)), 0, 1))
    return merge.expand_rows(arr)
