"""sd_notify: the datagram systemd's Type=notify waits for."""

from __future__ import annotations

import socket
from pathlib import Path

from agent.sdnotify import notify


def test_ready_reaches_the_notify_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(5)
        assert notify("READY=1", {"NOTIFY_SOCKET": str(path)}) is True
        assert server.recv(64) == b"READY=1"


def test_abstract_socket_address() -> None:
    name = f"numa-agent-test-{id(object())}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        assert notify("STOPPING=1", {"NOTIFY_SOCKET": "@" + name}) is True
        assert server.recv(64) == b"STOPPING=1"


def test_without_systemd_it_does_nothing() -> None:
    assert notify("READY=1", {}) is False
