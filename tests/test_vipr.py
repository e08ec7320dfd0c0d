"""VIPR export of the separability verdict (ntpcert.certificate.vipr).

Every export is re-read here by an exact reader written for this test alone (it shares no code with the
exporter): it parses the VIPR text, rebuilds the constraint system (6) from the instance's embeddings
and supports and compares it with the CON section, and checks the claim in Fractions: the SOL point
satisfies every constraint, or every ``lin`` derivation is a suitable combination that dominates what it
states and the last one is an absurdity 0 >= c > 0.

``viprchk`` (github.com/ambros-gleixner/VIPR) runs in addition when ``NTPCERT_VIPR_SRC`` names a checkout
of that repository and g++ and GMP are here: it is built once per session, as released and with the
one-line fix of its SOL check (released, solution i is checked only against constraint i; the fixed
build checks every constraint), see docs/certificates.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ntpcert.certificate.vipr import vipr_text, write_vipr
from ntpcert.cli.app import main
from ntpcert.experiments import strategies as nst
from ntpcert.instance import NTPInstance
from ntpcert.instance.io import write_npz
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.split_section import split_verdict

from .conftest import random_instance


# ---------------------------------------------------------------------------- the exact re-reader
class Refused(Exception):
    pass


def _num(tok: str) -> Fraction:
    if "." in tok or "e" in tok.lower():
        raise Refused(f"not an integer or p/q: {tok}")
    return Fraction(tok)


class _Tokens:
    def __init__(self, text: str):
        lines = text.split("\n")
        while lines and lines[0].startswith("%"):
            lines.pop(0)
        self.toks = " ".join(lines).split()
        self.k = 0

    def next(self) -> str:
        if self.k >= len(self.toks):
            raise Refused("unexpected end of file")
        self.k += 1
        return self.toks[self.k - 1]

    def expect(self, word: str) -> None:
        got = self.next()
        if got != word:
            raise Refused(f"expected {word}, read {got}")

    def int(self) -> int:
        return int(self.next())

    def sparse(self, n_vars: int) -> dict[int, Fraction]:
        out: dict[int, Fraction] = {}
        for _ in range(self.int()):
            i, a = self.int(), _num(self.next())
            if not 0 <= i < n_vars or i in out:
                raise Refused(f"bad or repeated variable index {i}")
            if a != 0:
                out[i] = a
        return out


def read_vipr(text: str) -> dict:
    """Parse the LP subset of VIPR 1.1 (no INT, ``lin`` reasons only) into Fractions."""
    t = _Tokens(text)
    t.expect("VER")
    if t.next() not in ("1.0", "1.1"):
        raise Refused("version")
    t.expect("VAR")
    n = t.int()
    names = [t.next() for _ in range(n)]
    t.expect("INT")
    if t.int() != 0:
        raise Refused("integer variables in an LP certificate")
    t.expect("OBJ")
    sense = t.next()
    obj = t.sparse(n)
    t.expect("CON")
    n_con, n_bounds = t.int(), t.int()
    cons = []
    for _ in range(n_con):
        name, s, rhs = t.next(), t.next(), _num(t.next())
        if s not in "EGL" or len(s) != 1:
            raise Refused(f"sense {s}")
        cons.append((name, s, rhs, t.sparse(n)))
    t.expect("RTP")
    kind = t.next()
    rtp = (kind,) if kind == "infeas" else (kind, t.next(), t.next())
    t.expect("SOL")
    sols = []
    for _ in range(t.int()):
        t.next()
        sols.append(t.sparse(n))
    t.expect("DER")
    ders = []
    for _ in range(t.int()):
        name, s, rhs = t.next(), t.next(), _num(t.next())
        coef = t.sparse(n)
        t.expect("{")
        if t.next() != "lin":
            raise Refused("only lin reasons are read")
        mult = {}
        for _ in range(t.int()):
            i, lam = t.int(), _num(t.next())
            if i in mult:
                raise Refused("repeated multiplier index")
            mult[i] = lam
        t.expect("}")
        t.int()
        ders.append((name, s, rhs, coef, mult))
    if t.k != len(t.toks):
        raise Refused("text after DER")
    return dict(names=names, sense=sense, obj=obj, cons=cons, bounds=n_bounds, rtp=rtp, sols=sols, ders=ders)


def _holds(con, x: dict[int, Fraction]) -> bool:
    _, s, rhs, coef = con[:4]
    lhs = sum((a * x.get(i, 0) for i, a in coef.items()), Fraction(0))
    return lhs == rhs if s == "E" else lhs >= rhs if s == "G" else lhs <= rhs


def _combine(cons: list, mult: dict) -> tuple[str, Fraction, dict]:
    """The suitable combination of the spec: (sense, rhs, lhs), or Refused when the signs mix."""
    signs = set()
    lhs: dict[int, Fraction] = {}
    rhs = Fraction(0)
    for i, lam in mult.items():
        if not 0 <= i < len(cons):
            raise Refused(f"multiplier index {i} out of range")
        _, s, r, coef = cons[i][:4]
        sg = {"G": 1, "E": 0, "L": -1}[s] * (1 if lam > 0 else -1 if lam < 0 else 0)
        if sg:
            signs.add(sg)
        for k, a in coef.items():
            lhs[k] = lhs.get(k, Fraction(0)) + lam * a
        rhs += lam * r
    if len(signs) > 1:
        raise Refused("not a suitable combination: mixed signs")
    lhs = {k: a for k, a in lhs.items() if a != 0}
    return ({1: "G", -1: "L"}[signs.pop()] if signs else "E"), rhs, lhs


def _absurd(s: str, rhs: Fraction, lhs: dict) -> bool:
    return not lhs and ((s == "G" and rhs > 0) or (s == "L" and rhs < 0) or (s == "E" and rhs != 0))


def _dominates(c: tuple, d: tuple) -> bool:
    (s1, r1, l1), (s2, r2, l2) = c, d
    if _absurd(s1, r1, l1):
        return True
    if l1 != l2:
        return False
    if s2 == "G":
        return s1 in "GE" and r1 >= r2
    if s2 == "L":
        return s1 in "LE" and r1 <= r2
    return s1 == "E" and r1 == r2


def expected_constraints(inst: NTPInstance) -> dict:
    """(6) built from the definition: ``{name: (sense, rhs, coef)}`` with vec(W) index v*d + i."""
    H, mask = inst.embeddings, inst.support_mask()
    d = inst.d
    out = {}
    for j in range(inst.m):
        S = [int(v) for v in np.flatnonzero(mask[j])]
        a = min(S)
        h = [Fraction(float(x)) for x in H[j]]

        def row(p, q):
            return {k: c for k, c in ([(p * d + i, h[i]) for i in range(d)] + [(q * d + i, -h[i]) for i in range(d)])
                    if c != 0}

        for z in S[1:]:
            out[f"e{j}_{z}"] = ("E", Fraction(0), row(z, a))
        for v in range(inst.V):
            if v not in S:
                out[f"g{j}_{v}"] = ("G", Fraction(1), row(a, v))
    return out


def recheck(text: str, inst: NTPInstance) -> bool:
    """The claim of the VIPR ``text`` about ``inst``, re-checked exactly: True for "(6) is feasible",
    False for "(6) is infeasible"; Refused when the text does not show what it states."""
    c = read_vipr(text)
    V, d = inst.V, inst.d
    if c["names"] != [f"w{v}_{i}" for v in range(V) for i in range(d)]:
        raise Refused("the variables are not vec(W)")
    if c["sense"] != "min" or c["obj"] or c["bounds"] != 0:
        raise Refused("the objective is not min 0")
    want = expected_constraints(inst)
    got = {name: (s, r, coef) for name, s, r, coef in c["cons"]}
    if len(got) != len(c["cons"]) or got != want:
        raise Refused("the constraints are not (6) of the instance")
    if c["rtp"] == ("range", "-inf", "0"):
        if c["ders"] or not c["sols"]:
            raise Refused("a feasibility claim is shown by a solution alone")
        for x in c["sols"]:
            if all(_holds(con, x) for con in c["cons"]):
                return True
        raise Refused("no solution satisfies every constraint")
    if c["rtp"] != ("infeas",) or not c["ders"]:
        raise Refused(f"unexpected relation {c['rtp']}")
    cons = [con[:4] for con in c["cons"]]
    for name, s, rhs, coef, mult in c["ders"]:
        if not _dominates(_combine(cons, mult), (s, rhs, coef)):
            raise Refused(f"{name}: the combination does not dominate it")
        cons.append((name, s, rhs, coef))
    if not _absurd(*cons[-1][1:4]):
        raise Refused("the last derived constraint is no absurdity")
    return False


# ---------------------------------------------------------------------------- viprchk, where it can be built
_PATCH = ("if( !satisfies(constraint[i], solutionSpecified) )", "if( !satisfies(constraint[j], solutionSpecified) )")


@pytest.fixture(scope="session")
def viprchk(tmp_path_factory):
    """``{"released": path, "fixed": path}`` of viprchk built from ``$NTPCERT_VIPR_SRC``, or None."""
    src = os.environ.get("NTPCERT_VIPR_SRC")
    cpp = os.path.join(src, "code", "viprchk.cpp") if src else None
    if not cpp or not os.path.isfile(cpp) or shutil.which("g++") is None:
        return None
    out = tmp_path_factory.mktemp("viprchk")
    code = open(cpp).read()
    assert code.count(_PATCH[0]) == 1, "the SOL check of viprchk.cpp changed: revisit the fix in this test"
    built = {}
    for label, text in (("released", code), ("fixed", code.replace(*_PATCH))):
        (out / f"{label}.cpp").write_text(text)
        exe = out / label
        subprocess.run(["g++", "-O1", "-std=c++11", "-o", str(exe), str(out / f"{label}.cpp"), "-lgmpxx", "-lgmp"],
                       check=True, capture_output=True, timeout=300)
        built[label] = str(exe)
    return built


def _viprchk_accepts(exe: str, text: str, tmp_path, name: str) -> bool:
    f = tmp_path / f"{name}.vipr"
    f.write_text(text)
    r = subprocess.run([exe, str(f)], capture_output=True, text=True, timeout=60)
    return r.returncode == 0


# ---------------------------------------------------------------------------- instances
def _corpus() -> list[tuple[str, NTPInstance, dict]]:
    """Deterministic instances of every witness route, separable and not (name, instance, options)."""
    rng = np.random.default_rng(20240)
    out = []
    shapes = [(6, 2, 5, True), (8, 3, 6, True), (10, 4, 6, False), (5, 6, 4, True), (5, 6, 4, False),
              (4, 3, 5, False), (7, 3, 4, False)]
    for m, d, V, lemma1 in shapes:
        for s in range(3):
            out.append((f"random-{m}x{d}x{V}-{lemma1}-{s}", random_instance(rng, m, d, V),
                        {"use_lemma1": lemma1}))
    for s in range(3):  # one-hot supports: the LP's point, and structured solver routes
        out.append((f"onehot-{s}", random_instance(rng, 6, 3, 4, kmin=1, kmax=1),
                    {"use_lemma1": False, "separability_solver": "structured"}))
        out.append((f"structured-{s}", random_instance(rng, 7, 3, 5),
                    {"use_lemma1": False, "separability_solver": "structured"}))
    return out


_CORPUS = _corpus()


def _partly_separable() -> NTPInstance:
    """h_1 = 2 h_0 with supports {0} and {1}: N holds (0, 1) and (1, 0); token 3 lies in no support."""
    H = np.array([[1.0, 2.0], [2.0, 4.0], [1.0, -1.0], [1.0, 0.5]])
    C = np.array([[3, 0, 0, 0], [0, 2, 0, 0], [1, 0, 2, 0], [0, 1, 1, 0]])
    return NTPInstance.from_counts(H, C)


def _verdict(inst: NTPInstance, options: dict):
    return exact_certify(inst, svm=False, **options).separability


# ---------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name,inst,options", _CORPUS, ids=[c[0] for c in _CORPUS])
def test_export_rereads_to_the_verdict(name, inst, options):
    verdict = _verdict(inst, options)
    assert verdict.holds is not None, verdict.reason
    export, why = vipr_text(inst, verdict)
    assert export is not None, why
    assert recheck(export.text, inst) is verdict.holds
    assert export.relation == ("feasible" if verdict.holds else "infeasible")
    assert export.n_vars == inst.V * inst.d


def test_corpus_has_both_verdicts_and_every_witness():
    kinds = {}
    for _, inst, options in _CORPUS:
        v = _verdict(inst, options)
        kinds.setdefault(v.witness.kind, 0)
        kinds[v.witness.kind] += 1
    assert {"feasible-point", "embeddings-full-rank", "farkas-ray"} <= set(kinds), kinds
    assert len(_CORPUS) >= 20


def test_split_certificate_exports_as_its_ray():
    inst = _partly_separable()
    verdict = split_verdict(inst)
    assert verdict.witness.kind == "split", verdict.reason
    export, why = vipr_text(inst, verdict)
    assert export is not None, why
    assert recheck(export.text, inst) is False


def test_undetermined_verdict_is_not_exported():
    from ntpcert.verdict import Verdict

    inst = _CORPUS[0][1]
    export, why = vipr_text(inst, Verdict.undetermined("time limit"))
    assert export is None and "time limit" in why


def _forge_point(text: str) -> str:
    """Move one entry of the point so that the lowest row of a constraint drops to 1/2 below its bound."""
    c = read_vipr(text)
    x = c["sols"][0]
    best = None
    for con in c["cons"]:
        _, s, rhs, coef = con
        if s == "G" and coef:
            val = sum((a * x.get(i, 0) for i, a in coef.items()), Fraction(0))
            if best is None or val - rhs < best[0]:
                best = (val - rhs, coef)
    slack, coef = best
    k, a = next(iter(coef.items()))
    x = dict(x)
    x[k] = x.get(k, Fraction(0)) - (slack + Fraction(1, 2)) / a
    lines = text.split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("point "))
    entries = sorted((i2, v) for i2, v in x.items() if v != 0)
    lines[i] = "point " + " ".join([str(len(entries))] + [f"{i2} {v}" for i2, v in entries])
    return "\n".join(lines)


def _forge_multiplier(text: str) -> str:
    """Add 1 to the first multiplier of the derivation."""
    lines = text.split("\n")
    i = next(n for n, line in enumerate(lines) if "{ lin" in line)
    head, rest = lines[i].split("{ lin ")
    toks = rest.split()
    toks[2] = str(Fraction(toks[2]) + 1)
    lines[i] = head + "{ lin " + " ".join(toks)
    return "\n".join(lines)


def _forge_constraint(text: str) -> str:
    """Drop the last constraint's right-hand side from 1 to 0 (the LP is no longer (6))."""
    lines = text.split("\n")
    i = max(n for n, line in enumerate(lines) if line.startswith("g"))
    lines[i] = lines[i].replace(" G 1 ", " G 0 ", 1)
    return "\n".join(lines)


@pytest.mark.parametrize("name,inst,options", _CORPUS, ids=[c[0] for c in _CORPUS])
def test_forged_exports_are_refused(name, inst, options):
    verdict = _verdict(inst, options)
    export, _ = vipr_text(inst, verdict)
    forged = [_forge_point(export.text)] if verdict.holds else [_forge_multiplier(export.text)]
    if any(line.startswith("g") for line in export.text.split("\n")):
        forged.append(_forge_constraint(export.text))
    for text in forged:
        assert text != export.text
        with pytest.raises(Refused):
            recheck(text, inst)


def test_rereader_refuses_a_feasible_claim_on_an_infeasible_instance():
    name, inst, options = next(c for c in _CORPUS if _verdict(c[1], c[2]).holds is False)
    export, _ = vipr_text(inst, _verdict(inst, options))
    from ntpcert.certificate.vipr import feasible_text

    with pytest.raises(Refused):
        recheck(feasible_text(inst, np.zeros((inst.V, inst.d), dtype=object)).text, inst)
    with pytest.raises(ValueError, match="not a Farkas ray"):
        from ntpcert.certificate.vipr import infeasible_text

        infeasible_text(inst, {(0, 0): Fraction(1)})


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(nst.ntp_instances(max_m=5, max_d=4, max_V=5, embedding="integer")
       | nst.ntp_instances(max_m=4, max_d=5, max_V=4, embedding="gaussian")
       | nst.ntp_instances(max_m=5, max_d=3, max_V=4, embedding="duplicated")
       | nst.ntp_instances(max_m=5, max_d=3, max_V=4, embedding="low-rank", distribution="fractions"))
def test_strategy_instances_export_and_reread(inst):
    verdict = _verdict(inst, {"use_lemma1": False})
    export, why = vipr_text(inst, verdict)
    if verdict.holds is None:
        assert export is None and why
        return
    assert recheck(export.text, inst) is verdict.holds


def test_cli_vipr_out(tmp_path, capsys):
    inst = _CORPUS[0][1]
    data = tmp_path / "inst.npz"
    write_npz(inst, data)
    out = tmp_path / "sep.vipr"
    assert main(["certify", str(data), "--exact", "--no-svm", "--vipr-out", str(out)]) == 0
    assert recheck(out.read_text(), inst) is _verdict(inst, _CORPUS[0][2]).holds
    assert main(["certify", str(data), "--vipr-out", str(tmp_path / "x.vipr")]) == 2
    assert "--vipr-out" in capsys.readouterr().err
    assert not (tmp_path / "x.vipr").exists()


def test_write_vipr_writes_what_it_returns(tmp_path):
    name, inst, options = _CORPUS[3]
    export, _ = write_vipr(tmp_path / "a.vipr", inst, _verdict(inst, options))
    assert (tmp_path / "a.vipr").read_text() == export.text


def test_viprchk_checks_the_exports(viprchk, tmp_path):
    """At least 20 exports accepted by viprchk (released and fixed); forged ones refused (a forged point by
    the fixed build: the released one checks solution i only against constraint i)."""
    if viprchk is None:
        pytest.skip("viprchk not built: set NTPCERT_VIPR_SRC to a checkout of github.com/ambros-gleixner/VIPR "
                    "(needs g++ and GMP); the exact re-reader above checks every export without it")
    accepted = 0
    cases = [(n, i, o) for n, i, o in _CORPUS] + [("split", _partly_separable(), None)]
    for name, inst, options in cases:
        verdict = split_verdict(inst) if options is None else _verdict(inst, options)
        export, _ = vipr_text(inst, verdict)
        assert recheck(export.text, inst) is verdict.holds
        for label in ("released", "fixed"):
            assert _viprchk_accepts(viprchk[label], export.text, tmp_path, f"{name}-{label}"), (name, label)
        accepted += 1
        if verdict.holds:
            assert not _viprchk_accepts(viprchk["fixed"], _forge_point(export.text), tmp_path, f"{name}-forged")
        else:
            forged = _forge_multiplier(export.text)
            for label in ("released", "fixed"):
                assert not _viprchk_accepts(viprchk[label], forged, tmp_path, f"{name}-forged-{label}")
    assert accepted >= 20
