r"""Parts of an instance: sub-instances on its first contexts and its most frequent tokens.

A Farkas ray of the sub-problem on a subset of contexts and tokens, padded with zeros, is a Farkas ray
of the whole problem (the Farkas system restricted to those tokens and contexts is a sub-system:
:math:`\mathbf 1^\top a_j = 0`, the signs and :math:`\sum_j a_j h_j^\top = 0` hold row by row).
Likewise a left null vector of the equality rows of a part, rewritten on the whole instance's anchors
(:func:`to_whole`), is a left null vector of :math:`A_{eq}` with the same :math:`y^\top b`. So a "no"
found on a small part is a "no" for the data (:mod:`ntpcert.pipeline.decide`). Parts grow
geometrically (:func:`part_schedule`); every witness found on a part is checked again, exactly, on
the whole instance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.util.budget import Deadline, budget_text
from ntpcert.verdict import FarkasRay

#: Parts are tried only on instances with more contexts than this.
PART_MIN_CONTEXTS = 256
#: The first part: this many contexts and tokens; each next part doubles both.
PART_START = (128, 16)
#: Epochs of a structured solve on a part, at most.
PART_MAX_EPOCHS = 3000
#: Budget of work of one part's structured solve, and of all parts together, in the units of
#: :mod:`ntpcert.solve.structured.budget` (an epoch costs m·(C·min(m, d) + 50,000); about 1.6e9 units a
#: second on the shared 2-core machine). They replace limits of 10 s and 30 s: 1.6e10 and 4.8e10 units. The
#: parts of the default suite used at most 2.4e7 units (59 epochs); on the whole-text corpora the pairs
#: of tokens answer before any part is tried.
PART_MAX_WORK = 16_000_000_000
PARTS_MAX_WORK = 48_000_000_000
#: Relative gap that ends a structured solve on a part (feasibility only).
PART_FEASIBILITY_TOL = 0.5


@dataclass(frozen=True, eq=False)
class Part:
    """A sub-instance on some contexts and tokens.

    Attributes
    ----------
    instance : NTPInstance
        The part (its supports are the original supports cut to ``tokens``).
    contexts : ndarray of shape (m',)
        Original index of each context of the part.
    tokens : ndarray of shape (V',)
        Original index of each token of the part.
    """

    instance: NTPInstance
    contexts: np.ndarray
    tokens: np.ndarray

    @property
    def whole(self) -> bool:
        return False


def make_part(instance: NTPInstance, contexts: np.ndarray, tokens: np.ndarray) -> Part | None:
    """The part on ``contexts`` (in order) and ``tokens``; contexts whose support misses the tokens
    are dropped. None when fewer than 2 tokens or no context remain."""
    from fractions import Fraction

    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.size < 2:
        return None
    contexts = np.asarray(contexts, dtype=np.int64)
    mask = instance.support_csr[contexts][:, tokens]  # sparse: no (m, V) cells
    keep = contexts[np.diff(mask.tocsr().indptr) > 0]
    if keep.size == 0:
        return None
    H = instance.embeddings[keep]
    if instance.has_counts:
        rows, cols = np.repeat(keep, tokens.size), np.tile(tokens, keep.size)
        sub = NTPInstance.from_counts(H, instance.counts_at(rows, cols).reshape(keep.size, tokens.size))
    else:
        rows = []
        for j in keep:
            row = [instance.exact_probs[int(j)][int(t)] for t in tokens]
            total = sum(row, Fraction(0))
            rows.append([f / total for f in row])
        sub = NTPInstance.from_probs(H, rows)
    return Part(sub, keep.astype(np.int64), tokens)


def part_schedule(instance: NTPInstance) -> list[tuple[int, int]]:
    """Sizes (contexts, tokens) of the parts to try, growing geometrically, short of the whole."""
    m, V = instance.m, instance.V
    if m <= PART_MIN_CONTEXTS:
        return []
    out = []
    n, t = PART_START
    while n < m:
        out.append((n, min(t, V)))
        n, t = 2 * n, 2 * t
    return out


def parts_of(instance: NTPInstance):
    """The parts of :func:`part_schedule`: the first contexts in data order, the tokens in the most supports."""
    order = np.argsort(-np.bincount(instance.support_csr.indices, minlength=instance.V), kind="stable")
    for n, t in part_schedule(instance):
        p = make_part(instance, np.arange(n), np.sort(order[:t]))
        if p is not None:
            yield p


def ray_from(err: InfeasibleError) -> dict | None:
    cert = getattr(err, "certificate", None)
    if cert is not None and getattr(cert, "exact", False) and cert.entries:
        return dict(cert.entries)
    return None


def separability_on_parts(instance: NTPInstance, *, progress: bool | None = None,
                          deadline: Deadline | None = None) -> tuple[dict | None, list]:
    """Look for a Farkas ray on growing parts (module doc). Returns ``(ray, log)``: the ray mapped to
    the whole instance and checked exactly there, or None; ``log`` lists what each part gave.

    Each part's structured solve has :data:`PART_MAX_EPOCHS` epochs, fewer where :data:`PART_MAX_WORK`
    buys fewer; the parts together spend at most :data:`PARTS_MAX_WORK` (an epoch charged as its work,
    a solve that ended in a ray as its whole allowance). ``deadline`` is a user's cap (off by default)."""
    from ntpcert.solve.structured.budget import epoch_work
    from ntpcert.solve.structured.solver import solve as structured

    log = []
    left = PARTS_MAX_WORK
    for part in parts_of(instance):
        if deadline is not None and deadline.passed():
            log.append({"contexts": part.instance.m, "tokens": part.instance.V, "result": deadline.text()})
            break
        sub = part.instance
        system = KeslerSystem.build(sub)
        per_epoch = epoch_work(system)
        epochs = min(PART_MAX_EPOCHS, min(PART_MAX_WORK, left) // per_epoch)
        if epochs < 1:
            log.append({"contexts": sub.m, "tokens": sub.V,
                        "result": budget_text(PARTS_MAX_WORK, "work units of the parts")})
            break
        left -= epochs * per_epoch  # charged in full unless the solve reports fewer epochs
        tp = time.perf_counter()
        entry = {"contexts": sub.m, "tokens": sub.V}
        try:
            sol = structured(system, certificate="float", tol=PART_FEASIBILITY_TOL, max_epochs=int(epochs),
                             time_limit=None if deadline is None else deadline.left())
            left += (epochs - int(sol.info["epochs"])) * per_epoch
            entry["result"] = "separable"
        except InfeasibleError as e:
            ray = ray_from(e)
            if ray is not None:
                full = {(int(part.tokens[v]), int(part.contexts[j])): x for (v, j), x in ray.items()}
                why = FarkasRay(full, engine="part-farkas").check(instance)
                entry["seconds"] = time.perf_counter() - tp
                if not why:
                    entry["result"] = "farkas"
                    log.append(entry)
                    return full, log
                entry["result"] = f"ray fails on the whole instance: {why}"
            else:
                entry["result"] = "infeasible, ray not exact"
        except SolverError as e:
            entry["result"] = f"no answer ({e})"
            entry["seconds"] = time.perf_counter() - tp
            log.append(entry)
            break
        entry["seconds"] = time.perf_counter() - tp
        log.append(entry)
    return None, log


def to_whole(part: Part, sub_system: KeslerSystem, y: np.ndarray, whole: KeslerSystem) -> np.ndarray:
    """A part's left null vector rewritten on the whole instance's equality rows (module doc)."""
    yM: dict[tuple[int, int], int] = {}
    for i in np.flatnonzero(y):
        j, z, a, e = int(sub_system.eq_context[i]), int(sub_system.eq_token[i]), int(sub_system.eq_anchor[i]), int(y[i])
        J, Z, A = int(part.contexts[j]), int(part.tokens[z]), int(part.tokens[a])
        yM[(J, Z)] = yM.get((J, Z), 0) + e
        yM[(J, A)] = yM.get((J, A), 0) - e
    index = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(whole.eq_context, whole.eq_token))}
    out = np.zeros(whole.n_eq, dtype=np.int64)
    for (J, Z), e in yM.items():
        if e and Z != int(whole.instance.anchors()[J]):
            out[index[(J, Z)]] += e
    return out


__all__ = ["Part", "make_part", "ray_from", "part_schedule", "parts_of", "separability_on_parts", "to_whole"]
