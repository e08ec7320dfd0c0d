"""Timing whole processes (wall time and the child's own peak memory), and the machine's load."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class ProcessTime:
    """One child process: wall seconds, its peak resident set size (MB), exit code and output.
    ``returncode`` is -9 when the child was killed at the timeout."""

    seconds: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str


def run_process(cmd: Sequence[str], *, timeout: float | None = None, env: dict | None = None) -> ProcessTime:
    """Run ``cmd``; wall time from start to exit, peak memory from ``os.wait4`` (this child only)."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=fo, stderr=fe, env=None if env is None else {**os.environ, **env})
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer:
                timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return ProcessTime(seconds, usage.ru_maxrss / 1024.0, proc.returncode, fo.read(), fe.read())


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages and the CPU count, as text."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover
        return "unknown"
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f} on {os.cpu_count()} CPUs"


def median(values: Sequence[float]) -> float:
    vals = [v for v in values if v == v]
    return statistics.median(vals) if vals else float("nan")
