r"""Benchmark reports the way the QP community writes them (qpbenchmark's conventions).

* **Success rate**: successful runs over runs, per backend and family (see :mod:`ntpcert.experiments.bench.runner`).
* **Shifted geometric mean** of solve times with shift :math:`s` (10 s):
  :math:`\mathrm{sgm} = \exp\bigl(\tfrac1n \sum_i \log(t_i + s)\bigr) - s`, where an unsuccessful run counts
  as the time limit. Shown in seconds and relative to the best backend of the family (1.0 = best).
* **Accuracy**: the largest primal residual, dual residual and relative gap over the backend's
  successful runs.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from typing import Sequence

from ntpcert.experiments.bench.runner import Prepared, Run

#: Shift of the shifted geometric mean, in seconds.
SHIFT = 10.0


def shifted_geometric_mean(times: Sequence[float], shift: float = SHIFT) -> float:
    """:math:`\\exp(\\mathrm{mean}\\,\\log(t_i + s)) - s` of non-negative times."""
    if not times:
        return math.nan
    if any(t < 0 for t in times):
        raise ValueError(f"times: negative value {min(times)!r}")
    return math.exp(sum(math.log(t + shift) for t in times) / len(times)) - shift


def _max(values) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def summarize(runs: Sequence[Run], time_limit: float, shift: float = SHIFT) -> dict[str, dict[str, dict]]:
    """``{family: {backend: {"runs", "success", "success_rate", "sgm", "max_primal", ...}}}``;
    the family ``"all"`` pools every run."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for r in runs:
        groups[(r.family, r.backend)].append(r)
        groups[("all", r.backend)].append(r)
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for (fam, backend), rs in groups.items():
        times = [r.seconds if r.success and r.seconds is not None else time_limit for r in rs]
        good = [r for r in rs if r.success and r.status == "optimal"]
        out[fam][backend] = {
            "runs": len(rs),
            "success": sum(r.success for r in rs),
            "success_rate": sum(r.success for r in rs) / len(rs),
            "sgm": shifted_geometric_mean(times, shift),
            "max_primal": _max(r.primal_residual for r in good),
            "max_dual": _max(r.dual_residual for r in good),
            "max_gap": _max(r.relative_gap for r in good),
        }
    for fam, rows in out.items():
        best = min(v["sgm"] for v in rows.values())
        for v in rows.values():
            v["sgm_ratio"] = v["sgm"] / best if best > 0 else math.nan
    return dict(out)


def _fmt(x, spec: str = ".2e") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def markdown(runs: Sequence[Run], items: Sequence[Prepared], *, time_limit: float, tol: float, shift: float = SHIFT,
             title: str = "NTP-SVM solver benchmark", notes: Sequence[str] = ()) -> str:
    """The Markdown report: settings, instances, then one table per family (and one for all)."""
    summ = summarize(runs, time_limit, shift)
    backends = sorted({r.backend for r in runs})
    lines = [f"# {title}", ""]
    lines += [f"- Time limit {time_limit:g} s per run; a run succeeds when primal residual, dual residual and "
              f"relative gap are all ≤ {tol:g} (recomputed from the returned pair), or, on data that are not "
              "separable, when the backend reports infeasibility.",
              f"- Shifted geometric mean of solve time with shift {shift:g} s; failed runs count as the time "
              "limit. `ratio` is relative to the best backend of the table.",
              "- Time covers building the Kesler rows and the solve, in a fresh process per run after a "
              "warm-up solve of a tiny instance (imports not timed); `peak MB` is that process's maximum "
              "resident set size."]
    lines += [f"- {n}" for n in notes]
    lines += ["", "## Instances", "", "| family | instance | m | d | V | verdict | settled by |", "|---|---|---|---|---|---|---|"]
    for it in items:
        lines.append(f"| {it.family} | {it.name} | {it.m} | {it.d} | {it.V} | {it.expected} | {it.how} |")
    fams = [f for f in summ if f != "all"] + ["all"]
    for fam in fams:
        rows = summ[fam]
        lines += ["", f"## {'All families' if fam == 'all' else fam}", "",
                  "| backend | success | rate | sgm time (s) | ratio | max primal res | max dual res | max rel. gap |",
                  "|---|---|---|---|---|---|---|---|"]
        for b in sorted(backends, key=lambda b: (rows.get(b, {}).get("sgm", math.inf))):
            v = rows.get(b)
            if v is None:
                continue
            lines.append(f"| {b} | {v['success']}/{v['runs']} | {v['success_rate']:.0%} | {v['sgm']:.3g} | "
                         f"{v['sgm_ratio']:.1f} | {_fmt(v['max_primal'])} | {_fmt(v['max_dual'])} | {_fmt(v['max_gap'])} |")
    lines += ["", "## Runs", "", "| family | instance | backend | status | success | seconds | peak MB | rel. gap | message |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        msg = r.message.replace("|", "/").replace("\n", " ")[:80]
        lines.append(f"| {r.family} | {r.instance} | {r.backend} | {r.status} | {'yes' if r.success else 'no'} | "
                     f"{_fmt(r.seconds, '.3g')} | {_fmt(r.peak_mb, '.0f')} | {_fmt(r.relative_gap)} | {msg} |")
    return "\n".join(lines) + "\n"


def csv_text(runs: Sequence[Run]) -> str:
    """One CSV row per run."""
    buf = io.StringIO()
    fields = list(Run.__dataclass_fields__)
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    for r in runs:
        w.writerow(r.to_row())
    return buf.getvalue()
