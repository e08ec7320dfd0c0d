"""``ntpcert compare DATA --W W.npy|DIR`` / ``ntpcert compare CORPUS --model DIR``: a decoder (a solution,
a snapshot of a training run, or the model's own head) against W*, F, W^mm and the bracket on L* − H."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_options, emit_json, emit_lines, force_option, load_data,
                                 solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name, help="compare a decoder W with the limits W*, F and W^mm",
        description="Compare a decoder W (a file, a directory of snapshots W_t, or a model's own decoder with "
        "--model) with the limits on the same instance: CE(W) - H against the bracket on L* - H, margins, "
        "||P_F W - W*|| / ||W*||, cos(P_F-perp W, W^mm), per token-frequency bin.")
    data_options(p)
    p.add_argument("--W", metavar="PATH", default=None,
                   help="the decoder (V, d): .npy or .safetensors, or a directory of snapshots W_t (t from each "
                        "file name); default with --model: the model's own decoder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--figure", metavar="PATH", default=None, help="write the figure here (.png, .pdf, .svg)")
    p.add_argument("--table", metavar="PATH", default=None, help="with a snapshot directory: write the table (CSV)")
    force_option(p)
    solver_options(p)
    p.set_defaults(func=run)


def _decoder_and_frequency(args: argparse.Namespace) -> tuple[Any, Any, Any, dict | None, Any]:
    """(instance, W or None, token frequency or None, model description or None, merge or None).

    Through a model the unseen tokens are merged (:mod:`ntpcert.instance.lm.merge`); the instance over the
    whole vocabulary is built back when m·V is at most ``FULL_VOCAB_MAX_ENTRIES`` (then W^mm is the full
    one), else the merged comparison runs (merge returned)."""
    from ntpcert.cli.model_options import load_model, uses_model
    from ntpcert.dynamics.compare import FULL_VOCAB_MAX_ENTRIES

    if not uses_model(args):
        return load_data(args), None, None, None, None
    data = load_model(args, merge_unseen=True)
    model = {"model": data.to_json(), "note": data.decoder_note}
    if data.merge is None or not data.merge.merged:
        return data.instance, data.decoder, data.token_frequency, model, None
    limit = FULL_VOCAB_MAX_ENTRIES if getattr(args, "max_entries", None) is None else min(FULL_VOCAB_MAX_ENTRIES,
                                                                                         args.max_entries)
    if data.instance.m * data.V <= limit:  # the full (m, V) counts within --max-entries too
        return data.full_instance(), data.decoder, data.token_frequency, model, None
    return data.instance, data.decoder, data.token_frequency, model, data.merge


def run(args: argparse.Namespace) -> int:
    from ntpcert.dynamics.compare import compare, compare_series
    from ntpcert.dynamics.trajectory import Limits
    from ntpcert.errors import InputError
    from ntpcert.instance.lm.decoder_file import read_decoder, snapshot_files
    from ntpcert.report.compare_text import comparison_lines, series_csv, series_lines
    from ntpcert.util.files import atomic_write_text, check_output_file

    check_solver(args.solver)
    for out, flag in ((args.figure, "--figure"), (args.table, "--table")):
        if out is not None:
            check_output_file(out, flag, overwrite=args.force)
    if args.W is None and getattr(args, "model", None) is None:
        raise InputError("--W: give the decoder to compare (or --model DIR for the model's own)")
    series = args.W is not None and os.path.isdir(args.W)
    if args.table is not None and not series:
        raise InputError("--table: applies to a directory of snapshots given as --W")
    inst, W, freq, model, merge = _decoder_and_frequency(args)
    if args.W is None and W is None:
        raise InputError(f"--W: {model['note']}")
    if merge is not None:
        return _run_merged(args, inst, W, freq, model, merge, series)
    limits = Limits.compute(inst, solver=args.solver)
    if series:
        snaps = [(t, inst.check_decoder(read_decoder(p))) for t, p in snapshot_files(args.W)]
        result = compare_series(snaps, limits, frequency=freq)
        if args.table is not None:
            atomic_write_text(args.table, series_csv(result))
        if args.figure is not None:
            from ntpcert.report.compare_figure import plot_series

            plot_series(result, args.figure, title=inst.name)
        out = {"snapshots": [{"t": t, **c.to_json()} for t, c in result]}
        lines = series_lines(result)
    else:
        Wd = inst.check_decoder(read_decoder(args.W) if args.W is not None else W)
        cmp = compare(Wd, limits, frequency=freq)
        if args.figure is not None:
            from ntpcert.report.compare_figure import plot_comparison

            plot_comparison(cmp, args.figure, title=inst.name)
        out = cmp.to_json()
        lines = comparison_lines(cmp)
    out.update({"m": inst.m, "d": inst.d, "V": inst.V, "compatible": limits.compatible,
                "separable": limits.svm is not None, "figure": args.figure, "table": args.table})
    if model is not None:
        out["source"] = model["model"]
    if args.json:
        emit_json(out)
    else:
        emit_lines([f"{inst.name}: m={inst.m}, d={inst.d}, V={inst.V}; compatible {limits.compatible}, "
                    f"separable {limits.svm is not None}"] + lines)
    return EXIT_OK


def _run_merged(args: argparse.Namespace, inst: Any, W: Any, freq: Any, model: dict, merge: Any, series: bool) -> int:
    """``compare --model`` on a vocabulary too large for the full instance: the limits of the merged
    instance and the decoder's numbers over all V tokens (:func:`ntpcert.dynamics.compare.compare_merged`)."""
    from ntpcert.dynamics.compare import compare_merged, compare_merged_series, merged_limits
    from ntpcert.instance.lm.decoder_file import read_decoder, snapshot_files
    from ntpcert.report.compare_text import comparison_lines, series_csv, series_lines
    from ntpcert.util.files import atomic_write_text

    limits, separable = merged_limits(inst, separability_solver=getattr(args, "separability_solver", None))
    if series:
        snaps = [(t, read_decoder(p)) for t, p in snapshot_files(args.W)]
        result = compare_merged_series(snaps, limits, merge, frequency=freq, separable=separable)
        if args.table is not None:
            atomic_write_text(args.table, series_csv(result))
        if args.figure is not None:
            from ntpcert.report.compare_figure import plot_series

            plot_series(result, args.figure, title=inst.name)
        out = {"snapshots": [{"t": t, **c.to_json()} for t, c in result]}
        lines = series_lines(result)
    else:
        cmp = compare_merged(read_decoder(args.W) if args.W is not None else W, limits, merge, frequency=freq,
                             separable=separable)
        if args.figure is not None:
            from ntpcert.report.compare_figure import plot_comparison

            plot_comparison(cmp, args.figure, title=inst.name)
        out = cmp.to_json()
        lines = comparison_lines(cmp) + [f"  {k}: {v}" for k, v in cmp.notes.items()]
    out.update({"m": inst.m, "d": inst.d, "V": merge.V, "V_instance": inst.V, "vocabulary": merge.to_json(),
                "compatible": limits.compatible, "separable": separable, "figure": args.figure, "table": args.table,
                "source": model["model"]})
    if args.json:
        emit_json(out)
    else:
        emit_lines([f"{inst.name}: m={inst.m}, d={inst.d}, V={merge.V} ({inst.V} after merging the "
                    f"{merge.merged} unseen tokens); compatible {limits.compatible}, separable {separable}"] + lines)
    return EXIT_OK
