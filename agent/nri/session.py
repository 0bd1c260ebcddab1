"""The plugin's life on the runtime's NRI socket: connect, register, serve until
the connection drops, then connect again with back-off (the runtime configures
and synchronizes the plugin anew each time). It also sends the unsolicited
updates the agent owes (runtime.py's outbox) as UpdateContainers.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from agent.nri import methods
from agent.nri.connection import Connection, RpcError
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from proto import nri_pb2

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
REGISTER_TIMEOUT_S = 5.0
UPDATE_TIMEOUT_S = 2.0
OUTBOX_POLL_S = 0.5


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failed connections in a row."""
    if failures <= 0:
        return 0.0
    return float(min(FIRST_BACKOFF_S * 2 ** (failures - 1), MAX_BACKOFF_S))


class NriSession:
    """Keeps the plugin connected to `socket_path` until `stop`."""

    def __init__(
        self,
        socket_path: str,
        plugin_index: str,
        plugin: NriPlugin,
        runtime: NriRuntime,
        *,
        backoff_of: Callable[[int], float] = backoff,
    ) -> None:
        self.socket_path = socket_path
        self.plugin_index = plugin_index
        self._plugin = plugin
        self._runtime = runtime
        self._backoff = backoff_of
        self._stop = threading.Event()
        self._conn: Connection | None = None
        self._conn_lock = threading.Lock()
        self.connections = 0  # how many times the plugin registered
        self._threads: list[threading.Thread] = []

    @property
    def plugin(self) -> NriPlugin:
        return self._plugin

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.closed

    def start(self) -> None:
        for target, name in ((self._run, "nri-session"), (self._send_updates, "nri-updates")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        with self._conn_lock:
            conn = self._conn
        if conn is not None:
            conn.close("the agent is stopping")
        self._runtime.wake()
        for thread in self._threads:
            thread.join(timeout=5)
        if conn is not None:
            conn.join()
        self._threads = []

    # -- the connection loop --------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except (OSError, RpcError) as err:
                failures += 1
                wait = self._backoff(failures)
                log.warning(
                    "cannot plug into the runtime's NRI socket %s (%s); again in %.1fs",
                    self.socket_path,
                    err,
                    wait,
                )
                self._stop.wait(wait)
                continue
            failures = 0
            conn.wait_closed()
            if self._stop.is_set():
                return
            log.warning("NRI connection lost: %s; reconnecting", conn.close_reason)
            conn.join()
            failures = 1
            self._stop.wait(self._backoff(failures))

    def _connect(self) -> Connection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        conn = Connection(sock, self._plugin.serve)
        conn.start()
        register = nri_pb2.RegisterPluginRequest(
            plugin_name=methods.PLUGIN_NAME,
            plugin_idx=self.plugin_index,
            NRI_version=methods.PLUGIN_NRI_VERSION,
        )
        try:
            conn.call(
                methods.RUNTIME_SERVICE,
                methods.REGISTER_PLUGIN,
                register.SerializeToString(),
                REGISTER_TIMEOUT_S,
            )
        except RpcError:
            conn.close("registration failed")
            conn.join()
            raise
        with self._conn_lock:
            self._conn = conn
        self.connections += 1
        log.info(
            "registered with the runtime's NRI at %s as %s-%s",
            self.socket_path,
            self.plugin_index,
            methods.PLUGIN_NAME,
        )
        return conn

    # -- unsolicited updates --------------------------------------------------------------

    def _send_updates(self) -> None:
        while not self._stop.is_set():
            batch = self._runtime.take_outbox(OUTBOX_POLL_S)
            if not batch:
                continue
            with self._conn_lock:
                conn = self._conn
            if conn is None or conn.closed:
                log.info(
                    "%d cpuset updates dropped while not connected (the next "
                    "Synchronize works out what is owed)",
                    len(batch),
                )
                continue
            request = nri_pb2.UpdateContainersRequest(update=batch)
            try:
                raw = conn.call(
                    methods.RUNTIME_SERVICE,
                    methods.UPDATE_CONTAINERS,
                    request.SerializeToString(),
                    UPDATE_TIMEOUT_S,
                )
            except RpcError as err:
                log.warning("UpdateContainers of %d containers failed: %s", len(batch), err)
                continue
            failed = nri_pb2.UpdateContainersResponse.FromString(raw).failed
            if failed:
                log.warning(
                    "the runtime did not apply cpuset updates of %s (the reconcile retries)",
                    ", ".join(u.container_id for u in failed),
                )
