"""The LM tutorial's trained model whose data are partly separable (``benchmarks/train_small_gpt2.py --recipe
partly-separable``, read with ``--context tokens:1``): P and N both non-empty, and the limits of the merged,
weighted instance are those of the model's whole vocabulary.

Trains for about three minutes; run with ``pytest -m slow tests/test_lm_partly_separable_slow.py``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ntpcert.cli import main  # noqa: E402

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "train_small_gpt2.py"


def _train(out: Path) -> None:
    spec = importlib.util.spec_from_file_location("train_small_gpt2", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.set_num_threads(1)
    mod.train(str(out), 1500, **mod.RECIPES["partly-separable"])


@pytest.mark.slow
def test_the_tutorials_trained_model_is_partly_separable_and_merging_keeps_its_limits(tmp_path, capsys):
    from ntpcert.instance.lm import load_model_data
    from ntpcert.pipeline.nonseparable import nonseparable_limits

    _train(tmp_path)
    capsys.readouterr()  # the training's own lines on stdout are not the commands' JSON
    corpus, model = str(tmp_path / "first800.txt"), str(tmp_path / "model")
    md = load_model_data(corpus, model, context="tokens:1", merge_unseen=True)
    assert md.merge.merged > 0 and md.instance.d == 8
    full = nonseparable_limits(md.full_instance())
    merged = nonseparable_limits(md.merge.weighted(md.instance))
    assert full.nonseparable is not None and len(full.nonseparable) > 0 and full.svm is not None  # N and P
    assert md.merge.expand_pairs(merged.nonseparable).tolist() == full.nonseparable.tolist()
    assert full.limit.converged and merged.limit.converged
    assert merged.limit.L_star == pytest.approx(full.limit.L_star, rel=1e-9)
    assert np.linalg.norm(md.merge.expand_rows(merged.W_fin) - full.W_fin) <= 1e-6 * np.linalg.norm(full.W_fin)
    assert np.linalg.norm(md.merge.expand_rows(merged.W_mm) - full.W_mm) <= 1e-6 * full.svm.norm
    # the commands of the tutorial agree with each other
    assert main(["limits", corpus, "--model", model, "--context", "tokens:1", "--out-dir", str(tmp_path / "lim"),
                 "--json"]) == 0
    lim = json.loads(capsys.readouterr().out)["limit"]
    assert main(["compare", corpus, "--model", model, "--context", "tokens:1", "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["separable"] is False and lim["L_star"] == pytest.approx(cmp["L_star"], rel=1e-9)
    assert cmp["loss_over_L_star"] == pytest.approx(cmp["loss"] - cmp["L_star"], rel=1e-12)
    assert lim["W_mm_P_norm"] == pytest.approx(full.svm.norm, rel=1e-6)
    assert "did not converge" not in cmp["notes"]["limits"]
