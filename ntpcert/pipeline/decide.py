r"""Which engine decides each verdict, and with which witness.

Both pipelines (float and ``--exact``) decide compatibility (4) and separability (6) here, in this
order of arguments, and record the one that settled each verdict as a short key (the ``engine`` of its
:class:`~ntpcert.verdict.Verdict`, and of the JSON report):

**Lemma 1** (``lemma1``). When the embeddings have rank m, every logit matrix :math:`Z = WH^\top` is
reachable (:math:`W = Z(HH^\top)^{-1}H`), so both (4) and (6) hold. The paper states it with
:math:`d > m`; rank m needs only :math:`d \ge m`, which one-hot context embeddings (d = m, H a
permutation) meet. The rank is certified by the cheapest sound route (:mod:`ntpcert.exact.rank_witness`):
a permutation or triangular structure peeled directly, then the rank mod a prime of what is left (or of
a column selection of it): no LP, no SVM, no Gram matrix, and no size cap. What is skipped (a core too
large to try, :data:`~ntpcert.exact.rank_witness.CORE_RANK_MAX_WORK`) is named in the witness and the report.

Every engine below runs within a budget of work (epochs, HiGHS iterations, pairs tried), never a clock:
the same data give the same verdict, engine and witness on any machine. A user's cap in seconds
(``time_limit``) is off by default; reaching it leaves the verdict undetermined, naming the cap.

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
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import BudgetSpent, InfeasibleError, InputError, SolverError, TimeLimitReached
from ntpcert.exact.compatibility import check_compatibility_by_columns
from ntpcert.exact.left_null import exact_left_null, log_odds_sign
from ntpcert.exact.modular import lift_vector
from ntpcert.exact.rank_witness import RankWitness
from ntpcert.instance import NTPInstance
from ntpcert.pipeline import parts
from ntpcert.pipeline.lemma1 import lemma1, lemma1_text
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.split import SCREEN_MAX_CELLS
from ntpcert.util.progress import progress_note
from ntpcert.util.validate import check_int
from ntpcert.verdict import (EmbeddingsFullRank, FarkasRay, FeasiblePoint, FullRowRank, NoEquations, NullSpaceBasis,
                             ParticularSolutions, Verdict, ViolatingNullVector)

#: Separability solvers selectable with ``--separability-solver``: ``auto`` asks HiGHS first on small
#: instances (``SMALL_LP_VARS``) and the structured solver otherwise; ``structured`` and ``highs`` use
#: that solver alone.
SEPARABILITY_SOLVERS = ("auto", "structured", "highs")
DEFAULT_SEPARABILITY_SOLVER = "auto"

#: Instances whose separability LP and Farkas LP together have at most this many variables
#: (V·d + V·m) go to HiGHS first under ``auto``: it answers them in milliseconds, the structured
#: solver's ray detection needs its patience epochs.
SMALL_LP_VARS = 4000
#: Separability LPs with at most this many variables (V·d) go to HiGHS when the structured solver
#: gives no answer (instances near the threshold, whose margins are too thin for its epoch cap).
HIGHS_FALLBACK_VARS = 20_000
#: Epochs of the structured solver's feasibility solve before it gives up (then the HiGHS ray LP), at most.
SEPARABILITY_MAX_EPOCHS = 2000
#: ... and its budget of work (units of :mod:`ntpcert.solve.structured.budget`: an epoch costs
#: m·(C·min(m, d) + 50,000)), so that large instances get fewer epochs: this replaces a limit of 120 s
#: (about 1.6e9 units a second on the shared 2-core machine: 1.9e11 units in 120 s; 3e11 leaves headroom).
#: The largest feasibility solve that the structured solver settled in the default suite took 555 epochs
#: on m = 11 (3.1e8 units, 0.1 % of the budget); on the benchmark model instance of lm-scale-reduced.md
#: (m = 5,755, d = 768, C <= 1,622) it gets at least 40 epochs, where the 120 s had given it 38.
SEPARABILITY_MAX_WORK = 300_000_000_000
#: What settles a feasibility solve that spent its budget, in the verdict's words.
SEPARABILITY_SETTLE = ("a larger budget (the library's separability_max_epochs) or '--separability-solver highs' "
                       "may settle it")
#: Relative gap that ends a structured solve used only for feasibility.
FEASIBILITY_TOL = 0.5
#: Compatibility mod p is tried on systems (or parts) with at most this many equality rows.
GRAM_MAX_ROWS = 1500
#: Null-space vectors lifted from one system, at most.
MAX_LIFTED = 4000
#: The HiGHS ray LP (V·m variables) is tried as a fallback only up to this many.
HIGHS_RAY_MAX_ENTRIES = 2_000_000


# ============================================================================ separability
@dataclass(frozen=True, eq=False)
class SeparabilitySolve:
    """What the solves of the separability decision leave beside its verdict.

    Attributes
    ----------
    svm : SVMSolution or None
        The NTP-SVM solution, when the deciding solve was the SVM itself.
    svm_error : str or None
        Why there is none, when one was asked for.
    parts : tuple of dict
        What each part gave (:func:`ntpcert.pipeline.parts.separability_on_parts`).
    """

    svm: object = None
    svm_error: str | None = None
    parts: tuple = ()


def _undetermined(why: str, log=(), svm_error: str | None = None) -> tuple[Verdict, SeparabilitySolve]:
    return Verdict.undetermined(why), SeparabilitySolve(parts=tuple(log), svm_error=svm_error)


def decide_separability(system: KeslerSystem, *, separability_solver: str = DEFAULT_SEPARABILITY_SOLVER,
                        lemma1_rank: RankWitness | None = None, svm_solver: str | None = None,
                        time_limit: float | None = None, progress: bool | None = None,
                        svm_options: dict | None = None, max_epochs: int | None = None,
                        split_lp: bool = True) -> tuple[Verdict, SeparabilitySolve]:
    """Settle (6) (module doc): ``(verdict, solve)``. With ``svm_solver`` a structured backend (``auto``,
    ``structured``, ``structured-float``), the deciding solve is the NTP-SVM itself and its solution is
    returned in ``solve.svm`` (``svm_options`` go to :func:`~ntpcert.solve.svm.solve_svm`).

    Every engine runs within its budget of work (docs/undetermined.md); ``max_epochs`` replaces the
    structured solver's (default :data:`SEPARABILITY_MAX_EPOCHS`, fewer on large instances by
    :data:`SEPARABILITY_MAX_WORK`). ``time_limit`` is a user's cap in seconds on the whole decision, off by
    default: reaching it leaves the verdict undetermined, saying so. ``split_lp``: where the screened split
    leaves pairs open, try the split's single LP (:func:`split_separability`); the many small decisions of
    ``explain``'s culprit search leave it out."""
    from ntpcert.util.budget import Deadline

    if separability_solver not in SEPARABILITY_SOLVERS:
        raise InputError(f"separability_solver: unknown value {separability_solver!r} (expected "
                         f"{', '.join(SEPARABILITY_SOLVERS)})")
    check_int("max_epochs", max_epochs, minimum=1, optional=True)
    deadline = Deadline(time_limit)
    inst = system.instance
    if system.n_margin == 0:
        from fractions import Fraction

        from ntpcert.exact.separability import ExactPoint

        zero = np.zeros((inst.V, inst.d))
        return Verdict(True, FeasiblePoint(zero, "vacuous", "no off-support tokens: (6b) is vacuous",
                                           point=ExactPoint(zero, (), Fraction(1)))), SeparabilitySolve()
    if lemma1_rank is not None and lemma1_rank.full:
        return Verdict(True, EmbeddingsFullRank(lemma1_rank, f"{lemma1_text(lemma1_rank)}: every logit matrix is "
                                                "reachable (Lemma 1)")), SeparabilitySolve()
    if separability_solver == "highs":
        return _highs(system, deadline)
    if separability_solver == "auto" and inst.V * (inst.d + inst.m) <= SMALL_LP_VARS:
        dec = _highs(system, deadline)
        if dec[0].holds is not None:
            return dec
    from ntpcert.pipeline import pair_screen  # every token pair, streamed, within a budget of work

    _step(progress, "screening token pairs for a Farkas ray")
    screened = pair_screen.separability_verdict(inst)
    if screened is not None:
        return screened, SeparabilitySolve()
    _step(progress, "Farkas rays on the token pairs shared by more than d contexts")
    pair = pair_separability(inst)
    if pair is not None:
        return pair, SeparabilitySolve()
    _step(progress, "Farkas rays on parts of the instance")
    ray, log = parts.separability_on_parts(inst, progress=progress, deadline=deadline)
    if ray is not None:
        last = log[-1]
        return Verdict(False, FarkasRay(ray, "part-farkas", f"Farkas ray with {len(ray)} non-zero entries found on a "
                                        f"part of {last['contexts']} contexts and {last['tokens']} tokens, verified "
                                        "exactly on the whole instance")), SeparabilitySolve(parts=tuple(log))
    if separability_solver == "auto" and inst.m >= SPLIT_SCREEN_MIN_RATIO * inst.d:
        # the structured solver first, on a small budget: on separable data it settles (6) in a few epochs,
        # where the screened split's point is a global LP (15 s against 0.2 s at m = 127, d = 49)
        full = separability_epochs(system) if max_epochs is None else int(max_epochs)
        first = min(full, epochs_within_work(system, SPLIT_FIRST_WORK, full))
        failed: list[SolverError] = []
        _step(progress, f"the structured solver, a first try of at most {first:,} epochs")
        tried = _structured(system, svm_solver, deadline, log, progress, svm_options or {}, first, failed=failed)
        if tried[0].holds is not None or deadline.passed() or not failed:
            return tried
        _step(progress, "the screened split into separable and non-separable pairs (LPs of m rows in d unknowns)")
        screened = split_separability(system, lp=split_lp)
        if screened is not None:
            return screened, SeparabilitySolve(parts=tuple(log))
        if first >= full:  # the whole budget was spent already: what follows a solve with no answer
            return _no_answer(system, deadline, log, failed[0])
    if deadline.passed():
        return _undetermined(f"{deadline.text()} before the structured solver's feasibility solve", log)
    _step(progress, f"the structured solver, at most {separability_epochs(system) if max_epochs is None else max_epochs:,} "
          "epochs")
    return _structured(system, svm_solver, deadline, log, progress, svm_options or {}, max_epochs)


def _step(progress: bool | None, text: str) -> None:
    """One line on stderr naming the engine that runs next, when progress is asked for: a decision can
    take minutes, and each engine's own bar (if it has one) says nothing of what comes after it."""
    if progress:
        progress_note(f"separability: {text}", enabled=True)


def pair_separability(inst: NTPInstance) -> Verdict | None:
    """A Farkas ray found on a pair of tokens (:mod:`ntpcert.pipeline.pairs`), checked exactly on the
    whole instance; None when no pair gives one."""
    from ntpcert.pipeline import pairs

    found = pairs.separability_witness(inst)
    if found is None:
        return None
    ray, text = found
    witness = FarkasRay(ray, "pair-farkas", text + ", verified exactly on the whole instance")
    return None if witness.check(inst) else Verdict(False, witness)


#: The screened split (:mod:`ntpcert.solve.split_screen`) decides (6) where d < m when its LPs, about
#: 2·C of m rows in d unknowns (C token classes), hold at most this many cells C·m·d in all.
SPLIT_SCREEN_MAX_CELLS = SCREEN_MAX_CELLS
#: ... and under ``auto`` only where m >= this times d: nearer d = m the structured solver decides fast, and
#: its one solve serves the NTP-SVM as well.
SPLIT_SCREEN_MIN_RATIO = 2
#: There the structured solver is tried first within this budget of work (a tenth of
#: :data:`SEPARABILITY_MAX_WORK`, and at most its epochs); the split comes only when that try leaves (6)
#: open. On separable data the structured solver settles (6) in a few seconds where the split's point is a
#: global LP (m = 194, d = 38, V = 40: 1,800 epochs in 1.5 s against 156 s).
SPLIT_FIRST_WORK = 30_000_000_000


def split_separability(system: KeslerSystem, *, lp: bool = True) -> Verdict | None:
    """(6) from the screened split (:func:`ntpcert.solve.split.nonseparable_split`, ``method="screen"``),
    where the structured solver is slow (d < m): N empty gives its point D_P, re-checked as any float
    point is; N non-empty gives its N-certificate as a Farkas ray, made exact on its support and checked
    exactly; where the screens leave pairs in neither certificate, the split's single LP (solved once more in
    whitened coordinates where HiGHS fails: a model's nearly degenerate h). None when the split is
    undetermined, too large (:data:`SPLIT_SCREEN_MAX_CELLS`) or its witness fails its check."""
    from ntpcert.exact.separability import check_ray
    from ntpcert.exact.split import exact_nonseparable_ray
    from ntpcert.solve.point_check import check_point
    from ntpcert.solve.split import nonseparable_split
    from ntpcert.solve.structured.classes import TokenClasses

    inst = system.instance
    if TokenClasses.build(inst).count * inst.m * inst.d > SPLIT_SCREEN_MAX_CELLS:
        return None
    split = nonseparable_split(inst, method="screen")
    if not split.ok:
        if not lp:
            return None
        split = nonseparable_split(inst)  # the single LP (retried whitened where HiGHS fails), within its limit
        if not split.ok:
            return None
    if split.n_nonseparable == 0:
        chk = check_point(system, split.D)
        if not chk.ok:
            return None
        return Verdict(True, FeasiblePoint(split.D, "split-point", f"the split's point (N is empty): "
                                           f"{chk.text}", min_margin=chk.min_margin, eq_violation=chk.eq_violation))
    ray, _why = exact_nonseparable_ray(inst, split)
    if ray is None or check_ray(inst, ray):
        return None
    return Verdict(False, FarkasRay(ray, "split-farkas", f"the split's N-certificate ({split.n_nonseparable} "
                                    f"non-separable pairs) as a Farkas ray with {len(ray)} non-zero entries, "
                                    "verified exactly"))


def epochs_within_work(system: KeslerSystem, work: int, cap: int) -> int:
    """The epochs that ``work`` units buy on ``system``, at most ``cap``
    (:func:`ntpcert.solve.structured.budget.epochs_within`)."""
    from ntpcert.solve.structured.budget import epochs_within

    return epochs_within(system, work, cap)


def separability_epochs(system: KeslerSystem) -> int:
    """The structured feasibility solve's budget in epochs: :data:`SEPARABILITY_MAX_EPOCHS`, or fewer where
    :data:`SEPARABILITY_MAX_WORK` buys fewer (a function of the size alone)."""
    from ntpcert.solve.structured.budget import epochs_within

    return epochs_within(system, SEPARABILITY_MAX_WORK, SEPARABILITY_MAX_EPOCHS)


def _structured(system, svm_solver, deadline, log, progress, svm_options,
                max_epochs=None, failed: list | None = None) -> tuple[Verdict, SeparabilitySolve]:
    """A feasibility solve of the structured solver (within :func:`separability_epochs`, or
    ``max_epochs``), then, when separable and asked for, the NTP-SVM with ``svm_solver``. Where the solve
    gives no answer, :func:`_no_answer`; or, with a list ``failed``, the error is appended to it and the
    verdict is undetermined at once (the caller tries something else first)."""
    from ntpcert.solve.point_check import check_point
    from ntpcert.solve.structured.solver import solve as structured
    from ntpcert.solve.svm import solve_svm

    epochs = separability_epochs(system) if max_epochs is None else int(max_epochs)
    try:
        sol = structured(system, certificate="float", tol=FEASIBILITY_TOL, time_limit=deadline.left(),
                         max_epochs=epochs, progress=bool(progress))
    except TimeLimitReached as e:
        return _undetermined(f"{deadline.text()} in the structured solver's feasibility solve", log, svm_error=str(e))
    except InfeasibleError as e:
        ray = parts.ray_from(e)
        if ray is not None:
            return (Verdict(False, FarkasRay(ray, "structured-farkas", f"Farkas ray with {len(ray)} non-zero entries "
                                             "from the structured solver's diverging dual, verified exactly")),
                    SeparabilitySolve(parts=tuple(log), svm_error=f"not separable: {e}"))
        return _highs_ray(system, deadline, log, f"the structured solver reports infeasibility ({e}) but its ray "
                                                   "is not exact")
    except SolverError as e:
        if failed is not None:
            failed.append(e)
            return _undetermined(f"the structured solver gave no answer ({e})", log, svm_error=str(e))
        return _no_answer(system, deadline, log, e)
    chk = check_point(system, sol.W)
    if not chk.ok:
        return _undetermined(f"the structured solver's point fails the re-check ({chk.text}); run "
                             "--separability-solver highs or --exact", log)
    svm, err = None, None
    if svm_solver is not None:
        try:
            svm = solve_svm(system, solver=svm_solver, progress=bool(progress), **svm_options)
        except (InfeasibleError, SolverError) as e:
            err = f"NTP-SVM not certified: {e}"
    return (Verdict(True, FeasiblePoint(sol.W, "structured-point", f"the structured solver's point: {chk.text}",
                                        min_margin=chk.min_margin, eq_violation=chk.eq_violation)),
            SeparabilitySolve(svm, err, tuple(log)))


def _no_answer(system, deadline, log, e: SolverError) -> tuple[Verdict, SeparabilitySolve]:
    """After a structured feasibility solve that gave no answer (``e``): the HiGHS LP on instances near the
    threshold, then the HiGHS ray LP on small ones, else undetermined."""
    why = f"the structured solver gave no answer ({e})"
    if system.n_vars <= HIGHS_FALLBACK_VARS:  # near the threshold: margins too thin for 2000 epochs
        verdict, _ = _highs(system, deadline)
        if verdict.holds is not None:
            w = dataclasses.replace(verdict.witness, text=f"{why}; {verdict.reason}")
            return Verdict(verdict.holds, w), SeparabilitySolve(parts=tuple(log))
    settle = f"; {SEPARABILITY_SETTLE}" if isinstance(e, BudgetSpent) else ""
    return _highs_ray(system, deadline, log, why, svm_error=str(e), settle=settle)


def _highs_ray(system, deadline, log, why, svm_error=None, settle="") -> tuple[Verdict, SeparabilitySolve]:
    """Fallback: the dual LP's vertex ray through HiGHS, made exact; small instances only (V·m at most
    :data:`HIGHS_RAY_MAX_ENTRIES`). ``settle`` (what would settle the question) ends an undetermined text."""
    from ntpcert.exact.separability import farkas_ray_lp

    inst = system.instance
    if inst.V * inst.m > HIGHS_RAY_MAX_ENTRIES:
        return _undetermined(why + f"; the HiGHS ray LP is too large to try here (V·m = {inst.V * inst.m:,} "
                             f"entries, more than HIGHS_RAY_MAX_ENTRIES = {HIGHS_RAY_MAX_ENTRIES:,}){settle}",
                             log, svm_error)
    if deadline.passed():
        return _undetermined(why + f"; {deadline.text()} before the HiGHS ray LP", log, svm_error)
    ray, reason = farkas_ray_lp(inst, time_limit=deadline.left())
    if ray is None and deadline.passed():
        reason = f"{deadline.text()} in the HiGHS ray LP"
    if ray is not None:
        return (Verdict(False, FarkasRay(ray, "highs-farkas", f"Farkas ray of the dual LP with {len(ray)} non-zero "
                                         "entries, verified exactly")),
                SeparabilitySolve(parts=tuple(log), svm_error=svm_error))
    return _undetermined(why + f"; {reason}{settle}", log, svm_error)


def _highs(system, deadline) -> tuple[Verdict, SeparabilitySolve]:
    from ntpcert.solve.separability_lp import check_separability

    if deadline.passed():
        return _undetermined(f"{deadline.text()} before the HiGHS separability LP")
    lp = check_separability(system, time_limit=deadline.left())
    if not lp.feasible and not lp.lp_infeasible and deadline.passed():
        return _undetermined(f"{deadline.text()} in the HiGHS separability LP")
    if lp.feasible:
        return (Verdict(True, FeasiblePoint(lp.W, "highs-point", lp.text, min_margin=lp.min_margin,
                                            eq_violation=lp.eq_violation)), SeparabilitySolve())
    if lp.lp_infeasible:
        return _highs_ray(system, deadline, [], "HiGHS reports the LP infeasible")
    return _undetermined(lp.text)


# ============================================================================ compatibility
def _modular(system: KeslerSystem, p: int) -> tuple[str, object]:
    """Compatibility of ``system`` mod p (module doc): ``("full-rank", rank)``, ``("violation", y)``,
    ``("null-space", (rank, [y, ...]))`` or ``("unknown", why)``."""
    import flint

    from ntpcert.exact.modular import gram_residues
    from ntpcert.exact.left_null import log_odds_sign

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


def decide_compatibility(system: KeslerSystem, *, lemma1_rank: RankWitness | None = None) -> Verdict:
    """Settle (4) with an exact witness (module doc), or say why not."""
    from ntpcert.exact.modular import PRIMES

    inst = system.instance
    r = system.n_eq
    if r == 0:
        return Verdict(True, NoEquations())
    if lemma1_rank is not None and lemma1_rank.full:
        return Verdict(True, EmbeddingsFullRank(lemma1_rank, f"{lemma1_text(lemma1_rank)}: (4) is solvable for every "
                                                "right-hand side (Lemma 1)", rank=r))
    pair = _pair_null_vector(system)
    if pair is not None:
        return pair
    tall = check_compatibility_by_columns(inst)  # more rows than used columns: one solve per prime
    if tall is not None:
        rank, particular = tall
        w = ParticularSolutions(particular, rank)
        return Verdict(True, dataclasses.replace(w, text=f"exact: {w.describe()} (r = {r} rows, rank A_eq = {rank})"))
    p = PRIMES[0]
    for part in (parts.parts_of(inst) if r > GRAM_MAX_ROWS or inst.m > parts.PART_MIN_CONTEXTS else ()):
        sub = KeslerSystem.build(part.instance)
        if sub.n_eq > GRAM_MAX_ROWS:
            break
        if sub.n_eq == 0:
            continue
        kind, val = _modular(sub, p)
        if kind == "violation":
            y = parts.to_whole(part, sub, val, system)
            if exact_left_null(system, y) and log_odds_sign(system, y):
                return Verdict(False, ViolatingNullVector(_as_dict(system, y), "part-null-vector",
                                                          _violation_text(system, y, part)))
    if r > GRAM_MAX_ROWS:
        return _frequent_tokens(system, f"no violating null vector on parts; the whole system has r = {r} equality "
                                f"rows, more than the {GRAM_MAX_ROWS} decided mod p as a whole")
    kind, val = _modular(system, p)
    if kind == "full-rank":
        return Verdict(True, FullRowRank(r, p, "gram-rank-mod-p", f"A_eq has full row rank r = {r} (its Gram matrix "
                                         f"has rank r mod the prime {p}): (4) is solvable for every right-hand side"))
    if kind == "violation":
        return Verdict(False, ViolatingNullVector(_as_dict(system, val), "null-vector",
                                                  _violation_text(system, val, None)))
    if kind == "null-space":
        rank, basis = val
        return Verdict(True, NullSpaceBasis(tuple(_as_dict(system, y) for y in basis), rank, p, "null-space",
                                            f"the {len(basis)} exact left null vectors of A_eq span its null space "
                                            f"(rank {rank} mod the prime {p}) and every y^T b is exactly 0"))
    return Verdict.undetermined(f"{val}; run 'ntpcert certify DATA --exact'")


def _frequent_tokens(system: KeslerSystem, before: str) -> Verdict:
    """(4) through the tokens whose contexts' embeddings are dependent (:mod:`ntpcert.pipeline.frequent_tokens`)."""
    from ntpcert.pipeline.frequent_tokens import reduce_compatibility

    red = reduce_compatibility(system)
    if red.holds is False:
        return Verdict(False, ViolatingNullVector(_as_dict(system, red.violating), "frequent-tokens-null-vector",
                                                  "frequent-token reduction: " + red.why))
    if red.holds is True:
        return Verdict(True, NullSpaceBasis(tuple(_as_dict(system, y) for y in red.basis), system.n_eq - len(red.basis),
                                            red.modulus, "frequent-tokens", "frequent-token reduction: " + red.why))
    return Verdict.undetermined(f"{before}; frequent-token reduction: {red.why}")


def _pair_null_vector(system: KeslerSystem) -> Verdict | None:
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
    return Verdict(False, ViolatingNullVector(dict(y), "pair-null-vector", text))


def _as_dict(system: KeslerSystem, y: np.ndarray) -> dict:
    return {(int(system.eq_context[i]), int(system.eq_token[i])): int(y[i]) for i in np.flatnonzero(y)}


def _violation_text(system: KeslerSystem, y: np.ndarray, part: parts.Part | None) -> str:
    b = system.log_odds()
    where = "" if part is None else f" (found on a part of {part.instance.m} contexts and {part.instance.V} tokens)"
    return (f"exact left null vector y of A_eq with {int(np.count_nonzero(y))} non-zeros{where} and "
            f"y^T b = {float(y @ b):.6g} != 0 (sign checked against its rounding bound)")


__all__ = [
    "DEFAULT_SEPARABILITY_SOLVER",
    "SEPARABILITY_SOLVERS",
    "SeparabilitySolve",
    "decide_compatibility",
    "decide_separability",
    "lemma1",
    "lemma1_text",
    "pair_separability",
    "separability_epochs",
]
