"""The tests' runtime: calls recorded and failed or held the same way whether they come
over gRPC or in-process, and a test reading the runtime directly changes nothing."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.relay.backend import BackendError
from agent.runtime.inprocess import dispatch
from agent.runtime.memory import CallRefused
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime, serve_memory_runtime
from proto import cri_pb2

VERSION = "/runtime.v1.RuntimeService/Version"
DEADLINE_SLACK_S = 0.5  # gRPC rounds a deadline up; seen: 5.0056 s left of 5 s


@pytest.fixture
def served() -> Iterator[tuple[FaultyRuntime, CRIClient]]:
    # pytest's tmp_path can exceed the 107-byte unix socket path limit.
    with tempfile.TemporaryDirectory(prefix="na-", dir="/tmp") as d:
        server, runtime = serve_memory_runtime(Path(d) / "rt.sock")
        try:
            with CRIClient(str(Path(d) / "rt.sock"), timeout=5) as client:
                yield runtime, client
        finally:
            server.stop(None)


def test_fail_next_fails_one_call_in_process() -> None:
    rt = FaultyRuntime()
    rt.fail_next("Version", grpc.StatusCode.UNAVAILABLE, "down for a bit", (("x-why", "test"),))
    request = cri_pb2.VersionRequest().SerializeToString()
    with pytest.raises(BackendError) as err:
        dispatch(rt, VERSION, request)
    assert (err.value.code, err.value.details) == (grpc.StatusCode.UNAVAILABLE, "down for a bit")
    assert err.value.trailing_metadata == (("x-why", "test"),)
    reply = cri_pb2.VersionResponse.FromString(dispatch(rt, VERSION, request))
    assert reply.runtime_api_version == "v1"
    assert [c.method for c in rt.calls] == ["Version", "Version"]


def test_fail_next_fails_one_call_over_grpc(served: tuple[FaultyRuntime, CRIClient]) -> None:
    rt, client = served
    rt.fail_next("ListContainers", grpc.StatusCode.INTERNAL, "shim died")
    with pytest.raises(CRIError) as err:
        client.list_containers()
    assert (err.value.code, err.value.details) == (grpc.StatusCode.INTERNAL, "shim died")
    assert client.list_containers() == []
    (first, second) = rt.calls
    assert first.method == second.method == "ListContainers"
    # The client's 5 s deadline reached the runtime. gRPC sends it rounded up to its
    # wire unit and the server counts from its own clock: a little over 5 s is normal.
    assert first.time_remaining is not None and 0 < first.time_remaining <= 5 + DEADLINE_SLACK_S
    assert any(key == "user-agent" for key, _ in first.metadata)


def test_hold_next_holds_the_call_until_released(served: tuple[FaultyRuntime, CRIClient]) -> None:
    rt, client = served
    gate = rt.hold_next("Version")
    answers: list[str] = []
    caller = threading.Thread(target=lambda: answers.append(client.version().runtime_name))
    caller.start()
    assert gate.entered.wait(5)
    caller.join(0.2)
    assert caller.is_alive() and answers == []  # held inside the runtime
    gate.release.set()
    caller.join(5)
    assert answers == ["numa-agent-memory"]


def test_direct_calls_are_neither_recorded_nor_failed() -> None:
    rt = FaultyRuntime()
    rt.fail_next("Version", grpc.StatusCode.UNAVAILABLE)
    assert rt.version(cri_pb2.VersionRequest()).runtime_api_version == "v1"
    assert rt.calls == []
    with pytest.raises(CallRefused):  # the injected failure still waits for a real call
        rt.call("Version", cri_pb2.VersionRequest())
