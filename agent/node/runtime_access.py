"""Calls the agent makes to the runtime on its own initiative (start-up listing,
cpuset updates to other containers), over gRPC or in-process. Failures raise
the relay's `BackendError` in both cases."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol

from agent.node.methods import (
    CONTAINER_STATUS,
    LIST_CONTAINERS,
    LIST_POD_SANDBOX,
    POD_SANDBOX_STATUS,
    UPDATE_CONTAINER_RESOURCES,
)
from agent.relay.backend import Backend
from agent.relay.endpoint import Endpoint
from agent.runtime.inprocess import dispatch
from agent.runtime.memory import MemoryRuntime
from proto import cri_pb2


class RuntimeAccess(Protocol):
    def list_pod_sandboxes(self) -> list[cri_pb2.PodSandbox]: ...

    def pod_cgroup_parent(self, sandbox_id: str) -> str: ...

    def list_containers(self, sandbox_id: str = "") -> list[cri_pb2.Container]: ...

    def container_status(self, container_id: str) -> cri_pb2.ContainerStatus: ...

    def container_pid(self, container_id: str) -> int | None: ...

    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None: ...


def pid_from_info(info: Mapping[str, str]) -> int | None:
    """The container's process id from a verbose ContainerStatus's `info` (containerd
    and CRI-O put it in info["info"], a JSON object with "pid"); None if not there."""
    text = info.get("info", "")
    try:
        pid = json.loads(text).get("pid") if text else None
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def cgroup_parent_from_info(info: Mapping[str, str]) -> str:
    """The pod's cgroup parent from a verbose PodSandboxStatus's `info`: containerd
    puts the sandbox's config in info["info"] (JSON: config.linux.cgroup_parent);
    "" if not there."""
    text = info.get("info", "")
    try:
        parent = json.loads(text)["config"]["linux"]["cgroup_parent"] if text else ""
    except (ValueError, KeyError, TypeError):
        return ""
    return parent if isinstance(parent, str) else ""


class _RawAccess:
    """The four calls over any raw-bytes `call(method, request) -> reply`."""

    def _call(self, method: str, request: bytes) -> bytes:
        raise NotImplementedError

    def list_pod_sandboxes(self) -> list[cri_pb2.PodSandbox]:
        raw = self._call(LIST_POD_SANDBOX, cri_pb2.ListPodSandboxRequest().SerializeToString())
        return list(cri_pb2.ListPodSandboxResponse.FromString(raw).items)

    def pod_cgroup_parent(self, sandbox_id: str) -> str:
        """The pod's cgroup parent as the runtime reports it (its QoS class is in it);
        "" if the runtime does not say."""
        request = cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=True)
        raw = self._call(POD_SANDBOX_STATUS, request.SerializeToString())
        return cgroup_parent_from_info(cri_pb2.PodSandboxStatusResponse.FromString(raw).info)

    def list_containers(self, sandbox_id: str = "") -> list[cri_pb2.Container]:
        """Every container, or those of one pod sandbox (a smaller reply)."""
        request = cri_pb2.ListContainersRequest()
        if sandbox_id:
            request.filter.pod_sandbox_id = sandbox_id
        raw = self._call(LIST_CONTAINERS, request.SerializeToString())
        return list(cri_pb2.ListContainersResponse.FromString(raw).containers)

    def container_status(self, container_id: str) -> cri_pb2.ContainerStatus:
        request = cri_pb2.ContainerStatusRequest(container_id=container_id)
        raw = self._call(CONTAINER_STATUS, request.SerializeToString())
        return cri_pb2.ContainerStatusResponse.FromString(raw).status

    def container_pid(self, container_id: str) -> int | None:
        """The container's process id from the verbose status (containerd and CRI-O
        put it in info["info"], a JSON object with "pid"); None if not reported."""
        request = cri_pb2.ContainerStatusRequest(container_id=container_id, verbose=True)
        raw = self._call(CONTAINER_STATUS, request.SerializeToString())
        return pid_from_info(cri_pb2.ContainerStatusResponse.FromString(raw).info)

    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None:
        request = cri_pb2.UpdateContainerResourcesRequest(container_id=container_id, linux=linux)
        self._call(UPDATE_CONTAINER_RESOURCES, request.SerializeToString())


class GrpcRuntimeAccess(_RawAccess):
    """The runtime at `endpoint` (unix:///path or a path), each call bounded by
    `timeout`, and each cpuset update by `update_timeout` (its own deadline)."""

    def __init__(self, endpoint: str, timeout: float = 10.0, update_timeout: float = 5.0) -> None:
        self._backend = Backend(Endpoint.parse(endpoint))
        self.timeout = timeout
        self.update_timeout = update_timeout

    def _call(self, method: str, request: bytes) -> bytes:
        limit = self.update_timeout if method == UPDATE_CONTAINER_RESOURCES else self.timeout
        return self._backend.unary(method, request, timeout=limit).body

    def close(self) -> None:
        self._backend.close()


class InProcessRuntimeAccess(_RawAccess):
    """A MemoryRuntime called directly (simulate, tests)."""

    def __init__(self, runtime: MemoryRuntime) -> None:
        self.runtime = runtime

    def _call(self, method: str, request: bytes) -> bytes:
        return dispatch(self.runtime, method, request)
