"""The ``ntpcert`` command line: parse → call the library → render.

Exit codes: 0 done (whatever the verdict), 2 bad input or usage (one line on stderr), 1 internal
failure, 130 interrupted. Each command is a module of this package with ``register(subparsers,
name)``; heavy modules (cvxpy, sympy, scipy.optimize, matplotlib) are imported inside the commands
that need them, so ``ntpcert --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from ntpcert.cli.options import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, Parser, UsageError

#: Command name -> module under ``ntpcert/cli/``, in the order ``--help`` lists them.
COMMANDS = {
    "info": "ntpcert.cli.info",
    "certify": "ntpcert.cli.certify",
    "explain": "ntpcert.cli.explain",
    "svm": "ntpcert.cli.svm",
    "limits": "ntpcert.cli.limits",
    "verify": "ntpcert.cli.verify",
    "bench": "ntpcert.cli.bench",
    "trajectory": "ntpcert.cli.trajectory",
    "reproduce": "ntpcert.cli.reproduce",
    "sweep": "ntpcert.cli.sweep",
    "sweep-plot": "ntpcert.cli.sweep_plot",
    "geometry": "ntpcert.cli.geometry",
    "compare": "ntpcert.cli.compare",
    "bottleneck": "ntpcert.cli.bottleneck",
}


def build_parser() -> argparse.ArgumentParser:
    from ntpcert import __version__

    p = Parser(prog="ntpcert", description="Certify whether an NTP dataset lets a linear decoder reach the "
               "entropy lower bound, and compute the limits gradient descent picks (W*, F, W^mm).")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, module in COMMANDS.items():
        importlib.import_module(module).register(sub, name)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from ntpcert.errors import InputError, MissingExtraError, NTPCertError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    except (InputError, MissingExtraError) as err:
        print(f"ntpcert: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except NTPCertError as err:
        if debug:
            raise
        print(f"ntpcert: failed: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("ntpcert: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except SystemExit as err:  # --help / --version
        return int(err.code or 0) if isinstance(err.code, int) else EXIT_OK
    except Exception as err:  # noqa: BLE001
        if debug:
            raise
        print(f"ntpcert: internal error: {type(err).__name__}: {err} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
