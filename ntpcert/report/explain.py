"""Plain text of ``ntpcert explain``: the verdicts, then each culprit as people read it."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ntpcert.report.text import fmt

#: Tokens of a support listed before "...".
SUPPORT_SHOWN = 12
#: Embedding relations listed, at most (one per clashing token).
RELATIONS_SHOWN = 3


def q(text: str) -> str:
    """A name between double quotes, an inner quote escaped (names already escape newlines)."""
    return '"' + text.replace('"', '\\"') + '"'


def _signed(x: Fraction) -> str:
    return ("+" if x > 0 else "-") + (str(abs(x)) if abs(x) != 1 else "1")


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
    lines = [f"Why not separable: {n} context{'s' if n != 1 else ''} that no linear decoder separates ({status})"]
    width = max(len(q(context_text(inst, j))) for j in wns.contexts)
    for j in wns.contexts:
        names = [token_text(inst, int(z)) for z in inst.support(j)]
        ray = ", ".join(f"{_signed(x)} {q(token_text(inst, v))}{'' if mask[j, v] else ' (off support)'}"
                        for v, x in wns.ray_of(j).items())
        lines.append(f"  {q(context_text(inst, j)).ljust(width)}  support {_support(names)}")
        lines.append(f"  {'':{width}}  ray: {ray}")
    lines.append("  tokens that clash: " + ", ".join(q(token_text(inst, v)) for v in wns.clash_tokens()))
    seen: list[dict] = []
    for v in wns.clash_tokens():
        rel = wns.relation(v)
        first = next(iter(rel.values()))
        unit = {j: x / first for j, x in rel.items()}
        if unit in seen or len(seen) >= RELATIONS_SHOWN:
            continue
        seen.append(unit)
        terms = " ".join(f"{_signed(x)} h({q(context_text(inst, j))})" for j, x in rel.items())
        lines.append(f"  the embeddings, weighted by the ray's entries for {q(token_text(inst, v))}: {terms} = 0")
    lines.append(f"  so for every W the ray's weighted logits sum to 0, while separating these contexts would make "
                 f"that sum >= {wns.off_support_mass()} (the ray's off-support mass) > 0")
    if wns.start_contexts != n:
        lines.append(f"  (shrunk from the {wns.start_contexts} contexts of the decision's Farkas ray)")
    return lines


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
    rows = []
    for t in wnc.terms:
        ctx = context_text(inst, t.context)
        lhs = f"{'' if t.coefficient == 1 else f'{t.coefficient} x '}log p({q(token_text(inst, t.token))} | {q(ctx)}) / p({q(token_text(inst, t.versus))} | {q(ctx)})"
        times = "" if t.coefficient == 1 else f"{t.coefficient} x "
        rows.append((lhs, f"{times}log({t.counts[0]}/{t.counts[1]})", t.coefficient * t.log_odds))
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    for i, (lhs, ratio, value) in enumerate(rows):
        lines.append(f"  {'  ' if i == 0 else '+ '}{lhs.ljust(w1)}  = {ratio.ljust(w2)} = {value:+.6f}")
    ratio = wnc.mismatch_ratio()
    exact = f" = log({ratio[0]}/{ratio[1]})" if ratio is not None else ""
    lines.append(f"  the same combination of logit differences is 0 for every W; the data give "
                 f"{wnc.mismatch:.6g} nats{exact}: the mismatch")
    if wnc.start_rows != len(wnc.rows):
        lines.append(f"  (shrunk from the {wnc.start_rows} equations of the decision's null vector)")
    return lines


def explanation_lines(exp: Any) -> list[str]:
    """The report of ``ntpcert explain`` (an :class:`~ntpcert.pipeline.explain.Explanation`)."""
    inst = exp.instance
    lines = [
        f"instance {inst.name}: m={inst.m} contexts, d={inst.d}, V={inst.V}; entropy lower bound H = "
        f"{inst.entropy():.10g} nats",
        f"  NTP-compatible (4)      : {fmt(exp.compatible)}  [{exp.compatible_by or 'undetermined'}]",
        f"  NTP-separable (6)       : {fmt(exp.separable)}  [{exp.separable_by or 'undetermined'}]",
        f"  entropy bound reachable : {fmt(exp.entropy_bound_reachable)}",
    ]
    if exp.entropy_bound_reachable:
        lines.append("Nothing to explain: the entropy bound is reachable.")
    if exp.separable is False:
        lines.append("")
        lines += (separability_lines(exp.why_not_separable) if exp.why_not_separable is not None
                  else [f"Why not separable: not explained ({exp.notes.get('why_not_separable', '')})"])
    elif exp.separable is None:
        lines += ["", f"Separability undetermined: {exp.separable_witness}"]
    if exp.compatible is False:
        lines.append("")
        lines += (compatibility_lines(exp.why_not_compatible) if exp.why_not_compatible is not None
                  else [f"Why not compatible: not explained ({exp.notes.get('why_not_compatible', '')})"])
    elif exp.compatible is None:
        lines += ["", f"Compatibility undetermined: {exp.compatible_witness}"]
    if getattr(exp, "excess_loss", None) is not None:
        lines += [""] + excess_lines(exp.excess_loss, inst)
    lines += ["", f"({exp.seconds:.2f} s)"]
    return lines


#: Contexts listed by their excess loss at the optimum.
EXCESS_SHOWN = 8


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
    per = key.get("per_context_excess")
    if per:
        tot = sum(per) or 1.0
        order = sorted(range(len(per)), key=lambda j: -per[j])[:EXCESS_SHOWN]
        lines.append(f"  contexts carrying the most excess loss at the optimum (pi_j KL(p_j || softmax(W h_j))):")
        width = max(len(q(context_text(inst, j))) for j in order)
        for j in order:
            lines.append(f"    {q(context_text(inst, j)).ljust(width)}  {per[j]:.4g} nats  ({100 * per[j] / tot:.1f} %)")
    return lines


__all__ = ["compatibility_lines", "excess_lines", "explanation_lines", "separability_lines"]
