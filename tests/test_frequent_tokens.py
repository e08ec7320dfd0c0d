"""The frequent-token reduction of compatibility (ntpcert.pipeline.frequent_tokens) against the exact
null-space test, and its witnesses checked exactly."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.pipeline.exact_witness import compatibility_exact
from ntpcert.exact.modular import PRIMES
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline import parts
from ntpcert.exact.left_null import log_odds_sign
from ntpcert.certificate.checker.reduction import left_null_dimension_bound
from ntpcert.pipeline.frequent_tokens import reduce_compatibility
from ntpcert.rows.kesler import KeslerSystem


def _instance(rng, m, d, V, *, compatible_bias: bool) -> NTPInstance:
    """Small-integer embeddings (so kernels lift) with supports of 1 to 3 tokens; with
    ``compatible_bias`` the counts are powers of 2 of one integer law, which makes many instances compatible."""
    H = rng.integers(-1, 2, size=(m, d)).astype(float)
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, min(3, V) + 1)), replace=False)
        C[j, S] = 2 ** rng.integers(0, 2, size=S.size) if compatible_bias else rng.integers(1, 6, size=S.size)
    return NTPInstance.from_counts(H, C)


@pytest.mark.parametrize("bias", [False, True])
def test_reduction_agrees_with_the_exact_null_space_test(bias):
    rng = np.random.default_rng(7 + bias)
    seen = {True: 0, False: 0, None: 0}
    for _ in range(40):
        m, d, V = int(rng.integers(4, 14)), int(rng.integers(1, 4)), int(rng.integers(2, 6))
        inst = _instance(rng, m, d, V, compatible_bias=bias)
        system = KeslerSystem.build(inst)
        red = reduce_compatibility(system)
        exact = compatibility_exact(inst)
        seen[red.holds] += 1
        if red.holds is None:
            continue
        assert red.holds == exact.holds, red.why
        if red.holds is False:
            y = red.violating
            assert dm.exact_left_null(system, y) and log_odds_sign(system, y) != 0
        else:  # the basis spans the left null space: as many vectors as its exact dimension
            assert len(red.basis) == system.n_eq - exact.witness.rank
            for y in red.basis:
                assert dm.exact_left_null(system, y) and log_odds_sign(system, y) == 0
            assert left_null_dimension_bound(inst, PRIMES[0]) == len(red.basis)
    assert seen[True] >= 5 and seen[False] >= 5 and seen[None] <= 4, seen


def test_tokens_with_independent_contexts_put_no_constraint():
    """Every token follows at most d contexts whose embeddings are independent: no dependent token,
    (4) holds for any counts, with an empty reduced system."""
    H = np.eye(4)[[0, 1, 2, 3, 0]] + np.eye(4)[[1, 2, 3, 0, 2]]
    C = [[1, 2, 0, 0, 0], [0, 3, 5, 0, 0], [0, 0, 7, 1, 0], [0, 0, 0, 2, 9], [4, 0, 0, 0, 1]]
    inst = NTPInstance.from_counts(H, C)
    red = reduce_compatibility(KeslerSystem.build(inst))
    assert red.holds is True and red.basis == [] and red.dependent == ()
    assert compatibility_exact(inst).holds is True


def test_a_token_shared_by_dependent_contexts_gives_the_violating_vector():
    """Contexts 0, 1 and 2 have h_2 = h_0 + h_1 and hold tokens 0 and 1 with log-odds 0, 0 and log 2:
    not compatible; the vector found is checked exactly and is supported on those contexts only."""
    H = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, -1.0]]
    C = [[1, 1, 0], [1, 1, 0], [1, 2, 0], [0, 1, 1]]
    inst = NTPInstance.from_counts(H, C)
    system = KeslerSystem.build(inst)
    red = reduce_compatibility(system)
    assert red.holds is False and set(red.dependent) == {0, 1}
    assert set(system.eq_context[np.flatnonzero(red.violating)].tolist()) == {0, 1, 2}
    assert compatibility_exact(inst).holds is False


def test_large_sparse_system_is_decided_by_the_reduction(monkeypatch):
    """Above GRAM_MAX_ROWS the engine used to stop; it now reduces to the dependent tokens."""
    rng = np.random.default_rng(3)
    monkeypatch.setattr(dm, "GRAM_MAX_ROWS", 5)
    monkeypatch.setattr(parts, "PART_MIN_CONTEXTS", 10 ** 9)
    for _ in range(10):
        inst = _instance(rng, 12, 2, 4, compatible_bias=False)
        system = KeslerSystem.build(inst)
        if system.n_eq <= 5:
            continue
        dec = dm.decide_compatibility(system)
        exact = compatibility_exact(inst)
        assert dec.holds is None or dec.holds == exact.holds
        if dec.holds is not None:
            assert dec.engine in ("frequent-tokens", "frequent-tokens-null-vector", "pair-null-vector",
                                  "particular-solutions")


def test_reduction_certificate_verifies_and_its_forgeries_fail(monkeypatch):
    """h_0 + h_1 = h_2 and the log-odds of tokens 1 over 0 are log 2, log 3, log 6: one null direction with
    y^T b = 0, so compatible; the certificate's basis and bound are re-checked by verify."""
    import copy

    from ntpcert.certificate.checker import verify_certificate
    from ntpcert.certificate.jsonio import seal
    from ntpcert.pipeline.exact_verdicts import exact_certify

    monkeypatch.setattr(dm, "GRAM_MAX_ROWS", 1)
    monkeypatch.setattr(parts, "PART_MIN_CONTEXTS", 10 ** 9)
    inst = NTPInstance.from_counts([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[1, 2], [1, 3], [1, 6]])
    assert dm.decide_compatibility(KeslerSystem.build(inst)).engine == "frequent-tokens"
    rep = exact_certify(inst, svm=False)
    assert rep.check.valid, rep.check.reason
    comp = rep.certificate["compatibility"]
    assert comp["claim"] is True and comp["frequent_tokens_modulus"] == PRIMES[0]
    assert len(comp["null_space_basis"]) == 1 and comp["dim_F"] == 2

    def bad(edit, needle):
        out = copy.deepcopy(rep.certificate)
        edit(out["compatibility"])
        verdict = verify_certificate(seal(out))
        assert not verdict.valid and needle in verdict.reason, verdict.reason

    def drop(c):
        c["null_space_basis"], c["dim_F"] = [], 3
    bad(drop, "leaves 1 null directions, the basis has 0 vectors")

    def not_prime(c):
        c["frequent_tokens_modulus"] = 2147483646
    bad(not_prime, "frequent_tokens_modulus: expected a prime 2 <= p < 2^63")

    def twice(c):  # two copies of one vector: dependent, and dim_F one lower
        c["null_space_basis"], c["dim_F"] = c["null_space_basis"] * 2, 1
    bad(twice, "dependent")


def test_a_skipped_bracket_never_advises_the_command_that_skipped_it():
    from ntpcert.pipeline.excess_certificate import AUTO_MAX_CELLS, EXPLAIN_MAX_CELLS, skipped_bracket_text

    from_explain = skipped_bracket_text(EXPLAIN_MAX_CELLS + 1, EXPLAIN_MAX_CELLS)  # what explain says
    assert "ntpcert explain" not in from_explain and "float_bracket" in from_explain
    from_certify = skipped_bracket_text(AUTO_MAX_CELLS + 1, AUTO_MAX_CELLS)  # certify: explain's cap admits it
    assert "ntpcert explain DATA" in from_certify
    too_big_for_both = skipped_bracket_text(EXPLAIN_MAX_CELLS + 1, AUTO_MAX_CELLS)
    assert "ntpcert explain" not in too_big_for_both
