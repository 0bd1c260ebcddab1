"""The introspection endpoint: JSON over HTTP on a unix socket, mode 0600 (root only).

HTTP rather than a custom line protocol so an operator can also ask with
`curl --unix-socket PATH http://agent/status`, and rather than gRPC so the
client needs nothing generated; both ends are the standard library.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import socketserver
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from agent.fdreserve import RESERVE, out_of_descriptors
from agent.relay import listen
from agent.relay.endpoint import Endpoint

log = logging.getLogger(__name__)

STATUS_PATH = "/status"
SOCKET_MODE = 0o600
POLL_S = 0.05  # how often the serving loop looks for a stop request
# Connections served at once (a thread each). When full, the oldest is closed to make
# room: a real client asks and is answered within milliseconds, so the oldest is the
# one that connected and said nothing.
MAX_CONNECTIONS = 16
CLIENT_TIMEOUT_S = 5.0  # a client silent this long mid-request is dropped
LISTEN_BACKLOG = 128  # socketserver's default of 5 refuses the 6th quick connect
OUT_OF_DESCRIPTORS_PAUSE_S = 0.05  # between accepts while no descriptor is left

# Builds the status document; called on a server thread for every request.
StatusProvider = Callable[[], dict[str, Any]]


def status_socket_path(listen_endpoint: str) -> Path:
    """Next to the CRI socket: `numa-agent.sock` -> `numa-agent-status.sock`."""
    cri = Endpoint.parse(listen_endpoint).path
    return cri.with_name(f"{cri.stem}-status.sock")


class _Handler(BaseHTTPRequestHandler):
    server: _UnixHTTPServer
    timeout = CLIENT_TIMEOUT_S

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != STATUS_PATH:
            self._send(404, {"error": f"no such path {self.path!r}; ask {STATUS_PATH}"})
            return
        try:
            document = self.server.provider()
        except (RuntimeError, ValueError, OSError) as err:
            log.error("status request failed: %s", err)
            self._send(500, {"error": str(err)})
            return
        self._send(200, document)

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def address_string(self) -> str:
        return "local"  # unix socket peers have no address

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("status endpoint: " + format, *args)


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, path: str, provider: StatusProvider) -> None:
        self.provider = provider
        self._open: OrderedDict[int, socket.socket] = OrderedDict()
        self._lent: set[int] = set()  # connections accepted with reserve descriptors
        self._open_lock = threading.Lock()
        super().__init__(path, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        """Accept; when the process is out of descriptors (a flood on another socket),
        with two from the reserve (the connection, and the status's own reads),
        given back when the connection closes."""
        try:
            return super().get_request()
        except OSError as err:
            if not out_of_descriptors(err):
                raise
            if not RESERVE.lend(2):
                time.sleep(OUT_OF_DESCRIPTORS_PAUSE_S)  # never spin on a full table
                raise
            try:
                request, address = super().get_request()
            except OSError:
                RESERVE.refill()
                raise
            with self._open_lock:
                self._lent.add(id(request))
            return request, address

    def process_request(self, request: Any, client_address: Any) -> None:
        pushed_out: list[socket.socket] = []
        with self._open_lock:
            while len(self._open) >= MAX_CONNECTIONS:
                pushed_out.append(self._open.popitem(last=False)[1])
            self._open[id(request)] = request
        for old in pushed_out:
            log.debug("status endpoint: closing the oldest of %d open connections", MAX_CONNECTIONS)
            with contextlib.suppress(OSError):
                old.shutdown(socket.SHUT_RDWR)  # its thread reads end-of-file and ends
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went (or was pushed out) mid-answer; socketserver would print
        # a traceback to stderr.
        log.debug("status endpoint: a connection failed", exc_info=True)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(id(request), None)
            lent = id(request) in self._lent
            self._lent.discard(id(request))
        super().shutdown_request(request)
        if lent:
            RESERVE.refill()


class IntrospectServer:
    """Serves `provider()` at GET /status on `path`; start() returns once it answers."""

    def __init__(self, path: Path, provider: StatusProvider) -> None:
        self.path = path
        self._provider = provider
        self._server: _UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._inode: int | None = None

    def start(self) -> None:
        """Raises listen.SocketInUseError if an agent answers there, ListenError otherwise."""
        temp = listen.prepare(self.path)
        try:
            server = _UnixHTTPServer(str(temp), self._provider)
        except OSError as err:
            listen.discard(temp)
            raise listen.ListenError(f"{temp}: cannot bind the status socket: {err}") from err
        try:
            # Bound in a private directory: reachable by others only once it has its mode.
            self._inode = listen.publish(temp, self.path, SOCKET_MODE)
        except OSError as err:
            server.server_close()
            listen.discard(temp)
            raise listen.ListenError(
                f"{self.path}: cannot publish the status socket: {err}"
            ) from err
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(POLL_S,), name="introspect", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._inode is not None:
            listen.withdraw(self.path, self._inode)
            self._inode = None
