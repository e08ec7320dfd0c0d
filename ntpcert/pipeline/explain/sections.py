r"""The irreducible culprits as certificate sections (``why_not_separable``, ``why_not_compatible``).

Written by ``certify --exact`` beside a false claim and checked by
:mod:`ntpcert.certificate.checker.why_not`; the layout is in :mod:`ntpcert.certificate.format`. Only
culprits proved irreducible here are written, and a set whose deletion points would hold more than
:data:`~ntpcert.certificate.format.MAX_WHY_NOT_CELLS` entries is left out (the JSON key says why).
"""

from __future__ import annotations

from ntpcert.certificate.encode import sparse_list
from ntpcert.certificate.format import MAX_WHY_NOT_CELLS
from ntpcert.exact.rational import fraction_str
from ntpcert.pipeline.explain.compatibility import WhyNotCompatible
from ntpcert.pipeline.explain.separability import WhyNotSeparable


def separability_section(wns: WhyNotSeparable | None) -> tuple[dict | None, str]:
    """``(section, "")``, or ``(None, why not)``."""
    if wns is None or not wns.irreducible:
        return None, "no set proved irreducible"
    V = wns.instance.V
    cells = sum(V * len(d.point.cols) for d in wns.deletions if d.point is not None)
    if cells > MAX_WHY_NOT_CELLS:
        return None, (f"its deletion points hold {cells} entries, more than the {MAX_WHY_NOT_CELLS} a certificate "
                      "takes")
    deletions = []
    for d in wns.deletions:
        if d.point is None:  # a set of one context: nothing left to separate
            deletions.append({"context": int(d.context), "cols": [], "W": []})
        else:
            deletions.append({"context": int(d.context), "cols": [int(i) for i in d.point.cols],
                              "W": [[fraction_str(x) for x in row] for row in d.point.W]})
    return {"contexts": [int(j) for j in wns.contexts], "ray": sparse_list(wns.ray), "deletions": deletions}, ""


def compatibility_section(wnc: WhyNotCompatible | None) -> tuple[dict | None, str]:
    """``(section, "")``, or ``(None, why not)``."""
    if wnc is None or not wnc.irreducible:
        return None, "no cycle proved irreducible"
    return {"y": [[int(j), int(z), str(int(y))] for (j, z), y in sorted(zip(wnc.rows, wnc.y))]}, ""


__all__ = ["compatibility_section", "separability_section"]
