"""The NTP-SVM's optimum exactly (:mod:`ntpcert.exact.svm_kkt`): `certify --exact` closes the gap to 0 with a
rational KKT pair that both checkers verify, refuses nothing it should keep, and falls back to the positive
gap, saying why, where the active set's system is singular or too large."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.exact.svm_kkt import zero_gap_bound
from ntpcert.experiments.strategies import ntp_instances
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.svm import solve_svm

from .standalone import standalone


def _both(text: str) -> bool:
    return verify_text(text).valid and standalone(text)[0]


def test_twenty_instances_of_the_strategies_families_get_gap_exactly_0():
    zero, fallback = [], []

    @settings(max_examples=150, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(ntp_instances(max_m=6, max_d=6, max_V=5, embedding="gaussian", distribution="counts")
           | ntp_instances(max_m=6, max_d=6, max_V=5, embedding="integer", distribution="fractions")
           | ntp_instances(max_m=6, max_d=6, max_V=5, embedding="low-rank", distribution="counts"))
    def run(inst):
        rep = exact_certify(inst, zero_gap=True)
        if not (rep.separable.holds and rep.svm is not None):
            return
        text = jsonio.dumps(rep.certificate, reseal=False)
        assert _both(text), "a certificate both checkers must accept"
        if rep.certificate["svm"]["gap"] == "0":
            assert rep.svm.relative_gap == 0.0 and rep.svm.distance_bound == 0.0
            note = rep.to_json()["svm"]["exact"]["zero_gap"]  # None: the solver's own bound was 0 already
            assert note is None or note.startswith("exact KKT")
            zero.append(inst.fingerprint())
        else:
            assert "the positive gap stands" in rep.svm_zero_gap
            fallback.append(rep.svm_zero_gap)

    run()
    assert len(set(zero)) >= 20, (len(set(zero)), fallback)


def test_the_exact_pair_is_the_qp_solution_and_a_forged_one_is_refused():
    rng = np.random.default_rng(4)
    from tests.conftest import random_instance

    inst = random_instance(rng, m=5, d=6, V=4, kmin=1, kmax=3)
    rep = exact_certify(inst, zero_gap=True)
    assert rep.separable.holds and rep.certificate["svm"]["gap"] == "0"
    W = rep.svm.W()
    ref = solve_svm(KeslerSystem.build(inst), solver="clarabel")
    assert np.abs(W - ref.W).max() <= 1e-6 * max(1.0, np.abs(ref.W).max())
    text = jsonio.dumps(rep.certificate, reseal=False)
    assert _both(text)
    forged = jsonio.loads(text)
    entry = forged["svm"]["a_sparse"][0]
    entry[2] = "0" if entry[2] != "0" else "1"  # one dual entry moved: the gap is no longer the claimed 0
    bad = jsonio.dumps(forged, reseal=True)
    assert not verify_text(bad).valid and not standalone(bad)[0]


def test_a_system_past_the_budget_keeps_the_positive_gap_and_says_why():
    from tests.conftest import random_instance

    inst = random_instance(np.random.default_rng(5), m=5, d=6, V=4, kmin=1, kmax=3)
    sol = solve_svm(KeslerSystem.build(inst))
    bound, why = zero_gap_bound(inst, sol.dual, max_unknowns=3)
    assert bound is None and "more than 3" in why
    bound, why = zero_gap_bound(inst, sol.dual)
    assert bound is not None and bound.gap == 0 and why.startswith("exact KKT")


@pytest.mark.parametrize("scale", [1.0, 2.0 ** -20])
def test_the_pair_scales_with_the_embeddings(scale):
    """W^mm of c H is W^mm(H) / c: the exact pairs agree, entry by entry, in rationals."""
    from fractions import Fraction

    from tests.conftest import random_instance

    inst = random_instance(np.random.default_rng(6), m=4, d=5, V=4, kmin=1, kmax=2)
    from ntpcert import NTPInstance

    scaled = NTPInstance.from_counts(inst.embeddings * scale, inst.counts)
    a = zero_gap_bound(inst, solve_svm(KeslerSystem.build(inst)).dual)[0]
    b = zero_gap_bound(scaled, solve_svm(KeslerSystem.build(scaled)).dual)[0]
    assert a is not None and b is not None
    wa = {(v, i): x for v, i, x in a.W_delta}
    wb = {(v, i): x for v, i, x in b.W_delta}
    assert wa.keys() == wb.keys() and all(wb[k] == wa[k] / Fraction(scale) for k in wa)


def test_the_command_line_asks_for_it_and_refuses_it_without_exact(tmp_path, capsys):
    import json

    from ntpcert.cli import main
    from tests.conftest import random_instance

    inst = random_instance(np.random.default_rng(4), m=5, d=6, V=4, kmin=1, kmax=3)
    path = tmp_path / "d.npz"
    np.savez(path, embeddings=inst.embeddings, counts=inst.counts)
    cert = tmp_path / "c.json"
    assert main(["certify", str(path), "--exact", "--zero-gap", "--json", "--certificate-out", str(cert)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["svm"]["exact"]["gap"] == "0" and out["svm"]["exact"]["zero_gap"].startswith("exact KKT")
    assert main(["verify", str(cert)]) == 0
    assert "VALID" in capsys.readouterr().out
    assert main(["certify", str(path), "--exact", "--json"]) == 0  # without it: the positive gap, as before
    assert json.loads(capsys.readouterr().out)["svm"]["exact"]["gap"] != "0"
    assert main(["certify", str(path), "--zero-gap"]) == 2
    assert "--zero-gap" in capsys.readouterr().err
