r"""The split P / N in ``certify``: its JSON key and its certificate section.

:func:`split_key` reports the float split (:func:`ntpcert.solve.split.nonseparable_split`) for
``certify --json``; :func:`exact_split_section` makes it exact (:func:`ntpcert.exact.split.exact_split`)
and writes the optional certificate section ``split`` (``docs/certificate-format.md``), which
:mod:`ntpcert.certificate.checker.split` checks. On separable data the split is read off the verdict
(N is empty, every out-of-support pair is in P) and nothing is solved.
"""

from __future__ import annotations

from typing import Any

from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import SPLIT_SCREEN_MAX_CELLS

#: ``certify`` solves the split LP only up to this many non-zeros (about a second of HiGHS per 10^5 on the
#: instances measured); larger ones report the split as skipped, with the sizes.
CERTIFY_MAX_NONZEROS = 2_000_000
#: ... and its small LPs (:mod:`ntpcert.solve.split_screen`) only up to the cells C·m·d under which
#: :mod:`ntpcert.pipeline.decide` uses them for the verdict; larger ones report the split as
#: undetermined, with the sizes (the whole pydoc text, char k = 5: 3.4·10^9 cells, past 15 minutes).
CERTIFY_MAX_CELLS = SPLIT_SCREEN_MAX_CELLS
#: ``nonseparable_pairs`` lists the pairs when there are at most this many; else it is their count.
LIST_MAX_PAIRS = 1000


def _n_pairs(instance: NTPInstance) -> int:
    return int(instance.m * instance.V - int(instance.support_sizes.sum()))


def _pairs_value(pairs) -> Any:
    n = int(pairs.shape[0])
    return [[int(j), int(v)] for j, v in pairs.tolist()] if n <= LIST_MAX_PAIRS else n


def split_key(instance: NTPInstance, separable: bool | None) -> dict:
    """The ``split`` key of ``certify --json``: ``separable_pairs`` (a count), ``nonseparable_pairs`` (the
    list of [j, v], or its count past :data:`LIST_MAX_PAIRS`), ``status`` and, when undetermined, ``reason``."""
    if separable is True:
        return {"separable_pairs": _n_pairs(instance), "nonseparable_pairs": [], "status": "ok",
                "engine": "separability verdict"}
    from ntpcert.solve.split import nonseparable_split

    s = nonseparable_split(instance, max_nonzeros=CERTIFY_MAX_NONZEROS, max_cells=CERTIFY_MAX_CELLS)
    out = {"separable_pairs": s.n_separable if s.ok else None,
           "nonseparable_pairs": _pairs_value(s.nonseparable) if s.ok else None,
           "status": s.status, "engine": "split-lp", "lp_iterations": s.iterations}
    if not s.ok:
        out["reason"] = s.reason
    return out


def _q(f) -> str:
    from ntpcert.exact.rational import fraction_str

    return fraction_str(f)


def section_of(es) -> dict:
    """The certificate section of an exact split (:class:`ntpcert.exact.split.ExactSplit`)."""
    return {"nonseparable": [[int(j), int(v)] for j, v in es.nonseparable.tolist()],
            "token_class": [int(c) for c in es.of_token.tolist()],
            "D_P": [[_q(x) for x in row] for row in es.D_rows],
            "dual": [[int(c), int(j), _q(v)] for (c, j), v in sorted(es.dual.items())]}


def exact_split_section(instance: NTPInstance) -> tuple[dict, dict | None]:
    """``(key, section)``: the exact split's JSON key and its certificate section (None when the split
    could not be made exact; the key says why)."""
    from ntpcert.exact.split import exact_split
    from ntpcert.solve.split import nonseparable_split

    s = nonseparable_split(instance, max_nonzeros=CERTIFY_MAX_NONZEROS, max_cells=CERTIFY_MAX_CELLS)
    es = exact_split(instance, s)
    key = {"separable_pairs": es.n_separable if s.ok else None,
           "nonseparable_pairs": _pairs_value(es.nonseparable) if s.ok else None,
           "status": es.status, "engine": "split-lp", "lp_iterations": s.iterations}
    if not es.ok:
        key["reason"] = es.reason
        return key, None
    return key, section_of(es)


def split_verdict(instance: NTPInstance):
    """The separability verdict the exact split shows: False with a
    :class:`~ntpcert.verdict.SplitCertificate` when N is not empty, else undetermined (an empty N says
    the data are separable, which the separability witnesses show already), naming why."""
    from ntpcert.exact.split import exact_split
    from ntpcert.solve.split import nonseparable_split
    from ntpcert.verdict import SplitCertificate, Verdict

    es = exact_split(instance, nonseparable_split(instance))
    if not es.ok:
        return Verdict.undetermined(f"the split is undetermined: {es.reason}")
    if not len(es.nonseparable):
        return Verdict.undetermined("the split has no non-separable pair: the data are separable")
    return Verdict.of(SplitCertificate(es, text=f"split: {len(es.nonseparable)} non-separable pairs, "
                                                f"{es.n_separable} separable, exact"))
