"""The relay over real unix sockets: pass-through of every call kind, statuses,
deadlines, metadata, the socket on disk, and the hook table."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.internal import encoder

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.relay import listen
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward, HookAbort
from agent.relay.server import RelayServer
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime
from proto import cri_pb2
from tests.relay.conftest import FUTURE_METHOD, EchoRuntime
from tests.waiting import LIMIT_S, wait_until

RT = "/runtime.v1.RuntimeService/"
IMG = "/runtime.v1.ImageService/"
CREATE = RT + "CreateContainer"
UNKNOWN_FIELD = b"\x9a\x06\x0ffrom the future"  # field 99, length-delimited


def _pod(name: str = "web") -> cri_pb2.PodSandboxConfig:
    return kubelet_pod_config(name, "default", f"uid-{name}", qos=QoSClass.GUARANTEED)


# --------------------------------------------------------------- pass-through


def test_every_known_method_reaches_the_runtime(client: CRIClient, runtime: FaultyRuntime) -> None:
    pod = _pod()
    assert client.version().runtime_name == "numa-agent-memory"
    pod_id = client.run_pod_sandbox(pod)
    assert client.pod_sandbox_status(pod_id).status.metadata.uid == "uid-web"
    assert [p.id for p in client.list_pod_sandbox()] == [pod_id]
    cid = client.create_container(pod_id, kubelet_container_config(pod, "app", 1000, 1000), pod)
    client.start_container(cid)
    assert [c.id for c in client.list_containers()] == [cid]
    client.update_container_resources(cid, cri_pb2.LinuxContainerResources(cpuset_cpus="1"))
    status = client.container_status(cid, verbose=True)
    assert status.status.resources.linux.cpuset_cpus == "1"
    assert status.status.resources.linux.cpu_shares == 1024  # kept by the merge
    client.stop_container(cid)
    client.remove_container(cid)
    client.stop_pod_sandbox(pod_id)
    client.remove_pod_sandbox(pod_id)
    ref = client.pull_image("busybox")
    assert [i.id for i in client.list_images()] == [ref]
    assert client.image_status("busybox").image.id == ref

    assert [c.method for c in runtime.calls] == [
        "Version",
        "RunPodSandbox",
        "PodSandboxStatus",
        "ListPodSandbox",
        "CreateContainer",
        "StartContainer",
        "ListContainers",
        "UpdateContainerResources",
        "ContainerStatus",
        "StopContainer",
        "RemoveContainer",
        "StopPodSandbox",
        "RemovePodSandbox",
        "PullImage",
        "ListImages",
        "ImageStatus",
    ]


@pytest.mark.parametrize(
    "method",
    [
        RT + "Version",
        CREATE,
        RT + "UpdateContainerResources",
        RT + "ExecSync",  # a real method neither the proto subset nor the agent handles
        RT + "NotYetInvented",
        IMG + "PullImage",
    ],
)
def test_unary_bytes_pass_unchanged(
    echo_relay: tuple[EchoRuntime, RelayServer, grpc.Channel], method: str
) -> None:
    echo, _relay, channel = echo_relay
    echo.reply_prefix = UNKNOWN_FIELD
    request = b"\x0a\x05pod-1" + UNKNOWN_FIELD + b"\x88\x01\x01"  # id, field 99, field 17 varint
    response = channel.unary_unary(method)(request, timeout=5)
    assert echo.received[-1][:2] == (method, request)
    assert response == UNKNOWN_FIELD + request


def test_unknown_fields_survive_the_real_runtime_path(
    client: CRIClient, runtime: FaultyRuntime, raw_channel: grpc.Channel
) -> None:
    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    config = kubelet_container_config(pod, "app", 500)
    cdi = b"\x8a\x01\x12\x0a\x10vendor.com/gpu=0"  # ContainerConfig.CDI_devices (17)
    config_bytes = config.SerializeToString() + cdi
    # Canonical field order, as the runtime will re-serialize what it parsed.
    request = (
        cri_pb2.CreateContainerRequest(pod_sandbox_id=pod_id).SerializeToString()
        + b"\x12"
        + encoder._VarintBytes(len(config_bytes))
        + config_bytes
        + cri_pb2.CreateContainerRequest(sandbox_config=pod).SerializeToString()
        + UNKNOWN_FIELD
    )
    raw_channel.unary_unary(CREATE)(request, timeout=5)
    seen = runtime.calls[-1].request
    # Compared parsed (map entries may re-serialize in another order); protobuf's
    # equality includes unknown fields, and the bytes checks make sure of them.
    assert seen == cri_pb2.CreateContainerRequest.FromString(request)
    assert seen.SerializeToString().endswith(UNKNOWN_FIELD)
    assert cdi in seen.config.SerializeToString()


def test_server_streaming_passes_every_message(client: CRIClient, runtime: FaultyRuntime) -> None:
    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    ids = [client.create_container(pod_id, kubelet_container_config(pod, n), pod) for n in "abc"]
    client.start_container(ids[0])
    expected = list(runtime.get_container_events(cri_pb2.GetEventsRequest()))
    assert len(expected) == 4

    stream = client.container_events(timeout=5)
    got = [next(stream) for _ in expected]
    stream.close()
    assert got == expected


@pytest.mark.parametrize("count", [0, 1, 5])
def test_streaming_bytes_pass_unchanged(
    echo_relay: tuple[EchoRuntime, RelayServer, grpc.Channel], count: int
) -> None:
    echo, _relay, channel = echo_relay
    echo.stream_count = count
    echo.reply_prefix = UNKNOWN_FIELD
    method = RT + "StreamContainerStats"
    got = list(channel.unary_stream(method)(b"\x0a\x01x", timeout=5))
    assert got == [UNKNOWN_FIELD + bytes([i]) + b"\x0a\x01x" for i in range(count)]
    assert echo.received[-1][:2] == (method, b"\x0a\x01x")


def test_unknown_method_is_relayed(raw_channel: grpc.Channel) -> None:
    response, call = raw_channel.unary_unary(FUTURE_METHOD).with_call(b"\x01\x02\x03", timeout=5)
    assert response == b"\x03\x02\x01"
    assert ("x-future", "yes") in tuple(call.trailing_metadata())


def test_method_the_runtime_lacks_gives_its_unimplemented(raw_channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        raw_channel.unary_unary(RT + "NoSuchMethodAnywhere")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --------------------------------------------------------------- statuses, deadlines, metadata


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (grpc.StatusCode.NOT_FOUND, 'container "x" not found'),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "no room at the inn"),
        (grpc.StatusCode.UNAVAILABLE, "runtime says: busy, try later"),
        (grpc.StatusCode.INTERNAL, "failed to create shim task: OCI runtime create failed"),
    ],
)
def test_runtime_errors_come_back_unchanged(
    client: CRIClient, runtime: FaultyRuntime, raw_channel: grpc.Channel, code: Any, details: str
) -> None:
    client.version()  # connected: an UNAVAILABLE now is the runtime's own
    runtime.fail_next(
        "CreateContainer", code, details, (("x-reason", "test"), ("x-blob-bin", b"\x00\xff"))
    )
    with pytest.raises(grpc.RpcError) as err:
        raw_channel.unary_unary(CREATE)(b"", timeout=5)
    assert err.value.code() == code
    assert err.value.details() == details
    trailing = tuple(err.value.trailing_metadata())
    assert ("x-reason", "test") in trailing
    assert ("x-blob-bin", b"\x00\xff") in trailing


def test_deadline_and_metadata_are_passed_on(
    runtime: FaultyRuntime, raw_channel: grpc.Channel
) -> None:
    raw_channel.unary_unary(RT + "Version")(b"", timeout=30, metadata=(("x-trace", "abc"),))
    call = runtime.calls[-1]
    # gRPC encodes timeouts rounded up, so allow a little over the 30 s asked for;
    # a busy machine may take seconds off it on the way, never 20.
    assert call.time_remaining is not None and 10 < call.time_remaining <= 30.5
    assert ("x-trace", "abc") in call.metadata
    raw_channel.unary_unary(RT + "Version")(b"")
    no_deadline = runtime.calls[-1].time_remaining
    assert no_deadline is not None and no_deadline > 1e6  # gRPC's "infinite"


def test_streaming_deadline_is_passed_on(
    echo_relay: tuple[EchoRuntime, RelayServer, grpc.Channel],
) -> None:
    echo, _relay, channel = echo_relay
    list(channel.unary_stream(RT + "GetContainerEvents")(b"", timeout=30))
    # The 30 s reached the runtime, less the relay's hop (however slow this machine)
    # and plus gRPC's rounding up: neither dropped nor replaced.
    assert 10 < echo.received[-1][3] <= 30.5


def test_expired_deadline_at_the_runtime_is_deadline_exceeded(
    sockdir: Path, memory_runtime: tuple[Path, FaultyRuntime]
) -> None:
    """A hook slower than the caller's deadline: forward must not call the
    runtime once the caller has given up."""
    forwarded: list[Any] = []
    done = threading.Event()

    def slow(request: bytes, forward: Forward, context: Any) -> bytes:
        wait_until(lambda: context.time_remaining() <= 0, what="the caller's deadline to pass")
        try:
            return forward(request)
        except BackendError as err:
            forwarded.append(err.code)
            raise
        finally:
            done.set()

    relay = RelayServer(
        str(sockdir / "a.sock"), str(memory_runtime[0]), hooks={RT + "Version": slow}
    )
    relay.start()
    try:
        with (
            grpc.insecure_channel(f"unix://{relay.path}") as ch,
            pytest.raises(grpc.RpcError) as err,
        ):
            ch.unary_unary(RT + "Version")(b"", timeout=0.2)
        assert done.wait(5)
    finally:
        relay.stop(0)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert forwarded == [grpc.StatusCode.DEADLINE_EXCEEDED]
    assert memory_runtime[1].calls == []


@pytest.mark.parametrize("method", [RT + "Version", IMG + "ListImages", RT + "GetContainerEvents"])
def test_runtime_down_fails_fast_naming_the_endpoint(sockdir: Path, method: str) -> None:
    missing = sockdir / "nothing-here.sock"
    relay = RelayServer(str(sockdir / "a.sock"), f"unix://{missing}")
    relay.start()
    try:
        with (
            grpc.insecure_channel(f"unix://{relay.path}") as ch,
            pytest.raises(grpc.RpcError) as err,
        ):
            if method.endswith("GetContainerEvents"):
                list(ch.unary_stream(method)(b"", timeout=LIMIT_S))
            else:
                ch.unary_unary(method)(b"", timeout=LIMIT_S)
    finally:
        relay.stop(0)
    # Fast: UNAVAILABLE, not the DEADLINE_EXCEEDED of a relay waiting for the runtime.
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert f"container runtime at unix://{missing} is unreachable" in err.value.details()


def test_image_calls_go_to_the_image_endpoint(
    sockdir: Path, memory_runtime: tuple[Path, FaultyRuntime]
) -> None:
    missing = sockdir / "no-runtime.sock"
    relay = RelayServer(
        str(sockdir / "a.sock"), str(missing), image_endpoint=str(memory_runtime[0])
    )
    relay.start()
    try:
        with CRIClient(relay.path, timeout=5) as c:
            c.pull_image("busybox")
            with pytest.raises(CRIError) as err:
                c.version()
    finally:
        relay.stop(0)
    assert [call.method for call in memory_runtime[1].calls] == ["PullImage"]
    assert str(missing) in err.value.details


# --------------------------------------------------------------- the socket on disk


def test_socket_is_created_with_mode_0660_in_a_new_directory(relay: RelayServer) -> None:
    path = Path(relay.path)
    st = path.stat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert sorted(p.name for p in path.parent.iterdir()) == ["agent.sock"]  # no temp left


def test_stale_socket_is_replaced(
    sockdir: Path, memory_runtime: tuple[Path, FaultyRuntime]
) -> None:
    path = sockdir / "agent.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: a crashed agent's leftover
    assert listen.is_live(path) is False
    relay = RelayServer(str(path), str(memory_runtime[0]))
    relay.start()
    try:
        with CRIClient(str(path), timeout=5) as c:
            assert c.version().runtime_name == "numa-agent-memory"
    finally:
        relay.stop(0)
    assert not path.exists()  # stop removes our socket


def test_live_agent_is_not_replaced(relay: RelayServer, memory_runtime: tuple[Path, Any]) -> None:
    second = RelayServer(relay.path, str(memory_runtime[0]))
    with pytest.raises(listen.SocketInUseError, match="already serving"):
        second.start()
    with CRIClient(relay.path, timeout=5) as c:  # the first one is untouched
        assert c.version().runtime_name == "numa-agent-memory"


def test_non_socket_file_is_refused(sockdir: Path) -> None:
    path = sockdir / "agent.sock"
    path.write_text("not a socket")
    with pytest.raises(listen.ListenError, match="not a socket"):
        RelayServer(str(path), "/run/x.sock").start()
    assert path.read_text() == "not a socket"


def test_stop_leaves_a_newer_agents_socket_alone(sockdir: Path, memory_runtime: Any) -> None:
    path = sockdir / "agent.sock"
    relay = RelayServer(str(path), str(memory_runtime[0]))
    relay.start()
    os.unlink(path)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(path))
    try:
        relay.stop(0)
        assert path.exists()
    finally:
        other.close()


# --------------------------------------------------------------- the hook table


def test_hook_rewrites_the_request(relay: RelayServer, client: CRIClient) -> None:
    def pin(request: bytes, forward: Forward, context: Any) -> bytes:
        req = cri_pb2.CreateContainerRequest.FromString(request)
        req.config.linux.resources.cpuset_cpus = "2-3"
        req.config.linux.resources.cpuset_mems = "0"
        return forward(req.SerializeToString())

    relay.hooks[CREATE] = pin
    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    cid = client.create_container(pod_id, kubelet_container_config(pod, "app", 2000, 2000), pod)
    res = client.container_status(cid).status.resources.linux
    assert (res.cpuset_cpus, res.cpuset_mems, res.cpu_shares) == ("2-3", "0", 2048)


def test_hook_refusal_never_reaches_the_runtime(
    relay: RelayServer, client: CRIClient, runtime: FaultyRuntime
) -> None:
    def refuse(request: bytes, forward: Forward, context: Any) -> bytes:
        raise HookAbort(grpc.StatusCode.INVALID_ARGUMENT, "annotation x: bad rule")

    relay.hooks[CREATE] = refuse
    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    with pytest.raises(CRIError) as err:
        client.create_container(pod_id, kubelet_container_config(pod, "app"), pod)
    assert (err.value.code, err.value.details) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "annotation x: bad rule",
    )
    assert "CreateContainer" not in [c.method for c in runtime.calls]


def test_hook_sees_runtime_failure_and_it_reaches_the_caller(
    relay: RelayServer, client: CRIClient, runtime: FaultyRuntime
) -> None:
    undone: list[BackendError] = []

    def undo_on_failure(request: bytes, forward: Forward, context: Any) -> bytes:
        try:
            return forward(request)
        except BackendError as err:
            undone.append(err)
            raise

    relay.hooks[CREATE] = undo_on_failure
    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    runtime.fail_next("CreateContainer", grpc.StatusCode.INTERNAL, "shim died")
    with pytest.raises(CRIError) as err:
        client.create_container(pod_id, kubelet_container_config(pod, "app"), pod)
    assert (err.value.code, err.value.details) == (grpc.StatusCode.INTERNAL, "shim died")
    assert [e.code for e in undone] == [grpc.StatusCode.INTERNAL]


def test_hook_can_call_the_runtime_on_its_own(
    relay: RelayServer, client: CRIClient, runtime: FaultyRuntime
) -> None:
    """The shared backend lets a hook update other containers after a create."""

    pod = _pod()
    pod_id = client.run_pod_sandbox(pod)
    first = client.create_container(pod_id, kubelet_container_config(pod, "a"), pod)

    def squeeze_first(request: bytes, forward: Forward, context: Any) -> bytes:
        reply = forward(request)
        update = cri_pb2.UpdateContainerResourcesRequest(
            container_id=first, linux=cri_pb2.LinuxContainerResources(cpuset_cpus="4-7")
        )
        relay.backend.unary(RT + "UpdateContainerResources", update.SerializeToString(), timeout=5)
        return reply

    relay.hooks[CREATE] = squeeze_first
    client.create_container(pod_id, kubelet_container_config(pod, "b"), pod)
    assert client.container_status(first).status.resources.linux.cpuset_cpus == "4-7"
