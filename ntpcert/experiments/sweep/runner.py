"""Run a sweep: compute every missing grid point, on dask.distributed or in this process.

The runner reads which points the store already holds, sends the others in chunks to the workers
(at most ``max_in_flight`` chunks queued at a time, so a grid of millions of points never sits in
memory as futures), and commits each chunk's points to the store from this process, in one
transaction, as the chunk comes back. Killing the run at any moment loses only the chunks in flight; running it again
computes exactly the points that are missing. Workers never touch the store.
"""

from __future__ import annotations

import itertools
import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ntpcert.errors import InputError
from ntpcert.experiments.sweep.compute import compute_chunk
from ntpcert.experiments.sweep.spec import GridPoint, SweepSpec
from ntpcert.experiments.sweep.store import ResultStore
from ntpcert.util.extras import require
from ntpcert.util.progress import progress_bar
from ntpcert.util.validate import check_int

__all__ = ["SweepSummary", "run_sweep", "dask_client", "DEFAULT_WORKERS", "MAX_WORKERS"]

#: LocalCluster size of ``ntpcert sweep`` when no ``--scheduler`` is given.
DEFAULT_WORKERS = 2
#: Largest LocalCluster (``--workers``): each worker is a process.
MAX_WORKERS = 256
#: The loggers of dask that report a cluster's shutdown.
_DASK_LOGGERS = ("distributed", "dask", "tornado", "asyncio")
#: Chunks queued per worker at a time.
_QUEUE_PER_WORKER = 4
#: Seconds to wait for a ``--scheduler`` address to answer.
_CONNECT_TIMEOUT_S = 30


@dataclass(frozen=True)
class SweepSummary:
    """What one call of :func:`run_sweep` did.

    Attributes
    ----------
    name : str
    store : str
    total : int
        Grid points of the spec.
    already_done : int
        Points the store held before this run.
    computed : int
        Points this run computed and committed.
    errors : int
        Of those, points whose computation failed (recorded with their error).
    skipped : int
        Grid combinations dropped by the spec (``k > V``).
    seconds : float
    executor : str
        ``"serial"`` or the dask scheduler's address.
    """

    name: str
    store: str
    total: int
    already_done: int
    computed: int
    errors: int
    skipped: int
    seconds: float
    executor: str

    @property
    def complete(self) -> bool:
        return self.already_done + self.computed == self.total

    def to_json(self, *, csv: str | None = None) -> dict[str, Any]:
        """Every field, ``complete``, and ``csv``: where the table was written (None: nowhere)."""
        return {**self.__dict__, "complete": self.complete, "csv": csv}


def _chunks(points: list[GridPoint], size: int) -> Iterator[list[GridPoint]]:
    it = iter(points)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _bar(total: int, initial: int, enabled: bool | None, desc: str):
    return progress_bar(enabled, total=total, initial=initial, desc=desc, unit="inst", dynamic_ncols=True, leave=True)


def run_sweep(
    spec: SweepSpec,
    store: str,
    *,
    client: Any = None,
    chunk_size: int = 1,
    max_in_flight: int | None = None,
    progress: bool | None = None,
) -> SweepSummary:
    """Compute the grid points of ``spec`` missing from the store at ``store``.

    Parameters
    ----------
    spec : SweepSpec
    store : str
        Path of the SQLite store (created when missing; see :class:`ResultStore`).
    client : distributed.Client, optional
        Run on this client's cluster; without one, compute in this process.
    chunk_size : int
        Grid points per task, and per store transaction.
    max_in_flight : int, optional
        Chunks queued at a time (default: 4 per worker).
    progress : bool, optional
        A tqdm bar on stderr (default: when stderr is a terminal).
    """
    check_int("--chunk-size", chunk_size, minimum=1)
    t0 = time.perf_counter()
    with ResultStore(store, spec) as db:
        done = db.done_keys()
        pending = [p for p in spec.points if p.key not in done]
        already = len(spec.points) - len(pending)
        bar = _bar(len(spec.points), already, progress, f"sweep {spec.name}")
        computed = errors = 0
        try:
            if client is None:
                finished = (compute_chunk(spec.settings, chunk) for chunk in _chunks(pending, chunk_size))
                executor = "serial"
            else:
                finished = _distributed(client, spec.settings, _chunks(pending, chunk_size), max_in_flight)
                executor = str(getattr(client.scheduler, "address", "dask"))
            for chunk in finished:
                for (point, res), new in zip(chunk, db.add_many(chunk)):
                    computed += new
                    errors += new and res["error"] is not None
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
    return SweepSummary(spec.name, store, len(spec.points), already, computed, errors, spec.skipped,
                        time.perf_counter() - t0, executor)


def _distributed(client: Any, settings: dict, chunks: Iterator[list[GridPoint]],
                 max_in_flight: int | None) -> Iterator[list[tuple[GridPoint, dict]]]:
    from distributed import as_completed

    if max_in_flight is None:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        max_in_flight = _QUEUE_PER_WORKER * n_workers
    first = [client.submit(compute_chunk, settings, c, pure=False) for c in itertools.islice(chunks, max_in_flight)]
    queue = as_completed(first)
    try:
        for fut in queue:
            out = fut.result()
            nxt = next(chunks, None)
            if nxt is not None:
                queue.add(client.submit(compute_chunk, settings, nxt, pure=False))
            yield out
    finally:
        left = list(queue.futures)  # chunks still queued when the caller stops early or fails
        if left:
            client.cancel(left)


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """While the LocalCluster starts, SIGINT is ignored, so that the worker processes spawned then
    inherit "ignore" (an ignored signal survives multiprocessing's spawn; a blocked mask or a handler
    does not): Ctrl-C, which a terminal sends to the whole process group, then reaches only this
    process, which closes the workers, instead of every worker printing its own traceback. The cost:
    a Ctrl-C during the second or two the cluster takes to start is ignored (press it again)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


@contextmanager
def _quiet_loggers() -> Iterator[None]:
    """Silence dask's loggers (a cluster closed by an interrupt reports cancelled tasks and lost
    workers, which say nothing the interrupt does not)."""
    loggers = [logging.getLogger(name) for name in _DASK_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _close_quietly(*closables: Any) -> None:
    with _quiet_loggers():
        for obj in closables:
            try:
                obj.close()
            except BaseException:  # noqa: BLE001 - an interrupt is already on its way out
                pass


@contextmanager
def dask_client(scheduler: str | None = None, *, workers: int = DEFAULT_WORKERS) -> Iterator[Any]:
    """A ``distributed.Client``: connected to ``scheduler`` when given, else to a new
    ``LocalCluster(n_workers=workers, threads_per_worker=1, processes=True)`` closed on exit.

    The LocalCluster's workers ignore SIGINT and its logs are silenced below ERROR; when the body
    is interrupted (KeyboardInterrupt) the client and cluster are closed with every dask logger
    silenced, so an interrupt ends with the caller's one line."""
    distributed = require("distributed", "dist", "ntpcert sweep on dask")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    if scheduler:
        try:
            client = Client(scheduler, timeout=_CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError, TypeError) as err:
            raise InputError(f"--scheduler: cannot connect to {scheduler!r} ({type(err).__name__}: {err})") from None
        try:
            yield client
        except KeyboardInterrupt:
            _close_quietly(client)
            raise
        finally:
            client.close()
        return
    check_int("--workers", workers, minimum=1, maximum=MAX_WORKERS)
    with _children_ignore_sigint():
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
    except BaseException:
        _close_quietly(cluster)
        raise
    try:
        yield client
    except KeyboardInterrupt:
        _close_quietly(client, cluster)
        raise
    except BaseException:
        client.close()
        cluster.close()
        raise
    client.close()
    cluster.close()
