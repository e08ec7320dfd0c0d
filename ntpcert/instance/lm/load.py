"""A model and a corpus → an NTP instance whose h_j are what the model's decoder sees, with its decoder.

:func:`load_model_data` tokenises the corpus with the model's own tokenizer
(``tokenizers.Tokenizer.from_file``), cuts the distinct contexts (:mod:`ntpcert.instance.lm.contexts`),
counts next tokens exactly over the model's full vocabulary, and embeds the contexts either by the
model itself (:mod:`ntpcert.instance.lm.capture`, needs ``ntpcert[lm]``) or, with ``static=True``,
by the concatenated input embeddings (:mod:`ntpcert.instance.lm.static`, needs only ``safetensors``).
The result names every file it read by its SHA-256 (:meth:`ModelData.source_record`), which the
certificate records.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries
from ntpcert.instance.lm.contexts import ContextCounts, ContextSpec, count_contexts, split_documents
from ntpcert.instance.lm.files import ModelFiles, locate_model
from ntpcert.instance.lm.merge import TokenMerge, reduced_csr, token_merge
from ntpcert.instance.model import NTPInstance
from ntpcert.instance.sparse import SparseCountsInstance
from ntpcert.util.extras import require
from ntpcert.util.files import one_line, read_input_bytes

__all__ = ["ModelData", "counts_instance", "load_model_data", "open_tokenizer", "read_corpus", "token_names",
           "tokenize_documents"]


@dataclass(frozen=True, eq=False)
class ModelData:
    """An instance read from a model, and where it came from.

    Attributes
    ----------
    instance : NTPInstance
        Embeddings (m, d) as the decoder sees them; counts (m, V) over the model's vocabulary.
    decoder : ndarray of shape (V, d) or None
        The model's decoder on these h (bias as the last column); None on the torch-free path with K > 1
        (``decoder_note`` says why).
    files : tuple of (str, str)
        ``(name, sha256)`` of every model file read.
    corpus_sha256 : str
        SHA-256 of the corpus: of its text (UTF-8), of its token ids in the canonical form of
        :mod:`ntpcert.instance.lm.token_ids`, or of the counts of an activations file
        (:mod:`ntpcert.instance.lm.activations`), as ``corpus`` says.
    context : ContextSpec or str
        The context spec; an activations file's own description of its contexts.
    bos : bool
    embeddings : {"model", "static"}
        Captured by the model (forward hook) or static (concatenated input embeddings).
    tied, bias : bool
    residual : float or None
        Relative residual of the recomputed logits (model path only).
    residual_contexts : int or None
        How many contexts it was checked on (:mod:`ntpcert.instance.lm.capture`; model path only).
    corpus : {"text", "token_ids", "counts"}
        What the corpus was: a text, token ids (``--token-ids``), or the contexts and next tokens of an
        activations file. The source record names it (key ``corpus``) unless it is text.
    token_frequency : ndarray of shape (V,)
        Occurrences of each token in the tokenised corpus.
    merge : TokenMerge or None
        With ``merge_unseen``: the instance's tokens are the observed next tokens plus one representative
        of the unseen ones (:mod:`ntpcert.instance.lm.merge`); ``decoder`` and ``token_frequency`` stay
        over the model's full vocabulary (``merge.reduce_rows`` gives the instance's rows). None: the
        instance has the model's whole vocabulary.
    counts : ContextCounts or None
        The sparse next-token counts over the model's full vocabulary (:meth:`full_instance` builds the
        unmerged instance from them).
    """

    instance: NTPInstance
    decoder: np.ndarray | None
    decoder_note: str
    files: tuple[tuple[str, str], ...]
    corpus_sha256: str
    context: ContextSpec | str
    bos: bool
    embeddings: str
    tied: bool
    bias: bool
    residual: float | None
    architecture: str
    token_frequency: np.ndarray
    merge: TokenMerge | None = None
    counts: ContextCounts | None = None
    vocab_names: tuple[str, ...] | None = None
    residual_contexts: int | None = None
    corpus: str = "text"

    @property
    def V(self) -> int:
        """The model's vocabulary size (rows of ``decoder``), merged or not."""
        return int(self.token_frequency.shape[0])

    def full_instance(self) -> NTPInstance:
        """The instance over the model's whole vocabulary (dense (m, V) counts): ``instance`` itself when
        nothing was merged."""
        if self.merge is None or not self.merge.merged or self.counts is None:
            return self.instance
        inst = self.instance
        return NTPInstance.from_counts(inst.embeddings, self.counts.dense(), token_names=self.vocab_names,
                                       context_names=inst.context_names, name=inst.name)

    def source_record(self) -> dict[str, Any]:
        """The certificate's ``source`` section (:mod:`ntpcert.certificate.provenance`)."""
        out = {"kind": "model", "files": [[n, h] for n, h in self.files], "corpus_sha256": self.corpus_sha256,
               "context": str(self.context), "bos": self.bos, "embeddings": self.embeddings}
        if self.corpus != "text":  # absent: a text, as in every certificate before token ids
            out["corpus"] = self.corpus
        if self.merge is not None:
            out["vocabulary"] = self.merge.to_json()
        return out

    def to_json(self) -> dict[str, Any]:
        """What was read, for reports."""
        return {**self.source_record(), "architecture": self.architecture, "tied": self.tied, "bias": self.bias,
                "capture_residual": self.residual, "capture_residual_contexts": self.residual_contexts,
                "m": self.instance.m, "d": self.instance.d, "V": self.V, "V_instance": self.instance.V,
                "decoder": self.decoder_note or ("the activations file's W" if self.embeddings == "activations"
                                                 else "the model's decoder")}


def read_corpus(corpus: str | os.PathLike, max_chars: int | None = None) -> str:
    """The corpus text: a UTF-8 file, or the built-in name ``pydoc`` (the whole pydoc help text)."""
    path = os.fspath(corpus)
    if not os.path.exists(path) and path == "pydoc":
        from ntpcert.instance.datasets.pydoc_corpus import pydoc_text

        text = pydoc_text(None)
    else:
        try:
            text = read_input_bytes(path, "CORPUS").decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"CORPUS: {path!r} is not UTF-8 text (byte {err.start}: {err.reason})") from None
    text = text if max_chars is None else text[:max_chars]
    if not text.strip():
        raise InputError(f"CORPUS: {path!r} has no text")
    return text


def _tokenizer_failure(err: BaseException) -> bool:
    """A failure of the tokenizers library (a Rust panic is a BaseException), not an interrupt."""
    return not isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError))


def open_tokenizer(tokenizer_path: str, V: int | None = None) -> Any:
    """The tokenizer of ``tokenizer_path``: a non-empty vocabulary and, given the decoder's V, ids below V
    only (a tokenizer with more tokens than the decoder has rows is refused)."""
    tokenizers = require("tokenizers", "lm", "tokenising a corpus with a model's tokenizer")
    try:
        tok = tokenizers.Tokenizer.from_file(tokenizer_path)
        vocab = tok.get_vocab(with_added_tokens=True)
    except BaseException as err:  # noqa: BLE001 - a broken tokenizer file is bad input
        if not _tokenizer_failure(err):
            raise
        raise InputError(f"--model: tokenizer file {tokenizer_path!r} is unreadable ({one_line(err)})") from None
    if not vocab:
        raise InputError(f"tokenizer: {tokenizer_path!r} has an empty vocabulary (0 tokens)")
    top = max(vocab.values())
    if V is not None and top >= V:
        name = max(vocab, key=vocab.get)
        raise InputError(f"tokenizer: {tokenizer_path!r} has token id {top} ({name!r}; {len(vocab)} tokens), but the "
                         f"model's vocab_size is {V}: the decoder has no row for it")
    return tok


def tokenize_documents(tokenizer_path: str, docs: list[str], V: int | None = None) -> tuple[list[list[int]], Any]:
    """Token ids of each document (no special tokens added), and the tokenizer (:func:`open_tokenizer`,
    checked before the corpus is encoded)."""
    tok = open_tokenizer(tokenizer_path, V)
    try:
        ids = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
    except BaseException as err:  # noqa: BLE001 - e.g. an unknown-token id missing from the vocabulary
        if not _tokenizer_failure(err):
            raise
        raise InputError(f"tokenizer: {tokenizer_path!r} cannot encode the corpus ({one_line(err)})") from None
    return ids, tok


def token_names(tok: Any, V: int) -> list[str]:
    """The names of the V tokens (``<z>`` where the tokenizer has none)."""
    names = []
    for z in range(V):
        t = tok.id_to_token(z)
        names.append(f"<{z}>" if t is None else t)
    return names


def _model_vocab(files: ModelFiles, static: bool, bos: bool = False) -> int:
    """V, the decoder's rows: from config.json (``vocab_size``, checked against the checkpoint's headers:
    :func:`ntpcert.instance.lm.checkpoint.vocab_size`), else from the embedding tensor's shape. With
    ``bos``, the config's ``bos_token_id`` must be a token id below V."""
    from ntpcert.instance.lm.checkpoint import checkpoint_tensors, read_config, vocab_size

    if files.config is not None:
        cfg = read_config(files)
        if not (static and cfg.get("vocab_size") is None):  # the static path can read V from the tensor
            V = vocab_size(cfg, checkpoint_tensors(files), files.config)
            if bos:
                from ntpcert.instance.lm.capture import bos_token

                bos_token(cfg, V, files.config)
            return V
    from ntpcert.instance.lm.static import read_static

    return int(read_static(files).embedding.shape[0])


def counts_instance(H: np.ndarray, counts: ContextCounts, names: list[str], merge: TokenMerge | None,
                    name: str, context_names: list[str] | None = None) -> NTPInstance:
    """The instance of the h of ``counts``'s contexts and their exact next-token counts.

    Parameters
    ----------
    H : ndarray of shape (m, d)
        Row j is the h of ``counts.contexts[j]``.
    counts : ContextCounts
        Distinct contexts and their next-token counts over the model's vocabulary of V tokens.
    names : list of str
        The V token names; a context's name joins its tokens' (with a space unless all are characters).
    merge : TokenMerge or None
        Keep the observed next tokens and one representative of the unseen ones, in a
        :class:`~ntpcert.instance.sparse.SparseCountsInstance` (CSR counts); None: all V tokens (dense
        (m, V) counts).
    name : str
    context_names : list of str, optional
        The m context names (default: from their tokens' names).
    """
    sep = "" if all(len(n) == 1 for n in names) else " "
    cnames = context_names if context_names is not None else [sep.join(names[t] for t in c) for c in counts.contexts]
    if merge is None:
        return NTPInstance.from_counts(H, counts.dense(), token_names=names, context_names=cnames, name=name)
    tnames = [names[t] for t in merge.observed] + ([f"<{merge.merged} unseen>"] if merge.merged else [])
    # sparse all the way: (m, V') counts are never dense (ntpcert.instance.sparse)
    return SparseCountsInstance.from_csr(H, reduced_csr(counts, merge), token_names=tnames, context_names=cnames,
                                         name=name)


def load_model_data(
    corpus: str | os.PathLike,
    model: str | os.PathLike,
    *,
    context: str | ContextSpec = "tokens:2",
    bos: bool = False,
    tokenizer: str | os.PathLike | None = None,
    static: bool = False,
    max_chars: int | None = None,
    max_entries: int | None = MAX_ENTRIES,
    merge_unseen: bool = False,
    map_chunks: Any = None,
    batch_size: int | None = None,
    token_ids: bool = False,
) -> ModelData:
    """Read a corpus through a model.

    Parameters
    ----------
    corpus : path
        A UTF-8 text file (documents separated by blank lines) or ``pydoc``; with ``token_ids``, the
        token ids of the documents (:func:`ntpcert.instance.lm.token_ids.read_token_ids`).
    model : path
        A Hugging Face model directory, or a ``.safetensors`` file (then ``static`` and ``tokenizer``).
    context : str or ContextSpec
        ``tokens:K`` or ``prefix:T``.
    bos : bool
        Feed the model's BOS token before each context (model path only).
    tokenizer : path, optional
        ``tokenizer.json``; default the one in the model directory.
    static : bool
        The torch-free path: static embeddings from the input embedding matrix.
    max_chars : int, optional
        Read only the first ``max_chars`` characters of the corpus.
    max_entries : int or None
        Refuse counts (m·V, V of the instance) or embeddings (m·d) of more entries, before allocating them.
    merge_unseen : bool
        Keep only the observed next tokens and one representative of the others
        (:mod:`ntpcert.instance.lm.merge`: exact for compatibility and separability, not for W^mm);
        the counts are then never formed over the full vocabulary.
    map_chunks : callable, optional
        Run the forward passes on worker processes (:func:`ntpcert.instance.lm.capture.capture`); the
        result is the single process's.
    batch_size : int, optional
        Contexts per forward pass (default :data:`ntpcert.instance.lm.capture.BATCH_SIZE`).
    token_ids : bool
        ``corpus`` holds token ids, not text: a ``.npy`` of one document (1-D) or one per row (2-D), or a
        saved ``datasets`` folder (:mod:`ntpcert.instance.lm.token_ids`). The ids of a text tokenised
        as here (:func:`~ntpcert.instance.lm.contexts.split_documents`, each document encoded without
        special tokens) give the instance of the text; ``corpus_sha256`` is then the ids'.

    Raises
    ------
    InputError
        Bad corpus, model directory absent, partial or of an unknown architecture, a refused decoder.
    MissingExtraError
        ``ntpcert[lm]`` missing (``tokenizers``; ``torch`` and ``transformers`` unless ``static``;
        ``safetensors`` always).
    """
    spec = context if isinstance(context, ContextSpec) else ContextSpec.parse(context)
    files = locate_model(model, tokenizer)
    if static and bos:
        raise InputError("--bos: applies to the model's own h, not to --static embeddings")
    if token_ids and max_chars is not None:
        raise InputError(f"--max-chars: value {max_chars} applies to a text corpus, not to --token-ids")
    if not static and not files.is_directory:
        raise InputError(f"--model: {os.fspath(model)!r} is a bare .safetensors file: give its model directory "
                         "(with config.json) for the model's own h, or --static for the torch-free path")
    if not static:
        from ntpcert.instance.lm.capture import require_lm

        require_lm()  # before any work: one line naming ntpcert[lm]
    V = _model_vocab(files, static, bos)
    if token_ids:
        from ntpcert.instance.lm.token_ids import read_token_ids

        tok = open_tokenizer(files.tokenizer, V)
        ids, digest = read_token_ids(corpus, V)
    else:
        text = read_corpus(corpus, max_chars)
        ids, tok = tokenize_documents(files.tokenizer, split_documents(text), V)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    counts = count_contexts(ids, spec, V)
    merge = token_merge(counts) if merge_unseen else None
    Vi = V if merge is None else merge.V_reduced
    check_entries("contexts", counts.m, Vi, max_entries, "the count matrix (m, V)")
    if static:
        from ntpcert.instance.lm.static import read_static

        sm = read_static(files)
        if sm.embedding.shape[0] != V:
            raise InputError(f"--model: the embedding matrix has {sm.embedding.shape[0]} rows, config.json says "
                             f"vocab_size {V}")
        check_entries("contexts", counts.m, spec.length * sm.embedding.shape[1], max_entries, "the embeddings (m, d)")
        H = sm.embed(counts, spec.length)
        one = spec.length == 1
        decoder = sm.decoder if one else None  # its bias, if any, is already the last column
        if one and sm.bias:
            H = np.hstack([H, np.ones((H.shape[0], 1))])
        note = "" if one else (f"static embeddings of {spec.length} tokens have d = {H.shape[1]}, the decoder "
                               f"d = {sm.decoder.shape[1]}: give --W for a decoder of these h")
        tied, bias, residual, arch, kind = sm.tied, sm.bias, None, "safetensors", "static"
        checked = None
    else:
        from ntpcert.instance.lm.capture import capture

        cap = capture(files, counts, spec, bos=bos, map_chunks=map_chunks,
                      **({} if batch_size is None else {"batch_size": batch_size}))
        H, decoder, note = cap.embeddings, cap.decoder, ""
        tied, bias, residual, arch, kind = cap.tied, cap.bias, cap.residual, cap.architecture, "model"
        checked = cap.residual_contexts
    names = token_names(tok, V)
    name = os.path.basename(os.path.normpath(files.root)) or "model"
    inst = counts_instance(H, counts, names, merge, name)
    return ModelData(inst, decoder, note, files.digests(), digest, spec, bos, kind, tied, bias, residual, arch,
                     counts.token_frequency, merge, counts, tuple(names), checked,
                     "token_ids" if token_ids else "text")
