"""One schema for producer and checker: every certificate ``certify --exact`` writes is VALID.

A property test over every family of :mod:`ntpcert.experiments.strategies` (embedding families and
distributions), plus probabilities given as fraction strings whose denominators are primes of 20 to 30
digits (the count ratios then have primes far beyond the 2^63 of a schema ``int``). Each certificate
goes through its text (dumps, the strict reader) and :func:`ntpcert.certificate.checker.verify_text`,
with and without the instance.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import pytest
from hypothesis import given, settings, strategies as st

from ntpcert import NTPInstance, exact_certify
from ntpcert.certificate import encode
from ntpcert.certificate import jsonio
from ntpcert.certificate import schema
from ntpcert.certificate import structure
from ntpcert.certificate.checker import verify_text
from ntpcert.errors import CertificateError
from ntpcert.experiments.strategies import DISTRIBUTIONS, EMBEDDING_FAMILIES, ntp_instances

#: The red team's 26-digit primes, and two more.
BIG_PRIMES = (10**25 + 13, 10**25 + 223, 10**21 + 117, 10**29 + 319)


def _next_prime(n: int) -> int:
    n |= 1
    while not flint.fmpz(n).is_prime():
        n += 2
    return n


@st.composite
def big_prime_probabilities(draw, base):
    """``base`` with its in-support probabilities replaced by :math:`P_z / \\sum_z P_z` for primes
    :math:`P_z` of 20 to 30 digits: the count ratios :math:`P_z / P_{z_j}` have those primes."""
    rows = []
    for j in range(base.m):
        S = base.support(j)
        P = [_next_prime(draw(st.integers(10**19, 10**30))) for _ in S]
        row = ["0"] * base.V
        for z, k in zip(S, P):
            row[int(z)] = str(Fraction(k, sum(P)))
        rows.append(row)
    return NTPInstance.from_probs(base.embeddings, rows, [str(Fraction(1, base.m))] * base.m)


@st.composite
def certified_instances(draw):
    family = draw(st.sampled_from(EMBEDDING_FAMILIES))
    dist = draw(st.sampled_from(DISTRIBUTIONS + ("big-primes",)))
    base = draw(ntp_instances(max_m=4, max_d=3, max_V=4, embedding=family,
                              distribution="fractions" if dist == "big-primes" else dist))
    return draw(big_prime_probabilities(base)) if dist == "big-primes" else base


def _valid(inst: NTPInstance) -> dict:
    rep = exact_certify(inst, excess=False)
    text = jsonio.dumps(rep.certificate)
    for against in (None, inst):
        verdict = verify_text(text, against)
        assert verdict.valid, (repr(inst), verdict.reason)
    return rep.certificate


@settings(max_examples=40)
@given(certified_instances())
def test_every_written_certificate_is_valid(inst):
    _valid(inst)


def test_the_red_team_26_digit_primes():
    """Fraction strings over 26-digit primes: ``compatibility.primes`` lists them, and the file is VALID."""
    p, q, r = BIG_PRIMES[:3]
    inst = NTPInstance.from_probs([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
                                  [[f"{p}/{p + q}", f"{q}/{p + q}", "0"], ["1/2", "0", "1/2"],
                                   [f"{r}/{r + 2}", "0", f"2/{r + 2}"]], ["1/3", "1/3", "1/3"])
    cert = _valid(inst)
    assert {p, q, r} <= set(cert["compatibility"]["primes"])
    assert max(cert["compatibility"]["primes"]) > schema.MAX_SCHEMA_INT


@pytest.mark.parametrize("primes,needle", [
    ([2, 2], "not above"), ([1], "integer >= 2"), ([True], "integer >= 2"), ("2", "a list"),
    ([10**schema.MAX_PRIME_DIGITS], "digits"),
])
def test_primes_kind_refuses(primes, needle):
    with pytest.raises(CertificateError, match=needle):
        schema.check_kind(primes, "primes", "compatibility.primes")


def test_producer_and_checker_read_one_table():
    """The writer checks every section it writes, and the checker every section it reads, against one
    table: the schema module's, not a copy."""
    assert structure.check_section is schema.check_section and encode.check_produced is schema.check_produced
    for section in ("compatibility/true", "compatibility/false", "compatibility/null"):
        assert schema.SCHEMA[section]["primes"] == "primes"
