"""``--model DIR`` and its options, shared by every command that reads DATA: DATA is then a text corpus
read through the model (:func:`ntpcert.instance.lm.load_model_data`), or with ``--token-ids`` the token
ids of one (:mod:`ntpcert.instance.lm.token_ids`). ``--activations``: DATA is an activations file instead
(:mod:`ntpcert.instance.lm.activations`), the h and next tokens without the model."""

from __future__ import annotations

import argparse
from typing import Any

#: The corpus options of text DATA that do not apply when the model tokenises and embeds.
_TEXT_ONLY = {"tokenizer": "--tokenizer", "context_length": "--context-length", "all_prefixes": "--all-prefixes",
              "embedding": "--embedding"}


def model_options(p: argparse.ArgumentParser, *, series: bool = False) -> None:
    """The model group: ``--model``, ``--context``, ``--bos``, ``--static``, ``--model-tokenizer``; with
    ``series`` (compare), ``--model`` takes several directories, or a folder of checkpoints."""
    g = p.add_argument_group("model options (DATA is then a text corpus, or pydoc; needs ntpcert[lm])")
    g.add_argument("--model", metavar="DIR", default=None, nargs="+" if series else None,
                   help="a Hugging Face model directory (config.json, *.safetensors, tokenizer.json), or a "
                        ".safetensors file with --static; read offline, never from a hub"
                        + ("; several directories, or a folder of checkpoint folders, make a checkpoint series "
                           "(give DATA before --model)" if series else ""))
    g.add_argument("--context", metavar="SPEC", default="tokens:2",
                   help="tokens:K (the K previous tokens, default tokens:2) or prefix:T (document prefixes of "
                        "length 1..T; documents are separated by blank lines)")
    g.add_argument("--bos", action="store_true", help="feed the model's BOS token before every context")
    g.add_argument("--static", action="store_true",
                   help="torch-free: h = the concatenated input embeddings of the context's tokens (safetensors only)")
    g.add_argument("--model-tokenizer", metavar="FILE", default=None,
                   help="tokenizer.json to use (default: the one beside the weights)")
    g.add_argument("--token-ids", action="store_true",
                   help="DATA holds token ids, not text: a .npy of one document (1-D) or one per row (2-D), or a "
                        "saved datasets folder (column input_ids or tokens; needs ntpcert[datasets])")
    g.add_argument("--activations", action="store_true",
                   help="instead of --model: DATA is an activations file (.safetensors or .npz: h, next tokens, "
                        "contexts, optionally the decoder W and bias b; see docs/formats.md)")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the model's forward passes on a dask LocalCluster of N processes (needs ntpcert[dist]); "
                        "the result is the single process's, bit for bit")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="... or on the workers of a running dask scheduler (PROTOCOL://HOST:PORT)")


def uses_model(args: argparse.Namespace) -> bool:
    """Whether DATA is read as a model's data: through ``--model`` or as an ``--activations`` file."""
    return getattr(args, "model", None) is not None or bool(getattr(args, "activations", False))


def _load_activations(args: argparse.Namespace, merge_unseen: bool) -> Any:
    """:func:`~ntpcert.instance.lm.activations.read_activations` of DATA, every model and corpus option refused."""
    from ntpcert.errors import InputError
    from ntpcert.instance.lm.activations import read_activations

    refused = {"--model": args.model is not None, "--token-ids": args.token_ids, "--bos": args.bos,
               "--static": args.static, "--model-tokenizer": args.model_tokenizer is not None,
               "--context": args.context != "tokens:2", "--workers": getattr(args, "workers", None) is not None,
               "--scheduler": getattr(args, "scheduler", None) is not None,
               "--max-chars": getattr(args, "max_chars", None) is not None}
    refused.update({flag: getattr(args, key, None) not in (None, False) for key, flag in _TEXT_ONLY.items()})
    for flag, given in refused.items():
        if given:
            raise InputError(f"{flag}: does not apply with --activations (DATA is the activations file: its h, "
                             "contexts and next tokens)")
    kw = {} if getattr(args, "max_entries", None) is None else {"max_entries": args.max_entries}
    return read_activations(args.data, merge_unseen=merge_unseen, **kw)


def model_path(args: argparse.Namespace) -> str:
    """The one ``--model`` of ``args`` (compare's ``--model`` is a list: several make a checkpoint series,
    which :mod:`ntpcert.cli.compare` reads one checkpoint at a time)."""
    from ntpcert.errors import InputError

    model = args.model
    if isinstance(model, (list, tuple)):
        if len(model) != 1:
            raise InputError(f"--model: {len(model)} directories given; several (a checkpoint series) apply only "
                             "to compare")
        model = model[0]
    return model


def load_model(args: argparse.Namespace, *, merge_unseen: bool = False) -> Any:
    """The :class:`~ntpcert.instance.lm.ModelData` of ``args`` (DATA through ``--model``); ``merge_unseen``:
    the observed next tokens and one representative of the rest (:mod:`ntpcert.instance.lm.merge`)."""
    from ntpcert.errors import InputError
    from ntpcert.instance.lm import load_model_data

    if getattr(args, "activations", False):
        return _load_activations(args, merge_unseen)
    for key, flag in _TEXT_ONLY.items():
        if getattr(args, key, None) not in (None, False):
            raise InputError(f"{flag}: does not apply with --model (the model tokenises and embeds; see --context)")
    kw = {} if getattr(args, "max_entries", None) is None else {"max_entries": args.max_entries}
    read = dict(context=args.context, bos=args.bos, static=args.static, tokenizer=args.model_tokenizer,
                max_chars=getattr(args, "max_chars", None), merge_unseen=merge_unseen,
                token_ids=getattr(args, "token_ids", False), **kw)
    workers, scheduler = getattr(args, "workers", None), getattr(args, "scheduler", None)
    if workers is None and scheduler is None:
        return load_model_data(args.data, model_path(args), **read)
    from ntpcert.experiments.distributed import DaskChunks, check_scheduler
    from ntpcert.experiments.sweep import dask_client
    from ntpcert.util.progress import wanted

    if workers is not None and scheduler is not None:
        raise InputError(f"--workers: value {workers} applies to a LocalCluster, not to --scheduler {scheduler!r}")
    if args.static:
        raise InputError("--workers/--scheduler: apply to the model's forward passes, which --static does not run")
    kw_client = {"workers": workers} if workers is not None else {}
    bars = wanted(getattr(args, "progress", False), getattr(args, "json", False))
    with dask_client(None if scheduler is None else check_scheduler(scheduler), **kw_client) as client:
        return load_model_data(args.data, model_path(args), map_chunks=DaskChunks(client, progress=bars), **read)


def check_model_flags(args: argparse.Namespace) -> None:
    """``--workers``, ``--scheduler``, ``--bos``, ``--static``, ``--model-tokenizer``, ``--token-ids`` and a
    non-default ``--context`` need ``--model`` (``--activations`` refuses them when it reads DATA)."""
    from ntpcert.errors import InputError

    if uses_model(args):
        return
    for flag, given in (("--token-ids", getattr(args, "token_ids", False)),
                        ("--workers", getattr(args, "workers", None) is not None),
                        ("--scheduler", getattr(args, "scheduler", None) is not None),
                        ("--bos", args.bos), ("--static", args.static),
                        ("--model-tokenizer", args.model_tokenizer is not None),
                        ("--context", args.context != "tokens:2")):
        if given:
            raise InputError(f"{flag}: applies only with --model DIR")
