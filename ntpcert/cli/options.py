"""What the commands share: exit codes, the parser class, the DATA and solver options, loading
DATA, whether to draw progress bars, and printing one JSON object."""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: Exit codes: 0 done (whatever the verdict), 1 internal failure, 2 bad input or usage.
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


class Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def data_options(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """DATA (positional, or ``--data`` when ``positional`` is false) and the corpus options."""
    if positional:
        p.add_argument("data", metavar="DATA",
                       help="a .npz/.json file, a text corpus, or a built-in name (paper, dyck, pydoc)")
    else:
        p.add_argument("--data", metavar="DATA", default=None,
                       help="check against this instance (file or built-in name) instead of the embedded one")
    g = p.add_argument_group("corpus options (text files and text built-ins)")
    g.add_argument("--tokenizer", choices=["char", "word"], default=None, help="tokenizer for text (default char)")
    g.add_argument("-k", "--context-length", type=int, default=None, metavar="K",
                   help="context length k (default 2 for text, 4 for dyck)")
    g.add_argument("--all-prefixes", action="store_true", help="also use all shorter contexts, lengths 1..k-1")
    g.add_argument("--embedding", default=None, metavar="SPEC",
                   help="onehot-context | onehot-concat | random:D | path.npy (default onehot-concat)")
    g.add_argument("--max-chars", type=int, default=None, metavar="N", help="read at most N characters of text")
    p.add_argument("--seed", type=int, default=0, help="seed of generated data and random embeddings (default 0)")


def solver_options(p: argparse.ArgumentParser) -> None:
    """``--solver`` and ``--progress``, shared by the commands that solve the NTP-SVM."""
    from ntpcert.solve.svm import DEFAULT_SOLVER

    p.add_argument("--solver", default=DEFAULT_SOLVER,
                   help=f"NTP-SVM solver (default {DEFAULT_SOLVER}: the structured solver, Clarabel where it does "
                   "not certify): auto, structured, structured-float, clarabel, cvxpy, cvxpy:NAME, osqp, scs, piqp, "
                   "proxqp, highs")
    progress_option(p)


def progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action="store_true", help="show progress on stderr even when not a terminal")


def load_data(args: argparse.Namespace) -> Any:
    """The instance named by ``args.data`` and the corpus options."""
    from ntpcert.instance.load import load_instance

    return load_instance(
        args.data,
        tokenizer=args.tokenizer,
        context_length=args.context_length,
        all_prefixes=args.all_prefixes,
        embedding=args.embedding,
        seed=args.seed,
        max_chars=args.max_chars,
        progress=progress_enabled(args),
    )


def progress_enabled(args: argparse.Namespace) -> bool:
    """Bars on stderr: with ``--progress``, or when stderr is a terminal and ``--json`` is off."""
    return bool(getattr(args, "progress", False)) or (sys.stderr.isatty() and not getattr(args, "json", False))


def emit_json(obj: Any) -> None:
    """Print ``obj`` as one JSON object on one line of stdout."""
    from ntpcert.report.jsonout import dumps

    sys.stdout.write(dumps(obj) + "\n")


def emit_lines(lines: list[str]) -> None:
    """Print lines on stdout."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))


__all__ = [
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "Parser",
    "UsageError",
    "data_options",
    "emit_json",
    "emit_lines",
    "load_data",
    "progress_enabled",
    "progress_option",
    "solver_options",
]
