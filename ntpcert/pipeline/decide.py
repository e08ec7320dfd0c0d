r"""Which engine decides each verdict, and with which witness.

Both pipelines (float and ``--exact``) decide compatibility (4) and separability (6) here, in this
order of arguments, and record the one that settled each verdict as a short key (the ``by`` of the
JSON report):

**Lemma 1** (``lemma1``). When the embeddings have rank m, every logit matrix :math:`Z = WH^\top` is
reachable (:math:`W = Z(HH^\top)^{-1}H`), so both (4) and (6) hold. The paper states it with
:math:`d > m`; rank m needs only :math:`d \ge m`, which one-hot context embeddings (d = m, H a
permutation) meet. The rank is certified by the cheapest sound route (:mod:`ntpcert.exact.rank_witness`):
a permutation or triangular structure peeled directly, then the rank mod a prime of what is left (or of
a column selection of it): no LP, no SVM, no Gram matrix, and no size cap. What is skipped (a core whose
rank mod p would take too long) is named in the witness and the report.

**Parts** (``part-farkas``, ``part-null-vector``). A Farkas ray of the sub-problem on a subset of
contexts and tokens, padded with zeros, is a Farkas ray of the whole problem (the Farkas system
restricted to those tokens and contexts is a sub-system: :math:`\mathbf 1^\top a_j = 0`, the signs and
:math:`\sum_j a_j h_j^\top = 0` hold row by row). Likewise a left null vector of the equality rows of a
part, rewritten on the whole instance's anchors, is a left null vector of :math:`A_{eq}` with the same
:math:`y^\top b`. So a "no" found on a small part is a "no" for the data, and real corpora, which fail
already on a few hundred contexts, are answered in seconds. Parts grow geometrically (the first
contexts in data order, the tokens in the most supports); every witness found on a part is checked
again, exactly, on the whole instance.

**Pairs of tokens** (``pair-farkas``, ``pair-null-vector``). When m > d + 1, two frequent tokens
that share more than d supports give an exact dependency among those contexts' embeddings, hence a
Farkas ray or a violating null vector on the difference :math:`w_z - w_{z'}` alone
(:mod:`ntpcert.pipeline.pairs`). Tried before the parts; each witness is checked on the whole instance.

**The structured solver** (``structured-point``, ``structured-farkas``). Its re-checked feasible
point proves (6); its exactly verified Farkas ray refutes it. The HiGHS LP stays selectable
(``highs-point``, ``highs-farkas``) and is the fallback for a ray the structured solver cannot make
exact.

**Compatibility mod p** (``gram-rank-mod-p``, ``null-vector``, ``null-space``). With
:math:`G = A_{eq}A_{eq}^\top` reduced mod a prime, rank :math:`r` proves full row rank (so (4) is
solvable for every right-hand side). Otherwise the null space mod p is lifted to integers by rational
reconstruction; each lifted vector is checked exactly (:math:`A_{eq}^\top y = 0`), and
:math:`y^\top b \ne 0` refutes (4), while a full lifted basis with every :math:`y^\top b = 0` proves it
(rank mod p is a lower bound on the rank, the lifted independent null vectors an upper bound).

**Tall systems** (``particular-solutions``). When the equality rows outnumber the columns
(token, feature) they use, (4) is proved in the column space: for every prime p of the count ratios
an exact :math:`R_p` with :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}`, from one fraction-free reduction
of the normal equations, so :math:`W = \sum_p \log(p) R_p` solves (4)
(:func:`ntpcert.exact.compatibility.check_compatibility_by_columns`). Tried after the pairs and
before the parts; when some :math:`E_{:,p}` is outside the column space the search for a violating
null vector goes on. The ``--exact`` certificate carries the :math:`R_p` (``particular_solutions``)
instead of a null-space basis of about r vectors.

What none of these settles is reported undetermined, with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

from typing import Any

import numpy as np

from ntpcert.errors import InfeasibleError, SolverError
from ntpcert.exact.compatibility import check_compatibility_by_columns
from ntpcert.exact.modular import lift_vector
from ntpcert.exact.rank_witness import RankWitness
from ntpcert.pipeline.float_witness import exact_left_null
from ntpcert.pipeline.lemma1 import lemma1, lemma1_text
from ntpcert.instance import NTPInstance
from ntpcert.rows.kesler import KeslerSystem

#: Separability engines selectable with ``--separability-solver``.
SEPARABILITY_SOLVERS = ("structured", "highs")
DEFAULT_SEPARABILITY_SOLVER = "structured"

#: Parts are tried only on instances with more contexts than this.
PART_MIN_CONTEXTS = 256
#: The first part: this many contexts and tokens; each next part doubles both.
PART_START = (128, 16)
#: Seconds one structured solve on a part may take, and all parts together.
PART_TIME_LIMIT = 10.0
PARTS_TIME_LIMIT = 30.0
#: Epochs of a structured solve on a part.
PART_MAX_EPOCHS = 3000
#: Instances whose separability LP and Farkas LP together have at most this many variables
#: (V·d + V·m) go to HiGHS first: it answers them in milliseconds, the structured solver's ray
#: detection needs its patience epochs.
SMALL_LP_VARS = 4000
#: Separability LPs with at most this many variables (V·d) go to HiGHS when the structured solver
#: gives no answer (instances near the threshold, whose margins are too thin for its epoch cap).
HIGHS_FALLBACK_VARS = 20_000
#: Seconds of the structured solver's feasibility solve on the whole instance when the caller gives no
#: limit (then the verdict is undetermined, saying so).
SEPARABILITY_TIME_LIMIT = 120.0
#: Epochs of the structured solver's feasibility solve before it gives up (then the HiGHS ray LP).
SEPARABILITY_MAX_EPOCHS = 2000
#: Relative gap that ends a structured solve used only for feasibility.
FEASIBILITY_TOL = 0.5
#: Compatibility mod p is tried on systems (or parts) with at most this many equality rows.
GRAM_MAX_ROWS = 1500
#: Null-space vectors lifted from one system, at most.
MAX_LIFTED = 4000


# ============================================================================ parts
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
    mask = instance.support_mask()[np.ix_(contexts, tokens)]
    keep = np.asarray(contexts)[mask.any(axis=1)]
    if keep.size == 0:
        return None
    H = instance.embeddings[keep]
    if instance.counts is not None:
        sub = NTPInstance.from_counts(H, instance.counts[np.ix_(keep, tokens)])
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


def _parts(instance: NTPInstance):
    order = np.argsort(-instance.support_mask().sum(axis=0), kind="stable")
    for n, t in part_schedule(instance):
        p = make_part(instance, np.arange(n), np.sort(order[:t]))
        if p is not None:
            yield p


# ============================================================================ separability
@dataclass(frozen=True, eq=False)
class SeparabilityDecision:
    """How separability was settled.

    Attributes
    ----------
    holds : bool or None
    engine : str or None
        The short key of the argument that decided (module doc), None when undetermined.
    witness : str
        The witness in words, or why it is undetermined.
    W : ndarray of shape (V, d) or None
        A feasible point (re-checked), when one was found.
    ray : dict or None
        An exactly checked Farkas ray ``{(v, j): Fraction}`` on the whole instance.
    modulus : int or None
        The prime of Lemma 1's rank certificate, when it is the rank of the whole of H mod p.
    rank_witness : RankWitness or None
        Lemma 1's rank certificate, when Lemma 1 decided.
    svm : SVMSolution or None
        The NTP-SVM solution, when the deciding solve was the SVM itself.
    svm_error : str or None
    min_margin, eq_violation : float or None
    """

    holds: bool | None
    engine: str | None
    witness: str
    W: np.ndarray | None = None
    ray: dict | None = None
    modulus: int | None = None
    rank_witness: RankWitness | None = None
    svm: object = None
    svm_error: str | None = None
    min_margin: float | None = None
    eq_violation: float | None = None
    parts: list = field(default_factory=list)


def check_ray_sparse(instance: NTPInstance, ray: dict) -> str:
    r"""Exact check of the Farkas conditions of a sparse ray ``{(v, j): Fraction}`` on the whole
    instance (:func:`ntpcert.exact.separability.check_ray`, which touches only the ray's contexts),
    with indices range-checked first; returns ``""`` or the first failure."""
    from ntpcert.exact.separability import check_ray

    for v, j in ray:
        if not (0 <= v < instance.V and 0 <= j < instance.m):
            return f"index ({v}, {j}) out of range"
    return check_ray(instance, ray)


def _ray_from(err: InfeasibleError) -> dict | None:
    cert = getattr(err, "certificate", None)
    if cert is not None and getattr(cert, "exact", False) and cert.entries:
        return dict(cert.entries)
    return None


def separability_on_parts(instance: NTPInstance, *, progress: bool | None = None) -> tuple[dict | None, list]:
    """Look for a Farkas ray on growing parts (module doc). Returns ``(ray, log)``: the ray mapped to
    the whole instance and checked exactly there, or None; ``log`` lists what each part gave."""
    from ntpcert.solve.structured.solver import solve as structured

    log = []
    t0 = time.perf_counter()
    for part in _parts(instance):
        left = PARTS_TIME_LIMIT - (time.perf_counter() - t0)
        if left <= 0:
            log.append("parts: time limit spent")
            break
        sub = part.instance
        tp = time.perf_counter()
        entry = {"contexts": sub.m, "tokens": sub.V}
        try:
            structured(KeslerSystem.build(sub), certificate="float", tol=FEASIBILITY_TOL,
                       max_epochs=PART_MAX_EPOCHS, time_limit=min(PART_TIME_LIMIT, left))
            entry["result"] = "separable"
        except InfeasibleError as e:
            ray = _ray_from(e)
            if ray is not None:
                full = {(int(part.tokens[v]), int(part.contexts[j])): x for (v, j), x in ray.items()}
                why = check_ray_sparse(instance, full)
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


def decide_separability(system: KeslerSystem, *, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
                        lemma1_rank: RankWitness | None = None, svm_solver: str | None = None,
                        time_limit: float | None = None, progress: bool | None = None,
                        svm_options: dict | None = None) -> SeparabilityDecision:
    """Settle (6) (module doc). With ``svm_solver`` a structured backend (``auto``, ``structured``,
    ``structured-float``), the deciding solve is the NTP-SVM itself and its solution is returned
    (``svm_options`` go to :func:`~ntpcert.solve.svm.solve_svm`)."""
    from ntpcert.errors import InputError

    if separability_solver not in SEPARABILITY_SOLVERS:
        raise InputError(f"separability_solver: unknown value {separability_solver!r} (expected {', '.join(SEPARABILITY_SOLVERS)})")
    inst = system.instance
    if system.n_margin == 0:
        return SeparabilityDecision(True, "vacuous", "no off-support tokens: (6b) is vacuous",
                                    W=np.zeros((inst.V, inst.d)))
    if lemma1_rank is not None and lemma1_rank.full:
        return SeparabilityDecision(True, "lemma1", f"{lemma1_text(lemma1_rank)}: every logit matrix is reachable "
                                    "(Lemma 1)", modulus=lemma1_rank.modulus, rank_witness=lemma1_rank)
    if separability_solver == "highs":
        return _highs(system, time_limit)
    if inst.V * (inst.d + inst.m) <= SMALL_LP_VARS:
        dec = _highs(system, time_limit)
        if dec.holds is not None:
            return dec
    pair = pair_separability(inst)
    if pair is not None:
        return pair
    ray, log = separability_on_parts(inst, progress=progress)
    if ray is not None:
        last = log[-1]
        return SeparabilityDecision(False, "part-farkas",
                                    f"Farkas ray with {len(ray)} non-zero entries found on a part of "
                                    f"{last['contexts']} contexts and {last['tokens']} tokens, verified exactly "
                                    "on the whole instance", ray=ray, parts=log)
    return _structured(system, svm_solver, time_limit, log, progress, svm_options or {})


def pair_separability(inst: NTPInstance) -> SeparabilityDecision | None:
    """A Farkas ray found on a pair of tokens (:mod:`ntpcert.pipeline.pairs`), checked exactly on the
    whole instance; None when no pair gives one."""
    from ntpcert.pipeline import pairs

    found = pairs.separability_witness(inst)
    if found is None:
        return None
    ray, text = found
    if check_ray_sparse(inst, ray):
        return None
    return SeparabilityDecision(False, "pair-farkas", text + ", verified exactly on the whole instance", ray=ray)


def _structured(system, svm_solver, time_limit, log, progress, svm_options) -> SeparabilityDecision:
    """A feasibility solve of the structured solver (capped at ``SEPARABILITY_MAX_EPOCHS``), then,
    when separable and asked for, the NTP-SVM with ``svm_solver``."""
    from ntpcert.solve.structured.solver import solve as structured
    from ntpcert.solve.svm import solve_svm

    limit = SEPARABILITY_TIME_LIMIT if time_limit is None else time_limit
    try:
        sol = structured(system, certificate="float", tol=FEASIBILITY_TOL, time_limit=limit,
                         max_epochs=SEPARABILITY_MAX_EPOCHS, progress=bool(progress))
    except InfeasibleError as e:
        ray = _ray_from(e)
        if ray is not None:
            return SeparabilityDecision(False, "structured-farkas",
                                        f"Farkas ray with {len(ray)} non-zero entries from the structured solver's "
                                        "diverging dual, verified exactly", ray=ray, parts=log,
                                        svm_error=f"not separable: {e}")
        return _highs_ray(system, time_limit, log, f"the structured solver reports infeasibility ({e}) but its ray "
                                                   "is not exact")
    except SolverError as e:
        why = f"the structured solver gave no answer ({e})"
        if system.n_vars <= HIGHS_FALLBACK_VARS:  # near the threshold: margins too thin for 2000 epochs
            dec = _highs(system, time_limit)
            if dec.holds is not None:
                return dataclasses.replace(dec, parts=log, witness=f"{why}; {dec.witness}")
        return _highs_ray(system, time_limit, log, why, svm_error=str(e))
    from ntpcert.solve.point_check import check_point

    chk = check_point(system, sol.W)
    margin, eqv = chk.min_margin, chk.eq_violation
    if not chk.ok:
        return SeparabilityDecision(None, None, f"the structured solver's point fails the re-check ({chk.text}); "
                                    "run --separability-solver highs or --exact", parts=log)
    svm, err = None, None
    if svm_solver is not None:
        try:
            svm = solve_svm(system, solver=svm_solver, progress=bool(progress), **svm_options)
        except (InfeasibleError, SolverError) as e:
            err = f"NTP-SVM not certified: {e}"
    return SeparabilityDecision(True, "structured-point",
                                f"the structured solver's point: {chk.text}", W=sol.W, svm=svm, svm_error=err, min_margin=margin,
                                eq_violation=eqv, parts=log)


def _highs_ray(system, time_limit, log, why, svm_error=None) -> SeparabilityDecision:
    """Fallback: the dual LP's vertex ray through HiGHS, made exact; small instances only."""
    from ntpcert.exact.separability import check_separability_exact

    inst = system.instance
    if inst.V * inst.m > 2_000_000:
        return SeparabilityDecision(None, None, why + "; the HiGHS ray LP is too large to try here",
                                    parts=log, svm_error=svm_error)
    res = check_separability_exact(inst, None, try_ray=True, time_limit=time_limit)
    if res.holds is False:
        return SeparabilityDecision(False, "highs-farkas", f"Farkas ray of the dual LP with {len(res.ray)} non-zero "
                                    "entries, verified exactly", ray=res.ray, parts=log, svm_error=svm_error)
    return SeparabilityDecision(None, None, why + f"; {res.reason}", parts=log, svm_error=svm_error)


def _highs(system, time_limit) -> SeparabilityDecision:
    from ntpcert.solve.separability_lp import check_separability

    sep = check_separability(system, time_limit=time_limit)
    if sep.holds:
        return SeparabilityDecision(True, "highs-point", sep.by, W=sep.W, min_margin=sep.min_margin,
                                    eq_violation=sep.eq_violation)
    if sep.lp_infeasible:
        return _highs_ray(system, time_limit, [], "HiGHS reports the LP infeasible")
    return SeparabilityDecision(None, None, sep.by)


# ============================================================================ compatibility
@dataclass(frozen=True, eq=False)
class CompatibilityDecision:
    """How compatibility was settled.

    Attributes
    ----------
    holds : bool or None
    engine : str or None
        Short key (module doc).
    witness : str
    modulus : int or None
        The prime of a rank certificate (Lemma 1: of H; otherwise of G).
    rank_witness : RankWitness or None
        Lemma 1's rank certificate, when Lemma 1 decided.
    rank : int or None
        rank A_eq (= dim F) when known exactly.
    violating : dict or None
        ``{(j, z): int}`` over the whole instance's equality rows: a left null vector with y^T b != 0.
    null_basis : list of dict or None
        A basis of the left null space of A_eq, every vector with y^T b = 0 (with ``modulus``).
    """

    holds: bool | None
    engine: str | None
    witness: str
    modulus: int | None = None
    rank: int | None = None
    violating: dict | None = None
    null_basis: list | None = None
    rank_witness: RankWitness | None = None
    #: The exact verdict itself when the engine made one
    #: (:class:`~ntpcert.exact.compatibility.ExactCompatibility`, engine ``particular-solutions``).
    exact: Any = None


def _modular(system: KeslerSystem, p: int) -> tuple[str, object]:
    """Compatibility of ``system`` mod p (module doc): ``("full-rank", rank)``, ``("violation", y)``,
    ``("null-space", (rank, [y, ...]))`` or ``("unknown", why)``."""
    import flint

    from ntpcert.exact.modular import gram_residues
    from ntpcert.pipeline.float_witness import log_odds_sign

    r = system.n_eq
    R = gram_residues(system.instance.embeddings, system.eq_context, system.eq_token, system.eq_anchor, p)
    G = flint.nmod_mat(r, r, R.ravel().tolist(), p)
    X, k = G.nullspace()
    rank = r - int(k)
    if k == 0:
        return "full-rank", rank
    if k > MAX_LIFTED:
        return "unknown", f"{k} null directions mod p, more than {MAX_LIFTED} to lift"
    cols = [[int(X[i, c]) for i in range(r)] for c in range(int(k))]
    basis = []
    failed = 0
    for col in cols:
        y = lift_vector(col, p)
        if y is None or not exact_left_null(system, y):
            failed += 1
            continue
        s = log_odds_sign(system, y)
        if s:
            return "violation", y
        if s is None:
            failed += 1
            continue
        basis.append(y)
    if failed:
        return "unknown", f"{failed} of {k} null directions mod p did not lift to exact null vectors"
    return "null-space", (rank, basis)


def _to_whole(part: Part, sub_system: KeslerSystem, y: np.ndarray, whole: KeslerSystem) -> np.ndarray:
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


def decide_compatibility(system: KeslerSystem, *, lemma1_rank: RankWitness | None = None) -> CompatibilityDecision:
    """Settle (4) with an exact witness (module doc), or say why not."""
    from ntpcert.exact.modular import PRIMES
    from ntpcert.pipeline.float_witness import log_odds_sign

    inst = system.instance
    r = system.n_eq
    if r == 0:
        return CompatibilityDecision(True, "no-equations", "no equations: every support has one token", rank=0)
    if lemma1_rank is not None and lemma1_rank.full:
        return CompatibilityDecision(True, "lemma1", f"{lemma1_text(lemma1_rank)}: (4) is solvable for every "
                                     "right-hand side (Lemma 1)", modulus=lemma1_rank.modulus, rank=r,
                                     rank_witness=lemma1_rank)
    pair = _pair_null_vector(system)
    if pair is not None:
        return pair
    tall = check_compatibility_by_columns(inst)  # more rows than used columns: one solve per prime
    if tall is not None:
        return CompatibilityDecision(True, "particular-solutions", f"exact: {tall.particular_text()} (r = {r} rows, "
                                     f"rank A_eq = {tall.rank})",
                                     rank=tall.rank, exact=tall)
    p = PRIMES[0]
    notes = []
    for part in (_parts(inst) if r > GRAM_MAX_ROWS or inst.m > PART_MIN_CONTEXTS else ()):
        sub = KeslerSystem.build(part.instance)
        if sub.n_eq > GRAM_MAX_ROWS:
            break
        if sub.n_eq == 0:
            continue
        kind, val = _modular(sub, p)
        if kind == "violation":
            y = _to_whole(part, sub, val, system)
            if exact_left_null(system, y) and log_odds_sign(system, y):
                return CompatibilityDecision(False, "part-null-vector", _violation_text(system, y, part),
                                             violating=_as_dict(system, y))
    if r > GRAM_MAX_ROWS:
        return _frequent_tokens(system, f"no violating null vector on parts; the whole system has r = {r} equality "
                                f"rows, more than the {GRAM_MAX_ROWS} decided mod p as a whole")
    kind, val = _modular(system, p)
    if kind == "full-rank":
        return CompatibilityDecision(True, "gram-rank-mod-p", f"A_eq has full row rank r = {r} (its Gram matrix "
                                     f"has rank r mod the prime {p}): (4) is solvable for every right-hand side",
                                     modulus=p, rank=r)
    if kind == "violation":
        return CompatibilityDecision(False, "null-vector", _violation_text(system, val, None),
                                     violating=_as_dict(system, val))
    if kind == "null-space":
        rank, basis = val
        return CompatibilityDecision(True, "null-space", f"the {len(basis)} exact left null vectors of A_eq span its "
                                     f"null space (rank {rank} mod the prime {p}) and every y^T b is exactly 0",
                                     modulus=p, rank=rank, null_basis=[_as_dict(system, y) for y in basis])
    notes.append(str(val))
    return CompatibilityDecision(None, None, "; ".join(notes) + "; run 'ntpcert certify DATA --exact'")


def _frequent_tokens(system: KeslerSystem, before: str) -> CompatibilityDecision:
    """(4) through the tokens whose contexts' embeddings are dependent (:mod:`ntpcert.pipeline.frequent_tokens`)."""
    from ntpcert.pipeline.frequent_tokens import reduce_compatibility

    red = reduce_compatibility(system)
    if red.holds is False:
        return CompatibilityDecision(False, "frequent-tokens-null-vector", "frequent-token reduction: " + red.why,
                                     violating=_as_dict(system, red.violating))
    if red.holds is True:
        return CompatibilityDecision(True, "frequent-tokens", "frequent-token reduction: " + red.why,
                                     modulus=red.modulus, rank=system.n_eq - len(red.basis),
                                     null_basis=[_as_dict(system, y) for y in red.basis])
    return CompatibilityDecision(None, None, f"{before}; frequent-token reduction: {red.why}")


def _pair_null_vector(system: KeslerSystem) -> CompatibilityDecision | None:
    """A violating left null vector found on a pair of tokens (:mod:`ntpcert.pipeline.pairs`), checked
    exactly on the whole system (its y^T b != 0 by prime exponents there); None when no pair gives one."""
    from ntpcert.pipeline import pairs

    found = pairs.compatibility_witness(system.instance)
    if found is None:
        return None
    y, text = found
    index = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(system.eq_context, system.eq_token))}
    if any(key not in index for key in y):
        return None
    full = np.zeros(system.n_eq, dtype=object)
    for key, v in y.items():
        full[index[key]] = v
    if not exact_left_null(system, full):
        return None
    return CompatibilityDecision(False, "pair-null-vector", text, violating=y)


def _as_dict(system: KeslerSystem, y: np.ndarray) -> dict:
    return {(int(system.eq_context[i]), int(system.eq_token[i])): int(y[i]) for i in np.flatnonzero(y)}


def _violation_text(system: KeslerSystem, y: np.ndarray, part: Part | None) -> str:
    b = system.log_odds()
    where = "" if part is None else f" (found on a part of {part.instance.m} contexts and {part.instance.V} tokens)"
    return (f"exact left null vector y of A_eq with {int(np.count_nonzero(y))} non-zeros{where} and "
            f"y^T b = {float(y @ b):.6g} != 0 (sign checked against its rounding bound)")


__all__ = [
    "DEFAULT_SEPARABILITY_SOLVER",
    "SEPARABILITY_SOLVERS",
    "CompatibilityDecision",
    "Part",
    "SeparabilityDecision",
    "check_ray_sparse",
    "decide_compatibility",
    "decide_separability",
    "exact_left_null",
    "lemma1",
    "lemma1_text",
    "make_part",
    "part_schedule",
]
