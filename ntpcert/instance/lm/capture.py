r"""h_j exactly as the decoder sees it: a forward hook on the model's output embeddings.

The model is opened with ``local_files_only=True`` (nothing reaches a hub), ``trust_remote_code=False``
(no code from the directory runs) and ``use_safetensors=True`` (no pickle is unpickled) in the dtype it
is stored in, after :mod:`ntpcert.instance.lm.checkpoint` has checked its config and tensors against
the architecture, and run without gradients; transformers' loading report must list no missing or
mismatched tensor. A forward pre-hook on ``model.get_output_embeddings()`` records the
decoder's input at the last position: the hidden state after the final norm and any scaling the
model applies before its head. With the head's weight :math:`W` (V, d) and bias :math:`b` (V,),

.. math:: \hat\ell_j = W h_j + b

is recomputed in float64 and compared with the model's own logits :math:`\ell_j`; the capture's
``residual`` is :math:`\max_j \|\hat\ell_j - \ell_j\| / \|\ell_j\|` over the checked contexts. A
residual above :data:`RESIDUAL_MAX` for the model's dtype means the model does something to its logits
after the head, and the capture is refused.

**Which contexts are checked.** The check guards one property of the model, not of a context: that
nothing acts on the logits after the head (the config keys of :data:`LOGIT_POSTPROCESSING` are refused
before any forward pass). Every context goes through the same code, so the check runs on a fixed,
evenly spaced set of batches, the first and the last among them, holding at least
:data:`RESIDUAL_CONTEXTS` contexts (all of them when there are no more); ``residual_contexts`` says how
many. On the other batches the hook stops the forward pass at the head's input, so neither the model's
head nor the float64 recomputation runs there: at the whole pydoc text (m = 31,621, V = 50,257,
d = 768) those two took about 90 of the capture's 137 s. The set depends on m and the batch size only,
so the same inputs are always checked the same way. A non-finite entry of the decoder (weight or bias), of a captured
:math:`h_j` or of the model's logits is refused by name, checked explicitly (a NaN residual would
otherwise compare as small).

A bias becomes an appended constant coordinate: :math:`h_j \mapsto (h_j, 1)`, :math:`W \mapsto
[W \; b]`, so the instance's decoder is linear. A head that is not ``torch.nn.Linear``, or a
configuration with a logit scale or a final soft-capping other than 1, is refused with one line:
the theory is about linear decoders.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ntpcert.errors import InputError
from ntpcert.instance.lm.contexts import ContextCounts, ContextSpec
from ntpcert.instance.lm.files import ModelFiles
from ntpcert.util.extras import require
from ntpcert.util.files import one_line

__all__ = ["RESIDUAL_CONTEXTS", "RESIDUAL_MAX", "Capture", "capture_chunk", "checked_batches", "bos_token", "capture", "load_causal_lm", "require_lm"]

#: Largest accepted relative residual of the recomputed logits, by the model's dtype (float32: the
#: issue's 1e-5; half precisions round the model's own logits to about 3 decimal digits).
RESIDUAL_MAX = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-2, "bfloat16": 2e-2}

#: Contexts per forward pass.
BATCH_SIZE = 256

#: The recomputed logits are compared with the model's on at least this many contexts (module doc).
RESIDUAL_CONTEXTS = 2048

#: Configuration keys that scale or cap the logits after the head, and the value that is harmless.
LOGIT_POSTPROCESSING = {"logit_scale": 1.0, "logits_scaling": 1.0, "final_logit_softcapping": None,
                        "output_multiplier_scale": 1.0}


def require_lm(feature: str = "reading a model") -> tuple[Any, Any]:
    """torch and transformers, or a :class:`~ntpcert.errors.MissingExtraError` naming ``ntpcert[lm]``."""
    torch = require("torch", "lm", feature)
    transformers = require("transformers", "lm", feature)
    return torch, transformers


@dataclass(frozen=True, eq=False)
class Capture:
    r"""What the hook saw.

    Attributes
    ----------
    embeddings : ndarray of shape (m, d)
        The decoder's inputs (float64, exactly the model's values), with a trailing 1 when the head has a bias.
    decoder : ndarray of shape (V, d)
        The head's weight, with the bias as its last column when there is one.
    residual : float
        :math:`\max_j \|W h_j + b - \ell_j\| / \|\ell_j\|` against the model's own logits, over the
        checked contexts.
    tied, bias : bool
        Whether the head's weight is the input embedding matrix, whether it has a bias.
    dtype, architecture : str
        The model's dtype and class name.
    """

    embeddings: np.ndarray
    decoder: np.ndarray
    residual: float
    tied: bool
    bias: bool
    dtype: str
    architecture: str
    residual_contexts: int = 0
    """How many contexts the residual was checked on (module doc)."""


class _HeadReached(Exception):
    """Raised by the capture hook on a batch whose logits are not checked: the forward pass ends at the
    head's input, which is all the capture needs."""


def checked_batches(n: int, batch_size: int, contexts: int | None = None) -> np.ndarray:
    """Indices of the batches (of ``n``, ``batch_size`` contexts each) whose logits are checked: evenly
    spaced, the first and the last among them, at least ``contexts`` contexts in all (every batch when
    there are no more); ``contexts`` defaults to :data:`RESIDUAL_CONTEXTS`."""
    contexts = RESIDUAL_CONTEXTS if contexts is None else contexts
    want = -(-int(contexts) // max(int(batch_size), 1)) + 1  # one more: the last batch may be short
    if n <= want:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, want).round().astype(np.int64))


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """transformers without its progress bars and warnings (library code does not print), restored after."""
    log = transformers.utils.logging
    verbosity = log.get_verbosity()
    bars = log.is_progress_bar_enabled()
    log.set_verbosity_error()
    log.disable_progress_bar()
    try:
        yield
    finally:
        log.set_verbosity(verbosity)
        if bars:
            log.enable_progress_bar()


def _check_config(files: ModelFiles, transformers: Any) -> dict:
    from ntpcert.instance.lm.checkpoint import read_config

    cfg = read_config(files)
    mtype = cfg.get("model_type")
    names = transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if mtype not in names:
        raise InputError(f"--model: unknown architecture: model_type {mtype!r} in {files.config!r} is not a causal "
                         f"language model of transformers {transformers.__version__}")
    for key, harmless in LOGIT_POSTPROCESSING.items():
        value = cfg.get(key, harmless)
        if value != harmless and not (harmless is None and value in (None, 0, 0.0)):
            raise InputError(f"--model: config {key} = {value!r}: the model post-processes its logits, so its "
                             "decoder is not linear (only a logit scale 1 and no soft-capping are read)")
    return cfg


def load_causal_lm(files: ModelFiles) -> Any:
    """The model of ``files`` (a directory), in eval mode, opened offline."""
    torch, transformers = require_lm()
    if not files.is_directory:
        raise InputError(f"--model: {files.weights[0]!r} is a bare .safetensors file: give its model directory "
                         "(with config.json) for the model's own h, or --static for the torch-free path")
    from ntpcert.instance.lm.checkpoint import check_parameters, checkpoint_tensors

    cfg = _check_config(files, transformers)
    with _quiet(transformers):
        check_parameters(files, cfg, checkpoint_tensors(files), transformers, torch)
        try:
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                files.root, local_files_only=True, trust_remote_code=False, use_safetensors=True, dtype="auto",
                output_loading_info=True)
        except Exception as err:  # noqa: BLE001 - any loader failure is bad input here
            raise InputError(f"--model: cannot open {files.root!r}: {one_line(err)}") from None
    for key, what in (("missing_keys", "is missing from the checkpoint"),
                      ("mismatched_keys", "has another shape in the checkpoint")):
        bad = sorted(str(k if isinstance(k, str) else k[0]) for k in (info or {}).get(key) or ())
        if bad:
            raise InputError(f"--model: tensor {bad[0]!r} {what} (transformers would initialise it at random): "
                             "a partial checkpoint is refused")
    model.eval()
    return model


def _finite(what: str, a: np.ndarray) -> None:
    """An :class:`InputError` naming the first non-finite entry of ``a``."""
    bad = ~np.isfinite(a)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"--model: {what}[{', '.join(map(str, idx))}] = {float(a[idx])!r} is not finite")


def bos_token(cfg: dict, V: int, config: str) -> int:
    """The config's ``bos_token_id``, a token id in ``[0, V)`` (what ``--bos`` feeds)."""
    bos_id = cfg.get("bos_token_id")
    if not isinstance(bos_id, int) or isinstance(bos_id, bool) or not 0 <= bos_id < V:
        raise InputError(f"--bos: the model's config {config!r} has no bos_token_id in 0..{V - 1} "
                         f"(bos_token_id = {bos_id!r})")
    return bos_id


def _head(model: Any, torch: Any) -> tuple[Any, bool]:
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear:
        raise InputError(f"--model: the decoder (get_output_embeddings()) is {type(head).__name__}, not a linear "
                         "layer (torch.nn.Linear)")
    emb = model.get_input_embeddings()
    tied = emb is not None and getattr(emb, "weight", None) is not None and \
        emb.weight.data_ptr() == head.weight.data_ptr() and emb.weight.shape == head.weight.shape
    return head, bool(tied)


def _inputs(counts: ContextCounts, spec: ContextSpec, bos: int | None,
            batch: int = BATCH_SIZE) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Forward batches: (input ids (b, L), positions (b,) of each context's last token, context indices (b,)).

    ``tokens:K``: one row per context. ``prefix:T``: one row per maximal context; its shorter prefixes
    (which are contexts too) are read at earlier positions of the same row."""
    ctx = counts.contexts
    lead = [] if bos is None else [bos]
    if spec.kind == "tokens":
        ids = np.array([lead + list(c) for c in ctx], dtype=np.int64).reshape(len(ctx), -1)
        pos = np.full(len(ctx), ids.shape[1] - 1, dtype=np.int64)
        rows = np.arange(len(ctx))
        return [(ids[s:s + batch], pos[s:s + batch], rows[s:s + batch]) for s in range(0, len(ctx), batch)]
    index = {c: j for j, c in enumerate(ctx)}
    longer = {c[:-1] for c in ctx if len(c) > 1}
    maximal = [c for c in ctx if c not in longer]
    out = []
    by_len: dict[int, list[tuple[int, ...]]] = {}
    for c in maximal:
        by_len.setdefault(len(c), []).append(c)
    for L, group in sorted(by_len.items()):
        for s in range(0, len(group), batch):
            part = group[s:s + batch]
            ids = np.array([lead + list(c) for c in part], dtype=np.int64)
            for t in range(1, L + 1):  # the prefix of length t ends at position len(lead) + t - 1
                js = np.array([index[c[:t]] for c in part], dtype=np.int64)
                out.append((ids, np.full(len(part), len(lead) + t - 1, dtype=np.int64), js))
    return out


def _run_batches(model: Any, head: Any, W: np.ndarray, b: np.ndarray | None, torch: Any,
                 batches: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]], check: set[int]
                 ) -> tuple[list[tuple[np.ndarray, np.ndarray]], float, int]:
    """Run ``model`` on ``batches`` (index, ids, positions, context indices) and capture h at each context's
    last token; on the batches in ``check`` also compare the recomputed logits with the model's. Returns
    ``([(context indices, h)], worst relative residual, contexts checked)``."""
    seen: list[Any] = []
    keep_last = "logits_to_keep" in inspect.signature(model.forward).parameters
    stop = [False]

    def _record(_mod: Any, args: Any) -> None:
        seen.append(args[0].detach())
        if stop[0]:
            raise _HeadReached

    hook = head.register_forward_pre_hook(_record)
    worst, n_checked, got = 0.0, 0, []
    try:
        with torch.no_grad():
            for i, ids, pos, js in batches:
                seen.clear()
                last = keep_last and bool(np.all(pos == ids.shape[1] - 1))
                extra = {"logits_to_keep": 1} if last else {}  # the head on the last position only
                stop[0] = i not in check
                out = None
                try:
                    out = model(input_ids=torch.from_numpy(ids), use_cache=False, **extra)
                except _HeadReached:
                    pass
                h_all = seen[-1]
                sel = torch.arange(ids.shape[0])
                at = torch.full((ids.shape[0],), h_all.shape[1] - 1) if last else torch.from_numpy(pos)
                h = h_all[sel, at].to(torch.float64).cpu().numpy()
                del h_all
                seen.clear()
                _finite(f"the captured h of contexts {int(js[0])}..{int(js[-1])}: h", h)
                got.append((js, h))
                if out is None:
                    continue
                logits = out.logits[sel, at].to(torch.float64).cpu().numpy()
                del out
                _finite(f"the model's logits of contexts {int(js[0])}..{int(js[-1])}: logits", logits)
                n_checked += len(js)
                mine = h @ W.T + (0.0 if b is None else b)
                scale = np.maximum(np.linalg.norm(logits, axis=1), np.finfo(np.float64).tiny)
                r = float(np.max(np.linalg.norm(mine - logits, axis=1) / scale))
                if not math.isfinite(r):  # max() keeps the old value against a NaN: check it here
                    raise InputError(f"--model: the recomputed logits of contexts {int(js[0])}..{int(js[-1])} are "
                                     f"not finite (relative residual {r!r})")
                worst = max(worst, r)
    finally:
        hook.remove()
    return got, worst, n_checked


#: A worker process's model, read once per model directory: ``{(root, file digests): (model, head, W, b)}``.
_WORKER_MODELS: dict[Any, tuple[Any, Any, np.ndarray, np.ndarray | None]] = {}


def capture_chunk(files: ModelFiles, batches: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]],
                  check: set[int]) -> tuple[list[tuple[np.ndarray, np.ndarray]], float, int]:
    """:func:`_run_batches` in a worker process of a distributed capture (``map_chunks`` of
    :func:`capture`): the model is opened once per process, with the same checks as :func:`capture`'s."""
    torch, _ = require_lm()
    key = (files.root, tuple((p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in files.paths()))
    if key not in _WORKER_MODELS:
        model = load_causal_lm(files)
        head, _ = _head(model, torch)
        W = head.weight.detach().to(torch.float64).cpu().numpy()
        b = None if head.bias is None else head.bias.detach().to(torch.float64).cpu().numpy()
        _WORKER_MODELS.clear()  # one model per worker at a time
        _WORKER_MODELS[key] = (model, head, W, b)
    model, head, W, b = _WORKER_MODELS[key]
    return _run_batches(model, head, W, b, torch, batches, check)


def capture(files: ModelFiles, counts: ContextCounts, spec: ContextSpec, *, bos: bool = False,
            batch_size: int = BATCH_SIZE, map_chunks: Any = None) -> Capture:
    """Run the model on every context and capture the decoder's input at its last token.

    The model runs on ``batch_size`` contexts at a time; each batch's logits (model's and recomputed,
    (batch, V)) are compared and dropped, so no (m, V) logit array exists at any time: memory is
    H (m, d), W (V, d) and one batch's logits.

    Parameters
    ----------
    files : ModelFiles
        A model directory (:func:`~ntpcert.instance.lm.files.locate_model`).
    counts : ContextCounts
        The distinct contexts (token ids).
    spec : ContextSpec
    bos : bool
        Feed the model's ``bos_token_id`` before every context.
    batch_size : int
        Contexts per forward pass (``prefix:T``: maximal contexts per pass).
    map_chunks : callable, optional
        Runs the forward passes elsewhere (worker processes): ``map_chunks(fn, items)`` calls
        ``fn(*item)`` for every item, in any order and anywhere, and yields the results
        (:class:`ntpcert.experiments.distributed.DaskChunks`). Each batch is one item of
        :func:`capture_chunk`. A batch gives the same h wherever it runs (the same inputs in the same
        shape; the number of threads does not change a float32 forward pass's result on the
        CPUs measured, and the tests compare the two bit for bit), so the capture is the one of a
        single process.

    Raises
    ------
    InputError
        A refused head, a model whose vocabulary does not match ``counts.V``, no ``bos_token_id``
        with ``bos``, or a residual above :data:`RESIDUAL_MAX`.
    MissingExtraError
        Without torch or transformers.
    """
    torch, _ = require_lm()
    model = load_causal_lm(files)
    head, tied = _head(model, torch)
    V, d = head.weight.shape
    if V != counts.V:
        raise InputError(f"--model: the decoder has {V} rows but the contexts were counted over V = {counts.V}")
    bos_id = None
    if bos:
        from ntpcert.instance.lm.checkpoint import read_config

        bos_id = bos_token(read_config(files), V, files.config)
    W = head.weight.detach().to(torch.float64).cpu().numpy()
    b = None if head.bias is None else head.bias.detach().to(torch.float64).cpu().numpy()
    _finite("the decoder's weight (get_output_embeddings().weight)", W)
    if b is not None:
        _finite("the decoder's bias", b)
    dtype, arch = str(head.weight.dtype).removeprefix("torch."), type(model).__name__
    H = np.zeros((counts.m, d), dtype=np.float64)
    batches = [(i, ids, pos, js) for i, (ids, pos, js) in enumerate(_inputs(counts, spec, bos_id, batch_size))]
    check = set(checked_batches(len(batches), batch_size).tolist())
    if map_chunks is None:
        parts = [_run_batches(model, head, W, b, torch, batches, check)]
    else:
        del model
        parts = map_chunks(capture_chunk, [(files, [bt], {bt[0]} & check) for bt in batches])
    worst, n_checked = 0.0, 0
    for got, w, n in parts:
        for js, h in got:
            H[js] = h
        worst, n_checked = max(worst, w), n_checked + n
    limit = RESIDUAL_MAX.get(dtype, RESIDUAL_MAX["float32"])
    if not worst <= limit:
        raise InputError(f"--model: the decoder applied to the captured h misses the model's logits by {worst:.3g} "
                         f"(relative, more than {limit:g} for {dtype}): the model changes its logits after the head")
    if b is not None:
        H = np.hstack([H, np.ones((counts.m, 1))])
        W = np.hstack([W, b[:, None]])
    return Capture(H, W, worst, tied, b is not None, dtype, arch, n_checked)
