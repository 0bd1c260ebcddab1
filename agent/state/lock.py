"""One agent per state directory: an exclusive flock on `<state_dir>/lock`.

Taken before the state file is read, so a second agent started by mistake (same
state dir, another socket) stops before it can reconcile, send updates or write
a stale state over the live agent's. The kernel drops the lock when the process
dies, even by kill -9, so a crash never leaves it behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class StateDirBusy(Exception):
    """Another live agent holds the state directory; the message names its pid."""


class StateDirLock:
    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / "lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateDirBusy(
                f"{self.path.parent}: another numa-agent (pid {holder}) is using this state "
                "directory; stop it first or choose another --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
