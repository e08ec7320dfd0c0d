"""Plain-text rendering of ``ntpcert geometry``: L^mm with its certified gap, the centred-support proxy,
the checks and the training runs (the caller prints the lines)."""

from __future__ import annotations

from typing import Any


def geometry_lines(run: Any, summary: dict[str, Any]) -> list[str]:
    """Lines for a :class:`~ntpcert.geometry.run.GeometryRun` and its :meth:`~ntpcert.geometry.run.GeometryRun.to_json`."""
    rep = run.report
    s = rep.solution
    svm = summary["nuclear_svm"]
    target = f", target {svm['gap_tol']:.0e}" if "gap_tol" in svm else ""
    lines = [f"V = {rep.pattern.V}, m = {rep.pattern.m}, distinct supports = {rep.pattern.r}",
             f"L^mm: ||L||_* = {s.objective:.10g}, certified relative gap {s.relative_gap:.2e} ({s.solver}, "
             f"{s.status}{target}), rank {s.rank}, min margin {s.min_margin:.6g}",
             f"centred support proxy: cosine {rep.proxy_cosine:.6f}, certified relative gap {rep.proxy_relative_gap:.2e}"]
    lines += [f"check {c.name}: defect {c.defect:.2e} ({c.statement})" for c in rep.checks]
    for t in run.training:
        f = t.final()
        rate = summary["training"][t.optimizer]["rate_one_minus_cos"]
        lines.append(f"train {t.optimizer}: step {int(t.steps[-1])}, cos(L_k, L^mm) {f['cos_mm']:.4f}, "
                     f"CE - H {f['excess_loss']:.2e}, 1 - cos ~ k^{rate:.2f}")
    return lines


__all__ = ["geometry_lines"]
