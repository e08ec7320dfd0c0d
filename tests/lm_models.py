"""Tiny language models built in the test: a BPE tokenizer trained on a few hundred characters and
GPT-2 / GPT-J / Llama-shaped models from configs, saved with ``save_pretrained`` (nothing is downloaded)."""

from __future__ import annotations

import os

from ntpcert.instance.datasets.pydoc_corpus import pydoc_text

#: The corpus of the fast tests: two blank-line-separated documents of pydoc text.
SMALL_CORPUS = pydoc_text(600)


def small_corpus(tmp_path, text: str = SMALL_CORPUS) -> str:
    path = os.path.join(tmp_path, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("\n\n", "\n") .replace(". ", ".\n\n", 1))
    return path


def train_tokenizer(text: str, vocab_size: int, path: str, *, byte_level: bool = False) -> int:
    """A BPE tokenizer trained on ``text`` and saved as ``path``; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if byte_level:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        alphabet = sorted(set(text) - set(" \n\t"))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>"], initial_alphabet=alphabet,
                                  show_progress=False)
    tok.train_from_iterator([text], trainer)
    tok.save(path)
    return tok.get_vocab_size()


def tiny_model(tmp_path, kind: str = "gpt2", *, vocab: int = 64, d: int = 16, corpus: str = SMALL_CORPUS,
               seed: int = 0, name: str | None = None, **config) -> str:
    """Save a tiny model of ``kind`` (gpt2, gpt2-untied, gptj (head bias), llama, gemma2) with a BPE tokenizer
    to a fresh directory; returns the directory."""
    import torch
    import transformers as tf

    out = os.path.join(tmp_path, name or kind)
    os.makedirs(out, exist_ok=True)
    V = train_tokenizer(corpus, vocab, os.path.join(out, "tokenizer.json"))
    common = dict(vocab_size=V, bos_token_id=1, eos_token_id=1)
    if kind in ("gpt2", "gpt2-untied"):
        cfg = tf.GPT2Config(n_positions=64, n_embd=d, n_layer=1, n_head=2, tie_word_embeddings=kind == "gpt2",
                            **common, **config)
        cls = tf.GPT2LMHeadModel
    elif kind == "gptj":
        cfg = tf.GPTJConfig(n_positions=64, n_embd=d, n_layer=1, n_head=2, rotary_dim=4, **common, **config)
        cls = tf.GPTJForCausalLM
    elif kind in ("llama", "gemma2"):
        shape = dict(hidden_size=d, intermediate_size=2 * d, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=1, max_position_embeddings=64, head_dim=d // 2)
        if kind == "llama":
            cfg, cls = tf.LlamaConfig(**shape, tie_word_embeddings=False, **common, **config), tf.LlamaForCausalLM
        else:
            cfg = tf.Gemma2Config(**shape, final_logit_softcapping=30.0, **common, **config)
            cls = tf.Gemma2ForCausalLM
    else:  # pragma: no cover - a typo in a test
        raise ValueError(kind)
    torch.manual_seed(seed)
    model = cls(cfg)
    with torch.no_grad():  # a visible bias (GPT-J initialises it to zero)
        head = model.get_output_embeddings()
        if head.bias is not None:
            head.bias.normal_(0.0, 0.5)
    tf.utils.logging.disable_progress_bar()
    model.save_pretrained(out)
    return out
