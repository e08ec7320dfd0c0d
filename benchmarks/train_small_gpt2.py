#!/usr/bin/env python3
"""Train the small cases of the non-separable benchmarks and of the LM tutorial: a 2-block GPT-2 with a
byte-level BPE, trained for a few minutes (a budget in optimiser steps, not seconds) on the built-in pydoc
prose, saved with ``save_pretrained`` as ``OUT_DIR/model`` beside a corpus file of its first characters
(``OUT_DIR/first<N>.txt``).

Recipes (``--recipe``; the flags ``--d-model``, ``--heads``, ``--vocab``, ``--corpus-chars`` override one):

* ``separable`` (default): d = 64, 4 heads, BPE of 1,024 tokens, the first 2,000 characters. Read with
  ``--context tokens:2`` it gives m = 478 contexts, more than d, and the data are NTP-separable
  (``benchmarks/bench_small_model.py``).
* ``partly-separable``: d = 8, 2 heads, BPE of 300 tokens, the first 800 characters. Read with
  ``--context tokens:1`` it gives m = 81 contexts of 82 next tokens (V = 300) that are not NTP-separable
  but partly so: 2,447 non-separable pairs and 3,981 separable ones on the merged instance (the LM
  tutorial's trained model; 1,500 steps took 170 s on a loaded 2-core machine).

With ``--save-every N`` the run also keeps checkpoints as the Hugging Face Trainer does:
``OUT_DIR/checkpoints/checkpoint-<step>`` after every N steps (and ``checkpoint-0``, the initial model), the
tokenizer once beside them (``OUT_DIR/checkpoints/tokenizer.json``): the folder ``compare CORPUS --model
OUT_DIR/checkpoints`` reads as a checkpoint series.

Usage: ``python benchmarks/train_small_gpt2.py OUT_DIR [--recipe NAME] [--steps 1500] [--save-every N]``;
prints the final training loss.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

V_BPE, D_MODEL, BLOCK = 1_024, 64, 64

#: The named recipes (module doc): keyword arguments of :func:`train`.
RECIPES = {
    "separable": {"d_model": D_MODEL, "heads": 4, "vocab": V_BPE, "corpus_chars": 2000},
    "partly-separable": {"d_model": 8, "heads": 2, "vocab": 300, "corpus_chars": 800},
}


def train(out: str, steps: int, seed: int = 0, *, d_model: int = D_MODEL, layers: int = 2, heads: int = 4,
          corpus_chars: int = 2000, vocab: int = V_BPE, save_every: int | None = None) -> float:
    import shutil

    import numpy as np
    import torch
    import transformers as tf
    from tokenizers import Tokenizer

    from ntpcert.instance.datasets.pydoc_corpus import pydoc_text
    from tests.lm_models import train_tokenizer

    text = pydoc_text(None)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"first{corpus_chars}.txt"), "w", encoding="utf-8") as f:
        f.write(text[:corpus_chars])
    model_dir = os.path.join(out, "model")
    os.makedirs(model_dir, exist_ok=True)
    V = train_tokenizer(text, vocab, os.path.join(model_dir, "tokenizer.json"), byte_level=True)
    ids = np.asarray(Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")).encode(text).ids, dtype=np.int64)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = tf.GPT2Config(vocab_size=V, n_positions=BLOCK, n_embd=d_model, n_layer=layers, n_head=heads,
                        bos_token_id=1, eos_token_id=1)
    model = tf.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    data = torch.from_numpy(ids)
    loss = float("nan")
    tf.utils.logging.disable_progress_bar()
    ckpts = os.path.join(out, "checkpoints")
    if save_every:
        os.makedirs(ckpts, exist_ok=True)
        shutil.copy(os.path.join(model_dir, "tokenizer.json"), os.path.join(ckpts, "tokenizer.json"))
        model.save_pretrained(os.path.join(ckpts, "checkpoint-0"))
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
        if save_every and (step + 1) % save_every == 0:
            model.save_pretrained(os.path.join(ckpts, f"checkpoint-{step + 1}"))
    model.save_pretrained(model_dir)
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--recipe", choices=sorted(RECIPES), default="separable")
    p.add_argument("--steps", type=int, default=1500)
    for flag, key in (("--d-model", "d_model"), ("--heads", "heads"), ("--vocab", "vocab"),
                      ("--corpus-chars", "corpus_chars")):
        p.add_argument(flag, dest=key, type=int, default=None, help="overrides the recipe's value")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--save-every", type=int, default=None, help="keep a checkpoint every N steps (module doc)")
    a = p.parse_args()
    kw = dict(RECIPES[a.recipe], save_every=a.save_every)
    kw.update({k: getattr(a, k) for k in kw if k != "save_every" and getattr(a, k) is not None})
    print(f"final training loss {train(a.out, a.steps, layers=a.layers, **kw):.3f}")


if __name__ == "__main__":
    main()
