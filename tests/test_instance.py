from fractions import Fraction

import numpy as np
import pytest

from ntpcert import InputError, NTPInstance

from .conftest import TOL, random_instance


def test_counts_give_exact_frequencies_and_probabilities():
    inst = NTPInstance.from_counts(np.eye(2), [[1, 3, 0], [0, 0, 4]])
    assert inst.n == 8
    assert inst.exact_weight(0) == Fraction(1, 2)
    assert inst.exact_row(0) == (Fraction(1, 4), Fraction(3, 4), Fraction(0))
    assert [s.tolist() for s in inst.supports] == [[0, 1], [2]]
    assert inst.support_sizes.tolist() == [2, 1]
    assert inst.ratio_integers(0) == {0: 1, 1: 3}


def test_entropy_matches_formula():
    inst = NTPInstance.from_probs(np.eye(2), [["1/3", "2/3"], ["1", "0"]], ["1/4", "3/4"])
    expected = -0.25 * (1 / 3 * np.log(1 / 3) + 2 / 3 * np.log(2 / 3))
    assert inst.entropy() == pytest.approx(expected, rel=1e-14)
    assert inst.ratio_integers(0) == {0: 1, 1: 2}
    assert not inst.probs_exact_from_floats


def test_float_probs_are_flagged_as_dyadic():
    inst = NTPInstance.from_probs(np.eye(2), [[0.25, 0.75], [0.5, 0.5]])
    assert inst.probs_exact_from_floats
    assert inst.ratio_integers(0) == {0: 1, 1: 3}


def test_loss_exceeds_entropy_by_kl(rng):
    inst = random_instance(rng, 6, 4, 5)
    for _ in range(5):
        W = rng.standard_normal((5, 4))
        ce = inst.loss(W)
        assert ce > inst.entropy()
        assert ce - inst.entropy() == pytest.approx(inst.excess_loss(W), rel=1e-9, abs=1e-12)


def test_gradient_matches_finite_differences(rng):
    inst = random_instance(rng, 5, 3, 4)
    W = rng.standard_normal((4, 3))
    G = inst.gradient(W)
    eps = 1e-6
    num = np.zeros_like(W)
    for idx in np.ndindex(*W.shape):
        E = np.zeros_like(W)
        E[idx] = eps
        num[idx] = (inst.loss(W + E) - inst.loss(W - E)) / (2 * eps)
    assert np.max(np.abs(G - num)) < TOL["grad_fd"]


def test_smoothness_bounds_gradient_lipschitz_constant(rng):
    inst = random_instance(rng, 8, 5, 6)
    L = inst.smoothness()
    for _ in range(20):
        A, B = rng.standard_normal((2, 6, 5)) * 3
        ratio = np.linalg.norm(inst.gradient(A) - inst.gradient(B)) / np.linalg.norm(A - B)
        assert ratio <= L * (1 + 1e-9)


def test_instance_is_frozen(rng):
    inst = random_instance(rng, 3, 2, 3)
    with pytest.raises(ValueError):
        inst.embeddings[0, 0] = 1.0
    with pytest.raises(AttributeError):
        inst.name = "x"  # type: ignore[misc]


def test_fingerprint_changes_with_content():
    a = NTPInstance.from_counts(np.eye(2), [[1, 2], [3, 0]])
    b = NTPInstance.from_counts(np.eye(2), [[1, 2], [3, 1]])
    c = NTPInstance.from_counts(np.eye(2) * 2, [[1, 2], [3, 0]])
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3
    assert a.fingerprint() == NTPInstance.from_counts(np.eye(2), [[1, 2], [3, 0]]).fingerprint()


BAD = [
    (lambda: NTPInstance.from_counts([1.0, 2.0], [[1, 2]]), "embeddings"),
    (lambda: NTPInstance.from_counts([[np.nan, 1.0]], [[1, 2]]), "embeddings[0, 0]"),
    (lambda: NTPInstance.from_counts([[np.inf, 1.0]], [[1, 2]]), "not finite"),
    (lambda: NTPInstance.from_counts([[1.0]], [[1, -2]]), "counts[0, 1]: value -2"),
    (lambda: NTPInstance.from_counts([[1.0]], [[0, 0]]), "empty support"),
    (lambda: NTPInstance.from_counts([[1.0]], [[1.5, 2]]), "not an integer"),
    (lambda: NTPInstance.from_counts([[1.0], [2.0]], [[1, 2]]), "counts: has 1 rows"),
    (lambda: NTPInstance.from_counts([[1.0]], [[3]]), "V = 1"),
    (lambda: NTPInstance.from_counts(np.zeros((0, 2)), np.zeros((0, 2), int)), "m = 0"),
    (lambda: NTPInstance.from_probs([[1.0]], [[0.5, 0.6]]), "probs[0]: row sums"),
    (lambda: NTPInstance.from_probs([[1.0]], [["1/3", "1/3"]]), "not exactly 1"),
    (lambda: NTPInstance.from_probs([[1.0]], [["a", "1"]]), "probs[0, 0]"),
    (lambda: NTPInstance.from_probs([[1.0]], [[-0.5, 1.5]]), "negative"),
    (lambda: NTPInstance.from_probs([[1.0]], [[0.5, 0.5]], [0.0]), "weights[0]"),
    (lambda: NTPInstance.from_probs([[1.0]], [[0.5, 0.5]], [1.0, 2.0]), "weights: expected shape"),
    (lambda: NTPInstance.from_probs([[1.0]], [["1/0", "1"]]), "probs[0, 0]"),
    (lambda: NTPInstance.from_counts([[1.0]], [[1, 2]], token_names=["a"]), "token_names"),
]


@pytest.mark.parametrize("make, needle", BAD)
def test_bad_input_names_field_and_value(make, needle):
    with pytest.raises(InputError) as info:
        make()
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_fraction_objects_stay_exact():
    from fractions import Fraction as Fr

    inst = NTPInstance.from_probs(np.eye(2), [[Fr(1, 3), Fr(2, 3)], [Fr(1, 10), Fr(9, 10)]])
    assert inst.exact_row(1) == (Fr(1, 10), Fr(9, 10))
    assert inst.ratio_integers(1) == {0: 1, 1: 9}
    assert not inst.probs_exact_from_floats
