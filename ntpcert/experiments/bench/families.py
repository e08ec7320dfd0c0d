r"""NTP-SVM instance families for the solver benchmark, each built from a seeded generator.

Every family is a list of :class:`FamilyMember` (a name and a zero-argument builder), so that a
runner can build one instance at a time in a worker process. The families:

``paper``
    The paper's synthetic setting (:func:`ntpcert.instance.datasets.paper`), at growing sizes.
``growing_V`` / ``growing_m``
    Gaussian embeddings with random supports of size 1..5 (:func:`gaussian_instance`), one size
    parameter growing, the others fixed.
``d_below_m`` / ``d_above_m``
    Gaussian instances with the embedding dimension below or above the number of contexts.
``onehot``
    Every :math:`k_j = 1` and every token a label: the hard-margin multiclass SVM without bias.
``corpus``
    Character k-gram contexts of the pydoc text (:func:`ntpcert.instance.datasets.pydoc`), with random
    embeddings of dimension above m (separable) and with one-hot k-gram features (often not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ntpcert import NTPInstance

#: Largest count drawn for a support entry of a Gaussian instance.
MAX_COUNT = 20


@dataclass(frozen=True)
class FamilyMember:
    """One benchmark instance: ``family/name`` and a builder returning the :class:`NTPInstance`."""

    family: str
    name: str
    build: Callable[[], NTPInstance]

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"


def gaussian_instance(
    rng: np.random.Generator, *, V: int, m: int, d: int, kmin: int = 1, kmax: int = 5, name: str | None = None
) -> NTPInstance:
    """Gaussian embeddings (rows :math:`h_j \\sim N(0, I_d)`), supports of sizes drawn uniformly from
    ``kmin..kmax`` and placed uniformly at random, counts uniform on ``1..MAX_COUNT``.

    Parameters
    ----------
    rng : numpy.random.Generator
    V, m, d : int
        Vocabulary size, number of contexts, embedding dimension.
    kmin, kmax : int
        Support sizes, ``1 <= kmin <= kmax <= V``.

    Returns
    -------
    NTPInstance of shapes embeddings (m, d), counts (m, V).
    """
    if not 1 <= kmin <= kmax <= V:
        raise ValueError(f"kmin, kmax: need 1 <= kmin <= kmax <= V, got {kmin}, {kmax} with V = {V}")
    k = rng.integers(kmin, kmax + 1, size=m)
    counts = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(k[j]), replace=False)
        counts[j, S] = rng.integers(1, MAX_COUNT + 1, size=S.size)
    H = rng.standard_normal((m, d))
    return NTPInstance.from_counts(H, counts, name=name or f"gauss-V{V}-m{m}-d{d}-k{kmin}..{kmax}")


def onehot_instance(rng: np.random.Generator, *, V: int, m: int, d: int, name: str | None = None) -> NTPInstance:
    """Gaussian embeddings with one label per context (:math:`k_j = 1`); every token is the label
    of at least one context (``m >= V``), so multiclass solvers see all V classes."""
    if m < V:
        raise ValueError(f"m: need m >= V = {V} so that every token is a label, got {m}")
    labels = np.concatenate([np.arange(V), rng.integers(0, V, size=m - V)])
    rng.shuffle(labels)
    counts = np.zeros((m, V), dtype=np.int64)
    counts[np.arange(m), labels] = rng.integers(1, MAX_COUNT + 1, size=m)
    H = rng.standard_normal((m, d))
    return NTPInstance.from_counts(H, counts, name=name or f"onehot-V{V}-m{m}-d{d}")


def _gauss(family: str, seed: int, **kw) -> FamilyMember:
    name = f"V{kw['V']}-m{kw['m']}-d{kw['d']}-s{seed}"
    kmax = min(5, kw["V"] - 1)
    return FamilyMember(family, name, lambda: gaussian_instance(np.random.default_rng(seed), name=name, kmax=kmax, **kw))


def _paper(seed: int, **kw) -> FamilyMember:
    from ntpcert.instance.datasets import paper

    name = "-".join(f"{k}{v}" for k, v in kw.items()) + f"-s{seed}"
    return FamilyMember("paper", name, lambda: paper(seed=seed, **kw))


def _onehot(seed: int, **kw) -> FamilyMember:
    name = f"V{kw['V']}-m{kw['m']}-d{kw['d']}-s{seed}"
    return FamilyMember("onehot", name, lambda: onehot_instance(np.random.default_rng(seed), name=name, **kw))


def _corpus(max_chars: int, embedding: str, k: int = 2) -> FamilyMember:
    from ntpcert.instance.datasets import pydoc

    name = f"pydoc{max_chars}-k{k}-{embedding.replace(':', '')}"
    return FamilyMember("corpus", name, lambda: pydoc(max_chars=max_chars, k=k, embedding=embedding))


def families(scale: str = "small", seeds: int = 2) -> dict[str, list[FamilyMember]]:
    """The benchmark families at a ``scale``: ``"tiny"`` (seconds, for tests), ``"small"``
    (every backend finishes most instances) or ``"medium"`` (generic backends hit the time limit).

    Parameters
    ----------
    scale : {"tiny", "small", "medium"}
    seeds : int
        Instances per size setting (seeds ``0..seeds-1``).
    """
    if scale not in SCALES:
        raise ValueError(f"scale: unknown value {scale!r} (known: {', '.join(SCALES)})")
    f = SCALES[scale]
    ss = range(seeds)
    out: dict[str, list[FamilyMember]] = {
        "paper": [_paper(s, m=m, d=d, V=V, support_size=k) for (m, d, V, k) in f["paper"] for s in ss],
        "growing_V": [_gauss("growing_V", s, V=V, m=f["m0"], d=f["d0"]) for V in f["V"] for s in ss],
        "growing_m": [_gauss("growing_m", s, V=f["V0"], m=m, d=int(1.25 * m)) for m in f["m"] for s in ss],
        "d_below_m": [_gauss("d_below_m", s, V=V, m=m, d=d) for (V, m, d) in f["below"] for s in ss],
        "d_above_m": [_gauss("d_above_m", s, V=V, m=m, d=d) for (V, m, d) in f["above"] for s in ss],
        "onehot": [_onehot(s, V=V, m=m, d=d) for (V, m, d) in f["onehot"] for s in ss],
        "corpus": [_corpus(mc, emb) for (mc, emb) in f["corpus"]],
    }
    return out


#: Size settings per scale.
SCALES: dict[str, dict] = {
    "tiny": {
        "paper": [(12, 15, 6, 3)],
        "m0": 10, "d0": 12, "V": [5, 8],
        "V0": 5, "m": [6, 10],
        "below": [(4, 20, 6)],
        "above": [(5, 8, 12)],
        "onehot": [(4, 10, 6)],
        "corpus": [(80, "random:48")],
    },
    "small": {
        "paper": [(50, 60, 10, 6), (100, 120, 20, 6)],
        "m0": 60, "d0": 75, "V": [10, 30, 60],
        "V0": 20, "m": [40, 80, 160],
        "below": [(10, 120, 40), (20, 200, 80)],
        "above": [(20, 60, 120), (30, 100, 300)],
        "onehot": [(10, 60, 40), (20, 120, 80)],
        "corpus": [(1500, "random:300"), (3000, "onehot-concat")],
    },
    "medium": {
        "paper": [(200, 250, 30, 6)],
        "m0": 200, "d0": 250, "V": [50, 100],
        "V0": 50, "m": [200, 400],
        "below": [(50, 400, 150)],
        "above": [(50, 200, 250)],
        "onehot": [(50, 400, 300)],
        "corpus": [(8000, "random:800"), (20000, "onehot-concat")],
    },
}
