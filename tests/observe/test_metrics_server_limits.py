"""The metrics endpoint under a flood of connections that send nothing: at most
MAX_CONNECTIONS are served at once (the rest are closed at once), each silent one
is dropped after CLIENT_TIMEOUT_S, and then /metrics answers again."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from agent.observe import server as metrics_server
from agent.observe.server import MetricsServer
from tests.waiting import LIMIT_S, wait_until


def _scraped(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=LIMIT_S) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def test_silent_connections_are_bounded_and_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_server._QuietHandler, "timeout", 0.5)
    monkeypatch.setattr(metrics_server._Server, "max_connections", 8)
    served = MetricsServer("127.0.0.1:0", CollectorRegistry())
    host, port = served.address
    silent = []
    try:
        before = threading.active_count()
        for _ in range(30):
            conn = socket.create_connection((host, port))
            silent.append(conn)
        # Connections past the cap are closed by the server at once: reads see EOF.
        closed = 0
        for conn in silent[8:]:
            conn.settimeout(2)
            try:
                closed += conn.recv(1) == b""
            except (ConnectionResetError, TimeoutError):
                closed += 1
        assert closed == 22
        # A connection's thread gives its slot back a moment before it ends: wait for
        # the count to settle rather than read it at one instant.
        wait_until(lambda: threading.active_count() - before <= 8, what="at most 8 threads")
        # Once the silent ones time out, a scrape answers.
        wait_until(lambda: _scraped(host, port), what="/metrics to answer again")
    finally:
        for conn in silent:
            conn.close()
        served.stop()


def test_a_slow_client_is_cut_off_by_the_request_deadline_not_the_receive_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Clients sending one header byte at a time, each within the receive timeout,
    held every slot forever; the deadline per request frees them."""
    monkeypatch.setattr(metrics_server._QuietHandler, "timeout", 5.0)
    monkeypatch.setattr(metrics_server._QuietHandler, "deadline_s", 1.0)
    monkeypatch.setattr(metrics_server._Server, "max_connections", 4)
    served = MetricsServer("127.0.0.1:0", CollectorRegistry())
    host, port = served.address
    slow = [socket.create_connection((host, port)) for _ in range(4)]
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.2):  # a byte every 0.2 s: never 5 s of silence
            for conn in slow:
                with contextlib.suppress(OSError):
                    conn.send(b"G")

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        # Each slow one is closed by the server (EOF or reset), long before the 10 s
        # this read waits: without the deadline it would wait all of them.
        for conn in slow:
            conn.settimeout(10)
            try:
                data = conn.recv(1024)
            except ConnectionResetError:
                data = b""
            assert data == b""
        # A slot is free once its handler thread has finished, a moment after the
        # client sees the close: until then a new connection is turned away.
        wait_until(lambda: _scrape(host, port) == 200, what="a scrape after the slow ones left")
    finally:
        stop.set()
        feeder.join(5)
        for conn in slow:
            conn.close()
        served.stop()


def _scrape(host: str, port: int) -> int:
    """The status of one scrape, 0 when the server turned the connection away."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as reply:
            return int(reply.status)
    except (OSError, http.client.HTTPException):
        return 0
