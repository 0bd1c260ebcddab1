"""Serving the metrics registry over HTTP (Prometheus text format) on host:port, and
next to it pages for people (the machine map at /machine), built fresh per request."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

MACHINE_PATH = "/machine"

# Builds one HTML page; called on a server thread for every request. RuntimeError
# (the agent is starting or stopping) and ValueError (it cannot be drawn) become 503.
PageProvider = Callable[[], str]
_StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_WSGIApp = Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]

# How often the serving loop looks for a stop request: bounds how long stop() takes.
POLL_S = 0.05
# A caller that sends nothing is dropped after this long, and at most this many
# connections are served at once (others are closed at once): a flood of silent
# connections costs a bounded number of threads, for a bounded time.
CLIENT_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64
# A whole request (reading it and sending the answer) must be done within this:
# a client that sends one byte every few seconds never trips CLIENT_TIMEOUT_S,
# which bounds each receive, but is cut off here and frees its slot.
REQUEST_DEADLINE_S = 10.0


class MetricsServerError(Exception):
    """The metrics endpoint cannot be served; the message names the address."""


def split_address(address: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise MetricsServerError(f"metrics address {address!r} is not host:port")
    return host.strip("[]"), int(port)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    max_connections = MAX_CONNECTIONS

    def server_activate(self) -> None:
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: close it now rather than queue it
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    timeout = CLIENT_TIMEOUT_S  # socketserver sets it on the connection
    deadline_s = REQUEST_DEADLINE_S

    def setup(self) -> None:
        super().setup()
        # One deadline for the connection's whole request: when it passes the socket
        # is shut down, so whatever read or write is in progress ends at once.
        self._deadline = threading.Timer(self.deadline_s, self._cut_off)
        self._deadline.daemon = True
        self._deadline.start()

    def _cut_off(self) -> None:
        log.debug("metrics: a request took more than %.0fs; closing it", self.deadline_s)
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._deadline.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


def _with_pages(metrics: _WSGIApp, pages: Mapping[str, PageProvider]) -> _WSGIApp:
    """`pages` by exact path, everything else to the Prometheus app."""

    def app(environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        provider = pages.get(environ.get("PATH_INFO", ""))
        if provider is None:
            return metrics(environ, start_response)
        try:
            body = provider().encode()
            status, kind = "200 OK", "text/html; charset=utf-8"
        except (RuntimeError, ValueError) as err:
            log.warning("%s: %s", environ.get("PATH_INFO"), err)
            body = f"{err}\n".encode()
            status, kind = "503 Service Unavailable", "text/plain; charset=utf-8"
        start_response(
            status,
            [
                ("Content-Type", kind),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),  # a reload shows the agent as it is now
            ],
        )
        return [body]

    return app


class MetricsServer:
    """`/metrics` of `registry` on `address`, and each of `pages` (path -> page
    provider) at its path, served by a thread until stop()."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        pages: Mapping[str, PageProvider] | None = None,
    ) -> None:
        host, port = split_address(address)
        server_class = _V6Server if ":" in host else _Server
        app = _with_pages(make_wsgi_app(registry), dict(pages or {}))
        try:
            self._server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
        except OSError as err:
            raise MetricsServerError(
                f"cannot serve metrics on {address}: {err.strerror or err}"
            ) from err
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_S,), name="metrics", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
