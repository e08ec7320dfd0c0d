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


# ---------------------------------------------------------------------------- counts are never rounded
INT64_MAX = 2**63 - 1


def test_one_float_count_does_not_round_the_integer_counts():
    # as json.loads gives it: one 1.0 among exact ints must not turn 2^53 + 1 into 2^53
    inst = NTPInstance.from_counts([[1, 0], [1, 0]], [[9007199254740993, 1.0], [9007199254740992, 1]])
    assert inst.counts.dtype == np.int64
    assert inst.counts.tolist() == [[9007199254740993, 1], [9007199254740992, 1]]
    assert inst.n == 2**54 + 3
    assert inst.ratio_integers(0) == {0: 2**53 + 1, 1: 1}
    assert inst.exact_row(0) == (Fraction(2**53 + 1, 2**53 + 2), Fraction(1, 2**53 + 2))
    same = NTPInstance.from_counts([[1, 0], [1, 0]], [[9007199254740993, 1], [9007199254740992, 1]])
    assert inst.fingerprint() == same.fingerprint()


@pytest.mark.parametrize("counts", [
    [[3.0, 1], [0, 2.0]],
    np.array([[3.0, 1.0], [0.0, 2.0]]),
    np.array([[3.0, 1.0], [0.0, 2.0]], dtype=np.float32),
    np.array([[3, 1], [0, 2]], dtype=np.uint64),
    np.array([[3, 1], [0, 2]], dtype=object),
    [[np.int32(3), np.float64(1.0)], [0, 2]],
    [[Fraction(3), 1], [0, 2]],
], ids=["list", "float64", "float32", "uint64", "object", "numpy-scalars", "fraction"])
def test_integer_valued_counts_of_any_type_are_accepted_exactly(counts):
    inst = NTPInstance.from_counts(np.eye(2), counts)
    assert inst.counts.dtype == np.int64
    assert inst.counts.tolist() == [[3, 1], [0, 2]]
    assert inst.fingerprint() == NTPInstance.from_counts(np.eye(2), [[3, 1], [0, 2]]).fingerprint()


def test_float_counts_just_below_the_float_limit_are_exact():
    inst = NTPInstance.from_counts([[1.0]], [[2.0**53 - 1, 1.0]])
    assert inst.counts.tolist() == [[2**53 - 1, 1]]
    assert inst.n == 2**53
    f32 = NTPInstance.from_counts([[1.0]], np.array([[2**24 - 1, 1]], dtype=np.float32))
    assert f32.counts.tolist() == [[2**24 - 1, 1]]


AMBIGUOUS_FLOAT = "is not an exactly representable integer count"
PAST_INT64 = "exceeds the largest supported count 2^63 - 1"

BAD_COUNTS = [
    ([[1e20, 1]], "counts[0, 0]: value 1e+20 " + AMBIGUOUS_FLOAT),
    ([[1, 2.0**53]], "counts[0, 1]: value 9007199254740992.0 " + AMBIGUOUS_FLOAT),
    (np.array([[1e20, 1.0]]), "counts[0, 0]: value 1e+20 " + AMBIGUOUS_FLOAT),
    (np.array([[1.0, 2.0**53]]), "counts[0, 1]: value 9007199254740992.0 " + AMBIGUOUS_FLOAT),
    (np.array([[2.0**24, 1.0]], dtype=np.float32), "counts[0, 0]: value 16777216.0 " + AMBIGUOUS_FLOAT),
    ([[10**20, 1]], "counts[0, 0]: value 100000000000000000000 " + PAST_INT64),
    ([[1, 2**63]], "counts[0, 1]: value 9223372036854775808 " + PAST_INT64),
    (np.array([[2**63, 1]], dtype=np.uint64), "counts[0, 0]: value 9223372036854775808 " + PAST_INT64),
    ([[-1e20, 1]], "counts[0, 0]: value -1e+20 is negative"),
    ([[-(10**20), 1]], "counts[0, 0]: value -100000000000000000000 is negative"),
    (np.array([[-2.0, 1.0]]), "counts[0, 0]: value -2.0 is negative"),
    ([[1, np.nan]], "counts[0, 1]: value nan is not finite"),
    (np.array([[1, np.inf]]), "counts[0, 1]: value inf is not finite"),
    ([[1, 0.5]], "counts[0, 1]: value 0.5 is not an integer"),
    ([[1, Fraction(1, 2)]], "counts[0, 1]: value Fraction(1, 2) is not an integer"),
    ([[True, 1]], "counts[0, 0]: value True is a boolean"),
    ([[np.True_, 1]], "counts[0, 0]: value True is a boolean"),
    ([[1, "2"]], "counts[0, 1]: value '2' is not a number"),
    (np.array([[True, True]]), "counts: expected integers, got dtype bool"),
    ([[1, 2], [3]], "counts: expected a 2-d array"),
]


@pytest.mark.parametrize("counts, message", BAD_COUNTS, ids=[m.split(" is ")[0] + f"-{i}" for i, (_, m) in enumerate(BAD_COUNTS)])
def test_counts_that_would_change_meaning_are_refused(counts, message):
    H = [[1.0]] * len(counts)
    with pytest.raises(InputError) as info:
        NTPInstance.from_counts(H, counts)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("as_array", [False, True], ids=["list", "int64"])
def test_row_sums_and_totals_past_int64_are_refused_not_wrapped(as_array):
    def make(rows):
        return np.array(rows, dtype=np.int64) if as_array else rows

    with pytest.raises(InputError, match=r"^counts\[0\]: row sums to 9223372036854775808, past the largest"):
        NTPInstance.from_counts(np.eye(2), make([[2**62, 2**62], [1, 0]]))
    with pytest.raises(InputError, match=r"^counts: the counts sum to n = 11529215046068469760, past the largest"):
        NTPInstance.from_counts(np.eye(2), make([[2**62, 2**61], [2**62, 0]]))
    with pytest.raises(InputError, match=r"^counts: the counts sum to n = 9223372036854775808"):
        NTPInstance.from_counts(np.eye(2), make([[2**62, 2**62 - 1], [0, 1]]))


def test_counts_up_to_the_int64_limit_give_exact_n_and_entropy():
    # total n = 2^63 - 1 exactly, two contexts of weight ~1/2, each with p ~ (1/2, 1/2)
    inst = NTPInstance.from_counts(np.eye(2), [[2**61, 2**61], [2**61, 2**61 - 1]])
    assert inst.n == INT64_MAX
    assert isinstance(inst.n, int)
    assert inst.exact_weight(1) == Fraction(2**62 - 1, INT64_MAX)
    assert inst.exact_row(1) == (Fraction(2**61, 2**62 - 1), Fraction(2**61 - 1, 2**62 - 1))
    assert inst.weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert inst.entropy() == pytest.approx(np.log(2), rel=1e-14)
    d = inst.describe()
    assert d["n"] == INT64_MAX and d["entropy"] == pytest.approx(np.log(2), rel=1e-14)
    one = NTPInstance.from_counts([[1.0]], [[INT64_MAX - 1, 1]])
    assert one.n == INT64_MAX
    assert 0 < one.entropy() < 1e-16
    assert one.ratio_integers(0) == {0: INT64_MAX - 1, 1: 1}


# ---------------------------------------------------------------------------- resource limits up front
def test_a_huge_decimal_exponent_is_refused_before_it_is_built():
    """``"1e-100000000"`` (a 57-byte file) would build a 332-million-bit integer."""
    import time

    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"probs\[0, 0\].*exponent"):
        NTPInstance.from_probs([[1.0]], [["1e-100000000", "1"]])
    assert time.perf_counter() - t0 < 1.0


def test_probabilities_whose_ratios_cannot_be_factored_are_refused_quickly():
    """Ratios of two products of 60-digit primes: exact compatibility would factor them forever."""
    import time

    from ntpcert.pipeline.exact_verdicts import exact_certify

    p, q, r, s = (10**59 + 19, 10**59 + 193, 10**58 + 159, 10**58 + 1227)  # primes (sympy.nextprime)
    inst = NTPInstance.from_probs([[1.0, 0.0], [0.0, 1.0]], [[f"{p * q}/{p * q + r * s}", f"{r * s}/{p * q + r * s}", "0"],
                                                         ["1/2", "1/2", "0"]])
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="composite factor"):
        exact_certify(inst)
    assert time.perf_counter() - t0 < 10.0
