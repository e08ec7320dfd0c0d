r"""Neural-collapse (NC) metrics of an instance and a decoder, beside the limits and the UFM's prediction.

**Token classes.** Class c is a next token that follows at least one context: context j is a sample of
class c with weight :math:`a_{jc}`, its count ``counts[j, c]`` (or :math:`\pi_j p_{j,c}` for an instance
built from probabilities: the same numbers up to the factor n). Tokens with no sample (never a next token;
a model's merged unseen tokens and their representative) are not classes; ``classes.excluded`` says how
many. With :math:`N_c=\sum_j a_{jc}` and :math:`N=\sum_c N_c`:

.. math::

    \mu_c = \tfrac1{N_c}\sum_j a_{jc}h_j,\qquad \mu_G = \tfrac1C\sum_c\mu_c,\qquad \bar\mu_c=\mu_c-\mu_G,\qquad
    \sigma_c^2 = \tfrac1{N_c}\sum_j a_{jc}\|h_j-\mu_c\|^2,

    \Sigma_W = \tfrac1N\sum_c\sum_j a_{jc}(h_j-\mu_c)(h_j-\mu_c)^\top,\qquad
    \Sigma_B = \tfrac1C\sum_c\bar\mu_c\bar\mu_c^\top .

The global mean is the *unweighted* mean of the class means, as in ``neural_collapse``
(github.com/rhubarbwu/neural-collapse, ``MeanAccumulator.compute()`` with its default ``weighted=False``, which
the Linguistic Collapse analysis, arXiv 2405.17767, calls); :math:`\Sigma_W` divides by all N samples
(``CovarAccumulator``). :math:`\hat x = x/(\|x\|+\epsilon)` is that package's ``normalize`` (:math:`\epsilon`
the float64 machine epsilon; a zero vector stays 0). Statistics over pairs are over the :math:`C(C-1)/2`
unordered pairs :math:`c<c'`, divided by their number (``symm_reduce``); statistics over classes use the
unbiased variance (``torch.var``), as the package's analysis records them.

* **NC1** (within-class variability). ``cdnv`` (the headline ``nc1``): the class-distance normalised variance
  of Galanti et al. (arXiv 2112.15121), the package's ``variability_cdnv`` with exponent 1,
  :math:`\operatorname{mean}_{c<c'}\,(\sigma_c^2+\sigma_{c'}^2)/(2\|\mu_c-\mu_{c'}\|^2)`, over the pairs whose means
  do not coincide (see below; ``coincident_pairs`` counts the others). ``within_ratio``
  :math:`\operatorname{Tr}(\Sigma_W\Sigma_B^\dagger)/C` (``covariance_ratio``, Papyan et al. 2020; the
  pseudo-inverse keeps eigenvalues above :math:`d\epsilon` times the largest, ``torch.linalg.pinv``'s rule).
* **NC2** (class means equinorm and equiangular). ``norm_cv`` :math:`\operatorname{std}_c\|\bar\mu_c\|/
  \operatorname{mean}_c\|\bar\mu_c\|` and ``log_norm_var`` :math:`\operatorname{var}_c\log\|\bar\mu_c\|`
  (equinormness); ``interference_mean`` and ``interference_std``, the mean and the standard deviation of
  :math:`\cos_{cc'}=\hat{\bar\mu}_c^\top\hat{\bar\mu}_{c'}` over pairs (equiangularity; a simplex ETF has every
  cosine :math:`-1/(C-1)`); ``etf_error`` (the headline ``nc2``, ``simplex_etf_error``)
  :math:`\|G/\|G\|_F - (I-\mathbf 1\mathbf 1^\top/C)/\sqrt{C-1}\|_F` with :math:`G=\bar M\bar M^\top`, and
  ``etf_error_floor`` :math:`\sqrt{2-2\sqrt{\min(d,C-1)/(C-1)}}`, the least ``etf_error`` of any C points of
  :math:`\mathbb R^d` (G has rank at most d: :math:`\langle G,I-\mathbf 1\mathbf 1^\top/C\rangle\le
  \operatorname{tr}G\le\sqrt d\|G\|_F`), 0 exactly when :math:`C\le d+1`. **GNC2** (hyperspherical
  uniformity, Liu et al. arXiv 2303.06484): ``log_kernel_mean`` and ``log_kernel_var``, the mean and the
  variance over pairs of :math:`\log\|\hat{\bar\mu}_c-\hat{\bar\mu}_{c'}\|^{-1}` (``kernel_stats`` with
  ``log_kernel``; the paper's GNC2 is the variance), over the pairs whose directions do not coincide.
* **NC3** (self-duality) of a decoder with class rows :math:`w_c`: ``self_duality_error`` (the headline ``nc3``,
  ``self_duality_error``, Kothapalli arXiv 2206.04041) :math:`\|S/\|S\|_F-(I-\mathbf 1\mathbf 1^\top/C)/\sqrt{C-1}\|_F`
  with :math:`S_{cc'}=w_c^\top\bar\mu_{c'}`, and ``self_duality_error_centred``, the same with the class rows
  centred, :math:`w_c-\tfrac1C\sum_{c'}w_{c'}`; ``duality_distance_mean``
  :math:`\operatorname{mean}_c\|\hat w_c-\hat{\bar\mu}_c\|` (``distance_norms``); ``duality_cos_mean`` and
  ``duality_cos_var``, the mean and the variance of :math:`\cos(w_c,\bar\mu_c)` (uniform duality, UNC3,
  2405.17767: its variance); ``w_norm_cv`` :math:`\operatorname{std}_c\|w_c\|/\operatorname{mean}_c\|w_c\|`
  (the decoder's equinormness).
* **NC4** (``ncc_agreement``, the headline ``nc4``): the fraction of samples, weighted by :math:`a_{jc}` (so by
  context: :math:`\sum_j\pi_j[\ldots]`), where the decoder's decision :math:`\arg\max_c w_c^\top h_j` over the
  classes is the nearest class mean :math:`\arg\min_c\|h_j-\mu_c\|` (``clf_ncc_agreement``, weighted). Ties
  count as agreement: context j agrees when some class is among both the decoder's maxima (logits within
  :data:`TIE_RTOL` :math:`\|h_j\|\max_c\|w_c\|` of the largest) and the nearest means (squared distances within
  :data:`TIE_RTOL` :math:`(\|h_j-\mu_G\|^2+\max_c\|\bar\mu_c\|^2)` of the least). The package compares the two
  argmax indices; the rules agree wherever the nearest mean and the decoder's maximum are unique, and where
  two tokens have the same mean (common in text: two tokens that only ever follow one context) the package's
  answer depends on rounding, this one does not.

**Coincident means.** Two tokens that follow the same contexts in the same proportions have the same class
mean: their CDNV is 0/0 (or :math:`\sigma^2/0`) and their log kernel :math:`+\infty`. Such pairs are left
out of the mean of the CDNV (of the log kernel: pairs whose normalised centred means coincide), and counted:
a pair coincides when :math:`\|\mu_c-\mu_{c'}\|\le` :data:`COINCIDENT_RTOL` :math:`\max(\|\mu_c\|,\|\mu_{c'}\|)`
(and :math:`\|\hat{\bar\mu}_c-\hat{\bar\mu}_{c'}\|\le` :data:`COINCIDENT_RTOL` for the kernel), each distance
computed from the two vectors directly. The package would report inf or NaN there.

**Invariance.** The NC1, NC2 and GNC2 numbers of the means are of the embeddings only, and the same for
:math:`h_j+t` and :math:`ah_j` (every one is of centred means, differences or ratios). Of a decoder's numbers,
``ncc_agreement`` (argmax over classes) and ``self_duality_error_centred`` are the same for W and for every
W + D that changes no prediction (:math:`Dh_j\in\operatorname{span}(\mathbf 1)`,
:mod:`ntpcert.dynamics.invariance`: centring the class rows removes :math:`\mathbf 1c^\top`, and the centred
means lie in the span of the :math:`h_j`, so a change E with :math:`EH^\top=0` leaves S alone);
``self_duality_error`` changes under :math:`W+\mathbf 1c^\top` only, ``duality_*`` and ``w_norm_cv`` under
both; they are of W as given, as in the package. Every decoder number is the same for aW, a > 0.

**Beside what the theory predicts.** The decoder's numbers sit beside the same numbers of the limits
(:class:`~ntpcert.dynamics.trajectory.Limits`): ``W_star`` (W* on F, or W_fin on data that are not
separable) and ``W_mm`` (:math:`W^{mm}`, or :math:`W^{mm}_P`), each as a decoder on the same means; and, for
small instances (:data:`UFM_MAX_ENTRIES`), ``ufm``: every number for the unconstrained-features model's limit
geometry, the balanced factors of :math:`L^{mm}` (:mod:`ntpcert.geometry.analysis`: contexts with the same
support collapse, :math:`\mathbf 1^\top L^{mm}=0`), with the instance's class weights. The ideal of neural
collapse (balanced classes, :math:`C\le d+1`) is ``cdnv`` = 0, ``etf_error`` = 0, ``self_duality_error`` = 0,
``ncc_agreement`` = 1; ``etf_error_floor`` is the least ``etf_error`` (and ``self_duality_error``, whose S has
rank at most d too) when C > d + 1. ``head``: the spectrum of the decoder modulo the invariant directions
(its singular values, numerical rank, effective rank :math:`\exp(-\sum_i p_i\log p_i)` with
:math:`p_i=s_i/\sum s`, stable rank :math:`\|W\|_F^2/s_1^2`, and the rank holding 99% of :math:`\|W\|_F^2`)
against the ranks the limits need: of W*, of :math:`W^{mm}`, of :math:`W^*+tW^{mm}` (at
:math:`t=\|W^*\|/\|W^{mm}\|`; the rank of the sum is the same for all but finitely many t), dim F, and the
rank of H.

**Scale.** The class statistics cost one pass over the nonzero :math:`a_{jc}` (:math:`O(\mathrm{nnz}\,d^2)`);
the pairwise numbers one pass over blocks of the Gram matrix of the centred means (:math:`O(C^2d)`, never the
whole C×C matrix; above :data:`MAX_PAIRWISE_CLASSES` classes they are null, saying so); NC4 one pass over
blocks of contexts, one (rows, C) product per decoder (:math:`O(mCd)` each; above :data:`MAX_NCC_WORK` null,
and for the limits above :data:`LIMITS_NCC_WORK`). At a GPT-2 head's scale on the pydoc text (m = 31,621,
C = 5,711, d = 768, V = 50,257; synthetic h, a loaded 2-core machine at 47% CPU): class statistics 8.3 s,
pairs 6.9 s, the decoder's NC4 30 s, the head 13.6 s, beside compare's own 263 s. Every number is float64
and carries no tolerance: these are measurements, not verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ntpcert.errors import InputError

__all__ = ["COINCIDENT_RTOL", "CollapseReport", "ClassMeans", "DECODER_KEYS", "FEATURE_KEYS", "HEADLINE",
           "LIMITS_NCC_WORK", "MAX_NCC_WORK", "MAX_PAIRWISE_CLASSES", "RANK_RTOL", "SVD_MAX_ENTRIES", "TIE_RTOL",
           "UFM_GAP_TOL", "UFM_MAX_ENTRIES", "class_means", "collapse", "decoder_metrics", "feature_metrics",
           "spectrum"]

#: Two class means (or normalised centred means) coincide when their distance is at most this times the
#: larger norm (module doc): float64 rounding of equal means is about 1e-16 of it.
COINCIDENT_RTOL = 1e-10
#: A pair is recomputed from its two vectors (not from the Gram matrix) when its squared distance from the
#: Gram matrix is at most this times the sum of the squared norms (where the Gram difference has lost digits).
NEAR_RTOL = 1e-6
#: NC4's ties (module doc).
TIE_RTOL = 1e-9
#: Singular values above this fraction of the largest count for the ranks of ``head``.
RANK_RTOL = 1e-6
#: Above this many classes the pairwise numbers (``cdnv``, ``interference_*``, ``log_kernel_*``) are null:
#: their pass costs C^2 d / 2 multiply-adds (at C = 5,711, d = 768: 1.3e10).
MAX_PAIRWISE_CLASSES = 20_000
#: Above this m C d (multiply-adds of one decoder's class logits, and as many for the distances to the means)
#: the decoder's NC4 is null. At m = 31,621, C = 5,711, d = 768 (a GPT-2 head on the pydoc text) it is 1.4e11.
MAX_NCC_WORK = 1e12
#: The same for the NC4 of W* and W^mm, lower: each costs as much as the decoder's own logits, about 15 s at the
#: pydoc scale on a loaded 2-core machine (the decoder's NCC and logits took 30 s), beside compare's 263 s.
LIMITS_NCC_WORK = 3e10
#: The UFM's numbers need the nuclear-norm NTP-SVM of the instance (:mod:`ntpcert.geometry.analysis`): only
#: while m V is at most this (at m V = 800, about 1 s; m V = 3,000 took 13 s at the default gap).
UFM_MAX_ENTRIES = 1_000
#: The relative gap the UFM's NTP-SVM is solved to (the structured solver's default is tighter, and took up to
#: 5 s where this takes 2 s, on 12 x 9 instances): the NC numbers are measurements.
UFM_GAP_TOL = 1e-8
#: Largest V d whose singular values come from the SVD (above: from the d×d Gram matrix).
SVD_MAX_ENTRIES = 4_000_000
#: Singular values listed in ``head``.
HEAD_TOP = 32
#: Contexts (NC4) and classes (pairs) per block.
BLOCK = 512
#: Nonzero weights per block of the class statistics.
NNZ_BLOCK = 8192

#: The numbers of the means (NC1, NC2, GNC2), in report order.
FEATURE_KEYS = ("cdnv", "cdnv_pairs", "coincident_pairs", "within_ratio", "norm_cv", "log_norm_var",
                "interference_mean", "interference_std", "etf_error", "etf_error_floor", "log_kernel_mean",
                "log_kernel_var", "log_kernel_pairs")
#: The numbers of a decoder against the means (NC2 of its rows, NC3, NC4).
DECODER_KEYS = ("w_norm_cv", "self_duality_error", "self_duality_error_centred", "duality_distance_mean",
                "duality_cos_mean", "duality_cos_var", "ncc_agreement")
#: The headline numbers and the keys they come from.
HEADLINE = {"nc1": ("features", "cdnv"), "nc2": ("features", "etf_error"), "nc3": ("decoder", "self_duality_error"),
            "nc4": ("decoder", "ncc_agreement")}

_EPS = float(np.finfo(np.float64).eps)
_NAN = float("nan")


@dataclass(frozen=True, eq=False)
class ClassMeans:
    """The class statistics of an instance (module doc).

    Attributes
    ----------
    classes : ndarray of shape (C,)
        The instance's token (column) of each class, increasing.
    mass : ndarray of shape (C,)
        :math:`N_c`.
    means : ndarray of shape (C, d)
        :math:`\\mu_c`.
    global_mean : ndarray of shape (d,)
        :math:`\\mu_G`, the mean of the class means.
    variances : ndarray of shape (C,)
        :math:`\\sigma_c^2`.
    within : ndarray of shape (d, d)
        :math:`\\Sigma_W`.
    embeddings : ndarray of shape (m, d)
        The :math:`h_j` (a reference to the instance's).
    context_mass : ndarray of shape (m,)
        :math:`\\sum_c a_{jc}`, each context's weight in NC4.
    weighting : str
        ``"counts"`` or ``"probs x weights"``.
    """

    classes: np.ndarray
    mass: np.ndarray
    means: np.ndarray
    global_mean: np.ndarray
    variances: np.ndarray
    within: np.ndarray
    embeddings: np.ndarray
    context_mass: np.ndarray
    weighting: str

    @property
    def C(self) -> int:
        return int(self.classes.size)

    @property
    def centred(self) -> np.ndarray:
        """:math:`\\bar\\mu_c`, shape (C, d)."""
        return self.means - self.global_mean


def _weight_entries(instance: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(rows, cols, a)``: the nonzero :math:`a_{jc}` (row-major), read a block of contexts at a time."""
    if instance.has_counts:  # the non-zero counts themselves, row-major (sparse instances: no dense counts)
        rows, cols, c = instance.count_entries()
        return rows, cols, c.astype(np.float64), "counts"
    counts = None
    rows, cols, vals = [], [], []
    for s in range(0, instance.m, BLOCK):
        P = instance.probs[s:s + BLOCK]
        r, c = np.nonzero(P > 0)
        rows.append(r + s)
        cols.append(c)
        vals.append(counts[s:s + BLOCK][r, c].astype(np.float64) if counts is not None
                    else instance.weights[s:s + BLOCK][r] * P[r, c])
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
    return (cat(rows, np.int64), cat(cols, np.int64), cat(vals, np.float64),
            "counts" if counts is not None else "probs x weights")


def class_means(instance: Any, embeddings: np.ndarray | None = None) -> ClassMeans:
    """The :class:`ClassMeans` of ``instance`` (an :class:`~ntpcert.instance.NTPInstance`), of its own
    embeddings or of ``embeddings`` (shape (m, k): other context embeddings with the same classes, as the
    UFM's)."""
    H = np.asarray(instance.embeddings if embeddings is None else embeddings, dtype=np.float64)
    if H.ndim != 2 or H.shape[0] != instance.m:
        raise InputError(f"embeddings: expected shape (m, k) with m = {instance.m}, got {H.shape}")
    rows, cols, a, weighting = _weight_entries(instance)
    mass_v = np.bincount(cols, weights=a, minlength=instance.V)
    classes = np.flatnonzero(mass_v > 0)
    index = np.full(instance.V, -1, dtype=np.int64)
    index[classes] = np.arange(classes.size)
    c = index[cols]
    C, d = classes.size, H.shape[1]
    mass = mass_v[classes]
    sums = np.zeros((C, d))
    for s in range(0, a.size, NNZ_BLOCK):
        blk = slice(s, s + NNZ_BLOCK)
        np.add.at(sums, c[blk], a[blk, None] * H[rows[blk]])
    means = sums / mass[:, None] if C else sums
    var = np.zeros(C)
    within = np.zeros((d, d))
    for s in range(0, a.size, NNZ_BLOCK):
        blk = slice(s, s + NNZ_BLOCK)
        D = H[rows[blk]] - means[c[blk]]
        var += np.bincount(c[blk], weights=a[blk] * np.einsum("ij,ij->i", D, D), minlength=C)
        within += (D * a[blk, None]).T @ D
    total = float(mass.sum())
    context_mass = np.bincount(rows, weights=a, minlength=instance.m)
    return ClassMeans(classes, mass, means, means.mean(axis=0) if C else np.zeros(d),
                      var / mass if C else var, within / total if total > 0 else within, H, context_mass, weighting)


def _normalize(X: np.ndarray) -> np.ndarray:
    """``neural_collapse.util.normalize``: each row over its norm plus eps (a zero row stays 0)."""
    return X / (np.linalg.norm(X, axis=1, keepdims=True) + _EPS)


def _structure_error(A: np.ndarray, B: np.ndarray) -> float:
    r""":math:`\|S/\|S\|_F - (I-\mathbf 1\mathbf 1^\top/C)/\sqrt{C-1}\|_F` with :math:`S = BA^\top` (C×C),
    ``neural_collapse.measure.structure_error``, from d×d products: :math:`\|S\|_F^2=\langle B^\top B,
    A^\top A\rangle`, :math:`\langle S, I - \mathbf 1\mathbf 1^\top/C\rangle = \sum_c b_c^\top a_c -
    (\sum_c b_c)^\top(\sum_c a_c)/C` (the unit target has norm 1)."""
    C = A.shape[0]
    s2 = float(np.sum((B.T @ B) * (A.T @ A)))
    if C < 2 or not s2 > 0:
        return _NAN
    inner = float(np.einsum("ij,ij->", B, A) - B.sum(axis=0) @ A.sum(axis=0) / C) / math.sqrt(C - 1)
    return math.sqrt(max(0.0, 2.0 - 2.0 * inner / math.sqrt(s2)))


def _cv(x: np.ndarray) -> float:
    """std (unbiased) over mean; NaN with fewer than two values or a zero mean."""
    if x.size < 2 or not float(x.mean()) != 0:
        return _NAN
    return float(np.std(x, ddof=1) / np.mean(x))


def _var(x: np.ndarray) -> float:
    return float(np.var(x, ddof=1)) if x.size >= 2 and np.all(np.isfinite(x)) else _NAN



def _near_pairs(d2: np.ndarray, base: np.ndarray, X: np.ndarray, gi: np.ndarray, gj: np.ndarray,
                size2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Squared distances of the rows (gi, gj) of X from a Gram difference ``d2``, recomputed directly where
    it lost digits (at most NEAR_RTOL of ``base``), and which pairs coincide (within COINCIDENT_RTOL of the
    larger of ``size2``, the squared sizes)."""
    near = np.flatnonzero(d2 <= NEAR_RTOL * base)
    if near.size:
        diff = X[gi[near]] - X[gj[near]]
        d2[near] = np.einsum("ij,ij->i", diff, diff)
    coincide = np.zeros(d2.size, dtype=bool)
    coincide[near] = d2[near] <= COINCIDENT_RTOL ** 2 * np.maximum(size2[gi[near]], size2[gj[near]])
    return d2, coincide

def _pairwise(cm: ClassMeans) -> dict[str, float]:
    """CDNV, the cosines' mean and spread and the log kernel, over the pairs c < c', by blocks of rows of the
    Gram matrix of the centred means (module doc)."""
    M, Mc = cm.means, cm.centred
    C = cm.C
    n2 = np.einsum("ij,ij->i", Mc, Mc)
    nrm = np.sqrt(n2)
    scale = nrm + _EPS
    Xh = Mc / scale[:, None]
    q = (nrm / scale) ** 2  # ||x_hat||^2
    raw2 = np.einsum("ij,ij->i", M, M)
    var = cm.variances
    pairs = C * (C - 1) // 2
    sx = Xh.sum(axis=0)
    cos_mean = (float(sx @ sx) - float(q.sum())) / (2 * pairs)
    cos_ss = cdnv_sum = k_s1 = k_s2 = 0.0
    n_cdnv = n_kern = 0
    shift = None
    for s in range(0, C, BLOCK):
        e = min(s + BLOCK, C)
        G = Mc[s:e] @ Mc[s:].T  # (b, C - s): rows s..e-1 against columns s..C-1
        ii, jj = np.nonzero(np.arange(s, C)[None, :] > np.arange(s, e)[:, None])
        gi, gj = ii + s, jj + s
        g = G[ii, jj]
        cos = g / (scale[gi] * scale[gj])
        cos_ss += float(np.sum((cos - cos_mean) ** 2))
        # CDNV: squared distances of the means, recomputed directly where the Gram difference lost digits
        d2, coincide = _near_pairs(n2[gi] + n2[gj] - 2.0 * g, n2[gi] + n2[gj], M, gi, gj, raw2)
        keep = ~coincide
        cdnv_sum += float(np.sum((var[gi[keep]] + var[gj[keep]]) / (2.0 * d2[keep])))
        n_cdnv += int(keep.sum())
        # log kernel of the normalised centred means
        k2, coincide = _near_pairs(q[gi] + q[gj] - 2.0 * cos, q[gi] + q[gj], Xh, gi, gj, q)
        vals = -0.5 * np.log(k2[~coincide])
        if vals.size:
            if shift is None:
                shift = float(vals.mean())
            k_s1 += float(np.sum(vals - shift))
            k_s2 += float(np.sum((vals - shift) ** 2))
            n_kern += vals.size
    out = {"cdnv": cdnv_sum / n_cdnv if n_cdnv else _NAN, "cdnv_pairs": n_cdnv, "coincident_pairs": pairs - n_cdnv,
           "interference_mean": cos_mean, "interference_std": math.sqrt(cos_ss / pairs),
           "log_kernel_pairs": n_kern}
    if n_kern:
        m1 = k_s1 / n_kern
        out["log_kernel_mean"] = shift + m1
        out["log_kernel_var"] = max(0.0, k_s2 / n_kern - m1 * m1)
    else:
        out["log_kernel_mean"] = out["log_kernel_var"] = _NAN
    return out


def feature_metrics(cm: ClassMeans) -> tuple[dict[str, float], dict[str, str]]:
    """The NC1, NC2 and GNC2 numbers of the means (:data:`FEATURE_KEYS`) and why any is NaN."""
    C, d = cm.C, cm.means.shape[1]
    out: dict[str, float] = {k: _NAN for k in FEATURE_KEYS}
    why: dict[str, str] = {}
    if C < 2:
        return out, {k: f"{C} class(es): every NC number needs two" for k in FEATURE_KEYS}
    Mc = cm.centred
    SB = Mc.T @ Mc / C
    lam, U = np.linalg.eigh(SB)
    keep = lam > d * _EPS * max(float(lam[-1]), 0.0)
    if lam[-1] > 0:
        Uk = U[:, keep]
        out["within_ratio"] = float(np.sum(np.sum(Uk * (cm.within @ Uk), axis=0) / lam[keep])) / C
    else:
        why["within_ratio"] = "the class means coincide: Sigma_B = 0"
    nrm = np.linalg.norm(Mc, axis=1)
    out["norm_cv"] = _cv(nrm)
    with np.errstate(divide="ignore"):
        out["log_norm_var"] = _var(np.log(nrm))
    if not math.isfinite(out["log_norm_var"]):
        why["log_norm_var"] = "a class mean is the global mean (log 0)"
    out["etf_error"] = _structure_error(Mc, Mc)
    out["etf_error_floor"] = math.sqrt(max(0.0, 2.0 - 2.0 * math.sqrt(min(d, C - 1) / (C - 1))))
    if C > MAX_PAIRWISE_CLASSES:
        reason = (f"not computed: {C:,} classes, above MAX_PAIRWISE_CLASSES = {MAX_PAIRWISE_CLASSES:,} (the pass over "
                  f"pairs costs C^2 d / 2 = {C * C * d / 2:.2g} multiply-adds)")
        for k in ("cdnv", "cdnv_pairs", "coincident_pairs", "interference_mean", "interference_std",
                  "log_kernel_mean", "log_kernel_var", "log_kernel_pairs"):
            why[k] = reason
    else:
        out.update(_pairwise(cm))
        if not out["cdnv_pairs"]:
            why["cdnv"] = "every pair of class means coincides"
        if not out["log_kernel_pairs"]:
            why["log_kernel_mean"] = why["log_kernel_var"] = "every pair of normalised centred means coincides"
    if not math.isfinite(out["norm_cv"]):
        why["norm_cv"] = "every class mean is the global mean"
    if not math.isfinite(out["etf_error"]):
        why["etf_error"] = "every class mean is the global mean"
    return out, why


def _ncc_agreement(cm: ClassMeans, decoders: Sequence[np.ndarray]) -> list[float]:
    """NC4 of each decoder (class rows, shape (C, d)) in one pass over blocks of contexts."""
    H, Mc, mu = cm.embeddings, cm.centred, cm.global_mean
    n2 = np.einsum("ij,ij->i", Mc, Mc)
    n2max = float(n2.max())
    wmax = [float(np.linalg.norm(Wc, axis=1).max()) for Wc in decoders]
    hits = np.zeros(len(decoders))
    total = float(cm.context_mass.sum())
    for s in range(0, H.shape[0], BLOCK):
        Hb = H[s:s + BLOCK]
        w = cm.context_mass[s:s + BLOCK]
        Hc = Hb - mu
        dist = n2[None, :] - 2.0 * (Hc @ Mc.T)  # ||h - mu_c||^2 - ||h - mu_G||^2
        tol_d = TIE_RTOL * (np.einsum("ij,ij->i", Hc, Hc) + n2max)
        ncc = dist <= dist.min(axis=1, keepdims=True) + tol_d[:, None]
        hn = np.linalg.norm(Hb, axis=1)
        for i, Wc in enumerate(decoders):
            Z = Hb @ Wc.T
            lin = Z >= Z.max(axis=1, keepdims=True) - (TIE_RTOL * hn * wmax[i])[:, None]
            hits[i] += float(w @ np.any(ncc & lin, axis=1))
    return [float(h / total) for h in hits]


def decoder_metrics(cm: ClassMeans, decoders: Sequence[np.ndarray | None], *, max_work: float | None = None,
                    cap_name: str = "MAX_NCC_WORK") -> tuple[list[dict[str, float] | None], dict[str, str]]:
    """:data:`DECODER_KEYS` of each decoder's class rows (shape (C, d), rows in the order of ``cm.classes``;
    None gives None) against the means, and why a number is NaN (the same reasons for every decoder). NC4 is
    NaN when m C d is above ``max_work`` (default :data:`MAX_NCC_WORK`; ``cap_name`` names it in the reason)."""
    C = cm.C
    Mc = cm.centred
    outs: list[dict[str, float] | None] = []
    why: dict[str, str] = {}
    given = [np.asarray(W, dtype=np.float64) for W in decoders if W is not None]
    m, d = cm.embeddings.shape
    work = float(m) * C * d
    cap = MAX_NCC_WORK if max_work is None else max_work
    if C < 2:
        agree = [_NAN] * len(given)
        why["ncc_agreement"] = f"{C} class(es): every NC number needs two"
    elif work > cap:
        agree = [_NAN] * len(given)
        why["ncc_agreement"] = (f"not computed: m C d = {work:.3g} multiply-adds per decoder, above {cap_name} = "
                                f"{cap:.0e}")
    else:
        agree = _ncc_agreement(cm, given)
    Xh = _normalize(Mc)
    k = 0
    for W in decoders:
        if W is None:
            outs.append(None)
            continue
        W = given[k]
        out = {key: _NAN for key in DECODER_KEYS}
        out["ncc_agreement"] = agree[k]
        k += 1
        if C >= 2:
            wn = np.linalg.norm(W, axis=1)
            out["w_norm_cv"] = _cv(wn)
            out["self_duality_error"] = _structure_error(Mc, W)
            out["self_duality_error_centred"] = _structure_error(Mc, W - W.mean(axis=0))
            out["duality_distance_mean"] = float(np.mean(np.linalg.norm(_normalize(W) - Xh, axis=1)))
            mn = np.linalg.norm(Mc, axis=1)
            den = wn * mn
            cos = np.where(den > 0, np.einsum("ij,ij->i", W, Mc) / np.where(den > 0, den, 1.0), 0.0)
            out["duality_cos_mean"] = float(cos.mean())
            out["duality_cos_var"] = _var(cos)
        outs.append(out)
    if C < 2:
        why.update({k2: f"{C} class(es): every NC number needs two" for k2 in DECODER_KEYS})
    return outs, why


def spectrum(W: np.ndarray, top: int = HEAD_TOP, *, quotient: Any = None) -> dict[str, Any]:
    """Singular values of ``W`` (shape (V, d); the first ``top``), or of :math:`P(W)` with ``quotient`` (a
    :class:`~ntpcert.dynamics.invariance.SoftmaxQuotient`), its numerical rank (above :data:`RANK_RTOL` of the
    largest), effective rank, stable rank and the rank holding 99% of :math:`\\|W\\|_F^2`."""
    s = _singular_values(W, quotient)
    if s.size == 0 or not s[0] > 0:
        return {"singular_values": [], "rank": 0, "effective_rank": _NAN, "stable_rank": _NAN, "rank_99": 0}
    p = s / s.sum()
    p = p[p > 0]
    e2 = np.cumsum(s ** 2) / float(np.sum(s ** 2))
    return {"singular_values": [float(x) for x in s[:top]], "rank": int(np.sum(s > RANK_RTOL * s[0])),
            "effective_rank": float(np.exp(-np.sum(p * np.log(p)))), "stable_rank": float(np.sum(s ** 2) / s[0] ** 2),
            "rank_99": int(np.searchsorted(e2, 0.99 - 1e-12) + 1)}


def _singular_values(W: np.ndarray, quotient: Any = None) -> np.ndarray:
    """Singular values of W, or of P(W) = C W Q with ``quotient``, largest first. From the SVD when V d is at
    most :data:`SVD_MAX_ENTRIES`; else from the eigenvalues of the d×d Gram matrix (one :math:`Vd^2` product, no
    (V, d) copy:
    :math:`P(W)^\\top P(W) = Q(W^\\top W - V\\bar w\\bar w^\\top)Q`), where singular values below about 1e-8 of the
    largest are rounding (:data:`RANK_RTOL` is above that)."""
    W = np.asarray(W, dtype=np.float64)
    if W.size == 0:
        return np.zeros(0)
    if W.shape[0] * W.shape[1] <= SVD_MAX_ENTRIES:
        return np.linalg.svd(W if quotient is None else quotient.project(W), compute_uv=False)
    G = W.T @ W
    if quotient is not None:
        wbar = W.mean(axis=0)
        G -= W.shape[0] * np.outer(wbar, wbar)
        if quotient.rank < quotient.d:
            B = quotient.basis
            Q = B @ B.T if quotient.row_basis else np.eye(quotient.d) - B @ B.T
            G = Q @ G @ Q
    lam = np.linalg.eigvalsh((G + G.T) / 2)[::-1]
    return np.sqrt(np.maximum(lam, 0.0))


def _rank(W: np.ndarray | None, quotient: Any = None) -> int | None:
    if W is None:
        return None
    s = _singular_values(W, quotient)
    return int(np.sum(s > RANK_RTOL * s[0])) if s.size and s[0] > 0 else 0


@dataclass(frozen=True, eq=False)
class CollapseReport:
    """The NC numbers of one decoder beside the limits' and the UFM's (module doc).

    Attributes
    ----------
    values : dict
        ``nc1`` .. ``nc4`` (NaN where undefined).
    classes : dict
        ``count`` C, ``excluded`` (the decoder's tokens with no sample), ``weighting``, ``global_mean``.
    features : dict
        :data:`FEATURE_KEYS` of the means.
    decoder, W_star, W_mm : dict or None
        :data:`DECODER_KEYS` of the decoder, of W* (W_fin) and of W^mm (W^mm_P); None where there is none.
    ufm : dict or None
        ``features`` and ``decoder`` of the UFM's limit geometry, or None (``notes["ufm"]`` says why).
    head : dict
        The decoder's spectrum and the limits' ranks.
    null : dict of str to str
        Why each number that is not finite is null in :meth:`to_json`, by its path (``"nc1"``,
        ``"features.cdnv"``, ``"W_mm"``, ...).
    notes : dict of str to str
    """

    values: dict[str, float]
    classes: dict[str, Any]
    features: dict[str, float]
    decoder: dict[str, float]
    W_star: dict[str, float] | None
    W_mm: dict[str, float] | None
    ufm: dict[str, Any] | None
    head: dict[str, Any]
    null: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Every number; non-finite ones null, ``null`` saying why."""
        out = {**self.values, "classes": self.classes, "features": self.features, "decoder": self.decoder,
               "W_star": self.W_star, "W_mm": self.W_mm, "ufm": self.ufm, "head": self.head, "null": self.null}
        if self.notes:
            out["notes"] = self.notes
        return _finite(out)


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _nulls(prefix: str, values: dict[str, float] | None, why: dict[str, str], default: str) -> dict[str, str]:
    if values is None:
        return {}
    return {f"{prefix}.{k}": why.get(k, default) for k, v in values.items()
            if isinstance(v, float) and not math.isfinite(v)}


def _ufm(instance: Any, C_rows: np.ndarray) -> tuple[dict[str, Any] | None, str]:
    """The UFM's numbers (``features``, ``decoder``) or None, and a note."""
    if instance.m * instance.V > UFM_MAX_ENTRIES:
        return None, (f"not computed: m V = {instance.m * instance.V:,} is above UFM_MAX_ENTRIES = {UFM_MAX_ENTRIES:,} "
                      "(the nuclear-norm NTP-SVM of the instance)")
    from ntpcert.geometry.analysis import analyse

    try:
        rep = analyse(instance, gap_tol=UFM_GAP_TOL)
    except (InputError, ArithmeticError, np.linalg.LinAlgError, ValueError) as exc:
        return None, f"not computed: the nuclear-norm NTP-SVM failed ({exc})"
    emb = rep.embeddings
    cm = class_means(instance, emb.H)
    feats, _ = feature_metrics(cm)
    (dec,), _ = decoder_metrics(cm, [emb.W[C_rows]])
    return {"features": feats, "decoder": dec, "rank": emb.rank, "relative_gap": rep.solution.relative_gap}, (
        "the balanced factors H, W of L^mm (the logits' direction when W and H are both trained), with the "
        f"instance's class weights; rank {emb.rank}")


def collapse(instance: Any, W: np.ndarray, limits: Any = None, *, merge: Any = None,
             ufm: bool = True) -> CollapseReport:
    """The NC numbers of the decoder ``W`` on ``instance`` beside those of ``limits`` (a
    :class:`~ntpcert.dynamics.trajectory.Limits`, optional) and of the UFM (``ufm``; small instances only).

    Parameters
    ----------
    instance : NTPInstance
    W : ndarray of shape (V, d)
        The decoder, over the instance's vocabulary, or, with ``merge``, over the model's (``merge.V`` rows).
    limits : Limits, optional
        W* (or W_fin), W^mm (or W^mm_P), F: over the instance's vocabulary.
    merge : TokenMerge, optional
        When the instance merges a model's unseen tokens (:mod:`ntpcert.instance.lm.merge`): class c is the
        model's token ``merge.kept[c]``.
    ufm : bool
        Whether to compute the UFM's numbers (within :data:`UFM_MAX_ENTRIES`).
    """
    W = np.asarray(W, dtype=np.float64)
    V_dec = instance.V if merge is None else merge.V
    if W.ndim != 2 or W.shape != (V_dec, instance.d):
        raise InputError(f"W: expected shape (V, d) = ({V_dec}, {instance.d}), got {W.shape}")
    cm = class_means(instance)
    rows = cm.classes if merge is None else np.asarray(merge.kept)[cm.classes]
    feats, why_f = feature_metrics(cm)
    W_star = None if limits is None else limits.W_star
    W_mm = None if limits is None else limits.W_mm
    Wr = W[rows]
    Wsr = None if W_star is None else np.asarray(W_star)[cm.classes]
    Wmr = None if W_mm is None else np.asarray(W_mm)[cm.classes]
    (dec,), why_d = decoder_metrics(cm, [Wr])
    (ws, wm), why_l = decoder_metrics(cm, [Wsr, Wmr], max_work=LIMITS_NCC_WORK, cap_name="LIMITS_NCC_WORK")
    null: dict[str, str] = {}
    null.update(_nulls("features", feats, why_f, "undefined"))
    for key, rows_of, vals, why, what in (("decoder", Wr, dec, why_d, "W"), ("W_star", Wsr, ws, why_l, "W*"),
                                          ("W_mm", Wmr, wm, why_l, "W^mm")):
        zero = rows_of is not None and not np.any(rows_of)
        null.update(_nulls(key, vals, {k: v for k, v in why.items() if k == "ncc_agreement"} if zero else why,
                           f"{what} is 0 on the classes' rows" if zero else f"undefined at {what}"))
    notes: dict[str, str] = {}
    if limits is not None and W_mm is None:
        null["W_mm"] = "no W^mm: " + (getattr(limits, "svm_error", None) or "the instance is not separable")
    if limits is None:
        null["W_star"] = null["W_mm"] = "no limits given"
    split = getattr(limits, "split", None)
    if split is not None and getattr(split, "limit", None) is not None:
        notes["limits"] = "not separable: W_star is W_fin and W_mm is W^mm_P"
    values = {}
    for key, (part, name) in HEADLINE.items():
        values[key] = (feats if part == "features" else dec)[name]
        if not math.isfinite(values[key]):
            null[key] = null.get(f"{part}.{name}", "undefined")
    u = None
    if ufm:
        u, notes["ufm"] = _ufm(instance, cm.classes)
        if u is None:
            null["ufm"] = notes.pop("ufm")
        else:
            null.update(_nulls("ufm.features", u["features"], {}, "undefined for the UFM's embeddings"))
            null.update(_nulls("ufm.decoder", u["decoder"], {}, "undefined for the UFM's word embeddings"))
    head, why_h = _head(instance, W, limits)
    null.update({f"head.{k}": v for k, v in why_h.items()})
    classes = {"count": cm.C, "excluded": V_dec - cm.C, "weighting": cm.weighting,
               "samples": float(cm.mass.sum()),
               "global_mean": "the mean of the class means (unweighted), as neural_collapse's MeanAccumulator"}
    return CollapseReport(values, classes, feats, dec, ws, wm, u, head, null, notes)


def _head(instance: Any, W: np.ndarray, limits: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The decoder's spectrum modulo the invariant directions and the ranks the limits need, and why a
    rank is missing."""
    from ntpcert.dynamics.invariance import SoftmaxQuotient

    q = SoftmaxQuotient.of(instance.embeddings)
    head = spectrum(W, quotient=q)
    head["raw_rank"] = _rank(W)
    head["embedding_rank"] = q.rank
    if limits is None:
        head.update(W_star_rank=None, W_mm_rank=None, limit_rank=None, dim_F=None)
        return head, {k: "no limits given" for k in ("W_star_rank", "W_mm_rank", "limit_rank", "dim_F")}
    why = {}
    Ws, Wm = limits.W_star, limits.W_mm
    head["W_star_rank"] = _rank(Ws)
    head["W_mm_rank"] = _rank(Wm)
    if Wm is None:
        head["limit_rank"] = None
        why["W_mm_rank"] = why["limit_rank"] = "no W^mm"
    else:
        ns, nm = float(np.linalg.norm(Ws)), float(np.linalg.norm(Wm))
        head["limit_rank"] = _rank(Ws + (ns / nm) * Wm) if nm > 0 and ns > 0 else _rank(Wm if nm > 0 else Ws)
    head["dim_F"] = getattr(limits.subspace, "dim", None)
    if head["dim_F"] is None:
        why["dim_F"] = f"not computed on the {limits.subspace.method} path of F"
    return head, why
