"""Serving the metrics registry over HTTP (Prometheus text format) on host:port."""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

# How often the serving loop looks for a stop request: bounds how long stop() takes.
POLL_S = 0.05


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


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


class MetricsServer:
    """`/metrics` of `registry` on `address`, served by a thread until stop()."""

    def __init__(self, address: str, registry: CollectorRegistry) -> None:
        host, port = split_address(address)
        server_class = _V6Server if ":" in host else _Server
        try:
            self._server = make_server(
                host, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler
            )
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
