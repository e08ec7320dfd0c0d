"""What the commands share: exit codes, the parser class, the DATA and solver options, loading
DATA, checked numeric option types, one helper each for ``--json``, an output file, an output folder,
the time limit and ``--force``, whether to draw progress bars, and printing one JSON object.

Every check here runs while the arguments are parsed or before the command's work starts, so a bad
option costs no computation and leaves no file behind.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any, Callable

from ntpcert.dynamics.optimizers import MAX_LR
from ntpcert.instance.embeddings import MAX_ENTRIES

#: Exit codes: 0 done (whatever the verdict), 1 internal failure, 2 bad input or usage.
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


#: ``--separability-solver`` choices, the default first (:data:`ntpcert.pipeline.decide.SEPARABILITY_SOLVERS`).
SEPARABILITY_SOLVERS = ("auto", "structured", "highs")

#: Largest ``--time-limit``, in seconds (one day).
MAX_TIME_LIMIT_S = 86_400.0


class Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting, and that takes no
    abbreviated option: ``--context tokens:2`` where a command has ``--context-length`` but no
    ``--context`` would otherwise be read as ``--context-length tokens:2``, an input that silently
    changes meaning."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]`` (``high`` None: no upper bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"value {text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"in [{low}, {high:,}]"
            raise argparse.ArgumentTypeError(f"value {text!r} is not an integer {bound}")
        return value

    parse.__name__ = "integer"
    return parse


def float_in(low: float, high: float | None = None, *, low_open: bool = True) -> Callable[[str], float]:
    """An argparse ``type``: a finite number above ``low`` (or at least ``low`` when not
    ``low_open``) and at most ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"value {text!r} is not a number") from None
        ok = math.isfinite(value) and (value > low if low_open else value >= low) and (high is None or value <= high)
        if not ok:
            lo = f"{'(' if low_open else '['}{low:g}"
            hi = f"{high:g}]" if high is not None else "inf)"
            raise argparse.ArgumentTypeError(f"value {text!r} is not a finite number in {lo}, {hi}")
        return value

    parse.__name__ = "number"
    return parse


def json_option(p: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    """``--json``: one JSON object on stdout instead of the text report."""
    p.add_argument("--json", action="store_true", help=help)


def out_file_option(p: Any, help: str, *, flag: str = "--out", required: bool = False) -> None:
    """An output file (``--out FILE`` unless ``flag`` names another option): written whole or not at all,
    refused when it exists unless ``--force``."""
    p.add_argument(flag, metavar="FILE", default=None, required=required, help=help)


def out_dir_option(p: Any, help: str, *, flag: str = "--out-dir", required: bool = False) -> None:
    """An output folder, ``--out-dir DIR`` (``args.out_dir``), created if missing and filled all at once.
    ``--out DIR`` is accepted as the same option, as before ``--out-dir`` existed (the architecture's
    contract ``limits DATA --out DIR``); on every other command ``--out`` names a file."""
    flags = (flag, "--out") if flag == "--out-dir" else (flag,)
    p.add_argument(*flags, dest=flag.lstrip("-").replace("-", "_"), metavar="DIR", default=None, required=required,
                   help=help)


def time_limit_option(p: Any, help: str, *, default: float | None) -> None:
    """``--time-limit SECONDS`` (``args.time_limit``), a finite number in (0, :data:`MAX_TIME_LIMIT_S`]."""
    p.add_argument("--time-limit", type=float_in(0.0, MAX_TIME_LIMIT_S), default=default, metavar="SECONDS",
                   help=f"{help}; at most {MAX_TIME_LIMIT_S:g}" + ("" if default is None else f" (default {default:g})"))


def force_option(p: argparse.ArgumentParser) -> None:
    """``--force``: replace output files that exist already (never an input of the command)."""
    p.add_argument("--force", action="store_true",
                   help="replace output files that exist already (an output that is an input is always refused)")


def data_inputs(args: argparse.Namespace) -> list[str]:
    """The files a command reads through DATA and the corpus options (for the output checks)."""
    out = []
    for value in (getattr(args, "data", None), getattr(args, "embedding", None)):
        if isinstance(value, str) and os.path.isfile(value):
            out.append(value)
    return out


def check_solver(name: str, field: str = "--solver") -> None:
    """Refuse an unknown NTP-SVM solver before any data are loaded (``cvxpy:NAME``: one not
    installed in cvxpy; this imports cvxpy, which a run with that solver does anyway)."""
    from ntpcert.errors import InputError
    from ntpcert.solve.svm import resolve_backend

    try:
        _, fixed = resolve_backend(name)
    except InputError as err:
        raise InputError(f"{field}: {err}") from None
    if name.startswith("cvxpy:"):
        import cvxpy as cp  # a core dependency

        wanted = fixed.get("solver", "")
        if wanted not in cp.installed_solvers():
            raise InputError(f"{field}: {name!r} is not an installed cvxpy solver "
                             f"(installed: {', '.join(cp.installed_solvers())})")


def data_options(p: argparse.ArgumentParser, *, positional: bool = True, model_series: bool = False) -> None:
    """DATA (positional, or ``--data`` when ``positional`` is false) and the corpus options; ``model_series``:
    ``--model`` takes several directories (:func:`ntpcert.cli.model_options.model_options`)."""
    if positional:
        p.add_argument("data", metavar="DATA",
                       help="a .npz/.json file, a text corpus, or a built-in name (paper, dyck, pydoc)")
    else:
        p.add_argument("--data", metavar="DATA", default=None,
                       help="check against this instance (file or built-in name) instead of the embedded one")
    g = p.add_argument_group("corpus options (text files and text built-ins)")
    g.add_argument("--tokenizer", choices=["char", "word", "whitespace"], default=None,
                   help="tokenizer for text (default char; word: lower-cased words and punctuation; "
                        "whitespace: str.split(), case kept)")
    g.add_argument("-k", "--context-length", type=int_in(1), default=None, metavar="K",
                   help="context length k (default 2 for text, 4 for dyck)")
    g.add_argument("--all-prefixes", action="store_true", help="also use all shorter contexts, lengths 1..k-1")
    g.add_argument("--embedding", default=None, metavar="SPEC",
                   help="onehot-context | onehot-concat | random:D | path.npy (default onehot-concat)")
    g.add_argument("--max-chars", type=int_in(2), default=None, metavar="N", help="read at most N characters of text")
    g.add_argument("--max-entries", type=int_in(1), default=None, metavar="N",
                   help=f"largest m*d (embeddings) and m*V (counts) built from a text or built-in "
                   f"(default {MAX_ENTRIES:,}; see docs/formats.md, Input limits)")
    p.add_argument("--seed", type=int_in(0), default=0, help="seed of generated data and random embeddings (default 0)")
    from ntpcert.cli.model_options import model_options

    model_options(p, series=model_series)


def solver_options(p: argparse.ArgumentParser) -> None:
    """``--solver`` and ``--progress``, shared by the commands that solve the NTP-SVM."""
    from ntpcert.solve.svm import DEFAULT_SOLVER

    p.add_argument("--solver", default=DEFAULT_SOLVER,
                   help=f"NTP-SVM solver (default {DEFAULT_SOLVER}: the structured solver, Clarabel where it does "
                   "not certify): auto, structured, structured-float, clarabel, cvxpy, cvxpy:NAME, osqp, scs, piqp, "
                   "proxqp, highs")
    progress_option(p)


def separability_option(p: argparse.ArgumentParser) -> None:
    """``--separability-solver``: the solver that decides separability (the library's ``separability_solver``:
    its choices and default, :data:`ntpcert.pipeline.decide.SEPARABILITY_SOLVERS`, written out so that
    ``--help`` stays light; a test holds them equal)."""
    p.add_argument("--separability-solver", choices=SEPARABILITY_SOLVERS, default=SEPARABILITY_SOLVERS[0],
                   help="solver that decides separability after Lemma 1 (default auto: the HiGHS LP on small "
                   "instances, else Farkas rays on growing parts of the data, then the structured NTP-SVM solver; "
                   "structured: the latter alone; highs: the HiGHS LP alone)")
    p.add_argument("--no-lemma1", action="store_true",
                   help="do not decide by Lemma 1 (d >= m, H of full row rank); the verdicts then carry explicit "
                   "witnesses, e.g. a feasible W in the certificate")


def progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action="store_true", help="show progress on stderr even when not a terminal")


def load_data(args: argparse.Namespace) -> Any:
    """The instance named by ``args.data`` and the corpus options (or read through ``--model``)."""
    from ntpcert.cli.model_options import check_model_flags, load_model, uses_model
    from ntpcert.instance.load import load_instance

    if hasattr(args, "model"):
        check_model_flags(args)
        if uses_model(args):
            return load_model(args).instance

    return load_instance(
        args.data,
        tokenizer=args.tokenizer,
        context_length=args.context_length,
        all_prefixes=args.all_prefixes,
        embedding=args.embedding,
        seed=args.seed,
        max_chars=args.max_chars,
        max_entries=args.max_entries,
        progress=progress_enabled(args),
    )


def load_merged(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(instance, merge)``: through ``--model``, the instance with the model's unseen tokens merged into one
    and its :class:`~ntpcert.instance.lm.merge.TokenMerge` (None when no token was merged); otherwise
    :func:`load_data` and None. The NTP-SVM of the merged instance weighted by the merge is the full
    vocabulary's (:mod:`ntpcert.instance.lm.merge`)."""
    from ntpcert.cli.model_options import check_model_flags, load_model, uses_model

    if hasattr(args, "model"):
        check_model_flags(args)
        if uses_model(args):
            data = load_model(args, merge_unseen=True)
            merge = data.merge if data.merge is not None and data.merge.merged else None
            return data.instance, merge
    return load_data(args), None


def progress_enabled(args: argparse.Namespace) -> bool:
    """Bars on stderr: with ``--progress``, or when stderr is a terminal and ``--json`` is off."""
    from ntpcert.util.progress import wanted

    return wanted(getattr(args, "progress", False), getattr(args, "json", False))


def emit_json(obj: Any) -> None:
    """Print ``obj`` as one JSON object on one line of stdout."""
    from ntpcert.util.jsonout import dumps

    sys.stdout.write(dumps(obj) + "\n")


def emit_lines(lines: list[str]) -> None:
    """Print lines on stdout."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))


__all__ = [
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "MAX_LR",
    "MAX_TIME_LIMIT_S",
    "Parser",
    "UsageError",
    "check_solver",
    "data_inputs",
    "data_options",
    "float_in",
    "force_option",
    "int_in",
    "json_option",
    "emit_json",
    "emit_lines",
    "load_data",
    "out_dir_option",
    "out_file_option",
    "progress_enabled",
    "progress_option",
    "solver_options",
    "time_limit_option",
]
