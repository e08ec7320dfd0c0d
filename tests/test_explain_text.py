"""The text of ``explain``'s excess bracket (:func:`ntpcert.report.explain.excess_lines`)."""

import numpy as np

from ntpcert import NTPInstance


def _key(lower: float) -> dict:
    return {"lower": 1.0 + lower, "upper": 1.2, "excess_lower": lower, "excess_upper": 0.2, "relative_width": 0.1,
            "per_context_excess": [0.05, 0.1, 0.05]}


def test_contexts_are_listed_only_where_the_bracket_shows_excess():
    from ntpcert.report.explain import excess_lines

    inst = NTPInstance.from_counts(np.eye(3), np.array([[1, 0], [0, 1], [1, 1]]))
    shown = "\n".join(excess_lines(_key(0.1), inst))
    assert "contexts carrying the most excess" in shown and "nats" in shown
    hidden = "\n".join(excess_lines(_key(0.0), inst))  # L* - H can be 0: the numbers are the optimiser's residue
    assert "contexts carrying the most excess" not in hidden and "optimiser's residue" in hidden
