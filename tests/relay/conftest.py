"""Real gRPC servers on unix sockets: the in-memory runtime, a raw echo
runtime, and the relay in front of either."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.relay.server import RelayServer
from devtools.criclient import CRIClient
from devtools.fake_runtime import FaultyRuntime, serve_memory_runtime

FUTURE_METHOD = "/runtime.v1.RuntimeService/FutureMethod"


@pytest.fixture
def sockdir() -> Iterator[Path]:
    # pytest's tmp_path can exceed the 107-byte unix socket path limit.
    with tempfile.TemporaryDirectory(prefix="na-", dir="/tmp") as d:
        yield Path(d)


class _FutureMethod(grpc.GenericRpcHandler):
    """A CRI method from a future version: echoes the request reversed."""

    def service(self, details: Any) -> Any:
        if details.method != FUTURE_METHOD:
            return None

        def handle(request: bytes, context: Any) -> bytes:
            context.set_trailing_metadata((("x-future", "yes"),))
            return request[::-1]

        return grpc.unary_unary_rpc_method_handler(handle)


@pytest.fixture
def memory_runtime(sockdir: Path) -> Iterator[tuple[Path, FaultyRuntime]]:
    path = sockdir / "rt.sock"
    server, runtime = serve_memory_runtime(path, extra_handlers=(_FutureMethod(),))
    yield path, runtime
    server.stop(None)


@pytest.fixture
def relay(sockdir: Path, memory_runtime: tuple[Path, FaultyRuntime]) -> Iterator[RelayServer]:
    server = RelayServer(str(sockdir / "agent" / "agent.sock"), f"unix://{memory_runtime[0]}")
    server.start()
    yield server
    server.stop(0)


@pytest.fixture
def runtime(memory_runtime: tuple[Path, FaultyRuntime]) -> FaultyRuntime:
    return memory_runtime[1]


@pytest.fixture
def client(relay: RelayServer) -> Iterator[CRIClient]:
    with CRIClient(relay.path, timeout=5) as c:
        yield c


@pytest.fixture
def raw_channel(relay: RelayServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"unix://{relay.path}") as ch:
        yield ch


@dataclass
class EchoRuntime:
    """A runtime that records raw bytes and answers every method with
    `reply_prefix + request`, so byte-for-byte transport can be checked."""

    path: Path
    reply_prefix: bytes = b""
    stream_count: int = 3
    received: list[tuple[str, bytes, tuple[Any, ...], float]] = field(default_factory=list)


class _Echo(grpc.GenericRpcHandler):
    def __init__(self, echo: EchoRuntime, streaming: frozenset[str]) -> None:
        self.echo = echo
        self.streaming = streaming

    def service(self, details: Any) -> Any:
        method = details.method
        echo = self.echo

        def record(request: bytes, context: Any) -> None:
            echo.received.append(
                (method, request, tuple(context.invocation_metadata()), context.time_remaining())
            )

        if method in self.streaming:

            def stream(request: bytes, context: Any) -> Iterator[bytes]:
                record(request, context)
                for i in range(echo.stream_count):
                    yield echo.reply_prefix + bytes([i]) + request

            return grpc.unary_stream_rpc_method_handler(stream)

        def unary(request: bytes, context: Any) -> bytes:
            record(request, context)
            return echo.reply_prefix + request

        return grpc.unary_unary_rpc_method_handler(unary)


@pytest.fixture
def echo_relay(sockdir: Path) -> Iterator[tuple[EchoRuntime, RelayServer, grpc.Channel]]:
    from concurrent import futures

    from agent.relay.server import STREAMING_METHODS

    echo = EchoRuntime(sockdir / "echo.sock")
    backend = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    backend.add_generic_rpc_handlers((_Echo(echo, STREAMING_METHODS),))
    backend.add_insecure_port(f"unix://{echo.path}")
    backend.start()
    relay = RelayServer(str(sockdir / "agent.sock"), str(echo.path))
    relay.start()
    channel = grpc.insecure_channel(f"unix://{relay.path}")
    yield echo, relay, channel
    channel.close()
    relay.stop(0)
    backend.stop(None)
