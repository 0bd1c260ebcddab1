"""Descriptors held in reserve, for the state file and the status socket.

A flood of connections can take every descriptor the process may open; then the
state could not be written (and every call needing a new record would be
refused) and the status socket could not even accept. So the daemon holds a few
descriptors open on /dev/null from its start; code that must work in a flood
gives some back to the kernel just before it opens what it needs (`spare`), or
for as long as a connection lasts (`lend` / `refill`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)

OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
DEFAULT_RESERVE = 16


def out_of_descriptors(err: BaseException | None) -> bool:
    """Whether `err` (or what caused it) is the process or system running out of descriptors."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in OUT_OF_DESCRIPTORS:
            return True
        err = err.__cause__
    return False


class FdReserve:
    def __init__(self) -> None:
        self._fds: list[int] = []
        self._wanted = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return len(self._fds)

    def fill(self, count: int = DEFAULT_RESERVE) -> None:
        """Hold up to `count` descriptors (as many as can be opened now)."""
        with self._lock:
            self._wanted = count
            self._open_locked()

    def _open_locked(self) -> None:
        while len(self._fds) < self._wanted:
            try:
                self._fds.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                return  # taken meanwhile; refilled later

    def lend(self, count: int) -> int:
        """Give `count` descriptors back to the kernel; returns how many there were."""
        with self._lock:
            lent = 0
            while self._fds and lent < count:
                os.close(self._fds.pop())
                lent += 1
            return lent

    def refill(self) -> None:
        """Take back what was lent, as far as the kernel allows now."""
        with self._lock:
            self._open_locked()

    @contextlib.contextmanager
    def spare(self, count: int = 2) -> Iterator[int]:
        """`count` descriptors free for the duration (as many as were held)."""
        lent = self.lend(count)
        try:
            yield lent
        finally:
            self.refill()

    def release_all(self) -> None:
        with self._lock:
            self._wanted = 0
            while self._fds:
                os.close(self._fds.pop())


# The process's one reserve: filled by the daemon at start, empty elsewhere (tests).
RESERVE = FdReserve()
