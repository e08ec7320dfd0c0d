"""One long-lived worker process per backend, with a time limit on each request.

A fresh interpreter per (instance, backend) pair spent most of a small benchmark starting Python
and importing solvers (about 1.5 s a run). A :class:`Worker` starts
:mod:`ntpcert.experiments.bench.worker` once, lets it warm up, and sends it one instance at a time.
A request that overstays its limit by :data:`GRACE` seconds is killed with the process; a process that
dies is a crash; either way the next request starts a fresh process, so a crash, a memory blow-up or
a solver that ignores its time limit costs one run, never the benchmark.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

#: Seconds a request may run past its time limit (reading the file, Kesler rows) before it is killed.
GRACE = 10.0
#: Seconds a fresh worker may take to import its backend and solve the warm-up instance.
START_LIMIT = 120.0

WORKER = Path(__file__).with_name("worker.py")
#: Prefix of the worker's own lines on stdout (solver libraries may print lines of their own).
MARK = "@@ntpcert-bench "


@dataclass(frozen=True)
class Answer:
    """What came back for one request: ``raw`` is the worker's JSON object, or None when the process
    was killed (``killed``) or died (``message`` holds its last line on stderr)."""

    raw: dict | None
    killed: bool = False
    message: str = ""


class Worker:
    """A worker process for ``backend``; :meth:`solve` sends one instance, :meth:`close` ends it."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr = None

    def _start(self) -> Answer | None:
        self._stderr = tempfile.TemporaryFile("w+")
        self._proc = subprocess.Popen([sys.executable, str(WORKER), self.backend], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(self._proc.stdout, self._lines), daemon=True).start()
        first = self._next(START_LIMIT)
        return None if first is not None and first.raw == {"ready": True} else (first or self._dead())

    @staticmethod
    def _read(stream, lines: queue.Queue) -> None:
        for line in stream:
            if line.startswith(MARK):
                body = line[len(MARK):].strip()
                lines.put({"ready": True} if body == "ready" else json.loads(body))
        lines.put(None)

    def _next(self, timeout: float) -> Answer | None:
        try:
            got = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            return Answer(None, killed=True, message=f"killed after {timeout:g} s")
        return None if got is None else Answer(got)

    def _dead(self) -> Answer:
        code = self._proc.wait() if self._proc is not None else None
        self._stderr.seek(0)
        tail = (self._stderr.read().strip().splitlines() or ["no output"])[-1]
        self.close()
        return Answer(None, message=f"exit {code}: {tail}"[:300])

    def solve(self, path: str, time_limit: float) -> Answer:
        """Solve the instance file ``path`` with at most ``time_limit`` seconds (plus :data:`GRACE`)."""
        if self._proc is None:
            failed = self._start()
            if failed is not None:
                return failed
        try:
            self._proc.stdin.write(f"{path}\t{time_limit!r}\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._dead()
        got = self._next(time_limit + GRACE)
        return got if got is not None else self._dead()

    def close(self) -> None:
        """End the process (killed if it still runs)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass


__all__ = ["Answer", "GRACE", "START_LIMIT", "Worker"]
