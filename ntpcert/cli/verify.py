"""``ntpcert verify CERT [--data DATA]``: check a certificate in exact arithmetic.

Prints ``VALID`` (exit 0), ``INVALID: reason`` (exit 3) or ``TOO LARGE: reason`` (exit 4). A
truncated or unparseable file is INVALID with its reason; so is one with an integer literal of more
than :data:`~ntpcert.certificate.schema.MAX_JSON_INTEGER_DIGITS` digits (a rule of the format). A CERT
over a size limit of the format (:data:`ntpcert.certificate.format.LIMITS`: the file's bytes,
refused unread, or the cells of a sparse record) is TOO LARGE: too large to check here, which says
nothing about its claims. A CERT that cannot be opened, or a DATA that cannot be loaded, is bad
input (exit 2).

Without ``--data`` the instance embedded in the certificate is used; with it, DATA must be the very
instance the certificate names (same fingerprint, same names). The output always says which: the
second line of the text report (``against: the embedded data (no DATA given)`` or
``against: the DATA given (NAME)``), the key ``instance_source`` (``"embedded"`` or ``"data"``) of
``--json``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import data_options, emit_json, emit_lines, json_option, load_data

#: Exit status of an invalid certificate (0 is VALID, 1 an internal error, 2 bad input).
EXIT_INVALID = 3
#: Exit status of a certificate over a size limit of the format: too large to check here, neither VALID
#: nor INVALID.
EXIT_TOO_LARGE = 4


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="check a certificate written by 'certify --exact' in exact arithmetic",
        description="Re-derive every claim of a certificate from its instance in exact rational arithmetic. "
        f"Prints VALID (exit 0), INVALID with the reason (exit {EXIT_INVALID}), or TOO LARGE when the "
        f"certificate is over a size limit of the format (exit {EXIT_TOO_LARGE}).",
    )
    p.add_argument("cert", metavar="CERT", help="certificate file (JSON)")
    data_options(p, positional=False)
    json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.pipeline.verdict_report import verdict_json, verdict_lines
    from ntpcert.certificate.checker import verify_file

    instance = _instance(args)
    verdict = verify_file(args.cert, instance)  # InputError (exit 2) only when CERT cannot be opened
    if args.json:
        emit_json(verdict_json(verdict, args.cert, args.data))
    else:
        emit_lines(verdict_lines(verdict, args.cert, args.data))
    if verdict.valid:
        return 0
    return EXIT_TOO_LARGE if verdict.too_large else EXIT_INVALID


def _instance(args: argparse.Namespace) -> Any:
    """The instance of ``--data`` (None: the embedded one). Through ``--model`` it is read as ``certify``
    read it: with the unseen tokens merged when the certificate's source records a merged vocabulary,
    else over the model's whole vocabulary."""
    from ntpcert.cli.model_options import check_model_flags, load_model, uses_model
    from ntpcert.errors import InputError

    if args.data is None:
        if uses_model(args):
            flag = "--activations" if args.activations else "--model"
            raise InputError(f"{flag}: applies with --data (the corpus to read through the model, or the "
                             "activations file)")
        return None
    if not uses_model(args):
        return load_data(args)
    check_model_flags(args)
    data = load_model(args, merge_unseen=True)
    if data.merge is not None and data.merge.merged and not _records_merge(args.cert):
        return data.full_instance()
    return data.instance


def _records_merge(path: str) -> bool:
    """Whether the certificate's ``source`` names a merged vocabulary (unreadable files: False, and
    :func:`~ntpcert.certificate.checker.verify_file` reports them)."""
    import json

    from ntpcert.certificate.jsonio import unlimited_int_digits

    try:
        with open(path, encoding="utf-8") as f, unlimited_int_digits():
            cert = json.load(f)
    except (OSError, ValueError):
        return False
    src = cert.get("source") if isinstance(cert, dict) else None
    return isinstance(src, dict) and isinstance(src.get("vocabulary"), dict)

