r"""The random instance at a grid point: the same point and base seed always give the same instance.

For a point (m, d, V, k, family, replicate) the generator is
``numpy.random.default_rng(SeedSequence([base_seed, m, d, V, k, tag(family), replicate]))``, with
``tag`` the first 32 bits of the family name's SHA-256. From it, in this order:

1. embeddings H of shape (m, d) by family: ``gaussian`` has entries :math:`\mathcal N(0, 1/d)`;
   ``integer`` uniform in {-3, ..., 3} (a zero row gets a 1 in its first entry); ``lowrank:R`` is
   :math:`G_1 G_2/\sqrt{d}` with Gaussian :math:`G_1` (m, r), :math:`G_2` (r, d) and
   :math:`r = \min(R, m, d)`, so rank H = r almost surely;
2. each support :math:`S_j` a uniform k-subset of [V];
3. counts uniform in {1, ..., max_count} on the supports.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ntpcert.instance.embeddings import random_gaussian
from ntpcert.instance import NTPInstance
from ntpcert.experiments.sweep.spec import GridPoint

__all__ = ["point_rng", "point_instance", "INTEGER_MAX_ABS"]

#: Entries of the ``integer`` family lie in ``[-INTEGER_MAX_ABS, INTEGER_MAX_ABS]``.
INTEGER_MAX_ABS = 3


def _tag(family: str) -> int:
    return int.from_bytes(hashlib.sha256(family.encode()).digest()[:4], "little")


def point_rng(point: GridPoint, base_seed: int) -> np.random.Generator:
    """The generator of ``point`` (see the module doc)."""
    entropy = [base_seed, point.m, point.d, point.V, point.k, _tag(point.embedding), point.seed]
    return np.random.default_rng(np.random.SeedSequence(entropy))


def _embeddings(family: str, m: int, d: int, rng: np.random.Generator) -> np.ndarray:
    if family == "gaussian":
        return random_gaussian(m, d, rng)
    if family == "integer":
        H = rng.integers(-INTEGER_MAX_ABS, INTEGER_MAX_ABS + 1, size=(m, d)).astype(np.float64)
        H[~H.any(axis=1), 0] = 1.0
        return H
    r = min(int(family.split(":", 1)[1]), m, d)
    return rng.standard_normal((m, r)) @ rng.standard_normal((r, d)) / np.sqrt(d)


def point_instance(point: GridPoint, base_seed: int, *, max_count: int = 10) -> NTPInstance:
    """The instance at ``point``, built from integer counts.

    Parameters
    ----------
    point : GridPoint
    base_seed : int
        The spec's ``seed``.
    max_count : int
        Counts on a support are uniform in ``1..max_count``.
    """
    rng = point_rng(point, base_seed)
    m, d, V, k = point.m, point.d, point.V, point.k
    H = _embeddings(point.embedding, m, d, rng)
    order = np.argsort(rng.random((m, V)), axis=1)[:, :k]  # a uniform k-subset per row
    mask = np.zeros((m, V), dtype=bool)
    np.put_along_axis(mask, order, True, axis=1)
    C = rng.integers(1, max_count + 1, size=(m, V)) * mask
    return NTPInstance.from_counts(H, C, name=point.key)
