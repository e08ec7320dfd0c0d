"""The one verdict type (:mod:`ntpcert.verdict`): a closed set of witnesses, each checked exactly."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert import verdict as vd
from ntpcert.pipeline.decide import decide_compatibility, decide_separability
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.exact_witness import compatibility_exact
from ntpcert.pipeline.float_verdicts import certify
from ntpcert.rows.kesler import KeslerSystem


def _toy_not_separable() -> NTPInstance:
    """Two contexts with the same embedding and disjoint supports: no W separates them."""
    h = np.array([[1.0, 2.0], [1.0, 2.0]])
    return NTPInstance.from_counts(h, [[3, 0, 0], [0, 2, 0]])


def _toy_not_compatible() -> NTPInstance:
    """Same embedding, same support, different log-odds: (4) has no solution."""
    h = np.array([[1.0, 2.0, -1.0], [1.0, 2.0, -1.0]])
    return NTPInstance.from_counts(h, [[1, 2, 0], [1, 3, 0]])


def test_a_witness_kind_cannot_be_defined_outside_the_module():
    with pytest.raises(TypeError, match="closed"):
        class Guess(vd.Witness):  # noqa: F841
            pass
    with pytest.raises(TypeError, match="closed"):
        type("Guess", (vd.FarkasRay,), {})


def test_a_verdict_refuses_any_other_witness():
    @dataclasses.dataclass(frozen=True)
    class LooksLikeOne:
        engine: str = "lemma1"
        text: str = "trust me"
        SHOWS = True

    with pytest.raises(TypeError, match="unknown witness kind LooksLikeOne"):
        vd.Verdict(True, LooksLikeOne())
    with pytest.raises(TypeError, match="unknown witness kind"):
        vd.Verdict(True, "lemma1")


def test_the_kind_fixes_holds_and_the_engines():
    ray = {(0, 0): Fraction(1)}
    with pytest.raises(ValueError, match="shows holds=False"):
        vd.Verdict(True, vd.FarkasRay(ray, "pair-farkas"))
    with pytest.raises(ValueError, match="shows holds=None"):
        vd.Verdict(False, vd.Undetermined("no idea"))
    with pytest.raises(ValueError, match="unknown engine 'lemma1'"):
        vd.FarkasRay(ray, "lemma1")
    with pytest.raises(ValueError, match="no engine"):
        vd.Undetermined("why", engine="lemma1")
    assert vd.FeasiblePoint(np.zeros((2, 2)), "svm-point:clarabel").engine == "svm-point:clarabel"
    assert set(vd.WITNESS_KINDS) == {vd.NoEquations, vd.EmbeddingsFullRank, vd.FullRowRank, vd.NullSpaceBasis,
                                     vd.ParticularSolutions, vd.ViolatingNullVector, vd.FeasiblePoint, vd.FarkasRay,
                                     vd.SplitCertificate, vd.Undetermined}


def test_a_verdict_is_not_a_bool():
    with pytest.raises(TypeError, match="verdict.holds"):
        bool(vd.Verdict.undetermined("why"))


def test_witnesses_check_themselves_and_refuse_forgeries():
    inst = _toy_not_separable()
    sep, _ = decide_separability(KeslerSystem.build(inst))
    assert sep.holds is False and isinstance(sep.witness, vd.FarkasRay) and sep.check(inst) == ""
    forged = {k: -v for k, v in sep.witness.ray.items()}
    assert vd.FarkasRay(forged, "highs-farkas").check(inst) != ""
    assert vd.FarkasRay({(5, 0): Fraction(1)}, "highs-farkas").check(inst) == "index (5, 0) out of range"

    inst = _toy_not_compatible()
    comp = decide_compatibility(KeslerSystem.build(inst))
    assert comp.holds is False and isinstance(comp.witness, vd.ViolatingNullVector) and comp.check(inst) == ""
    doubled = {k: 2 * v for k, v in comp.witness.y.items()}
    assert vd.ViolatingNullVector(doubled, "null-vector").check(inst) == ""  # still a violating null vector
    one_row = dict(list(comp.witness.y.items())[:1])
    assert vd.ViolatingNullVector(one_row, "null-vector").check(inst) == "A_eq^T y != 0"
    # the same null vector on compatible counts has y^T b = 0
    same = NTPInstance.from_counts(inst.embeddings, [[1, 2, 0], [1, 2, 0]])
    assert vd.ViolatingNullVector(comp.witness.y, "null-vector").check(same) == "y^T b is 0 or undecided"
    exact = compatibility_exact(same)
    assert exact.holds is True and exact.engine == "exact-null-space" and exact.check(same) == ""
    assert vd.NullSpaceBasis(exact.witness.basis, exact.witness.rank, None, "exact-null-space").check(inst) != ""


def test_a_float_point_is_made_exact_by_one_method():
    inst = NTPInstance.from_counts(np.eye(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    W = 2.0 * np.eye(3)
    made = vd.Verdict(True, vd.FeasiblePoint(W, "highs-point", "a float point"))
    assert not made.is_exact and made.check(inst) != ""
    ex = made.exact(inst)
    assert ex.holds is True and ex.is_exact and ex.engine == "exact-point" and ex.check(inst) == ""
    bad = vd.Verdict(True, vd.FeasiblePoint(-W, "highs-point", "not a feasible point")).exact(inst)
    assert bad.holds is None and "not exact" in bad.reason
    lemma = vd.Verdict(False, vd.FarkasRay({(0, 0): Fraction(1)}, "pair-farkas"))
    assert lemma.exact(inst) is lemma  # exact as found: the same verdict


def test_float_and_exact_reports_share_the_type_and_the_vocabulary():
    inst = _toy_not_separable()
    rep, ex = certify(inst, svm=False), exact_certify(inst, svm=False)
    for v in (rep.compatible, rep.separable, ex.compatible, ex.separable, ex.compatibility, ex.separability):
        assert type(v) is vd.Verdict
    assert ex.check.valid and ex.separable.holds is False and ex.separable.engine == rep.separable.engine
    for key in ("compatible", "separable"):
        for out in (rep.to_json()[key], ex.to_json()[key]):
            assert {"holds", "engine", "witness", "reason"} <= set(out) and "by" not in out
    assert ex.to_json()["separable"]["witness"] == "farkas-ray"


def test_a_refused_certificate_leaves_the_reported_verdicts_undetermined():
    inst = _toy_not_separable()
    ex = exact_certify(inst, svm=False)
    refused = dataclasses.replace(ex, check=dataclasses.replace(ex.check, valid=False, reason="forged"))
    assert refused.separable.holds is None and "forged" in refused.separable.reason
    assert refused.separability.holds is False  # the verdict as made is kept apart


def test_structured_means_the_structured_solver_alone(monkeypatch):
    """``--separability-solver structured`` no longer asks HiGHS first on small instances; ``auto`` does."""
    from ntpcert.solve import separability_lp

    calls = []
    real = separability_lp.check_separability
    monkeypatch.setattr(separability_lp, "check_separability", lambda *a, **k: calls.append(1) or real(*a, **k))
    inst = NTPInstance.from_counts(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), [[2, 1, 0], [0, 1, 0], [1, 0, 3]])
    system = KeslerSystem.build(inst)
    auto, _ = decide_separability(system, separability_solver="auto")
    assert calls and auto.holds is not None and auto.engine.startswith("highs")
    calls.clear()
    alone, _ = decide_separability(system, separability_solver="structured")
    assert not calls and alone.holds == auto.holds and not str(alone.engine).startswith("highs")
    assert alone.exact(inst).check(inst) == ""  # its witness, made exact, checks


def test_the_command_line_offers_the_library_choices_and_default():
    from ntpcert.cli import options
    from ntpcert.pipeline import decide

    assert options.SEPARABILITY_SOLVERS == decide.SEPARABILITY_SOLVERS
    assert options.SEPARABILITY_SOLVERS[0] == decide.DEFAULT_SEPARABILITY_SOLVER


def test_make_it_exact_is_one_method_of_the_witness():
    inst = NTPInstance.from_counts(np.eye(3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    w = vd.FeasiblePoint(2.0 * np.eye(3), "structured-point", "a float point")
    made = w.to_exact(inst)
    assert isinstance(made, vd.FeasiblePoint) and made.is_exact and made.check(inst) == ""
    assert made.to_exact(inst) is made
    rank = vd.FullRowRank(0, None, "float-rank", "eigenvalues above the rounding bound")
    assert isinstance(rank.to_exact(inst), vd.Undetermined) and "not exact" in rank.to_exact(inst).text


def test_a_verdicts_repr_is_one_short_line_whatever_its_witness():
    from fractions import Fraction

    from ntpcert.verdict import FarkasRay, Verdict

    ray = {(v, j): Fraction(10 ** 40 + v, 3) for v in range(30) for j in range(30)}  # 900 long rationals
    v = Verdict(False, FarkasRay(ray, "pair-farkas", "a ray on one pair " * 20))
    text = repr(v)
    assert len(text) < 200 and "\n" not in text
    assert "holds=False" in text and "pair-farkas" in text and "FarkasRay" in text
    assert len(v.witness.ray) == 900  # the witness keeps everything
