r"""A decoder against the limits of its instance: how far a trained W is from W* on F and from the
direction of W^mm off F, overall and per token-frequency bin.

For a decoder :math:`W` (V, d) on an instance with limits (:class:`~ntpcert.dynamics.trajectory.Limits`):

* ``loss`` :math:`\mathrm{CE}(W)` (the mean next-token loss on the contexts) and ``excess_loss``
  :math:`\mathrm{CE}(W)-\mathcal H`, set against the bracket ``[excess_lower, excess_upper]`` on
  :math:`L^*-\mathcal H` (:func:`ntpcert.pipeline.excess_certificate.excess_key`, float; it is
  ``[0, 0]`` when the data are compatible and separable): ``excess_over_bracket`` is
  :math:`\mathrm{CE}(W)-\mathcal H-\text{excess\_upper}`, what training could still gain at least;
* ``margin`` :math:`\min_j\min_{z\in S_j, v\notin S_j}(w_z-w_v)^\top h_j`, the NTP margin
  (:mod:`ntpcert.dynamics.logits`: every in-support token, no anchor; raw), and ``normalized_margin`` the
  same divided by :math:`\|W\|` (it was ``min_margin``, a name that ``certify`` and ``svm`` give the raw
  smallest (6b) margin of their witness or solution) and ``support_spread``
  :math:`\max_j(\max_{z\in S_j} w_z^\top h_j - \min_{z\in S_j} w_z^\top h_j)`, the in-support logit
  spread; ``log_odds_error`` :math:`\max_j\max_{z\in S_j}|(w_z-w_{z_j})^\top h_j-\log(p_{j,z}/p_{j,z_j})|`
  (0 at every point of :math:`W^*+F^\perp`);
* ``rel_dist_F`` :math:`\|P_F W-W^*\|/\|W^*\|`;
* ``cos_perp_mm`` :math:`\cos(P_{F^\perp}W, W^{mm})` and ``norm_matched_distance``
  :math:`\|P_{F^\perp}W - \tfrac{\|P_{F^\perp}W\|}{\|W^{mm}\|}W^{mm}\|/\|P_{F^\perp}W\|`
  (:math:`=\sqrt{2-2\cos}`: the distance to W^mm scaled to the same norm, relative);
* the metrics of :func:`ntpcert.dynamics.trajectory.metrics` (``cos_mm``, ``perp_fraction``, ...).

Per frequency bin (:func:`frequency_bins`: tokens grouped by :math:`\lfloor\log_2 f\rfloor` of their
corpus frequency f, a Zipf axis), on the rows of the bin's tokens: ``rel_dist_F`` (null where W* is about
0 on the bin, :data:`BIN_W_STAR_FLOOR`), ``dist_F_share`` (the bin's :math:`\|P_FW - W^*\|` over the whole
:math:`\|W^*\|`; the squares of the bins' shares sum to the square of ``rel_dist_F``), ``cos_perp_mm``
``excess_nats`` :math:`\sum_j\pi_j\sum_{z\in S_j\cap B}p_{j,z}(\log p_{j,z}-\log\mathbb S_z(Wh_j))`,
the bin's part of the excess loss in nats (the parts sum to ``excess_loss``; one can be negative), and
``excess_fraction``, the same over ``excess_loss`` (the fractions sum to 1; null where the excess is 0).
Every number is float64 and carries no tolerance: these are measurements, not verdicts.

**Modulo the softmax's invariances.** Adding :math:`\mathbf 1c^\top` to W (the same c on every token's
row), or a constant to the whole bias column when h carries a constant coordinate for the head's bias,
changes no prediction; more generally no W + D with :math:`Dh_j\in\operatorname{span}(\mathbf 1)` for every
j does (the subspace N of :mod:`ntpcert.dynamics.invariance`). F, W*, W^mm and the CE gradient are all
orthogonal to N, so every number above is computed on :math:`P(W)`, the orthogonal projection of W on
:math:`N^\perp` (the rows centred, and projected on the row space of H when H does not span
:math:`\mathbb R^d`): ``compare(W)`` and ``compare(W + D)`` agree for every D in N. The logit numbers
(``loss``, ``margin``, ``log_odds_error``, ...) and ``rel_dist_F`` are the same as on W itself; the norms
and the cosines (``norm``, ``cos_mm``, ``cos_perp_mm``, ``norm_matched_distance``, ``perp_fraction``,
``normalized_margin``, ``eq_violation``, ``margin_ratio``) are those of :math:`P(W)`, which they were not before
(the part of W in N lies in :math:`F^\perp` and is orthogonal to W^mm: a W exported without centring had
a larger ``norm`` and ``perp_fraction``, and a ``cos_perp_mm`` nearer 0). The numbers of W as exported,
which do depend on the convention, carry ``raw`` in their names (:data:`RAW_METRICS`): ``raw_norm``
:math:`\|W\|` (the old ``norm``) and ``raw_invariant_norm`` :math:`\|W - P(W)\|`, the size of the part of W
that no prediction sees.

**Data that are not separable.** When the NTP-SVM is infeasible and the split into separable pairs P and
non-separable pairs N is found (:mod:`ntpcert.pipeline.nonseparable`), the limits are F_N, W_fin and W^mm_P
(:class:`~ntpcert.dynamics.trajectory.Limits`): ``rel_dist_F`` is :math:`\|P_{F_N}W - W_{fin}\|/\|W_{fin}\|`,
``cos_perp_mm`` is :math:`\cos(P_{F_N}^\perp W, W^{mm}_P)`, both on :math:`P(W)` as above (F_N, W_fin and
W^mm_P are orthogonal to the invariant directions too), and ``L_star`` and ``loss_over_L_star``
:math:`\mathrm{CE}(W) - L^*` are added; ``notes["limits"]`` says so.

A decoder with a non-finite entry, or one so large that a metric would overflow
(:data:`MAX_DECODER_SCALE`), is refused naming the entry (:func:`check_decoder_values`). In
:meth:`Comparison.to_json` a number that is not finite (undefined: no W^mm, no margin, ...) is null, and
``notes["null"]`` says why; JSON never holds NaN or Infinity.

**A model's vocabulary, merged** (:func:`merged_limits`, :func:`compare_merged`). For an instance read
through a model with its unseen tokens merged into one representative
(:mod:`ntpcert.instance.lm.merge`), the decoder keeps all V rows and every number above that involves
only W is computed over the full vocabulary, block by block of contexts (a block's logits are
(:data:`ntpcert.dynamics.logits.BLOCK_ROWS`, V); the supports come from the reduced instance, mapped back to token ids): ``loss``,
``excess_loss``, ``margin`` (the out-of-support maximum over all V tokens), ``support_spread``,
``log_odds_error`` and each bin's ``excess_nats`` and ``excess_fraction``. W* and F need only the observed tokens: no unseen
token is in an equation of (4), so F is zero on their rows and W* is 0 there; :math:`P_F W` is the
reduced instance's projection of the observed rows, placed back, and 0 on the unseen rows. The NTP-SVM
of the full vocabulary weighs the representative's row by the number of tokens it stands for, so the
reduced instance's W^mm is not it: ``cos_mm``, ``cos_perp_mm`` and ``norm_matched_distance`` are NaN,
with the reason in ``notes``. The bracket on :math:`L^*-\mathcal H` is ``[0, 0]`` when the (exact for the
full vocabulary) verdicts are compatible and separable, else not computed (the reduced instance's
:math:`L^*` is not the full one's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ntpcert.dynamics.invariance import SoftmaxQuotient
from ntpcert.dynamics.logits import blocks, logit_numbers
from ntpcert.dynamics.trajectory import Limits, metrics
from ntpcert.errors import InputError
from ntpcert.util.numbers import cosine

__all__ = ["COMPARE_METRICS", "BIN_METRICS", "MAX_DECODER_SCALE", "RAW_METRICS", "Comparison", "DecoderReport",
           "check_decoder_values", "compare", "compare_decoder", "compare_merged", "compare_model_merged",
           "compare_series", "excess_bracket", "finite_json", "frequency_bins", "merged_limits", "model_instance"]

#: The headline numbers of one comparison, in report order.
COMPARE_METRICS = ("loss", "excess_loss", "excess_over_bracket", "margin", "normalized_margin", "support_spread",
                   "log_odds_error", "rel_dist_F", "cos_perp_mm", "norm_matched_distance", "cos_mm", "norm",
                   "perp_fraction", "raw_norm")

#: The numbers that depend on how W was exported (they change under W + 1c^T): named ``raw_*``.
RAW_METRICS = ("raw_norm", "raw_invariant_norm")

#: The numbers that need W^mm (NaN, JSON null, without it).
MM_METRICS = ("cos_mm", "cos_mm_centered", "cos_perp_mm", "norm_matched_distance", "margin_ratio")

#: Largest :math:`\max_{ij}|W_{ij}|\sqrt{Vd}\max(1, \max_j\|h_j\|_1)` a decoder may have: it bounds
#: :math:`\|W\|_F` and every logit :math:`|w_v^\top h_j|` by 1e150, so that squared norms (at most 1e300), logit
#: differences and inner products with W^mm, W* and F stay finite in float64.
MAX_DECODER_SCALE = 1e150

#: The numbers of each frequency bin.
BIN_METRICS = ("rel_dist_F", "dist_F_share", "cos_perp_mm", "excess_nats", "excess_fraction")
#: A bin's ``rel_dist_F`` divides by the norm of W*'s rows there; where that norm is at most this fraction of
#: ``||W*||`` (W* is about 0 on the bin: tokens seen only in one-token supports) the ratio is noise (it read
#: 4.8e30 on a trained model's bin) and is null, saying so; ``dist_F_share`` divides by ``||W*||`` instead.
BIN_W_STAR_FLOOR = 1e-6


def _bin_dist(PF_rows: np.ndarray, W_star_rows: np.ndarray, ws_total: float) -> tuple[float, float]:
    """``(rel_dist_F, dist_F_share)`` of one bin: the distance over the bin's W* rows (NaN where those are
    within :data:`BIN_W_STAR_FLOOR` of 0 relative to ``ws_total``) and over ``||W*||`` (the shares' squares
    sum to the square of the whole ``rel_dist_F``)."""
    dist = float(np.linalg.norm(PF_rows - W_star_rows))
    wsb = float(np.linalg.norm(W_star_rows))
    nan = float("nan")
    rel = dist / wsb if wsb > BIN_W_STAR_FLOOR * ws_total and wsb > 0 else nan
    return rel, (dist / ws_total if ws_total > 0 else nan)


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
        :data:`COMPARE_METRICS` and the trajectory metrics, by name (NaN where undefined), each computed
        on W modulo the softmax-invariant directions (:mod:`ntpcert.dynamics.invariance`) except the
        :data:`RAW_METRICS`, which are W's as given.
    bracket : dict
        The float bracket on :math:`L^*-\\mathcal H` (``excess_lower``, ``excess_upper``, ...) or ``skipped``.
    bins : list of dict
        Per frequency bin: ``label``, ``tokens`` (how many), ``frequency`` (total occurrences) and
        :data:`BIN_METRICS`.
    notes : dict of str to str
        What a number means or why it is missing (the merged comparison: ``F``, ``W_mm``, ``vocabulary``;
        ``null``: the numbers that are not finite, null in :meth:`to_json`, and why).
    """

    values: dict[str, float]
    bracket: dict[str, Any]
    bins: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The values, the bracket and the bins, every non-finite number as null (``notes["null"]`` says why)."""
        out = {**self.values, "entropy": self.values.get("entropy"), "bracket": self.bracket, "bins": self.bins}
        if self.notes:
            out["notes"] = dict(self.notes)
        return finite_json(out)


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, ±inf; numpy ones too) replaced by None, through dicts,
    lists and tuples: JSON has no NaN or Infinity."""
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, (float, np.floating)) and not math.isfinite(float(obj)):
        return None
    return obj


def check_decoder_values(W: np.ndarray, embeddings: np.ndarray, field: str = "W") -> None:
    """Refuse, naming the entry and its value, a decoder ``W`` (float64) with a non-finite entry or one
    so large that a metric would overflow float64 (:data:`MAX_DECODER_SCALE`)."""
    bad = ~np.isfinite(W)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"{field}: entry [{i}, {j}] is {float(W[i, j])!r}, not a finite number")
    if W.size == 0:
        return
    A = np.abs(W)
    i, j = (int(x) for x in np.unravel_index(int(np.argmax(A)), W.shape))
    H = np.abs(np.asarray(embeddings, dtype=np.float64))
    hmax = float(H.sum(axis=1).max()) if H.size else 0.0
    if A[i, j] == 0:
        return
    log_scale = math.log10(float(A[i, j])) + 0.5 * math.log10(W.size) + math.log10(max(1.0, hmax))
    if not log_scale <= math.log10(MAX_DECODER_SCALE):
        raise InputError(f"{field}: entry [{i}, {j}] = {float(W[i, j])!r} is too large for the float64 metrics "
                         f"(max |W_ij| sqrt(V d) max(1, max_j ||h_j||_1) = 10^{log_scale:.1f}, at most "
                         f"{MAX_DECODER_SCALE:.0e})")


def _diff_norm(A: np.ndarray, B: np.ndarray, rows: int = 4096) -> float:
    """:math:`\\|A - B\\|_F` a block of rows at a time (no third (V, d) array)."""
    return math.sqrt(sum(float(np.sum((A[s:s + rows] - B[s:s + rows]) ** 2)) for s in range(0, A.shape[0], rows)))


def _null_notes(values: dict[str, float], bins: list[dict[str, Any]], limits: Limits, invariant_norm: float,
                mm_reason: str | None = None) -> dict[str, str]:
    """``{"null": why}`` for the values and bin numbers that are not finite (none: ``{}``)."""
    if mm_reason is None and limits.W_mm is None:
        mm_reason = "no W^mm: " + (limits.svm_error or "the instance is not separable")
    if mm_reason is None:
        mm_reason = "the part of W it is the angle of is 0 (W modulo the invariant directions is in F, or is W*)"
    zero = "W is 0 modulo the directions no prediction sees" if invariant_norm == 0 else None
    parts = []
    for k, v in values.items():
        if isinstance(v, float) and not math.isfinite(v):
            if zero is not None and k not in ("margin", "rel_dist_F", "dist_F", "excess_over_bracket"):
                why = zero
            elif k in MM_METRICS or k.startswith(("cos_", "margin_ratio_")):
                why = mm_reason
            elif k in ("margin", "normalized_margin"):
                why = "every context's support is the whole vocabulary: no margin"
            elif k == "rel_dist_F":
                why = "W* = 0"
            elif k == "excess_over_bracket":
                why = "the bracket on L* - H was not computed"
            elif k == "direction_error_bound":
                why = "the rescaled gradient direction underflows at this W"
            else:
                why = f"{v!r} at this W"
            parts.append(f"{k} ({why})")
    for k in ("rel_dist_F", "dist_F_share", "cos_perp_mm", "excess_fraction"):
        labels = [b["label"] for b in bins if isinstance(b.get(k), float) and not math.isfinite(b[k])]
        if labels:
            why = "CE(W) - H is 0: there is no excess to take a fraction of" if k == "excess_fraction" else (f"W* is 0 on the bin's rows, or within BIN_W_STAR_FLOOR = {BIN_W_STAR_FLOOR:g} of ||W*|| of 0 "
                   "(dist_F_share divides by ||W*|| instead)") if k == "rel_dist_F" else "W* = 0" \
                if k == "dist_F_share" else mm_reason if limits.W_mm is None else (
                "W modulo the invariant directions, off F, is 0 on the bin's rows, or W^mm is within its "
                "distance bound sqrt(2 gap) of 0 there")
            parts.append(f"bins {', '.join(labels)}: {k} ({why})")
    return {"null": "not finite, so null in JSON: " + "; ".join(parts)} if parts else {}



def _token_counts(inst: Any) -> np.ndarray:
    """How often each token follows some context, shape (V,) of int64, from the non-zero counts."""
    _, tokens, counts = inst.count_entries()
    out = np.zeros(inst.V, dtype=np.int64)
    np.add.at(out, tokens, counts)
    return out


def _bins(limits: Limits, W: np.ndarray, PF: np.ndarray, frequency: np.ndarray) -> list[dict[str, Any]]:
    inst = limits.instance
    Wp = W - PF
    Wmm = limits.W_mm
    per_token = np.zeros(inst.V)
    for blk in blocks(inst.m):
        Z = inst.embeddings[blk] @ W.T
        logS = Z - np.logaddexp.reduce(Z, axis=1, keepdims=True)
        P = inst.probs_rows(blk)
        rows, cols = np.nonzero(P > 0)
        p = P[rows, cols]
        np.add.at(per_token, cols, inst.weights[blk][rows] * p * (np.log(p) - logS[rows, cols]))
    out = []
    ws_total = float(np.linalg.norm(limits.W_star))
    for label, idx in frequency_bins(frequency):
        rel, share = _bin_dist(PF[idx], limits.W_star[idx], ws_total)
        out.append({
            "label": label, "tokens": int(idx.size), "frequency": int(np.asarray(frequency)[idx].sum()),
            "rel_dist_F": rel, "dist_F_share": share,
            "cos_perp_mm": float("nan") if Wmm is None else _bin_cosine(Wp[idx], Wmm[idx], limits.svm),
            **_bin_excess(per_token, idx),
        })
    return out


def _bin_excess(per_token: np.ndarray, idx: np.ndarray) -> dict[str, float]:
    """A bin's ``excess_nats`` (its tokens' part of CE(W) - H) and ``excess_fraction`` (over the whole)."""
    nats, total = float(per_token[idx].sum()), float(per_token.sum())
    return {"excess_nats": nats, "excess_fraction": nats / total if total != 0 else float("nan")}


def _bin_cosine(Wp: np.ndarray, Wmm: np.ndarray, svm: Any) -> float:
    r""":math:`\cos(P_{F^\perp}W, W^{mm})` on a bin's rows, NaN where W^mm's rows there are within the solution's
    distance bound :math:`\sqrt{2\,\mathrm{gap}}\ge\|W - W^{mm}\|` (strong convexity) of 0: the exact rows may be
    0 (a model's unseen tokens under W^mm_P often are), and a cosine with the solver's residue is noise (it read
    0.45 on such a bin where the solver left rows of norm 8e-6)."""
    if float(np.linalg.norm(Wmm)) <= math.sqrt(2.0 * max(float(svm.gap), 0.0)):
        return float("nan")
    return cosine(Wp, Wmm)


def excess_bracket(limits: Limits) -> dict[str, Any]:
    r"""The float bracket on :math:`L^*-\mathcal H`: ``[0, 0]`` by the paper's Theorem 1 when the (float)
    verdicts of ``limits`` are compatible and separable, else
    :func:`ntpcert.pipeline.excess_certificate.excess_key` (its scalar keys only)."""
    if limits.compatible is True and limits.svm is not None and limits.separable is True:
        return {"excess_lower": 0.0, "excess_upper": 0.0, "engine": "theorem",
                "reason": "the float verdicts say compatible and separable"}
    from ntpcert.pipeline.excess_certificate import excess_key

    key = excess_key(limits.instance, exact=False, separable=limits.separable)[0]
    return {k: v for k, v in key.items() if not isinstance(v, (list, dict))}


def compare(W: np.ndarray, limits: Limits, *, frequency: np.ndarray | None = None,
            bracket: dict[str, Any] | None = None, quotient: SoftmaxQuotient | None = None) -> Comparison:
    """Compare the decoder ``W`` (shape (V, d)) with ``limits``: every number on :math:`P(W)`, W modulo
    the directions that change no prediction (:mod:`ntpcert.dynamics.invariance`), so that ``W`` and
    ``W + 1c^T`` (or any W + D with :math:`Dh_j\\in\\operatorname{span}(\\mathbf 1)`) give the same
    numbers; only :data:`RAW_METRICS` are of ``W`` as given.

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
    quotient : SoftmaxQuotient, optional
        :math:`P` for the instance's embeddings, computed once by the caller for a series; default here.
    """
    inst = limits.instance
    W = inst.check_decoder(np.asarray(W, dtype=np.float64)) if hasattr(inst, "check_decoder") else W
    check_decoder_values(W, inst.embeddings)
    raw = W
    W = (quotient or SoftmaxQuotient.of(inst.embeddings)).project(raw)
    if bracket is None:
        bracket = excess_bracket(limits)
    if frequency is None:
        frequency = _token_counts(inst) if inst.has_counts else np.rint(
            inst.weights @ inst.probs * 1e6).astype(np.int64)
    frequency = np.asarray(frequency)
    if frequency.shape != (inst.V,):
        raise InputError(f"frequency: expected shape ({inst.V},), got {frequency.shape}")
    values = dict(metrics(W, limits))
    values["raw_norm"] = float(np.linalg.norm(raw))
    values["raw_invariant_norm"] = _diff_norm(raw, W)
    values["entropy"] = limits.entropy
    upper = bracket.get("excess_upper")
    values["excess_over_bracket"] = values["excess_loss"] - upper if isinstance(upper, float) else float("nan")
    values.update(logit_numbers(limits.instance, W))
    PF = limits.subspace.project(W)
    Wp = W - PF
    Wmm = limits.W_mm
    cp = float("nan") if Wmm is None else cosine(Wp, Wmm)
    values["cos_perp_mm"] = cp
    pn = float(np.linalg.norm(Wp))
    values["norm_matched_distance"] = float("nan") if (Wmm is None or pn == 0) else float(
        np.linalg.norm(Wp - (pn / limits.svm.norm) * Wmm)) / pn
    bins = _bins(limits, W, PF, frequency)
    notes = _null_notes(values, bins, limits, values["norm"])
    split = getattr(limits, "split", None)
    if split is not None and split.limit is not None:
        values["L_star"] = split.limit.L_star
        values["loss_over_L_star"] = values["loss"] - split.limit.L_star
        notes["limits"] = (f"not separable: {len(split.nonseparable)} non-separable pair(s) ({split.split_note}); "
                           "F is F_N, W* is W_fin and W^mm is W^mm_P (rel_dist_F = ||P_F_N W - W_fin||/||W_fin||, "
                           "cos_perp_mm = cos(P_F_N^perp W, W^mm_P)); loss_over_L_star = CE(W) - L*"
                           + _convergence_note(split.limit))
    return Comparison(values, bracket, bins, notes)


def _convergence_note(limit: Any) -> str:
    """Where Newton on CE_N stopped before its tolerance: W_fin and L* are then only its last iterate's."""
    if limit.converged:
        return ""
    return (f"; W_fin did not converge (||grad CE_N|| = {limit.grad_norm:.3g} > {limit.tol:g} after "
            f"{limit.iterations} Newton steps): L_star and rel_dist_F are of its last iterate")


def compare_series(snapshots: Sequence[tuple[int, np.ndarray]], limits: Limits, *,
                   frequency: np.ndarray | None = None) -> list[tuple[int, Comparison]]:
    """:func:`compare` at each ``(t, W_t)``, the bracket and the quotient computed once."""
    bracket = excess_bracket(limits)
    q = SoftmaxQuotient.of(limits.instance.embeddings)
    return [(t, compare(W, limits, frequency=frequency, bracket=bracket, quotient=q)) for t, W in snapshots]


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
    merge : TokenMerge or None
        When the instance merges the model's unseen tokens (:func:`compare_merged`); then ``separable`` is
        the float verdict on (6), since the merged limits have no NTP-SVM.
    separable : bool or None
    nc : object or None
        The neural-collapse numbers of the decoder (a :class:`ntpcert.geometry.collapse.CollapseReport`, set by
        the caller: ``ntpcert compare`` sets it for one decoder), under ``nc`` in :meth:`to_json`.
    """

    instance: Any
    limits: Limits
    comparison: Comparison | None = None
    series: list[tuple[int, Comparison]] | None = None
    source: dict[str, Any] | None = None
    merge: Any = None
    separable: bool | None = None
    nc: Any = None

    def to_json(self, *, figure: str | None = None, table: str | None = None) -> dict[str, Any]:
        """The comparison (or ``snapshots``), the instance's sizes and verdicts, and the files written."""
        inst, limits = self.instance, self.limits
        out = (self.comparison.to_json() if self.comparison is not None
               else {"snapshots": [{"t": t, **c.to_json()} for t, c in self.series or []]})
        separable = limits.separable if self.merge is None else self.separable
        out.update({"m": inst.m, "d": inst.d, "V": inst.V if self.merge is None else self.merge.V,
                    "compatible": limits.compatible, "separable": separable, "figure": figure, "table": table})
        if self.merge is not None:
            out.update({"V_instance": inst.V, "vocabulary": self.merge.to_json()})
        if self.source is not None:
            out["source"] = self.source
        if self.nc is not None:
            out["nc"] = self.nc.to_json()
        return finite_json(out)


def compare_decoder(instance: Any, limits: Limits, W: np.ndarray | None = None, *,
                    snapshots: Sequence[tuple[int, np.ndarray]] | None = None, frequency: np.ndarray | None = None,
                    source: dict[str, Any] | None = None) -> DecoderReport:
    """:func:`compare` of one decoder ``W``, or :func:`compare_series` of ``snapshots`` (each checked
    against the instance's shape), as a :class:`DecoderReport`."""
    if snapshots is not None:
        snaps = [(t, instance.check_decoder(Wt)) for t, Wt in snapshots]
        return DecoderReport(instance, limits, series=compare_series(snaps, limits, frequency=frequency), source=source,
                             separable=limits.separable)
    cmp = compare(instance.check_decoder(W), limits, frequency=frequency)
    return DecoderReport(instance, limits, comparison=cmp, source=source, separable=limits.separable)


def model_instance(data: Any, *, max_entries: int | None = None) -> tuple[Any, Any]:
    """The instance to compare a model's decoder on (``data`` a :class:`~ntpcert.instance.lm.ModelData`
    read with its unseen tokens merged): the instance over the whole vocabulary when nothing was merged or
    when m·V is at most :data:`FULL_VOCAB_MAX_ENTRIES` (and ``max_entries``), so that W^mm is the full one;
    else the merged instance. Returns ``(instance, merge)``, ``merge`` None for the full instance."""
    if data.merge is None or not data.merge.merged:
        return data.instance, None
    limit = FULL_VOCAB_MAX_ENTRIES if max_entries is None else min(FULL_VOCAB_MAX_ENTRIES, max_entries)
    if data.instance.m * data.V <= limit:
        return data.full_instance(), None
    return data.instance, data.merge


def compare_model_merged(instance: Any, merge: Any, W: np.ndarray | None = None, *,
                         snapshots: Sequence[tuple[int, np.ndarray]] | None = None, frequency: np.ndarray,
                         source: dict[str, Any] | None = None,
                         separability_solver: str | None = None, solver: str | None = None) -> DecoderReport:
    """:func:`compare_merged` of one decoder ``W`` (shape (V, d), the full vocabulary), or of each snapshot,
    against :func:`merged_limits`, as a :class:`DecoderReport`."""
    limits, separable = merged_limits(instance, merge, separability_solver=separability_solver, solver=solver)
    if snapshots is not None:
        bracket = merged_bracket(limits, separable)
        q = SoftmaxQuotient.of(instance.embeddings)
        series = [(t, compare_merged(Wt, limits, merge, frequency=frequency, separable=separable, bracket=bracket,
                                     quotient=q)) for t, Wt in snapshots]
        return DecoderReport(instance, limits, series=series, source=source, merge=merge, separable=separable)
    cmp = compare_merged(W, limits, merge, frequency=frequency, separable=separable)
    return DecoderReport(instance, limits, comparison=cmp, source=source, merge=merge, separable=separable)


#: Largest m·V for which a model's comparison builds the instance over its whole vocabulary (dense (m, V)
#: counts), so that W^mm and every number are the full vocabulary's; above it, :func:`compare_merged`.
FULL_VOCAB_MAX_ENTRIES = 50_000_000

#: LSMR iterations of the merged comparison's W* (when certify did not fit it) and P_F W on the sparse path
#: (:func:`ntpcert.rows.subspace.lsmr_solve`, not strict): at the whole pydoc text (r = 23,082 equality rows,
#: V'd = 4.4 M unknowns) an iteration takes 0.24 s and 1,500 did not reach LSMR's tolerance. Where the cap
#: stops LSMR first, ``notes["F"]`` gives the residuals: the F numbers are then approximate.
MERGED_LSMR_MAX_ITER = 300

#: Why the merged comparison has no W^mm numbers.
MERGED_MM_NOTE = ("not computed: the instance merges the model's unseen tokens into one representative; the NTP-SVM "
                  "of the full vocabulary weighs that row by the number of tokens it stands for, so the reduced "
                  "instance's W^mm is not the full one (see ntpcert.instance.lm.merge)")


def merged_limits(instance: Any, merge: Any = None, *, separability_solver: str | None = None,
                  solver: str | None = None) -> tuple[Limits, bool | None]:
    """F, W* and the float verdicts of a merged instance (:mod:`ntpcert.instance.lm.merge`), with the full
    vocabulary's NTP-SVM when ``merge`` is given: ``(limits, separable)``, ``limits.compatible`` the float
    verdict on (4) and ``separable`` the one on (6) (:func:`ntpcert.pipeline.float_verdicts.certify`; both hold
    for the full vocabulary).

    With ``merge`` (the instance's :class:`~ntpcert.instance.lm.merge.TokenMerge`) the NTP-SVMs are solved with
    the representative weighed by the number of tokens it stands for, so that ``limits.W_mm`` (V' rows),
    expanded by ``merge.expand_rows``, is the full vocabulary's: W^mm on separable data; on data that are not,
    the limits of the split (F_N, W_fin, W^mm_P, as :meth:`~ntpcert.dynamics.trajectory.Limits.compute`) when
    W_fin is the full vocabulary's (no pair of the representative is non-separable), else F, W* and no W^mm
    (``svm_error`` says why; ``limits.split`` keeps the split and W^mm_P's norm). Without ``merge``, no NTP-SVM
    (``svm_error``: :data:`MERGED_MM_NOTE`)."""
    from ntpcert.pipeline.float_verdicts import certify, with_merged_svm
    from ntpcert.rows.subspace import Subspace, least_squares_fit

    kw = {} if separability_solver is None else {"separability_solver": separability_solver}
    rep = certify(instance, svm=False, svm_certificate="float", **kw)
    sub, W_star = rep.subspace, rep.fit.W_star
    if W_star is None or sub.method in ("none", "lsmr"):
        # closed-form or refuted branches, or LSMR (slow on a model's nearly parallel h): F and W* built
        # here, directly (the Cholesky path) where G fits, else by LSMR within MERGED_LSMR_MAX_ITER
        sub = Subspace.build(sub.system, method="direct", lsmr_max_iter=MERGED_LSMR_MAX_ITER)
        W_star = least_squares_fit(sub).W_star
    separable, compatible = rep.separable.holds, rep.compatible.holds
    sopt = {} if solver is None else {"solver": solver}
    if merge is None or not merge.merged:
        return Limits(instance, sub.system, sub, instance.entropy(), W_star, compatible, None, {}, MERGED_MM_NOTE), \
            separable
    if separable is not False:
        rep = with_merged_svm(rep, merge, **sopt)
        return Limits(instance, sub.system, sub, instance.entropy(), W_star, compatible, rep.svm, {},
                      rep.svm_error), separable
    from ntpcert.pipeline.nonseparable import nonseparable_limits

    gen = nonseparable_limits(merge.weighted(instance), separable=False, **sopt)
    if gen.limit is None:
        why = f"not separable; W_fin, W^mm_P: {gen.error or gen.split_note}"
        return Limits(instance, sub.system, sub, instance.entropy(), W_star, compatible, None, {}, why, gen), separable
    lim = gen.limit
    return Limits(instance, lim.system, lim.subspace, instance.entropy(), lim.W_fin, compatible, gen.svm, {},
                  gen.svm_error, gen), separable


def _merged_pass(limits: Limits, W: np.ndarray, kept: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """One pass over blocks of contexts with the full logits (rows, V): CE, its excess, margins, spread,
    log-odds error, and each token's share of the excess (shape (V,))."""
    inst = limits.instance
    V = W.shape[0]
    per_token = np.zeros(V)
    loss = excess = 0.0
    margin, spread, err = np.inf, 0.0, 0.0
    for blk in blocks(inst.m):
        Z = inst.embeddings[blk] @ W.T  # (rows, V) over the full vocabulary
        top = Z.max(axis=1)
        lse = top + np.log(np.exp(Z - top[:, None]).sum(axis=1))
        P = inst.probs_rows(blk)
        rows, rcols = np.nonzero(P > 0)
        cols = kept[rcols]
        p = P[rows, rcols]
        pi = inst.weights[blk][rows]
        zin = Z[rows, cols]
        logS = zin - lse[rows]
        loss += float(np.sum(pi * p * -logS))
        share = pi * p * (np.log(p) - logS)
        excess += float(share.sum())
        np.add.at(per_token, cols, share)
        b = Z.shape[0]
        zmin = np.full(b, np.inf)
        zmax = np.full(b, -np.inf)
        np.minimum.at(zmin, rows, zin)
        np.maximum.at(zmax, rows, zin)
        first = np.ones(rows.size, dtype=bool)
        first[1:] = rows[1:] != rows[:-1]  # np.nonzero is row-major: the first entry of a row is its anchor
        anchor_z = zin[first][np.cumsum(first) - 1]
        anchor_p = p[first][np.cumsum(first) - 1]
        Z[rows, cols] = -np.inf
        out_max = Z.max(axis=1)
        counts = np.bincount(rows, minlength=b)
        proper = counts < V
        if proper.any():
            margin = min(margin, float(np.min((zmin - out_max)[proper])))
        spread = max(spread, float(np.max(zmax - zmin)))
        d = (zin - anchor_z) - (np.log(p) - np.log(anchor_p))
        err = max(err, float(np.max(np.abs(d))) if d.size else 0.0)
    return {"loss": loss, "excess_loss": excess, "margin": margin if np.isfinite(margin) else float("nan"),
            "support_spread": spread, "log_odds_error": err}, per_token


def compare_merged(W: np.ndarray, limits: Limits, merge: Any, *, frequency: np.ndarray, separable: bool | None,
                   bracket: dict[str, Any] | None = None, quotient: SoftmaxQuotient | None = None) -> Comparison:
    """Compare the model's decoder ``W`` (shape (V, d), the full vocabulary) with the limits of the merged
    instance (:func:`merged_limits`; ``merge`` a :class:`~ntpcert.instance.lm.merge.TokenMerge`): the
    numbers of the module doc, over all V tokens; the W^mm numbers NaN (``notes`` says why). ``separable``:
    the verdict on (6) of :func:`merged_limits`. As in :func:`compare`, every number is of W modulo the
    directions that change no prediction over the full vocabulary (the rows centred over all V tokens),
    except the :data:`RAW_METRICS`."""
    inst = limits.instance
    W = np.asarray(W, dtype=np.float64)
    if W.shape != (merge.V, inst.d):
        raise InputError(f"W: expected shape (V, d) = ({merge.V}, {inst.d}), got {W.shape}")
    check_decoder_values(W, inst.embeddings)
    raw = W
    W = (quotient or SoftmaxQuotient.of(inst.embeddings)).project(raw)
    frequency = np.asarray(frequency)
    if frequency.shape != (merge.V,):
        raise InputError(f"frequency: expected shape ({merge.V},), got {frequency.shape}")
    if bracket is None:
        bracket = merged_bracket(limits, separable)
    nan = float("nan")
    values, per_token = _merged_pass(limits, W, np.asarray(merge.kept))
    values["entropy"] = limits.entropy
    upper = bracket.get("excess_upper")
    values["excess_over_bracket"] = values["excess_loss"] - upper if isinstance(upper, float) else nan
    nrm = float(np.linalg.norm(W))
    values["norm"] = nrm
    values["raw_norm"] = float(np.linalg.norm(raw))
    values["raw_invariant_norm"] = _diff_norm(raw, W)
    values["normalized_margin"] = values["margin"] / nrm if nrm > 0 else nan
    Wr = merge.reduce_rows(W)
    PFr, f_note = _project(limits.subspace, Wr, limits.W_star)
    nobs = merge.observed.size
    PF = np.zeros_like(W)
    PF[merge.observed] = PFr[:nobs]
    W_star = np.zeros_like(W)
    W_star[merge.observed] = limits.W_star[:nobs]
    dist = float(np.linalg.norm(PF - W_star))
    ws = float(np.linalg.norm(W_star))
    values["dist_F"] = dist
    values["rel_dist_F"] = dist / ws if ws > 0 else nan
    values["perp_fraction"] = float(np.linalg.norm(W - PF)) / nrm if nrm > 0 else nan
    eq = limits.system.apply_eq(Wr)
    values["eq_violation"] = (float(np.abs(eq).max()) if eq.size else 0.0) / nrm if nrm > 0 else nan
    Wp = W - PF
    Wmm = None if limits.W_mm is None else merge.expand_rows(limits.W_mm)  # the full vocabulary's (weighted solve)
    pn = float(np.linalg.norm(Wp))
    values["cos_mm"] = nan if Wmm is None else cosine(W, Wmm)
    values["cos_perp_mm"] = nan if Wmm is None else cosine(Wp, Wmm)
    values["norm_matched_distance"] = nan if (Wmm is None or pn == 0) else float(
        np.linalg.norm(Wp - (pn / limits.svm.norm) * Wmm)) / pn
    bins = []
    for label, idx in frequency_bins(frequency):
        rel, share = _bin_dist(PF[idx], W_star[idx], ws)
        bins.append({"label": label, "tokens": int(idx.size), "frequency": int(frequency[idx].sum()),
                     "rel_dist_F": rel, "dist_F_share": share,
                     "cos_perp_mm": nan if Wmm is None else _bin_cosine(Wp[idx], Wmm[idx], limits.svm),
                     **_bin_excess(per_token, idx)})
    notes = {"F": f_note} if f_note else {}
    notes.update(_null_notes(values, bins, limits, nrm, mm_reason=None if Wmm is not None else "see notes.W_mm"))
    if Wmm is None:
        notes["W_mm"] = limits.svm_error or MERGED_MM_NOTE
    else:
        notes["W_mm"] = (f"solved on the merged instance with the representative's row weighed by the {merge.merged:,} "
                         "tokens it stands for, then copied to each of them: the full vocabulary's "
                         + ("W^mm_P" if limits.split is not None else "W^mm"))
    notes["vocabulary"] = (f"the instance keeps {merge.V_reduced:,} of the model's {merge.V:,} tokens ({merge.merged:,} "
                           "unseen ones merged into one); the decoder's numbers are over all of them")
    split = limits.split
    if split is not None and split.limit is not None:
        values["L_star"] = split.limit.L_star
        values["loss_over_L_star"] = values["loss"] - split.limit.L_star
        notes["limits"] = (f"not separable: {len(merge.expand_pairs(split.nonseparable)):,} non-separable pair(s) of "
                           f"the full vocabulary ({split.split_note}); F is F_N, W* is W_fin and W^mm is W^mm_P "
                           "(rel_dist_F = ||P_F_N W - W_fin||/||W_fin||, cos_perp_mm = cos(P_F_N^perp W, W^mm_P)); "
                           "loss_over_L_star = CE(W) - L*" + _convergence_note(split.limit))
    return Comparison(values, bracket, bins, notes)


def _project(sub: Any, W: np.ndarray, W_star: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    """:math:`P_F W` and, on the sparse path, what LSMR reached (W* too) when it stopped before its tolerance;
    on the Cholesky path the relative residuals of both (every F number with its residual)."""
    if sub.method == "cholesky":
        system = sub.system
        PF = sub.project(W)
        AW = system.apply_eq(W)
        r_pf = float(np.linalg.norm(system.apply_eq(W - PF)) / max(np.linalg.norm(AW), 1e-300))
        note = (f"F by the Cholesky factor of A A^T ({system.n_eq:,} rows; rows/subspace.py): relative residual of "
                f"P_F W ||A (W - P_F W)|| / ||A W|| = {r_pf:.2e}")
        if W_star is not None:
            b = system.log_odds()
            r_w = float(np.linalg.norm(system.apply_eq(W_star) - b) / max(np.linalg.norm(b), 1.0))
            note += f", of W* ||A W* - b|| / ||b|| = {r_w:.2e}"
        return PF, note
    if sub.method != "lsmr":
        return sub.project(W), ""
    from ntpcert.rows.subspace import lsmr_solve

    x, info = lsmr_solve(sub.operator.T, W.reshape(-1), strict=False, max_iter=MERGED_LSMR_MAX_ITER)
    PF = np.asarray(sub.operator.T @ x).reshape(W.shape)
    fit = sub.solve_info or {}
    parts = []
    if not info["converged"]:
        parts.append(f"P_F W: LSMR stopped after {info['iterations']} iterations (||A^T r|| = "
                     f"{info['normal_residual']:.3g}, ||r|| = {info['residual']:.3g})")
    if fit.get("converged") is False:
        parts.append(f"W*: LSMR stopped after {fit.get('iterations')} iterations (||A W* - b|| = "
                     f"{fit.get('residual', float('nan')):.3g}, ||A^T r|| = {fit.get('normal_residual', float('nan')):.3g})")
    note = ("; ".join(parts) + f" (iteration cap {MERGED_LSMR_MAX_ITER}): rel_dist_F and perp_fraction are "
            "approximate") if parts else ""
    return PF, note


def merged_bracket(limits: Limits, separable: bool | None) -> dict[str, Any]:
    """``[0, 0]`` by the paper's Theorem 1 when the merged instance is compatible and separable (float
    verdicts, which are the full vocabulary's); else not computed, saying why."""
    if limits.compatible is True and separable is True:
        return {"excess_lower": 0.0, "excess_upper": 0.0, "engine": "theorem",
                "reason": "the float verdicts say compatible and separable"}
    return {"skipped": "not computed: the bracket on L* - H of the merged instance is not the full vocabulary's "
                       "(CE counts every unseen token); compare on the full instance for it"}
