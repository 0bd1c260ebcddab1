"""The relay's worker threads: started when a call finds none idle, retired after
a while without work, never more than `max_threads`.

A fixed pool is what let 64 held calls starve everyone: the 65th call queued
behind them. Here a call gets a thread at once while fewer than `max_threads`
are busy, and the server refuses calls beyond that (grpc's
maximum_concurrent_rpcs, set to the same number), so nothing ever queues. Idle
threads cost nothing but memory; those beyond `keep` exit after `idle_s`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

_Work = tuple[futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ElasticExecutor(futures.Executor):
    def __init__(
        self, max_threads: int, *, keep: int = 4, idle_s: float = 30.0, name: str = "relay"
    ) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self._keep = keep
        self._idle_s = idle_s
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        # One token per idle thread not yet promised to a submitted item.
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        self._started = 0
        self._shutdown = False

    @property
    def threads(self) -> int:
        """Threads alive now (busy or idle)."""
        return self._threads

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        future: futures.Future[Any] = futures.Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit work after shutdown")
            self._work.put((future, fn, args, kwargs))
            if self._idle.acquire(blocking=False):
                return future  # an idle thread will take it
            if self._threads < self.max_threads:
                self._threads += 1
                self._started += 1
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-{self._started}", daemon=True
                )
                thread.start()
            # else: every thread is busy; the item waits for the first one done.
        return future

    def _run(self) -> None:
        while True:
            try:
                item = self._work.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    # Retire only if no submitter has counted on this thread meanwhile
                    # (it took an idle token: then an item is on its way).
                    if self._threads > self._keep and self._idle.acquire(blocking=False):
                        self._threads -= 1
                        return
                continue
            if item is None:  # shutdown
                with self._lock:
                    self._threads -= 1
                return
            _execute(item)
            del item  # an idle thread keeps no reference to its last call
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Idle threads exit; busy ones after their current item. `wait` is not
        honoured beyond that: the threads are daemons and the server has already
        cancelled its calls."""
        with self._lock:
            self._shutdown = True
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)


def _execute(item: _Work) -> None:
    future, fn, args, kwargs = item
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as err:
        future.set_exception(err)
    else:
        future.set_result(result)
