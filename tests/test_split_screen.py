"""The split by small LPs (:mod:`ntpcert.solve.split_screen`): the same P / N as the single LP and as an
independent LP, witnesses that hold, and the separability verdict it gives where d < m."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from ntpcert.exact.separability import check_ray
from ntpcert.exact.split import check_exact_split, exact_split
from ntpcert.experiments import strategies as nst
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.decide import decide_separability, split_separability
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.point_check import check_point
from ntpcert.solve.split import nonseparable_split
from ntpcert.solve.split_screen import screen

from .test_finite_limit import partly_separable
from .test_split import independent_N

INSTANCES = partly_separable(12)


def _margins(inst: NTPInstance, D: np.ndarray) -> tuple[np.ndarray, float]:
    """(the (m, V) margins of D, anchor minus each token; the largest in-support spread)."""
    Z = inst.embeddings @ D.T
    mask = inst.support_mask()
    anchor = np.argmax(mask, axis=1)
    M = Z[np.arange(inst.m), anchor][:, None] - Z
    spread = max(float(np.ptp(Z[j, mask[j]])) for j in range(inst.m))
    return M, spread


@pytest.mark.parametrize("k", range(len(INSTANCES)))
def test_screen_split_equals_the_single_lp_and_the_independent_lp(k):
    inst = INSTANCES[k]
    lp = nonseparable_split(inst, method="lp")
    sc = nonseparable_split(inst, method="screen")
    assert lp.ok and sc.ok, (lp.reason, sc.reason)
    assert np.array_equal(lp.nonseparable, sc.nonseparable)
    assert sorted(map(tuple, sc.nonseparable.tolist())) == independent_N(inst.embeddings, inst.support_mask())
    assert 0 < sc.n_nonseparable and 0 < sc.n_separable


@pytest.mark.parametrize("k", range(4))
def test_screen_certificates_hold_and_any_exact_version_is_sound(k):
    inst = INSTANCES[k]
    sc = nonseparable_split(inst, method="screen")
    M, spread = _margins(inst, sc.D)
    N = sc.nonseparable_mask(inst.m, inst.V)
    off = ~inst.support_mask()
    assert spread < 1e-8
    assert M[off & ~N].min() >= 1 - 1e-9          # D_P >= 1 on P
    assert np.abs(M[N]).max() < 1e-8               # 0 on N
    a = sc.dual                                    # (V, m): vanishes, <= -1 on N
    assert np.abs(a @ inst.embeddings).max() < 1e-8 * max(1.0, np.abs(a).max())
    assert np.abs(a.sum(axis=0)).max() < 1e-8
    assert (a.T[N] <= -1 + 1e-9).all()
    assert np.abs(a.T[off & ~N]).max(initial=0.0) < 1e-12
    es = exact_split(inst, sc)
    if es.ok:  # the screens' sums of points round less well than a basic LP point: exact when it can be
        assert check_exact_split(inst, es) == ""
        assert np.array_equal(es.nonseparable, sc.nonseparable)
    else:
        assert es.reason


@settings(max_examples=25, deadline=None, derandomize=True)
@given(nst.partly_separable_instances(max_m=9, max_d=4, max_V=6))
def test_property_screen_equals_the_independent_lp(inst):
    sc = nonseparable_split(inst, method="screen")
    assert sc.ok, sc.reason
    assert sorted(map(tuple, sc.nonseparable.tolist())) == independent_N(inst.embeddings, inst.support_mask())


def _between() -> NTPInstance:
    """Context 0 has support {0, 1} and h_0 = (h_1 + h_2)/2, where contexts 1 and 2 have support {2}: any D
    of K has (d_0 - d_2)(h_1 + h_2) <= 0, so (0, 2) is in N; every other pair is in P."""
    return NTPInstance.from_counts(np.array([[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]]),
                                   np.array([[1, 1, 0], [0, 0, 1], [0, 0, 1]]))


def test_a_hand_made_split_and_its_verdict():
    inst = _between()
    sc = nonseparable_split(inst, method="screen")
    assert sc.ok and sc.n_nonseparable > 0
    assert sorted(map(tuple, sc.nonseparable.tolist())) == independent_N(inst.embeddings, inst.support_mask())
    assert [0, 2] in sc.nonseparable.tolist()
    covered, D = screen(inst)
    assert not covered[0, 2]
    v = split_separability(KeslerSystem.build(inst))
    assert v.holds is False and v.witness.engine == "split-farkas"
    assert check_ray(inst, v.witness.ray) == ""
    forged = dict(v.witness.ray)
    key = next(iter(forged))
    forged[key] += 1
    assert check_ray(inst, forged) != ""


def test_split_separability_on_partly_separable_instances():
    """Each verdict is an exactly checked ray, or None (the exact N-certificate failed: the caller goes
    on to the other engines). Where the single LP's split is exact, so is this one's ray. (The duplicated
    family's copies are scaled in floats, so its N is often empty in exact arithmetic: None there.)"""
    got = 0
    for inst in INSTANCES[:6]:
        v = split_separability(KeslerSystem.build(inst))
        if exact_split(inst, nonseparable_split(inst, method="lp")).ok:
            assert v is not None
        if v is None:
            continue
        assert v.holds is False and v.witness.engine == "split-farkas"
        assert check_ray(inst, v.witness.ray) == ""
        got += 1
    assert got >= 2


def test_split_separability_gives_a_checked_point_on_separable_data():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(6, 4))
    counts = np.eye(6, dtype=np.int64)[:, :5].copy()
    counts[5, 4] = 1
    inst = NTPInstance.from_counts(H, counts)
    lp = nonseparable_split(inst, method="lp")
    assert lp.ok and lp.n_nonseparable == 0
    v = split_separability(KeslerSystem.build(inst))
    assert v.holds is True and v.witness.engine == "split-point"
    assert check_point(KeslerSystem.build(inst), v.witness.W).ok


def _teacher_like(seed: int, m: int, d: int, V: int) -> NTPInstance:
    rng = np.random.default_rng(seed)
    H = np.column_stack([np.ones(m), rng.normal(size=(m, d - 1))])
    counts = np.zeros((m, V), dtype=np.int64)
    counts[np.arange(m), rng.integers(0, V, size=m)] = 1
    return NTPInstance.from_counts(H, counts)


def test_decide_separability_uses_the_split_where_d_is_below_m(monkeypatch):
    """m > d and too large for the tiny-LP shortcut: when the structured solver's first try (a budget of
    work, here one epoch) leaves (6) open and no pair of tokens has a ray, the verdict comes from the split
    and agrees with it (the single LP does not finish here)."""
    from ntpcert.pipeline import decide as dm
    from ntpcert.pipeline import pair_screen

    inst = _teacher_like(1, 80, 3, 50)
    monkeypatch.setattr(dm, "SPLIT_FIRST_WORK", 1)
    monkeypatch.setattr(pair_screen, "applies", lambda instance: False)
    monkeypatch.setattr(dm, "pair_separability", lambda instance: None)
    verdict, _ = decide_separability(KeslerSystem.build(inst))
    sc = nonseparable_split(inst, method="screen")
    assert sc.ok
    assert verdict.holds is (sc.n_nonseparable == 0)
    assert verdict.witness.engine in ("split-point", "split-farkas", "part-farkas")
    if verdict.witness.engine == "split-farkas":
        assert check_ray(inst, verdict.witness.ray) == ""


def test_decide_separability_tries_the_structured_solver_before_the_split(monkeypatch):
    """Where d < m on separable data the structured solver's first try settles (6); the split, whose point
    is a global LP, is not run (it took 156 s where the solver took 1.5 s, m = 194, d = 38)."""
    from ntpcert.pipeline import decide as dm

    rng = np.random.default_rng(5)
    m, d, V = 300, 12, 20
    W = rng.normal(size=(V, d))
    H = rng.normal(size=(m, d))
    counts = np.zeros((m, V), dtype=np.int64)
    counts[np.arange(m), np.argmax(H @ W.T, axis=1)] = 1  # a teacher: separable by construction
    inst = NTPInstance.from_counts(H, counts)
    assert inst.m >= dm.SPLIT_SCREEN_MIN_RATIO * inst.d and inst.V * (inst.d + inst.m) > dm.SMALL_LP_VARS

    def no_split(system):
        raise AssertionError("the split ran before the structured solver's first try")

    monkeypatch.setattr(dm, "split_separability", no_split)
    verdict, _ = decide_separability(KeslerSystem.build(inst))
    assert verdict.holds is True and verdict.witness.engine == "structured-point"
    assert check_point(KeslerSystem.build(inst), verdict.witness.W).ok
