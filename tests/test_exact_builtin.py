"""Exact certificates of the built-in datasets, end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntpcert.cli.app import main
from ntpcert.exact.svm_gap import exact_svm_bound

from .conftest import random_instance


def _round_trip(tmp_path, capsys, name):
    cert = tmp_path / f"{name}.cert.json"
    assert main(["certify", name, "--exact", "--json", "--certificate-out", str(cert)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certificate_valid"] is True
    assert main(["verify", str(cert), "--data", name]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    return out


def test_paper_setting_is_certified_reachable(tmp_path, capsys):
    out = _round_trip(tmp_path, capsys, "paper")
    assert out["compatible"]["holds"] is True and out["separable"]["holds"] is True
    assert out["entropy_bound_reachable"] is True
    ex = out["svm"]["exact"]
    assert ex["primal_feasible"] and ex["norm_lower"] <= ex["norm_upper"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dyck", "pydoc"])
def test_corpus_builtins_round_trip(tmp_path, capsys, name):
    out = _round_trip(tmp_path, capsys, name)
    assert out["compatible"]["holds"] is not None and out["separable"]["holds"] is not None


@pytest.mark.slow
def test_exact_svm_bound_at_solver_scale():
    m = 1000
    inst = random_instance(np.random.default_rng(0), m=m, d=1024, V=2000, kmin=1, kmax=3, max_count=9)
    mask = inst.support_mask().T
    W = np.where(mask, 0.0, -1.0) @ np.linalg.pinv(inst.embeddings).T
    a = np.where(mask, 0.0, -1e-3)
    b = exact_svm_bound(inst, W, a)
    assert b.primal_feasible, b.reason
    # exact dual feasibility of the repaired a, checked in integers
    N = np.rint(np.ldexp(b.a, 60)).astype(object)
    assert all(sum(N[:, j]) == 0 for j in range(m))
    assert np.all(b.a[~mask] <= 0)
    Wc = b.W()
    Z = inst.logits(Wc)
    anchors = Z[np.arange(m), inst.anchors()]
    assert np.min(np.where(inst.support_mask(), np.inf, anchors[:, None] - Z)) >= 1 - 1e-9
    assert b.gap >= 0 and b.norm_lower <= b.norm_upper
