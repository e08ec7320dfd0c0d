"""Verdicts, engines and certificates do not depend on the machine's load: every engine's default bound is a
budget of work (docs/undetermined.md). A user's cap in seconds stays available, off by default, and says so
when it ends a run; a spent budget of work says so in its own words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ntpcert import certify, exact_certify
from ntpcert.errors import BudgetSpent, TimeLimitReached
from ntpcert.experiments.sweep import GridPoint, point_instance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.svm import auto, solve_svm

#: An ill-conditioned small QP: the structured solver certified its NTP-SVM after 115 epochs (about 1.5 s of
#: the 2-core machine), near where ``auto`` used to hand it to Clarabel after 3 s. With that limit, one
#: run at load 7 gave "structured", the next one with four busy loops beside it "auto/clarabel", and the
#: two certificates differed; counted in epochs, both give the same. Since the polish goes to the working set
#: after its first stalled attempt (``WORKING_SET_AFTER``), it certifies after 14 epochs, in that attempt.
SLOW_SVM = GridPoint(16, 8, 6, 2, "gaussian", 1)
#: A smaller one (190 epochs of m = 6), for the checks of the messages.
SMALL = GridPoint(6, 4, 4, 2, "gaussian", 1)


def _busy(n: int) -> list[subprocess.Popen]:
    """``n`` CPU-bound processes (a busy loop each), started now."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def _run(inst):
    rep = exact_certify(inst)
    return rep, json.dumps(rep.certificate, sort_keys=True)


def test_the_same_verdicts_engines_and_certificate_alone_and_under_load():
    inst = point_instance(SLOW_SVM, 0)
    system = KeslerSystem.build(inst)
    epochs = auto.small_epochs(system)
    t0 = time.perf_counter()
    quiet, quiet_json = _run(inst)
    quiet_seconds = time.perf_counter() - t0
    procs = _busy(2 * max(2, os.cpu_count() or 2))
    try:
        time.sleep(0.2)  # the busy loops are running before the second run starts
        t0 = time.perf_counter()
        loaded, loaded_json = _run(inst)
        loaded_seconds = time.perf_counter() - t0
        assert all(p.poll() is None for p in procs), "the busy loops ran during the whole second run"
    finally:
        _stop(procs)
    # the structured solver's first try certifies it within its budget of work, after more than a handful of
    # epochs, by the working set after a polish whose active-set steps stalled
    svm = quiet.float_report.svm
    assert svm is not None and svm.solver == "structured", (svm and svm.solver, quiet.float_report.svm_error)
    assert 10 <= svm.info["epochs"] <= epochs and svm.info["working_set_solves"] == 1
    assert "svm" in quiet.certificate
    for key in ("compatible", "separable"):
        a, b = getattr(quiet, key), getattr(loaded, key)
        assert (a.holds, a.engine) == (b.holds, b.engine), key
    assert loaded.float_report.svm.solver == svm.solver
    assert loaded.float_report.svm.info["epochs"] == svm.info["epochs"]
    assert loaded_json == quiet_json, f"certificates differ (quiet {quiet_seconds:.1f} s, loaded {loaded_seconds:.1f} s)"


def test_the_float_reports_witnesses_are_identical_under_load():
    """The float pipeline, forced onto the structured solver for separability: the same witness text and
    the same feasible point, bit for bit."""
    inst = point_instance(SMALL, 0)
    first = certify(inst, use_lemma1=False, separability_solver="structured")
    procs = _busy(max(2, os.cpu_count() or 2))
    try:
        again = certify(inst, use_lemma1=False, separability_solver="structured")
    finally:
        _stop(procs)
    assert first.separable.engine == again.separable.engine == "structured-point"
    assert first.separable.reason == again.separable.reason
    assert first.separable.witness.W.tobytes() == again.separable.witness.W.tobytes()
    assert first.svm.solver == again.svm.solver and first.svm.W.tobytes() == again.svm.W.tobytes()


def test_a_tiny_user_cap_leaves_the_verdict_undetermined_naming_the_cap():
    inst = point_instance(SMALL, 0)
    rep = certify(inst, svm=False, use_lemma1=False, separability_solver="structured", separability_time_limit=1e-9)
    assert rep.separable.holds is None  # (with the NTP-SVM asked for, its point would settle it: no cap there)
    assert "time limit of 1e-09 s reached (a user's cap)" in rep.separable.reason
    with pytest.raises(TimeLimitReached, match=r"time limit of 1e-09 s reached \(a user's cap\)"):
        solve_svm(inst, solver="structured", time_limit=1e-9)
    with pytest.raises(TimeLimitReached, match=r"a user's cap"):
        solve_svm(inst, solver="auto", time_limit=1e-9)  # a user's cap ends auto too: no fallback


def test_the_default_has_no_time_cap_and_a_tiny_work_budget_says_so():
    inst = point_instance(SMALL, 0)
    with pytest.raises(BudgetSpent, match=r"budget of 3 epochs spent") as err:
        solve_svm(inst, solver="structured", max_epochs=3)
    assert err.value.spent == 3 and err.value.units == "epochs" and "time limit" not in str(err.value)
    rep = certify(inst, use_lemma1=False, separability_solver="structured", separability_max_epochs=1,
                  svm_work=1)
    # the separability decision falls back to HiGHS, saying what stopped the structured solver
    assert rep.separable.holds is True and "budget of 1 epochs spent" in rep.separable.reason
    assert rep.svm is not None  # auto on a small QP: one epoch, then Clarabel (its own iteration budget)


def test_a_spent_budget_leaves_the_verdict_undetermined_naming_what_settles_it(monkeypatch):
    from ntpcert.pipeline import decide

    monkeypatch.setattr(decide, "HIGHS_FALLBACK_VARS", 0)  # no HiGHS after the structured solver: its
    monkeypatch.setattr(decide, "HIGHS_RAY_MAX_ENTRIES", 0)  # budget alone decides
    inst = point_instance(SMALL, 0)
    dec, solve = decide.decide_separability(KeslerSystem.build(inst), separability_solver="structured",
                                            max_epochs=1)
    assert dec.holds is None
    assert "budget of 1 epochs spent" in dec.reason and "separability_max_epochs" in dec.reason
    assert "--separability-solver highs" in dec.reason
    assert "too large to try here (V·m = 24 entries, more than HIGHS_RAY_MAX_ENTRIES = 0)" in dec.reason


def _one_hot_pairs(seed: int):
    """Contexts embedded as one-hot pairs (e_x, e_y) with random supports: neither compatible nor
    separable (seed 1: a Farkas ray on 12 contexts, a violating null vector with 10 non-zeros)."""
    import numpy as np

    from ntpcert import NTPInstance

    rng = np.random.default_rng(seed)
    m, V, a, b = 40, 5, 4, 4
    pairs = sorted(set((int(rng.integers(a)), int(rng.integers(b))) for _ in range(m)))
    H = np.zeros((len(pairs), a + b))
    for j, (x, y) in enumerate(pairs):
        H[j, x] = H[j, a + y] = 1.0
    C = (rng.random((len(pairs), V)) < 0.4).astype(np.int64) * rng.integers(1, 5, (len(pairs), V))
    C[np.arange(len(pairs)), rng.integers(V, size=len(pairs))] += 1
    return NTPInstance.from_counts(H, C)


def test_the_explain_filters_stop_at_their_budget_of_work():
    from ntpcert.pipeline.explain import explain
    from ntpcert.pipeline.explain.compatibility import why_not_compatible
    from ntpcert.pipeline.explain.separability import why_not_separable

    inst = _one_hot_pairs(1)
    exp = explain(inst, excess=False)
    sep, comp = exp.why_not_separable, exp.why_not_compatible
    assert sep.irreducible and comp.irreducible and sep.decisions >= 2 and comp.tries >= 2
    # exactly the work a filter used suffices, and one unit less does not: the budget counts work, not time
    n = why_not_separable(inst, sep.ray).decisions
    same = why_not_separable(inst, sep.ray, max_decisions=n)
    assert same.irreducible and same.contexts == sep.contexts and same.decisions == n
    short = why_not_separable(inst, sep.ray, max_decisions=n - 1)
    assert short.irreducible is None and short.decisions == n - 1
    assert f"budget of {n - 1} sub-problems decided spent" in short.note
    violating = dict(zip(comp.rows, comp.y))
    same = why_not_compatible(inst, violating, max_tries=comp.tries)
    assert same.irreducible and same.rows == comp.rows
    short = why_not_compatible(inst, violating, max_tries=comp.tries - 1)
    assert short.tries == comp.tries - 1 and f"budget of {comp.tries - 1} equations tried spent" in short.note
    # (this start is a cycle already: its final rank test still proves it irreducible, with the note)
    capped = why_not_separable(inst, sep.ray, time_limit=1e-9)
    assert capped.irreducible is None and "time limit of 1e-09 s reached (a user's cap)" in capped.note
