"""Exact separability witnesses: Farkas rays for shared embeddings, feasible points under Lemma 1."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.pipeline.exact_verdicts import build_certificate, exact_certify
from ntpcert.exact.separability import check_ray, exact_ray
from ntpcert.pipeline.decide import decide_separability
from ntpcert.pipeline.exact_witness import compatibility_exact, separability_exact
from ntpcert.certificate.checker import verify_certificate
from ntpcert.verdict import EmbeddingsFullRank, FarkasRay
from ntpcert.rows.kesler import KeslerSystem

from .conftest import random_instance


def _shared_embedding(rng, d=3):
    h = rng.standard_normal(d)
    other = rng.standard_normal((2, d))
    H = np.vstack([h, h, other])
    C = np.array([[2, 1, 0, 0], [0, 3, 1, 0], [1, 0, 0, 4], [0, 0, 5, 1]])
    return NTPInstance.from_counts(H, C)


def test_same_embedding_different_supports_gives_a_verified_farkas_ray(rng):
    inst = _shared_embedding(rng)
    verdict, _ = decide_separability(KeslerSystem.build(inst))
    assert verdict.holds is False
    res = separability_exact(inst, None)
    assert res.holds is False and isinstance(res.witness, FarkasRay)
    assert check_ray(inst, res.witness.ray) == ""
    assert res.check(inst) == ""
    # the ray only involves the two contexts that share h
    assert {j for _, j in res.witness.ray} <= {0, 1}
    cert = build_certificate(inst, compatibility_exact(inst), res, None)
    verdict = verify_certificate(cert)
    assert verdict.valid, verdict.reason
    assert any("Farkas" in c for c in verdict.checks)


def test_check_ray_rejects_each_broken_condition(rng):
    inst = _shared_embedding(rng)
    ray = separability_exact(inst, None).witness.ray
    off = ~inst.support_mask().T
    key = next(k for k, v in ray.items() if v < 0 and off[k])
    assert "off the support" in check_ray(inst, {**ray, key: -ray[key]})
    assert "sum to 0" in check_ray(inst, {**ray, key: 2 * ray[key]})
    assert "no mass" in check_ray(inst, {k: Fraction(0) for k in ray})
    other = next(k for k in ray if k[1] == key[1] and k != key)
    moved = dict(ray)
    moved[key], moved[other] = ray[key] - 1, ray[other] + 1  # columns still sum to 0, a H no longer 0
    assert check_ray(inst, moved) != ""


@pytest.mark.parametrize("m,d,V", [(4, 6, 5), (6, 9, 4), (10, 12, 7)])
def test_lemma1_instances_give_verified_feasible_certificates(rng, m, d, V):
    inst = random_instance(rng, m, d, V, 1, V - 1)
    rep = exact_certify(inst, svm=True, progress=False)
    assert rep.check.valid, rep.check.reason
    assert rep.compatible.holds is True and rep.separable.holds is True and rep.entropy_bound_reachable is True
    assert rep.svm_certified and rep.svm.gap >= 0
    # decided by Lemma 1: no point, a rank witness with its modulus
    assert isinstance(rep.separability.witness, EmbeddingsFullRank) and rep.separability.engine == "lemma1"
    assert getattr(rep.separability.witness, "point", None) is None
    assert rep.separability.witness.rank_witness.modulus is not None
    W = rep.svm.W_fractions()  # the exactly feasible NTP-SVM point
    H = [[Fraction(*float(x).as_integer_ratio()) for x in row] for row in inst.embeddings]
    for j in range(inst.m):
        S = [int(z) for z in inst.support(j)]
        logit = [sum((W[v, i] * H[j][i] for i in range(d)), Fraction(0)) for v in range(V)]
        assert all(logit[z] == logit[S[0]] for z in S)
        assert all(logit[S[0]] - logit[v] >= 1 for v in range(V) if v not in S)


def test_exact_ray_solves_on_the_support_of_a_perturbed_float_ray(rng):
    inst = _shared_embedding(rng)
    ray = separability_exact(inst, None).witness.ray
    a = np.zeros((inst.V, inst.m))
    for (v, j), x in ray.items():
        a[v, j] = float(x) * (1 + 1e-12)
    exact = exact_ray(inst, a)
    assert exact is not None and check_ray(inst, exact) == ""


def test_undetermined_when_nothing_can_be_made_exact(rng):
    inst = random_instance(rng, 4, 6, 5, 1, 3)  # separable (Lemma 1), so no ray exists
    res = separability_exact(inst, -np.ones((inst.V, inst.d)), try_ray=True)
    assert res.holds is None
    assert "feasible point not exact" in res.reason and "Farkas" in res.reason
