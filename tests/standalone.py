"""The standalone reference checker, tools/ntpcert_check.py, loaded from its file for the tests that hold it
to agree with ``ntpcert verify``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parent.parent / "tools" / "ntpcert_check.py"
#: Every file of the checker: the entry point and the modules beside it that it imports.
FILES = (PATH, PATH.with_name("ntpcert_check_exact.py"), PATH.with_name("ntpcert_check_sections.py"),
         PATH.with_name("ntpcert_check_split.py"), PATH.with_name("ntpcert_check_nuclear.py"))

_spec = importlib.util.spec_from_file_location("ntpcert_check", PATH)
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)


def standalone(text: str | bytes) -> tuple[bool, str]:
    """(valid, first line) of the standalone checker on a certificate's text."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        notes = checker.check(checker.parse(data))
    except checker.Invalid as err:
        return False, f"INVALID: {err}"
    except checker.TooLarge as err:
        return False, f"TOO LARGE: {err}"
    finally:
        sys.set_int_max_str_digits(old)
    return True, "VALID: " + "; ".join(notes)

