"""The split of the out-of-support pairs into separable (P) and non-separable (N) ones: the float LP, its
exact certificates, the certificate section ``split`` (``ntpcert verify``) and the standalone split check
(tools/ntpcert_check_split.py), against an independent LP written here."""

from __future__ import annotations

import copy
import importlib.util
from fractions import Fraction
from pathlib import Path

import flint
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_certificate
from ntpcert.exact.split import exact_split
from ntpcert.experiments import strategies as nst
from ntpcert.instance import NTPInstance
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.split_section import section_of
from ntpcert.solve.split import nonseparable_split

from .standalone import standalone

_PATH = Path(__file__).resolve().parent.parent / "tools" / "ntpcert_check_split.py"
_spec = importlib.util.spec_from_file_location("ntpcert_check_split", _PATH)
split_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(split_tool)


# ---------------------------------------------------------------------------- the independent LP
def independent_N(H: np.ndarray, S: np.ndarray) -> list[tuple[int, int]]:
    """N by one LP per pair, dense, in scipy's HiGHS: maximise the pair's margin over
    K ∩ {every margin <= 1}; the pair is separable iff the maximum is positive."""
    from scipy.optimize import linprog

    m, d = H.shape
    V = S.shape[1]
    eq, mar, pairs = [], [], []
    for j in range(m):
        sj = np.flatnonzero(S[j])
        z0 = sj[0]
        for z in sj[1:]:
            row = np.zeros((V, d))
            row[z] += H[j]
            row[z0] -= H[j]
            eq.append(row.ravel())
        for v in np.flatnonzero(~S[j]):
            row = np.zeros((V, d))
            row[z0] += H[j]
            row[v] -= H[j]
            mar.append(row.ravel())
            pairs.append((j, int(v)))
    if not pairs:
        return []
    A = np.array(mar)
    A_eq = np.array(eq) if eq else None
    b_eq = np.zeros(len(eq)) if eq else None
    out = []
    for i, p in enumerate(pairs):
        res = linprog(-A[i], A_ub=np.vstack([-A, A]), b_ub=np.r_[np.zeros(len(pairs)), np.ones(len(pairs))],
                      A_eq=A_eq, b_eq=b_eq, bounds=(None, None), method="highs")
        assert res.status == 0, res.message
        if -res.fun < 1e-7:  # the maximum is 0 (N) or positive (P)
            out.append(p)
    return sorted(out)


def _H_q(inst: NTPInstance):
    return [[flint.fmpq(*float(x).as_integer_ratio()) for x in row] for row in inst.embeddings.tolist()]


def _supports(inst: NTPInstance):
    return [sorted(int(z) for z in inst.support(j)) for j in range(inst.m)]


def _split_and_section(inst: NTPInstance):
    s = nonseparable_split(inst)
    es = exact_split(inst, s)
    assert es.ok, es.reason
    return s, es, section_of(es)


def _check_property(inst: NTPInstance) -> None:
    S = inst.support_mask()
    s, es, sec = _split_and_section(inst)
    got = [tuple(p) for p in s.nonseparable.tolist()]
    assert got == independent_N(inst.embeddings, S)
    n_pairs = int((~S).sum())
    assert 0 < len(got) < n_pairs  # the family has both parts
    assert s.n_separable == n_pairs - len(got)
    lines = split_tool.check_split(sec, _H_q(inst), _supports(inst), V=inst.V)
    assert f"{len(got)} non-separable pairs" in lines[0]


@given(nst.partly_separable_instances())
@settings(max_examples=30, deadline=None)
def test_split_equals_an_independent_lp(inst):
    _check_property(inst)


@pytest.mark.slow
@given(nst.partly_separable_instances(max_m=10, max_d=4, max_V=6))
@settings(max_examples=250, deadline=None)
def test_split_equals_an_independent_lp_many(inst):
    _check_property(inst)


@given(nst.ntp_instances(min_m=2, max_m=6, max_d=3, max_V=5, embedding="duplicated"))
@settings(max_examples=15, deadline=None)
def test_split_on_any_instance_agrees_with_the_independent_lp(inst):
    s, _es, sec = _split_and_section(inst)
    assert [tuple(p) for p in s.nonseparable.tolist()] == independent_N(inst.embeddings, inst.support_mask())
    split_tool.check_split(sec, _H_q(inst), _supports(inst), V=inst.V)


# ---------------------------------------------------------------------------- structure of the value
def toy() -> NTPInstance:
    """h_1 = 2 h_0 with supports {0} and {1}: (0, 1) and (1, 0) are in N; token 3 is in no support, so
    every (j, 3) is in P; contexts 2 and 3 add more of both."""
    H = np.array([[1.0, 1.0], [2.0, 2.0], [1.0, -1.0], [1.0, 0.0]])
    C = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 2, 0], [0, 3, 1, 0]])
    return NTPInstance.from_counts(H, C)


def test_split_value_shapes_and_classes():
    inst = toy()
    s = nonseparable_split(inst)
    assert s.ok and s.nonseparable.dtype == np.int64 and s.nonseparable.shape[1] == 2
    assert s.D.shape == (inst.V, inst.d) and s.dual.shape == (inst.V, inst.m)
    assert {(0, 1), (1, 0)} <= {tuple(p) for p in s.nonseparable.tolist()}
    assert not any(v == 3 for _, v in s.nonseparable.tolist())
    ext = s.extended_mask(inst)
    assert ext.sum() == inst.support_mask().sum() + s.n_nonseparable
    a = s.dual
    assert np.allclose(a @ inst.embeddings, 0) and np.allclose(a.sum(axis=0), 0)
    N = s.nonseparable_mask(inst.m, inst.V)
    assert np.all(a.T[N] < -0.5)


def test_split_too_large_is_undetermined_naming_the_limit():
    s = nonseparable_split(toy(), max_nonzeros=3)
    assert s.status == "undetermined" and "the limit of 3" in s.reason
    es = exact_split(toy(), s)
    assert not es.ok and "float split is undetermined" in es.reason


def test_separable_instance_has_empty_N():
    H = np.eye(3)
    C = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    inst = NTPInstance.from_counts(H, C)
    s, es, sec = _split_and_section(inst)
    assert s.n_nonseparable == 0 and s.n_separable == 6
    split_tool.check_split(sec, _H_q(inst), _supports(inst), V=3)


# ---------------------------------------------------------------------------- forgeries
def _forgeries(sec: dict, inst: NTPInstance):
    """(name, forged section) pairs."""
    N = [tuple(p) for p in sec["nonseparable"]]
    S = inst.support_mask()
    P = [(j, v) for j in range(inst.m) for v in range(inst.V) if not S[j, v] and (j, v) not in N]
    out = []
    f = copy.deepcopy(sec)
    f["nonseparable"] = [list(p) for p in N[1:]]
    out.append(("an N pair moved to P", f))
    f = copy.deepcopy(sec)
    f["nonseparable"] = sorted([list(p) for p in N] + [list(P[0])])
    out.append(("a P pair moved to N", f))
    f = copy.deepcopy(sec)
    j, v = N[0]
    c = f["token_class"][v]
    f["dual"] = [e for e in f["dual"] if (e[0], e[1]) != (c, j)]
    out.append(("y zero on an N pair", f))
    f = copy.deepcopy(sec)
    f["dual"] = [[e[0], e[1], "0"] if (e[0], e[1]) == (c, j) else e for e in f["dual"]]
    out.append(("an explicit zero in y", f))
    f = copy.deepcopy(sec)
    f["D_P"] = [["0"] * inst.d for _ in f["D_P"]]
    out.append(("D_P with zero P margins", f))
    f = copy.deepcopy(sec)
    f["D_P"] = [[x[1:] if x.startswith("-") else (x if x == "0" else "-" + x) for x in row] for row in f["D_P"]]
    out.append(("D_P negated", f))
    f = copy.deepcopy(sec)
    f["D_P"][0][0] = "2/4"
    out.append(("a non-canonical rational", f))
    f = copy.deepcopy(sec)
    f["token_class"] = f["token_class"][:-1]
    out.append(("token_class too short", f))
    f = copy.deepcopy(sec)
    f["nonseparable"] = [list(N[0])] + [list(p) for p in N]
    out.append(("a repeated N pair", f))
    f = copy.deepcopy(sec)
    f["nonseparable"] = [[0, 0]] + [list(p) for p in N if p != (0, 0)]
    out.append(("an in-support pair listed in N", f))
    f = copy.deepcopy(sec)
    f["dual"][0][2] = 1.5
    out.append(("a float in y", f))
    f = copy.deepcopy(sec)
    f["extra"] = []
    out.append(("an unknown key", f))
    return out + _toy_forgeries(sec)


def _q(x: Fraction) -> str:
    """The canonical rational string of x."""
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _dual(sec: dict) -> dict[tuple[int, int], Fraction]:
    return {(c, j): Fraction(x) for c, j, x in sec["dual"]}


def _with_dual(sec: dict, b: dict[tuple[int, int], Fraction]) -> dict:
    f = copy.deepcopy(sec)
    f["dual"] = [[c, j, _q(x)] for (c, j), x in sorted(b.items()) if x != 0]
    return f


def _toy_forgeries(sec: dict):
    """Forgeries that each break one condition of section 11 and keep the others, on toy()'s section
    (identity token classes; h_1 = 2 h_0; S_2 = {0, 2}; token 3 in no support, D_P[3] = (-1, 0))."""
    assert sec["token_class"] == [0, 1, 2, 3] and sec["D_P"][3] == ["-1", "0"]
    out, ulp = [], Fraction(1, 2**1074)
    f = copy.deepcopy(sec)
    f["D_P"][2] = ["0", "-1"]  # (D_P h_2)_2 = 1 but (D_P h_2)_0 = 0; every margin stays >= 0
    out.append(("D_P breaks an in-support equality", f))
    f = copy.deepcopy(sec)
    f["D_P"][3] = ["-1", "1"]  # margins h_j0 - h_j1 of (j, 3): 0 at j = 0 and 1
    out.append(("D_P with a zero margin on a P pair", f))
    f = copy.deepcopy(sec)
    f["D_P"][3] = ["-1", "2"]  # margin 1 - 2 < 0 at (0, 3)
    out.append(("D_P with a negative margin on a P pair", f))
    b = _dual(sec)
    out.append(("a negated (vanishing, column sums 0, wrong signs)", _with_dual(sec, {k: -x for k, x in b.items()})))
    moved = dict(b)
    moved[0, 0] += ulp  # column 0 still sums to 0, but sum_j a_j h_j^T = +-ulp h_0 on tokens 0 and 1
    moved[1, 0] -= ulp
    out.append(("a combination off by 2^-1074", _with_dual(sec, moved)))
    cols = dict(b)
    cols[0, 0] += 2 * ulp  # 2 h_0 - h_1 = 0: the combination still vanishes, columns 0 and 1 do not sum to 0
    cols[0, 1] -= ulp
    out.append(("column sums off by 2^-1074", _with_dual(sec, cols)))
    f = copy.deepcopy(sec)
    f["token_class"] = [0, 0, 2, 3]  # same D_P rows; class counts n_0 = 2, n_1 = 0: column sums and signs change
    out.append(("class counts changed by token_class", f))
    return out


def test_forged_split_sections_are_refused_by_both_checkers():
    inst = toy()
    rep = exact_certify(inst, svm=False, split=True)
    assert rep.check.valid and "split" in rep.certificate
    assert any(c.startswith("split: ") for c in rep.check.checks)
    sec = rep.certificate["split"]
    split_tool.check_split(sec, _H_q(inst), _supports(inst), V=inst.V)
    base = copy.deepcopy(rep.certificate)
    base.pop("checksum")
    for name, forged in _forgeries(sec, inst):
        with pytest.raises(split_tool.Invalid, match="split"):
            split_tool.check_split(forged, _H_q(inst), _supports(inst), V=inst.V)
        cert = copy.deepcopy(base)
        cert["split"] = forged
        res = verify_certificate(jsonio.seal(cert))
        assert not res.valid, name
        assert "split" in res.reason, (name, res.reason)
        ok, line = standalone(jsonio.dumps(jsonio.seal(cert)))
        assert not ok and line.startswith("INVALID: split"), (name, line)


def test_split_section_refused_beside_a_contrary_claim():
    inst = toy()
    rep = exact_certify(inst, svm=False, split=True)
    cert = copy.deepcopy(rep.certificate)
    cert.pop("checksum")
    sec = cert["split"]
    H = np.eye(3)
    sep = exact_certify(NTPInstance.from_counts(H, np.eye(3, dtype=np.int64)), svm=False, split=True)
    assert "split" not in sep.certificate  # written only when the data are not separable
    c2 = copy.deepcopy(sep.certificate)
    c2.pop("checksum")
    c2["split"] = {"nonseparable": [[0, 1]], "token_class": [0, 1, 2], "D_P": [["0"] * 3] * 3, "dual": []}
    res = verify_certificate(jsonio.seal(c2))
    assert not res.valid and "split" in res.reason
    ok, line = standalone(jsonio.dumps(jsonio.seal(c2)))
    assert not ok and line.startswith("INVALID: split"), line
    assert verify_certificate(jsonio.seal(cert)).valid and standalone(jsonio.dumps(jsonio.seal(cert)))[0]
    W = [["1", "0", "0"], ["0", "1", "0"], ["0", "0", "1"]]  # a valid split of separable data: N empty, D_P = W
    c2["split"] = {"nonseparable": [], "token_class": [0, 1, 2], "D_P": W, "dual": []}
    assert verify_certificate(jsonio.seal(c2)).valid and standalone(jsonio.dumps(jsonio.seal(c2)))[0]
    cert["separability"] = {"claim": None, "reason": "not tried"}  # an undetermined claim contradicts no split
    cert["claims"].update(separable=None, entropy_bound_reachable=None)
    assert verify_certificate(jsonio.seal(cert)).valid and standalone(jsonio.dumps(jsonio.seal(cert)))[0]


def test_certify_json_reports_the_split(capsys, tmp_path):
    from ntpcert.cli.app import main
    from ntpcert.instance.io import write_json

    path = tmp_path / "toy.json"
    write_json(toy(), path)
    assert main(["certify", str(path), "--json", "--no-svm"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    s = nonseparable_split(toy())
    assert out["split"]["status"] == "ok"
    assert out["split"]["nonseparable_pairs"] == s.nonseparable.tolist()
    assert out["split"]["separable_pairs"] == s.n_separable


def test_split_witness_checks_and_refuses_a_forgery():
    import dataclasses
    from fractions import Fraction

    from ntpcert.pipeline.split_section import split_verdict
    from ntpcert.verdict import SplitCertificate

    inst = toy()
    v = split_verdict(inst)
    assert v.holds is False and v.witness.kind == "split" and v.is_exact
    assert v.check(inst) == ""
    assert v.to_json()["nonseparable_pairs"] == len(v.witness.split.nonseparable)
    es = v.witness.split
    (c, j), _ = next(iter(es.dual.items()))
    forged = dataclasses.replace(es, dual={**es.dual, (c, j): es.dual[(c, j)] + Fraction(1, 3)})
    assert SplitCertificate(forged).check(inst) != ""
    moved = dataclasses.replace(es, nonseparable=es.nonseparable[1:])
    assert "margin" in SplitCertificate(moved).check(inst)
    with pytest.raises(ValueError, match="non-separable pair"):
        SplitCertificate(dataclasses.replace(es, nonseparable=es.nonseparable[:0]))


def test_certify_exact_writes_the_split_and_verify_accepts_it(capsys, tmp_path):
    import json

    from ntpcert.cli.app import main
    from ntpcert.instance.io import write_json

    path = tmp_path / "toy.json"
    cert = tmp_path / "toy.cert.json"
    write_json(toy(), path)
    assert main(["certify", str(path), "--exact", "--no-svm", "--json", "--certificate-out", str(cert)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["split"]["status"] == "exact" and out["split"]["certificate_checked"] is True
    data = json.loads(cert.read_text())
    assert data["split"]["nonseparable"] == out["split"]["nonseparable_pairs"]
    assert main(["verify", str(cert)]) == 0
    assert "split: " in capsys.readouterr().out
    from .standalone import standalone

    ok, line = standalone(cert.read_bytes())  # the whole standalone checker reads the section too
    assert ok, line
    forged = json.loads(cert.read_text())
    forged["split"]["nonseparable"] = forged["split"]["nonseparable"][1:]  # a pair moved from N to P
    ok, line = standalone(jsonio.dumps(forged))
    assert not ok and line.startswith("INVALID: split"), line


def _oracle_P(inst: NTPInstance, sec: dict, D: list[list[Fraction]]) -> bool:
    """Condition 1 of section 11, written here with Fractions: D_P in K and every P margin > 0."""
    S, N = inst.support_mask(), {tuple(p) for p in sec["nonseparable"]}
    for j, h in enumerate(inst.embeddings.tolist()):
        u = [sum(x * Fraction(y) for x, y in zip(D[c], h)) for c in sec["token_class"]]
        t = {u[z] for z in np.flatnonzero(S[j])}
        if len(t) != 1:
            return False
        for v in np.flatnonzero(~S[j]):
            if min(t) - u[v] < 0 or (min(t) == u[v] and (j, int(v)) not in N):
                return False
    return True


_DELTAS = st.sampled_from([Fraction(1, 2**1074), Fraction(-1, 2**1074)]) | st.fractions(
    min_value=-2, max_value=2, max_denominator=6).filter(bool)


@given(nst.partly_separable_instances(max_m=5, max_d=3, max_V=4), st.data())
@settings(max_examples=25, deadline=None)
def test_one_perturbed_entry_both_checkers_agree(inst, data):
    """One entry of D_P or of the dual b moved by a nonzero delta: verify and the standalone checker give the
    same verdict, VALID exactly when the conditions still hold (D_P: checked here; b: sum_j b[c, j] h_j moves
    by delta h_j and column j by n_c delta, so VALID only for h_j = 0 in a class no token has)."""
    rep = exact_certify(inst, svm=False, split=True)
    body = copy.deepcopy(rep.certificate)
    body.pop("checksum")
    genuine = body["split"]
    C = len(genuine["D_P"])
    for _ in range(3):
        delta = data.draw(_DELTAS)
        if data.draw(st.booleans()):
            c, i = data.draw(st.integers(0, C - 1)), data.draw(st.integers(0, inst.d - 1))
            D = [[Fraction(x) for x in row] for row in genuine["D_P"]]
            D[c][i] += delta
            sec = {**genuine, "D_P": [[_q(x) for x in row] for row in D]}
            expect = _oracle_P(inst, sec, D)
        else:
            c, j = data.draw(st.integers(0, C - 1)), data.draw(st.integers(0, inst.m - 1))
            b = _dual(genuine)
            b[c, j] = b.get((c, j), Fraction(0)) + delta
            sec = _with_dual(genuine, b)
            expect = not inst.embeddings[j].any() and c not in genuine["token_class"]
        sealed = jsonio.seal({**body, "split": sec})
        res, (ok, line) = verify_certificate(sealed), standalone(jsonio.dumps(sealed))
        event(f"valid: {expect}")
        assert res.valid == ok == expect, (delta, res.reason, line)


def test_every_token_in_every_support_has_an_empty_split_and_compare_runs(tmp_path, capsys):
    """One token class only (every support is the whole vocabulary): no out-of-support pair, so P and N are
    empty; it had failed building a class instance of V = 1, and `compare` with it."""
    import json

    from ntpcert.cli import main

    inst = NTPInstance.from_counts(np.array([[1.0, 0.5], [0.3, -1.0]]), np.array([[1, 2, 3], [2, 4, 6]]))
    split = nonseparable_split(inst)
    assert split.ok and split.nonseparable.shape == (0, 2) and split.n_separable == 0
    path = tmp_path / "full.npz"
    np.savez(path, embeddings=inst.embeddings, counts=np.array([[1, 2, 3], [2, 4, 6]]))
    np.save(tmp_path / "W.npy", np.zeros((3, 2)))
    assert main(["compare", str(path), "--W", str(tmp_path / "W.npy"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["margin"] is None and out["loss"] > out["entropy"]


@pytest.mark.parametrize("seed", range(6))
def test_the_whitened_split_is_the_split(seed):
    """An invertible change of coordinates of H leaves P, N and K alone: the retry in whitened coordinates
    (used where HiGHS fails on the original LP) gives the same split, and its point, mapped back, is a point of
    K positive on P for the original h."""
    from ntpcert.rows.kesler import KeslerSystem
    from ntpcert.solve.split import _whitened_split

    rng = np.random.default_rng(seed)
    H = rng.standard_normal((14, 3)) * np.array([1.0, 30.0, 1e-3])  # badly scaled columns
    C = np.zeros((14, 5), dtype=np.int64)
    for j in range(14):
        C[j, rng.choice(5, size=int(rng.integers(1, 3)), replace=False)] = rng.integers(1, 4, size=1)
    inst = NTPInstance.from_counts(H, C)
    plain, white = nonseparable_split(inst, whiten=False), _whitened_split(inst, max_iterations=10_000,
                                                                          max_nonzeros=None)
    assert plain.ok and white is not None and white.ok
    assert np.array_equal(plain.nonseparable, white.nonseparable) and plain.n_separable == white.n_separable
    system = KeslerSystem.build(inst)
    D = white.D_classes[white.of_token]  # one row per token
    margins = system.apply_margin(D)
    n_set = {(int(j), int(v)) for j, v in white.nonseparable}
    on_p = np.array([(int(j), int(v)) not in n_set for j, v in zip(system.mar_context, system.mar_token)])
    assert np.all(margins[on_p] > 0.5) and np.all(np.abs(system.apply_eq(D)) < 1e-6 * max(1.0, np.abs(D).max()))


# ---------------------------------------------------------------------------- scale
@pytest.mark.parametrize("seed", [1, 3])
@pytest.mark.parametrize("scale", [2.0**-300, 1e-100, 1e-20, 1e20, 1e100])
def test_the_split_does_not_change_with_the_scale_of_H(seed, scale):
    """HiGHS reads its tolerances absolutely; on H·1e-20 the LP once gave 175 pairs for the 139 of H, reported
    as optimal. H and H·s have the same K, so the same split; the point of K scales by 1/s."""
    from .test_split_glue import glue_instance

    inst = glue_instance(seed)
    base = nonseparable_split(inst, glue=False)
    scaled = NTPInstance.from_counts(inst.embeddings * scale, inst.counts)
    out = nonseparable_split(scaled, glue=False)
    assert base.ok and out.ok, out.reason
    assert np.array_equal(out.nonseparable, base.nonseparable)
    assert [tuple(p) for p in out.nonseparable.tolist()] == independent_N(inst.embeddings, inst.support_mask())
    # the point still lies in K with margin about 1 on P and 0 on N, on the scaled H
    Z = scaled.embeddings @ out.D_classes[out.of_token].T
    mask = scaled.support_mask()
    level = np.array([Z[j, mask[j]].max() for j in range(scaled.m)])
    spread = np.array([Z[j, mask[j]].max() - Z[j, mask[j]].min() for j in range(scaled.m)])
    assert spread.max() < 1e-6
    Nmask = np.zeros_like(mask)
    Nmask[tuple(out.nonseparable.T)] = True
    gap = level[:, None] - Z
    assert gap[~mask & ~Nmask].min() > 0.5 and np.abs(gap[Nmask]).max() < 1e-6


def test_a_dual_that_does_not_vanish_on_H_leaves_the_split_undetermined(monkeypatch):
    """Without the scaling, the LP on H·1e-20 returns a wrong N as optimal; its dual's combination of the h_j
    is then of the size of its terms, and the split says so instead of giving that N."""
    import ntpcert.rows.scaling as scaling
    from .test_split_glue import glue_instance

    monkeypatch.setattr(scaling, "SCALE_EXPONENT", 10**6)
    inst = glue_instance(1)
    out = nonseparable_split(NTPInstance.from_counts(inst.embeddings * 1e-20, inst.counts), glue=False)
    assert not out.ok and "does not vanish on H" in out.reason
