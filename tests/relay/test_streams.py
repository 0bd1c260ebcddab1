"""Runtime streams through the relay, as the stream pump (one asyncio loop) reads
them: messages, metadata and statuses pass unchanged, a caller that goes away
ends the runtime's stream, and stopping the relay ends every open stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.relay.server import RelayServer
from agent.relay.streams import StreamCancelled, StreamPump
from tests.waiting import wait_until

STATS = "/runtime.v1.RuntimeService/StreamContainerStats"
WAIT_S = 10.0


@dataclass
class ScriptedRuntime:
    """Streams `count` messages, then ends with `code` (and trailing metadata), or,
    with `hold`, stays open until the caller goes; records how each stream ended."""

    count: int = 3
    code: grpc.StatusCode = grpc.StatusCode.OK
    hold: bool = False
    ended: list[str] = field(default_factory=list)

    def handler(self) -> grpc.GenericRpcHandler:
        script = self

        class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
            def service(self, details: Any) -> Any:
                def stream(request: bytes, context: Any) -> Iterator[bytes]:
                    gone = threading.Event()
                    context.add_callback(gone.set)
                    context.send_initial_metadata((("x-first", "1"),))
                    try:
                        for i in range(script.count):
                            yield request + bytes([i])
                    except GeneratorExit:
                        # The caller went while its messages were still being sent (a
                        # busy machine): grpc closes the stream at its current message.
                        script.ended.append("caller gone")
                        raise
                    if script.hold:
                        gone.wait(WAIT_S * 3)
                        script.ended.append("caller gone" if gone.is_set() else "timed out")
                        return
                    context.set_trailing_metadata((("x-last", "2"), ("x-bin", b"\x00\xff")))
                    script.ended.append("finished")
                    if script.code != grpc.StatusCode.OK:
                        context.abort(script.code, "stats backend exploded")

                return grpc.unary_stream_rpc_method_handler(stream)

        return Handler()


@pytest.fixture
def scripted(sockdir: Path) -> Iterator[tuple[ScriptedRuntime, RelayServer, grpc.Channel]]:
    runtime = ScriptedRuntime()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((runtime.handler(),))
    server.add_insecure_port(f"unix://{sockdir / 'rt.sock'}")
    server.start()
    relay = RelayServer(str(sockdir / "agent.sock"), str(sockdir / "rt.sock"))
    relay.start()
    channel = grpc.insecure_channel(f"unix://{relay.path}")
    yield runtime, relay, channel
    channel.close()
    relay.stop(0)
    server.stop(None)


@pytest.mark.parametrize("count", [0, 1, 200])
def test_messages_and_metadata_pass_unchanged(
    scripted: tuple[ScriptedRuntime, RelayServer, grpc.Channel], count: int
) -> None:
    runtime, _relay, channel = scripted
    runtime.count = count
    call = channel.unary_stream(STATS)(b"req", timeout=WAIT_S)
    assert list(call) == [b"req" + bytes([i]) for i in range(count)]
    assert call.code() == grpc.StatusCode.OK
    trailing = tuple(call.trailing_metadata())
    assert ("x-last", "2") in trailing and ("x-bin", b"\x00\xff") in trailing
    if count:  # the runtime's initial metadata comes with the first message
        assert ("x-first", "1") in tuple(call.initial_metadata())


def test_a_runtime_error_mid_stream_reaches_the_caller(
    scripted: tuple[ScriptedRuntime, RelayServer, grpc.Channel],
) -> None:
    runtime, _relay, channel = scripted
    runtime.code = grpc.StatusCode.RESOURCE_EXHAUSTED
    call = channel.unary_stream(STATS)(b"r", timeout=WAIT_S)
    got = []
    with pytest.raises(grpc.RpcError) as err:
        for message in call:
            got.append(message)
    assert got == [b"r\x00", b"r\x01", b"r\x02"]
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.value.details() == "stats backend exploded"
    assert ("x-last", "2") in tuple(err.value.trailing_metadata())


def test_a_caller_going_away_ends_the_runtime_stream(
    scripted: tuple[ScriptedRuntime, RelayServer, grpc.Channel],
) -> None:
    runtime, relay, channel = scripted
    runtime.hold = True
    calls = [channel.unary_stream(STATS)(b"r", timeout=WAIT_S * 3) for _ in range(5)]
    for call in calls:
        assert next(call) == b"r\x00"
    assert relay.in_flight()["streams"] == 5
    for call in calls:
        call.cancel()
    wait_until(lambda: runtime.ended == ["caller gone"] * 5, WAIT_S, "the runtime streams to end")
    wait_until(lambda: relay.in_flight()["streams"] == 0, WAIT_S, "the relay to let go")


def test_stopping_the_relay_ends_every_open_stream(
    scripted: tuple[ScriptedRuntime, RelayServer, grpc.Channel],
) -> None:
    runtime, relay, channel = scripted
    runtime.hold = True
    calls = [channel.unary_stream(STATS)(b"r", timeout=WAIT_S * 3) for _ in range(3)]
    for call in calls:
        assert [next(call) for _ in range(runtime.count)] == [b"r\x00", b"r\x01", b"r\x02"]
    relay.stop(0)
    for call in calls:
        with pytest.raises(grpc.RpcError):
            next(call)
    wait_until(lambda: len(runtime.ended) == 3, WAIT_S, "the runtime streams to end")
    assert runtime.ended == ["caller gone"] * 3


def test_a_stream_cancelled_before_it_started_never_blocks_its_reader(sockdir: Path) -> None:
    pump = StreamPump()
    try:
        stream = pump.open(f"unix://{sockdir / 'nobody.sock'}", STATS, b"", timeout=WAIT_S)
        stream.cancel()
        with pytest.raises(StreamCancelled):
            next(stream)
    finally:
        pump.close()
    with pytest.raises(RuntimeError, match="stopping"):
        pump.open(f"unix://{sockdir / 'nobody.sock'}", STATS, b"")
