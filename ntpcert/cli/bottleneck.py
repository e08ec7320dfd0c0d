"""``ntpcert bottleneck W.npy|--model DIR [--json] [--certificate-out FILE]``: which tokens a fixed decoder can
make the unique argmax (the softmax bottleneck), each verdict with an exact witness; ``--check CERT``
re-checks a certificate of them instead (VALID, exit 0; INVALID, exit 3)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, emit_json, emit_lines, force_option, int_in, json_option, out_file_option,
                                 progress_enabled, progress_option)

#: Exit status of an invalid certificate under ``--check`` (as ``ntpcert verify``).
EXIT_INVALID = 3


def register(subparsers: Any, name: str) -> None:
    from ntpcert.geometry.bottleneck.decide import MAX_LP_TOKENS
    from ntpcert.geometry.bottleneck.lp import LP_MAX_ROUNDS

    p = subparsers.add_parser(
        name, help="which tokens a fixed decoder W (with its bias) can make the argmax, exactly",
        description="For a fixed decoder W (V, d) and bias b, decide for every token whether some h makes it the "
        "unique argmax of W h + b: argmaxable with a rational h checked exactly, unargmaxable with an exact "
        "convex combination of other rows (a Farkas certificate), or undetermined with what would settle it.")
    p.add_argument("W", nargs="?", default=None, metavar="W",
                   help="the decoder: a .npy file (V, d), or a .safetensors file (its LM head, with its bias)")
    p.add_argument("--model", metavar="DIR", default=None,
                   help="instead of W: a Hugging Face model directory (or .safetensors checkpoint); its LM head, "
                        "or the tied input embedding, and the head's bias (read from the safetensors alone)")
    p.add_argument("--bias", metavar="FILE", default=None, help="with a .npy W: the bias b, a .npy of shape (V,)")
    json_option(p, "print one JSON object: per-token verdicts, unargmaxable ids, counts, timings")
    out_file_option(p, "write the exact certificate (JSON) here", flag="--certificate-out")
    p.add_argument("--check", metavar="CERT", default=None,
                   help="re-check this certificate against the decoder instead (VALID exit 0, INVALID exit 3)")
    p.add_argument("--max-lp-tokens", type=int_in(0), default=MAX_LP_TOKENS, metavar="N",
                   help=f"decide at most N tokens by LP; the rest stay undetermined (default {MAX_LP_TOKENS:,})")
    p.add_argument("--max-lp-rounds", type=int_in(1), default=LP_MAX_ROUNDS, metavar="N",
                   help=f"cutting-plane LPs per token, at most (default {LP_MAX_ROUNDS})")
    p.add_argument("--list", type=int_in(0), default=20, metavar="N",
                   help="text report: list at most N unargmaxable and undetermined tokens each (default 20)")
    force_option(p)
    progress_option(p)
    p.set_defaults(func=run)


def _head(args: argparse.Namespace) -> Any:
    from ntpcert.errors import InputError
    from ntpcert.instance.lm.head import read_head, read_model_head

    if (args.W is None) == (args.model is None):
        raise InputError("W: give the decoder as W.npy (or .safetensors), or --model DIR, not both")
    if args.model is not None:
        if args.bias is not None:
            raise InputError("--bias: applies to a W file; --model reads the head's own bias")
        return read_model_head(args.model)
    return read_head(args.W, "W", bias=args.bias)


def run(args: argparse.Namespace) -> int:
    from ntpcert.util.files import atomic_write_text, check_output_file
    from ntpcert.util.jsonout import dumps

    inputs = [p for p in (args.W, args.bias, args.check) if p is not None]
    if args.certificate_out is not None:
        if args.check is not None:
            from ntpcert.errors import InputError

            raise InputError("--certificate-out: does not apply with --check")
        check_output_file(args.certificate_out, "--certificate-out", overwrite=args.force, inputs=inputs)
    head = _head(args)
    if args.check is not None:
        return _check(args, head)
    from ntpcert.geometry.bottleneck import argmaxability

    res = argmaxability(head.W, head.b, max_lp_tokens=args.max_lp_tokens, max_lp_rounds=args.max_lp_rounds,
                        progress=progress_enabled(args))
    if args.certificate_out is not None:
        atomic_write_text(args.certificate_out, dumps(res.certificate(head.W, head.b)) + "\n")
    if args.json:
        out = res.to_json(certificate=args.certificate_out)
        out["source"] = head.source
        emit_json(out)
    else:
        emit_lines(_lines(res, head.source, args.list, args.certificate_out))
    return EXIT_OK


def _check(args: argparse.Namespace, head: Any) -> int:
    from ntpcert.geometry.bottleneck import check_bottleneck_certificate, read_certificate

    chk = check_bottleneck_certificate(read_certificate(args.check), head.W, head.b)
    if args.json:
        emit_json(chk.to_json())
    else:
        emit_lines(["VALID" if chk.valid else f"INVALID: {chk.problems[0]}"] + (
            [f"argmaxable {len(chk.argmaxable):,}, unargmaxable {len(chk.unargmaxable):,}, undetermined "
             f"{len(chk.undetermined):,}"] if chk.valid else []))
    return EXIT_OK if chk.valid else EXIT_INVALID


def _ids(xs: list[int], n: int) -> str:
    shown = ", ".join(str(x) for x in xs[:n])
    return shown + (f", ... ({len(xs) - n:,} more)" if len(xs) > n else "")


def _lines(res: Any, source: dict, n: int, cert: str | None) -> list[str]:
    c = res.counts()
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(c["by_witness"].items()))
    where = os.path.basename(str(source.get("path", ""))) + (f", {source['weight']}" if "weight" in source else "")
    lines = [f"decoder: V = {res.V:,}, d = {res.d:,}, {'with' if res.bias else 'no'} bias ({where})",
             f"argmaxable {c['argmaxable']:,}, unargmaxable {c['unargmaxable']:,}, undetermined "
             f"{c['undetermined']:,} (witnesses: {kinds})"]
    if res.unargmaxable:
        lines.append(f"unargmaxable: {_ids(res.unargmaxable, n)}")
    if res.undetermined:
        lines.append(f"undetermined: {_ids(res.undetermined, n)}")
        lines.append(f"  first: {res.witnesses.why.get(res.undetermined[0], '')}")
    lines.append(f"time: {res.seconds['total']:.1f} s (rows {res.seconds['rows']:.1f} s, LP {res.seconds['lp']:.1f} s "
                 f"on {res.lp_tokens:,} tokens)")
    if cert is not None:
        lines.append(f"certificate: {cert}")
    return lines
