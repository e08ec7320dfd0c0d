r"""Why not separable: an irreducible set of contexts that no linear decoder separates.

A Farkas ray :math:`a \in \mathbb{R}^{V \times m}` of (6) (:mod:`ntpcert.exact.separability`) has

.. math:: \sum_j a_j h_j^\top = 0,\quad \mathbf 1^\top a_j = 0,\quad a_{j,v} \le 0\ (v \notin S_j),\quad
          \sum_j \sum_{v \notin S_j} (-a_{j,v}) > 0 .

For every W, :math:`\sum_j \sum_v a_{j,v}(Wh_j)_v = \langle \sum_j a_j h_j^\top, W\rangle = 0`, while a
separating W (in-support logits :math:`t_j`, the others at most :math:`t_j - 1`) makes the same sum
:math:`\sum_j \sum_{v\notin S_j} (-a_{j,v})(t_j - (Wh_j)_v) > 0`. The ray touches only the contexts of its
support, so that set of contexts is non-separable **on its own**.

**Deletion filter.** Start from the support :math:`C` of a verified ray. For each context
:math:`j \in C` in turn, decide :math:`C \setminus \{j\}` with the decision engine
(:func:`ntpcert.pipeline.decide.decide_separability`) on the sub-instance of those contexts
(:mod:`.subsets`):

* not separable: its Farkas ray, checked exactly on the whole instance, becomes the current ray and
  :math:`C` shrinks to its support (a subset of :math:`C \setminus \{j\}`);
* separable: the engine's point is repaired onto the exact constraints and checked in rationals
  (:func:`.subsets.exact_point`); :math:`j` stays.

Sets of more than :data:`CHUNK_FROM` contexts are first thinned by deleting blocks (halves, quarters,
... of :math:`C`), each kept only when the rest is still non-separable with a verified ray.

At the end every :math:`j` of :math:`C` holds an exact point separating a superset of
:math:`C \setminus \{j\}`; each is checked again, exactly, on :math:`C \setminus \{j\}` itself. When
all pass, :math:`C` is **irreducible**: non-separable (the ray), while every one-context deletion is
separable. An undetermined sub-problem, a spent budget of work (:data:`MAX_DECISIONS` sub-problems
decided) or a user's time cap leaves ``irreducible`` None, never a guess.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction


from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import DEFAULT_SEPARABILITY_SOLVER, decide_separability
from ntpcert.verdict import FarkasRay, FeasiblePoint
from ntpcert.pipeline.explain.subsets import ExactSeparatingPoint, exact_point, sub_instance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.util.budget import Deadline, stop_note
from ntpcert.util.validate import check_int

#: Sets with more contexts than this are first thinned by block deletions.
CHUNK_FROM = 16
#: The filter's budget of work: sub-problems decided (each one separability decision on a subset of the
#: contexts). When it is spent the set found so far is reported, not proved irreducible. A set of n
#: contexts takes about 2n decisions (blocks, then one per context); it replaces a limit of 60 s. The
#: largest filter of the default suite took 6 decisions (a ray on 12 contexts shrunk to 4), those of
#: the pydoc benchmarks (k = 2, 3) 4; 2,000 covers a ray on about 1,000 contexts.
MAX_DECISIONS = 2_000


@dataclass(frozen=True, eq=False)
class Deletion:
    """What deleting one context of the irreducible set gives.

    Attributes
    ----------
    context : int
        The deleted context (original index).
    separable : bool or None
        True when ``point`` separates the other contexts of the set, checked exactly.
    point : ExactSeparatingPoint or None
    margin : Fraction or None
        The point's smallest margin on the rest of the set, exactly.
    how : str
        The deciding engine, or why it is undetermined.
    """

    context: int
    separable: bool | None
    point: ExactSeparatingPoint | None
    margin: Fraction | None
    how: str


@dataclass(frozen=True, eq=False)
class WhyNotSeparable:
    r"""An irreducible non-separable set of contexts, with its witnesses.

    Attributes
    ----------
    instance : NTPInstance
    contexts : tuple of int
        The set, in data order.
    ray : dict
        ``{(v, j): Fraction}``: a Farkas ray whose support is exactly ``contexts``, checked exactly on
        the whole instance, scaled to coprime integers.
    irreducible : bool or None
        True when every one-context deletion is certified separable (``deletions``).
    deletions : tuple of Deletion
        One per context of the set, in the same order.
    start_contexts : int
        Size of the support of the ray the filter started from.
    steps : tuple of str
        What the filter did, in order.
    seconds : float
    note : str
        Why ``irreducible`` is None, when it is.
    decisions : int
        Sub-problems decided: the work the filter spent (its budget is ``max_decisions``).
    """

    instance: NTPInstance
    contexts: tuple[int, ...]
    ray: dict
    irreducible: bool | None
    deletions: tuple[Deletion, ...]
    start_contexts: int
    steps: tuple[str, ...]
    seconds: float
    note: str = ""
    decisions: int = 0

    def ray_of(self, j: int) -> dict[int, Fraction]:
        """The ray's row :math:`a_j` as ``{token: value}``, non-zeros only, tokens increasing."""
        return {v: x for (v, jj), x in sorted(self.ray.items()) if jj == j}

    def clash_tokens(self) -> tuple[int, ...]:
        """The tokens the ray touches, increasing."""
        return tuple(sorted({v for v, _ in self.ray}))

    def relation(self, v: int) -> dict[int, Fraction]:
        r"""For token v, the linear relation :math:`\sum_j a_{j,v} h_j = 0` among the set's embeddings, as
        ``{context: a_{j,v}}`` (non-zeros only)."""
        return {j: x for (vv, j), x in sorted(self.ray.items(), key=lambda kv: kv[0][1]) if vv == v}

    def off_support_mass(self) -> Fraction:
        r""":math:`\sum_j \sum_{v \notin S_j} (-a_{j,v})`, the ray's positive lower bound of the logit sum."""
        inst = self.instance
        return sum((-x for (v, j), x in self.ray.items() if not inst.in_support(j, v)), Fraction(0))

    def to_json(self) -> dict:
        from ntpcert.exact.rational import fraction_str
        from ntpcert.pipeline.explain.names import context_text, token_text

        inst = self.instance
        ctxs = []
        for j in self.contexts:
            ctxs.append({
                "index": j,
                "text": context_text(inst, j),
                "support": [token_text(inst, int(z)) for z in inst.support(j)],
                "ray": [{"token": token_text(inst, v), "value": fraction_str(x), "in_support": inst.in_support(j, v)}
                        for v, x in self.ray_of(j).items()],
            })
        dels = [{"context": d.context, "text": context_text(inst, d.context), "separable": d.separable,
                 "witness": "exact point" if d.separable else None,
                 "margin": None if d.margin is None else float(d.margin), "how": d.how}
                for d in self.deletions]
        return {
            "irreducible": self.irreducible,
            "size": len(self.contexts),
            "contexts": ctxs,
            "clash_tokens": [token_text(inst, v) for v in self.clash_tokens()],
            "off_support_mass": fraction_str(self.off_support_mass()),
            "deletions": dels,
            "start_contexts": self.start_contexts,
            "steps": list(self.steps),
            "note": self.note,
            "seconds": self.seconds,
        }


def integer_ray(ray: dict) -> dict:
    """The ray scaled by a positive rational to coprime integers (a ray stays a ray)."""
    den = 1
    for x in ray.values():
        den = den * x.denominator // math.gcd(den, x.denominator)
    g = 0
    for x in ray.values():
        g = math.gcd(g, int(x * den))
    return {k: Fraction(int(x * den) // g) for k, x in ray.items() if x != 0}


def ray_contexts(ray: dict) -> tuple[int, ...]:
    return tuple(sorted({int(j) for (_, j), x in ray.items() if x != 0}))


@dataclass(frozen=True, eq=False)
class _Outcome:
    holds: bool | None
    ray: dict | None = None
    point: ExactSeparatingPoint | None = None
    how: str = ""


def _decide(instance: NTPInstance, contexts, separability_solver: str, time_limit: float | None) -> _Outcome:
    """Separability of ``contexts`` on their own, with an exactly checked witness either way."""
    sub = sub_instance(instance, contexts)
    dec, _ = decide_separability(KeslerSystem.build(sub.instance), separability_solver=separability_solver,
                                 time_limit=time_limit, split_lp=False)
    w = dec.witness
    if isinstance(w, FarkasRay) and w.ray:
        ray = sub.ray_to_whole(w.ray)
        why = FarkasRay(ray, w.engine).check(instance)
        if why:
            return _Outcome(None, how=f"{dec.engine}: its ray fails on the whole instance ({why})")
        return _Outcome(False, ray=ray, how=dec.engine or "")
    if isinstance(w, FeasiblePoint) and w.W is not None:
        point, why = exact_point(sub, w.W)
        if point is None:
            return _Outcome(None, how=f"{dec.engine}: {why}")
        return _Outcome(True, point=point, how=dec.engine or "")
    return _Outcome(None, how=dec.reason)


def why_not_separable(instance: NTPInstance, ray: dict | None = None, *, contexts=None,
                      separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
                      time_limit: float | None = None, max_decisions: int = MAX_DECISIONS) -> WhyNotSeparable | None:
    r"""Shrink a verified Farkas ray's support to an irreducible non-separable set (module doc).

    Parameters
    ----------
    instance : NTPInstance
    ray : dict, optional
        ``{(v, j): Fraction}``, a Farkas ray of the whole instance (e.g. the ``ray`` of a
        :class:`~ntpcert.verdict.FarkasRay` witness); checked exactly here.
    contexts : sequence of int, optional
        Without ``ray``: start from these contexts, which must be non-separable on their own.
    separability_solver : {"auto", "structured", "highs"}
        The separability solver of the sub-problems.
    time_limit : float, optional
        A user's cap in seconds on the whole filter, off by default.
    max_decisions : int
        The filter's budget of work: sub-problems decided (default :data:`MAX_DECISIONS`).

    Returns None when the start is not a verified non-separable set.
    """
    check_int("max_decisions", max_decisions, minimum=1)
    t0 = time.perf_counter()
    deadline = Deadline(time_limit)
    used = 0
    steps: list[str] = []

    def decide(subset) -> _Outcome:
        nonlocal used
        used += 1
        return _decide(instance, subset, separability_solver, deadline.left())

    def can_decide() -> bool:
        return used < max_decisions and not deadline.passed()

    if ray is None:
        if contexts is None:
            raise ValueError("why_not_separable: give a ray or a set of contexts")
        start = decide(sorted({int(j) for j in contexts}))
        if start.holds is not False:
            return None
        ray = start.ray
        steps.append(f"the {len(set(contexts))} given contexts: not separable ({start.how})")
    elif FarkasRay(ray, "structured-farkas").check(instance):
        return None
    ray = integer_ray(ray)
    C = list(ray_contexts(ray))
    n0 = len(C)
    steps.append(f"start: a Farkas ray on {n0} contexts, checked exactly")
    points: dict[int, _Outcome] = {}
    note = ""

    def shrink(out: _Outcome, what: str) -> None:
        nonlocal ray, C
        ray = integer_ray(out.ray)
        C = list(ray_contexts(ray))
        steps.append(f"without {what}: still not separable ({out.how}); the new ray's support has {len(C)} contexts")

    # block deletions
    size = len(C) // 2 if len(C) > CHUNK_FROM else 0
    while size >= 2 and can_decide():
        pos = 0
        while pos < len(C) and can_decide():
            block = C[pos:pos + size]
            rest = [j for j in C if j not in set(block)]
            if not rest:
                break
            out = decide(rest)
            if out.holds is False:
                shrink(out, f"{len(block)} context{'s' if len(block) != 1 else ''}")
                pos = 0 if len(C) <= size else pos
            else:
                pos += size
        size //= 2
    # one-context deletions
    i = 0
    while i < len(C):
        j = C[i]
        if j in points:
            i += 1
            continue
        note = stop_note(deadline, used, max_decisions, "sub-problems decided", "every deletion was decided",
                         "max_decisions")
        if note:
            break
        rest = [c for c in C if c != j]
        out = decide(rest) if rest else _Outcome(True, point=None, how="empty set")
        if out.holds is False:
            shrink(out, f"context {j}")
            i = 0
            continue
        points[j] = out
        i += 1
    # re-check every deletion's point on the final set
    deletions = []
    for j in C:
        out = points.get(j)
        rest = [c for c in C if c != j]
        if out is None:
            deletions.append(Deletion(j, None, None, None, "not decided"))
        elif out.holds and out.point is not None:
            equal, margin = out.point.margins(instance, rest)
            ok = equal and (margin is None or margin > 0)
            deletions.append(Deletion(j, True if ok else None, out.point if ok else None, margin if ok else None,
                                      out.how if ok else f"{out.how}: the point fails the exact re-check on the set"))
        elif out.holds and not rest:
            deletions.append(Deletion(j, True, None, None, "a single context with nothing left"))
        else:
            deletions.append(Deletion(j, None, None, None, out.how))
    irreducible = True if deletions and all(d.separable for d in deletions) else None
    if irreducible is None and not note:
        note = "some one-context deletion is undetermined: " + "; ".join(
            f"context {d.context}: {d.how}" for d in deletions if not d.separable)
    steps.append(f"{len(C)} contexts left; every one-context deletion certified separable: "
                 f"{'yes' if irreducible else 'no'}")
    return WhyNotSeparable(instance, tuple(C), ray, irreducible, tuple(deletions), n0, tuple(steps),
                           time.perf_counter() - t0, note, used)


__all__ = ["CHUNK_FROM", "Deletion", "MAX_DECISIONS", "WhyNotSeparable", "integer_ray", "why_not_separable"]
