"""The forward passes of a model on dask workers (``--workers``): the same instance, fingerprint and
certificate as one process, also when a worker is killed in the middle of the run."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("distributed")

from ntpcert.cli import main  # noqa: E402
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from tests.lm_models import small_corpus, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    text = pydoc_text(250)
    return {"corpus": small_corpus(root, text), "model": tiny_model(root, "gpt2-untied", d=4, corpus=text)}


def _cert(model, tmp_path, name, extra, capsys):
    cert = tmp_path / name
    assert main(["certify", model["corpus"], "--model", model["model"], "--exact", "--certificate-out", str(cert),
                 "--json"] + extra) == 0
    return json.loads(capsys.readouterr().out), json.loads(cert.read_text())


def test_workers_give_the_single_process_certificate(model, tmp_path, capsys):
    one, c1 = _cert(model, tmp_path, "one.json", [], capsys)
    two, c2 = _cert(model, tmp_path, "two.json", ["--workers", "2"], capsys)
    assert c1["instance"]["fingerprint"] == c2["instance"]["fingerprint"]
    assert c1 == c2  # equal as JSON values: the same instance, source, verdicts and witnesses
    assert one["separable"]["holds"] is False  # d = 4 against m = 89: a negative verdict with its witness
    assert main(["verify", str(tmp_path / "two.json")]) == 0


def test_a_killed_worker_does_not_change_the_capture(model):
    from ntpcert.experiments.distributed import DaskChunks
    from ntpcert.experiments.sweep import dask_client
    from ntpcert.instance.lm import load_model_data

    # batches of 2 contexts: many items, so that some are still to run when the worker dies
    ref = load_model_data(model["corpus"], model["model"], batch_size=2)
    killed = []
    with dask_client(workers=2) as client:
        pids = sorted(client.run(os.getpid).values())
        assert len(pids) == 2

        def kill_one(done):
            if done == 1 and not killed:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

        got = load_model_data(model["corpus"], model["model"], batch_size=2,
                              map_chunks=DaskChunks(client, progress=False, on_result=kill_one))
        alive = sorted(client.run(os.getpid).values())
    assert killed and killed[0] not in alive and len(alive) >= 1
    np.testing.assert_array_equal(got.instance.embeddings, ref.instance.embeddings)
    np.testing.assert_array_equal(got.instance.counts, ref.instance.counts)
    assert got.residual == ref.residual and got.residual_contexts == ref.residual_contexts == ref.instance.m
    assert got.instance.describe(fingerprint=True) == ref.instance.describe(fingerprint=True)
