"""Bounded messages on the CRI socket: a request over kubelet's 16 MiB is refused
before it is read, and large requests in flight together share a byte budget
(a request that does not fit is refused at once, so its bytes are freed)."""

from __future__ import annotations

import grpc
import pytest

from agent.relay.budget import (
    MAX_REQUEST_BYTES,
    MIB,
    REQUEST_BUDGET_BYTES,
    SMALL_REQUEST_BYTES,
    ByteBudget,
)
from agent.relay.server import RelayServer
from proto import cri_pb2

VERSION = "/runtime.v1.RuntimeService/Version"


def _padded_version(size: int) -> bytes:
    """A VersionRequest of about `size` bytes (an unknown field carries the padding)."""
    base = cri_pb2.VersionRequest(version="v1").SerializeToString()
    # field 15, wire type 2 (length-delimited): tag 0x7a, then a varint length
    pad = max(size - len(base) - 6, 0)
    length = bytearray()
    n = pad
    while True:
        byte = n & 0x7F
        n >>= 7
        length.append(byte | (0x80 if n else 0))
        if not n:
            break
    return base + b"\x7a" + bytes(length) + b"\0" * pad


def _call(channel: grpc.Channel, request: bytes) -> bytes:
    method = channel.unary_unary(VERSION)
    reply: bytes = method(request, timeout=30)
    return reply


def test_a_request_over_the_limit_is_refused_before_it_is_read(raw_channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        _call(raw_channel, _padded_version(MAX_REQUEST_BYTES + MIB))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (refused.value.details() or ""), refused.value.details()


def test_a_large_request_that_does_not_fit_the_budget_is_refused_at_once(
    raw_channel: grpc.Channel, relay: RelayServer
) -> None:
    budget = relay._dispatcher.budget
    assert budget.try_take(REQUEST_BUDGET_BYTES - MIB)  # others' large requests in flight
    try:
        with pytest.raises(grpc.RpcError) as refused:
            _call(raw_channel, _padded_version(2 * MIB))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "budget" in (refused.value.details() or "")
        _call(raw_channel, _padded_version(1024))  # small ones never wait for it
    finally:
        budget.give_back(REQUEST_BUDGET_BYTES - MIB)
    assert budget.used == 0


def test_the_budget_counts_only_large_requests() -> None:
    budget = ByteBudget(4 * MIB)
    assert budget.try_take(SMALL_REQUEST_BYTES - 1) and budget.used == 0
    assert budget.try_take(3 * MIB) and not budget.try_take(2 * MIB)
    budget.give_back(3 * MIB)
    assert budget.try_take(2 * MIB) and budget.used == 2 * MIB
