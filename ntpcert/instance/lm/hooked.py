r"""Instances read from models held in memory by TransformerLens or nnsight, through their Python APIs.

Three readers, one per library's view of a causal language model, each returning the
:class:`~ntpcert.instance.lm.load.ModelData` that :func:`~ntpcert.instance.lm.load.load_model_data`
returns for a model directory (a :class:`HookedModelData`, whose :meth:`~HookedModelData.source_record`
adds a ``reader`` section naming the library, the hook point and the weight processing):

* :func:`from_transformer_bridge`: a TransformerLens ``TransformerBridge``; h is the input of the
  unembedding (hook point ``unembed.hook_in``), the decoder is the unembedding ``W_U^T`` (V, d), its
  bias ``b_U`` a constant coordinate when the model's head has a bias or ``b_U`` is not zero. On a
  bridge without weight processing (the default of ``TransformerBridge.boot_transformers``) this is the
  Hugging Face model's instance (what a model directory gives), bit for bit: see *Float paths* below.
* :func:`from_hooked_transformer`: TransformerLens in HookedTransformer form: the legacy
  ``HookedTransformer`` (TransformerLens < 4), or a ``TransformerBridge`` after
  ``enable_compatibility_mode()``, which is what TransformerLens 4 offers in its place (the class
  ``transformer_lens.HookedTransformer`` was removed in 4.0). h is ``ln_final.hook_normalized``, the
  final LayerNorm's normalised vector :math:`\hat h` (mean 0 over its d coordinates, without the gain
  :math:`\gamma` and the shift :math:`\beta`, which ``fold_ln`` moved into ``W_U`` and ``b_U``), and the
  decoder is :math:`[W_U^\top\; b_U]` on :math:`[\hat h; 1]`: d grows by one, always (``b_U`` is a
  parameter of the model, zero or not). This is another instance than the Hugging Face one, with the
  same logits up to a constant per context; docs/math.md (*The HookedTransformer instance*) shows that
  its column space contains the Hugging Face one's, and when the two are equal.
* :func:`from_nnsight`: an ``nnsight`` wrapper (``LanguageModel``, ``TransformersModel`` or ``NNsight``)
  around a Hugging Face model; h is the input of the model's head module
  (``get_output_embeddings()``, ``lm_head`` for GPT-2), saved in a trace. nnsight runs the Hugging Face
  model's own forward pass, so a model opened as :func:`~ntpcert.instance.lm.capture.load_causal_lm`
  opens it gives the model directory's instance bit for bit.

**One capture.** The corpus is tokenised as a model directory's is (documents split at blank lines,
ids without special tokens, :func:`~ntpcert.instance.lm.contexts.count_contexts`), and the forward
passes are :mod:`ntpcert.instance.lm.capture`'s own (``_inputs`` and ``_run_batches``: the same
batches, the same last-position read, the same check of :math:`Wh_j + b` against the model's logits
on the same evenly spaced batches, float64 h); only the *model* (a callable returning logits) and the
*hook point* (a module whose forward pre-hook sees h) change from one library to the next. The model
runs in eval mode and without gradients (its mode is restored after).

**Float paths.** The instance's fingerprint covers the bytes of H, so it is the model directory's
exactly when the library runs the same float32 operations in the same shapes. nnsight does (it calls
the Hugging Face forward). TransformerBridge's own forward does not: it switches the model to eager
attention and, for GPT-2, splits the joint QKV projection into three matrix products and recomputes the
attention itself (``JointQKVAttentionBridge._reconstruct_attention``), so its h differ from the Hugging
Face model's (whose default attention is ``sdpa``) in the last float32 bits: a relative
:math:`\max_j\|h^{TL}_j - h^{HF}_j\| / \|h^{HF}_j\|` of about 2e-7 on the test models
(:data:`FLOAT32_PATH_TOL` bounds it). So :func:`from_transformer_bridge` reads an unprocessed bridge
through the Hugging Face model it wraps: the bridge keeps each wrapped module (with GPT-2's joint
``c_attn`` unchanged), the model is rebuilt from those parameters (compared bit for bit) with the
attention a model directory's load picks, and run as a model directory's capture runs it, which gives
the model directory's fingerprint; the bridge's own logits are compared with it on the checked batches
(``reader.bridge_gap``), so a bridge whose hooks or edited weights make it another model is read
through its own forward instead (``forward="bridge"`` asks for that always; ``reader.forward`` records
which ran).

**Provenance.** An in-memory model has no files to hash: ``files`` names ``state_dict`` (SHA-256 of the
model's tensors, sorted by name: name, dtype, shape and bytes of each) and ``tokenizer.json`` (SHA-256 of
the tokenizer's JSON serialisation, ``tokenizers.Tokenizer.to_str()``, which need not be the bytes of a
file it was read from). ``corpus_sha256`` is the corpus text's, or, for a list of documents, that of the
documents joined by blank lines.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.embeddings import MAX_ENTRIES, check_entries
from ntpcert.instance.lm.contexts import ContextSpec, count_contexts, split_documents
from ntpcert.instance.lm.load import ModelData, counts_instance, read_corpus
from ntpcert.instance.lm.merge import token_merge
from ntpcert.util.extras import require
from ntpcert.util.files import one_line

__all__ = ["FLOAT32_PATH_TOL", "HookedModelData", "from_hooked_transformer", "from_nnsight",
           "from_transformer_bridge", "state_digest"]

#: Largest relative difference :math:`\max_j\|h_j - h'_j\|/\|h'_j\|` expected between two float32 forward
#: passes of the same model that order their operations differently (TransformerBridge's reconstructed
#: attention against the Hugging Face forward: about 2e-7 measured; float32's unit roundoff is 6e-8).
FLOAT32_PATH_TOL = 1e-5


@dataclass(frozen=True, eq=False)
class HookedModelData(ModelData):
    """:class:`~ntpcert.instance.lm.load.ModelData` read through a library's Python API.

    Attributes
    ----------
    reader : dict
        ``library`` and its ``version``, the model's ``class``, the ``hook`` point h was read at, and
        ``processing``: the weight processing in force, each flag true, false or null (not recorded by
        the library; see :func:`from_hooked_transformer`).
    """

    reader: dict = field(default_factory=dict)

    def source_record(self) -> dict[str, Any]:
        """The certificate's ``source`` section, with ``reader`` (:mod:`ntpcert.certificate.provenance`)."""
        return {**super().source_record(), "reader": self.reader}

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "reader": self.reader}


@dataclass
class _Reader:
    """What one library gives a capture: a forward pass, a hook point, the decoder and a description."""

    forward: Callable[[Any], Any]
    """input ids (b, L) (a torch tensor) → logits (b, L, V), run under no_grad."""
    hook: Any
    """A module with ``register_forward_pre_hook``, whose input is h (b, L, d)."""
    W: np.ndarray
    b: np.ndarray | None
    bias: bool
    tied: bool
    dtype: str
    architecture: str
    module: Any
    """The torch module whose mode (eval) and tensors (``state_dict``) are the model's."""
    tokenizer: Any
    bos_id: Callable[[int], int]
    reader: dict
    name: str
    refusal_hint: str = ""
    model: Any = None
    """A Hugging Face model to run in place of ``forward`` (its ``logits_to_keep`` is then used as a model
    directory's capture uses it)."""
    probe: Callable[[Any], float] | None = None
    """input ids (b, L) → the relative gap between another forward pass's logits and ``model``'s, run on
    the checked batches; its largest value goes into ``reader`` as ``bridge_gap``."""


class _Model:
    """The ``model`` :func:`ntpcert.instance.lm.capture._run_batches` calls: ``model(input_ids=..., use_cache=...)``
    with an object with ``logits`` back; its ``forward`` has no ``logits_to_keep``, so every position's logits
    come back and h is read at each context's last position."""

    def __init__(self, forward: Callable[[Any], Any]) -> None:
        self._forward = forward

    def forward(self, input_ids: Any, use_cache: bool = False) -> Any:  # noqa: ARG002 - the HF signature
        return SimpleNamespace(logits=self._forward(input_ids))

    __call__ = forward


def _torch() -> Any:
    return require("torch", "lm", "reading a model held in memory")


def state_digest(module: Any) -> str:
    """SHA-256 of a torch module's ``state_dict``: for each tensor, sorted by name, its name, dtype, shape
    and bytes (the tensors of a tied pair count under each name)."""
    torch = _torch()
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        if not isinstance(t, torch.Tensor):
            continue
        t = t.detach().cpu().contiguous()
        h.update(f"{name};{str(t.dtype).removeprefix('torch.')};{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------- tokenizer
def _backend_tokenizer(tokenizer: Any, fn: str) -> Any:
    """A ``tokenizers.Tokenizer`` from a path of ``tokenizer.json``, a ``tokenizers.Tokenizer`` or a Hugging
    Face fast tokenizer (its ``backend_tokenizer``)."""
    tokenizers = require("tokenizers", "lm", "tokenising a corpus with a model's tokenizer")
    if tokenizer is None:
        raise InputError(f"{fn}: tokenizer: the model carries none; give tokenizer= (a tokenizer.json path or "
                         "a tokenizer)")
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            return tokenizers.Tokenizer.from_file(os.fspath(tokenizer))
        except BaseException as err:  # noqa: BLE001 - a broken tokenizer file is bad input (a Rust panic too)
            if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
                raise
            raise InputError(f"{fn}: tokenizer file {os.fspath(tokenizer)!r} is unreadable ({one_line(err)})") \
                from None
    if isinstance(tokenizer, tokenizers.Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, tokenizers.Tokenizer):
        return backend
    raise InputError(f"{fn}: tokenizer: {type(tokenizer).__name__} is not a tokenizer.json path, a "
                     "tokenizers.Tokenizer or a Hugging Face fast tokenizer")


def _encode(tok: Any, docs: list[str], V: int, fn: str) -> list[list[int]]:
    """Token ids of each document, no special tokens added (as
    :func:`~ntpcert.instance.lm.load.tokenize_documents`). A token id of the corpus at or above V is
    refused naming it; tokens the tokenizer has beyond V but the corpus does not use are allowed
    (TransformerLens adds a padding token to a tokenizer without one)."""
    try:
        ids = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
    except BaseException as err:  # noqa: BLE001 - e.g. an unknown-token id missing from the vocabulary
        if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        raise InputError(f"{fn}: the tokenizer cannot encode the corpus ({one_line(err)})") from None
    top = max((max(d) for d in ids if d), default=-1)
    if top >= V:
        raise InputError(f"{fn}: tokenizer: the corpus has token id {top} ({tok.id_to_token(top)!r}), but the "
                         f"model's decoder has V = {V} rows")
    return ids


def _token_names(tok: Any, V: int) -> list[str]:
    return [f"<{z}>" if (t := tok.id_to_token(z)) is None else t for z in range(V)]


def _documents(corpus: Any, max_chars: int | None, fn: str) -> tuple[list[str], str]:
    """(documents, the text whose SHA-256 is ``corpus_sha256``) of a corpus path or a list of documents."""
    if isinstance(corpus, (str, os.PathLike)):
        text = read_corpus(corpus, max_chars)
        return split_documents(text), text
    if isinstance(corpus, Sequence) and all(isinstance(d, str) for d in corpus):
        docs = [d for d in corpus if d.strip()]
        if not docs:
            raise InputError(f"{fn}: corpus: the list of documents has no text")
        return docs, "\n\n".join(docs)
    raise InputError(f"{fn}: corpus: {type(corpus).__name__} is neither a path nor a list of documents (str)")


# --------------------------------------------------------------------------------------------- the capture
@contextlib.contextmanager
def _eval_mode(module: Any) -> Iterator[None]:
    """``module`` in eval mode (no dropout) for the capture, its mode restored after."""
    was = bool(getattr(module, "training", False))
    module.eval()
    try:
        yield
    finally:
        if was:
            module.train(True)


def _read(rd: _Reader, corpus: Any, fn: str, *, tokenizer: Any, context: str | ContextSpec, bos: bool,
          merge_unseen: bool, max_chars: int | None, max_entries: int | None, batch_size: int | None,
          name: str | None) -> HookedModelData:
    """The instance of ``corpus`` through ``rd``: :func:`~ntpcert.instance.lm.load.load_model_data`'s steps
    with the library's forward pass and hook point."""
    from ntpcert.instance.lm import capture as cap

    torch = _torch()
    spec = context if isinstance(context, ContextSpec) else ContextSpec.parse(context, field=f"{fn}: context")
    V, d = rd.W.shape
    cap._finite(f"{fn}: the decoder's weight", rd.W)
    if rd.b is not None:
        cap._finite(f"{fn}: the decoder's bias", rd.b)
    tok = _backend_tokenizer(rd.tokenizer if tokenizer is None else tokenizer, fn)
    docs, text = _documents(corpus, max_chars, fn)
    ids = _encode(tok, docs, V, fn)
    counts = count_contexts(ids, spec, V)
    merge = token_merge(counts) if merge_unseen else None
    check_entries("contexts", counts.m, V if merge is None else merge.V_reduced, max_entries,
                  "the count matrix (m, V)")
    check_entries("contexts", counts.m, d + int(rd.bias), max_entries, "the embeddings (m, d)")
    bos_id = rd.bos_id(V) if bos else None
    size = cap.BATCH_SIZE if batch_size is None else int(batch_size)
    batches = [(i, a, p, js) for i, (a, p, js) in enumerate(cap._inputs(counts, spec, bos_id, size))]
    check = set(cap.checked_batches(len(batches), size).tolist())
    b_check = rd.b if rd.bias else None
    with _eval_mode(rd.module):
        try:
            got, worst, n_checked = cap._run_batches(_Model(rd.forward) if rd.model is None else rd.model, rd.hook,
                                                     rd.W, b_check, torch, batches, check)
            gap = None if rd.probe is None else max(
                (rd.probe(torch.from_numpy(a)) for i, a, _p, _js in batches if i in check), default=0.0)
        except InputError:
            raise
        except Exception as err:  # noqa: BLE001 - the library's forward pass refused the model or the inputs
            raise InputError(f"{fn}: the forward pass failed: {one_line(err)}") from None
    H = np.zeros((counts.m, d), dtype=np.float64)
    for js, h in got:
        H[js] = h
    limit = cap.RESIDUAL_MAX.get(rd.dtype, cap.RESIDUAL_MAX["float32"])
    if gap is not None:
        if not gap <= FLOAT32_PATH_TOL:
            raise _BridgeDisagrees(gap)
        rd.reader["bridge_gap"] = float(gap)
    if not worst <= limit:
        raise InputError(f"{fn}: the decoder applied to the captured h misses the model's logits by {worst:.3g} "
                         f"(relative, more than {limit:g} for {rd.dtype}){rd.refusal_hint}")
    W = rd.W
    if rd.bias:
        H = np.hstack([H, np.ones((counts.m, 1))])
        W = np.hstack([W, rd.b[:, None]])
    names = _token_names(tok, V)
    inst = counts_instance(H, counts, names, merge, name or rd.name)
    files = (("state_dict", state_digest(rd.module)),
             ("tokenizer.json", hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return HookedModelData(inst, W, "", files, digest, spec, bos, "model", rd.tied, rd.bias, worst, rd.architecture,
                           counts.token_frequency, merge, counts, tuple(names), n_checked, reader=rd.reader)


def _np(t: Any) -> np.ndarray:
    torch = _torch()
    return t.detach().to(torch.float64).cpu().numpy()


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _hf_bos(config: Any, where: str) -> Callable[[int], int]:
    """``bos_token_id`` of a Hugging Face config (or None), checked against V when asked for."""
    from ntpcert.instance.lm.capture import bos_token

    cfg = config.to_dict() if hasattr(config, "to_dict") else dict(getattr(config, "__dict__", {}))
    return lambda V: bos_token(cfg, V, where)


def _tokenizer_bos(tokenizer: Any, where: str) -> Callable[[int], int]:
    from ntpcert.instance.lm.capture import bos_token

    return lambda V: bos_token({"bos_token_id": getattr(tokenizer, "bos_token_id", None)}, V, where)


# --------------------------------------------------------------------------------------------- TransformerLens
def _tl_version() -> str:
    try:
        from importlib.metadata import version

        return version("transformer_lens")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "unknown"


def _is_bridge(model: Any) -> bool:
    return any(c.__name__ == "TransformerBridge" for c in type(model).__mro__)


def _hook_point(model: Any, name: str, fn: str) -> Any:
    hooks = getattr(model, "hook_dict", None)
    if not isinstance(hooks, dict) or name not in hooks:
        raise InputError(f"{fn}: model: {type(model).__name__} has no hook point {name!r}")
    return hooks[name]


def _unembedding(model: Any, fn: str) -> tuple[np.ndarray, np.ndarray | None, Any, Any]:
    """(W (V, d), b_U (V,) or None, the W_U tensor, b_U tensor) of a TransformerLens model."""
    try:
        W_U, b_U = model.W_U, model.b_U
    except Exception as err:  # noqa: BLE001 - no unembedding the library can name
        raise InputError(f"{fn}: model: {type(model).__name__} has no W_U/b_U ({one_line(err)})") from None
    W = _np(W_U).T
    b = None if b_U is None else _np(b_U)
    if W.ndim != 2 or (b is not None and b.shape != (W.shape[0],)):
        raise InputError(f"{fn}: model: W_U of shape {tuple(W_U.shape)} and b_U of shape "
                         f"{None if b_U is None else tuple(b_U.shape)} are not (d, V) and (V,)")
    return np.ascontiguousarray(W), b, W_U, b_U


def _tl_tied(model: Any, W_U: Any) -> bool:
    try:
        W_E = model.W_E
    except Exception:  # noqa: BLE001 - no input embedding to compare
        return False
    return bool(W_E.data_ptr() == W_U.data_ptr() and W_E.numel() == W_U.numel())


def _unembed_centred(W: np.ndarray) -> bool:
    """Whether every column of W (V, d) has mean 0 over the vocabulary to float32 rounding (TransformerLens'
    ``center_unembed``), measured: the library does not record it."""
    scale = float(np.abs(W).max()) if W.size else 0.0
    return bool(np.abs(W.mean(axis=0)).max() <= 1e-6 * max(scale, np.finfo(np.float64).tiny))


def _bridge_processing(bridge: Any, W: np.ndarray) -> dict:
    """The weight processing of a bridge: what TransformerLens records (``compatibility_mode``, whether
    ``process_weights`` ran and with ``fold_ln``), the unembedding's centring as measured, and null for the
    flags it keeps no record of."""
    processed = bool(getattr(bridge, "_weights_processed", False))
    fold = getattr(getattr(bridge, "adapter", None), "_fold_ln_requested", None)
    return {"compatibility_mode": bool(getattr(bridge, "compatibility_mode", False)),
            "weights_processed": processed,
            "fold_ln": (bool(fold) if fold is not None else None) if processed else False,
            "center_unembed": _unembed_centred(W) if processed else False,
            "center_writing_weights": None if processed else False,
            "fold_value_biases": None if processed else False}


def _legacy_processing(model: Any, W: np.ndarray) -> dict:
    """The processing of a legacy HookedTransformer: ``fold_ln`` from ``cfg.normalization_type`` (LNPre or
    RMSPre after folding), the flags its config carries, the unembedding's centring as measured."""
    cfg = getattr(model, "cfg", None)
    norm = getattr(cfg, "normalization_type", None)
    out: dict[str, bool | None] = {"compatibility_mode": None, "weights_processed": None,
                                   "fold_ln": None if norm is None else str(norm).endswith("Pre"),
                                   "center_unembed": _unembed_centred(W)}
    for key in ("center_writing_weights", "fold_value_biases"):
        v = getattr(cfg, key, None)
        out[key] = v if isinstance(v, bool) else None
    return out


def _bridge_base(bridge: Any) -> Any:
    """The Hugging Face model a bridge wraps (``original_model``), or None."""
    try:
        return bridge.original_model
    except Exception:  # noqa: BLE001 - a bridge over something else
        return None


class _BridgeDisagrees(Exception):
    """The rebuilt Hugging Face model's logits are not the bridge's (hooks or edited weights)."""

    def __init__(self, gap: float) -> None:
        super().__init__(gap)
        self.gap = gap


#: ``forward`` choices of :func:`from_transformer_bridge`.
BRIDGE_FORWARDS = ("auto", "transformers", "bridge")


def _rebuilt_hf(bridge: Any, base: Any, proc: dict) -> tuple[Any, str]:
    """The Hugging Face model a bridge wraps, rebuilt as a plain ``transformers`` model with the same
    parameters (bit for bit), or ``(None, why not)``.

    The bridge keeps each wrapped module as ``_original_component`` (its parameters unchanged, e.g. GPT-2's
    joint ``c_attn``, which the bridge splits into q, k, v for its own forward); the rebuilt model has
    every parameter of its class found there under the name without ``._original_component``, compared
    bitwise, and the attention implementation a model directory's load picks (the bridge switched the
    wrapped config to eager for its own reconstruction). Refused for processed weights (``process_weights``/compatibility mode changed them)."""
    torch = _torch()
    if proc["compatibility_mode"] or proc["weights_processed"]:
        return None, "the bridge's weights are processed"
    try:
        import transformers
    except ImportError:
        return None, "transformers is not installed"
    if not isinstance(base, transformers.PreTrainedModel):
        return None, f"the bridge wraps a {type(base).__name__}, not a transformers model"
    src: dict[str, Any] = {}
    for nm, t in list(base.named_parameters(remove_duplicate=False)) + list(base.named_buffers()):
        src.setdefault(nm.replace("._original_component", ""), t)
    try:
        dtype = next(base.parameters()).dtype
        # the attention a model directory's load picks (transformers' default): the bridge set the shared
        # config to eager for its own forward
        model = type(base)._from_config(copy.deepcopy(base.config), attn_implementation=None, dtype=dtype)
        own = model.state_dict()
        missing = [k for k in own if k not in src]
        if missing:
            return None, f"no parameter {missing[0]!r} in the wrapped model"
        model.load_state_dict({k: src[k] for k in own}, strict=True)
    except Exception as err:  # noqa: BLE001 - a class that cannot be rebuilt from its config
        return None, f"rebuilding {type(base).__name__} failed: {one_line(err)}"
    for k, t in model.state_dict().items():
        if t.dtype != src[k].dtype or t.shape != src[k].shape or not torch.equal(t, src[k]):
            return None, f"{k!r} differs from the wrapped model's"
    model.eval()
    return model, ""


def _logits_gap(torch: Any) -> Callable[[Any, Any], float]:
    def gap(a: Any, b: Any) -> float:
        a, b = a.detach().to(torch.float64), b.detach().to(torch.float64)
        scale = float(b.abs().max()) or 1.0
        return float((a - b).abs().max()) / scale
    return gap


def from_transformer_bridge(bridge: Any, corpus: Any, *, tokenizer: Any = None, context: str | ContextSpec = "tokens:2",
                            bos: bool = False, merge_unseen: bool = False, max_chars: int | None = None,
                            max_entries: int | None = MAX_ENTRIES, batch_size: int | None = None,
                            name: str | None = None, forward: str = "auto") -> HookedModelData:
    r"""The instance of ``corpus`` as a TransformerLens ``TransformerBridge``'s unembedding sees it.

    h is the input of the unembedding (hook point ``unembed.hook_in``), the decoder :math:`W_U^\top`
    (V, d); ``b_U`` is the last coordinate's column (h gets a trailing 1) when the wrapped model's head
    has a bias parameter or ``b_U`` is not zero (the bridge gives a head without bias a zero ``b_U``,
    which is not kept, so a bridge without weight processing gives the Hugging Face model's instance).
    After ``enable_compatibility_mode()`` the unembedding's input is the normalised :math:`\hat h` and
    ``b_U`` holds the folded shift: the instance is then :func:`from_hooked_transformer`'s when ``b_U`` is
    not zero. ``reader.processing`` records which processing is on.

    Parameters
    ----------
    bridge : transformer_lens.model_bridge.TransformerBridge
    corpus : path or list of str
        A UTF-8 text file (documents separated by blank lines), ``pydoc``, or the documents themselves.
    tokenizer : path, tokenizers.Tokenizer or a Hugging Face fast tokenizer, optional
        Default the bridge's own (``bridge.tokenizer``).
    context : str or ContextSpec
        ``tokens:K`` or ``prefix:T``.
    bos : bool
        Feed the model's ``bos_token_id`` before every context.
    merge_unseen, max_chars, max_entries, batch_size
        As :func:`~ntpcert.instance.lm.load.load_model_data`.
    name : str, optional
        The instance's name; default the bridge's ``cfg.model_name``, last path component.
    forward : {"auto", "transformers", "bridge"}
        Whose forward pass gives h. ``"bridge"``: the bridge's own (TransformerLens' reconstructed
        attention, another float32 path than the Hugging Face model's: *Float paths* above).
        ``"transformers"``: the Hugging Face model the bridge wraps, rebuilt as a plain ``transformers``
        model from the wrapped modules' parameters (compared bit for bit), run as a model directory's
        capture runs it, so the instance is the model directory's exactly (same fingerprint); the bridge's
        own logits are compared with it on the checked batches (``reader.bridge_gap``, relative to the
        largest |logit|) and must agree to :data:`FLOAT32_PATH_TOL`, or hooks or edited weights make the
        bridge another model and the read is refused. ``"auto"`` (default): ``"transformers"`` where the
        bridge's weights are unprocessed and its logits agree, else ``"bridge"``, with the reason in
        ``reader.forward_note``. ``reader.forward`` says which ran.

    Raises
    ------
    InputError
        Not a bridge, a refused tokenizer, a non-finite decoder or h, a residual above
        :data:`~ntpcert.instance.lm.capture.RESIDUAL_MAX`, an unknown ``forward``, or ``"transformers"``
        where the bridge cannot be rebuilt or its logits disagree.
    MissingExtraError
        Without ``ntpcert[tl]``.
    """
    fn = "from_transformer_bridge"
    require("transformer_lens", "tl", "reading a TransformerBridge")
    torch = _torch()
    if forward not in BRIDGE_FORWARDS:
        raise InputError(f"{fn}: forward: {forward!r} is not one of {', '.join(BRIDGE_FORWARDS)}")
    if not _is_bridge(bridge):
        raise InputError(f"{fn}: model: {type(bridge).__name__} is not a transformer_lens TransformerBridge")
    hook = _hook_point(bridge, "unembed.hook_in", fn)
    W, b, W_U, b_U = _unembedding(bridge, fn)
    base = _bridge_base(bridge)
    head = getattr(getattr(bridge, "unembed", None), "original_component", None)
    has_param = isinstance(getattr(head, "bias", None), torch.nn.Parameter)
    bias = b is not None and (has_param or bool(np.any(b != 0.0)))
    proc = _bridge_processing(bridge, W)
    cfg = getattr(bridge, "cfg", None)
    model_name = str(getattr(cfg, "model_name", "") or "bridge")
    reader = {"library": "transformer_lens", "version": _tl_version(), "class": type(bridge).__name__,
              "hook": "unembed.hook_in", "processing": proc, "forward": "bridge",
              "attention": str(getattr(getattr(base, "config", None), "_attn_implementation", None))}
    rd = _Reader(lambda ids: bridge(ids, return_type="logits"), hook, W, b, bias, _tl_tied(bridge, W_U), _dtype(W_U),
                 type(base).__name__ if base is not None else type(bridge).__name__, bridge,
                 getattr(bridge, "tokenizer", None),
                 _hf_bos(base.config, "bridge.original_model.config") if base is not None and hasattr(base, "config")
                 else _tokenizer_bos(getattr(bridge, "tokenizer", None), "bridge.tokenizer"), reader,
                 os.path.basename(os.path.normpath(model_name)) or "bridge")
    kw = dict(tokenizer=tokenizer, context=context, bos=bos, merge_unseen=merge_unseen, max_chars=max_chars,
              max_entries=max_entries, batch_size=batch_size, name=name)
    hf, why = (None, "") if forward == "bridge" else _rebuilt_hf(bridge, base, proc)
    if hf is None:
        if forward == "transformers":
            raise InputError(f"{fn}: forward='transformers': {why}")
        if why:
            rd.reader["forward_note"] = why
        return _read(rd, corpus, fn, **kw)
    gap = _logits_gap(torch)
    # the attention of the rebuilt model: the wrapped config's (the bridge switched its own to eager)
    hf_reader = {**reader, "hook": "lm_head.input (of the wrapped transformers model)", "forward": "transformers",
                 "attention": str(getattr(hf.config, "_attn_implementation", None))}
    hf_rd = dataclasses.replace(rd, model=hf, hook=hf.get_output_embeddings(), reader=hf_reader,
                                probe=lambda ids: gap(bridge(ids, return_type="logits"), hf(input_ids=ids).logits))
    try:
        return _read(hf_rd, corpus, fn, **kw)
    except _BridgeDisagrees as err:
        why = (f"the bridge's logits differ from its wrapped transformers model's by {err.gap:.3g} (relative), "
               f"more than {FLOAT32_PATH_TOL:g}: hooks or edited weights")
        if forward == "transformers":
            raise InputError(f"{fn}: forward='transformers': {why}") from None
        rd.reader["forward_note"] = why
        return _read(rd, corpus, fn, **kw)


def from_hooked_transformer(model: Any, corpus: Any, *, tokenizer: Any = None,
                            context: str | ContextSpec = "tokens:2", bos: bool = False, merge_unseen: bool = False,
                            max_chars: int | None = None, max_entries: int | None = MAX_ENTRIES,
                            batch_size: int | None = None, name: str | None = None) -> HookedModelData:
    r"""The instance of ``corpus`` in TransformerLens' HookedTransformer coordinates.

    ``model`` is a legacy ``HookedTransformer`` (TransformerLens < 4) or a ``TransformerBridge`` after
    ``enable_compatibility_mode()`` (TransformerLens 4 removed the class; the bridge in compatibility mode
    is its replacement, with the same load-time processing by default: ``fold_ln``,
    ``center_writing_weights``, ``center_unembed``, ``fold_value_biases``). h is read at
    ``ln_final.hook_normalized``: with ``fold_ln`` the final LayerNorm's normalised vector
    :math:`\hat h_j` (mean 0 over its d coordinates), the gain and shift folded into ``W_U`` and ``b_U``.
    The instance is :math:`[\hat h_j; 1]` with the decoder :math:`[W_U^\top\; b_U]` (V, d + 1), whatever
    ``b_U``'s value: its logits are the Hugging Face model's up to a constant per context (``center_unembed``
    subtracts the vocabulary mean of every logit), so the NTP margins, log-odds, the loss and the verdicts
    are those of a decoder of the Hugging Face model, but the instance is another one (docs/math.md, *The
    HookedTransformer instance*: its column space contains the Hugging Face instance's, with equality
    unless :math:`\sum_i\beta_i/\gamma_i = 0` or a gain is zero).

    ``reader.processing`` records the processing: ``fold_ln`` (from the bridge's processing request, or a
    legacy model's ``cfg.normalization_type``), ``center_unembed`` as measured on ``W_U`` (every column's
    vocabulary mean 0 to float32 rounding), ``center_writing_weights`` and ``fold_value_biases`` from the
    legacy config when it has them, else null: TransformerLens 4 keeps no record of them.

    Parameters are those of :func:`from_transformer_bridge`; the default tokenizer is ``model.tokenizer``.

    Raises
    ------
    InputError
        A bridge not in compatibility mode, a model without ``ln_final.hook_normalized``, or a residual
        above :data:`~ntpcert.instance.lm.capture.RESIDUAL_MAX` (the LayerNorm not folded: its
        normalised vector is then not what ``W_U`` reads).
    MissingExtraError
        Without ``ntpcert[tl]``.
    """
    fn = "from_hooked_transformer"
    require("transformer_lens", "tl", "reading a HookedTransformer")
    bridge = _is_bridge(model)
    if bridge and not getattr(model, "compatibility_mode", False):
        raise InputError(f"{fn}: model: a TransformerBridge without enable_compatibility_mode() has the Hugging "
                         "Face model's weights, not HookedTransformer's: read it with from_transformer_bridge, "
                         "or call enable_compatibility_mode() first")
    hook = _hook_point(model, "ln_final.hook_normalized", fn)
    W, b, W_U, b_U = _unembedding(model, fn)
    if b is None:
        b = np.zeros(W.shape[0])
    proc = _bridge_processing(model, W) if bridge else _legacy_processing(model, W)
    cfg = getattr(model, "cfg", None)
    model_name = str(getattr(cfg, "model_name", "") or "hooked")
    base = _bridge_base(model) if bridge else None
    reader = {"library": "transformer_lens", "version": _tl_version(), "class": type(model).__name__,
              "hook": "ln_final.hook_normalized", "processing": proc}
    hint = ("" if proc.get("fold_ln") else
            ": the final LayerNorm is not folded into W_U (fold_ln off), so its normalised vector is not what "
            "the unembedding reads; read the model with from_transformer_bridge")
    tok = getattr(model, "tokenizer", None)
    bos_fn = (_hf_bos(base.config, "model.original_model.config") if base is not None and hasattr(base, "config")
              else _tokenizer_bos(tok, "model.tokenizer"))
    rd = _Reader(lambda ids: model(ids, return_type="logits"), hook, W, b, True, False, _dtype(W_U),
                 type(base).__name__ if base is not None else type(model).__name__, model, tok, bos_fn, reader,
                 os.path.basename(os.path.normpath(model_name)) or "hooked", hint)
    return _read(rd, corpus, fn, tokenizer=tokenizer, context=context, bos=bos, merge_unseen=merge_unseen,
                 max_chars=max_chars, max_entries=max_entries, batch_size=batch_size, name=name)


# --------------------------------------------------------------------------------------------- nnsight
class _TraceHook:
    """The hook point of an nnsight model for :func:`~ntpcert.instance.lm.capture._run_batches`: the pre-hook
    it registers is called, by :func:`_nnsight_forward`, with the h a trace saved at the head's input."""

    def __init__(self) -> None:
        self.hooks: list[Callable[..., Any]] = []

    def register_forward_pre_hook(self, fn: Callable[..., Any]) -> Any:
        self.hooks.append(fn)
        return SimpleNamespace(remove=lambda: self.hooks.remove(fn))


def _nnsight_forward(model: Any, envoy: Any, hook: _TraceHook) -> Callable[[Any], Any]:
    """A forward pass through nnsight: one trace saves the head's input and stops there; the pre-hooks see it
    (one raises when the batch's logits are not checked); a second trace saves the logits for the check."""

    def forward(ids: Any) -> Any:
        with model.trace(input_ids=ids) as tracer:
            h = envoy.input.save()
            tracer.stop()
        for fn in list(hook.hooks):
            fn(None, (h,))
        with model.trace(input_ids=ids):
            logits = model.output.logits.save()
        return logits

    return forward


def from_nnsight(model: Any, corpus: Any, *, tokenizer: Any = None, context: str | ContextSpec = "tokens:2",
                 bos: bool = False, merge_unseen: bool = False, max_chars: int | None = None,
                 max_entries: int | None = MAX_ENTRIES, batch_size: int | None = None,
                 name: str | None = None) -> HookedModelData:
    """The instance of ``corpus`` through an nnsight wrapper of a Hugging Face causal language model.

    h is the input of the wrapped model's head (``get_output_embeddings()``), saved in an nnsight trace
    (``model.<head>.input.save()``, the trace stopped there); the decoder is the head's weight, its bias
    the last column as for a model directory. On the checked batches a second trace saves the logits
    for the residual check. nnsight calls the model's own forward, so a model in the same dtype with the
    same attention implementation gives the model directory's instance bit for bit.

    Parameters are those of :func:`from_transformer_bridge`; the default tokenizer is ``model.tokenizer``.

    Raises
    ------
    InputError
        Not an nnsight wrapper of a model with a linear head, a refused tokenizer, a non-finite decoder or
        h, or a residual above :data:`~ntpcert.instance.lm.capture.RESIDUAL_MAX`.
    MissingExtraError
        Without ``ntpcert[nnsight]``.
    """
    fn = "from_nnsight"
    nnsight = require("nnsight", "nnsight", "reading an nnsight model")
    torch = _torch()
    try:
        module = model._module
    except Exception:  # noqa: BLE001 - not an nnsight wrapper
        module = None
    if module is None or not isinstance(module, torch.nn.Module):
        raise InputError(f"{fn}: model: {type(model).__name__} is not an nnsight wrapper of a torch model")
    get_head = getattr(module, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    if type(head) is not torch.nn.Linear:
        raise InputError(f"{fn}: model: the decoder (get_output_embeddings()) is {type(head).__name__}, not a "
                         "linear layer (torch.nn.Linear)")
    path = next(n for n, mod in module.named_modules() if mod is head)
    envoy = model
    for part in path.split("."):
        envoy = getattr(envoy, part)
    W = np.ascontiguousarray(_np(head.weight))
    b = None if head.bias is None else _np(head.bias)
    emb = module.get_input_embeddings() if hasattr(module, "get_input_embeddings") else None
    tied = bool(emb is not None and getattr(emb, "weight", None) is not None
                and emb.weight.data_ptr() == head.weight.data_ptr() and emb.weight.shape == head.weight.shape)
    hook = _TraceHook()
    config = getattr(module, "config", None)
    reader = {"library": "nnsight", "version": str(getattr(nnsight, "__version__", "unknown")),
              "class": type(model).__name__, "hook": f"{path}.input", "processing": {},
              "attention": str(getattr(config, "_attn_implementation", None))}
    tok = getattr(model, "tokenizer", None)
    bos_fn = _hf_bos(config, "model config") if config is not None else _tokenizer_bos(tok, "model.tokenizer")
    raw = getattr(config, "name_or_path", "") or "nnsight"
    rd = _Reader(_nnsight_forward(model, envoy, hook), hook, W, b, b is not None, tied, _dtype(head.weight),
                 type(module).__name__, module, tok, bos_fn, reader,
                 os.path.basename(os.path.normpath(str(raw))) or "nnsight")
    return _read(rd, corpus, fn, tokenizer=tokenizer, context=context, bos=bos, merge_unseen=merge_unseen,
                 max_chars=max_chars, max_entries=max_entries, batch_size=batch_size, name=name)
