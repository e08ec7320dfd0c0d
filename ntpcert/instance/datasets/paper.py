r"""The synthetic setting of the paper's experiment (Thrampoulidis, arXiv 2402.18551, Sec. 6).

The paper reports n = 5000 pairs, m = 50 distinct contexts, d = 60, V = 10, every support of size
k_j = 6, random Gaussian embeddings and ℋ ≈ 1.445, but not the exact sampling. This module
fixes one sampling that matches those numbers:

1. embeddings :math:`H = G/\sqrt{d}` with :math:`G_{jl} \sim \mathcal{N}(0,1)` (so ``‖h_j‖ ≈ 1``);
2. for each context, a support :math:`S_j` of k tokens drawn uniformly without replacement;
3. :math:`p_j \sim \mathrm{Dirichlet}(\mathbf 1_k)` on :math:`S_j` (expected entropy
   :math:`H_k - 1`, the k-th harmonic number minus one: ≈ 1.45 nats for k = 6);
4. context frequencies :math:`\pi \sim \mathrm{Dirichlet}(\mathbf 1_m)`;
5. counts: one forced pair for every (j, z ∈ S_j), so every k_j is exactly k, plus
   n − m·k pairs drawn multinomially with cell probabilities :math:`\pi_j p_{j,z}`.

The draws happen in that order from one :class:`numpy.random.Generator`. The instance is built
from the integer counts, so its empirical ℋ is exact and differs a little from the
population entropy of step 3.
"""

from __future__ import annotations

import numpy as np

from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries, random_gaussian
from ntpcert.errors import InputError
from ntpcert.instance.model import NTPInstance
from ntpcert.util.validate import check_int

__all__ = ["paper"]


def paper(
    *,
    m: int = 50,
    d: int = 60,
    V: int = 10,
    support_size: int = 6,
    n: int = 5000,
    seed: int = 0,
    rng: np.random.Generator | None = None,
    max_entries: int | None = MAX_ENTRIES,
) -> NTPInstance:
    """The paper's synthetic instance (defaults: m = 50, d = 60, V = 10, k_j = 6, n = 5000).

    Parameters
    ----------
    m : int
        Number of distinct contexts.
    d : int
        Embedding dimension.
    V : int
        Vocabulary size, at least 2.
    support_size : int
        k, the support size of every context, 1 ≤ k ≤ V.
    n : int
        Number of training pairs, at least m·k (one forced pair per support entry).
    seed : int
        Seed of ``numpy.random.default_rng``; ignored when ``rng`` is given.
    rng : numpy.random.Generator, optional
    max_entries : int or None
        Refuse, before drawing anything, embeddings (m·d) or counts (m·V) of more than this many
        entries; None: no limit.

    Returns
    -------
    NTPInstance
        Built from counts of shape (m, V), named ``"paper"``; tokens ``t0..t{V-1}``, contexts
        ``c0..c{m-1}``.
    """
    m, d, V, n = (_int(name, v, 1) for name, v in (("m", m), ("d", d), ("V", V), ("n", n)))
    k = _int("support_size", support_size, 1)
    if V < 2:
        raise InputError(f"V: value {V} is below 2")
    if k > V:
        raise InputError(f"support_size: value {k} exceeds the vocabulary size V = {V}")
    if n < m * k:
        raise InputError(f"n: value {n} is below m·k = {m * k}, the one forced pair per support entry")
    if n >= 2**62:
        raise InputError(f"n: value {n} is not below 2^62 (the counts are int64)")
    check_entries("d", m, d, max_entries, "the embeddings (m, d)")
    check_entries("V", m, V, max_entries, "the counts (m, V)")
    gen = rng if rng is not None else _rng(seed)
    H = random_gaussian(m, d, gen)
    supports = np.stack([np.sort(gen.choice(V, size=k, replace=False)) for _ in range(m)])
    p_in = gen.dirichlet(np.ones(k), size=m)  # (m, k), on the sorted supports
    pi = gen.dirichlet(np.ones(m))
    cell = (pi[:, None] * p_in).ravel()
    extra = gen.multinomial(n - m * k, cell / cell.sum()).reshape(m, k)
    counts = np.zeros((m, V), dtype=np.int64)
    rows = np.repeat(np.arange(m), k)
    counts[rows, supports.ravel()] = 1 + extra.ravel()
    return NTPInstance.from_counts(
        H,
        counts,
        token_names=[f"t{z}" for z in range(V)],
        context_names=[f"c{j}" for j in range(m)],
        name="paper",
    )


def _int(name: str, value: object, low: int) -> int:
    return check_int(name, value, minimum=low)


def _rng(seed: object) -> np.random.Generator:
    return np.random.default_rng(_int("seed", seed, 0))
