"""One NRI connection: a unix socket, multiplexed (mux.py), with a ttrpc server on
the plugin's logical connection and a ttrpc client on the runtime's (ttrpc.py).

A reader thread turns frames into messages; requests from the runtime are
handled one at a time, in arrival order, by one worker thread (the runtime
waits for each answer anyway, and the node agent decides under one lock);
calls to the runtime wait for their response by stream id. Anything not NRI's
framing closes the connection, with the reason kept for the log.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from agent.nri import mux, ttrpc
from proto import ttrpc_pb2

log = logging.getLogger(__name__)

RECV_BYTES = 1 << 16


class RpcError(Exception):
    """A ttrpc call ended with a status other than OK (or could not be made)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


class ConnectionClosed(RpcError):
    def __init__(self, reason: str) -> None:
        super().__init__(ttrpc.UNAVAILABLE, f"NRI connection closed: {reason}")


# (service, method, request payload) -> reply payload; raises RpcError to refuse.
Serve = Callable[[str, str, bytes], bytes]


@dataclass(slots=True)
class _Call:
    done: threading.Event
    response: ttrpc_pb2.Response | None = None


class Connection:
    """Serves `serve` to the runtime and calls the runtime, over one connected socket."""

    def __init__(
        self,
        sock: socket.socket,
        serve: Serve,
        *,
        max_payload: int = mux.MAX_PAYLOAD,
        max_message: int = ttrpc.MAX_MESSAGE,
        serve_on: int = mux.PLUGIN_SERVICE_CONN,
        call_on: int = mux.RUNTIME_SERVICE_CONN,
    ) -> None:
        # The runtime's side is the mirror image (serve_on=2, call_on=1): the
        # runtime stand-in in devtools/ uses this class that way.
        self._serve_on, self._call_on = serve_on, call_on
        self._sock = sock
        self._serve = serve
        self._write_lock = threading.Lock()
        self._deframer = mux.Deframer(max_payload)
        self._readers = {serve_on: ttrpc.Reader(max_message), call_on: ttrpc.Reader(max_message)}
        self._calls: dict[int, _Call] = {}
        self._calls_lock = threading.Lock()
        self._next_stream = 1  # a ttrpc client's stream ids are odd
        self._requests: queue.Queue[ttrpc.Message | None] = queue.Queue()
        self._closed = threading.Event()
        self.close_reason = ""
        self._reader = threading.Thread(target=self._read_loop, name="nri-read", daemon=True)
        self._worker = threading.Thread(target=self._work_loop, name="nri-serve", daemon=True)

    def start(self) -> None:
        self._reader.start()
        self._worker.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._closed.wait(timeout)

    def close(self, reason: str = "closed by the plugin") -> None:
        if self._closed.is_set():
            return
        self.close_reason = self.close_reason or reason
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._requests.put(None)
        with self._calls_lock:
            calls, self._calls = self._calls, {}
        for call in calls.values():
            call.done.set()

    def join(self, timeout: float = 5.0) -> None:
        for thread in (self._reader, self._worker):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout)

    # -- calls to the runtime ---------------------------------------------------

    def call(self, service: str, method: str, payload: bytes, timeout: float) -> bytes:
        """One unary ttrpc call to the peer's service; RpcError unless OK."""
        with self._calls_lock:
            if self._closed.is_set():
                raise ConnectionClosed(self.close_reason)
            stream_id = self._next_stream
            self._next_stream += 2
            call = _Call(threading.Event())
            self._calls[stream_id] = call
        request = ttrpc_pb2.Request(
            service=service, method=method, payload=payload, timeout_nano=int(timeout * 1e9)
        )
        try:
            self._send(
                self._call_on,
                ttrpc.encode(stream_id, ttrpc.TYPE_REQUEST, request.SerializeToString()),
            )
            if not call.done.wait(timeout):
                raise RpcError(
                    ttrpc.DEADLINE_EXCEEDED, f"{service}/{method}: no answer in {timeout:.1f}s"
                )
        finally:
            with self._calls_lock:
                self._calls.pop(stream_id, None)
        response = call.response
        if response is None:
            raise ConnectionClosed(self.close_reason)
        if response.status.code != ttrpc.OK:
            raise RpcError(response.status.code, f"{method}: {response.status.message}")
        return response.payload

    # -- the socket ---------------------------------------------------------------

    def _send(self, conn_id: int, data: bytes) -> None:
        frames = mux.encode(conn_id, data)
        with self._write_lock:
            try:
                self._sock.sendall(frames)
            except OSError as err:
                self.close(f"write failed: {err}")
                raise ConnectionClosed(self.close_reason) from err

    def _read_loop(self) -> None:
        try:
            while not self._closed.is_set():
                try:
                    data = self._sock.recv(RECV_BYTES)
                except OSError as err:
                    self.close(f"read failed: {err}")
                    return
                if not data:
                    self._deframer.check_eof()
                    cut = [str(cid) for cid, r in self._readers.items() if r.pending()]
                    inside = (
                        f" inside a ttrpc message on connection {', '.join(cut)}" if cut else ""
                    )
                    self.close(f"the peer closed the connection{inside}")
                    return
                for frame in self._deframer.feed(data):
                    self._on_frame(frame)
        except (mux.MuxError, ttrpc.TtrpcError) as err:
            self.close(str(err))

    def _on_frame(self, frame: mux.Frame) -> None:
        reader = self._readers.get(frame.conn_id)
        if reader is None:
            log.warning("NRI frame for unknown connection %d dropped", frame.conn_id)
            return
        for item in reader.feed(frame.payload):
            if isinstance(item, ttrpc.Oversize):
                log.warning(
                    "NRI message of %d bytes on connection %d (stream %d) skipped: over %d",
                    item.length,
                    frame.conn_id,
                    item.stream_id,
                    ttrpc.MAX_MESSAGE,
                )
                if frame.conn_id == self._serve_on and item.type == ttrpc.TYPE_REQUEST:
                    self._answer(
                        item.stream_id,
                        ttrpc.RESOURCE_EXHAUSTED,
                        f"message of {item.length} bytes exceeds the limit",
                    )
                elif frame.conn_id == self._call_on:
                    self._finish(
                        item.stream_id,
                        _status(ttrpc.RESOURCE_EXHAUSTED, f"response of {item.length} bytes"),
                    )
            elif frame.conn_id == self._serve_on and item.type == ttrpc.TYPE_REQUEST:
                self._requests.put(item)
            elif frame.conn_id == self._call_on and item.type == ttrpc.TYPE_RESPONSE:
                try:
                    response = ttrpc_pb2.Response.FromString(item.payload)
                except Exception as err:  # protobuf's DecodeError and friends
                    response = _status(ttrpc.INTERNAL, f"undecodable response: {err}")
                self._finish(item.stream_id, response)
            else:
                log.warning(
                    "NRI message of type %d on connection %d (stream %d) ignored",
                    item.type,
                    frame.conn_id,
                    item.stream_id,
                )

    def _finish(self, stream_id: int, response: ttrpc_pb2.Response) -> None:
        with self._calls_lock:
            call = self._calls.get(stream_id)
        if call is None:
            log.warning("NRI response for unknown stream %d dropped", stream_id)
            return
        call.response = response
        call.done.set()

    # -- serving the runtime --------------------------------------------------------

    def _work_loop(self) -> None:
        while True:
            item = self._requests.get()
            if item is None or self._closed.is_set():
                return
            self._handle(item)

    def _handle(self, message: ttrpc.Message) -> None:
        try:
            request = ttrpc_pb2.Request.FromString(message.payload)
        except Exception as err:  # protobuf's DecodeError and friends
            self._answer(message.stream_id, ttrpc.INVALID_ARGUMENT, f"undecodable request: {err}")
            return
        try:
            payload = self._serve(request.service, request.method, request.payload)
        except RpcError as err:
            self._answer(message.stream_id, err.code, err.message)
            return
        except Exception as err:  # a bug must not take the runtime's connection down
            log.exception("NRI %s/%s failed", request.service, request.method)
            self._answer(message.stream_id, ttrpc.INTERNAL, f"{type(err).__name__}: {err}")
            return
        self._respond(message.stream_id, ttrpc_pb2.Response(payload=payload))

    def _answer(self, stream_id: int, code: int, text: str) -> None:
        self._respond(stream_id, _status(code, text))

    def _respond(self, stream_id: int, response: ttrpc_pb2.Response) -> None:
        data = response.SerializeToString()
        if len(data) > ttrpc.MAX_MESSAGE:
            data = _status(
                ttrpc.RESOURCE_EXHAUSTED, f"reply of {len(data)} bytes"
            ).SerializeToString()
        with contextlib.suppress(ConnectionClosed):  # the reader logs why
            self._send(self._serve_on, ttrpc.encode(stream_id, ttrpc.TYPE_RESPONSE, data))


def _status(code: int, text: str) -> ttrpc_pb2.Response:
    return ttrpc_pb2.Response(status=ttrpc_pb2.Status(code=code, message=text))
