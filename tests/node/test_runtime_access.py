"""The runtime as the agent calls it on its own: in-process dispatch and gRPC give the
same answers and the same BackendError for the same failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.runtime_access import (
    GrpcRuntimeAccess,
    InProcessRuntimeAccess,
    RuntimeAccess,
)
from agent.relay.backend import BackendError
from agent.runtime.inprocess import dispatch
from devtools.fake_runtime import FaultyRuntime as MemoryRuntime
from devtools.fake_runtime import serve_memory_runtime
from proto import cri_pb2


@pytest.fixture(params=["inprocess", "grpc"])
def access(
    request: pytest.FixtureRequest, sockdir: Path
) -> Iterator[tuple[RuntimeAccess, MemoryRuntime]]:
    runtime = MemoryRuntime()
    if request.param == "inprocess":
        yield InProcessRuntimeAccess(runtime), runtime
        return
    server, _ = serve_memory_runtime(sockdir / "rt.sock", runtime)
    grpc_access = GrpcRuntimeAccess(f"unix://{sockdir / 'rt.sock'}", timeout=5)
    yield grpc_access, runtime
    grpc_access.close()
    server.stop(None)


def _one_container(runtime: MemoryRuntime) -> tuple[str, str]:
    pod = kubelet_pod_config("p", "default", "uid-p")
    sandbox = runtime.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
    config = kubelet_container_config(pod, "c", 500, 0, 1 << 28, cpuset_cpus="0-3")
    cid = runtime.create_container(
        cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=pod)
    ).container_id
    return sandbox, cid


def test_listing_status_and_update(access: tuple[RuntimeAccess, MemoryRuntime]) -> None:
    rt, runtime = access
    sandbox, cid = _one_container(runtime)
    assert [s.id for s in rt.list_pod_sandboxes()] == [sandbox]
    assert [(c.id, c.metadata.name) for c in rt.list_containers()] == [(cid, "c")]
    assert rt.container_status(cid).resources.linux.cpuset_cpus == "0-3"
    rt.update_container_resources(
        cid, cri_pb2.LinuxContainerResources(cpuset_cpus="2", memory_limit_in_bytes=1 << 28)
    )
    assert rt.container_status(cid).resources.linux.cpuset_cpus == "2"


def test_runtime_failure_is_backend_error(access: tuple[RuntimeAccess, MemoryRuntime]) -> None:
    rt, runtime = access
    runtime.fail_next("ListContainers", grpc.StatusCode.UNAVAILABLE, "restarting")
    with pytest.raises(BackendError) as err:
        rt.list_containers()
    assert (err.value.code, err.value.details) == (grpc.StatusCode.UNAVAILABLE, "restarting")
    with pytest.raises(BackendError) as missing:
        rt.container_status("nope")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND


def test_dispatch_records_calls_and_refuses_unknown_methods() -> None:
    runtime = MemoryRuntime()
    raw = dispatch(
        runtime, "/runtime.v1.RuntimeService/Version", cri_pb2.VersionRequest().SerializeToString()
    )
    assert cri_pb2.VersionResponse.FromString(raw).runtime_api_version == "v1"
    assert [c.method for c in runtime.calls] == ["Version"]
    with pytest.raises(BackendError) as err:
        dispatch(runtime, "/runtime.v1.RuntimeService/FutureMethod", b"")
    assert err.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert "FutureMethod" in err.value.details
