"""ntpcert.experiments.strategies: bounds are respected, invalid arguments are refused by name, and shrinking ends
at small readable counterexamples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ntpcert import NTPInstance
from ntpcert.experiments import strategies as nst
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.decide import decide_separability

#: For find(): enough tries to hit a rare counterexample, no deadline, no example database.
FIND = settings(max_examples=2000, deadline=None, database=None, suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------------------- invalid arguments
INVALID = [
    (nst.ntp_instances, dict(min_m=0), "min_m=0"),
    (nst.ntp_instances, dict(min_m=3, max_m=2), "max_m=2"),
    (nst.ntp_instances, dict(max_d=1.5), "max_d=1.5"),
    (nst.ntp_instances, dict(min_d=True), "min_d=True"),
    (nst.ntp_instances, dict(min_V=1), "min_V=1"),
    (nst.ntp_instances, dict(min_k=0), "min_k=0"),
    (nst.ntp_instances, dict(min_k=3, max_k=2), "max_k=2"),
    (nst.ntp_instances, dict(min_k=4, max_V=4), "min_k=4"),
    (nst.ntp_instances, dict(min_k=5, max_V=4, standing_assumption=False), "min_k=5"),
    (nst.ntp_instances, dict(overlap="some"), "overlap='some'"),
    (nst.ntp_instances, dict(overlap="disjoint", min_m=3, min_k=2, max_V=4), "overlap='disjoint'"),
    (nst.ntp_instances, dict(embedding="uniform"), "embedding='uniform'"),
    (nst.ntp_instances, dict(distribution="logits"), "distribution='logits'"),
    (nst.ntp_instances, dict(max_count=0), "max_count=0"),
    (nst.ntp_instances, dict(max_abs=0), "max_abs=0"),
    (nst.ntp_instances, dict(standing_assumption=1), "standing_assumption=1"),
    (nst.support_masks, dict(m=0, V=3), "m=0"),
    (nst.support_masks, dict(m=2, V=1), "V=1"),
    (nst.support_masks, dict(m=2, V=3, max_k=4), "max_k=4"),
    (nst.support_masks, dict(m=3, V=5, min_k=2, overlap="disjoint"), "overlap='disjoint'"),
    (nst.embeddings, dict(m=2, d=0), "d=0"),
    (nst.embeddings, dict(m=2, d=2, family="sphere"), "family='sphere'"),
    (nst.embeddings, dict(m=2, d=3, family="low-rank", rank=3), "rank=3"),
    (nst.embeddings, dict(m=2, d=3, family="integer", rank=1), "rank=1"),
    (nst.embeddings, dict(m=2, d=3, allow_zero_rows="yes"), "allow_zero_rows='yes'"),
    (nst.counts, dict(mask=np.array([[True, False], [False, False]])), "empty row 1"),
    (nst.counts, dict(mask=np.ones((2, 2), dtype=bool), max_count=-1), "max_count=-1"),
    (nst.probabilities, dict(mask=[[1, 0]]), "boolean"),
    (nst.probabilities, dict(mask=np.ones((1, 2), dtype=bool), exact="no"), "exact='no'"),
]


@pytest.mark.parametrize(("strategy", "kwargs", "needle"), INVALID,
                         ids=[f"{s.__name__}-{n}" for s, _, n in INVALID])
def test_invalid_arguments_are_refused_naming_argument_and_value(strategy, kwargs, needle):
    with pytest.raises(InvalidArgument) as info:
        strategy(**kwargs)
    assert needle in str(info.value)


def test_bounds_are_keyword_only():
    with pytest.raises(TypeError):
        nst.ntp_instances(1, 3)  # type: ignore[misc]
    with pytest.raises(TypeError):
        nst.support_masks(2, 3)  # type: ignore[misc]


# ---------------------------------------------------------------------------- what is drawn
@given(st.data())
def test_instances_respect_their_bounds(data):
    lo_m, lo_d, lo_V = (data.draw(st.integers(1, 3)) for _ in range(3))
    lo_V += 1
    hi_m, hi_d, hi_V = lo_m + 2, lo_d + 2, lo_V + 2
    lo_k = data.draw(st.integers(1, lo_V - 1))
    hi_k = data.draw(st.integers(lo_k, hi_V))
    inst = data.draw(nst.ntp_instances(min_m=lo_m, max_m=hi_m, min_d=lo_d, max_d=hi_d, min_V=lo_V, max_V=hi_V,
                                       min_k=lo_k, max_k=hi_k))
    assert isinstance(inst, NTPInstance)
    assert lo_m <= inst.m <= hi_m and lo_d <= inst.d <= hi_d and lo_V <= inst.V <= hi_V
    k = inst.support_sizes
    # the standing assumption may remove one token from the first support, never below 1
    assert k.min() >= 1 and k.max() <= hi_k
    assert np.all(k[1:] >= lo_k) and k[0] >= lo_k - 1
    assert k.min() < inst.V
    assert np.all(inst.embeddings.any(axis=1))


@pytest.mark.parametrize("overlap", nst.OVERLAPS)
@given(data=st.data())
def test_support_masks_have_the_requested_overlap(overlap, data):
    m = data.draw(st.integers(1, 4))
    V = data.draw(st.integers(max(2, m), 6))
    mask = data.draw(nst.support_masks(m=m, V=V, min_k=1, max_k=V if overlap != "disjoint" else V // m,
                                       overlap=overlap))
    assert mask.shape == (m, V) and mask.dtype == bool and mask.any(axis=1).all()
    sets = [frozenset(np.flatnonzero(r)) for r in mask]
    if overlap == "identical":
        assert len(set(sets)) == 1
    elif overlap == "nested":
        by_size = sorted(sets, key=len)
        assert all(a <= b for a, b in zip(by_size, by_size[1:]))
    elif overlap == "disjoint":
        assert mask.sum(axis=0).max() <= 1


@given(nst.support_masks(m=3, V=4, min_k=1, max_k=1))
def test_one_hot_masks(mask):
    assert np.all(mask.sum(axis=1) == 1)


@given(nst.ntp_instances(min_k=3, max_k=3, min_V=3, max_V=3, standing_assumption=False))
def test_full_supports_without_the_standing_assumption(inst):
    assert np.all(inst.support_sizes == inst.V)


@pytest.mark.parametrize("family", nst.EMBEDDING_FAMILIES)
@given(data=st.data())
def test_embedding_families(family, data):
    m, d = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    H = data.draw(nst.embeddings(m=m, d=d, family=family, max_abs=2))
    assert H.shape == (m, d) and H.dtype == np.float64 and np.all(np.isfinite(H))
    assert np.all(H.any(axis=1))
    if family != "gaussian":
        assert np.array_equal(H, np.round(H))
    if family == "integer":
        assert np.abs(H).max() <= 2
    if family in ("duplicated", "scaled") and m >= 2:
        # some two contexts are parallel with a positive factor (equal, for "duplicated")
        U = H / np.linalg.norm(H, axis=1, keepdims=True)
        G = U @ U.T - np.eye(m)
        assert G.max() > 1 - 1e-12
        if family == "duplicated":
            assert len({tuple(r) for r in H}) < m


@given(data=st.data())
def test_low_rank_rank_is_bounded(data):
    m, d = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    r = data.draw(st.integers(1, min(m, d)))
    H = data.draw(nst.embeddings(m=m, d=d, family="low-rank", rank=r))
    assert np.linalg.matrix_rank(H) <= r


@pytest.mark.parametrize("distribution", nst.DISTRIBUTIONS)
@given(data=st.data())
def test_distributions_and_repr_round_trip(distribution, data):
    inst = data.draw(nst.ntp_instances(distribution=distribution, embedding=data.draw(
        st.sampled_from(nst.EMBEDDING_FAMILIES))))
    if distribution == "fractions":
        assert all(sum(row, Fraction(0)) == 1 for row in inst.exact_probs)
        assert not inst.probs_exact_from_floats
    if distribution == "floats":
        assert inst.probs_exact_from_floats or np.all(np.isin(inst.probs, [0.0, 1.0]))
    back = eval(repr(inst), {"NTPInstance": NTPInstance})  # noqa: S307 - the repr is a constructor call
    assert back.fingerprint() == inst.fingerprint()


@given(nst.probabilities(np.array([[True, True, False], [False, True, True]]), exact=True))
def test_exact_probabilities_are_fractions_on_the_support(P):
    assert all(isinstance(x, Fraction) for x in P.flat)
    assert [sum(row) for row in P] == [1, 1]
    assert P[0, 2] == 0 and P[1, 0] == 0 and P[0, 0] > 0


def test_describe_lists_contexts_with_supports():
    inst = nst.ExampleInstance.from_counts([[1, 0], [0.5, 2]], [[2, 0, 1], [0, 3, 0]])
    text = nst.describe(inst)
    assert "m=2 contexts, d=2, V=3" in text
    assert "{0, 2}" in text and "{1}" in text and "[0.5, 2]" in text


# ---------------------------------------------------------------------------- shrinking
def test_shrinks_to_the_smallest_instance():
    inst = find(nst.ntp_instances(), lambda _: True, settings=FIND)
    assert repr(inst) == "NTPInstance.from_counts(embeddings=[[1]], counts=[[1, 0]])"


def _separable(inst: NTPInstance) -> bool | None:
    return decide_separability(KeslerSystem.build(inst))[0].holds


def test_false_conjecture_gets_a_minimal_counterexample(capsys):
    """False conjecture: "every instance with d >= m/2 is NTP-separable". The shrunk counterexample has
    two contexts on one axis with one-token supports that no decoder can separate."""
    strategy = nst.ntp_instances(max_m=6, max_d=6, max_V=5)
    inst = find(strategy, lambda i: i.d >= i.m / 2 and _separable(i) is False, settings=FIND)
    print(nst.describe(inst))
    assert (inst.m, inst.d, inst.V) == (2, 1, 2)
    assert set(np.abs(inst.embeddings).ravel()) == {1.0}
    assert np.all(inst.support_sizes == 1) and np.all(inst.counts.sum(axis=1) == 1)
    assert "m=2 contexts, d=1, V=2" in capsys.readouterr().out


def test_falsifying_example_is_printed_as_a_constructor_call():
    @FIND
    @given(nst.ntp_instances(max_m=6, max_d=6, max_V=5))
    def conjecture(inst):
        if inst.d >= inst.m / 2:
            assert _separable(inst) is not False

    with pytest.raises(AssertionError) as info:
        conjecture()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    line = next(ln.strip() for ln in notes.splitlines() if "NTPInstance.from_" in ln)
    shown = eval(line.split("=", 1)[1].rstrip(","), {"NTPInstance": NTPInstance})  # noqa: S307
    assert (shown.m, shown.d, shown.V) == (2, 1, 2)
    assert shown.d >= shown.m / 2 and _separable(shown) is False
