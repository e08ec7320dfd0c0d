"""Progress bars on stderr, one way for the whole package.

A bar is drawn only when asked for (``enabled=True``) or, with ``enabled=None``, when stderr is
a terminal; tqdm is imported only then, so that start-up stays light. Disabled bars are a no-op
object with the same methods.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator


class _NoBar:
    """The methods of a tqdm bar that the package uses, doing nothing."""

    n = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def set_description_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def wanted(asked: bool, json: bool) -> bool:
    """Bars on stderr for a command: when asked (``--progress``), or when stderr is a terminal and the
    command prints JSON on stdout (``--json``) off."""
    return bool(asked) or (bool(getattr(sys.stderr, "isatty", lambda: False)()) and not json)


def enabled_default(enabled: bool | None) -> bool:
    """``enabled``, or, when None, whether stderr is a terminal."""
    if enabled is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(enabled)


class _Lines:
    """A stream for tqdm where stderr is not a terminal (``--progress`` into a pipe or a log file): each
    refresh becomes one plain line, without the carriage returns and cursor moves a terminal bar is drawn
    with (a log read them as raw codes)."""

    _ANSI = None

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        import re

        if _Lines._ANSI is None:
            _Lines._ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
        for part in _Lines._ANSI.sub("", text).replace("\r", "\n").split("\n"):
            if part.strip():
                self.stream.write(part.rstrip() + "\n")

    def flush(self) -> None:
        getattr(self.stream, "flush", lambda: None)()


#: Where stderr is not a terminal, a bar prints a line at most this often (seconds).
PIPE_INTERVAL_S = 10.0


def progress_bar(enabled: bool | None = None, **options: Any) -> Any:
    """A tqdm bar on stderr (``leave=False`` unless given) when enabled, else a no-op bar. Where stderr is
    not a terminal, the bar writes plain lines (:class:`_Lines`), at most one every
    :data:`PIPE_INTERVAL_S` seconds, and its last line stays.

    ``options`` go to :class:`tqdm.tqdm` (``total``, ``desc``, ``unit``, ``initial``, ...).
    """
    if not enabled_default(enabled):
        return _NoBar()
    from tqdm import tqdm

    stream = options.get("file", sys.stderr)
    if not bool(getattr(stream, "isatty", lambda: False)()):
        options.update(file=_Lines(stream), ascii=True, dynamic_ncols=False, ncols=100, position=None)
        options.setdefault("mininterval", PIPE_INTERVAL_S)
        options.setdefault("leave", True)
    options.setdefault("leave", False)
    options.setdefault("file", sys.stderr)
    return tqdm(**options)


def iterate(items: Any, enabled: bool | None = None, **options: Any) -> Any:
    """``items`` wrapped in a progress bar when enabled, else ``items`` themselves."""
    if not enabled_default(enabled):
        return items
    return progress_bar(True, iterable=items, **options)


class Stages:
    """Progress over named stages: one bar step a stage, the stage's name shown beside it, and the
    wall time of each stage in ``seconds`` (keyed by ``key``, or the name).

    >>> stages = Stages(2, enabled=False)
    >>> with stages.stage("Kesler rows", key="kesler"):
    ...     pass
    >>> stages.close()
    >>> list(stages.seconds)
    ['kesler']
    """

    def __init__(self, total: int, enabled: bool | None = None, desc: str = "ntpcert") -> None:
        self._bar = progress_bar(enabled, total=total, desc=desc,
                                 bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str, key: str | None = None) -> Iterator[None]:
        self._bar.set_postfix_str(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[key or name] = time.perf_counter() - t0
            self._bar.update(1)

    def close(self) -> None:
        self._bar.close()




def progress_note(text: str, enabled: bool | None = None) -> None:
    """One line of progress on stderr (through ``tqdm.write``, so that it does not break a bar that is
    drawn), when ``enabled`` (``None``: when stderr is a terminal). Library code reports progress
    this way, never with ``print``."""
    if not enabled_default(enabled):
        return
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)
    sys.stderr.flush()


__all__ = ["Stages", "enabled_default", "iterate", "progress_bar", "progress_note"]
