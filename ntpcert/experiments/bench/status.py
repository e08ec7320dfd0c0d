r"""One status vocabulary for every benchmark run, mapped from each backend by a closed table.

A worker reports what the backend did in its own terms (``raw``: ``"optimal"`` with residuals,
``"infeasible"``, ``"error"``), the runner adds what happened to the process (``"killed"``,
``"crash"``), and :func:`outcome` maps the pair (raw status, settled verdict of the instance) onto
exactly one of :data:`STATUSES`. A pair the table does not list is a bug in the harness, so it raises.

Backends differ in what they can say about data that are not NTP-separable. Those of
:data:`CERTIFIES_INFEASIBILITY` raise :class:`~ntpcert.errors.InfeasibleError` when the QP is
infeasible; the qpsolvers backends cannot (``qpsolvers.Solution`` has no infeasibility status), so
on a non-separable instance they are not run at all and score ``cannot certify infeasibility``,
instead of spending the time limit on a question they cannot answer.
"""

from __future__ import annotations

#: Every status a run can have, with its meaning (the report's key).
STATUSES: dict[str, str] = {
    "solved": "a solution whose residuals and relative gap are all within the tolerance",
    "inaccurate": "a solution, but a residual or the relative gap is over the tolerance",
    "infeasible": "reported infeasibility on data that are not NTP-separable (the right answer)",
    "cannot certify infeasibility": "data not NTP-separable, and the backend has no infeasibility report (not run)",
    "no solution": "the backend stopped without a solution or a verdict",
    "wrong verdict": "reported infeasibility on separable data, or a solution on data that are not separable",
    "time limit": "still running at the time limit (killed, or returned after it)",
    "crash": "the worker process died",
}

#: The statuses that count as a success.
SUCCESS = frozenset({"solved", "infeasible"})

#: Backends that report an infeasible NTP-SVM (they raise ``InfeasibleError``); ``cvxpy:NAME`` and
#: ``structured*`` by prefix.
CERTIFIES_INFEASIBILITY = frozenset({"auto", "structured", "structured-float", "clarabel", "cvxpy"})

#: The closed table: (raw status, verdict class) -> status; a verdict class is "feasible" for a
#: separable instance and "infeasible" for one that is not.
TABLE: dict[tuple[str, str], str] = {
    ("optimal/accurate", "feasible"): "solved",
    ("optimal/inaccurate", "feasible"): "inaccurate",
    ("optimal/accurate", "infeasible"): "wrong verdict",
    ("optimal/inaccurate", "infeasible"): "wrong verdict",
    ("infeasible", "feasible"): "wrong verdict",
    ("infeasible", "infeasible"): "infeasible",
    ("error", "feasible"): "no solution",
    ("error", "infeasible"): "no solution",
    ("killed", "feasible"): "time limit",
    ("killed", "infeasible"): "time limit",
    ("late", "feasible"): "time limit",
    ("late", "infeasible"): "time limit",
    ("crash", "feasible"): "crash",
    ("crash", "infeasible"): "crash",
    ("not run", "infeasible"): "cannot certify infeasibility",
}


def certifies_infeasibility(backend: str) -> bool:
    """Whether ``backend`` can report that the NTP-SVM is infeasible."""
    return backend in CERTIFIES_INFEASIBILITY or backend.startswith(("cvxpy:", "structured"))


def verdict_class(expected: str) -> str:
    """``"infeasible"`` for an instance settled not separable, else ``"feasible"`` (an instance
    whose verdict is unknown is scored as feasible: only a solution within tolerance counts)."""
    return "infeasible" if expected == "not separable" else "feasible"


def outcome(raw: str, expected: str) -> str:
    """The status of a run from the worker's ``raw`` status and the instance's settled verdict.

    >>> outcome("optimal/accurate", "separable"), outcome("not run", "not separable")
    ('solved', 'cannot certify infeasibility')
    """
    key = (raw, verdict_class(expected))
    if key not in TABLE:
        raise ValueError(f"raw status: no entry for {raw!r} on a {key[1]} instance")
    return TABLE[key]


__all__ = ["CERTIFIES_INFEASIBILITY", "STATUSES", "SUCCESS", "TABLE", "certifies_infeasibility", "outcome",
           "verdict_class"]
