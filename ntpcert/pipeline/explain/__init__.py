r"""Why the entropy bound is out of reach: the contexts to blame (``ntpcert explain``).

The entropy bound is reached iff the data are NTP-compatible (4) and NTP-separable (6). When a verdict
is negative, its exact witness names a culprit, which is shrunk here to an irreducible one:

* :mod:`.separability`: the support of a Farkas ray, shrunk by a deletion filter to a set of contexts
  that is not separable while every one-context deletion is (each certified by an exact point);
* :mod:`.compatibility`: a violating left null vector, shrunk to a cycle of log-odds equations whose
  every proper subset is consistent, with its mismatch in nats.

:func:`explain` decides both verdicts with the decision engine (:mod:`ntpcert.pipeline.decide`) and
explains the negative ones; :func:`why_not` explains the verdicts of a ``certify`` run, within limits
that keep it cheap (:data:`CERTIFY_MAX_CONTEXTS`, :data:`CERTIFY_MAX_EQUATIONS`, :data:`CERTIFY_MAX_DECISIONS`).
Every filter runs within a budget of work (sub-problems decided, equations tried), never a clock; a
user's cap in seconds (``time_limit``, ``--time-limit``) is off by default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ntpcert.util.summary import short_str
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import (
    DEFAULT_SEPARABILITY_SOLVER,
    decide_compatibility,
    decide_separability,
    lemma1,
)
from ntpcert.pipeline.explain.compatibility import LogOddsTerm, WhyNotCompatible, why_not_compatible
from ntpcert.pipeline.explain.sections import compatibility_section, separability_section
from ntpcert.pipeline.explain.separability import Deletion, WhyNotSeparable, why_not_separable
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.util.logic import and3
from ntpcert.verdict import FarkasRay, Verdict, ViolatingNullVector

#: ``certify --json`` explains a negative separability verdict only when its ray touches at most this
#: many contexts, and a negative compatibility verdict only when its null vector has at most this many
#: non-zeros (so at most this many equations tried). ``ntpcert explain`` has no such caps.
CERTIFY_MAX_CONTEXTS = 64
CERTIFY_MAX_EQUATIONS = 200
#: ... and the separability filter inside ``certify`` decides at most this many sub-problems (it replaces a
#: limit of 5 s; a set of n <= 64 contexts takes about 2n, and the default suite's largest took 6). The
#: compatibility filter tries at most :data:`CERTIFY_MAX_EQUATIONS` equations, one per non-zero.
#: ``ntpcert explain`` has the filters' own budgets (:data:`.separability.MAX_DECISIONS`,
#: :data:`.compatibility.MAX_TRIES`).
CERTIFY_MAX_DECISIONS = 400


@dataclass(frozen=True, eq=False)
class Explanation:
    """Both verdicts with their culprits.

    Attributes
    ----------
    instance : NTPInstance
    compatible, separable : Verdict
        Whether (4) and (6) hold, with the witness that shows it (:mod:`ntpcert.verdict`).
    why_not_compatible : WhyNotCompatible or None
    why_not_separable : WhyNotSeparable or None
    notes : dict
        Why a negative verdict has no explanation, per key.
    seconds : float
    stages : dict
        Wall seconds of each stage.
    """

    __str__ = short_str  # print(report): a few lines; repr stays complete

    instance: NTPInstance
    compatible: Verdict
    separable: Verdict
    why_not_compatible: WhyNotCompatible | None
    why_not_separable: WhyNotSeparable | None
    notes: dict = field(default_factory=dict)
    seconds: float = 0.0
    stages: dict = field(default_factory=dict)
    #: The ``excess_loss`` key (:func:`ntpcert.pipeline.excess_certificate.excess_key`), or None.
    excess_loss: dict | None = None
    #: On data that are not (or not shown to be) separable, the non-separable pairs N by token pair
    #: (:func:`nonseparable_pairs_json`), or None.
    nonseparable_pairs: dict | None = None

    @property
    def entropy_bound_reachable(self) -> bool | None:
        return and3(self.compatible.holds, self.separable.holds)

    def to_json(self) -> dict:
        inst = self.instance
        out = {
            "name": inst.name, "m": inst.m, "d": inst.d, "V": inst.V, "entropy": inst.entropy(),
            "compatible": self.compatible.to_json(),
            "separable": self.separable.to_json(),
            "entropy_bound_reachable": self.entropy_bound_reachable,
        }
        out.update(_keys(self.compatible.holds, self.why_not_compatible, self.separable.holds, self.why_not_separable,
                         self.notes))
        if self.excess_loss is not None:
            out["excess_loss"] = self.excess_loss
        if self.nonseparable_pairs is not None:
            out["nonseparable_pairs"] = self.nonseparable_pairs
        out["seconds"] = self.seconds
        out["stages"] = dict(self.stages)
        return out


def _keys(compatible, wnc, separable, wns, notes) -> dict:
    out = {}
    if separable is False:
        out["why_not_separable"] = wns.to_json() if wns is not None else {"skipped": notes.get("why_not_separable", "")}
    if compatible is False:
        out["why_not_compatible"] = wnc.to_json() if wnc is not None else {"skipped": notes.get("why_not_compatible", "")}
    return out


def explain(instance: NTPInstance, *, exact: bool = False, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
            time_limit: float | None = None, separability_time_limit: float | None = None,
            excess: bool = True) -> Explanation:
    """Decide (4) and (6) and explain each negative verdict by an irreducible culprit.

    Parameters
    ----------
    instance : NTPInstance
    exact : bool
        Take the verdicts and witnesses from :func:`~ntpcert.pipeline.exact_verdicts.exact_certify`
        (a certificate checked by the independent checker) instead of the decision engine alone. The
        culprits are checked in exact arithmetic either way.
    separability_solver : {"auto", "structured", "highs"}
        Separability solver, for the whole instance and for every sub-problem of the filter.
    time_limit : float, optional
        A user's cap in seconds on each shrinking, off by default (the result says when it was reached);
        each shrinking has its budget of work either way.
    separability_time_limit : float, optional
        A user's cap in seconds on the separability decision of the whole instance (without ``exact``),
        off by default.
    excess : bool
        Also bracket the best loss :math:`L^*` (key ``excess_loss``; certified with ``exact``).
    """
    t0 = time.perf_counter()
    stages: dict[str, float] = {}

    def lap(key: str, since: float) -> float:
        now = time.perf_counter()
        stages[key] = now - since
        return now

    ts = time.perf_counter()
    system = KeslerSystem.build(instance)
    if exact:
        compatible, separable = _exact_verdicts(instance, separability_solver)
        ts = lap("certify_exact", ts)
    else:
        rank = lemma1(instance)
        p = rank if rank.full else None
        ts = lap("rows_and_lemma1", ts)
        compatible = decide_compatibility(system, lemma1_rank=p)
        ts = lap("compatibility", ts)
        separable, _ = decide_separability(system, separability_solver=separability_solver, lemma1_rank=p,
                                           time_limit=separability_time_limit)
        ts = lap("separability", ts)
    violating, ray = _violating(compatible), _ray(separable)
    notes: dict[str, str] = {}
    wns = wnc = None
    if separable.holds is False:
        wns = (why_not_separable(instance, ray, separability_solver=separability_solver, time_limit=time_limit)
               if ray else None)
        if wns is None:
            notes["why_not_separable"] = "no Farkas ray that passes its exact re-check"
    ts = lap("why_not_separable", ts)
    if compatible.holds is False:
        wnc = why_not_compatible(instance, violating, system=system, time_limit=time_limit) if violating else None
        if wnc is None:
            notes["why_not_compatible"] = "no violating null vector that passes its exact re-check"
    ts = lap("why_not_compatible", ts)
    pairs = split = None
    if separable.holds is not True:  # False, or undetermined: the float split may still name the pairs
        from ntpcert.pipeline.nonseparable import split_of

        split, N, note = split_of(instance)
        pairs = nonseparable_pairs_json(instance, N, note)
        ts = lap("nonseparable_pairs", ts)
    excess_loss = None
    if excess:  # the same split defines the bracket's face (ntpcert.solve.excess.float_bracket)
        from ntpcert.pipeline.excess_certificate import EXPLAIN_MAX_CELLS, excess_key

        excess_loss = excess_key(instance, exact=exact, cap=EXPLAIN_MAX_CELLS, split=split,
                                 separable=separable.holds)[0]
        lap("excess_loss", ts)
    return Explanation(instance, compatible, separable, wnc, wns, notes, time.perf_counter() - t0, stages, excess_loss,
                       pairs)


#: How many contexts each token pair names (``examples``), the heaviest first.
MAX_PAIR_CONTEXTS = 5


def nonseparable_pairs_json(instance: NTPInstance, nonseparable, note: str) -> dict:
    r"""The non-separable pairs (j, v) named by their tokens and grouped by token pair (z, v), z in
    :math:`S_j` (:func:`ntpcert.pipeline.nonseparable.pair_groups`), the heaviest first.

    Keys: ``pairs`` (:math:`|N|`), ``split`` (how N was found), ``weight`` (N's weight
    :math:`\sum_{(j,v)\in N}\pi_j`), ``weight_is`` (the convention, in words), ``groups_total`` and
    ``groups``: every token pair, each with ``support_token`` and ``token`` (names, as the instance's
    vocabulary spells them, else ``#id``), ``support_token_id``, ``token_id``, ``contexts`` (how many),
    ``weight`` (:math:`\sum_j \pi_j p_{j,z}` over its contexts: a pair (j, v) shares its :math:`\pi_j`
    among its support tokens by :math:`p_j`, so the groups' weights sum to ``weight``), ``share``
    (``weight`` over N's) and ``context_names`` (the first :data:`MAX_PAIR_CONTEXTS`, heaviest first).
    ``pairs`` is None when the split is undetermined (``split`` says why)."""
    from ntpcert.pipeline.explain.names import context_text, token_text
    from ntpcert.pipeline.nonseparable import nonseparable_weight, pair_groups

    if nonseparable is None:
        return {"pairs": None, "split": note, "weight": None, "weight_is": WEIGHT_IS, "groups": [], "groups_total": None}
    groups = pair_groups(instance, nonseparable)
    total = nonseparable_weight(instance, nonseparable)
    shown = [{"support_token": token_text(instance, g["support_token"]), "token": token_text(instance, g["token"]),
              "support_token_id": g["support_token"], "token_id": g["token"], "contexts": len(g["contexts"]),
              "weight": g["weight"], "share": g["weight"] / total if total > 0 else 0.0,
              "context_names": [context_text(instance, j) for j in g["contexts"][:MAX_PAIR_CONTEXTS]]}
             for g in groups]
    return {"pairs": int(len(nonseparable)), "split": note, "weight": total, "weight_is": WEIGHT_IS, "groups": shown,
            "groups_total": len(groups)}


#: The weight convention of :func:`nonseparable_pairs_json`, as its key ``weight_is`` states it.
WEIGHT_IS = ("a pair (j, v) of N weighs pi_j, shared among the token pairs (z, v), z in S_j, as pi_j p_{j,z}; "
             "a token pair's weight is the sum over its contexts")


def _violating(v: Verdict) -> dict | None:
    return v.witness.y if isinstance(v.witness, ViolatingNullVector) else None


def _ray(v: Verdict) -> dict | None:
    return v.witness.ray if isinstance(v.witness, FarkasRay) else None


def _exact_verdicts(instance: NTPInstance, separability_solver: str) -> tuple[Verdict, Verdict]:
    """The checked verdicts of ``certify --exact`` (no NTP-SVM), with their exact witnesses."""
    from ntpcert.pipeline.exact_verdicts import exact_certify

    rep = exact_certify(instance, svm=False, separability_solver=separability_solver, excess=False)
    return rep.compatible, rep.separable


def why_not(instance: NTPInstance, *, compatible: bool | None, violating: dict | None, separable: bool | None,
            ray: dict | None, system: KeslerSystem | None = None, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
            max_contexts: int = CERTIFY_MAX_CONTEXTS, max_equations: int = CERTIFY_MAX_EQUATIONS,
            max_decisions: int = CERTIFY_MAX_DECISIONS, time_limit: float | None = None) -> dict:
    """The keys ``why_not_separable`` / ``why_not_compatible`` for a report whose verdicts and exact
    witnesses are given: present only for a negative verdict; ``{"skipped": why}`` when the witness is
    larger than the caps (then ``ntpcert explain`` gives it)."""
    wnc, wns, notes = _culprits(instance, compatible, violating, separable, ray, system, separability_solver,
                                max_contexts, max_equations, max_decisions, time_limit)
    return _keys(compatible, wnc, separable, wns, notes)


def why_not_with_sections(instance: NTPInstance, *, compatible: bool | None, violating: dict | None,
                          separable: bool | None, ray: dict | None, system: KeslerSystem | None = None,
                          separability_solver: str = DEFAULT_SEPARABILITY_SOLVER) -> tuple[dict, dict]:
    """:func:`why_not`, and the irreducible culprits as certificate sections
    (:mod:`.sections`; the hook ``why_not`` of
    :func:`~ntpcert.pipeline.exact_verdicts.exact_certify`). Each key says whether its culprit is in
    the certificate (``in_certificate``), and why not when it is not."""
    wnc, wns, notes = _culprits(instance, compatible, violating, separable, ray, system, separability_solver,
                                CERTIFY_MAX_CONTEXTS, CERTIFY_MAX_EQUATIONS, CERTIFY_MAX_DECISIONS, None)
    keys = _keys(compatible, wnc, separable, wns, notes)
    sections = {}
    for key, (sec, why) in (("why_not_separable", separability_section(wns)),
                            ("why_not_compatible", compatibility_section(wnc))):
        if key not in keys or "skipped" in keys[key]:
            continue
        if sec is not None:
            sections[key] = sec
        keys[key]["in_certificate"] = sec is not None
        if sec is None:
            keys[key]["not_in_certificate"] = why
    return keys, sections


def _culprits(instance, compatible, violating, separable, ray, system, separability_solver, max_contexts,
              max_equations, max_decisions,
              time_limit) -> tuple[WhyNotCompatible | None, WhyNotSeparable | None, dict[str, str]]:
    notes: dict[str, str] = {}
    wns = wnc = None
    if separable is False:
        n = len({j for (_, j) in ray}) if ray else 0
        if not ray:
            notes["why_not_separable"] = "no Farkas ray to start from"
        elif n > max_contexts:
            notes["why_not_separable"] = (f"the Farkas ray touches {n} contexts, more than the {max_contexts} explained "
                                          "here; run 'ntpcert explain DATA'")
        else:
            wns = why_not_separable(instance, ray, separability_solver=separability_solver, time_limit=time_limit,
                                    max_decisions=max_decisions)
            if wns is None:
                notes["why_not_separable"] = "the Farkas ray failed its exact re-check"
    if compatible is False:
        n = sum(1 for v in (violating or {}).values() if v)
        if not violating:
            notes["why_not_compatible"] = "no violating null vector to start from"
        elif n > max_equations:
            notes["why_not_compatible"] = (f"the violating null vector has {n} non-zeros, more than the {max_equations} "
                                           "explained here; run 'ntpcert explain DATA'")
        else:
            wnc = why_not_compatible(instance, violating, system=system, time_limit=time_limit)
            if wnc is None:
                notes["why_not_compatible"] = "the violating null vector failed its exact re-check"
    return wnc, wns, notes


def why_not_of_report(rep, *, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER) -> dict:
    """:func:`why_not` on the verdicts and exact witnesses of a ``certify`` report (a float
    :class:`~ntpcert.pipeline.float_verdicts.Report` or an
    :class:`~ntpcert.pipeline.exact_verdicts.ExactReport`, whose checked verdicts are used)."""
    instance, system = ((rep.float_report.instance, rep.float_report.subspace.system) if hasattr(rep, "float_report")
                        else (rep.instance, rep.subspace.system))
    return why_not(instance, compatible=rep.compatible.holds, violating=_violating(rep.compatible),
                   separable=rep.separable.holds, ray=_ray(rep.separable), system=system,
                   separability_solver=separability_solver)


__all__ = [
    "CERTIFY_MAX_DECISIONS",
    "CERTIFY_MAX_CONTEXTS",
    "CERTIFY_MAX_EQUATIONS",
    "Deletion",
    "Explanation",
    "LogOddsTerm",
    "WhyNotCompatible",
    "WhyNotSeparable",
    "explain",
    "nonseparable_pairs_json",
    "why_not",
    "why_not_with_sections",
    "why_not_compatible",
    "why_not_of_report",
    "why_not_separable",
]
