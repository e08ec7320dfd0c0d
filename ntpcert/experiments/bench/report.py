r"""Benchmark reports the way the QP community writes them (qpbenchmark's conventions).

* **Rankings count separable instances only.** Data that are not NTP-separable are scored apart
  (:func:`infeasible_summary`): there a backend either certifies infeasibility or cannot (see
  :mod:`ntpcert.experiments.bench.status`), and a run time says nothing about solving the QP.
* **Success rate**: successful runs over runs, per backend and family.
* **Shifted geometric mean** of solve times with shift :math:`s` (10 s):
  :math:`\mathrm{sgm} = \exp\bigl(\tfrac1n \sum_i \log(t_i + s)\bigr) - s`, where an unsuccessful run counts
  as the time limit. Shown in seconds and relative to the best backend of the table (1.0 = best).
* **Which families drive a ranking**: :math:`\log(\mathrm{sgm}_b + s) - \log(\mathrm{sgm}_{best} + s)
  = \tfrac1n \sum_i [\log(t_{b,i} + s) - \log(t_{best,i} + s)]` is a sum over instances, so it splits
  exactly by family; :func:`drivers` gives each family's share of a backend's gap to the leader.
* **Accuracy**: the largest primal residual, dual residual and relative gap over the backend's
  successful runs.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter, defaultdict
from typing import Sequence

from ntpcert.experiments.bench.runner import Prepared, Run
from ntpcert.experiments.bench.status import STATUSES

#: Shift of the shifted geometric mean, in seconds.
SHIFT = 10.0
#: Families listed as driving a gap when their share is at least this.
DRIVER_SHARE = 0.2


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


def scored_time(r: Run, time_limit: float) -> float:
    """The time a run counts with: its seconds when it succeeded, the time limit otherwise."""
    return r.seconds if r.success and r.seconds is not None else time_limit


def feasible(runs: Sequence[Run]) -> list[Run]:
    """The runs on instances not settled as non-separable (those the rankings count)."""
    return [r for r in runs if r.expected != "not separable"]


def summarize(runs: Sequence[Run], time_limit: float, shift: float = SHIFT) -> dict[str, dict[str, dict]]:
    """``{family: {backend: {"runs", "success", "success_rate", "sgm", "sgm_ratio", "max_primal", ...}}}``
    over the runs on separable instances; the family ``"all"`` pools them."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for r in feasible(runs):
        groups[(r.family, r.backend)].append(r)
        groups[("all", r.backend)].append(r)
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for (fam, backend), rs in groups.items():
        good = [r for r in rs if r.success]
        out[fam][backend] = {
            "runs": len(rs),
            "success": len(good),
            "success_rate": len(good) / len(rs),
            "sgm": shifted_geometric_mean([scored_time(r, time_limit) for r in rs], shift),
            "max_primal": _max(r.primal_residual for r in good),
            "max_dual": _max(r.dual_residual for r in good),
            "max_gap": _max(r.relative_gap for r in good),
        }
    for rows in out.values():
        best = min(v["sgm"] for v in rows.values())
        for v in rows.values():
            v["sgm_ratio"] = v["sgm"] / best if best > 0 else math.nan
    return dict(out)


def drivers(runs: Sequence[Run], time_limit: float, shift: float = SHIFT) -> dict[str, dict[str, float]]:
    """``{backend: {family: share}}``: each family's share of the backend's pooled log-time gap to the
    leader of the pooled ranking, :math:`\\sum_{i \\in f} [\\log(t_{b,i}+s) - \\log(t_{L,i}+s)]` over the
    sum over all instances (shares add up to 1; a negative share is a family where b beats the leader).
    The leader itself maps to ``{}``."""
    rows = feasible(runs)
    summ = summarize(rows, time_limit, shift).get("all", {})
    if not summ:
        return {}
    leader = min(summ, key=lambda b: summ[b]["sgm"])
    t = {(r.family, r.instance, r.backend): math.log(scored_time(r, time_limit) + shift) for r in rows}
    out: dict[str, dict[str, float]] = {}
    for b in summ:
        per: dict[str, float] = defaultdict(float)
        for (fam, inst, back), v in t.items():
            if back == b and (fam, inst, leader) in t:
                per[fam] += v - t[(fam, inst, leader)]
        total = sum(per.values())
        out[b] = {} if b == leader or total <= 0 else {f: x / total for f, x in per.items()}
    return out


def infeasible_summary(runs: Sequence[Run], time_limit: float, shift: float = SHIFT) -> dict[str, dict]:
    """``{backend: {"runs", "certified", "statuses": {status: count}, "sgm"}}`` over the instances settled
    as not separable; ``sgm`` covers the runs the backend made there (None when it made none)."""
    out: dict[str, dict] = {}
    by: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        if r.expected == "not separable":
            by[r.backend].append(r)
    for b, rs in by.items():
        made = [r for r in rs if r.status != "cannot certify infeasibility"]
        out[b] = {"runs": len(rs), "certified": sum(r.status == "infeasible" for r in rs),
                  "statuses": dict(Counter(r.status for r in rs)),
                  "sgm": shifted_geometric_mean([scored_time(r, time_limit) for r in made], shift) if made else None}
    return out


def _fmt(x, spec: str = ".2e") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _driver_text(shares: dict[str, float]) -> str:
    big = sorted(((s, f) for f, s in shares.items() if s >= DRIVER_SHARE), reverse=True)
    return ", ".join(f"{f} {s:.0%}" for s, f in big) or ("-" if not shares else "spread evenly")


def _ranking_table(rows: dict[str, dict], shares: dict[str, dict] | None = None) -> list[str]:
    head = "| backend | success | rate | sgm time (s) | ratio |"
    rule = "|---|---|---|---|---|"
    if shares is not None:
        head += " gap to the leader from |"
        rule += "---|"
    lines = [head + " max primal res | max dual res | max rel. gap |", rule + "---|---|---|"]
    for b in sorted(rows, key=lambda b: rows[b]["sgm"]):
        v = rows[b]
        cells = f"| {b} | {v['success']}/{v['runs']} | {v['success_rate']:.0%} | {v['sgm']:.3g} | {v['sgm_ratio']:.1f} |"
        if shares is not None:
            cells += f" {_driver_text(shares.get(b, {})) if shares.get(b) else 'leader'} |"
        lines.append(cells + f" {_fmt(v['max_primal'])} | {_fmt(v['max_dual'])} | {_fmt(v['max_gap'])} |")
    return lines


def markdown(runs: Sequence[Run], items: Sequence[Prepared], *, time_limit: float, tol: float, shift: float = SHIFT,
             title: str = "NTP-SVM solver benchmark", notes: Sequence[str] = ()) -> str:
    """The Markdown report: settings, instances, the ranking over every separable instance and what drives
    it, one table per family, the instances that are not separable apart, then every run."""
    summ = summarize(runs, time_limit, shift)
    lines = [f"# {title}", ""]
    lines += [f"- Time limit {time_limit:g} s per run; a run succeeds when primal residual, dual residual and "
              f"relative gap are all ≤ {tol:g} (recomputed from the returned pair), or, on data that are not "
              "separable, when the backend reports infeasibility.",
              f"- Shifted geometric mean of solve time with shift {shift:g} s over the separable instances; failed "
              "runs count as the time limit. `ratio` is relative to the best backend of the table. Instances "
              "that are not separable are scored apart (last table).",
              "- Time covers building the Kesler rows and the solve, in one worker process per backend that "
              "solved a tiny instance first (imports not timed); `peak MB` is that process's largest resident "
              "set size so far.",
              "- `results.csv` holds these runs in qpbenchmark's format; qpbenchmark's `report` on it ranks them "
              "by the same shifted geometric mean, so in the same order. qpbenchmark's own runs of the exported "
              "test set can order solvers differently: it times the solve call only, with its own solver settings "
              "(see docs/solvers.md)."]
    lines += [f"- {n}" for n in notes]
    lines += ["", "## Instances", "", "| family | instance | m | d | V | verdict | settled by |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {it.family} | {it.name} | {it.m} | {it.d} | {it.V} | {it.expected} | {it.how} |" for it in items]
    if "all" in summ:
        lines += ["", "## Ranking over all separable instances", "",
                  "`gap to the leader from`: the families holding at least "
                  f"{DRIVER_SHARE:.0%} of the backend's gap to the leader, log(t + {shift:g}) summed per family "
                  "(a share above 100% means the backend beats the leader elsewhere).", ""]
        lines += _ranking_table(summ["all"], drivers(runs, time_limit, shift))
        winners = Counter(min(summ[f], key=lambda b: summ[f][b]["sgm"]) for f in summ if f != "all")
        lines += ["", "Fastest per family: " + ", ".join(
            f"{b} in {n} of {len(summ) - 1}" for b, n in winners.most_common()) + "."]
    for fam in (f for f in summ if f != "all"):
        lines += ["", f"## {fam}", ""] + _ranking_table(summ[fam])
    inf = infeasible_summary(runs, time_limit, shift)
    if inf:
        n = len({(r.family, r.instance) for r in runs if r.expected == "not separable"})
        lines += ["", f"## Instances that are not separable ({n}, scored apart)", "",
                  "| backend | certified infeasible | statuses | sgm time (s) of its runs |", "|---|---|---|---|"]
        for b in sorted(inf, key=lambda b: (-inf[b]["certified"], inf[b]["sgm"] or math.inf)):
            v = inf[b]
            st = ", ".join(f"{k} {c}" for k, c in sorted(v["statuses"].items()))
            lines.append(f"| {b} | {v['certified']}/{v['runs']} | {st} | {_fmt(v['sgm'], '.3g')} |")
    used = sorted({r.status for r in runs})
    lines += ["", "## Statuses", "", "| status | meaning |", "|---|---|"]
    lines += [f"| {s} | {STATUSES[s]} |" for s in used]
    lines += ["", "## Runs", "", "| family | instance | backend | status | seconds | peak MB | rel. gap | message |",
              "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        msg = r.message.replace("|", "/").replace("\n", " ")[:80]
        lines.append(f"| {r.family} | {r.instance} | {r.backend} | {r.status} | {_fmt(r.seconds, '.3g')} | "
                     f"{_fmt(r.peak_mb, '.0f')} | {_fmt(r.relative_gap)} | {msg} |")
    return "\n".join(lines) + "\n"


def csv_text(runs: Sequence[Run]) -> str:
    """One CSV row per run, every field of :class:`Run` (``runs.csv``; ``results.csv`` is qpbenchmark's
    format, :func:`ntpcert.experiments.bench.qpbench_results.results_csv`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(Run.__dataclass_fields__))
    w.writeheader()
    for r in runs:
        w.writerow(r.to_row())
    return buf.getvalue()


def summary_json(runs: Sequence[Run], time_limit: float, *, out: str | None = None,
                 qpbenchmark: str | None = None) -> dict:
    """The JSON of ``ntpcert bench --json``: :func:`summarize`, :func:`infeasible_summary`, :func:`drivers`,
    every run, and where the report (``out``) and the qpbenchmark test set went."""
    return {"summary": summarize(runs, time_limit), "infeasible": infeasible_summary(runs, time_limit),
            "drivers": drivers(runs, time_limit), "runs": [r.to_row() for r in runs], "out": out,
            "qpbenchmark": qpbenchmark}


__all__ = ["DRIVER_SHARE", "SHIFT", "csv_text", "drivers", "feasible", "infeasible_summary", "markdown",
           "scored_time", "shifted_geometric_mean", "summarize", "summary_json"]
