"""Three-valued logic for verdicts: True (holds, with a witness), False (fails, with a witness),
None (undetermined)."""

from __future__ import annotations


def and3(*values: bool | None) -> bool | None:
    """Kleene's AND: False when any value is False, True when all are True, else None.

    >>> and3(True, None), and3(False, None), and3(True, True)
    (None, False, True)
    """
    if any(v is False for v in values):
        return False
    if all(v is True for v in values):
        return True
    return None


__all__ = ["and3"]
