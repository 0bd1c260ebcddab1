"""One agent per state directory: an exclusive flock on `<state_dir>/lock`.

Taken before the state file is read, so a second agent started by mistake (same
state dir, another socket) stops before it can reconcile, send updates or write
a stale state over the live agent's. The kernel drops the lock when the process
dies, even by kill -9, so a crash never leaves it behind.

The lock file is opened as root in a directory someone else might write to, so
nothing planted under its name is followed (O_NOFOLLOW) or waited on
(O_NONBLOCK): a symlink or anything but a regular file is removed and a fresh
file made. A read-only state directory (a read-only mount) does not stop the
agent: it locks the existing lock file, or the directory itself, read-only, and
says that state will not be saved.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = "lock"
_OPEN = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_READ_ONLY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# The directory cannot be written: what an agent can still lock there.
_READ_ONLY_ERRORS = (errno.EROFS, errno.EACCES, errno.EPERM)


class StateDirBusy(Exception):
    """Another live agent holds the state directory; the message names its pid."""


class StateDirLock:
    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        # True when the directory cannot be written: the agent serves without saving.
        self.read_only = False
        self._fd: int | None = None

    def acquire(self) -> None:
        """Raises StateDirBusy if another agent holds the directory, OSError if the
        directory can neither be created nor locked at all."""
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = self._open_for_writing()
        except OSError as err:
            if err.errno not in _READ_ONLY_ERRORS or not directory.is_dir():
                raise
            fd = self._open_read_only()
            self.read_only = True
            log.warning(
                "state directory %s is read-only (%s): serving without saving state; "
                "placements are rebuilt from the runtime at every start until it is writable",
                directory,
                err.strerror or err,
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StateDirBusy(
                f"{directory}: another numa-agent (pid {holder}) is using this state "
                "directory; stop it first or choose another --state-dir"
            ) from None
        if not self.read_only:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _open_for_writing(self) -> int:
        for _ in range(3):  # a replaced entry could be replaced again; then give up
            try:
                fd = os.open(self.path, _OPEN, 0o600)
            except OSError as err:
                if err.errno != errno.ELOOP:
                    raise
                self._remove("a symbolic link")
                continue
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode):
                return fd
            os.close(fd)
            self._remove(f"not a regular file (mode {mode:o})")
        raise OSError(errno.EEXIST, f"{self.path} keeps being replaced; cannot lock it")

    def _remove(self, what: str) -> None:
        """Remove a planted entry: never a live agent's lock, which is a regular file."""
        log.warning("%s is %s; removing it and making a fresh lock file", self.path, what)
        if stat.S_ISDIR(self.path.lstat().st_mode):
            self.path.rmdir()  # an empty one; anything else stays and the start fails
        else:
            self.path.unlink()

    def _open_read_only(self) -> int:
        """The existing lock file read-only (flock needs no write access), else the
        directory: the same thing every agent on this read-only directory locks."""
        try:
            fd = os.open(self.path, _OPEN_READ_ONLY)
        except OSError as err:
            if err.errno not in (errno.ENOENT, errno.ELOOP):  # missing, or a symlink
                raise
            return os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _holder(fd: int) -> str:
    """The pid the lock holder wrote, or "unknown" (a directory lock holds none)."""
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
    except OSError:
        return "unknown"
