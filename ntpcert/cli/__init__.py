"""The command line, one module per command (``register(subparsers, name)`` adds its parser).

Nothing outside this package imports from it. Commands parse their arguments, call the library
and render the results; heavy modules are imported inside the commands, so that
``ntpcert --help`` stays instant.
"""

from ntpcert.cli.app import build_parser as build_parser
from ntpcert.cli.app import main as main

__all__ = ["build_parser", "main"]
