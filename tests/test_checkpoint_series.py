"""``compare CORPUS --model DIR1 DIR2 ...`` / ``--model FOLDER``: a checkpoint series of tiny GPT-2s made in the
test (a model, then three "checkpoints" of perturbed weights saved with ``save_pretrained``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import numpy as np
import pytest

from ntpcert.cli import main

torch = pytest.importorskip("torch")  # the [lm] extra is part of [test]
from ntpcert.dynamics.checkpoints import CHECKPOINT_COLUMNS, context_margins  # noqa: E402
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from ntpcert.instance.lm import load_model_data  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402

STEPS = (10, 20, 30)
#: The keys a row adds to compare's own JSON of its checkpoint.
ROW_KEYS = ("step", "path", "limits_sizes", "motion", "margins")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A folder of three checkpoints with the tokenizer beside them (as the Trainer writes it), the corpus
    (d = 128 above its m = 89 contexts: separable, fast limits) and the series' JSON, table and figure."""
    import transformers as tf

    root = tmp_path_factory.mktemp("ckpt")
    corpus = small_corpus(root, pydoc_text(250))
    base = tiny_model(root, "gpt2-untied", d=128, corpus=pydoc_text(250), name="base")
    folder = root / "run"
    folder.mkdir()
    shutil.copy(os.path.join(base, "tokenizer.json"), folder / "tokenizer.json")
    model = tf.GPT2LMHeadModel.from_pretrained(base)
    g = torch.Generator().manual_seed(0)
    for step in STEPS:  # the last layers move most, as late in training
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=g))
        model.save_pretrained(folder / f"checkpoint-{step}")
    out = {"root": root, "corpus": corpus, "folder": str(folder), "tokenizer": str(folder / "tokenizer.json"),
           "table": root / "series.csv", "figure": root / "series.png",
           "checkpoints": [str(folder / f"checkpoint-{s}") for s in STEPS]}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["compare", corpus, "--model", str(folder), "--json", "--table", str(out["table"]),
                   "--figure", str(out["figure"])])
    assert rc == 0
    out["json"] = json.loads(buf.getvalue())
    return out


def _series_json(run, capsys):
    return run["json"]


def test_one_row_per_checkpoint_each_the_single_compare_of_its_checkpoint(run, capsys):
    out = _series_json(run, capsys)
    rows = out["checkpoints"]
    assert [r["step"] for r in rows] == list(STEPS) and out["steps_from"] == "folder names"
    assert [r["path"] for r in rows] == run["checkpoints"]
    for r, ck in zip(rows, run["checkpoints"]):
        assert main(["compare", run["corpus"], "--model", ck, "--model-tokenizer", run["tokenizer"], "--json"]) == 0
        one = json.loads(capsys.readouterr().out)
        for k in ("figure", "table"):
            one.pop(k)
        assert {k: v for k, v in r.items() if k not in ROW_KEYS} == one  # verdicts, limits, distances, source
        sizes = r["limits_sizes"]  # the limits' sizes: dist_F / rel_dist_F is ||W*||
        assert sizes["W_star_norm"] == pytest.approx(one["dist_F"] / one["rel_dist_F"], rel=1e-9)
        assert sizes["W_mm_norm"] > 0 and sizes["nonseparable_pairs"] is None and sizes["limits"] == "W*, F, W^mm"
    # the checkpoints differ: each row is its own checkpoint's, not the first's
    assert len({r["loss"] for r in rows}) == len(STEPS)


def test_the_motion_of_h_and_w_equals_a_recomputation(run, capsys):
    rows = _series_json(run, capsys)["checkpoints"]
    assert all(v is None for k, v in rows[0]["motion"].items() if k != "h_norm")
    prev = None
    for r, ck in zip(rows, run["checkpoints"]):
        md = load_model_data(run["corpus"], ck, tokenizer=run["tokenizer"], merge_unseen=True)
        H, W = md.instance.embeddings, md.decoder
        assert r["motion"]["h_norm"] == pytest.approx(np.sqrt((H ** 2).sum()), rel=1e-12)
        if prev is not None:
            H0, W0, ctx0 = prev
            assert md.counts.contexts == ctx0  # the same contexts, row for row
            dh = np.sqrt(((H - H0) ** 2).sum())
            assert dh > 0 and r["motion"]["h_change"] == pytest.approx(dh, rel=1e-12)
            assert r["motion"]["h_change_rel"] == pytest.approx(dh / np.sqrt((H0 ** 2).sum()), rel=1e-12)
            rows_d = np.array([np.linalg.norm(H[j] - H0[j]) for j in range(H.shape[0])])
            assert r["motion"]["h_change_max_row"] == pytest.approx(rows_d.max(), rel=1e-12)
            assert r["motion"]["raw_W_change"] == pytest.approx(np.sqrt(((W - W0) ** 2).sum()), rel=1e-12)
        prev = (H, W, md.counts.contexts)


def test_the_margins_equal_a_loop_over_the_contexts(run, capsys):
    rows = _series_json(run, capsys)["checkpoints"]
    for r, ck in zip(rows, run["checkpoints"]):
        md = load_model_data(run["corpus"], ck, tokenizer=run["tokenizer"])
        H, W, C = md.instance.embeddings, md.decoder, md.instance.counts
        mu = []
        for j in range(H.shape[0]):
            z = W @ H[j]
            S = C[j] > 0
            if not S.all():
                mu.append(z[S].min() - z[~S].max())
        mu = np.array(mu)
        m = r["margins"]
        assert m["contexts"] == mu.size
        assert m["margin_min"] == pytest.approx(mu.min(), rel=1e-9, abs=1e-12)
        assert m["margin_median"] == pytest.approx(np.median(mu), rel=1e-9, abs=1e-12)
        assert m["margin_positive"] == pytest.approx(np.mean(mu > 0))
        assert m["margin_min"] == pytest.approx(r["margin"], rel=1e-9, abs=1e-12)  # compare's own margin


def test_context_margins_leave_a_whole_vocabulary_support_undefined():
    H = np.array([[1.0, 0.0], [0.0, 1.0]])
    W = np.array([[2.0, 0.0], [1.0, 3.0], [0.0, 1.0]])  # logits of context 0: 2, 1, 0; of context 1: 0, 3, 1
    mu = context_margins(H, W, rows=np.array([0, 0, 1, 1, 1]), tokens=np.array([0, 1, 0, 1, 2]))
    assert mu[0] == pytest.approx(1.0 - 0.0) and np.isnan(mu[1])


def test_the_table_the_figure_and_the_text_report(run, capsys):
    lines = run["table"].read_text().splitlines()
    assert lines[0].split(",") == list(CHECKPOINT_COLUMNS) + ["path"]
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(STEPS)
    first = dict(zip(lines[0].split(","), lines[1].split(",")))
    assert first["h_change"] == "" and float(first["excess_loss"]) > 0 and first["separable"] == "true"
    for k in ("nc1", "nc2", "nc3", "nc4"):  # each the row's compare nc number (a null is an empty cell)
        cells = [line.split(",")[lines[0].split(",").index(k)] for line in lines[1:]]
        want = [row["nc"][k] for row in run["json"]["checkpoints"]]
        assert [None if c == "" else float(c) for c in cells] == want, k
        assert any(c is not None for c in want), k
    assert run["figure"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["compare", run["corpus"], "--model", run["folder"]]) == 0
    text = capsys.readouterr().out.splitlines()
    assert "a series of 3 checkpoints" in text[0]
    assert [ln.split()[0] for ln in text[2:5]] == [str(s) for s in STEPS]
    assert any("trailing integer" in ln for ln in text)


def test_directories_in_the_given_order_and_steps_from_positions(run, tmp_path, capsys):
    late, early = tmp_path / "late", tmp_path / "early"
    for src, dst in ((run["checkpoints"][2], late), (run["checkpoints"][0], early)):
        shutil.copytree(src, dst)
        shutil.copy(run["tokenizer"], dst / "tokenizer.json")  # each with its own tokenizer
    assert main(["compare", run["corpus"], "--model", str(late), str(early), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps_from"] == "positions" and [r["step"] for r in out["checkpoints"]] == [0, 1]
    assert [r["path"] for r in out["checkpoints"]] == [str(late), str(early)]
    assert "position" in out["notes"]["steps"]
    # in the order given, named by their steps
    assert main(["compare", run["corpus"], "--model", run["checkpoints"][2], run["checkpoints"][0],
                 "--model-tokenizer", run["tokenizer"], "--json"]) == 0
    assert [r["step"] for r in json.loads(capsys.readouterr().out)["checkpoints"]] == [30, 10]


def _one_error_line(capsys, needle):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_a_folder_without_checkpoints_is_refused(run, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes").mkdir()
    assert main(["compare", run["corpus"], "--model", str(tmp_path / "empty")]) == 2
    _one_error_line(capsys, "no checkpoint folders")


def test_checkpoints_of_another_vocabulary_are_refused(run, tmp_path, capsys):
    other = tiny_model(tmp_path, "gpt2-untied", d=128, vocab=80, corpus=pydoc_text(250), name="other")
    assert main(["compare", run["corpus"], "--model", run["checkpoints"][0], other,
                 "--model-tokenizer", run["tokenizer"]]) == 2
    _one_error_line(capsys, "another vocabulary")
    ck = tmp_path / "ck-1"
    shutil.copytree(run["checkpoints"][0], ck)
    shutil.copy(os.path.join(other, "tokenizer.json"), ck / "tokenizer.json")  # the same V, another tokenizer
    assert main(["compare", run["corpus"], "--model", str(ck), run["checkpoints"][1]]) == 2
    _one_error_line(capsys, "another vocabulary")


def test_other_misuses_are_refused_in_one_line(run, tmp_path, capsys):
    np.save(tmp_path / "W.npy", np.zeros((3, 4)))
    assert main(["compare", run["corpus"], "--model", run["folder"], "--W", str(tmp_path / "W.npy")]) == 2
    _one_error_line(capsys, "--W")
    assert main(["compare", run["corpus"], "--model", run["checkpoints"][0], str(tmp_path / "nothing")]) == 2
    _one_error_line(capsys, "not a directory")
    (tmp_path / "bare").mkdir()
    shutil.copytree(run["checkpoints"][0], tmp_path / "bare" / "step5")
    assert main(["compare", run["corpus"], "--model", str(tmp_path / "bare")]) == 2  # no tokenizer anywhere
    _one_error_line(capsys, "--model-tokenizer")
    assert main(["certify", run["corpus"], "--model", run["checkpoints"][0], run["checkpoints"][1]]) == 2
    capsys.readouterr()


def test_several_models_reach_a_single_model_command_only_as_an_error():
    import argparse

    from ntpcert.cli.model_options import model_path
    from ntpcert.errors import InputError

    assert model_path(argparse.Namespace(model=["a"])) == "a" and model_path(argparse.Namespace(model="a")) == "a"
    with pytest.raises(InputError, match="only to compare"):
        model_path(argparse.Namespace(model=["a", "b"]))
