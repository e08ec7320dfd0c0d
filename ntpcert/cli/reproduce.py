"""``ntpcert reproduce paper --out-dir DIR``: the paper's Figures 3-5 analogues and a summary table
(:mod:`ntpcert.experiments.reproduce` runs the experiment and owns its summary and files; this command
parses, calls it, writes the files all at once and prints the summary)."""

from __future__ import annotations

import argparse
from typing import Any

from ntpcert.cli.options import (
    EXIT_OK,
    MAX_LR,
    emit_json,
    float_in,
    force_option,
    int_in,
    json_option,
    out_dir_option,
    progress_enabled,
    progress_option,
)
from ntpcert.dynamics.optimizers import MAX_STEPS
from ntpcert.experiments.reproduce import (CHECK_STEPS, EXPERIMENTS, MAX_EMBEDDING_SCALE, PAPER_ADAM_EPS, PAPER_ADAM_LR,
                                           PAPER_GD_LR, PAPER_NGD_LR, PAPER_STEPS, POINTS_PER_DECADE, output_names)


def register(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(
        name,
        help="regenerate the paper's Figures 3-5 analogues (GD, NGD, Adam) with a summary table",
        description="Run GD (eta=0.5), normalised GD (eta=0.01) and Adam (eta=0.01, betas=(0.9, 0.99), eps=1e-8) "
        "for 10^4 steps on the built-in paper instance; write figures, metrics and summary.md.",
    )
    p.add_argument("experiment", metavar="EXPERIMENT", help="paper")
    out_dir_option(p, "output directory (created if missing)", required=True)
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=PAPER_STEPS,
                   help=f"steps per optimiser, at most {MAX_STEPS:,} (default {PAPER_STEPS})")
    p.add_argument("--seed", type=int_in(0), default=0, help="seed of the paper instance (default 0)")
    p.add_argument("--embedding-scale", type=float_in(0.0, MAX_EMBEDDING_SCALE), default=1.0, metavar="S",
                   help="multiply the embeddings by S (the paper does not state their scale; ours have "
                   f"||h_j|| about 1, S = sqrt(d) gives N(0, I) entries); at most {MAX_EMBEDDING_SCALE:g}, default 1")
    p.add_argument("--gd-lr", type=float_in(0.0, MAX_LR), default=PAPER_GD_LR, help=f"GD step (default {PAPER_GD_LR})")
    p.add_argument("--ngd-lr", type=float_in(0.0, MAX_LR), default=PAPER_NGD_LR, help=f"NGD step (default {PAPER_NGD_LR})")
    p.add_argument("--adam-lr", type=float_in(0.0, MAX_LR), default=PAPER_ADAM_LR,
                   help=f"Adam step (default {PAPER_ADAM_LR})")
    p.add_argument("--adam-eps", type=float_in(0.0, low_open=False), default=PAPER_ADAM_EPS,
                   help=f"Adam epsilon (default {PAPER_ADAM_EPS:g})")
    p.add_argument("--no-extras", action="store_true", help="skip sign / spectral / Muon and the regularisation path")
    p.add_argument("--points-per-decade", type=int_in(1), default=POINTS_PER_DECADE,
                   help=f"logged steps per decade (default {POINTS_PER_DECADE})")
    p.add_argument("--check-steps", type=int_in(10, MAX_STEPS), default=CHECK_STEPS,
                   help="steps of the convergence-check runs (GD at its default step 1/(2L), and Adam as the "
                   f"control), with the extras (default {CHECK_STEPS:,}; the verdicts' thresholds are set for 10^6)")
    json_option(p, "print the summary as one JSON object")
    force_option(p)
    progress_option(p)
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from ntpcert.dynamics.trajectory import geometric_grid
    from ntpcert.errors import InputError
    from ntpcert.experiments.reproduce import reproduce_paper
    from ntpcert.report.reproduce_text import render_markdown
    from ntpcert.util.files import check_output_dir, write_directory

    if args.experiment not in EXPERIMENTS:
        raise InputError(f"EXPERIMENT: unknown value {args.experiment!r} (expected one of {', '.join(EXPERIMENTS)})")
    check_output_dir(args.out_dir, "--out-dir", names=output_names(not args.no_extras), overwrite=args.force)
    try:
        geometric_grid(args.steps, args.points_per_decade)
    except InputError as err:  # the message names the library's argument; say the option instead
        raise InputError(f"--points-per-decade: {str(err).split(': ', 1)[-1]}") from None
    rep = reproduce_paper(steps=args.steps, seed=args.seed, embedding_scale=args.embedding_scale, gd_lr=args.gd_lr,
                          ngd_lr=args.ngd_lr, adam_lr=args.adam_lr, adam_eps=args.adam_eps, extras=not args.no_extras,
                          points_per_decade=args.points_per_decade, check_steps=args.check_steps,
                          progress=progress_enabled(args))
    summary = rep.to_json()
    files = write_directory(args.out_dir, rep.writers(summary), "--out-dir")  # only now: a failed run writes nothing
    if args.json:
        emit_json(rep.to_json(out=args.out_dir, files=files))
    else:
        print(render_markdown(summary))
        print(f"\nwrote {', '.join(files)} to {args.out_dir}")
    return EXIT_OK
