"""The relay's per-kind limits over real sockets: a kind at its cap refuses the next
call of that kind with RESOURCE_EXHAUSTED while the other kinds keep answering;
a caller that sends no request is pushed out of a full waiting room; calls that
end without a request get INVALID_ARGUMENT. And the elastic executor beneath."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.relay.hooks import Forward
from agent.relay.limits import Limits
from agent.relay.methods import STREAMING_METHODS
from agent.relay.pool import ElasticExecutor
from agent.relay.server import RelayServer
from tests.waiting import wait_until

RT = "/runtime.v1.RuntimeService/"
HOOKED = RT + "CreateContainer"
PASS = RT + "Version"
STREAM = RT + "GetContainerEvents"
# The waiting room holds more than the calls a test has in flight at once (real
# callers leave it within a millisecond, but a loaded machine can stretch that).
LIMITS = Limits(waiting=4, passthrough=2, placement=2, streams=2)
WAIT_S = 10.0


@dataclass
class HoldingRuntime:
    """A runtime that answers every call, but holds each until `release` while
    `holding` is set: unary calls before answering, streams after their first message."""

    holding: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    entered: list[str] = field(default_factory=list)

    def handler(self) -> grpc.GenericRpcHandler:
        runtime = self

        class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
            def service(self, details: Any) -> Any:
                method = details.method
                if method in STREAMING_METHODS:

                    def stream(request: bytes, context: Any) -> Iterator[bytes]:
                        runtime.entered.append(method)
                        yield b"first"
                        while context.is_active() and not runtime.released.wait(0.05):
                            pass

                    return grpc.unary_stream_rpc_method_handler(stream)

                def unary(request: bytes, context: Any) -> bytes:
                    runtime.entered.append(method)
                    if runtime.holding.is_set():
                        runtime.released.wait(WAIT_S * 3)
                    return b"ok:" + request

                return grpc.unary_unary_rpc_method_handler(unary)

        return Handler()


@dataclass
class Limited:
    runtime: HoldingRuntime
    relay: RelayServer
    channel: grpc.Channel
    observed: list[tuple[str, grpc.StatusCode]]
    calls: list[Any] = field(default_factory=list)

    def call(self, method: str, timeout: float = WAIT_S) -> bytes:
        response: bytes = self.channel.unary_unary(method)(b"x", timeout=timeout)
        return response

    def hold(self, method: str) -> None:
        """Start a call of `method` that stays in flight (runtime holding, or a stream)."""
        if method in STREAMING_METHODS:
            call = self.channel.unary_stream(method)(b"", timeout=WAIT_S * 3)
            assert next(call) == b"first"
        else:
            call = self.channel.unary_unary(method).future(b"x", timeout=WAIT_S * 3)
        self.calls.append(call)

    def code_of(self, method: str) -> grpc.StatusCode:
        try:
            if method in STREAMING_METHODS:
                next(self.channel.unary_stream(method)(b"", timeout=WAIT_S))
            else:
                self.call(method)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            return code
        return grpc.StatusCode.OK


@pytest.fixture
def limited(sockdir: Path) -> Iterator[Limited]:
    runtime = HoldingRuntime()
    backend = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    backend.add_generic_rpc_handlers((runtime.handler(),))
    backend.add_insecure_port(f"unix://{sockdir / 'rt.sock'}")
    backend.start()

    def hook(request: bytes, forward: Forward, context: Any) -> bytes:
        return forward(request)

    observed: list[tuple[str, grpc.StatusCode]] = []
    relay = RelayServer(
        str(sockdir / "agent.sock"),
        str(sockdir / "rt.sock"),
        hooks={HOOKED: hook},
        observer=lambda method, code, _s: observed.append((method, code)),
        limits=LIMITS,
    )
    relay.start()
    channel = grpc.insecure_channel(f"unix://{relay.path}")
    limited = Limited(runtime, relay, channel, observed)
    yield limited
    runtime.released.set()
    for call in limited.calls:
        call.cancel()
    channel.close()
    relay.stop(0)
    backend.stop(None)


KINDS = [("passthrough", PASS), ("placement", HOOKED), ("streams", STREAM)]


@pytest.mark.parametrize(("kind", "method"), KINDS, ids=[k for k, _ in KINDS])
def test_a_kind_at_its_limit_refuses_and_the_others_answer(
    limited: Limited, kind: str, method: str
) -> None:
    limited.runtime.holding.set()
    for _ in range(getattr(LIMITS, kind)):
        limited.hold(method)
    wait_until(
        lambda: limited.relay.in_flight()[kind] == getattr(LIMITS, kind), WAIT_S, f"{kind} full"
    )
    assert limited.code_of(method) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Refused without waiting for a held call to end: they are all still held.
    assert limited.relay.in_flight()[kind] == getattr(LIMITS, kind), "a refusal must not wait"
    assert (method, grpc.StatusCode.RESOURCE_EXHAUSTED) in limited.observed
    limited.runtime.holding.clear()  # the others' calls are not held by the runtime
    for _other, other_method in [k for k in KINDS if k[0] != kind]:
        assert limited.code_of(other_method) == grpc.StatusCode.OK, other_method
    # Once the held calls end, the kind answers again.
    limited.runtime.released.set()
    for call in limited.calls:
        if method in STREAMING_METHODS:
            call.cancel()
        else:
            assert call.result() == b"ok:x"
    wait_until(lambda: limited.relay.in_flight()[kind] == 0, WAIT_S, f"{kind} empty")
    assert limited.code_of(method) == grpc.StatusCode.OK


def _silent(channel: grpc.Channel, method: str, gate: threading.Event) -> Any:
    def nothing_until_released() -> Iterator[bytes]:
        gate.wait(WAIT_S * 3)
        yield from ()

    return channel.stream_unary(method).future(nothing_until_released(), timeout=WAIT_S * 3)


def test_a_full_waiting_room_pushes_out_the_longest_silent_caller(limited: Limited) -> None:
    gate = threading.Event()
    try:
        first = _silent(limited.channel, PASS, gate)
        wait_until(lambda: limited.relay.in_flight()["waiting"] == 1, WAIT_S, "first waiting")
        later = [_silent(limited.channel, PASS, gate) for _ in range(LIMITS.waiting)]
        wait_until(first.done, WAIT_S, "the longest silent caller to be pushed out")
        assert first.code() == grpc.StatusCode.CANCELLED
        wait_until(
            lambda: limited.relay.in_flight()["waiting"] == LIMITS.waiting, WAIT_S, "room full"
        )
        assert not any(f.done() for f in later)
        # A real call passes through the room at once, pushing out another silent one.
        assert limited.call(PASS) == b"ok:x"
        assert (PASS, grpc.StatusCode.CANCELLED) in limited.observed
    finally:
        gate.set()


@pytest.mark.parametrize("method", [PASS, HOOKED, STREAM])
def test_a_call_without_its_request_message_is_invalid_argument(
    limited: Limited, method: str
) -> None:
    if method in STREAMING_METHODS:
        call = limited.channel.stream_stream(method)(iter(()), timeout=WAIT_S)
        with pytest.raises(grpc.RpcError) as err:
            next(call)
    else:
        with pytest.raises(grpc.RpcError) as err:
            limited.channel.stream_unary(method)(iter(()), timeout=WAIT_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "requires exactly one request message" in err.value.details()
    assert method not in limited.runtime.entered


def test_threads_are_started_on_demand(limited: Limited) -> None:
    limited.call(PASS)
    idle = limited.relay.threads()
    assert 1 <= idle <= 4
    limited.runtime.holding.set()
    for _ in range(LIMITS.passthrough):
        limited.hold(PASS)
    for _ in range(LIMITS.streams):
        limited.hold(STREAM)
    wait_until(
        lambda: limited.relay.threads() >= LIMITS.passthrough + LIMITS.streams,
        WAIT_S,
        "a thread per held call",
    )
    assert limited.relay.threads() <= LIMITS.total + 16
    limited.runtime.released.set()


# ----------------------------------------------------------------------------- the executor


def test_executor_runs_work_and_reports_results_and_errors() -> None:
    pool = ElasticExecutor(4)
    try:
        assert pool.submit(lambda x: x * 2, 21).result(WAIT_S) == 42
        failing = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failing.result(WAIT_S)
    finally:
        pool.shutdown()


@pytest.mark.parametrize("busy", [1, 5, 12])
def test_executor_grows_to_the_work_in_flight_and_shrinks_when_idle(busy: int) -> None:
    pool = ElasticExecutor(12, keep=1, idle_s=0.2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def held() -> None:
        started.release()
        release.wait(WAIT_S)

    try:
        work = [pool.submit(held) for _ in range(busy)]
        for _ in range(busy):
            assert started.acquire(timeout=WAIT_S), "every item got a thread at once"
        assert pool.threads == busy
        release.set()
        for f in work:
            f.result(WAIT_S)
        wait_until(lambda: pool.threads == 1, WAIT_S, "idle threads to retire down to keep=1")
        assert pool.submit(lambda: "again").result(WAIT_S) == "again"
    finally:
        release.set()
        pool.shutdown()


def test_executor_queues_beyond_its_maximum_and_never_loses_work() -> None:
    pool = ElasticExecutor(2, idle_s=0.05)
    done: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        sum(range(2000))  # some work, so that items overlap
        with lock:
            done.append(i)

    try:
        for f in [pool.submit(work, i) for i in range(200)]:
            f.result(WAIT_S)
        assert sorted(done) == list(range(200))
        assert pool.threads <= 2
    finally:
        pool.shutdown()


def test_executor_refuses_work_after_shutdown() -> None:
    pool = ElasticExecutor(2)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)
