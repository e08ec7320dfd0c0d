"""``ntpcert certify DATA [--exact] [--json]``: compatibility, separability and reachability of the
entropy bound, as float verdicts or as exact, independently checked certificates."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 json_option, load_data, out_file_option, progress_enabled, separability_option,
                                 solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name, help="decide compatibility, separability and reachability of the entropy bound",
        description="Decide NTP-compatibility (4), NTP-separability (6) and whether the entropy lower bound is "
        "reachable, each with the witness that settles it, or undetermined with what would settle it. With "
        "--exact every witness is made exact and the certificate is checked independently.")
    data_options(p)
    json_option(p)
    p.add_argument("--exact", action="store_true", help="certificates checked in exact rational arithmetic")
    out_file_option(p, "with --exact: write the certificate here", flag="--certificate-out")
    p.add_argument("--no-svm", action="store_true", help="skip the NTP-SVM")
    p.add_argument("--excess", action="store_true",
                   help="also bracket the best loss L* = inf CE and L* - H (certified and written into the "
                        "certificate with --exact); without it the JSON key excess_loss is 0 by the theorem when "
                        "both conditions hold, else says how to get the bracket")
    force_option(p)
    solver_options(p)
    separability_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.errors import InputError

    if args.certificate_out is not None and not args.exact:
        raise InputError("--certificate-out: a certificate is written only with --exact")
    check_solver(args.solver)
    if args.exact:
        return _run_exact(args)
    from ntpcert.pipeline.float_verdicts import certify
    from ntpcert.report.text import float_report_lines

    inst = load_data(args)
    rep = certify(inst, svm=not args.no_svm, solver=args.solver, progress=progress_enabled(args),
                  separability_solver=args.separability_solver, use_lemma1=not args.no_lemma1)
    if args.json:
        emit_json(_with_why_not(rep, args))
    else:
        emit_lines(float_report_lines(rep))
    return EXIT_OK


def _run_exact(args: argparse.Namespace) -> int:
    from functools import partial

    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.explain import why_not_with_sections
    from ntpcert.report.text import exact_report_lines
    from ntpcert.util.files import check_output_file

    if args.certificate_out is not None:  # before the work, not after it
        check_output_file(args.certificate_out, "--certificate-out", overwrite=args.force, inputs=data_inputs(args))
    inst, source = _load_with_source(args)
    rep = exact_certify(
        inst,
        svm=not args.no_svm,
        solver=args.solver,
        progress=progress_enabled(args),
        certificate_out=args.certificate_out,
        separability_solver=args.separability_solver,
        use_lemma1=not args.no_lemma1,
        excess=args.excess,
        # negative verdicts explained by irreducible culprits, written into the certificate and checked
        why_not=partial(why_not_with_sections, separability_solver=args.separability_solver),
        source=source,  # the model files, by SHA-256, when DATA was read through --model
    )
    if args.json:
        emit_json(_with_why_not(rep, args))
    else:
        emit_lines(exact_report_lines(rep))
    return EXIT_OK


def _load_with_source(args: argparse.Namespace) -> tuple[Any, dict | None]:
    """The instance, and the certificate's ``source`` section when it was read through ``--model``."""
    from ntpcert.cli.model_options import load_model, uses_model

    if uses_model(args):
        data = load_model(args)
        return data.instance, data.source_record()
    return load_data(args), None


def _with_why_not(rep: Any, args: argparse.Namespace) -> dict:
    from ntpcert.pipeline.certify_json import certify_json

    return certify_json(rep, excess=args.excess, separability_solver=args.separability_solver)
