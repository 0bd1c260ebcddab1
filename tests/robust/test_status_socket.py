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
from tests.waiting import LIMIT_S, wait_until

SILENT = 100


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


def _server_threads() -> int:
    """The status server's connection threads alive now (socketserver names them
    after process_request_thread)."""
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def _still_open(conn: socket.socket) -> bool:
    """Neither closed by the server nor answered: a read would block."""
    conn.setblocking(False)
    try:
        conn.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        conn.setblocking(True)
    return False


@pytest.mark.parametrize("send", [b"", b"GET /status HTTP/1.1\r\n"], ids=["nothing", "half"])
def test_silent_clients_neither_starve_the_status_nor_pile_up_threads(
    status_server: IntrospectServer, send: bytes
) -> None:
    held = [_connect(status_server.path, send) for _ in range(SILENT)]
    try:
        assert fetch_status(status_server.path, timeout=LIMIT_S) == {"ok": True}
        # Not starved: answered while the newest silent clients are still connected,
        # so not thanks to their timeout (a status that waited for them would find
        # them dropped).
        assert _still_open(held[-1])
        # The oldest silent clients were pushed out: they read end-of-file.
        held[0].settimeout(LIMIT_S)
        assert held[0].recv(1) == b""
        # Their threads end once they see their connection closed; at most a full
        # house stays (the newest silent ones).
        wait_until(
            lambda: _server_threads() <= introspect.MAX_CONNECTIONS,
            what=f"at most {introspect.MAX_CONNECTIONS} connection threads",
        )
    finally:
        for conn in held:
            conn.close()


def test_a_silent_client_is_dropped_after_the_timeout(status_server: IntrospectServer) -> None:
    conn = _connect(status_server.path, b"GET /sta")
    try:
        conn.settimeout(introspect.CLIENT_TIMEOUT_S + LIMIT_S)  # fails if never dropped
        began = time.monotonic()
        data = conn.recv(1)
        took = time.monotonic() - began
    finally:
        conn.close()
    assert data == b""  # closed by the server, not answered
    # Not before its timeout (a busy machine only makes it later); 1 s of slack for
    # the server's clock starting a moment before this one.
    assert took >= introspect.CLIENT_TIMEOUT_S - 1
