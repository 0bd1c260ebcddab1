"""The agent's listening sockets on disk: refuse a live one, replace a stale one,
and make each socket appear under its name only once it serves, with its mode.

Nothing here depends on the umask: the socket directory gets SOCKET_DIR_MODE
exactly, and a server binds inside a private 0700 directory, so the socket it
binds (mode 0777 under umask 000) is unreachable by others until `publish` has
given it its mode and moved it to its name.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

from agent.relay.endpoint import probe

log = logging.getLogger(__name__)

SOCKET_MODE = 0o660
# Others need search permission to reach the socket (its own mode decides who may
# connect); nobody but root may add, remove or rename entries.
SOCKET_DIR_MODE = 0o755
PRIVATE_DIR_MODE = 0o700
# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107
BOUND_NAME = "s"  # the socket's name inside the private directory: short, for sun_path


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


def make_socket_dir(directory: Path) -> None:
    """Create `directory` (and missing parents) with mode SOCKET_DIR_MODE whatever the
    umask; an existing one is left as it is, with a warning if others can write it."""
    missing: list[Path] = []
    here = directory
    while not here.exists():
        missing.append(here)
        here = here.parent
    for new in reversed(missing):
        try:
            # mkdir's mode is only narrowed by the umask, never widened; chmod then
            # sets it exactly (a umask of 077 would lock the socket group out).
            os.mkdir(new, SOCKET_DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by someone else: treated as existing
        os.chmod(new, SOCKET_DIR_MODE)
    st = directory.stat()
    if stat.S_IMODE(st.st_mode) & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        log.warning(
            "socket directory %s is writable by every user (mode %o): anyone could "
            "replace the agent's socket; make it %o (chmod %o %s)",
            directory,
            stat.S_IMODE(st.st_mode),
            SOCKET_DIR_MODE,
            SOCKET_DIR_MODE,
            directory,
        )


def prepare(path: Path) -> Path:
    """Check `path` can be ours and return the path to bind: inside a new private
    (0700) directory next to it, removed again by `publish` or `discard`.

    A stale socket is left in place: `publish` replaces it atomically.
    """
    if len(os.fsencode(path.absolute())) > MAX_SOCKET_PATH:
        raise ListenError(f"{path}: socket path longer than {MAX_SOCKET_PATH} bytes")
    try:
        make_socket_dir(path.parent)
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
    private = path.with_name(f".{path.name}.{os.getpid()}")
    temp = private / BOUND_NAME
    if len(os.fsencode(temp.absolute())) > MAX_SOCKET_PATH:
        raise ListenError(f"{temp}: temporary socket path longer than {MAX_SOCKET_PATH} bytes")
    _remove_private(private)  # left by an earlier process with our pid
    try:
        os.mkdir(private, PRIVATE_DIR_MODE)
    except OSError as err:
        raise ListenError(
            f"{private}: cannot create a private directory to bind in: {err}"
        ) from err
    return temp


def publish(temp: Path, path: Path, mode: int = SOCKET_MODE) -> int:
    """Give the bound socket `mode` and its final name, remove the private directory;
    returns the socket's inode so that `withdraw` removes only our own socket."""
    os.chmod(temp, mode)
    os.replace(temp, path)
    os.rmdir(temp.parent)
    return path.lstat().st_ino


def discard(temp: Path) -> None:
    """Undo `prepare` when the socket is not published after all."""
    _remove_private(temp.parent)


def withdraw(path: Path, inode: int) -> None:
    """Remove the socket file if it is still the one `publish` put there."""
    try:
        if path.lstat().st_ino == inode:
            path.unlink()
    except FileNotFoundError:
        pass


def _remove_private(private: Path) -> None:
    try:
        mode = private.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(private, ignore_errors=True)
    else:
        private.unlink(missing_ok=True)
