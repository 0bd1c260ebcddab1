"""Serving the metrics registry over HTTP (Prometheus text format) on host:port."""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server


class MetricsServerError(Exception):
    """The metrics endpoint cannot be served; the message names the address."""


def split_address(address: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise MetricsServerError(f"metrics address {address!r} is not host:port")
    return host.strip("[]"), int(port)


class MetricsServer:
    """prometheus_client's threaded WSGI server, stoppable (tests start many)."""

    def __init__(self, address: str, registry: CollectorRegistry) -> None:
        host, port = split_address(address)
        try:
            server, thread = start_http_server(port, host, registry=registry)
        except OSError as err:
            raise MetricsServerError(
                f"cannot serve metrics on {address}: {err.strerror or err}"
            ) from err
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
