"""``python -m ntpcert``: the command line."""

import sys

from ntpcert.cli.app import main

sys.exit(main())
