r"""A checkpoint series: each checkpoint's decoder against the limits of its own h, and how fast the
instance itself moves.

``compare`` of one decoder fixes the instance (one H) and measures W against its limits; along a
training run both :math:`H_t` (the last layer's h of every context) and :math:`W_t` change, and so do
the limits. For checkpoints :math:`t = 1, \dots, T` read one at a time on the same corpus and
contexts (the same tokenizer), row t holds:

* the verdicts and limits of checkpoint t's own instance and its decoder's distance from them, exactly
  as ``compare CORPUS --model DIR_t`` gives them (:func:`compare_model`: the full vocabulary's instance
  or the merged one, :func:`~ntpcert.dynamics.compare.compare_model_merged`, the non-separable limits
  F_N, W_fin, W^mm_P where the data are not separable), and the sizes of those limits: ``W_star_norm``
  (:math:`\|W^*\|`, or :math:`\|W_{fin}\|`), ``W_mm_norm`` (:math:`\|W^{mm}\|` or :math:`\|W^{mm}_P\|`,
  null without one), ``nonseparable_pairs`` (the full vocabulary's, null when separable or undetermined);
* the motion of the instance: ``h_change`` :math:`\|H_t-H_{t-1}\|_F`, ``h_change_rel`` (over
  :math:`\|H_{t-1}\|_F`), ``h_change_max_row`` :math:`\max_j\|h^t_j-h^{t-1}_j\|` and ``h_norm``
  :math:`\|H_t\|_F` (h with the head's bias coordinate, a constant 1, when the head has a bias: it
  cancels in the changes); and of the decoder as exported, ``raw_W_change``
  :math:`\|W_t-W_{t-1}\|_F` and ``raw_W_change_rel`` (``raw``: they see the directions no prediction
  does, :mod:`ntpcert.dynamics.invariance`); null in the first row;
* the supports' margins of checkpoint t's decoder on its own h (:func:`context_margins`):
  :math:`\mu_j=\min_{z\in S_j}(Wh_j)_z-\max_{v\notin S_j}(Wh_j)_v` over the model's whole vocabulary,
  their minimum ``margin_min`` (compare's ``margin``), median ``margin_median`` and the fraction of
  contexts the decoder separates, ``margin_positive`` (:math:`\mu_j>0`); contexts whose support is the
  whole vocabulary have no margin and are not counted.

Only the previous checkpoint's H and W are kept between rows, and each row keeps compare's JSON of its
checkpoint (no instance, no limits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ntpcert.dynamics.compare import DecoderReport, compare_decoder, compare_model_merged, finite_json, model_instance
from ntpcert.errors import InputError

__all__ = ["CHECKPOINT_COLUMNS", "CheckpointRow", "CheckpointSeries", "checkpoint_series", "compare_model",
           "context_margins"]

#: The columns of the series' table, in order (:meth:`CheckpointRow.values`; ``path`` ends each row).
CHECKPOINT_COLUMNS = ("step", "compatible", "separable", "entropy", "loss", "excess_loss", "excess_over_bracket",
                      "L_star", "loss_over_L_star", "rel_dist_F", "cos_perp_mm", "norm_matched_distance",
                      "W_star_norm", "W_mm_norm", "nonseparable_pairs", "margin_min", "margin_median",
                      "margin_positive", "normalized_margin", "norm", "h_norm", "h_change", "h_change_rel",
                      "h_change_max_row", "raw_W_change", "raw_W_change_rel", "nc1", "nc2", "nc3", "nc4")

#: The columns taken from compare's JSON of the checkpoint.
_COMPARE_KEYS = ("compatible", "separable", "entropy", "loss", "excess_loss", "excess_over_bracket", "L_star",
                 "loss_over_L_star", "rel_dist_F", "cos_perp_mm", "norm_matched_distance", "normalized_margin", "norm")

#: Contexts per block of logits in :func:`context_margins`.
BLOCK_ROWS = 512


def context_margins(H: np.ndarray, W: np.ndarray, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""Each context's support margin :math:`\mu_j=\min_{z\in S_j}(Wh_j)_z-\max_{v\notin S_j}(Wh_j)_v`.

    Parameters
    ----------
    H : ndarray of shape (m, d)
    W : ndarray of shape (V, d)
        The decoder over the model's whole vocabulary.
    rows, tokens : ndarray of shape (nnz,)
        The supports: token ``tokens[i]`` is in :math:`S_{rows[i]}` (the positive counts).

    Returns
    -------
    ndarray of shape (m,)
        NaN where :math:`S_j` is the whole vocabulary (no margin). Computed a block of contexts at a time.
    """
    m, V = H.shape[0], W.shape[0]
    out = np.full(m, np.nan)
    rows = np.asarray(rows, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=np.int64)
    for s in range(0, m, BLOCK_ROWS):
        e = min(s + BLOCK_ROWS, m)
        Z = np.asarray(H[s:e], dtype=np.float64) @ np.asarray(W, dtype=np.float64).T  # (rows, V)
        sel = (rows >= s) & (rows < e)
        r, t = rows[sel] - s, tokens[sel]
        zmin = np.full(e - s, np.inf)
        np.minimum.at(zmin, r, Z[r, t])
        Z[r, t] = -np.inf
        out_max = Z.max(axis=1)
        proper = np.bincount(r, minlength=e - s) < V
        out[s:e] = np.where(proper, zmin - out_max, np.nan)
    return out


def compare_model(data: Any, *, max_entries: int | None = None, solver: str | None = None,
                  separability_solver: str | None = None) -> DecoderReport:
    """``compare CORPUS --model DIR`` of a :class:`~ntpcert.instance.lm.ModelData` (read with its unseen
    tokens merged) and its own decoder: the instance :func:`~ntpcert.dynamics.compare.model_instance`
    chooses, its limits and the decoder against them."""
    from ntpcert.dynamics.trajectory import Limits

    inst, merge = model_instance(data, max_entries=max_entries)
    source = data.to_json()
    if merge is not None:
        return compare_model_merged(inst, merge, data.decoder, frequency=data.token_frequency, source=source,
                                    separability_solver=separability_solver, solver=solver)
    lim = Limits.compute(inst) if solver is None else Limits.compute(inst, solver=solver)
    return compare_decoder(inst, lim, data.decoder, frequency=data.token_frequency, source=source)


def _limit_sizes(rep: DecoderReport) -> dict[str, Any]:
    """``W_star_norm``, ``W_mm_norm``, ``nonseparable_pairs`` and which limits they are (``limits``)."""
    lim, merge = rep.limits, rep.merge
    Ws = lim.W_star if merge is None else lim.W_star[: merge.observed.size]  # 0 on the unseen tokens
    split = lim.split
    pairs = None
    if split is not None and split.nonseparable is not None:
        N = split.nonseparable
        pairs = int(len(N) if merge is None else len(merge.expand_pairs(N)))
    if split is None:
        kind = "W*, F, W^mm" if lim.svm is not None else "W*, F (no W^mm)"
    elif split.limit is not None:
        kind = "W_fin, F_N, W^mm_P (not separable)"
    else:
        kind = "W*, F of (4) (not separable; W_fin and W^mm_P not computed: see notes.null)"
    return {"W_star_norm": float(np.linalg.norm(Ws)), "W_mm_norm": None if lim.svm is None else float(lim.svm.norm),
            "nonseparable_pairs": pairs, "limits": kind}


@dataclass(frozen=True, eq=False)
class CheckpointRow:
    """One checkpoint of the series.

    Attributes
    ----------
    step : int
    path : str
        The checkpoint's model directory.
    compare : dict
        ``compare CORPUS --model path --json`` of the checkpoint (nulls for non-finite numbers).
    limits : dict
        ``W_star_norm``, ``W_mm_norm``, ``nonseparable_pairs``, ``limits`` (which ones; module doc).
    motion : dict
        ``h_norm``, ``h_change``, ``h_change_rel``, ``h_change_max_row``, ``raw_W_change``,
        ``raw_W_change_rel`` (None in the first row).
    margins : dict
        ``margin_min``, ``margin_median``, ``margin_positive`` and ``contexts`` (those with a margin).
    """

    step: int
    path: str
    compare: dict[str, Any]
    limits: dict[str, Any]
    motion: dict[str, Any]
    margins: dict[str, Any]

    def values(self) -> dict[str, Any]:
        """The row of the table: :data:`CHECKPOINT_COLUMNS` (None where null) and ``path``."""
        out: dict[str, Any] = {"step": self.step}
        out.update({k: self.compare.get(k) for k in _COMPARE_KEYS})
        out.update({k: self.limits[k] for k in ("W_star_norm", "W_mm_norm", "nonseparable_pairs")})
        out.update({k: self.margins[k] for k in ("margin_min", "margin_median", "margin_positive")})
        out.update(self.motion)
        nc = self.compare.get("nc") or {}  # the neural-collapse headline numbers, where compare gave them
        out.update({k: nc.get(k) for k in ("nc1", "nc2", "nc3", "nc4")})
        row = {k: out.get(k) for k in CHECKPOINT_COLUMNS}
        row["path"] = self.path
        return finite_json(row)

    def to_json(self) -> dict[str, Any]:
        return finite_json({"step": self.step, "path": self.path, **self.compare, "limits_sizes": self.limits,
                            "motion": self.motion, "margins": self.margins})


@dataclass(frozen=True, eq=False)
class CheckpointSeries:
    """The rows of a checkpoint series, in series order.

    Attributes
    ----------
    rows : tuple of CheckpointRow
    steps_from : str
        ``"folder names"`` (each step the trailing integer of its folder's name) or ``"positions"``.
    m, d, V : int
        The contexts, the width of h (with the bias coordinate, if any) and the model's vocabulary.
    notes : dict of str to str
    """

    rows: tuple[CheckpointRow, ...]
    steps_from: str
    m: int
    d: int
    V: int
    notes: dict[str, str] = field(default_factory=dict)

    def to_json(self, *, figure: str | None = None, table: str | None = None) -> dict[str, Any]:
        return finite_json({"checkpoints": [r.to_json() for r in self.rows], "steps_from": self.steps_from,
                            "m": self.m, "d": self.d, "V": self.V, "figure": figure, "table": table,
                            "notes": dict(self.notes)})


def _motion(H: np.ndarray, W: np.ndarray, prev: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
    h_norm = float(np.linalg.norm(H))
    if prev is None:
        return {"h_norm": h_norm, "h_change": None, "h_change_rel": None, "h_change_max_row": None,
                "raw_W_change": None, "raw_W_change_rel": None}
    H0, W0 = prev
    D = H - H0
    dh, h0 = float(np.linalg.norm(D)), float(np.linalg.norm(H0))
    dw, w0 = float(np.linalg.norm(W - W0)), float(np.linalg.norm(W0))
    nan = float("nan")
    return {"h_norm": h_norm, "h_change": dh, "h_change_rel": dh / h0 if h0 > 0 else nan,
            "h_change_max_row": float(np.sqrt((D * D).sum(axis=1)).max()) if D.size else 0.0,
            "raw_W_change": dw, "raw_W_change_rel": dw / w0 if w0 > 0 else nan}


def _margins(data: Any) -> dict[str, Any]:
    c = data.counts
    mu = context_margins(data.instance.embeddings, data.decoder, c.rows, c.tokens)
    ok = mu[np.isfinite(mu)]
    if not ok.size:
        nan = float("nan")
        return {"margin_min": nan, "margin_median": nan, "margin_positive": nan, "contexts": 0}
    return {"margin_min": float(ok.min()), "margin_median": float(np.median(ok)),
            "margin_positive": float(np.mean(ok > 0)), "contexts": int(ok.size)}


def checkpoint_series(checkpoints: Sequence[Any], load: Callable[[Any], Any], *, steps_from: str,
                      max_entries: int | None = None, solver: str | None = None,
                      separability_solver: str | None = None, progress: bool = False,
                      decorate: Callable[[DecoderReport, Any], DecoderReport] | None = None) -> CheckpointSeries:
    """Read each checkpoint with ``load`` (a :class:`~ntpcert.instance.lm.ModelData`, its unseen tokens
    merged), one at a time, and make its row (module doc).

    Parameters
    ----------
    checkpoints : sequence of Checkpoint
        :class:`~ntpcert.instance.lm.series.Checkpoint` (``path``, ``step``), in series order.
    load : callable
        Checkpoint → ModelData.
    steps_from : str
        Where the steps come from, for the report.
    decorate : callable, optional
        ``(report, data) -> report``: what a layer above adds to each checkpoint's compare, as the single
        compare adds it (the CLI: the neural-collapse numbers, ``nc``).

    Raises
    ------
    InputError
        A checkpoint without a decoder, or whose contexts (the tokenised corpus) or width d differ from
        the first's.
    """
    from ntpcert.util.progress import progress_bar

    if not checkpoints:
        raise InputError("--model: no checkpoints to compare")
    rows: list[CheckpointRow] = []
    prev: tuple[np.ndarray, np.ndarray] | None = None
    first: tuple[Any, tuple, int] | None = None
    V = 0
    bar = progress_bar(progress, total=len(checkpoints), desc="checkpoints", unit="ckpt")
    try:
        for ck in checkpoints:
            bar.set_postfix_str(f"step {ck.step}: reading h")
            data = load(ck)
            if data.decoder is None:
                raise InputError(f"--model: checkpoint {ck.path!r}: {data.decoder_note}")
            H = data.instance.embeddings
            if first is None:
                first = (ck.path, data.counts.contexts, H.shape[1])
            elif data.counts.contexts != first[1]:
                raise InputError(f"--model: checkpoint {ck.path!r} cuts the corpus into other contexts than "
                                 f"{first[0]!r} ({data.counts.m} vs {len(first[1])}): a series needs one tokenizer")
            elif H.shape[1] != first[2]:
                raise InputError(f"--model: checkpoint {ck.path!r} has h of width d = {H.shape[1]}, {first[0]!r} "
                                 f"d = {first[2]}: a series compares checkpoints of one architecture")
            bar.set_postfix_str(f"step {ck.step}: limits")
            rep = compare_model(data, max_entries=max_entries, solver=solver,
                                separability_solver=separability_solver)
            if decorate is not None:
                rep = decorate(rep, data)
            W = np.asarray(data.decoder, dtype=np.float64)
            one = {k: v for k, v in rep.to_json().items() if k not in ("figure", "table")}  # the series' own
            rows.append(CheckpointRow(int(ck.step), ck.path, one, _limit_sizes(rep), _motion(H, W, prev),
                                      _margins(data)))
            prev, V = (H, W), data.V
            del rep, data
            bar.update(1)
    finally:
        bar.close()
    m, d = len(first[1]), first[2]
    by_name = steps_from == "folder names"
    notes = {"steps": ("each step is the trailing integer of its checkpoint folder's name" if by_name
                       else "each step is the checkpoint's position in the series (not every folder name ends in a "
                            "distinct integer)"),
             "motion": "h_change: ||H_t - H_{t-1}||_F over the same m contexts; raw_W_change: ||W_t - W_{t-1}||_F of "
                       "the decoders as exported (with the directions no prediction sees); null in the first row",
             "margins": "mu_j = min_{z in S_j} (W h_j)_z - max_{v not in S_j} (W h_j)_v over the whole vocabulary; "
                        "margin_positive: the fraction of contexts with mu_j > 0"}
    return CheckpointSeries(tuple(rows), steps_from, m, d, V, notes)
