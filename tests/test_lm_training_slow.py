"""A small GPT-2 trained for a few minutes on the pydoc text, its decoder compared with the limits.

Writing down what comes out is the point; no outcome is asserted beyond every metric being reported.
Run with ``pytest -m slow -s tests/test_lm_training_slow.py``; the numbers are printed and, when
``NTPCERT_SLOW_OUT`` names a directory, written there (``training.json``, the figures).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ntpcert.cli import main  # noqa: E402
from ntpcert.instance.datasets.pydoc_corpus import pydoc_text  # noqa: E402
from tests.lm_models import train_tokenizer  # noqa: E402

#: Training text, tokenizer size, width, sequence length, batch, wall-clock budget (seconds).
TRAIN_CHARS, VOCAB, D, SEQ, BATCH, BUDGET_S = 120_000, 1024, 128, 32, 16, 180
#: The contexts the decoder is compared on: the first characters of the training text (about 110
#: contexts of 2 tokens, fewer than d, so the instance is separable and W^mm exists; with m > d the
#: NTP-SVM solve that finds it infeasible dominates the run)
EVAL_CHARS = 400


@pytest.mark.slow
def test_train_a_small_model_and_compare_its_decoder(tmp_path, capsys):
    import transformers as tf

    out_dir = os.environ.get("NTPCERT_SLOW_OUT") or str(tmp_path)
    os.makedirs(out_dir, exist_ok=True)
    text = pydoc_text(TRAIN_CHARS)
    model_dir = Path(out_dir) / "model"
    model_dir.mkdir(exist_ok=True)
    V = train_tokenizer(text, VOCAB, str(model_dir / "tokenizer.json"), byte_level=True)
    from tokenizers import Tokenizer

    ids = np.array(Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(text).ids, dtype=np.int64)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared 2-core machine: more threads only contend
    rng = np.random.default_rng(0)
    cfg = tf.GPT2Config(vocab_size=V, n_positions=SEQ, n_embd=D, n_layer=2, n_head=4, tie_word_embeddings=False,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    snaps = Path(out_dir) / "snapshots"
    snaps.mkdir(exist_ok=True)
    save_at = {0, 10, 30, 100, 300, 1000, 3000, 10000}
    t0, step, losses = time.perf_counter(), 0, []
    model.train()
    while time.perf_counter() - t0 < BUDGET_S:
        if step in save_at:
            np.save(snaps / f"W_{step}.npy", model.lm_head.weight.detach().double().numpy())
        starts = rng.integers(0, ids.size - SEQ - 1, size=BATCH)
        x = torch.from_numpy(np.stack([ids[s:s + SEQ] for s in starts]))
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
    np.save(snaps / f"W_{step}.npy", model.lm_head.weight.detach().double().numpy())
    model.eval()
    tf.utils.logging.disable_progress_bar()
    model.save_pretrained(model_dir)
    corpus = Path(out_dir) / "eval.txt"
    corpus.write_text(text[:EVAL_CHARS], encoding="utf-8")
    base = ["compare", str(corpus), "--model", str(model_dir), "--context", "tokens:2", "--json"]
    t1 = time.perf_counter()
    assert main(base + ["--figure", os.path.join(out_dir, "trained_compare.png")]) == 0
    final = json.loads(capsys.readouterr().out)
    assert main(base + ["--W", str(snaps), "--figure", os.path.join(out_dir, "trained_snapshots.png"),
                        "--table", os.path.join(out_dir, "trained_snapshots.csv")]) == 0
    series = json.loads(capsys.readouterr().out)
    record = {"train": {"chars": TRAIN_CHARS, "V": V, "d": D, "layers": 2, "steps": step, "seconds": BUDGET_S,
                        "first_loss": losses[0], "last_loss_mean_50": float(np.mean(losses[-50:]))},
              "compare_seconds": time.perf_counter() - t1,
              "final": {k: v for k, v in final.items() if k not in ("bins",)}, "bins": final["bins"],
              "snapshots": [{k: s[k] for k in ("t", "loss", "excess_loss", "rel_dist_F", "cos_perp_mm",
                                                "norm_matched_distance", "norm")} for s in series["snapshots"]]}
    with open(os.path.join(out_dir, "training.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, default=str)
    for key in ("loss", "excess_loss", "margin", "support_spread", "rel_dist_F", "cos_perp_mm",
                "norm_matched_distance", "bracket"):
        assert key in final
    with capsys.disabled():
        print(json.dumps(record, indent=1, default=str))
