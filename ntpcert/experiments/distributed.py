"""Work items of one command spread over dask worker processes: a ``map_chunks`` for the library's
long loops (a model's forward passes, :func:`ntpcert.instance.lm.capture.capture`).

A :class:`DaskChunks` submits every item to a ``distributed.Client`` (:func:`ntpcert.experiments.sweep.dask_client`:
a LocalCluster of ``--workers`` processes or a running ``--scheduler``) and yields the results as they
finish. The caller places each result by what it carries, never by arrival order, so the outcome does not
depend on which worker ran what. A worker that dies takes its running items with it; the scheduler gives
them to another worker (dask's ``allowed-failures``, 3 by default), and the run completes with the same
result. An item that raises raises here, with its own message.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Iterator

from ntpcert.util.progress import progress_bar

__all__ = ["DaskChunks", "SCHEDULER_ADDRESS", "check_scheduler"]

#: ``--scheduler``: ``[PROTOCOL://]HOST:PORT`` (what a dask scheduler prints as its address).
SCHEDULER_ADDRESS = re.compile(r"^(?:(tcp|tls|ws|wss|ucx|inproc)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")


def check_scheduler(address: str) -> str:
    """Refuse a ``--scheduler`` that is not ``[PROTOCOL://]HOST:PORT`` (before connecting)."""
    from ntpcert.errors import InputError

    m = SCHEDULER_ADDRESS.match(address.strip())
    if m is None or not 1 <= int(m.group(3)) <= 65535:
        raise InputError(f"--scheduler: value {address!r} is not an address PROTOCOL://HOST:PORT "
                         "(such as tcp://127.0.0.1:8786)")
    return address.strip()



class DaskChunks:
    """``map_chunks(fn, items)``: ``fn(*item)`` for every item on the client's workers, results as they finish.

    Parameters
    ----------
    client : distributed.Client
    progress : bool or None
        A progress bar over the items (None: when stderr is a terminal).
    on_result : callable, optional
        Called with the number of results so far after each one (tests use it to kill a worker mid-run).
    """

    def __init__(self, client: Any, *, progress: bool | None = None, on_result: Callable[[int], None] | None = None,
                 desc: str = "forward passes") -> None:
        self.client, self.progress, self.on_result, self.desc = client, progress, on_result, desc

    def __call__(self, fn: Callable[..., Any], items: Iterable[tuple]) -> Iterator[Any]:
        from distributed import as_completed

        futures = [self.client.submit(fn, *item, pure=False) for item in items]
        bar = progress_bar(self.progress, total=len(futures), desc=self.desc, unit="batch")
        done = 0
        try:
            for fut in as_completed(futures):
                out = fut.result()
                done += 1
                bar.update(1)
                if self.on_result is not None:
                    self.on_result(done)
                yield out
        finally:
            bar.close()
            left = [f for f in futures if not f.done()]
            if left:
                self.client.cancel(left)
