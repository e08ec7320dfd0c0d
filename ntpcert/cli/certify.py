"""``ntpcert certify DATA [--exact] [--json]``: compatibility, separability and reachability of the
entropy bound, as float verdicts or as exact, independently checked certificates."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_inputs, data_options, emit_json, emit_lines, force_option,
                                 load_data, progress_enabled, separability_option,
                                 solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name, help="decide compatibility, separability and reachability of the entropy bound",
        description="Decide NTP-compatibility (4), NTP-separability (6) and whether the entropy lower bound is "
        "reachable, each with the witness that settles it, or undetermined with what would settle it. With "
        "--exact every witness is made exact and the certificate is checked independently.")
    data_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--exact", action="store_true", help="certificates checked in exact rational arithmetic")
    p.add_argument("--certificate-out", metavar="PATH", default=None, help="with --exact: write the certificate here")
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

    inst, data = _load(args)
    rep = certify(inst, svm=_svm_wanted(args, data), solver=args.solver, progress=progress_enabled(args),
                  separability_solver=args.separability_solver, use_lemma1=not args.no_lemma1,
                  svm_certificate="float")  # verdicts are float here; --exact bounds the gap exactly
    if args.json:
        emit_json(_with_merge(_with_why_not(rep, args), args, data))
    else:
        emit_lines(float_report_lines(rep) + _merge_lines(args, data))
    return EXIT_OK


#: Why ``certify --model`` does not solve the NTP-SVM when unseen tokens were merged.
MERGED_SVM_NOTE = ("not solved: the instance merges the unseen tokens into one representative, which keeps "
                   "compatibility and separability exact but not W^mm (the full NTP-SVM weighs the representative's "
                   "row by the number of tokens it stands for); see ntpcert.instance.lm.merge")


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """The instance and, through ``--model``, its :class:`~ntpcert.instance.lm.ModelData` (else None). With a
    model, the tokens that follow no context are merged into one (exact for the verdicts), unless ``--excess``
    asks for the bracket on L* - H, which counts every token."""
    from ntpcert.cli.model_options import check_model_flags, load_model, uses_model

    if hasattr(args, "model"):
        check_model_flags(args)
    if uses_model(args):
        data = load_model(args, merge_unseen=not args.excess)
        return data.instance, data
    return load_data(args), None


def _merged(data: Any) -> bool:
    return data is not None and data.merge is not None and data.merge.merged > 0


def _svm_wanted(args: argparse.Namespace, data: Any) -> bool:
    return not args.no_svm and not _merged(data)


def _with_merge(out: dict, args: argparse.Namespace, data: Any) -> dict:
    """The JSON report with the model's vocabulary record, and why the NTP-SVM was not solved."""
    if data is not None and data.merge is not None:
        out["vocabulary"] = data.merge.to_json()
    if _merged(data) and not args.no_svm:
        out["svm_error"] = MERGED_SVM_NOTE
    return out


def _merge_lines(args: argparse.Namespace, data: Any) -> list[str]:
    if data is None or data.merge is None:
        return []
    mg = data.merge
    if not mg.merged:
        return [f"vocabulary: all {mg.V:,} tokens of the model follow some context; nothing merged"]
    lines = [f"vocabulary: the model has V = {mg.V:,} tokens; the instance keeps the {mg.observed.size:,} that follow "
             f"some context and one representative (token {mg.representative}) of the {mg.merged:,} others, "
             "which leaves compatibility and separability exactly as for the full vocabulary"]
    if not args.no_svm:
        lines.append("NTP-SVM: " + MERGED_SVM_NOTE)
    return lines


def _run_exact(args: argparse.Namespace) -> int:
    from functools import partial

    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.explain import why_not_with_sections
    from ntpcert.report.text import exact_report_lines
    from ntpcert.util.files import check_output_file

    if args.certificate_out is not None:  # before the work, not after it
        check_output_file(args.certificate_out, "--certificate-out", overwrite=args.force, inputs=data_inputs(args))
    inst, data = _load(args)
    source = None if data is None else data.source_record()
    rep = exact_certify(
        inst,
        svm=_svm_wanted(args, data),
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
        emit_json(_with_merge(_with_why_not(rep, args), args, data))
    else:
        emit_lines(exact_report_lines(rep) + _merge_lines(args, data))
    return EXIT_OK


def _with_why_not(rep: Any, args: argparse.Namespace) -> dict:
    from ntpcert.pipeline.certify_json import certify_json

    return certify_json(rep, excess=args.excess, separability_solver=args.separability_solver)
