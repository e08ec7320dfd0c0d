"""``ntpcert compare DATA --W W.npy|DIR`` / ``ntpcert compare CORPUS --model DIR``: a decoder (a solution,
a snapshot of a training run, or the model's own head) against W*, F, W^mm and the bracket on L* − H;
``ntpcert compare CORPUS --model DIR1 DIR2 ...`` (or ``--model FOLDER`` of checkpoints): a checkpoint series,
each checkpoint's decoder against the limits of its own h (:mod:`ntpcert.dynamics.checkpoints`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, check_solver, data_options, emit_json, emit_lines, force_option, json_option,
                                 load_data, out_file_option, solver_options)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name, help="compare a decoder W with the limits W*, F and W^mm",
        description="Compare a decoder W (a file, a directory of snapshots W_t, or a model's own decoder with "
        "--model) with the limits on the same instance: CE(W) - H against the bracket on L* - H, margins, "
        "||P_F W - W*|| / ||W*||, cos(P_F-perp W, W^mm), per token-frequency bin. With several --model "
        "directories, or a folder of checkpoint folders, a checkpoint series: each checkpoint's decoder against "
        "the limits of its own h, and how far h and W moved between checkpoints (a table and a figure against "
        "the step).")
    data_options(p, model_series=True)
    p.add_argument("--W", metavar="PATH", default=None,
                   help="the decoder (V, d): .npy or .safetensors, or a directory of snapshots W_t (t from each "
                        "file name); default with --model: the model's own decoder")
    json_option(p)
    out_file_option(p, "write the figure here (.png, .pdf, .svg)", flag="--figure")
    out_file_option(p, "with a snapshot directory or a checkpoint series: write the table (CSV)", flag="--table")
    force_option(p)
    solver_options(p)
    p.set_defaults(func=run)


def _decoder_and_frequency(args: argparse.Namespace) -> tuple[Any, Any, Any, dict | None, Any]:
    """(instance, W or None, token frequency or None, model description or None, merge or None); through a
    model, the instance :func:`ntpcert.dynamics.compare.model_instance` chooses."""
    from ntpcert.cli.model_options import load_model, uses_model
    from ntpcert.dynamics.compare import model_instance

    if not uses_model(args):
        return load_data(args), None, None, None, None
    data = load_model(args, merge_unseen=True)
    inst, merge = model_instance(data, max_entries=getattr(args, "max_entries", None))
    return inst, data.decoder, data.token_frequency, {"model": data.to_json(), "note": data.decoder_note}, merge


def run_series(args: argparse.Namespace) -> int:
    """A checkpoint series (several ``--model`` directories, or a folder of checkpoints): one row per checkpoint."""
    from ntpcert.cli.model_options import load_model
    from ntpcert.cli.options import progress_enabled
    from ntpcert.dynamics.checkpoints import checkpoint_series
    from ntpcert.errors import InputError
    from ntpcert.instance.lm.series import check_shared_vocabulary, find_checkpoints
    from ntpcert.report.checkpoint_text import checkpoint_csv, checkpoint_lines
    from ntpcert.util.files import atomic_write_text

    if args.W is not None:
        raise InputError(f"--W: value {args.W!r} compares one decoder on one model's h; a checkpoint series "
                         "compares each checkpoint's own decoder (drop --W, or give one --model)")
    found = find_checkpoints(args.model, args.model_tokenizer)
    check_shared_vocabulary(found.checkpoints)

    def load(ck):  # one checkpoint, read as compare --model DIR reads one model
        return load_model(argparse.Namespace(**{**vars(args), "model": ck.path, "model_tokenizer": ck.tokenizer}),
                          merge_unseen=True)

    def with_nc(rep, data):  # each checkpoint's neural-collapse numbers, as the single compare gives them
        from ntpcert.geometry.collapse import collapse

        return dataclasses.replace(rep, nc=collapse(rep.limits.instance, data.decoder, rep.limits, merge=rep.merge))

    series = checkpoint_series(found.checkpoints, load, steps_from=found.steps_from,
                               max_entries=getattr(args, "max_entries", None), solver=args.solver,
                               separability_solver=getattr(args, "separability_solver", None),
                               progress=progress_enabled(args), decorate=with_nc)
    if args.table is not None:
        atomic_write_text(args.table, checkpoint_csv(series))
    if args.figure is not None:
        from ntpcert.report.checkpoint_figure import plot_checkpoints

        plot_checkpoints(series, args.figure, title=os.path.basename(os.path.normpath(args.data)))
    if args.json:
        emit_json(series.to_json(figure=args.figure, table=args.table))
    else:
        emit_lines(checkpoint_lines(series, name=os.path.basename(os.path.normpath(args.data))))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from ntpcert.dynamics.compare import check_decoder_values, compare_decoder, compare_model_merged
    from ntpcert.dynamics.trajectory import Limits
    from ntpcert.errors import InputError
    from ntpcert.instance.lm.decoder_file import read_decoder, snapshot_files
    from ntpcert.report.compare_text import report_lines, series_csv
    from ntpcert.util.files import atomic_write_text, check_output_file

    check_solver(args.solver)
    for out, flag in ((args.figure, "--figure"), (args.table, "--table")):
        if out is not None:
            check_output_file(out, flag, overwrite=args.force)
    from ntpcert.cli.model_options import uses_model
    from ntpcert.instance.lm.series import is_series

    if is_series(getattr(args, "model", None)):
        return run_series(args)
    if args.W is None and not uses_model(args):
        raise InputError("--W: give the decoder to compare (or --model DIR for the model's own)")
    series = args.W is not None and os.path.isdir(args.W)
    if args.table is not None and not series:
        raise InputError("--table: applies to a directory of snapshots given as --W")
    inst, W, freq, model, merge = _decoder_and_frequency(args)
    if args.W is None and W is None:
        raise InputError(f"--W: {model['note']}")
    source = None if model is None else model["model"]
    files = snapshot_files(args.W) if series else []
    snaps = [(t, read_decoder(p)) for t, p in files] if series else None
    W = None if series else (read_decoder(args.W) if args.W is not None else W)
    checks = ([(f"--W {p!r}", Wt) for (_, p), (_, Wt) in zip(files, snaps)] if series
              else [("--W" if args.W is not None else
                     "--activations (its W)" if args.activations else "--model (its decoder)", W)])
    for where, Wt in checks:  # before any solve: a refusal costs nothing
        check_decoder_values(Wt, inst.embeddings, where)
    if merge is not None:
        rep = compare_model_merged(inst, merge, W, snapshots=snaps, frequency=freq, source=source,
                                   separability_solver=getattr(args, "separability_solver", None), solver=args.solver)
    else:
        rep = compare_decoder(inst, Limits.compute(inst, solver=args.solver), W, snapshots=snaps, frequency=freq,
                              source=source)
    if not series:
        from ntpcert.geometry.collapse import collapse

        rep = dataclasses.replace(rep, nc=collapse(inst, W, rep.limits, merge=merge))
    if args.table is not None:
        atomic_write_text(args.table, series_csv(rep.series))
    if args.figure is not None:
        from ntpcert.report.compare_figure import plot_comparison, plot_series

        if series:
            plot_series(rep.series, args.figure, title=inst.name)
        else:
            plot_comparison(rep.comparison, args.figure, title=inst.name)
    if args.json:
        emit_json(rep.to_json(figure=args.figure, table=args.table))
    else:
        emit_lines(report_lines(rep))
    return EXIT_OK
