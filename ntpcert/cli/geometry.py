"""``ntpcert geometry DATA [--out DIR] [--json]``: the nuclear-norm NTP-SVM of the unconstrained-features model
(W and H both trained), L^mm with its certified gap, the word/context embeddings read off its SVD, the checks
of the statements about them, and figures."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ntpcert.cli.options import (EXIT_OK, data_inputs, data_options, emit_json, emit_lines, float_in, force_option,
                                 int_in, json_option, load_data, out_dir_option)

#: Every file ``geometry --out`` may write.
OUTPUT_NAMES = ("L_mm.npy", "W.npy", "H.npy", "L_in.npy", "summary.json", "word_gram.png", "embeddings.png",
                "singular_values.png", "training.png", "training.json")


def register(subparsers: Any, name: str) -> None:
    from ntpcert.geometry.analysis import GEOMETRY_SOLVERS

    p = subparsers.add_parser(
        name, help="L^mm of the unconstrained-features model, its embeddings and figures",
        description="Solve the nuclear-norm NTP-SVM of the unconstrained-features model (W and H both trained) "
        "with a certified gap, and write L^mm, its factors W and H, the geometry checks and the figures.")
    data_options(p)
    out_dir_option(p, "write arrays, summary.json and figures here")
    p.add_argument("--solver", default="structured", choices=GEOMETRY_SOLVERS,
                   help="structured (default) or an SDP solver through cvxpy (small instances)")
    p.add_argument("--gap-tol", type=float_in(0.0, 1.0), default=None, metavar="TOL",
                   help="structured solver: stop at this certified relative gap (default 1e-10, or 1e-6 when "
                        "V times the number of distinct supports exceeds 10,000)")
    json_option(p, "print the summary as one JSON object")
    p.add_argument("--train", action="store_true",
                   help="also train W and H jointly (GD, NGD, Adam) and write training.png and training.json")
    p.add_argument("--steps", type=int_in(1, 1_000_000), default=10_000, help="training steps (default 10000)")
    p.add_argument("--weight-decay", type=float_in(0.0, low_open=False), default=0.0, metavar="L0",
                   help="vanishing weight decay L0/(k+1) (default 0: none)")
    force_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ntpcert.geometry.analysis import analyse
    from ntpcert.geometry.figures import embedding_projection_figure, singular_values_figure, word_gram_figure
    from ntpcert.report.jsonout import dumps
    from ntpcert.util.files import atomic_write_text, check_output_dir, save_npy_atomic, staged_directory

    out = None
    if args.out_dir is not None:
        out = check_output_dir(args.out_dir, "--out-dir", names=OUTPUT_NAMES, overwrite=args.force, inputs=data_inputs(args))
    inst = load_data(args)
    rep = analyse(inst, solver=args.solver, gap_tol=args.gap_tol)
    summary = rep.to_json()
    trajs = []
    if args.train:
        from ntpcert.geometry.training import JOINT_OPTIMIZERS, fit_rate, train_joint

        trajs = [train_joint(inst, rep.solution.L, optimizer=o, steps=args.steps, wd0=args.weight_decay)
                 for o in JOINT_OPTIMIZERS]
        summary["training"] = {t.optimizer: {"final": t.final(), "rate_one_minus_cos": fit_rate(t)} for t in trajs}
    if out is not None:
        names = inst.token_names
        with staged_directory(out, "--out-dir") as stage:
            for fname, arr in (("L_mm.npy", rep.solution.L), ("W.npy", rep.embeddings.W),
                               ("H.npy", rep.embeddings.H), ("L_in.npy", rep.finite_part)):
                save_npy_atomic(os.path.join(stage, fname), arr)
            word_gram_figure(rep.embeddings, rep.pattern, os.path.join(stage, "word_gram.png"), names, title=inst.name)
            embedding_projection_figure(rep.embeddings, rep.pattern, os.path.join(stage, "embeddings.png"), names,
                                        title=inst.name)
            singular_values_figure(rep.embeddings, os.path.join(stage, "singular_values.png"), title=inst.name)
            if trajs:
                from ntpcert.geometry.figures import training_figure

                training_figure(trajs, os.path.join(stage, "training.png"),
                                title=f"{inst.name} (V={rep.pattern.V}, m={rep.pattern.m}): W and H trained jointly, "
                                f"{args.steps:,} steps")
                atomic_write_text(os.path.join(stage, "training.json"),
                                  dumps({t.optimizer: t.to_json() for t in trajs}, indent=2))
            atomic_write_text(os.path.join(stage, "summary.json"), dumps(summary, indent=2))
        summary["out"] = out
    if args.json:
        emit_json(summary)
        return EXIT_OK
    s = rep.solution
    lines = [f"V = {rep.pattern.V}, m = {rep.pattern.m}, distinct supports = {rep.pattern.r}",
             f"L^mm: ||L||_* = {s.objective:.10g}, certified relative gap {s.relative_gap:.2e} ({s.solver}, "
             f"{s.status}{', target ' + format(summary['nuclear_svm']['gap_tol'], '.0e') if 'gap_tol' in summary['nuclear_svm'] else ''}), "
             f"rank {s.rank}, min margin {s.min_margin:.6g}",
             f"centred support proxy: cosine {rep.proxy_cosine:.6f}, certified relative gap {rep.proxy_relative_gap:.2e}"]
    lines += [f"check {c.name}: defect {c.defect:.2e} ({c.statement})" for c in rep.checks]
    for t in trajs:
        f = t.final()
        lines.append(f"train {t.optimizer}: step {int(t.steps[-1])}, cos(L_k, L^mm) {f['cos_mm']:.4f}, "
                     f"CE - H {f['excess_loss']:.2e}, 1 - cos ~ k^{summary['training'][t.optimizer]['rate_one_minus_cos']:.2f}")
    if out is not None:
        lines.append(f"wrote {', '.join(sorted(os.listdir(out)))} to {out}")
    emit_lines(lines)
    return EXIT_OK
