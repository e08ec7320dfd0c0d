"""``ntpcert verify CERT [--data DATA]``: check a certificate in exact arithmetic.

Prints ``VALID`` (exit 0) or ``INVALID: reason`` (exit 3). A truncated or unparseable file is
INVALID with its reason; a CERT that cannot be opened, or a DATA that cannot be loaded, is bad
input (exit 2). Without ``--data`` the instance embedded in the certificate is used; with it, DATA
must be the very instance the certificate names (same fingerprint).
"""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import data_options, emit_json, load_data

#: Exit status of an invalid certificate (0 is VALID, 1 an internal error, 2 bad input).
EXIT_INVALID = 3


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="check a certificate written by 'certify --exact' in exact arithmetic",
        description="Re-derive every claim of a certificate from its instance in exact rational arithmetic. "
        f"Prints VALID (exit 0) or INVALID with the reason (exit {EXIT_INVALID}).",
    )
    p.add_argument("cert", metavar="CERT", help="certificate file (JSON)")
    data_options(p, positional=False)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import CertificateError
    from ntpcert.pipeline import certificate as cf
    from ntpcert.pipeline.verify import Verdict, verify_certificate

    instance = load_data(args) if args.data is not None else None

    try:
        cert = cf.load(args.cert)
    except CertificateError as err:
        verdict = Verdict(False, str(err))
    else:
        verdict = verify_certificate(cert, instance)
    if args.json:
        emit_json({
            "certificate": args.cert,
            "valid": verdict.valid,
            "reason": verdict.reason,
            "checks": list(verdict.checks),
            "claims": verdict.claims,
            "seconds": verdict.seconds,
        })
    elif verdict.valid:
        print(f"VALID: {args.cert}")
        for line in verdict.checks:
            print(f"  ok  {line}")
    else:
        print(f"INVALID: {verdict.reason}")
    return 0 if verdict.valid else EXIT_INVALID
