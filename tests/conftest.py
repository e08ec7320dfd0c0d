"""Shared fixtures, the one table of numerical tolerances, and hypothesis profiles."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from ntpcert import NTPInstance

#: Every float tolerance the tests use, named once.
TOL = {
    "linalg": 1e-9,  # identities of exact linear maps evaluated in float64 (relative to scale)
    "kkt": 1e-6,  # primal/dual residuals and relative gap of an interior-point NTP-SVM solve
    "solver_agreement": 1e-6,  # relative difference of objectives/solutions between backends
    "grad_fd": 1e-5,  # finite-difference check of the gradient
    "svm_argmin": 1e-4,  # relative distance between NTP-SVM minimisers of equivalent problems (~sqrt of the IPM gap)
    # stopping rule (largest gradient entry) of ntpcert.geometry.lbfgs on a 40-variable quadratic of condition
    # 1e3: float64 evaluates its gradient to about eps * cond * |x| ~ 1e-12, so 1e-10 is reachable with room
    "lbfgs_gtol": 1e-10,
    # relative rounding of a float64 CE or dual value summed over m V terms (m V eps is 1.7e-14 at m V = 150):
    # a float bracket end may sit this far past a certified one (seen at 1 ulp with numpy 1.26)
    "float_ce_rounding": 1e-13,
    # compare(W) against compare(W + 1c^T): both are computed on the centred rows, which agree to a few ulps
    # of max(|W|, |c|); every number then agrees to this (relative, or absolute near 0)
    "shift_invariance": 1e-12,
    "capture": 1e-5,  # relative residual of a float32 model's logits recomputed from the captured h (ntpcert.instance.lm)
}

# "ci" (the default) is derandomised so that every run of the suite draws the same examples;
# "explore" and "thorough" draw fresh ones to hunt for counterexamples.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def random_instance(rng: np.random.Generator, m: int, d: int, V: int, kmin: int = 1, kmax: int | None = None,
                    max_count: int = 20) -> NTPInstance:
    """Gaussian embeddings, random supports with sizes in [kmin, kmax], random positive counts."""
    kmax = V - 1 if kmax is None else kmax
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(kmin, kmax + 1))
        S = rng.choice(V, size=k, replace=False)
        C[j, S] = rng.integers(1, max_count + 1, size=k)
    return NTPInstance.from_counts(rng.standard_normal((m, d)), C)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="session")
def _standalone_beside_verify():
    """With ``NTPCERT_STANDALONE=1``, every certificate the suite checks is also checked by
    tools/ntpcert_check.py: where verify accepts, so must it; where verify refuses a certificate checked
    against its embedded data, it must refuse too (it checks every section).
    Off by default (it doubles the cost of every check); run ``NTPCERT_STANDALONE=1 pytest``."""
    if os.environ.get("NTPCERT_STANDALONE") != "1":
        yield
        return
    import json
    import sys

    from ntpcert.certificate.checker import api as vf

    from .standalone import standalone

    original = vf.verify_certificate

    def both(cert, instance=None, **kwargs):
        verdict = original(cert, instance, **kwargs)
        try:  # the text verify was told is the file's, where it was told one
            sealed = kwargs.get("sealed_text")
            text = sealed if sealed is not None else json.dumps(cert)
        except (TypeError, ValueError):  # not encodable: nothing for a file reader to read
            return verdict
        ok, line = standalone(text)
        if verdict.valid:
            assert ok, f"verify accepts, the standalone checker refuses: {line}"
        elif verdict.too_large:  # not checked here, so no verdict to agree with (each checker has its own work caps)
            pass
        elif instance is None and sealed is None:  # a refused sealed text may be another valid certificate
            assert not ok, f"verify refuses ({verdict.reason}), the standalone accepts"
        return verdict

    patched = []
    for module in list(sys.modules.values()):
        if getattr(module, "verify_certificate", None) is original:
            patched.append(module)
            module.verify_certificate = both
    yield
    for module in patched:
        module.verify_certificate = original
