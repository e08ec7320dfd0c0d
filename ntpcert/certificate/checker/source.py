r"""The checker's ``source`` section: the provenance record against the instance it describes.

The schema and :func:`ntpcert.certificate.provenance.check_source` check the record's own shape and sums.
Here ``source.vocabulary`` (:mod:`ntpcert.instance.lm.merge`) is checked against the embedded instance:
the reduced vocabulary is the instance's, :math:`V' = V`; its first ``observed`` tokens are exactly the
tokens in some support :math:`S_j` (each follows some context); and, when tokens were merged, the last
token, the representative of the unseen ones, lies in no support (a count of 0 in every context). The
model files' hashes and the corpus hash name files outside the certificate and are not checked here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ntpcert.certificate.checker.common import need
from ntpcert.instance import NTPInstance


def check_source(sec: Any, inst: NTPInstance, checks: list[str]) -> None:
    """Check the optional ``source`` section (``None`` when absent) against ``inst``."""
    if sec is None or "vocabulary" not in sec:
        return
    voc = sec["vocabulary"]
    need(voc["V_reduced"] == inst.V,
         f"source.vocabulary.V_reduced: {voc['V_reduced']}, but the embedded instance has V = {inst.V} tokens")
    seen = np.zeros(inst.V, dtype=bool)
    if inst.m:
        seen[np.concatenate(inst.supports)] = True
    observed = voc["observed"]
    if not seen[:observed].all():
        v = int(np.flatnonzero(~seen[:observed])[0])
        need(False, f"source.vocabulary.observed: {observed} observed tokens, but token {v} of the embedded instance "
                    "follows no context")
    if voc["merged"]:
        need(not seen[inst.V - 1], f"source.vocabulary.representative: the representative (token {inst.V - 1} of the "
                                   "embedded instance) follows a context; it stands for tokens that follow none")
    checks.append(f"source.vocabulary: V' = {inst.V}, {observed} observed tokens"
                  + (f" and a representative of {voc['merged']} unseen ones, which follows no context"
                     if voc["merged"] else ""))


__all__ = ["check_source"]
