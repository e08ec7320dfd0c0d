r"""A decoder against the limits of its instance: how far a trained W is from W* on F and from the
direction of W^mm off F, overall and per token-frequency bin.

For a decoder :math:`W` (V, d) on an instance with limits (:class:`~ntpcert.dynamics.trajectory.Limits`):

* ``loss`` :math:`\mathrm{CE}(W)` (the mean next-token loss on the contexts) and ``excess_loss``
  :math:`\mathrm{CE}(W)-\mathcal H`, set against the bracket ``[excess_lower, excess_upper]`` on
  :math:`L^*-\mathcal H` (:func:`ntpcert.pipeline.excess_certificate.excess_key`, float; it is
  ``[0, 0]`` when the data are compatible and separable): ``excess_over_bracket`` is
  :math:`\mathrm{CE}(W)-\mathcal H-\text{excess\_upper}`, what training could still gain at least;
* ``margin`` :math:`\min_j\min_{z\in S_j, v\notin S_j}(w_z-w_v)^\top h_j` (raw; ``min_margin`` is the
  same divided by :math:`\|W\|`) and ``support_spread``
  :math:`\max_j(\max_{z\in S_j} w_z^\top h_j - \min_{z\in S_j} w_z^\top h_j)`, the in-support logit
  spread; ``log_odds_error`` :math:`\max_j\max_{z\in S_j}|(w_z-w_{z_j})^\top h_j-\log(p_{j,z}/p_{j,z_j})|`
  (0 at every point of :math:`W^*+F^\perp`);
* ``rel_dist_F`` :math:`\|P_F W-W^*\|/\|W^*\|`;
* ``cos_perp_mm`` :math:`\cos(P_{F^\perp}W, W^{mm})` and ``norm_matched_distance``
  :math:`\|P_{F^\perp}W - \tfrac{\|P_{F^\perp}W\|}{\|W^{mm}\|}W^{mm}\|/\|P_{F^\perp}W\|`
  (:math:`=\sqrt{2-2\cos}`: the distance to W^mm scaled to the same norm, relative);
* the metrics of :func:`ntpcert.dynamics.trajectory.metrics` (``cos_mm``, ``perp_fraction``, ...).

Per frequency bin (:func:`frequency_bins`: tokens grouped by :math:`\lfloor\log_2 f\rfloor` of their
corpus frequency f, a Zipf axis), on the rows of the bin's tokens: ``rel_dist_F``, ``cos_perp_mm``
and ``excess_share`` :math:`\sum_j\pi_j\sum_{z\in S_j\cap B}p_{j,z}(\log p_{j,z}-\log\mathbb S_z(Wh_j))`,
the bin's share of the excess loss (the shares sum to ``excess_loss``; one share can be negative).
Every number is float64 and carries no tolerance: these are measurements, not verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ntpcert.dynamics.trajectory import Limits, metrics
from ntpcert.errors import InputError
from ntpcert.util.numbers import cosine

__all__ = ["COMPARE_METRICS", "BIN_METRICS", "Comparison", "DecoderReport", "compare", "compare_decoder", "compare_series",
           "excess_bracket", "frequency_bins"]

#: The headline numbers of one comparison, in report order.
COMPARE_METRICS = ("loss", "excess_loss", "excess_over_bracket", "margin", "min_margin", "support_spread",
                   "log_odds_error", "rel_dist_F", "cos_perp_mm", "norm_matched_distance", "cos_mm", "norm",
                   "perp_fraction")

#: The numbers of each frequency bin.
BIN_METRICS = ("rel_dist_F", "cos_perp_mm", "excess_share")


def frequency_bins(frequency: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Tokens grouped by :math:`\\lfloor\\log_2 f\\rfloor` of their frequency ``f`` (shape (V,)), rarest
    first; tokens that never occur form the bin ``"0"``. Each item is (label, token indices)."""
    f = np.asarray(frequency, dtype=np.int64)
    out = []
    if np.any(f == 0):
        out.append(("0", np.flatnonzero(f == 0)))
    pos = f > 0
    if np.any(pos):
        b = np.floor(np.log2(np.where(pos, f, 1))).astype(np.int64)
        for k in np.unique(b[pos]):
            idx = np.flatnonzero(pos & (b == k))
            lo, hi = 2 ** int(k), 2 ** (int(k) + 1) - 1
            out.append((f"{lo}" if lo == hi else f"{lo}-{hi}", idx))
    return out


@dataclass(frozen=True, eq=False)
class Comparison:
    """One decoder against the limits.

    Attributes
    ----------
    values : dict of str to float
        :data:`COMPARE_METRICS` and the trajectory metrics, by name (NaN where undefined).
    bracket : dict
        The float bracket on :math:`L^*-\\mathcal H` (``excess_lower``, ``excess_upper``, ...) or ``skipped``.
    bins : list of dict
        Per frequency bin: ``label``, ``tokens`` (how many), ``frequency`` (total occurrences) and
        :data:`BIN_METRICS`.
    """

    values: dict[str, float]
    bracket: dict[str, Any]
    bins: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**self.values, "entropy": self.values.get("entropy"), "bracket": self.bracket, "bins": self.bins}


#: Contexts per block of logits (a block holds a few (rows, V) float64 arrays).
BLOCK_ROWS = 512


def _blocks(m: int) -> list[slice]:
    return [slice(s, min(s + BLOCK_ROWS, m)) for s in range(0, m, BLOCK_ROWS)]


def _logit_numbers(limits: Limits, W: np.ndarray) -> dict[str, float]:
    """``margin``, ``support_spread``, ``log_odds_error`` over blocks of contexts (never all m·V logits)."""
    inst = limits.instance
    margin, spread, err = np.inf, 0.0, 0.0
    for blk in _blocks(inst.m):
        Z = inst.embeddings[blk] @ W.T  # (rows, V)
        P = inst.probs[blk]
        mask = P > 0
        zin = np.where(mask, Z, np.inf).min(axis=1)
        zmax = np.where(mask, Z, -np.inf).max(axis=1)
        out_max = np.where(mask, -np.inf, Z).max(axis=1)
        proper = ~mask.all(axis=1)
        if proper.any():
            margin = min(margin, float(np.min((zin - out_max)[proper])))
        spread = max(spread, float(np.max(zmax - zin)))
        rows, cols = np.nonzero(mask)
        anchor = np.argmax(mask, axis=1)  # the smallest token of each support, z_j
        with np.errstate(divide="ignore"):
            lo = np.log(P[rows, cols]) - np.log(P[rows, anchor[rows]])
        d = (Z[rows, cols] - Z[rows, anchor[rows]]) - lo
        err = max(err, float(np.max(np.abs(d))) if d.size else 0.0)
    return {"margin": margin if np.isfinite(margin) else float("nan"), "support_spread": spread,
            "log_odds_error": err}


def _bins(limits: Limits, W: np.ndarray, PF: np.ndarray, frequency: np.ndarray) -> list[dict[str, Any]]:
    inst = limits.instance
    Wp = W - PF
    Wmm = limits.W_mm
    per_token = np.zeros(inst.V)
    for blk in _blocks(inst.m):
        Z = inst.embeddings[blk] @ W.T
        logS = Z - np.logaddexp.reduce(Z, axis=1, keepdims=True)
        P = inst.probs[blk]
        rows, cols = np.nonzero(P > 0)
        p = P[rows, cols]
        np.add.at(per_token, cols, inst.weights[blk][rows] * p * (np.log(p) - logS[rows, cols]))
    out = []
    for label, idx in frequency_bins(frequency):
        ws = float(np.linalg.norm(limits.W_star[idx]))
        out.append({
            "label": label, "tokens": int(idx.size), "frequency": int(np.asarray(frequency)[idx].sum()),
            "rel_dist_F": float(np.linalg.norm(PF[idx] - limits.W_star[idx])) / ws if ws > 0 else float("nan"),
            "cos_perp_mm": float("nan") if Wmm is None else cosine(Wp[idx], Wmm[idx]),
            "excess_share": float(per_token[idx].sum()),
        })
    return out


def excess_bracket(limits: Limits) -> dict[str, Any]:
    r"""The float bracket on :math:`L^*-\mathcal H`: ``[0, 0]`` by the paper's Theorem 1 when the (float)
    verdicts of ``limits`` are compatible and separable, else
    :func:`ntpcert.pipeline.excess_certificate.excess_key` (its scalar keys only)."""
    if limits.compatible is True and limits.svm is not None:
        return {"excess_lower": 0.0, "excess_upper": 0.0, "engine": "theorem",
                "reason": "the float verdicts say compatible and separable"}
    from ntpcert.pipeline.excess_certificate import excess_key

    key = excess_key(limits.instance, exact=False)[0]
    return {k: v for k, v in key.items() if not isinstance(v, (list, dict))}


def compare(W: np.ndarray, limits: Limits, *, frequency: np.ndarray | None = None,
            bracket: dict[str, Any] | None = None) -> Comparison:
    """Compare the decoder ``W`` (shape (V, d)) with ``limits``.

    Parameters
    ----------
    W : ndarray of shape (V, d)
    limits : Limits
    frequency : ndarray of shape (V,), optional
        Token frequencies for the bins; default the next-token counts (the column sums of the
        instance's counts, or its probabilities weighted by the context frequencies).
    bracket : dict, optional
        The bracket on :math:`L^*-\\mathcal H` (:func:`excess_bracket`), computed once by the caller for a
        series of snapshots; default computed here.
    """
    inst = limits.instance
    W = inst.check_decoder(np.asarray(W, dtype=np.float64)) if hasattr(inst, "check_decoder") else W
    if bracket is None:
        bracket = excess_bracket(limits)
    if frequency is None:
        frequency = inst.counts.sum(axis=0) if inst.counts is not None else np.rint(
            inst.weights @ inst.probs * 1e6).astype(np.int64)
    frequency = np.asarray(frequency)
    if frequency.shape != (inst.V,):
        raise InputError(f"frequency: expected shape ({inst.V},), got {frequency.shape}")
    values = dict(metrics(W, limits))
    values["entropy"] = limits.entropy
    upper = bracket.get("excess_upper")
    values["excess_over_bracket"] = values["excess_loss"] - upper if isinstance(upper, float) else float("nan")
    values.update(_logit_numbers(limits, W))
    PF = limits.subspace.project(W)
    Wp = W - PF
    Wmm = limits.W_mm
    cp = float("nan") if Wmm is None else cosine(Wp, Wmm)
    values["cos_perp_mm"] = cp
    pn = float(np.linalg.norm(Wp))
    values["norm_matched_distance"] = float("nan") if (Wmm is None or pn == 0) else float(
        np.linalg.norm(Wp - (pn / limits.svm.norm) * Wmm)) / pn
    return Comparison(values, bracket, _bins(limits, W, PF, frequency))


def compare_series(snapshots: Sequence[tuple[int, np.ndarray]], limits: Limits, *,
                   frequency: np.ndarray | None = None) -> list[tuple[int, Comparison]]:
    """:func:`compare` at each ``(t, W_t)``, the bracket computed once."""
    bracket = excess_bracket(limits)
    return [(t, compare(W, limits, frequency=frequency, bracket=bracket)) for t, W in snapshots]


@dataclass(frozen=True, eq=False)
class DecoderReport:
    """A decoder, or a series of snapshots, against the limits of one instance (``ntpcert compare``).

    Attributes
    ----------
    instance : NTPInstance
    limits : Limits
    comparison : Comparison or None
        One decoder (None for a series).
    series : list of (int, Comparison) or None
        Snapshots ``(t, comparison)`` (None for one decoder).
    source : dict or None
        The model the decoder and the instance were read from, when they were.
    """

    instance: Any
    limits: Limits
    comparison: Comparison | None = None
    series: list[tuple[int, Comparison]] | None = None
    source: dict[str, Any] | None = None

    def to_json(self, *, figure: str | None = None, table: str | None = None) -> dict[str, Any]:
        """The comparison (or ``snapshots``), the instance's sizes and verdicts, and the files written."""
        inst, limits = self.instance, self.limits
        out = (self.comparison.to_json() if self.comparison is not None
               else {"snapshots": [{"t": t, **c.to_json()} for t, c in self.series or []]})
        out.update({"m": inst.m, "d": inst.d, "V": inst.V, "compatible": limits.compatible,
                    "separable": limits.svm is not None, "figure": figure, "table": table})
        if self.source is not None:
            out["source"] = self.source
        return out


def compare_decoder(instance: Any, limits: Limits, W: np.ndarray | None = None, *,
                    snapshots: Sequence[tuple[int, np.ndarray]] | None = None, frequency: np.ndarray | None = None,
                    source: dict[str, Any] | None = None) -> DecoderReport:
    """:func:`compare` of one decoder ``W``, or :func:`compare_series` of ``snapshots`` (each checked
    against the instance's shape), as a :class:`DecoderReport`."""
    if snapshots is not None:
        snaps = [(t, instance.check_decoder(Wt)) for t, Wt in snapshots]
        return DecoderReport(instance, limits, series=compare_series(snaps, limits, frequency=frequency), source=source)
    cmp = compare(instance.check_decoder(W), limits, frequency=frequency)
    return DecoderReport(instance, limits, comparison=cmp, source=source)

