"""The JSON object of ``ntpcert certify --json``: the report's keys, the why-not culprits of negative
verdicts, and Theorem 1's ``excess_loss`` key, built in the library so that the command only prints it."""

from __future__ import annotations

from typing import Any


def certify_json(report, *, excess: bool, separability_solver: str, merge: Any = None,
                 svm_asked: bool = True) -> dict[str, Any]:
    """``report.to_json()`` (a float or an exact report) with ``why_not_separable`` / ``why_not_compatible``
    for negative verdicts (small witnesses only: ``ntpcert.pipeline.explain.CERTIFY_MAX_CONTEXTS`` and
    friends; an exact report explained them already) and ``excess_loss``: the bracket on L* - H when
    ``excess`` (certified in an exact report that carries it), else :func:`excess_without_bracket`. With
    ``merge`` (a :class:`~ntpcert.instance.lm.merge.TokenMerge`: the instance was read through a model with
    its unseen tokens merged), its ``vocabulary`` record and why the NTP-SVM was not solved."""
    from ntpcert.pipeline.explain import why_not_of_report

    out = report.to_json()
    if getattr(report, "why_not", None) is None:
        out.update(why_not_of_report(report, separability_solver=separability_solver))
    if excess and merge is not None and getattr(merge, "merged", 0):
        # the bracket counts every token: over the whole vocabulary it is too large here (ntpcert.cli.certify)
        from ntpcert.pipeline.excess_certificate import AUTO_MAX_CELLS, skipped_bracket_text

        m = int(out.get("m", 0))
        out["excess_loss"] = {"skipped": skipped_bracket_text(m * int(merge.V), AUTO_MAX_CELLS)
                              + " (m · the model's whole vocabulary)"}
    if "excess_loss" not in out:
        if excess:
            from ntpcert.pipeline.excess_certificate import excess_key

            out["excess_loss"] = excess_key(report.instance, exact=False, separable=report.separable.holds)[0]
        else:
            out["excess_loss"] = excess_without_bracket(out)
    if "split" not in out:  # the split P / N of the out-of-support pairs (ntpcert.pipeline.split_section)
        from ntpcert.pipeline.split_section import split_key

        instance = report.float_report.instance if hasattr(report, "float_report") else report.instance
        out["split"] = split_key(instance, report.separable.holds)
    if merge is not None:
        out.update(merge.report_keys(svm_asked=svm_asked))
    return out


def excess_without_bracket(out: dict) -> dict:
    """``excess_loss`` when no bracket was asked for: exactly 0 when both conditions hold (Theorem 1 of
    the paper: inf CE = H, approached along W* + R W^mm), else where the bracket comes from.
    With ``--exact`` the verdicts count only when the certificate checked."""
    checked = not out.get("exact") or out.get("certificate_valid") is True
    if out.get("entropy_bound_reachable") is True and checked:
        h = out["entropy"]
        return {"lower": h, "upper": h, "entropy": h, "excess_lower": 0.0, "excess_upper": 0.0,
                "engine": "theorem", "reason": "compatible and separable (the verdicts above): inf CE = H, reached along W* + R W^mm as "
                       "R grows (at W* itself when no support is proper: entropy_attained_at_finite_W)"}
    return {"skipped": "not computed: give --excess for the bracket on L* - H (certified with --exact), "
                       "or run 'ntpcert explain DATA'"}
