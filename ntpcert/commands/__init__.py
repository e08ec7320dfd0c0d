"""CLI commands beyond the core ones, one module each; see ``ntpcert.cli.EXTRA_COMMANDS``."""
