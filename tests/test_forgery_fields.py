"""Forgeries of single fields, refused by ``ntpcert verify`` and by the standalone checker alike.

Every forged certificate is re-sealed with a correct checksum, so that only the schema and the exact checks
can catch it. The kinds: a modulus above 2^31 in each modulus field (residues mod p once wrapped in int64
there, and a rank witness mod 2^61 - 1 "proved" data compatible and separable that is neither), a modulus
outside the format's range (a prime 2 <= p < 2^63), a float or boolean where an integer index belongs,
embeddings written as strings, and a ``source.vocabulary`` record that does not describe the embedded
instance. Two property tests: random moduli of 2-64 bits in each modulus field, and every schema field of a
few genuine certificates replaced by a value of each JSON type.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import partial

import flint
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntpcert import NTPInstance
from ntpcert.certificate import jsonio
from ntpcert.certificate.checker import verify_text
from ntpcert.cli.app import main
from ntpcert.cli.verify import EXIT_INVALID
from ntpcert.exact.modular import MODULUS_BOUND, PRIMES, is_modulus
from ntpcert.instance.io import write_json
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline import parts
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.explain import why_not_with_sections

from .conftest import random_instance
from .standalone import PATH as STANDALONE_PATH
from .standalone import standalone


#: 2^61 - 1, a Mersenne prime: the modulus of the red-team forgery.
M61 = 2**61 - 1


def next_prime(n: int) -> int:
    n += 1
    while not flint.fmpz(n).is_prime():
        n += 1
    return n


def prev_prime(n: int) -> int:
    n -= 1
    while not flint.fmpz(n).is_prime():
        n -= 1
    return n


#: The largest prime the format allows, and the smallest one past its bound (and past flint's word size).
LARGEST_MODULUS = prev_prime(MODULUS_BOUND)
PAST_BOUND = next_prime(MODULUS_BOUND)
PAST_WORD = next_prime(2**64)


# ---------------------------------------------------------------------------- genuine certificates
def _both_false() -> NTPInstance:
    """h_1 = 2 h_0 with log-odds log 2 and log 5, and context 1's support strictly larger: neither compatible
    nor separable, rank H = 1. The entries' exponents are 17 bits apart, so that their residues mod 2^61 - 1,
    once formed in int64, wrapped: rank 2 'mod p'."""
    h = np.array([0.1257302210933933, -138521.98913054017])
    return NTPInstance.from_counts(np.array([h, 2 * h]), [[1, 2, 0], [1, 5, 1]])


def _certify(inst: NTPInstance, **kw) -> dict:
    rep = exact_certify(inst, **kw)
    assert rep.check.valid, rep.check.reason
    return json.loads(jsonio.dumps(rep.certificate))


SOURCE = {"kind": "model", "files": [["model.safetensors", "0" * 64]], "corpus_sha256": "1" * 64,
          "context": "tokens:2", "bos": False, "embeddings": "model",
          "vocabulary": {"V": 10, "V_reduced": 4, "observed": 3, "merged": 7, "representative": 5}}


@pytest.fixture(scope="module")
def certs() -> dict[str, dict]:
    out = {}
    why_not = partial(why_not_with_sections, separability_solver="auto")
    out["both_false"] = _certify(_both_false(), svm=False, why_not=why_not)
    # a rank witness: row 0 peeled by column 0, the core rows 1, 2 on columns 1, 2 of rank 2 mod p
    out["witness"] = _certify(NTPInstance.from_counts([[1.0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 2, 0]],
                                                      [[1, 2, 0], [0, 1, 3], [2, 0, 1]]), svm=False)
    # contexts 0 and 1 share an embedding and their ratios: a null vector, rank of G mod p
    out["basis"] = _certify(NTPInstance.from_counts([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
                                                    [[1, 2, 0], [1, 2, 0], [0, 1, 3]]), svm=True)
    # separable by an explicit W, with the NTP-SVM pair and the excess bracket
    out["sep_W"] = _certify(random_instance(np.random.default_rng(1), 4, 6, 5, 1, 4), use_lemma1=False, excess=True)
    # the last token follows no context: a model's representative of its unseen tokens
    out["source"] = _certify(NTPInstance.from_counts(np.eye(3), [[1, 2, 0, 0], [0, 1, 3, 0], [2, 0, 1, 0]]),
                             svm=False, source=SOURCE)
    # one-hot contexts: the embeddings written sparse, a rank witness of pivots only
    rng = np.random.default_rng(4)
    out["onehot"] = _certify(NTPInstance.from_counts(np.eye(40)[rng.permutation(40)], rng.integers(0, 3, (40, 5)) + np.eye(40, 5, dtype=np.int64)), svm=False)
    # probabilities: as floats (taken exactly), and as fraction strings with weights
    H = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 2.0], [1.0, 0.0, 1.0]])
    out["probs_floats"] = _certify(NTPInstance.from_probs(H, [[0.25, 0.75, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]),
                                   svm=False)
    out["probs_strings"] = _certify(NTPInstance.from_probs(H, [["1/3", "2/3", "0"], ["1/2", "0", "1/2"],
                                                               ["0", "0", "1"]], ["1/4", "1/4", "1/2"]), svm=False)
    with pytest.MonkeyPatch.context() as mp:  # the frequent-token reduction, as on a large system
        mp.setattr(dm, "GRAM_MAX_ROWS", 1)
        mp.setattr(parts, "PART_MIN_CONTEXTS", 10**9)
        out["frequent"] = _certify(NTPInstance.from_counts([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
                                                           [[1, 2], [1, 3], [1, 6]]), svm=False)
    c = out
    assert c["both_false"]["claims"]["compatible"] is False and c["both_false"]["claims"]["separable"] is False
    assert "why_not_separable" in c["both_false"] and "why_not_compatible" in c["both_false"]
    assert c["witness"]["compatibility"]["embeddings_rank_witness"]["modulus"] == PRIMES[0]
    assert len(c["witness"]["compatibility"]["embeddings_rank_witness"]["pivots"]) == 1
    assert "rank_modulus" in c["basis"]["compatibility"] and c["basis"]["compatibility"]["null_space_basis"]
    assert c["basis"]["svm"] is not None and "W" in c["sep_W"]["separability"] and c["sep_W"]["excess"] is not None
    assert c["source"]["source"]["vocabulary"]["V_reduced"] == 4
    assert "frequent_tokens_modulus" in c["frequent"]["compatibility"]
    assert "embeddings_sparse" in c["onehot"]["instance"]["embedded"]
    assert c["probs_floats"]["probabilities_exact_from_floats"] is True
    assert c["probs_strings"]["instance"]["embedded"]["probs"][0][0] == "1/3"
    return out


# ---------------------------------------------------------------------------- the harness
def _text(cert: dict) -> str:
    text = jsonio.dumps(cert)
    assert json.loads(text)["checksum"] == jsonio.checksum(json.loads(text))
    return text


def _refused(text: str, field: str, needle: str | None = None) -> str:
    """Both checkers refuse ``text``."""
    v = verify_text(text)
    assert not v.valid, f"verify accepted a forged {field}"
    assert "\n" not in v.reason and (needle is None or needle in v.reason), v.reason
    ok, line = standalone(text)
    assert not ok, f"the standalone checker accepted a forged {field}: {line}"
    return v.reason


def _accepted(text: str) -> None:
    v = verify_text(text)
    assert v.valid, v.reason
    ok, line = standalone(text)
    assert ok, line


# ---------------------------------------------------------------------------- true claims by a modulus
#: Every field that names a modulus: (section, key), the rank witness's as ``embeddings_rank_witness.modulus``.
MODULUS_FIELDS = [("compatibility", "rank_modulus"), ("compatibility", "embeddings_rank_modulus"),
                  ("compatibility", "frequent_tokens_modulus"), ("compatibility", "embeddings_rank_witness.modulus"),
                  ("separability", "embeddings_rank_modulus"), ("separability", "embeddings_rank_witness.modulus")]


def _claim_true(cert: dict, section: str, key: str, p) -> dict:
    """``cert`` (both claims false) with ``section`` claimed true by the modulus ``p`` in ``key``."""
    out = copy.deepcopy(cert)
    m = out["instance"]["m"]
    comp = out["compatibility"]
    if key == "embeddings_rank_witness.modulus":
        value = {"embeddings_rank_witness": {"pivots": [], "core_rows": list(range(m)), "core_cols": list(range(m)),
                                            "core_rank": m, "modulus": p}}
    else:
        value = {key: p}
    if section == "compatibility":
        out["compatibility"] = {"claim": True, "n_eq": comp["n_eq"], "dim_F": comp["n_eq"], "primes": comp["primes"],
                                "null_space_basis": [], **value}
        out.pop("why_not_compatible", None)
        out["claims"]["compatible"] = True
    else:
        out["separability"] = {"claim": True, **value}
        out.pop("why_not_separable", None)
        out["claims"]["separable"] = True
    out["claims"]["entropy_bound_reachable"] = False if False in (out["claims"]["compatible"],
                                                                  out["claims"]["separable"]) else True
    return out


@pytest.mark.parametrize("section,key", MODULUS_FIELDS)
@pytest.mark.parametrize("p", [M61, 2**31 + 11, LARGEST_MODULUS, PAST_BOUND, PAST_WORD, 2**61, 1, 0])
def test_a_false_claim_made_true_by_a_modulus_is_refused_by_both(certs, section, key, p):
    text = _text(_claim_true(certs["both_false"], section, key, p))
    reason = _refused(text, f"{section}.{key}")
    if not is_modulus(p):  # outside the range, or not a prime: said so, whatever the rank would be
        assert "prime 2 <= p < 2^63" in reason, reason
        assert "prime 2 <= p < 2^63" in standalone(text)[1]


def test_the_red_team_witness_mod_2_61_minus_1_is_refused(certs, tmp_path, capsys):
    """The reported forgery, through the CLI: compatible and separable 'by Lemma 1' mod 2^61 - 1."""
    cert = _claim_true(_claim_true(certs["both_false"], "compatibility", "embeddings_rank_witness.modulus", M61),
                       "separability", "embeddings_rank_witness.modulus", M61)
    assert cert["claims"] == {"compatible": True, "separable": True, "entropy_bound_reachable": True, "svm": None}
    path = tmp_path / "forged.json"
    path.write_text(_text(cert))
    assert main(["verify", str(path)]) == EXIT_INVALID
    assert capsys.readouterr().out.splitlines()[0] == (
        f"INVALID: compatibility.embeddings_rank_witness: the core has rank 1 mod {M61}, not 2")
    run = subprocess.run([sys.executable, str(STANDALONE_PATH), str(path)], capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout.startswith("INVALID: ") and not run.stderr


@pytest.mark.parametrize("p", [PAST_BOUND, PAST_WORD, 2**64, 10**30 + 57])
def test_the_standalone_checker_refuses_a_modulus_past_the_bound_in_one_line(certs, tmp_path, p):
    """It once raised OverflowError (a traceback, exit 1) on a modulus of 2^64 or more."""
    path = tmp_path / "big.json"
    path.write_text(_text(_claim_true(certs["both_false"], "compatibility", "rank_modulus", p)))
    run = subprocess.run([sys.executable, str(STANDALONE_PATH), str(path)], capture_output=True, text=True)
    assert run.returncode == 1 and not run.stderr, run.stderr
    assert run.stdout == f"INVALID: compatibility.rank_modulus: {p} is not a prime 2 <= p < 2^63\n"


@pytest.mark.parametrize("p", [M61, LARGEST_MODULUS])
def test_large_moduli_within_the_bound_prove_true_claims_in_both(certs, p):
    """The other side of the bound: a genuine claim re-proved mod a prime of 61 or 63 bits verifies in both."""
    w = copy.deepcopy(certs["witness"])
    for sec in ("compatibility", "separability"):
        w[sec]["embeddings_rank_witness"]["modulus"] = p
    _accepted(_text(w))
    b = copy.deepcopy(certs["basis"])
    b["compatibility"]["rank_modulus"] = p
    _accepted(_text(b))


def test_the_bound_is_one_constant_of_both_checkers():
    from ntpcert.certificate.schema import MAX_MODULUS

    from .standalone import checker

    assert MODULUS_BOUND == MAX_MODULUS == 2**63
    assert [checker.is_prime(p, 2**63) for p in (2, LARGEST_MODULUS, PAST_BOUND, 4)] == [True, True, False, False]
    assert [is_modulus(p) for p in (2, LARGEST_MODULUS, PAST_BOUND, 4, True, 7.0)] == [True, True, False, False,
                                                                                      False, False]


# a modulus of 2 to 64 bits, a prime or not, in each modulus field
_moduli = st.integers(2, 64).flatmap(lambda b: st.integers(2 ** (b - 1), 2**b - 1)).flatmap(
    lambda n: st.sampled_from([n, next_prime(n)]))


def _moduli_property(certs, field, p):
    section, key = field
    text = _text(_claim_true(certs["both_false"], section, key, p))
    assert not verify_text(text).valid, f"verify accepted a false claim with {section}.{key} = {p}"
    assert not standalone(text)[0], f"the standalone checker accepted a false claim with {section}.{key} = {p}"
    # on genuine true claims: accepted only for a modulus of the format, and by both or neither
    for name, sections in (("witness", ("compatibility", "separability")), ("basis", ("compatibility",))):
        cert = copy.deepcopy(certs[name])
        for sec in sections:
            where = cert[sec]["embeddings_rank_witness"] if name == "witness" else cert[sec]
            where["modulus" if name == "witness" else "rank_modulus"] = p
        text = _text(cert)
        valid = verify_text(text).valid
        assert not valid or is_modulus(p)
        assert valid == standalone(text)[0], (name, p)


@settings(max_examples=60)
@given(field=st.sampled_from(MODULUS_FIELDS), p=_moduli)
def test_random_moduli_never_prove_a_false_claim(certs, field, p):
    _moduli_property(certs, field, p)


@pytest.mark.slow
@settings(max_examples=600)
@given(field=st.sampled_from(MODULUS_FIELDS), p=_moduli)
def test_random_moduli_never_prove_a_false_claim_thoroughly(certs, field, p):
    _moduli_property(certs, field, p)


# ---------------------------------------------------------------------------- integers are integers
@pytest.mark.parametrize("where", ["pivots.0.0", "pivots.0.1", "core_rows.0", "core_cols.1", "core_rank"])
@pytest.mark.parametrize("kind", [float, bool, str])
@pytest.mark.parametrize("section", ["compatibility", "separability"])
def test_a_rank_witness_holds_integers_only(certs, where, kind, section):
    cert = copy.deepcopy(certs["witness"])
    obj, *path = [cert[section]["embeddings_rank_witness"]] + where.split(".")
    for k in path[:-1]:
        obj = obj[int(k) if type(obj) is list else k]
    last = int(path[-1]) if type(obj) is list else path[-1]
    obj[last] = kind(obj[last])  # 5 -> 5.0, True, "5": the same number, another type
    _refused(_text(cert), f"{section}.embeddings_rank_witness", f"{section}.embeddings_rank_witness")


def test_a_float_index_was_the_only_change(certs):
    """The control of the test above: the same edit with an int verifies in both."""
    cert = copy.deepcopy(certs["witness"])
    w = cert["compatibility"]["embeddings_rank_witness"]
    w["pivots"][0][0] = int(float(w["pivots"][0][0]))
    _accepted(_text(cert))


# ---------------------------------------------------------------------------- embeddings are numbers
@pytest.mark.parametrize("spell", [str, repr, lambda x: f"{x}/1"])
def test_embeddings_written_as_strings_are_refused(certs, spell):
    cert = copy.deepcopy(certs["both_false"])
    rows = cert["instance"]["embedded"]["embeddings"]
    rows[0][0] = spell(rows[0][0])
    _refused(_text(cert), "instance.embedded.embeddings", "instance.embedded.embeddings[0][0]")
    cert = copy.deepcopy(certs["witness"])
    rec = cert["instance"]["embedded"]
    if "embeddings_sparse" in rec:
        rec["embeddings_sparse"][0][2] = spell(rec["embeddings_sparse"][0][2])
        _refused(_text(cert), "instance.embedded.embeddings_sparse", "instance.embedded.embeddings_sparse[0]")


def test_data_with_string_embeddings_is_refused_by_verify(certs, tmp_path, capsys):
    inst = _both_false()
    data = tmp_path / "data.json"
    write_json(inst, data)
    cert = tmp_path / "c.json"
    cert.write_text(_text(certs["both_false"]))
    obj = json.loads(data.read_text())
    obj["embeddings"] = [[repr(x) for x in row] for row in obj["embeddings"]]
    data.write_text(json.dumps(obj))
    assert main(["verify", str(cert), "--data", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "embeddings[0, 0]: value '0.1257302210933933' is a string" in err[0], err


# ---------------------------------------------------------------------------- source against the instance
def test_the_genuine_source_record_is_checked_against_the_instance(certs):
    v = verify_text(_text(certs["source"]))
    assert v.valid, v.reason
    assert any(c.startswith("source.vocabulary: V' = 4, 3 observed tokens and a representative of 7") for c in v.checks)


def _vocabulary(**kw) -> dict:
    return {**SOURCE, "vocabulary": {**SOURCE["vocabulary"], **kw}}


@pytest.mark.parametrize("name,source,needle", [
    # sums consistent, but V' = 5 on an instance of 4 tokens
    ("source", _vocabulary(V_reduced=5, observed=4, merged=6), "source.vocabulary.V_reduced: 5"),
    # nothing merged, so all 4 tokens observed, but token 3 follows no context
    ("source", _vocabulary(V=4, observed=4, merged=0, representative=None), "source.vocabulary.observed: 4"),
    # every token of 'basis' is observed: the representative (its last token) follows a context
    ("basis", _vocabulary(V=10, V_reduced=3, observed=2, merged=8, representative=4),
     "source.vocabulary.representative"),
    ("basis", _vocabulary(V=3, V_reduced=3, observed=3, merged=0, representative=None), None),  # the control
])
def test_a_source_vocabulary_that_does_not_describe_the_instance_is_refused(certs, name, source, needle):
    cert = copy.deepcopy(certs[name])
    cert["source"] = source
    if needle is None:
        _accepted(_text(cert))
        return
    _refused(_text(cert), "source", needle)


# ---------------------------------------------------------------------------- every field, every type
def _sections(cert: dict):
    """(path, schema section) of every object of ``cert`` that a section of the schema describes."""
    yield (), "certificate"
    yield ("instance",), "instance"
    rec = cert["instance"]["embedded"]
    yield ("instance", "embedded"), "instance.embedded/" + ("counts" if "counts" in rec else
                                                            "counts_sparse" if "counts_sparse" in rec else "probs")
    yield ("claims",), "claims"
    if cert["claims"]["svm"] is not None:
        yield ("claims", "svm"), "claims.svm"
    for name in ("compatibility", "separability"):
        claim = cert[name]["claim"]
        yield (name,), f"{name}/{'null' if claim is None else str(claim).lower()}"
        if "embeddings_rank_witness" in cert[name]:
            yield (name, "embeddings_rank_witness"), "rank_witness"
    if "W_star" in cert["compatibility"]:
        yield ("compatibility", "W_star"), "compatibility.W_star"
    if cert.get("svm") is not None:
        yield ("svm",), "svm"
        if "W_factored" in cert["svm"]:
            yield ("svm", "W_factored"), "svm.W_factored"
    if cert.get("excess") is not None:
        yield ("excess",), "excess"
    if "why_not_separable" in cert:
        yield ("why_not_separable",), "why_not_separable"
        for k in range(len(cert["why_not_separable"]["deletions"])):
            yield ("why_not_separable", "deletions", k), "why_not_separable.deletion"
    if "why_not_compatible" in cert:
        yield ("why_not_compatible",), "why_not_compatible"
    if "source" in cert:
        yield ("source",), "source"
        if "vocabulary" in cert["source"]:
            yield ("source", "vocabulary"), "source.vocabulary"


def _fields(cert: dict) -> list[tuple]:
    """Every (path to a value) of ``cert`` that is a key of its schema section, and, inside a list or an
    object that no section describes, the path to its first entry, all the way down, then every entry of
    the innermost list (``counts[0][0]``, ``pivots[0][1]``, each part of a sparse vector's first entry)."""
    out = []
    described = {path for path, _ in _sections(cert)}
    for path, _ in _sections(cert):
        obj = cert
        for k in path:
            obj = obj[k]
        for key in obj:
            sub, value = path + (key,), obj[key]
            out.append(sub)
            while sub not in described and type(value) in (list, dict) and value:
                if type(value) is list and all(type(x) not in (list, dict) for x in value):
                    out += [sub + (i,) for i in range(min(len(value), 3))]
                    break
                first = 0 if type(value) is list else next(iter(value))
                sub, value = sub + (first,), value[first]
                out.append(sub)
    return out


#: A value of each JSON type, and integers past every bound of the format.
VALUES = [True, False, 0.5, 3.0, "x", "1/2", [], [1], {}, {"a": 1}, None, 10**400, 2**64, 2**63, -1]

CERT_NAMES = ["both_false", "witness", "basis", "sep_W", "source", "frequent", "onehot", "probs_floats",
              "probs_strings"]


def _values(original) -> list:
    """:data:`VALUES`, and the original number under another type (5 -> 5.0, 1 -> true, 2.0 -> 2)."""
    if type(original) is int:
        return VALUES + [float(original)] + ([bool(original)] if original in (0, 1) else [])
    if type(original) is float and original.is_integer() and abs(original) < 2**53:
        return VALUES + [int(original)]
    if type(original) is bool:
        return VALUES + [int(original), float(original)]
    return VALUES


def _at(cert: dict, path: tuple):
    obj = cert
    for k in path:
        obj = obj[k]
    return obj


def _field_name(path: tuple) -> str:
    return ".".join(str(k) for k in path if type(k) is str)


def _substitution_property(certs, name: str, path: tuple, value) -> None:
    genuine = certs[name]
    cert = copy.deepcopy(genuine)
    obj = cert
    for k in path[:-1]:
        obj = obj[k]
    original = obj[path[-1]]
    if original == value and type(original) is type(value):
        return
    obj[path[-1]] = value
    text = jsonio.dumps(cert, reseal=path != ("checksum",))
    v = verify_text(text)
    field = _field_name(path)
    if v.valid:  # the value happens to be valid there (of the same type, or null): nothing claimed may change
        assert type(value) is type(original) or value is None or _same_number(path, original, value), (
            f"{name}: verify accepted {field} = {value!r}")
        assert v.claims == genuine["claims"], (name, field, value)
        return
    assert "\n" not in v.reason and not re.search(r"\b[A-Z][a-z]+Error\b", v.reason), v.reason  # a field, not a crash
    ok, line = standalone(text)
    assert not ok, (
        f"{name}: the standalone checker accepted {field} = {value!r}: {line}")


def _same_number(path: tuple, original, value) -> bool:
    """Whether ``value`` is ``original`` written as the other kind of JSON number where the format takes a
    number (an integer or a float, the same binary64): an embedding, or an entry of the NTP-SVM's base."""
    field = _field_name(path)
    slot = field in ("instance.embedded.embeddings", "svm.W_factored.base") or (
        field == "instance.embedded.embeddings_sparse" and path[-1] == 2)
    return slot and {type(original), type(value)} <= {int, float} and original == value


def _all_substitutions(certs):
    return [(name, path, value) for name in CERT_NAMES for path in _fields(certs[name])
            for value in _values(_at(certs[name], path))]


@settings(max_examples=300)
@given(data=st.data())
def test_every_schema_field_of_the_wrong_type_is_refused(certs, data):
    name = data.draw(st.sampled_from(CERT_NAMES))
    path = data.draw(st.sampled_from(_fields(certs[name])))
    value = data.draw(st.sampled_from(_values(_at(certs[name], path))))
    _substitution_property(certs, name, path, value)


def test_the_schema_walk_reaches_every_section(certs):
    seen = {section for name in CERT_NAMES for _, section in _sections(certs[name])}
    from ntpcert.certificate.schema import SCHEMA

    assert set(SCHEMA) - seen <= {"instance.embedded/probs", "instance.embedded/counts_sparse", "compatibility/null",
                                  "separability/null", "svm.W_factored", "compatibility.W_star",
                                  "split", "source.reader"}, set(SCHEMA) - seen
    # split: forged field by field in tests/test_split.py; source.reader (a model read through a library's API)
    # in tests/test_hooked.py


@pytest.mark.slow
def test_every_schema_field_of_every_type_is_refused_exhaustively(certs):
    for name, path, value in _all_substitutions(certs):
        _substitution_property(certs, name, path, value)
