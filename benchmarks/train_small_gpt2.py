#!/usr/bin/env python3
"""Train the small case of the non-separable benchmarks: a 2-block GPT-2 with d = 64 and a byte-level BPE
of 1,024 tokens, trained for a few minutes (a budget in optimiser steps, not seconds) on the built-in
pydoc prose, saved with ``save_pretrained`` beside a corpus file of the first 2,000 characters.

Usage: ``python benchmarks/train_small_gpt2.py OUT_DIR [--steps 1500]``; prints the final training loss.
Reading the corpus with ``--context tokens:2`` gives m of about 600 distinct contexts, more than d.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

V_BPE, D_MODEL, BLOCK = 1_024, 64, 64


def train(out: str, steps: int, seed: int = 0) -> float:
    import numpy as np
    import torch
    import transformers as tf
    from tokenizers import Tokenizer

    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from tests.lm_models import train_tokenizer

    text = pydoc_text(None)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "first2000.txt"), "w", encoding="utf-8") as f:
        f.write(text[:2000])
    model_dir = os.path.join(out, "model")
    os.makedirs(model_dir, exist_ok=True)
    V = train_tokenizer(text, V_BPE, os.path.join(model_dir, "tokenizer.json"), byte_level=True)
    ids = np.asarray(Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")).encode(text).ids, dtype=np.int64)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = tf.GPT2Config(vocab_size=V, n_positions=BLOCK, n_embd=D_MODEL, n_layer=2, n_head=4,
                        bos_token_id=1, eos_token_id=1)
    model = tf.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    data = torch.from_numpy(ids)
    loss = float("nan")
    for step in range(steps):
        starts = rng.integers(0, ids.size - BLOCK - 1, size=32)
        batch = torch.stack([data[s:s + BLOCK] for s in starts])
        out_ = model(batch, labels=batch)
        opt.zero_grad()
        out_.loss.backward()
        opt.step()
        loss = float(out_.loss)
        if step % 100 == 0:
            print(f"step {step} loss {loss:.3f}", flush=True)
    tf.utils.logging.disable_progress_bar()
    model.save_pretrained(model_dir)
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=1500)
    a = p.parse_args()
    print(f"final training loss {train(a.out, a.steps):.3f}")


if __name__ == "__main__":
    main()
