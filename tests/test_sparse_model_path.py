"""A model's instance stays sparse through certify --exact and compare: with the dense (m, V') arrays of the
whole instance refused, both run, and the certificate verifies with both checkers (ntpcert.instance.sparse)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ntpcert.instance.sparse as sparse_mod
import ntpcert.pipeline.split_section as split_section
import ntpcert.solve.split as split_mod
from ntpcert.instance.lm import load_model_data
from ntpcert.instance.sparse import SparseCountsInstance

pytest.importorskip("torch")
from tests.lm_models import small_corpus, tiny_model  # noqa: E402
from tests.standalone import standalone  # noqa: E402


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("sparse_path"))
    corpus, model = small_corpus(root), tiny_model(root, "gpt2")
    data = load_model_data(corpus, model, merge_unseen=True)
    return {"corpus": corpus, "model": model, "data": data}


@pytest.fixture
def no_dense(lm, monkeypatch):
    """Refuse the whole instance's dense arrays (explain's sub-instances of a few contexts stay allowed)."""
    inst = lm["data"].instance
    monkeypatch.setattr(sparse_mod, "DENSE_CELLS", inst.m * inst.V // 4)
    # the split's LP on this instance is another question (HiGHS's dual simplex spends minutes of its
    # 2,000,000 iterations on it, whitened): certify leaves it out, compare gets a small budget
    monkeypatch.setattr(split_section, "CERTIFY_MAX_CELLS", 0)
    monkeypatch.setattr(split_section, "CERTIFY_MAX_NONZEROS", 0)
    real = split_mod.nonseparable_split
    monkeypatch.setattr(split_mod, "nonseparable_split",
                        lambda inst, **kw: real(inst, **{**kw, "max_iterations": 20_000}))


def test_a_merged_model_instance_is_sparse_and_refuses_dense_arrays(lm, no_dense):
    inst = lm["data"].instance
    assert isinstance(inst, SparseCountsInstance) and inst.nnz == int(inst.support_sizes.sum())
    with pytest.raises(sparse_mod.DenseRefused, match="not sparse yet"):
        inst.probs  # noqa: B018


def test_certify_exact_runs_sparse_and_both_checkers_accept(lm, no_dense, tmp_path, capsys):
    from ntpcert.cli import main

    cert = tmp_path / "C.json"
    rc = main(["certify", lm["corpus"], "--model", lm["model"], "--exact", "--no-svm", "--json",
               "--certificate-out", str(cert)])
    rep = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and rep["certificate_valid"] is True
    assert rep["compatible"]["holds"] is not None and rep["separable"]["holds"] is not None
    text = cert.read_text()
    assert main(["verify", str(cert)]) == 0
    ok, out = standalone(text)
    assert ok, out
    rec = json.loads(text)["instance"]["embedded"]
    assert "counts_sparse" in rec and rec["V"] == lm["data"].instance.V


@pytest.mark.slow  # two compare runs, each about 200 s in the split LP (HiGHS) on this model's data
def test_compare_runs_sparse_with_the_dense_numbers(lm, no_dense, monkeypatch, capsys):
    from ntpcert.cli import main

    rc = main(["compare", lm["corpus"], "--model", lm["model"], "--json"])
    sparse = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0
    monkeypatch.setattr(sparse_mod, "DENSE_CELLS", 10**9)  # the same run, dense arrays allowed
    assert main(["compare", lm["corpus"], "--model", lm["model"], "--json"]) == 0
    dense = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("loss", "excess_loss", "margin", "support_spread", "log_odds_error", "rel_dist_F", "norm",
                "normalized_margin"):
        assert sparse[key] == pytest.approx(dense[key], rel=1e-12, abs=1e-12), key
    assert sparse["nc"]["nc1"] == pytest.approx(dense["nc"]["nc1"], rel=1e-12)
