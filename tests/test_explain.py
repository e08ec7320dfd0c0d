"""``ntpcert explain``: irreducible culprits of negative verdicts, checked here independently in exact
arithmetic (Fractions, sympy ranks), never by the module's own checks alone."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy

from ntpcert.cli.app import main
from ntpcert.exact.separability import check_ray
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.explain import explain, why_not, why_not_compatible, why_not_separable


# ----------------------------------------------------------------------------- independent checks
def separates(instance: NTPInstance, contexts, point) -> bool:
    """Exact: the point's in-support logits are equal and every other logit is strictly below, on
    every context of ``contexts`` (H outside the point's columns must vanish there)."""
    cols = [int(c) for c in point.cols]
    for j in contexts:
        h = instance.embeddings[j]
        if any(h[i] != 0 for i in range(instance.d) if i not in set(cols)):
            return False
        z = [sum((Fraction(float(h[c])) * point.W[v][k] for k, c in enumerate(cols)), Fraction(0))
             for v in range(instance.V)]
        S = set(int(s) for s in instance.support(j))
        t = z[min(S)]
        if any(z[v] != t for v in S) or any(z[v] >= t for v in range(instance.V) if v not in S):
            return False
    return True


def assert_irreducible_non_separable(instance: NTPInstance, wns) -> None:
    assert wns is not None and wns.irreducible is True
    C = set(wns.contexts)
    assert check_ray(instance, wns.ray) == ""  # a Farkas ray: C is not separable
    assert {j for (_, j), x in wns.ray.items() if x} == C
    assert [d.context for d in wns.deletions] == list(wns.contexts)
    for d in wns.deletions:
        rest = sorted(C - {d.context})
        assert d.separable is True
        assert not rest or separates(instance, rest, d.point), d.context


def rows_matrix(instance: NTPInstance, rows):
    """Exact rows (e_z - e_anchor) (x) h_j of the log-odds equations, as a sympy Matrix."""
    out = []
    for j, z in rows:
        a = int(instance.support(j)[0])
        r = [sympy.Integer(0)] * (instance.V * instance.d)
        for i in range(instance.d):
            x = sympy.Rational(*float(instance.embeddings[j, i]).as_integer_ratio())
            r[z * instance.d + i] += x
            r[a * instance.d + i] -= x
        out.append(r)
    used = [c for c in range(instance.V * instance.d) if any(r[c] != 0 for r in out)]
    return sympy.Matrix([[r[c] for c in used] for r in out])


# ----------------------------------------------------------------------------- separability
def two_context_toy() -> NTPInstance:
    """Contexts 0 and 1 share their embedding but not their support; context 2 is harmless."""
    H = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    C = [[3, 0, 0], [0, 2, 0], [1, 1, 0]]
    return NTPInstance.from_counts(H, C, context_names=["x", "x'", "y"], token_names=["a", "b", "c"])


def test_two_context_toy_explains_itself_as_those_two_contexts():
    inst = two_context_toy()
    exp = explain(inst)
    assert exp.separable.holds is False
    assert exp.why_not_separable.contexts == (0, 1)
    assert_irreducible_non_separable(inst, exp.why_not_separable)
    assert set(exp.why_not_separable.clash_tokens()) == {0, 1}


def test_filter_shrinks_the_whole_toy_to_the_two_contexts():
    inst = two_context_toy()
    wns = why_not_separable(inst, contexts=range(inst.m))
    assert wns.contexts == (0, 1)
    assert_irreducible_non_separable(inst, wns)


def test_a_separable_start_is_refused():
    assert why_not_separable(two_context_toy(), contexts=[0, 2]) is None


def test_a_bad_ray_is_refused():
    inst = two_context_toy()
    assert why_not_separable(inst, {(0, 0): Fraction(1), (1, 0): Fraction(-1)}) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_filter_on_random_non_separable_instances(seed):
    """Random one-hot pair embeddings with random supports: a non-separable start shrinks to a set
    whose every one-context deletion separates, checked here in Fractions."""
    rng = np.random.default_rng(seed)
    m, V, a, b = 40, 5, 4, 4
    pairs = [(int(rng.integers(a)), int(rng.integers(b))) for _ in range(m)]
    pairs = sorted(set(pairs))
    H = np.zeros((len(pairs), a + b))
    for j, (x, y) in enumerate(pairs):
        H[j, x] = 1.0
        H[j, a + y] = 1.0
    C = (rng.random((len(pairs), V)) < 0.4).astype(np.int64) * rng.integers(1, 5, (len(pairs), V))
    C[np.arange(len(pairs)), rng.integers(V, size=len(pairs))] += 1
    inst = NTPInstance.from_counts(H, C)
    wns = why_not_separable(inst, contexts=range(inst.m))
    assert wns is not None  # these are far from separable
    assert_irreducible_non_separable(inst, wns)
    assert len(wns.contexts) < inst.m


def test_filter_on_gaussian_embeddings():
    """Dense embeddings (no column to drop): the culprit is irreducible, checked here in Fractions."""
    rng = np.random.default_rng(0)
    m, d, V = 200, 5, 10
    H = rng.standard_normal((m, d))
    C = (rng.random((m, V)) < 0.2) * rng.integers(1, 5, (m, V))
    C[np.arange(m), rng.integers(V, size=m)] += 1
    inst = NTPInstance.from_counts(H, C)
    exp = explain(inst)
    assert exp.separable.holds is False
    assert_irreducible_non_separable(inst, exp.why_not_separable)
    assert len(exp.why_not_separable.contexts) >= 2


def test_pydoc_irreducible_set_is_verified_exactly_and_printed(capsys):
    from ntpcert.instance.load import load_instance

    inst = load_instance("pydoc", context_length=2)
    exp = explain(inst)
    assert exp.separable.holds is False
    assert_irreducible_non_separable(inst, exp.why_not_separable)
    assert main(["explain", "pydoc", "-k", "2"]) == 0
    out = capsys.readouterr().out
    for j in exp.why_not_separable.contexts:
        text = inst.context_names[j].replace('"', '\\"')
        assert f'"{text}"' in out
    assert "irreducible" in out


# ----------------------------------------------------------------------------- compatibility
def doubling_toy(extra: bool = False) -> NTPInstance:
    """h_2 = 2 h_1 with the same log-odds log 2 in both (doubling would need log 4); with ``extra``,
    h_4 = 3 h_3 with consistently tripled log-odds (log 3 and log 27)."""
    H = [[1.0, 0.0], [2.0, 0.0]]
    C = [[2, 1], [2, 1]]
    if extra:
        H += [[0.0, 1.0], [0.0, 3.0]]
        C += [[3, 1], [27, 1]]
    return NTPInstance.from_counts(H, C, token_names=["a", "b"])


def test_doubling_toy_explains_itself_as_one_equation_with_its_mismatch():
    inst = doubling_toy()
    exp = explain(inst)
    assert exp.compatible.holds is False
    wnc = exp.why_not_compatible
    assert wnc.irreducible is True and len(wnc.rows) == 2
    assert {t.context for t in wnc.terms} == {0, 1}
    # the combination of the data's log-odds, recomputed here, is the mismatch: 2 log 2 - log 2 = log 2
    value = math.fsum(t.coefficient * math.log(t.counts[0] / t.counts[1]) for t in wnc.terms)
    assert value == pytest.approx(math.log(2), rel=1e-12)
    assert wnc.mismatch == pytest.approx(math.log(2), rel=1e-12)
    assert wnc.mismatch_ratio() == (2, 1)
    assert sorted(t.coefficient for t in wnc.terms) == [1, 2]


def test_compatibility_filter_drops_the_consistent_part():
    inst = doubling_toy(extra=True)
    # (0,1), (1,1), (2,1), (3,1): y = (-2, 1) + (-3, 1) is a violating null vector over 4 equations
    big = {(0, 1): -2, (1, 1): 1, (2, 1): -3, (3, 1): 1}
    wnc = why_not_compatible(inst, big)
    assert wnc.start_rows == 4
    assert sorted(wnc.rows) == [(0, 1), (1, 1)]
    assert wnc.irreducible is True
    A = rows_matrix(inst, wnc.rows)
    y = sympy.Matrix([list(wnc.y)])
    assert (y * A).is_zero_matrix
    assert A.rank() == len(wnc.rows) - 1  # dropping any one row leaves independent rows: consistent
    assert wnc.mismatch > 0


def test_pydoc_cycle_is_irreducible_exactly():
    from ntpcert.instance.load import load_instance

    inst = load_instance("pydoc", context_length=2)
    exp = explain(inst)
    wnc = exp.why_not_compatible
    assert exp.compatible.holds is False and wnc.irreducible is True
    A = rows_matrix(inst, wnc.rows)
    y = sympy.Matrix([list(wnc.y)])
    assert (y * A).is_zero_matrix
    assert all(v != 0 for v in wnc.y)
    assert A.rank() == len(wnc.rows) - 1
    # the data's log-odds along y, recomputed from the counts
    b = [math.log(inst.counts[j, z]) - math.log(inst.counts[j, int(inst.support(j)[0])]) for j, z in wnc.rows]
    assert math.fsum(yi * bi for yi, bi in zip(wnc.y, b)) == pytest.approx(wnc.mismatch, rel=1e-9)
    assert wnc.mismatch > 1e-3


def test_consistent_rows_are_refused():
    inst = doubling_toy(extra=True)
    assert why_not_compatible(inst, {(2, 1): -3, (3, 1): 1}) is None


# ----------------------------------------------------------------------------- reports
def test_nothing_to_explain_on_paper(capsys):
    assert main(["explain", "paper"]) == 0
    assert "Nothing to explain" in capsys.readouterr().out


def test_json_keys(tmp_path, capsys):
    from ntpcert.instance.io import write_npz

    path = tmp_path / "toy.npz"
    write_npz(doubling_toy(), path)
    assert main(["explain", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compatible"]["holds"] is False and out["separable"]["holds"] is True
    assert "why_not_separable" not in out
    w = out["why_not_compatible"]
    assert w["irreducible"] is True and w["mismatch_exact"] == "log(2/1)"


def test_why_not_caps_skip_large_witnesses():
    inst = two_context_toy()
    exp = explain(inst)
    out = why_not(inst, compatible=True, violating=None, separable=False, ray=exp.why_not_separable.ray,
                  max_contexts=1)
    assert "skipped" in out["why_not_separable"] and "why_not_compatible" not in out


@pytest.mark.parametrize("argv", [
    ["explain", "paper", "--time-limit", "-1"],
    ["explain", "no-such-file.npz"],
    ["explain", "paper", "--separability-solver", "nope"],
])
def test_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1


def test_certify_json_carries_the_culprits(tmp_path, capsys):
    from ntpcert.instance.io import write_npz

    path = tmp_path / "toy.npz"
    write_npz(two_context_toy(), path)
    for extra in ([], ["--exact"]):
        assert main(["certify", str(path), "--json", "--no-svm", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["separable"]["holds"] is False
        w = out["why_not_separable"]
        assert w["irreducible"] is True and [c["index"] for c in w["contexts"]] == [0, 1]
        assert [c["text"] for c in w["contexts"]] == ["x", "x'"]
        assert "why_not_compatible" not in out  # compatible: nothing to explain


# ----------------------------------------------------------------------------- non-separable pairs by token pair
def _token_pair_instance() -> NTPInstance:
    """x, x2 = 2x and x' share a direction; y, y' another; token d lies in no support. By hand (every D in the
    recession cone has u = D(1, 0) equal on a, b, c and w = D(0, 1) equal on a, b): N = {(x, c), (x2, c),
    (x', a), (x', b), (y, b), (y', a)}, every other out-of-support pair separable."""
    H = [[1.0, 0.0], [2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    C = [[1, 3, 0, 0], [2, 2, 0, 0], [0, 0, 2, 0], [1, 0, 0, 0], [0, 4, 0, 0]]
    return NTPInstance.from_counts(H, C, context_names=["x", "x2", "x'", "y", "y'"], token_names=["a", "b", "c", "d"])


def test_nonseparable_pairs_are_grouped_by_token_pair_heaviest_first():
    from ntpcert.pipeline.nonseparable import pair_groups

    inst = _token_pair_instance()
    key = explain(inst, excess=False).nonseparable_pairs
    assert key["pairs"] == 6  # the split found exactly the hand-made N
    N = np.array([[0, 2], [1, 2], [2, 0], [2, 1], [3, 1], [4, 0]])
    got = [(g["support_token"], g["token"], g["contexts"], g["context_names"]) for g in key["groups"]]
    # weights pi_j p_{j,z} in fifteenths: (b, c) 3 + 2, (b, a) 4, (a, c) 1 + 2, (c, a) 2, (c, b) 2, (a, b) 1
    assert got == [("b", "c", 2, ["x", "x2"]), ("b", "a", 1, ["y'"]), ("a", "c", 2, ["x2", "x"]),
                   ("c", "a", 1, ["x'"]), ("c", "b", 1, ["x'"]), ("a", "b", 1, ["y"])]
    assert [round(15 * g["weight"], 12) for g in key["groups"]] == [5, 4, 3, 2, 2, 1]
    assert round(15 * key["weight"], 12) == 17  # pi_x + pi_x2 + 2 pi_x' + pi_y + pi_y'
    assert abs(sum(g["share"] for g in key["groups"]) - 1) <= 1e-12
    assert key["groups_total"] == 6 and key["split"].startswith("the split LP")
    assert [(g["support_token"], g["token"]) for g in pair_groups(inst, N)] == [(1, 2), (1, 0), (0, 2), (2, 0), (2, 1), (0, 1)]
    assert set(key) == {"pairs", "split", "weight", "weight_is", "groups", "groups_total"}
    assert set(key["groups"][0]) == {"support_token", "token", "support_token_id", "token_id", "contexts", "weight",
                                     "share", "context_names"}


def test_the_text_summarises_the_token_pairs(monkeypatch):
    from ntpcert.report import explain as rep

    key = explain(_token_pair_instance(), excess=False).nonseparable_pairs
    monkeypatch.setattr(rep, "PAIRS_SHOWN", 2)
    lines = rep.pair_lines(key)
    assert lines[1] == ("  N has 6 pairs in 6 token pairs (z, v), z in S_j; the top 2 token pairs cover 52.9 % of "
                        "N's weight 1.133")  # (5 + 4) / 17
    assert lines[3].split() == ['"b"', "vs", '"c"', "2", "context(s),", "weight", "0.3333", "(29.4", "%),", "e.g.",
                                '"x",', '"x2"']
    assert lines[-1] == "    ... and 4 more token pair(s) (--json lists them all)"


def test_explain_json_lists_every_token_pair(tmp_path, capsys):
    inst = _token_pair_instance()
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"embeddings": inst.embeddings.tolist(), "counts": inst.counts.tolist()}))
    assert main(["explain", str(path), "--json"]) == 0
    key = json.loads(capsys.readouterr().out)["nonseparable_pairs"]
    assert len(key["groups"]) == key["groups_total"] == 6
    assert key["groups"][0]["support_token"] == "#1" and key["groups"][0]["token"] == "#2"  # no vocabulary: ids
