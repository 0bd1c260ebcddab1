"""The status socket keeps answering when clients connect and send nothing (or
half a request): it holds a bounded number of connections, pushes out the oldest
when full, and drops a client that stays silent past its timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.introspect import server as introspect
from agent.introspect.client import fetch_status
from agent.introspect.server import IntrospectServer

SILENT = 100
ANSWER_S = 5.0


@pytest.fixture
def status_server(sockdir: Path) -> Iterator[IntrospectServer]:
    server = IntrospectServer(sockdir / "status.sock", lambda: {"ok": True})
    server.start()
    yield server
    server.stop()


def _connect(path: Path, send: bytes) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    if send:
        conn.sendall(send)
    return conn


@pytest.mark.parametrize("send", [b"", b"GET /status HTTP/1.1\r\n"], ids=["nothing", "half"])
def test_silent_clients_neither_starve_the_status_nor_pile_up_threads(
    status_server: IntrospectServer, send: bytes
) -> None:
    baseline = threading.active_count()
    held = [_connect(status_server.path, send) for _ in range(SILENT)]
    try:
        began = time.monotonic()
        assert fetch_status(status_server.path, timeout=ANSWER_S) == {"ok": True}
        assert time.monotonic() - began < ANSWER_S
        assert threading.active_count() - baseline <= introspect.MAX_CONNECTIONS + 1
        # The oldest silent clients were pushed out: they read end-of-file.
        held[0].settimeout(ANSWER_S)
        assert held[0].recv(1) == b""
    finally:
        for conn in held:
            conn.close()


def test_a_silent_client_is_dropped_after_the_timeout(status_server: IntrospectServer) -> None:
    conn = _connect(status_server.path, b"GET /sta")
    try:
        conn.settimeout(introspect.CLIENT_TIMEOUT_S + ANSWER_S)
        began = time.monotonic()
        data = conn.recv(1)
        took = time.monotonic() - began
    finally:
        conn.close()
    assert data == b""  # closed by the server, not answered
    assert introspect.CLIENT_TIMEOUT_S - 1 <= took < introspect.CLIENT_TIMEOUT_S + ANSWER_S
