"""Ctrl-C stops the HiGHS LPs at once (ntpcert.util.interrupt): a process blocked in a separability or
Farkas LP exits within a second and a half of SIGINT, kills its solver child, and otherwise the
helper changes nothing (same results, errors and warnings)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import OptimizeWarning, linprog

from ntpcert.errors import SolverError
from ntpcert.exact.separability import float_farkas_ray
from ntpcert.experiments.bench.families import gaussian_instance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.separability_lp import check_separability
from ntpcert.util import interrupt
from ntpcert.util.interrupt import (
    interruptible,
    run_in_child,
    run_in_thread,
    run_interruptible,
)

ROOT = Path(__file__).resolve().parents[1]
#: Seconds from SIGINT to the end of the process (the requirement is "within a second").
EXIT_WITHIN = 1.5
#: How long the LP must already have run in its child before the interrupt.
IN_LP_FOR = 0.5

# V=50, m=200, d=250: HiGHS runs for minutes on both LPs (4.9 million nonzeros in the separability
# LP; loading them alone holds the GIL for about a second, which a worker thread could not beat).
# scipy.optimize is imported before the marker: an interrupt during that import is another matter.
PRELUDE = """
import sys, time
import numpy as np
import scipy.optimize
from ntpcert.experiments.bench.families import gaussian_instance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.separability_lp import check_separability
from ntpcert.exact.separability import float_farkas_ray
from ntpcert.util.interrupt import run_in_child, run_in_thread
inst = gaussian_instance(np.random.default_rng(0), V=50, m=200, d=250, kmin=1, kmax=5)
"""

CALLS = {
    "check_separability": "system = KeslerSystem.build(inst)\nprint('IN', flush=True)\ncheck_separability(system)",
    "float_farkas_ray": "print('IN', flush=True)\nfloat_farkas_ray(inst)",
}


def _start(body: str) -> subprocess.Popen:
    code = PRELUDE + textwrap.dedent(body) + "\nprint('DONE', flush=True)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if line.strip() != "IN":
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the script did not reach its call: {line!r}\n{err}")
    return proc


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _wait_for_child(proc: subprocess.Popen, timeout: float = 10.0) -> int | None:
    """The pid of the solver child once it has run IN_LP_FOR seconds (None where no child is forked)."""
    if not interrupt.CAN_FORK:
        time.sleep(2.0)
        return None
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        kids = _children(proc.pid)
        if kids:
            time.sleep(IN_LP_FOR)
            assert proc.poll() is None, "the LP ended before the interrupt; the test needs a longer one"
            return kids[0]
        time.sleep(0.02)
    proc.kill()
    pytest.fail("no solver child appeared")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _interrupt_and_wait(proc: subprocess.Popen, sig: int = signal.SIGINT) -> tuple[float, str, str]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {EXIT_WITHIN} s after the signal\n{err[-2000:]}")
    return time.monotonic() - t0, out, err


def _assert_interrupted(proc: subprocess.Popen, out: str, err: str) -> None:
    assert "DONE" not in out
    assert proc.returncode in (130, -signal.SIGINT) or (proc.returncode != 0 and "KeyboardInterrupt" in err), \
        (proc.returncode, err[-2000:])


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
@pytest.mark.parametrize("call", sorted(CALLS))
def test_sigint_stops_the_lp_at_once(call):
    proc = _start(CALLS[call])
    child = _wait_for_child(proc)
    seconds, out, err = _interrupt_and_wait(proc)
    _assert_interrupted(proc, out, err)
    assert seconds < EXIT_WITHIN
    if child is not None:
        t_end = time.monotonic() + 1.0
        while _alive(child) and time.monotonic() < t_end:
            time.sleep(0.02)
        assert not _alive(child), "the solver child outlived the interrupt"


@pytest.mark.skipif(not interrupt.CAN_FORK, reason="no forked child on this platform")
def test_the_solver_child_dies_with_its_parent():
    """A parent killed outright (SIGKILL: no Python code runs) takes its solver child with it."""
    proc = _start("print('IN', flush=True)\nrun_in_child(time.sleep, 60)")
    child = _wait_for_child(proc)
    proc.kill()
    proc.communicate()
    t_end = time.monotonic() + EXIT_WITHIN
    while _alive(child) and time.monotonic() < t_end:
        time.sleep(0.02)
    assert not _alive(child)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_sigint_stops_the_thread_fallback_at_once():
    proc = _start("print('IN', flush=True)\nrun_in_thread(time.sleep, 60)")
    time.sleep(0.3)
    seconds, out, err = _interrupt_and_wait(proc)
    _assert_interrupted(proc, out, err)
    assert seconds < EXIT_WITHIN


# --- the helper changes nothing else --------------------------------------------------------------


def _direct(fn, /, *args, **kwargs):
    return fn(*args, **kwargs)


@pytest.fixture
def calls(monkeypatch):
    """The calls that went through a forked child or a worker thread, by the name of the way."""
    log = {"child": [], "thread": []}
    for way, entries in log.items():
        real = getattr(interrupt, f"run_in_{way}")

        def counted(fn, /, *args, _real=real, _log=entries, **kwargs):
            _log.append(fn)
            return _real(fn, *args, **kwargs)

        monkeypatch.setattr(interrupt, f"run_in_{way}", counted)
    return log


@pytest.mark.parametrize("child_min_size", [0, None], ids=["forked", "default"])
@pytest.mark.parametrize("seed", range(3))
def test_same_results_as_the_direct_calls(seed, child_min_size, monkeypatch, calls):
    inst = gaussian_instance(np.random.default_rng(seed), V=5, m=20, d=4 + 3 * seed, kmin=1, kmax=3)
    system = KeslerSystem.build(inst)
    if child_min_size is not None:
        monkeypatch.setattr(interrupt, "CHILD_MIN_SIZE", child_min_size)
    sep, ray = check_separability(system), float_farkas_ray(inst)
    # at least one LP each; small LPs go to a thread, unless the threshold is 0
    way = "child" if child_min_size == 0 and interrupt.CAN_FORK else "thread"
    assert len(calls[way]) >= 2 and not calls["child" if way == "thread" else "thread"]
    monkeypatch.setattr(interrupt, "interruptible", lambda fn, size=None: fn)
    monkeypatch.setattr("ntpcert.solve.separability_lp.interruptible", lambda fn, size=None: fn)
    sep2, ray2 = check_separability(system), float_farkas_ray(inst)
    assert (sep.feasible, sep.status, sep.lp_infeasible, sep.text) == (sep2.feasible, sep2.status, sep2.lp_infeasible, sep2.text)
    assert (sep.W is None and sep2.W is None) or np.array_equal(sep.W, sep2.W)
    assert (ray is None and ray2 is None) or np.array_equal(ray, ray2)


def test_the_size_threshold_picks_the_way(monkeypatch, calls):
    monkeypatch.setattr(interrupt, "CAN_FORK", True)
    interruptible(abs, size=interrupt.CHILD_MIN_SIZE - 1)(-1)
    assert calls == {"child": [], "thread": [abs]}
    interruptible(abs, size=interrupt.CHILD_MIN_SIZE)(-1)
    interruptible(abs)(-1)
    assert calls == {"child": [abs, abs], "thread": [abs]}
    monkeypatch.setattr(interrupt, "CAN_FORK", False)
    assert run_interruptible(abs, -1) == 1
    assert calls == {"child": [abs, abs], "thread": [abs, abs]}


@pytest.mark.parametrize("runner", [run_interruptible, run_in_child, run_in_thread, _direct])
def test_same_errors(runner):
    with pytest.raises(ValueError, match="A_ub must have exactly two dimensions"):
        runner(linprog, [1, 2], A_ub=[[1]], b_ub=[1])


@pytest.mark.parametrize("runner", [run_interruptible, run_in_child, run_in_thread])
def test_warnings_come_back_under_the_callers_filters(runner):
    with pytest.warns(OptimizeWarning, match="Unrecognized options"):
        res = runner(linprog, [1], bounds=[(0, 1)], options={"not_an_option": 1})
    assert res.status == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(OptimizeWarning):
            runner(linprog, [1], bounds=[(0, 1)], options={"not_an_option": 1})


@pytest.mark.skipif(not interrupt.CAN_FORK, reason="no forked child on this platform")
def test_child_runs_in_another_process_and_reports_its_death():
    assert run_in_child(os.getpid) != os.getpid()
    assert run_interruptible(os.getpid) != os.getpid()
    with pytest.raises(SolverError, match="killed by SIGKILL"):
        run_in_child(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(SolverError, match="exit status 3"):
        run_in_child(os._exit, 3)

    class TwoArgs(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} and {b}")

    def raise_two_args():
        raise TwoArgs(1, 2)

    with pytest.raises(SolverError, match="cannot send its exception TwoArgs: 1 and 2 back"):
        run_in_child(raise_two_args)
    with pytest.raises(ZeroDivisionError) as info:
        run_in_child(lambda: 1 / 0)
    assert "worker process" in "".join(getattr(info.value, "__notes__", []))


def test_direct_call_off_the_main_thread_or_without_a_sigint_handler(monkeypatch):
    box = []
    worker = threading.Thread(target=lambda: box.append(run_interruptible(os.getpid)))
    worker.start()
    worker.join()
    assert box == [os.getpid()]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert run_interruptible(os.getpid) == os.getpid()
    finally:
        signal.signal(signal.SIGINT, previous)
