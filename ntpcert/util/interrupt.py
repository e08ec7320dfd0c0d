"""Run a long blocking call (an external solver) so that Ctrl-C stops it within a fraction of a second.

CPython runs a Python signal handler (the one that raises :class:`KeyboardInterrupt`) only in the
main thread and only between bytecodes, so a call that sits in C code for minutes ignores Ctrl-C
for minutes. :func:`interruptible` (and :func:`run_interruptible`) move the call off the main
thread, which then only waits and so takes the interrupt at once.

Why a forked child process and not a worker thread (measured with scipy 1.17.1 on a separability
LP of 12,500 variables, 9,800 rows and 4.9 million nonzeros, Linux, 2 cores): scipy's HiGHS
wrapper releases the GIL inside ``Highs.run`` (the main thread ticked every 10 ms throughout a
20 s solve), but *holds* it while it loads the model: the pybind11 copy of the CSC arrays into a
``HighsLp`` (0.83 s, about 0.17 us per nonzero) and ``passModel`` (0.2-0.27 s). A worker thread
would therefore delay the interrupt by about a second on that LP and by more on a larger one, and
after the interrupt it would keep solving (CPU and memory) until the process ends. A child process
has its own GIL; the parent waits in ``os.read`` on a pipe, which a signal interrupts at once
(:pep:`475`), and on any exception it kills the child (SIGKILL) before re-raising. Measured from
SIGINT to the end of a process blocked in that LP: 0.10-0.36 s with the child (the handler runs
within 10 ms; the rest is killing the child and the interpreter's exit), whatever the moment; with
a worker thread 0.12-0.45 s during the solve but 1.4 s when the signal came during the model load
(the handler ran 0.67 s late).

Cost: one ``fork`` per call; the arguments are not pickled (the child inherits them), only the
result comes back through the pipe (pickled). Measured: a bare fork round trip 8-10 ms (17 ms
through :mod:`multiprocessing`'s fork context), the same with 2 GiB resident in the parent; but
HiGHS is slower in a fresh child (copy-on-write faults, its per-process set-up), so a tiny LP (100
variables) takes 15-35 ms instead of 4-8 ms, i.e. 10-25 ms more. The test suite makes about 1,400
such calls (35 s). Hence the size threshold: :func:`interruptible` takes ``size``, the work the
call does while holding the GIL (for HiGHS, the nonzeros of the constraint matrix: about 0.2 us
each), and below :data:`CHILD_MIN_SIZE` it uses a worker thread (0.1 ms), whose interrupt then
waits at most about 25 ms. A HiGHS thread pool started in the parent (``threads=8``) does not upset
the child (same results on highs, highs-ds, highs-ipm).

What the child does to behave like the in-process call: it ignores SIGINT (a terminal sends Ctrl-C
to the whole process group; the parent kills the child), dies with the parent (``PR_SET_PDEATHSIG``),
records the warnings raised under the caller's filters and the parent re-issues them, and sends
back the return value or the exception (same type and message; the child's traceback is attached
as a note). A child that dies without answering (killed, out of memory, crashed) raises
:class:`~ntpcert.errors.SolverError`. The child ends with ``os._exit``: it runs no ``atexit`` hook
and flushes no Python-level stream buffer (so it never writes the parent's buffered output again;
what ``fn`` itself leaves in ``sys.stdout``'s buffer is lost, and the package's library code does
not print); output written straight to the file descriptors (C code) is unaffected.

Where no child is forked:

* not in the main thread, or SIGINT not handled by Python (ignored, e.g. dask workers, or the
  default action, which ends the process anyway): the call runs directly;
* below :data:`CHILD_MIN_SIZE`, or not on Linux (no ``fork``, or ``fork`` unsafe with macOS system
  frameworks): a daemon worker thread runs the call and the main thread waits in
  ``Event.wait(POLL_SECONDS)``; the interrupt then waits for any GIL-holding stretch of the call,
  and the thread, abandoned, goes on until the call returns or the process ends.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from ntpcert.errors import SolverError

__all__ = ["CAN_FORK", "CHILD_MIN_SIZE", "POLL_SECONDS", "interruptible", "run_in_child", "run_in_thread",
           "run_interruptible"]

T = TypeVar("T")

#: How often the main thread wakes up while a worker thread runs the call (seconds).
POLL_SECONDS = 0.1
#: Whether :func:`run_interruptible` forks a child (Linux only).
CAN_FORK = sys.platform.startswith("linux") and hasattr(os, "fork")
#: Calls of a smaller ``size`` (:func:`interruptible`) run in a worker thread, not a child: HiGHS
#: holds the GIL about 0.2 us per nonzero while it loads the model, 20-25 ms here.
CHILD_MIN_SIZE = 100_000

_PR_SET_PDEATHSIG = 1
#: The once-per-location registry of the warnings re-issued from children.
_REGISTRY: dict = {}


def interruptible(fn: Callable[..., T], *, size: int | None = None) -> Callable[..., T]:
    """``fn`` wrapped so that a call is interruptible by Ctrl-C within a fraction of a second even
    while ``fn`` is in C code: in a forked child on Linux when ``size`` is None or at least
    :data:`CHILD_MIN_SIZE`, in a worker thread otherwise, directly where there is no interrupt to
    wait for (see the module doc).

    Parameters
    ----------
    fn : callable
    size : int, optional
        The work ``fn`` does while holding the GIL, in the unit of :data:`CHILD_MIN_SIZE` (for
        scipy's HiGHS: the nonzeros of the constraint matrices). None: unknown, fork.
    """

    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> T:
        if threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            return fn(*args, **kwargs)
        if CAN_FORK and (size is None or size >= CHILD_MIN_SIZE):
            return run_in_child(fn, *args, **kwargs)
        return run_in_thread(fn, *args, **kwargs)

    return call


def run_interruptible(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``interruptible(fn)(*args, **kwargs)``: in a forked child on Linux (see :func:`interruptible`)."""
    return interruptible(fn)(*args, **kwargs)


def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a daemon thread while this thread waits in short timeouts, so
    that a KeyboardInterrupt here is raised at once (the thread is then abandoned)."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["error"] = err
        finally:
            done.set()

    worker = threading.Thread(target=target, name=f"ntpcert-{_name(fn)}", daemon=True)
    worker.start()
    while not done.wait(POLL_SECONDS):
        pass
    if "error" in box:
        err = box.pop("error")
        try:
            raise err
        finally:
            del err
    return box["value"]


def run_in_child(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a forked child process; its result (or exception, and its
    warnings) come back pickled through a pipe. On any exception here, KeyboardInterrupt included,
    the child is killed first."""
    parent = os.getpid()
    pid = -1
    status = 0
    chunks: list[bytes] = []
    rfd, wfd = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python >= 3.12 warns whenever a process with threads forks (numpy's BLAS pool is
            # enough): a lock held by another thread at the fork stays locked in the child. The
            # child only runs fn and writes to a pipe; were it ever stuck, Ctrl-C still kills it.
            warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child, which never leaves _child_main
                _child_main(fn, args, kwargs, rfd, wfd, parent)
        os.close(wfd)
        wfd = -1
        while chunk := os.read(rfd, 1 << 20):  # a signal interrupts the wait (PEP 475)
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        pid = -1
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
        if pid > 0:  # an exception (an interrupt) before the child was reaped
            _kill(pid)
    data = b"".join(chunks)
    if not data:
        raise SolverError(f"{_name(fn)} died in its worker process ({_describe(status)}) without an answer")
    try:
        ok, value, caught = pickle.loads(data)
    except Exception as err:  # noqa: BLE001 - a child that died while writing
        raise SolverError(f"{_name(fn)}: unreadable answer from its worker process ({_describe(status)}): "
                          f"{type(err).__name__}: {err}") from None
    for message, category, filename, lineno in caught:
        warnings.warn_explicit(message, category, filename, lineno, registry=_REGISTRY)
    if not ok:
        try:
            raise value
        finally:
            del value
    return value


def _child_main(fn: Callable[..., Any], args: tuple, kwargs: dict, rfd: int, wfd: int,
                parent: int) -> None:  # pragma: no cover - the child
    """The forked child: run ``fn``, write the answer, and leave with ``os._exit`` whatever happens
    (never back into the caller's code)."""
    code = 70
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(rfd)
        _die_with(parent)
        _child(fn, args, kwargs, wfd)
        code = 0
    finally:
        os._exit(code)


def _child(fn: Callable[..., Any], args: tuple, kwargs: dict, wfd: int) -> None:  # pragma: no cover
    with warnings.catch_warnings(record=True) as caught:  # the caller's filters stay in force
        try:
            payload: tuple = (True, fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - handed to the parent
            err.add_note(f"(raised in the worker process {os.getpid()}:\n{traceback.format_exc().rstrip()})")
            payload = (False, err)
    records = [(w.message, w.category, w.filename, w.lineno) for w in caught]
    try:
        data = pickle.dumps((*payload, records), protocol=pickle.HIGHEST_PROTOCOL)
        if not payload[0]:
            pickle.loads(data)  # an exception whose __init__ does not take its args back fails here
    except Exception as err:  # noqa: BLE001 - an unpicklable result or exception
        what = "result" if payload[0] else f"exception {type(payload[1]).__name__}: {payload[1]}"
        data = pickle.dumps((False, SolverError(f"{_name(fn)}: cannot send its {what} back ({err})"), []))
    with os.fdopen(wfd, "wb") as pipe:
        pipe.write(data)


def _die_with(parent: int) -> None:  # pragma: no cover - the child
    """SIGKILL this (child) process when its parent ends, so that no solver outlives a killed parent."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass
    if os.getppid() != parent:  # the parent ended before prctl took effect
        os._exit(70)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)
