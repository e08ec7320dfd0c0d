"""Compatibility (4) of tall systems (more equality rows than the columns they use) by one exact
particular solution per prime: agreement with the null-space test, the certificate variant
``particular_solutions``, and its forgeries."""

from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_certificate
from ntpcert.exact.compatibility import check_compatibility_by_columns, eq_rows, exact_null_space
from ntpcert.exact.rational import fraction_str
from ntpcert.instance.datasets.compatible import integer_log_odds
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.exact_witness import compatibility_exact
from ntpcert.verdict import ParticularSolutions, Verdict


def spoil(inst: NTPInstance, rng: np.random.Generator) -> NTPInstance:
    """Multiply one in-support count of a context with at least two tokens by 5."""
    C = np.array(inst.counts)
    j = next(j for j in rng.permutation(inst.m) if np.count_nonzero(C[j]) > 1)
    C[j, np.flatnonzero(C[j])[0]] *= 5
    return NTPInstance.from_counts(inst.embeddings, C)


@pytest.mark.parametrize("seed", range(12))
def test_agrees_with_the_null_space_test(seed):
    rng = np.random.default_rng(seed)
    m, d, V = int(rng.integers(40, 120)), int(rng.integers(1, 4)), int(rng.integers(2, 5))
    inst = integer_log_odds(rng, m, d, V, gaussian=seed % 3 == 0)
    full = exact_null_space(inst)
    tall = check_compatibility_by_columns(inst)
    assert full.violating is None and compatibility_exact(inst).holds is True
    if tall is None:  # not tall (few rows used): nothing to compare
        assert len(eq_rows(inst)) <= V * d
        return
    # a result (not None) proves (4): one particular solution per prime, no null-space basis
    rank, particular = tall
    assert rank == full.rank
    assert Verdict.of(ParticularSolutions(particular, rank)).check(inst) == ""
    # each R_p solves A_eq vec(R_p) = E_p, recomputed here in Fractions from the data
    primes = dict(zip(full.primes, range(len(full.primes))))
    for k, (j, z, a) in enumerate(eq_rows(inst)):
        h = [Fraction(float(x)) for x in inst.embeddings[j]]
        for p, q in primes.items():
            R = particular[p]
            lhs = sum(h[i] * (R.get((z, i), 0) - R.get((a, i), 0)) for i in range(inst.d))
            assert lhs == full.E[k, q]
    bad = spoil(inst, rng)
    if compatibility_exact(bad).holds is False:
        assert check_compatibility_by_columns(bad) is None  # left to the null-space test's violating y


def _tall_certificate():
    inst = integer_log_odds(np.random.default_rng(5), 80, 3, 4)
    rep = exact_certify(inst, svm=False, excess=False)
    assert rep.compatibility.engine == "particular-solutions"
    return inst, rep


def test_certificate_carries_particular_solutions_and_checks():
    inst, rep = _tall_certificate()
    assert rep.check.valid and rep.compatible.holds is True
    sec = rep.certificate["compatibility"]
    assert sec["null_space_basis"] == [] and set(sec["particular_solutions"]) == {"2", "3"}
    assert sec["dim_F"] == exact_null_space(inst).rank == compatibility_exact(inst).witness.rank
    assert any("A_eq vec(R_p) = E_p exactly for 2 primes" in c for c in rep.check.checks)


def _forged(edit) -> str:
    _, rep = _tall_certificate()
    cert = copy.deepcopy(rep.certificate)
    cert.pop("checksum")
    edit(cert["compatibility"])
    v = verify_certificate(jsonio.seal(cert))
    assert not v.valid
    return v.reason


def _bump_entry(sec):
    entry = sec["particular_solutions"]["3"][0]
    entry[2] = fraction_str(Fraction(entry[2]) + 1)


def test_forged_particular_solutions_are_refused():
    assert "is not the exponent of 3" in _forged(_bump_entry)
    assert "need [2, 3]" in _forged(lambda s: s["particular_solutions"].pop("2"))
    assert "rank A_eq" in _forged(lambda s: s.update(dim_F=s["dim_F"] + 1))
    assert "empty null_space_basis" in _forged(lambda s: s.update(null_space_basis=[[[0, 1, "1"]]]))
    assert "no W_star" in _forged(lambda s: s.update(W_star={"coefficients": {}}))  # it would go unchecked
    assert "outside" in _forged(lambda s: s["particular_solutions"]["2"].append([99, 0, "1"]))


def test_equal_counts_give_w_star_zero_without_a_gram_matrix(tmp_path, capsys):
    from ntpcert.cli.app import main
    from ntpcert.instance.io import write_npz

    rng = np.random.default_rng(4)
    inst = integer_log_odds(rng, 200, 3, 3, gaussian=True)  # b = 0
    path = tmp_path / "eq.npz"
    write_npz(inst, path)
    assert main(["certify", str(path), "--exact", "--no-svm"]) == 0
    out = capsys.readouterr().out
    assert "every count ratio is 1 (b = 0), so W = 0 solves (4)" in out and "W* = 0" in out


def test_tall_incompatible_data_still_get_a_violating_vector():
    rng = np.random.default_rng(2)
    inst = spoil(integer_log_odds(rng, 80, 2, 3), rng)
    rep = exact_certify(inst, svm=False, excess=False)
    assert rep.check.valid and rep.compatible.holds is False
    assert "violating_null_vector" in rep.certificate["compatibility"]
