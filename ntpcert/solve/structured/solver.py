r"""The structured NTP-SVM solver: dual block-coordinate ascent, active-set polish, certified stop.

The generic backends hand a QP solver V·d variables and m·V constraints. This solver works on the
dual of ``math.md`` instead, with the structure spelled out:

1. **Token classes** (:mod:`~ntpcert.solve.structured.classes`): tokens in exactly the same supports
   share their optimal row, so the dual is held per class (shape (m, C), C ≤ V). With many
   tokens and few contexts, C is about the number of distinct tokens that occur.
2. **Block-coordinate ascent over contexts** (:mod:`~ntpcert.solve.structured.bcd`) with the closed-form
   block update (:mod:`~ntpcert.solve.structured.block`), on the kernel path (logits :math:`Z = KA`,
   :math:`K = HH^\top`) when :math:`d \ge m` and on the linear path (:math:`W_c = A^\top H`) otherwise;
   batches of delayed updates turn the state updates into matrix products. Memory
   :math:`O(mC + \min(m^2, Cd))` besides the instance.
3. **Active-set polish** (:mod:`~ntpcert.solve.structured.polish`): once the set of active margins stops
   changing, one Newton step on that set (a few primal-dual active-set steps if needed) gives the
   optimum to rounding error instead of a linear tail.
4. **Certified stop**: a candidate is accepted only when the relative duality gap of an exactly
   feasible primal/dual pair, computed in rational arithmetic by
   :func:`ntpcert.exact.svm_gap.exact_svm_bound`, is at most ``tol`` (``certificate="float"`` uses the
   float gap of the rescaled pair instead).
5. **Non-separable data** (:mod:`~ntpcert.solve.structured.farkas`): the dual is then unbounded and the
   iterates drift along a ray; the solver extracts the ray as a Farkas certificate, checks it
   exactly, and raises :class:`NotSeparable` carrying it.

Example
-------
>>> from ntpcert.solve.svm import solve_svm
>>> sol = solve_svm(instance, solver="structured")        # doctest: +SKIP
>>> sol.info["certificate"]["relative_gap"] <= 1e-9        # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction

import numpy as np

from ntpcert.errors import BudgetSpent, InfeasibleError, InputError, SolverError, TimeLimitReached
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.solution import SVMSolution
from ntpcert.solve.structured.bcd import BATCH, epoch, make_state, uses_compiled
from ntpcert.solve.structured.compiled import full_pass
from ntpcert.solve.structured.classes import TokenClasses
from ntpcert.solve.structured.farkas import FarkasRay, certify_ray, find_ray, token_ray
from ntpcert.solve.structured.monitor import Progress, gap_progress
from ntpcert.solve.structured.polish import ActiveSetSystem
from ntpcert.util.budget import budget_text, cap_text
from ntpcert.util.numbers import blas_threads
from ntpcert.util.progress import progress_bar
from ntpcert.util.validate import check_int, check_number

#: Default target of the certified relative duality gap.
DEFAULT_TOL = 1e-9

#: The state is recomputed from A every this many epochs (removes drift of the delayed updates); on the
#: compiled path before each full pass instead (:func:`~ntpcert.solve.structured.compiled.full_pass`).
REFRESH_EVERY = 10

#: Polish is tried once the gap estimate is below this and at most a fraction ``POLISH_CHANGES`` of
#: the active entries changed in the last epoch; after the k-th failed attempt,
#: ``POLISH_WAIT * 2**k`` epochs pass (k at most 6).
POLISH_BELOW = 1e-1
#: Where d < m the gap estimate stays infinite (no positive margin estimate) for hundreds of epochs after the
#: active set has settled, and numpy coordinate ascent's tail is slow: there the polish is tried once the
#: active set settles, whatever the estimate (on a 478-context model instance: certified after 301 epochs,
#: 10 s, against 3,611 epochs, 66 s, when waiting for the estimate). The compiled epochs
#: (:mod:`~ntpcert.solve.structured.compiled`) are cheap enough to wait for it (the same instance: 3,240
#: epochs and one polish, 4.4 s, against 485 epochs and six polishes, 48 s, polishing early).
POLISH_CHANGES = 0.02
POLISH_WAIT = 3

#: Primal-dual active-set steps per polish attempt (each pins at most one margin per context).
PDAS_STEPS = 40

#: Where d < m and the active-set steps stall, the polish solves the QP on the working set of the margins
#: coordinate ascent found active, with inequalities, by :mod:`ntpcert.solve.structured.working_set` (Clarabel,
#: grown until every margin holds), when the class rows have at most this many unknowns C·d. Pinning margins
#: as equations is fragile there: the active margins nearly fill the (C - 1)·d dimensions of the class rows,
#: and one extra pinned margin leaves the equations without a solution (teacher data, V = 10, m = 500,
#: d = 64: 152 s of active-set steps before the steps stopped at a stall, 6 s with them).
WORKING_SET_MAX_VARS = 5_000
#: ... and only from the this-many-th polish attempt whose steps stalled on. It was the fourth while the working
#: set's QPs went to Clarabel (seconds to minutes on C·d unknowns); in the space of their rows, from coordinate
#: ascent's dual, they cost a few Cholesky factorisations (teacher data, V = 50, m = 4,000, d = 64: certified in
#: 9.8 s from the first stalled attempt, 11.4 s from the fourth).
WORKING_SET_AFTER = 1
#: The working set goes first (:meth:`_Solver.working_set_first`) on at most this many token classes. Its first
#: set holds each context's START_PER_CONTEXT most frequent competitors, which on a few classes is most of the
#: active set from the first epochs on: teacher data with V = 10 certify at epoch 30 (d = 64, m = 4,000: 6.6 s;
#: d = 256: 64.5 s, where the settled path took 92.6 s). On V = 50 (d = 64, m = 4,000) the same start needed
#: 240 s of working-set rounds, the settled path 34 s.
DIRECT_MAX_CLASSES = 16

#: A candidate is certified when its gap estimate is below ``tol`` times this factor.
CERTIFY_FACTOR = 0.5

#: A ray is searched for once the margin estimate has not been positive for ``RAY_PATIENCE`` epochs
#: in a row and the dual objective has grown by ``RAY_GROWTH`` since the last reference point.
RAY_GROWTH = 2.0
RAY_PATIENCE = 3
#: After each search that finds no ray the next one waits for twice the epochs so far and for the dual
#: to grow by the square of the last factor (at most ``RAY_GROWTH ** 2 ** RAY_BACKOFF_MAX``): where d < m
#: the dual of separable data grows for hundreds of epochs before a margin turns positive, and each
#: search is an LP over every active entry (one-hot-labelled data, V = 500, m = 4,000, d = 64: over 100 s
#: a search, against 0.05 s an epoch).
RAY_BACKOFF_MAX = 4


#: The float certificate accepts a candidate only when its in-support logits agree to this
#: tolerance (relative to the margin); the exact certificate repairs them exactly instead.
FLOAT_EQUALITY_TOL = 1e-9

#: After a failed certification the next one waits at most this many epochs (the wait doubles
#: after each failure, from 1), even when the gap estimate has not fallen tenfold.
CERTIFY_MAX_WAIT = 256


def _equality_residual(Z: np.ndarray, mask: np.ndarray) -> float:
    """Largest spread of the in-support logits over the contexts: 0 exactly when (6a) holds."""
    hi = np.where(mask, Z, -np.inf).max(axis=1)
    lo = np.where(mask, Z, np.inf).min(axis=1)
    return float((hi - lo).max(initial=0.0))


class NotSeparable(InfeasibleError):
    """The data are not NTP-separable; ``certificate`` is the Farkas ray that proves it."""

    def __init__(self, message: str, certificate: FarkasRay) -> None:
        super().__init__(message)
        self.certificate = certificate


def _trivial_ray(classes: TokenClasses, j: int, V: int, m: int) -> FarkasRay:
    """Context j has :math:`h_j = 0` and an off-support token: :math:`r_j = e_z - e_v` is a ray."""
    a = np.zeros((V, m))
    z = int(np.flatnonzero(classes.mask[j, classes.of_token])[0])
    v = int(np.flatnonzero(~classes.mask[j, classes.of_token])[0])
    a[z, j], a[v, j] = 1.0, -1.0
    return FarkasRay(a, 0.0, 0.0, 0.0, True, 2, {(z, j): Fraction(1), (v, j): Fraction(-1)})


class _Bar:
    """Epochs on a progress bar, with the gap estimate and the active count beside them."""

    def __init__(self, enabled: bool) -> None:
        self.bar = progress_bar(enabled, desc="structured", unit="epoch")
        self.epochs = 0

    def update(self, pr: Progress, ep: int) -> None:
        """At epoch ``ep`` (the compiled path reads its measures only every few epochs: the bar still
        counts every epoch)."""
        self.bar.update(ep - self.epochs)
        self.epochs = ep
        self.bar.set_postfix_str(f"gap~{pr.relative_gap_estimate:.1e} active {pr.active}", refresh=False)

    def step(self, what: str) -> None:
        """Say which long step runs between epochs (a ray search, a polish), so that a bar never sits
        silent for minutes."""
        self.bar.set_postfix_str(what)

    def close(self) -> None:
        self.bar.close()


class _Solver:
    """One solve; holds the per-instance data so that the steps stay small functions."""

    def __init__(self, system: KeslerSystem, *, tol: float, path: str, batch: int, certificate: str,
                 seed: int) -> None:
        self.system = system
        inst = system.instance
        self.inst = inst
        self.H = np.ascontiguousarray(inst.embeddings, dtype=np.float64)
        self.classes = TokenClasses.build(inst)
        self.off = ~self.classes.mask
        self.tol = tol
        self.batch = batch
        self.certificate = certificate
        self.rng = np.random.default_rng(seed)
        self.path = path
        self.exact_seconds = 0.0
        self.certify_calls = 0
        self.pdas_steps = 0
        self.working_set_solves = 0
        self.stalled = 0  # polish attempts whose active-set steps did not converge
        # the stalled attempt from which the working set is tried again: after each of its candidates that the
        # certificate refuses, twice as many stalled attempts pass (a degenerate QP whose working-set pair stays
        # just above tol: soft supports, V = 50, m = 500, d = 64, eleven 12 s working sets in 140 s, each refused)
        self.ws_next = WORKING_SET_AFTER
        self.ws_refused = 0
        self.from_working_set = False  # whether the last polish candidate came from the working set
        self.active_set: ActiveSetSystem | None = None
        self.bounder = None  # the exact bound's per-instance precomputation, built on first use

    # ------------------------------------------------------------------ candidates
    def can_polish(self, active: np.ndarray) -> bool:
        """A class with more pinned contexts than the embedding dimension has a singular KKT block
        :math:`H_{J_c} H_{J_c}^\top`; its null space enters the saddle-point system of the polish
        (:mod:`~ntpcert.solve.structured.polish`), which is skipped when that system would be too large and so would
        the space of the pinned rows."""
        from ntpcert.solve.structured.polish import MAX_ROWS, MAX_SADDLE, pinned_rows

        if self.working_set_fits():
            return True
        pinned = (active | self.classes.mask).sum(axis=0)
        extra = int(np.maximum(pinned - self.inst.d, 0).sum())
        if self.inst.m + extra <= MAX_SADDLE:
            return True
        rows = pinned_rows(self.classes, active)  # or the space of the pinned rows
        return rows <= min((self.classes.count - 1) * self.inst.d, MAX_ROWS)

    def polish(self, A: np.ndarray, state) -> np.ndarray | None:
        """The polished dual from the active set of A, or None: primal-dual active-set steps (cheap when
        they converge), then, where they stall and the class rows are few (:meth:`working_set_fits`), the QP
        on the working set."""
        if self.working_set_first((A < 0) & self.off):
            return self.working_set(A)
        if self.active_set is None:
            self.active_set = ActiveSetSystem(self.classes, self.H, getattr(state, "K", None))
        res = self.active_set.pdas((A < 0) & self.off, PDAS_STEPS)
        if res is not None:
            self.pdas_steps += res.steps
            if res.converged:
                return res.A
        self.stalled += 1
        if self.stalled < self.ws_next or not self.working_set_fits():
            return None
        return self.working_set(A)

    def refused(self) -> None:
        """The certificate refused the last polish candidate: a working set's waits for more stalled attempts."""
        if self.from_working_set:
            self.ws_refused += 1
            self.ws_next = self.stalled + 2 ** self.ws_refused

    def wide(self, active: np.ndarray) -> bool:
        """Whether some class is pinned (in a support, or by an active margin) in more contexts than the
        embedding dimension: its block of the active-set steps is singular, and each step would pay an
        eigendecomposition of it (on teacher data with V = 10, m = 1,000, d = 64: 50 s of eigh in a 61 s solve,
        where the working set answers in 1.7 s; :meth:`working_set_first`)."""
        return bool(((active | self.classes.mask).sum(axis=0) > self.inst.d).any())

    def working_set_first(self, active: np.ndarray) -> bool:
        """The polish goes to the working set at once (:meth:`wide`): the class rows are few enough for it
        (C·d at most m and :meth:`working_set_fits`) and some class is wide. The working set grows until every
        margin holds, so it needs no settled active set either. Only where every support is one class: with
        larger supports (soft supports, V = 10, m = 1,000, d = 64) this route took 44.8 s against Clarabel's 6.8 s;
        and only on a few classes (:data:`DIRECT_MAX_CLASSES`)."""
        return self.working_set_fits() and self.classes.count * self.inst.d <= self.inst.m \
            and self.classes.count <= DIRECT_MAX_CLASSES and bool((self.classes.mask.sum(axis=1) == 1).all()) \
            and self.wide(active)

    def working_set_fits(self) -> bool:
        """d < m and at most :data:`WORKING_SET_MAX_VARS` unknowns C·d in the class rows."""
        return self.inst.d < self.inst.m and self.classes.count * self.inst.d <= WORKING_SET_MAX_VARS

    def working_set(self, A: np.ndarray) -> np.ndarray | None:
        """The dual of the QP solved on the working set of A's active margins (see
        :data:`WORKING_SET_MAX_VARS`), or None when the class rows are too many or the solve fails."""
        from ntpcert.solve.structured import working_set

        if self.classes.count * self.inst.d > WORKING_SET_MAX_VARS:
            return None
        self.from_working_set = True
        try:
            sol = working_set.solve(self.system, tol=min(self.tol, 1e-9), start=(A < 0) & self.off, dual=A)
        except (SolverError, InfeasibleError):  # an unchecked infeasibility claim decides nothing here
            return None
        self.working_set_solves += 1
        return np.ascontiguousarray(self.classes.collapse_rows(sol.dual).T)

    def certify(self, A: np.ndarray, status: str, started: float, info: dict) -> tuple[SVMSolution | None, float]:
        """The certified solution of the candidate dual A and its certified relative gap
        (``(None, inf)`` when no feasible primal point could be certified)."""
        cls = self.classes
        a = cls.expand_rows(np.ascontiguousarray(A.T))
        Wcls = A.T @ self.H  # (C, d)
        W = cls.expand_rows(Wcls)
        self.certify_calls += 1
        if self.certificate == "exact":
            from ntpcert.exact.svm_gap import ExactSVMBounder

            t0 = time.perf_counter()
            if self.bounder is None:
                self.bounder = ExactSVMBounder(self.system)
            bound = self.bounder.bound(W, a)
            self.exact_seconds += time.perf_counter() - t0
            if not bound.primal_feasible:
                return None, np.inf
            rel = float(bound.relative_gap)
            Wc, ac = bound.W(), bound.a
            cert = {"kind": "exact", "relative_gap": rel, "gap": float(bound.gap_float),
                    "distance_bound": float(bound.distance_bound), "norm_lower": float(bound.norm_lower),
                    "norm_upper": float(bound.norm_upper), "margin_lower": bound.margin_lower,
                    "bits": bound.bits, "seconds": bound.seconds}
        else:
            Z = self.H @ Wcls.T  # class logits (m, C); token logits repeat them
            anchor = Z[np.arange(self.inst.m), cls.of_token[self.inst.anchors()]]
            gamma = float(np.where(cls.mask, np.inf, anchor[:, None] - Z).min())
            if not gamma > 0:
                return None, np.inf
            Wc, ac = W / gamma, a
            cert = {"kind": "float"}
            if _equality_residual(Z, cls.mask) > FLOAT_EQUALITY_TOL * max(1.0, gamma):
                return None, np.inf  # in-support logits still differ: not a feasible point
        info["exact_seconds"] = self.exact_seconds
        sol = SVMSolution.from_primal_dual(
            self.system, Wc, ac, solver="structured", status=status, seconds=time.perf_counter() - started,
            info=info,
        )
        if self.certificate != "exact":
            rel = sol.relative_gap
            cert.update(relative_gap=rel, gap=sol.gap)
        else:
            sol = dataclasses.replace(sol, exact_bound=bound)
        sol.info["certificate"] = cert
        return sol, rel


def solve(system: KeslerSystem, *, tol: float = DEFAULT_TOL, time_limit: float | None = None,
          max_epochs: int = 100_000, path: str = "auto", batch: int = BATCH, polish: bool = True,
          certificate: str = "exact", seed: int = 0, warm_start: np.ndarray | None = None,
          threads: int | None = 1, verbose: bool = False, progress: bool = False,
          separable: bool = False, shrink: bool = True) -> SVMSolution:
    """Solve the NTP-SVM with the structured solver (see the module doc).

    Parameters
    ----------
    system : KeslerSystem
    tol : float
        Target of the certified relative duality gap :math:`(P - D)/P`.
    time_limit : float, optional
        A user's cap in seconds, off by default: :class:`~ntpcert.errors.TimeLimitReached` when reached
        before a certificate (the answer then depends on the machine; the budget below does not).
    max_epochs : int
        The budget of work: passes over the contexts before giving up with
        :class:`~ntpcert.errors.BudgetSpent` (:mod:`~ntpcert.solve.structured.budget` turns a budget of
        work units into epochs).
    path : {"auto", "kernel", "linear"}
        State kept between block updates; ``auto`` takes the kernel path when d ≥ m.
    batch : int
        Contexts per delayed update.
    polish : bool
        Try active-set Newton steps once the active set settles.
    certificate : {"exact", "float"}
        How the stopping gap is computed: exactly from an exactly feasible pair, or in floats.
    seed : int
        Seed of the random context order.
    warm_start : ndarray of shape (V, m), optional
        An initial dual point (e.g. a previous solution's ``dual``).
    threads : int or None
        BLAS threads during the solve (default 1: the per-block products are small, and on a
        shared machine one thread per process is fastest); None leaves the BLAS setting alone.
    verbose : bool
        Accepted for the common backend API; the solver prints nothing (use ``progress``).
    progress : bool
        A progress bar on stderr.
    separable : bool
        The caller has shown the data NTP-separable (a checked point of (6), e.g. the split's): no Farkas
        ray is searched for. Where d < m the dual's early growth looks like a ray's, and each search is an LP
        over every active entry (25 s of the 35 s solve on a 478-context model instance).
    shrink : bool
        Shrink slack margins between full passes on the compiled linear path
        (:func:`~ntpcert.solve.structured.compiled.linear_epoch`); ignored elsewhere.

    Returns
    -------
    SVMSolution
        ``info`` holds ``epochs``, ``path``, ``classes`` (token classes), ``polish_attempts``,
        ``pdas_steps``, the ``certificate`` (its kind and relative gap), ``exact_seconds`` and the
        gap-estimate ``history`` (seconds, epoch, estimate).

    Raises
    ------
    NotSeparable
        (an :class:`~ntpcert.errors.InfeasibleError`) with the Farkas certificate.
    BudgetSpent
        (a :class:`~ntpcert.errors.SolverError`) when ``max_epochs`` are spent first.
    TimeLimitReached
        (a :class:`~ntpcert.errors.SolverError`) when the user's ``time_limit`` is reached first.
    """
    check_int("threads", threads, minimum=1, optional=True)
    with blas_threads(threads):
        return _solve(system, tol=tol, time_limit=time_limit, max_epochs=max_epochs, path=path, batch=batch,
                      polish=polish, certificate=certificate, seed=seed, warm_start=warm_start,
                      progress=progress, separable=bool(separable), shrink=bool(shrink))


def _solve(system: KeslerSystem, *, tol, time_limit, max_epochs, path, batch, polish, certificate, seed,
           warm_start, progress, separable=False, shrink=True) -> SVMSolution:
    if path not in ("auto", "kernel", "linear"):
        raise InputError(f"path: unknown value {path!r} (expected auto, kernel or linear)")
    if certificate not in ("exact", "float"):
        raise InputError(f"certificate: unknown value {certificate!r} (expected exact or float)")
    check_number("tol", tol, minimum=0, exclusive_minimum=True)
    check_int("max_epochs", max_epochs, minimum=1)
    check_number("time_limit", time_limit, minimum=0, exclusive_minimum=True, optional=True)
    t_start = time.perf_counter()
    if warm_start is None:
        from ntpcert.solve.structured.onehot import onehot_svm

        closed = onehot_svm(system, certificate=certificate)  # one-hot H: the solution in closed form
        if closed is not None:
            return closed
    S = _Solver(system, tol=float(tol), path=path, batch=int(batch), certificate=certificate, seed=seed)
    inst, cls, H = S.inst, S.classes, S.H
    m, C = cls.mask.shape
    diag = np.einsum("ij,ij->i", H, H)
    zero = diag == 0
    blocked = np.flatnonzero(zero & S.off.any(axis=1))
    if blocked.size:
        ray = _trivial_ray(cls, int(blocked[0]), inst.V, m)
        raise NotSeparable(f"structured: context {int(blocked[0])} has a zero embedding and tokens off its "
                           "support, so no W separates it (the data are not NTP-separable)", ray)
    contexts = np.flatnonzero(~zero)
    A = np.zeros((m, C))
    if warm_start is not None:
        a0 = np.asarray(warm_start, dtype=np.float64)
        if a0.shape != (inst.V, m):
            raise InputError(f"warm_start: expected shape (V, m) = ({inst.V}, {m}), got {a0.shape}")
        A = np.ascontiguousarray(cls.collapse_rows(a0).T)
        A[zero] = 0.0
    state = make_state(H, A, path)
    compiled_path = uses_compiled(state, A)
    keep = np.ones((m, C), dtype=bool) if shrink and compiled_path else None  # shrinking, compiled path only
    mu = np.full(m, np.nan)
    history: list[tuple[float, int, float]] = []
    bar = _Bar(progress)
    prev_active = None
    next_polish = 0
    next_certify = S.tol * CERTIFY_FACTOR
    ref_A, ref_dual = None, None
    stuck = 0  # consecutive epochs without a positive margin estimate
    ray_misses, next_ray = 0, 0  # searches that found no ray; the epoch before which none is tried
    failed, retry_at = 0, 0  # failed certifications, and the epoch of the next forced retry
    polished = 0
    best: tuple[SVMSolution, float] | None = None

    def finish(cand: np.ndarray, how: str, ep: int) -> SVMSolution | None:
        nonlocal best
        info = {"epochs": ep, "path": state.path, "classes": C, "polish_attempts": polished,
                "pdas_steps": S.pdas_steps, "working_set_solves": S.working_set_solves, "history": history}
        sol, rel = S.certify(cand, how, t_start, info)
        if sol is None:
            return None
        if best is None or rel < best[1]:
            best = (sol, rel)
        return sol if rel <= S.tol else None

    try:
        for ep in range(1, max_epochs + 1):
            epoch(state, A, cls, S.rng.permutation(contexts), S.off, mu, S.batch, keep=keep,
                  full=full_pass(ep - 1))
            if (full_pass(ep) if compiled_path else ep % REFRESH_EVERY == 0):
                state.refresh(A)
            if compiled_path and not full_pass(ep) and ep < max_epochs:
                continue  # compiled epochs cost about as much as the progress measures: read them every few
            pr = gap_progress(A, state.logits(), state.sq_norms(A), cls)
            history.append((time.perf_counter() - t_start, ep, pr.relative_gap_estimate))
            bar.update(pr, ep)
            if not np.isfinite(pr.dual):
                raise SolverError("structured: the dual iterates overflowed")
            # ---- non-separable data: the dual grows along a ray
            stuck = stuck + 1 if pr.margin <= 0 else 0
            if pr.margin > 0 or separable:
                ref_A = ref_dual = None
            elif stuck >= RAY_PATIENCE:
                if ref_A is None:
                    ref_A, ref_dual = A.copy(), pr.dual
                elif ep >= next_ray and \
                        pr.dual >= RAY_GROWTH ** (2 ** min(ray_misses, RAY_BACKOFF_MAX)) * max(ref_dual, 1e-300):
                    left = None if time_limit is None else time_limit - (time.perf_counter() - t_start)
                    bar.step(f"epoch {ep}: searching a Farkas ray (the dual grows)")
                    X = find_ray(cls, H, A - ref_A, time_limit=left)
                    ray = certify_ray(cls, H, X, inst) if X is not None else None
                    if ray is not None:
                        how = "verified exactly" if ray.exact else f"float residual {ray.residual:.1e}"
                        raise NotSeparable(f"structured: the dual is unbounded; Farkas ray with {ray.support} "
                                           f"non-zero entries ({how}): the data are not NTP-separable", ray)
                    ref_A, ref_dual = A.copy(), pr.dual
                    ray_misses, next_ray = ray_misses + 1, 2 * ep
            # ---- active-set polish once the active set settles
            active = (A < 0) & S.off
            settled = prev_active is not None and \
                np.count_nonzero(active != prev_active) <= POLISH_CHANGES * max(1, pr.active)
            early = pr.relative_gap_estimate < POLISH_BELOW or (inst.d < m and not compiled_path)
            # the working set needs neither a settled active set nor a small gap: it is tried at the first reading,
            # and again only once coordinate ascent has a positive margin (on data that are not separable its QP
            # is infeasible, and the ray search goes on)
            direct = (polished == 0 or pr.margin > 0) and S.working_set_first(active)
            if polish and ep >= next_polish and ((settled and early) or direct) and S.can_polish(active):
                bar.step(f"epoch {ep}: active-set polish ({pr.active} active)")
                S.from_working_set = False
                cand = S.polish(A, state)
                polished += 1
                next_polish = ep + POLISH_WAIT * 2 ** min(polished, 6)
                if cand is not None:
                    sol = finish(cand, "optimal (active-set polish)", ep)
                    if sol is not None:
                        return sol
                    S.refused()
            prev_active = active
            if pr.relative_gap_estimate <= next_certify or (failed and ep >= retry_at):
                sol = finish(A.copy(), "optimal", ep)
                if sol is not None:
                    return sol
                next_certify = min(next_certify, pr.relative_gap_estimate * 0.1)
                failed += 1
                retry_at = ep + min(CERTIFY_MAX_WAIT, 2 ** failed)
            if time_limit is not None and time.perf_counter() - t_start > time_limit:
                got = "" if best is None else f"; best certified relative gap {best[1]:.2e}"
                raise TimeLimitReached(f"structured: {cap_text(time_limit)} after {ep} epochs, before a "
                                       f"certificate within tol {S.tol:g}{got}", seconds=float(time_limit))
    finally:
        bar.close()
    got = "" if best is None else f"; best certified relative gap {best[1]:.2e}"
    err = BudgetSpent(f"structured: {budget_text(max_epochs, 'epochs')} without a certificate within tol "
                      f"{S.tol:g}{got}", spent=int(max_epochs), units="epochs")
    err.active = (A < 0) & S.off  # the margins coordinate ascent found active, (m, C): a working set's start
    raise err


__all__ = ["DEFAULT_TOL", "NotSeparable", "solve", "token_ray"]
