"""Plain text of ``ntpcert explain``: the verdicts, then each culprit as people read it.

The text is for reading, the JSON for checking: exact rationals with hundreds of digits (Farkas rays
on Gaussian embeddings) are shown as floats normalised to the largest entry (:class:`Scale`), long
lists are cut with a count, and every line is wrapped at :data:`WIDTH` characters; ``--json`` and
the certificate hold the exact values.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Iterable

from ntpcert.report.text import fmt, wrap_lines

#: Tokens of a support listed before "...".
SUPPORT_SHOWN = 12
#: Embedding relations listed, at most (one per clashing token).
RELATIONS_SHOWN = 3
#: Contexts of a non-separable set listed (those with the largest ray entries), and ray entries per context.
CONTEXTS_SHOWN = 20
RAY_SHOWN = 8
#: Terms of an embedding relation listed.
RELATION_TERMS = 10
#: Integers up to this many digits are shown exactly; larger ones as floats normalised to the largest.
EXACT_DIGITS = 6


def q(text: str) -> str:
    """A name between double quotes, an inner quote escaped (names already escape newlines)."""
    return '"' + text.replace('"', '\\"') + '"'


class Scale:
    """How to print a family of exact values: as they are when they are all small integers, else as
    floats divided by the largest magnitude (so the largest reads ±1).

    >>> Scale([Fraction(2), Fraction(-1)]).signed(Fraction(2)), Scale([Fraction(10**9), Fraction(-3)]).signed(Fraction(-3))
    ('+2', '-3e-09')
    """

    def __init__(self, values: Iterable[Fraction]) -> None:
        vals = [Fraction(v) for v in values]
        self.exact = all(v.denominator == 1 and len(str(abs(v.numerator))) <= EXACT_DIGITS for v in vals)
        self.top = max((abs(v) for v in vals), default=Fraction(1)) or Fraction(1)

    def signed(self, x: Fraction) -> str:
        if self.exact:
            return ("+" if x > 0 else "-") + str(abs(x))
        return f"{float(Fraction(x) / self.top):+.4g}"

    def ratio(self, x: Fraction) -> float:
        """``x`` as a float, divided by the largest magnitude unless the family is shown exactly."""
        return float(Fraction(x)) if self.exact else float(Fraction(x) / self.top)

    def value(self, x: Fraction) -> str:
        return str(x) if self.exact else f"{float(Fraction(x) / self.top):.4g}"

    @property
    def top_text(self) -> str:
        """The largest magnitude, as a float in scientific notation (also past the float range)."""
        return sci(self.top)


def sci(x: Fraction) -> str:
    """A non-negative rational in scientific notation with 4 digits, whatever its size."""
    x = Fraction(x)
    if x == 0:
        return "0"
    e = len(str(x.numerator)) - len(str(x.denominator))
    m = x / Fraction(10) ** e
    while m >= 10:
        m, e = m / 10, e + 1
    while m < 1:
        m, e = m * 10, e - 1
    return f"{float(m):.4g}e{e:+d}"


def _cut(items: list[str], k: int) -> str:
    return ", ".join(items[:k]) + (f", ... ({len(items)} in all)" if len(items) > k else "")


def _largest_contexts(wns: Any, k: int) -> list[int]:
    """The ``k`` contexts of the set whose ray rows have the largest entries, in data order."""
    if len(wns.contexts) <= k:
        return list(wns.contexts)
    size = {j: max((abs(x) for x in wns.ray_of(j).values()), default=Fraction(0)) for j in wns.contexts}
    top = sorted(wns.contexts, key=lambda j: -size[j])[:k]
    return sorted(top, key=list(wns.contexts).index)


def _support(names: list[str]) -> str:
    shown = ", ".join(q(t) for t in names[:SUPPORT_SHOWN])
    more = f", ... ({len(names)} tokens)" if len(names) > SUPPORT_SHOWN else ""
    return "{" + shown + more + "}"


def separability_lines(wns: Any) -> list[str]:
    """The culprit of a negative separability verdict (a
    :class:`~ntpcert.pipeline.explain.WhyNotSeparable`)."""
    from ntpcert.pipeline.explain.names import context_text, token_text

    inst = wns.instance
    mask = inst.support_mask()
    n = len(wns.contexts)
    if wns.irreducible:
        status = "irreducible: each one-context deletion is separable, by an exactly checked point"
    else:
        status = f"not shown irreducible: {wns.note}"
    sc = Scale(wns.ray.values())
    lines = [f"Why not separable: {n} context{'s' if n != 1 else ''} that no linear decoder separates ({status})"]
    if not sc.exact:
        lines.append(f"  ray entries are divided by the largest, {sc.top_text}; the exact integers are in --json")
    shown = _largest_contexts(wns, CONTEXTS_SHOWN)
    width = max(len(q(context_text(inst, j))) for j in shown)
    for j in shown:
        names = [token_text(inst, int(z)) for z in inst.support(j)]
        row = list(wns.ray_of(j).items())
        ray = ", ".join(f"{sc.signed(x)} {q(token_text(inst, v))}{'' if mask[j, v] else ' (off support)'}"
                        for v, x in row[:RAY_SHOWN]) + (f", ... ({len(row)} entries)" if len(row) > RAY_SHOWN else "")
        lines.append(f"  {q(context_text(inst, j)).ljust(width)}  support {_support(names)}")
        lines.append(f"  {'':{width}}  ray: {ray}")
    if len(shown) < n:
        lines.append(f"  ... and {n - len(shown)} more contexts with smaller ray entries (all in --json)")
    lines.append("  tokens that clash: " + _cut([q(token_text(inst, v)) for v in wns.clash_tokens()], SUPPORT_SHOWN))
    seen: list[dict] = []
    for v in wns.clash_tokens():
        rel = wns.relation(v)
        first = next(iter(rel.values()))
        unit = {j: x / first for j, x in rel.items()}
        if unit in seen or len(seen) >= RELATIONS_SHOWN:
            continue
        seen.append(unit)
        items = list(rel.items())
        terms = " ".join(f"{sc.signed(x)} h({q(context_text(inst, j))})" for j, x in items[:RELATION_TERMS])
        more = f" ... ({len(items)} terms)" if len(items) > RELATION_TERMS else ""
        lines.append(f"  the embeddings, weighted by the ray's entries for {q(token_text(inst, v))}: {terms}{more} = 0")
    lines.append(f"  so for every W the ray's weighted logits sum to 0, while separating these contexts would make "
                 f"that sum >= {sc.value(wns.off_support_mass())} (the ray's off-support mass) > 0")
    if wns.start_contexts != n:
        lines.append(f"  (shrunk from the {wns.start_contexts} contexts of the decision's Farkas ray)")
    return lines


#: Terms of a log-odds cycle listed.
TERMS_SHOWN = 40


def compatibility_lines(wnc: Any) -> list[str]:
    """The culprit of a negative compatibility verdict (a
    :class:`~ntpcert.pipeline.explain.WhyNotCompatible`)."""
    from ntpcert.pipeline.explain.names import context_text, token_text

    inst = wnc.instance
    status = ("irreducible: dropping any one equation leaves a solvable system" if wnc.irreducible
              else f"not shown irreducible: {wnc.note}")
    k = len(wnc.terms)
    lines = [f"Why not compatible: a cycle of {k} log-odds over {len(wnc.contexts)} context"
             f"{'s' if len(wnc.contexts) != 1 else ''} that no W satisfies ({status})"]
    sc = Scale(Fraction(t.coefficient) for t in wnc.terms)
    if not sc.exact:
        lines.append(f"  coefficients are divided by the largest, {sc.top_text}; the exact integers are in --json")
    rows = []
    for t in wnc.terms[:TERMS_SHOWN]:
        ctx = context_text(inst, t.context)
        times = "" if t.coefficient == 1 else f"{sc.value(Fraction(t.coefficient))} x "
        lhs = f"{times}log p({q(token_text(inst, t.token))} | {q(ctx)}) / p({q(token_text(inst, t.versus))} | {q(ctx)})"
        rows.append((lhs, f"{times}log({t.counts[0]}/{t.counts[1]})", sc.ratio(Fraction(t.coefficient)) * t.log_odds))
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    for i, (lhs, ratio, value) in enumerate(rows):
        lines.append(f"  {'  ' if i == 0 else '+ '}{lhs.ljust(w1)}  = {ratio.ljust(w2)} = {value:+.6f}")
    if len(wnc.terms) > TERMS_SHOWN:
        lines.append(f"  + ... ({len(wnc.terms)} terms in all, each in --json)")
    ratio = wnc.mismatch_ratio()
    exact = f" = log({ratio[0]}/{ratio[1]})" if ratio is not None else ""
    scaled = "" if sc.exact or not math.isfinite(wnc.mismatch) else (
        f" (in the rows above, divided by {sc.top_text}: {sc.ratio(Fraction(wnc.mismatch)):.6g})")
    lines.append(f"  the same combination of logit differences is 0 for every W; the data give "
                 f"{wnc.mismatch:.6g} nats{exact}: the mismatch{scaled}")
    if wnc.start_rows != len(wnc.rows):
        lines.append(f"  (shrunk from the {wnc.start_rows} equations of the decision's null vector)")
    return lines


def explanation_lines(exp: Any) -> list[str]:
    """The report of ``ntpcert explain`` (an :class:`~ntpcert.pipeline.explain.Explanation`)."""
    inst = exp.instance
    lines = [
        f"instance {inst.name}: m={inst.m} contexts, d={inst.d}, V={inst.V}; entropy lower bound H = "
        f"{inst.entropy():.10g} nats",
        f"  NTP-compatible (4)      : {fmt(exp.compatible.holds)}  [{exp.compatible.engine or 'undetermined'}]",
        f"  NTP-separable (6)       : {fmt(exp.separable.holds)}  [{exp.separable.engine or 'undetermined'}]",
        f"  entropy bound reachable : {fmt(exp.entropy_bound_reachable)}",
    ]
    if exp.entropy_bound_reachable:
        lines.append("Nothing to explain: the entropy bound is reachable.")
    if exp.separable.holds is False:
        lines.append("")
        lines += (separability_lines(exp.why_not_separable) if exp.why_not_separable is not None
                  else [f"Why not separable: not explained ({exp.notes.get('why_not_separable', '')})"])
    elif exp.separable.holds is None:
        lines += ["", f"Separability undetermined: {exp.separable.reason}"]
    if exp.compatible.holds is False:
        lines.append("")
        lines += (compatibility_lines(exp.why_not_compatible) if exp.why_not_compatible is not None
                  else [f"Why not compatible: not explained ({exp.notes.get('why_not_compatible', '')})"])
    elif exp.compatible.holds is None:
        lines += ["", f"Compatibility undetermined: {exp.compatible.reason}"]
    if getattr(exp, "nonseparable_pairs", None) is not None:
        lines += [""] + pair_lines(exp.nonseparable_pairs)
    if getattr(exp, "excess_loss", None) is not None:
        lines += [""] + excess_lines(exp.excess_loss, inst)
    lines += ["", f"({exp.seconds:.2f} s)"]
    return wrap_lines(lines)


#: Contexts listed by their excess loss at the optimum.
EXCESS_SHOWN = 8
#: Token pairs listed among the non-separable pairs.
PAIRS_SHOWN = 10


def pair_lines(key: dict) -> list[str]:
    """The ``nonseparable_pairs`` key (:func:`ntpcert.pipeline.explain.nonseparable_pairs_json`) as text:
    a summary line, then the :data:`PAIRS_SHOWN` heaviest token pairs with their contexts and weight."""
    from ntpcert.pipeline.explain.names import quoted

    if key["pairs"] is None:
        return [f"Non-separable pairs: not found ({key['split']})"]
    groups = key["groups"]
    top = groups[:PAIRS_SHOWN]
    cover = sum(g["share"] for g in top)
    lines = [f"Non-separable pairs (j, v), v outside S_j, whose margin no decoder can grow while CE stays bounded "
             f"({key['split']}):",
             f"  N has {key['pairs']} pairs in {key['groups_total']} token pairs (z, v), z in S_j; the top "
             f"{len(top)} token pairs cover {100 * cover:.1f} % of N's weight {key['weight']:.4g}",
             f"  (weight: {key['weight_is']})"]
    if top:
        rows = [(f"{quoted(g['support_token'])} vs {quoted(g['token'])}", g) for g in top]
        width = max(len(r) for r, _ in rows)
        for r, g in rows:
            ex = ", ".join(quoted(c) for c in g["context_names"][:2]) + (", ..." if g["contexts"] > 2 else "")
            lines.append(f"    {r.ljust(width)}  {g['contexts']:>5} context(s), weight {g['weight']:.4g} "
                         f"({100 * g['share']:.1f} %), e.g. {ex}")
    if key["groups_total"] > len(top):
        lines.append(f"    ... and {key['groups_total'] - len(top)} more token pair(s) (--json lists them all)")
    return lines


def excess_lines(key: dict, inst: Any) -> list[str]:
    """The ``excess_loss`` key (:func:`ntpcert.pipeline.excess_certificate.excess_key`) as text."""
    from ntpcert.pipeline.explain.names import context_text

    if "skipped" in key:
        return [f"Best loss of a linear decoder: not bracketed ({key['skipped']})"]
    how = ("certified: exact dual point, arb balls" + ("" if key.get("checked", True) else
           f"; CHECK FAILED: {key.get('check_reason', '')}")) if key.get("exact") else "float"
    lines = [f"Best loss of a linear decoder: L* in [{key['lower']:.10f}, {key['upper']:.10f}] nats ({how})",
             f"  excess over the entropy bound: L* - H in [{key['excess_lower']:.10g}, {key['excess_upper']:.10g}]"
             f" (relative width {key['relative_width']:.2g})"]
    if key.get("face"):  # the split's P, or the tolerance and why (ntpcert.solve.excess.float_bracket)
        lines.append(f"  face of the bracket: {key['face']}")
    per = key.get("per_context_excess")
    if per and not key["excess_lower"] > 0:
        # L* - H may be 0 (the entropy bound may be reached): what the approximate optimum leaves per context is
        # the optimiser's residue, not excess that any context carries
        lines.append("  per context: not listed, since L* - H can be 0 (the bracket's lower end); the excess left "
                     "at the approximate optimum is the optimiser's residue")
    elif per:
        tot = sum(per) or 1.0
        order = sorted(range(len(per)), key=lambda j: -per[j])[:EXCESS_SHOWN]
        lines.append("  contexts carrying the most excess loss at the optimum (pi_j KL(p_j || softmax(W h_j))):")
        width = max(len(q(context_text(inst, j))) for j in order)
        for j in order:
            lines.append(f"    {q(context_text(inst, j)).ljust(width)}  {per[j]:.4g} nats  ({100 * per[j] / tot:.1f} %)")
    return lines


__all__ = ["compatibility_lines", "excess_lines", "explanation_lines", "separability_lines"]
