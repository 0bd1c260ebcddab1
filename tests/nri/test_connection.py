"""The plugin's connection against a raw peer on a real socket pair: the peer
writes bytes exactly as it likes (interleaved, unknown, oversize, cut short) and
reads what the connection answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from agent.nri import mux, ttrpc
from agent.nri.connection import Connection, ConnectionClosed, RpcError
from proto import ttrpc_pb2


class Peer:
    """The runtime's end, byte by byte."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(10)
        self._deframer = mux.Deframer()
        self._readers = {1: ttrpc.Reader(), 2: ttrpc.Reader()}
        self._queue: list[tuple[int, ttrpc.Message | ttrpc.Oversize]] = []

    def request(self, stream: int, method: str, payload: bytes = b"") -> bytes:
        body = ttrpc_pb2.Request(service="svc", method=method, payload=payload)
        return mux.encode(1, ttrpc.encode(stream, ttrpc.TYPE_REQUEST, body.SerializeToString()))

    def next(self) -> tuple[int, ttrpc.Message | ttrpc.Oversize]:
        while not self._queue:
            data = self.sock.recv(65536)
            assert data, "the connection closed"
            for frame in self._deframer.feed(data):
                for item in self._readers[frame.conn_id].feed(frame.payload):
                    self._queue.append((frame.conn_id, item))
        return self._queue.pop(0)

    def response(self) -> tuple[int, ttrpc_pb2.Response]:
        conn_id, item = self.next()
        assert conn_id == 1 and isinstance(item, ttrpc.Message)
        assert item.type == ttrpc.TYPE_RESPONSE
        return item.stream_id, ttrpc_pb2.Response.FromString(item.payload)


def echo(service: str, method: str, payload: bytes) -> bytes:
    if method == "Echo":
        return payload
    raise RpcError(ttrpc.UNIMPLEMENTED, f"{service}/{method} is not implemented")


@pytest.fixture
def pair() -> Iterator[tuple[Connection, Peer]]:
    ours, theirs = socket.socketpair()
    conn = Connection(ours, echo, max_message=64)
    conn.start()
    yield conn, Peer(theirs)
    conn.close()
    conn.join()
    theirs.close()


def test_requests_are_answered_on_their_stream(pair: tuple[Connection, Peer]) -> None:
    _, peer = pair
    peer.sock.sendall(peer.request(1, "Echo", b"one") + peer.request(3, "Echo", b"two"))
    assert [peer.response() for _ in range(2)] == [
        (1, ttrpc_pb2.Response(payload=b"one")),
        (3, ttrpc_pb2.Response(payload=b"two")),
    ]


@pytest.mark.parametrize(
    ("garbage", "why"),
    [
        (mux.encode(1, ttrpc.encode(1, 0x7F, b"?")), "unknown message type"),
        (mux.encode(1, ttrpc.encode(1, ttrpc.TYPE_DATA, b"?")), "stream data (NRI has none)"),
        (mux.encode(9, b"\x00" * 20), "unknown logical connection"),
        (mux.encode(2, ttrpc.encode(99, ttrpc.TYPE_RESPONSE, b"")), "response nobody asked for"),
    ],
)
def test_unknown_things_are_dropped_and_the_connection_goes_on(
    pair: tuple[Connection, Peer], garbage: bytes, why: str
) -> None:
    conn, peer = pair
    peer.sock.sendall(garbage + peer.request(5, "Echo", b"after"))
    assert peer.response() == (5, ttrpc_pb2.Response(payload=b"after")), why
    assert not conn.closed


def test_an_unknown_method_is_unimplemented(pair: tuple[Connection, Peer]) -> None:
    _, peer = pair
    peer.sock.sendall(peer.request(7, "Frobnicate"))
    stream, response = peer.response()
    assert stream == 7 and response.status.code == ttrpc.UNIMPLEMENTED
    assert "svc/Frobnicate is not implemented" in response.status.message


def test_an_undecodable_request_is_invalid_argument(pair: tuple[Connection, Peer]) -> None:
    _, peer = pair
    peer.sock.sendall(mux.encode(1, ttrpc.encode(9, ttrpc.TYPE_REQUEST, b"\xff\xff\xff")))
    stream, response = peer.response()
    assert stream == 9 and response.status.code == ttrpc.INVALID_ARGUMENT


def test_an_oversize_request_is_resource_exhausted_and_the_next_is_served(
    pair: tuple[Connection, Peer],
) -> None:
    _, peer = pair
    big = peer.request(11, "Echo", b"B" * 100)  # over the connection's 64-byte limit
    peer.sock.sendall(big + peer.request(13, "Echo", b"small"))
    stream, response = peer.response()
    assert stream == 11 and response.status.code == ttrpc.RESOURCE_EXHAUSTED
    assert peer.response() == (13, ttrpc_pb2.Response(payload=b"small"))


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (b"\x00\x00\x00\x01\x00", "inside a frame header (5 of 8 bytes)"),
        (mux.encode(1, b"0123456789")[:12], "inside a frame for connection 1 (4 of 10"),
        (
            mux.encode(1, b"\x00\x00"),
            "closed the connection inside a ttrpc message on connection 1",
        ),
    ],
    ids=["mid-header", "mid-payload", "mid-ttrpc-message"],
)
def test_a_peer_closing_mid_frame_closes_with_the_reason(
    pair: tuple[Connection, Peer], tail: bytes, reason: str
) -> None:
    conn, peer = pair
    peer.sock.sendall(tail)
    peer.sock.shutdown(socket.SHUT_WR)
    assert conn.wait_closed(10)
    assert reason in conn.close_reason


def test_an_oversize_frame_closes_the_connection(pair: tuple[Connection, Peer]) -> None:
    conn, peer = pair
    peer.sock.sendall(b"\x00\x00\x00\x01\xff\xff\xff\xff")
    assert conn.wait_closed(10)
    assert "more than the limit" in conn.close_reason


def test_calls_get_their_own_response_even_out_of_order(pair: tuple[Connection, Peer]) -> None:
    conn, peer = pair
    results: dict[str, bytes] = {}

    def call(name: str) -> None:
        results[name] = conn.call("runtime", name, name.encode(), timeout=10)

    threads = [threading.Thread(target=call, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    asked = {}
    for _ in range(2):
        conn_id, item = peer.next()
        assert conn_id == 2 and isinstance(item, ttrpc.Message)
        asked[ttrpc_pb2.Request.FromString(item.payload).method] = item.stream_id
    assert sorted(asked.values()) == [1, 3]  # a ttrpc client's odd stream ids
    for name in ("b", "a"):  # answered in the other order
        body = ttrpc_pb2.Response(payload=b"reply-" + name.encode()).SerializeToString()
        peer.sock.sendall(mux.encode(2, ttrpc.encode(asked[name], ttrpc.TYPE_RESPONSE, body)))
    for thread in threads:
        thread.join(10)
    assert results == {"a": b"reply-a", "b": b"reply-b"}


def test_a_call_fails_with_the_status_the_peer_gave(pair: tuple[Connection, Peer]) -> None:
    conn, peer = pair
    errors: list[RpcError] = []

    def call() -> None:
        try:
            conn.call("runtime", "UpdateContainers", b"", timeout=10)
        except RpcError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    _, item = peer.next()
    status = ttrpc_pb2.Status(code=ttrpc.FAILED_PRECONDITION, message="no such container")
    body = ttrpc_pb2.Response(status=status).SerializeToString()
    peer.sock.sendall(mux.encode(2, ttrpc.encode(item.stream_id, ttrpc.TYPE_RESPONSE, body)))
    thread.join(10)
    assert len(errors) == 1 and errors[0].code == ttrpc.FAILED_PRECONDITION
    assert "no such container" in str(errors[0])


def test_a_call_in_flight_ends_when_the_peer_goes(pair: tuple[Connection, Peer]) -> None:
    conn, peer = pair
    errors: list[RpcError] = []

    def call() -> None:
        try:
            conn.call("runtime", "RegisterPlugin", b"", timeout=10)
        except RpcError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    peer.next()  # the request arrived
    peer.sock.shutdown(socket.SHUT_RDWR)
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], ConnectionClosed)
    with pytest.raises(ConnectionClosed):
        conn.call("runtime", "RegisterPlugin", b"", timeout=1)
