r"""Lemma 1 as a decision: rank H = m makes every instance on H compatible and separable.

The paper states Lemma 1 with :math:`d > m` and :math:`\mathrm{rank}\,[h_1 \dots h_m] = m`. Its argument
needs only that :math:`W \mapsto Z = WH^\top` is onto :math:`\mathbb R^{V\times m}`, which rank m gives
(:math:`W = Z (HH^\top)^{-1} H`), and rank m forces :math:`d \ge m`: so one-hot context embeddings
(d = m, H a permutation of the identity) qualify, as ``docs/formats.md`` promises. The rank is
certified by :func:`ntpcert.exact.rank_witness.certify_rank` (structure first, then mod p), with no cap
on the size of H; a part it skips is named in the witness, the text and the JSON.
"""

from __future__ import annotations

from ntpcert.exact.rank_witness import RankWitness, certify_rank
from ntpcert.instance import NTPInstance


def lemma1(instance: NTPInstance) -> RankWitness:
    """The certified lower bound on rank H; its ``full`` says whether it proves Lemma 1's premise
    rank H = m. Nothing is computed when d < m."""
    m, d = instance.m, instance.d
    if d < m:
        return RankWitness.impossible(m, d)
    return certify_rank(instance.embeddings)


def lemma1_text(rank: RankWitness) -> str:
    """Lemma 1's premise in words, for the witness of a verdict it decided."""
    return f"H has full row rank m = {rank.m} ({rank.describe()})"


def lemma1_json(rank: RankWitness | None) -> dict:
    """The report's ``lemma1`` entry: ``holds`` (true, or null when not shown), the route and modulus of
    the rank certificate, the certified bound, and, when it does not hold, why (what was skipped)."""
    if rank is None:
        return {"holds": None, "why": "not tried (--no-lemma1)"}
    out: dict = {"holds": True if rank.full else None, "route": rank.route, "modulus": rank.modulus,
                 "rank_lower_bound": rank.bound, "m": rank.m}
    if not rank.full:
        out["why"] = rank.skipped or f"the certified bound rank H >= {rank.bound} is short of m = {rank.m}"
    return out


__all__ = ["lemma1", "lemma1_json", "lemma1_text"]
