"""The sockets on disk under a careless umask (000): the socket directory, the CRI
socket and the status socket have their final modes from the first moment, and
the socket a server is bound to is never reachable by other users before it
has its mode and name."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.introspect.server import IntrospectServer
from agent.relay import listen
from agent.relay.server import RelayServer
from agent.runtime.memory import MemoryRuntime


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def others_can_connect(sock: Path, top: Path) -> bool:
    """Whether a user who is neither owner nor in the group could connect to `sock`:
    write permission on the socket and search permission on every directory from
    `top` (a directory the test made private) down to it."""
    if not stat.S_IMODE(sock.stat().st_mode) & stat.S_IWOTH:
        return False
    here = sock.parent
    while True:
        if not stat.S_IMODE(here.stat().st_mode) & stat.S_IXOTH:
            return False
        if here == top:
            return True
        here = here.parent


def others_can_write(directory: Path) -> bool:
    return bool(stat.S_IMODE(directory.stat().st_mode) & stat.S_IWOTH)


@pytest.fixture
def reachable_while_bound(monkeypatch: pytest.MonkeyPatch, sockdir: Path) -> list[bool]:
    """Whether other users could connect to each socket a server published, checked
    just before it got its mode and final name (the moment of the old leak)."""
    os.chmod(sockdir, 0o755)  # only what the agent creates below it is under test
    seen: list[bool] = []
    real = listen.publish

    def check_then_publish(temp: Path, path: Path, *args: Any, **kwargs: Any) -> int:
        seen.append(others_can_connect(temp, sockdir))
        return real(temp, path, *args, **kwargs)

    monkeypatch.setattr(listen, "publish", check_then_publish)
    return seen


def test_cri_socket_and_its_directory_under_umask_000(
    sockdir: Path,
    memory_runtime: tuple[Path, MemoryRuntime],
    umask_000: None,
    reachable_while_bound: list[bool],
) -> None:
    path = sockdir / "run" / "numa-agent" / "numa-agent.sock"
    relay = RelayServer(str(path), f"unix://{memory_runtime[0]}")
    relay.start()
    try:
        assert reachable_while_bound == [False]
        for directory in (path.parent, path.parent.parent):
            assert stat.S_IMODE(directory.stat().st_mode) == listen.SOCKET_DIR_MODE, directory
        assert stat.S_IMODE(path.stat().st_mode) == listen.SOCKET_MODE
        assert sorted(p.name for p in path.parent.iterdir()) == ["numa-agent.sock"]
    finally:
        relay.stop(0)


def test_status_socket_under_umask_000(
    sockdir: Path, umask_000: None, reachable_while_bound: list[bool]
) -> None:
    path = sockdir / "numa-agent" / "numa-agent-status.sock"
    server = IntrospectServer(path, lambda: {"ok": True})
    server.start()
    try:
        assert reachable_while_bound == [False]
        assert stat.S_IMODE(path.parent.stat().st_mode) == listen.SOCKET_DIR_MODE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    finally:
        server.stop()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_socket_directory_mode_does_not_depend_on_the_umask(sockdir: Path, umask: int) -> None:
    """Too wide lets others replace the socket; too narrow (umask 077) would lock
    out the socket group, which needs to search the directory to connect."""
    path = sockdir / "a" / "b" / "agent.sock"
    old = os.umask(umask)
    try:
        temp = listen.prepare(path)
    finally:
        os.umask(old)
    try:
        for directory in (path.parent, path.parent.parent):
            assert stat.S_IMODE(directory.stat().st_mode) == listen.SOCKET_DIR_MODE, oct(umask)
        assert not others_can_write(temp.parent)
    finally:
        listen.discard(temp)
    assert sorted(p.name for p in path.parent.iterdir()) == []
