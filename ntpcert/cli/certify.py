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
    out_file_option(p, "with --exact: write the separability verdict as a VIPR certificate here (for viprchk)",
                    flag="--vipr-out")
    p.add_argument("--zero-gap", action="store_true",
                   help="with --exact: W^mm itself, a rational KKT pair of gap exactly 0, where the active set's "
                        "system is small enough (its rationals are far longer than the positive gap's)")
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
    if args.vipr_out is not None and not args.exact:
        raise InputError("--vipr-out: a VIPR certificate is written only with --exact")
    if args.zero_gap and not args.exact:
        raise InputError("--zero-gap: applies to the exact NTP-SVM bound of --exact")
    check_solver(args.solver)
    if args.exact:
        return _run_exact(args)
    from ntpcert.pipeline.float_verdicts import certify
    from ntpcert.report.text import float_report_lines, vocabulary_lines

    inst, data = _load(args)
    merge = None if data is None else data.merge
    rep = certify(inst, svm=not args.no_svm and (merge is None or merge.keeps_svm), solver=args.solver,
                  progress=progress_enabled(args), separability_solver=args.separability_solver,
                  use_lemma1=not args.no_lemma1)
    if args.json:
        emit_json(_json(rep, args, merge))
    else:
        emit_lines(float_report_lines(rep) + vocabulary_lines(merge, svm_asked=not args.no_svm))
    return EXIT_OK


def _run_exact(args: argparse.Namespace) -> int:
    from functools import partial

    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.explain import why_not_with_sections
    from ntpcert.report.text import exact_report_lines, vocabulary_lines
    from ntpcert.util.files import check_output_file

    if args.certificate_out is not None:  # before the work, not after it
        check_output_file(args.certificate_out, "--certificate-out", overwrite=args.force, inputs=data_inputs(args))
    if args.vipr_out is not None:
        check_output_file(args.vipr_out, "--vipr-out", overwrite=args.force, inputs=data_inputs(args))
    inst, data = _load(args)
    merge = None if data is None else data.merge
    rep = exact_certify(
        inst,
        svm=not args.no_svm and (merge is None or merge.keeps_svm),
        solver=args.solver,
        progress=progress_enabled(args),
        certificate_out=args.certificate_out,
        separability_solver=args.separability_solver,
        use_lemma1=not args.no_lemma1,
        excess=args.excess and merge is None,  # merged: skipped, counted over the whole vocabulary (_json)
        # negative verdicts explained by irreducible culprits, written into the certificate and checked
        why_not=partial(why_not_with_sections, separability_solver=args.separability_solver),
        # the model files, by SHA-256, when DATA was read through --model
        source=None if data is None else data.source_record(),
        split=True,  # non-separable data: the split P / N, exact, in the certificate
        zero_gap=args.zero_gap,
    )
    if args.vipr_out is not None:
        _write_vipr(args.vipr_out, inst, rep.separability)
    if args.json:
        emit_json(_json(rep, args, merge))
    else:
        emit_lines(exact_report_lines(rep) + vocabulary_lines(merge, svm_asked=not args.no_svm))
    return EXIT_OK


def _write_vipr(path: str, inst: Any, verdict: Any) -> None:
    """The separability verdict as VIPR (:mod:`ntpcert.certificate.vipr`); one line on stderr when it has
    no exact witness to write (the file is then not written)."""
    import sys

    from ntpcert.certificate.vipr import write_vipr

    export, why = write_vipr(path, inst, verdict)
    if export is None:
        print(f"--vipr-out: not written: {why}", file=sys.stderr)


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """The instance and, through ``--model``, its :class:`~ntpcert.instance.lm.ModelData` (else None). With a
    model, the tokens that follow no context are merged into one (exact for the verdicts,
    :mod:`ntpcert.instance.lm.merge`). ``--excess`` counts every token in the bracket on L* - H: the
    instance over the whole vocabulary is built from the sparse counts when the bracket will be computed
    (m·V at most :data:`~ntpcert.pipeline.excess_certificate.AUTO_MAX_CELLS`), and the data stay merged
    when it will not (the report says the bracket was skipped, naming the whole vocabulary's m·V), so a
    model's dense (m, V) counts are never built for nothing."""
    import dataclasses

    from ntpcert.cli.model_options import load_model, uses_model
    from ntpcert.pipeline.excess_certificate import AUTO_MAX_CELLS

    if not uses_model(args):
        return load_data(args), None
    data = load_model(args, merge_unseen=True)
    merged = data.merge is not None and data.merge.merged
    if args.excess and merged and data.instance.m * data.V <= AUTO_MAX_CELLS:
        data = dataclasses.replace(data, instance=data.full_instance(), merge=None)
    return data.instance, data


def _json(rep: Any, args: argparse.Namespace, merge: Any) -> dict:
    from ntpcert.pipeline.certify_json import certify_json

    return certify_json(rep, excess=args.excess, separability_solver=args.separability_solver, merge=merge,
                        svm_asked=not args.no_svm)
