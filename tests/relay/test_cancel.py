"""A caller that goes away (it cancels, or its deadline passes) takes its runtime call
with it: the relay cancels the call at the runtime and its per-kind slot is free
again at once, while the runtime would still be holding the call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.relay.hooks import Forward
from agent.relay.limits import Limits
from agent.relay.server import RelayServer
from devtools.fake_runtime import FaultyRuntime
from tests.waiting import LIMIT_S, wait_until

RT = "/runtime.v1.RuntimeService/"
IMG = "/runtime.v1.ImageService/"
PULL = IMG + "PullImage"  # pass-through, and long at a real runtime
CREATE = RT + "CreateContainer"  # hooked: a placement call
EVENTS = RT + "GetContainerEvents"
# One call of each kind at a time: the second of a kind is refused while the first
# holds the only slot.
ONE_EACH = Limits(waiting=8, passthrough=1, placement=1, streams=1)


@dataclass
class Relayed:
    relay: RelayServer
    runtime: FaultyRuntime
    channel: grpc.Channel

    def code_of(self, method: str) -> grpc.StatusCode:
        """A unary call's status (the runtime answers it at once unless held)."""
        try:
            self.channel.unary_unary(method)(b"", timeout=LIMIT_S)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            return code
        return grpc.StatusCode.OK


@pytest.fixture
def relayed(sockdir: Path, memory_runtime: tuple[Path, FaultyRuntime]) -> Iterator[Relayed]:
    def hook(request: bytes, forward: Forward, context: Any) -> bytes:
        return forward(request)

    relay = RelayServer(
        str(sockdir / "agent.sock"),
        f"unix://{memory_runtime[0]}",
        hooks={CREATE: hook},
        limits=ONE_EACH,
    )
    relay.start()
    channel = grpc.insecure_channel(f"unix://{relay.path}")
    yield Relayed(relay, memory_runtime[1], channel)
    channel.close()
    relay.stop(0)


UNARY = [(PULL, "passthrough"), (CREATE, "placement")]


@pytest.mark.parametrize(("method", "kind"), UNARY, ids=["pass-through", "placement"])
@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_a_unary_call_whose_caller_went_frees_its_slot_at_once(
    relayed: Relayed, method: str, kind: str, how: str
) -> None:
    name = method.rsplit("/", 1)[1]
    gate = relayed.runtime.hold_next(name)
    try:
        # A deadline far enough off for the call to reach the runtime on a busy machine.
        timeout = 5.0 if how == "deadline" else LIMIT_S * 4
        first = relayed.channel.unary_unary(method).future(b"", timeout=timeout)
        assert gate.entered.wait(LIMIT_S), "the first call never reached the runtime"
        if how == "cancel":
            # Its kind is full while it is held: the second call is refused.
            assert relayed.code_of(method) == grpc.StatusCode.RESOURCE_EXHAUSTED
            first.cancel()
        wait_until(first.done, what="the first call to end for its caller")
        # The slot is free while the runtime still holds the first call (the gate is
        # shut): the relay did not wait for the runtime's answer.
        wait_until(lambda: relayed.relay.in_flight()[kind] == 0, what=f"{kind} slot free")
        assert not gate.release.is_set()
        relayed.runtime.hold_next(name).release.set()  # the next one is answered at once
        assert relayed.code_of(method) != grpc.StatusCode.RESOURCE_EXHAUSTED
        assert [c.method for c in relayed.runtime.calls].count(name) == 2  # it got through
        # And the runtime saw its call go.
        wait_until(lambda: name in relayed.runtime.cancelled, what="the runtime call cancelled")
        if how == "deadline":
            with pytest.raises(grpc.RpcError) as err:
                first.result()
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        gate.release.set()


def _events_calls(relayed: Relayed) -> int:
    return [c.method for c in relayed.runtime.calls].count("GetContainerEvents")


def test_a_stream_whose_caller_went_frees_its_slot_at_once(relayed: Relayed) -> None:
    first = relayed.channel.unary_stream(EVENTS)(b"", timeout=LIMIT_S * 4)
    second: Any = None
    try:
        wait_until(lambda: relayed.relay.in_flight()["streams"] == 1, what="the stream open")
        wait_until(lambda: _events_calls(relayed) == 1, what="the stream open at the runtime")
        with pytest.raises(grpc.RpcError) as refused:
            next(relayed.channel.unary_stream(EVENTS)(b"", timeout=LIMIT_S))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        first.cancel()
        wait_until(lambda: relayed.relay.in_flight()["streams"] == 0, what="the stream slot free")
        wait_until(
            lambda: "GetContainerEvents" in relayed.runtime.cancelled,
            what="the runtime stream cancelled",
        )
        # The next stream gets the slot (it stays open: the runtime has no events).
        second = relayed.channel.unary_stream(EVENTS)(b"", timeout=LIMIT_S * 4)
        wait_until(lambda: relayed.relay.in_flight()["streams"] == 1, what="the next stream open")
        wait_until(lambda: _events_calls(relayed) == 2, what="the next stream at the runtime")
    finally:
        first.cancel()
        if second is not None:
            second.cancel()
