"""The agent's listening socket on disk: refuse a live one, replace a stale
one, and make the socket appear (mode 0660) only once it is ready to serve."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent.relay.endpoint import probe

SOCKET_MODE = 0o660
# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


class ListenError(Exception):
    """The listen socket cannot be set up; the message names the path."""


class SocketInUseError(ListenError):
    """Another process is serving on the socket path."""


def is_live(path: Path) -> bool:
    """Whether something accepts connections on the unix socket `path`."""
    err = probe(path)
    if err is None:
        return True
    if isinstance(err, ConnectionRefusedError | FileNotFoundError):
        return False
    raise ListenError(f"{path}: cannot tell whether an agent serves there: {err}")


def ensure_free(path: Path) -> None:
    """SocketInUseError when a live server already owns `path` (a stale file is fine)."""
    if is_live(path):
        raise SocketInUseError(
            f"{path}: another agent (or runtime) is already serving on this socket; "
            "stop it first or choose another --listen path"
        )


def prepare(path: Path) -> Path:
    """Check `path` can be ours and return the temporary name to bind first.

    A stale socket is left in place: `publish` replaces it atomically.
    """
    if len(os.fsencode(path.absolute())) > MAX_SOCKET_PATH:
        raise ListenError(f"{path}: socket path longer than {MAX_SOCKET_PATH} bytes")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ListenError(f"{path.parent}: cannot create the socket directory: {err}") from err
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        if not stat.S_ISSOCK(mode):
            raise ListenError(
                f"{path}: exists and is not a socket; remove it or choose another path"
            )
        ensure_free(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    if len(os.fsencode(temp.absolute())) > MAX_SOCKET_PATH:
        raise ListenError(f"{temp}: temporary socket path longer than {MAX_SOCKET_PATH} bytes")
    temp.unlink(missing_ok=True)
    return temp


def publish(temp: Path, path: Path) -> int:
    """Give the bound socket its mode and final name; returns its inode so that
    `withdraw` removes only our own socket."""
    os.chmod(temp, SOCKET_MODE)
    os.replace(temp, path)
    return path.lstat().st_ino


def withdraw(path: Path, inode: int) -> None:
    """Remove the socket file if it is still the one `publish` put there."""
    try:
        if path.lstat().st_ino == inode:
            path.unlink()
    except FileNotFoundError:
        pass
