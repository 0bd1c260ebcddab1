"""An in-memory CRI runtime: pods and containers as records, no processes.

The runtime behind `simulate` (and the tests): methods take and return cri_pb2
messages, refusals raise `CallRefused`; `call` takes a call by its CRI name, as
`agent.runtime.inprocess.dispatch` forwards it. It has no fault injection and
records nothing: the tests' `devtools.fake_runtime.FaultyRuntime` adds that, and
serves it over gRPC.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from agent.node.describe import merge_update
from proto import cri_pb2

Metadata = tuple[tuple[str, str | bytes], ...]

RUNTIME_NAME = "numa-agent-memory"
RUNTIME_VERSION = "0.1.0"
CRI_API_VERSION = "v1"


# CRI method name -> MemoryRuntime method, per service.
RUNTIME_METHODS: dict[str, str] = {
    "Version": "version",
    "RunPodSandbox": "run_pod_sandbox",
    "StopPodSandbox": "stop_pod_sandbox",
    "RemovePodSandbox": "remove_pod_sandbox",
    "PodSandboxStatus": "pod_sandbox_status",
    "ListPodSandbox": "list_pod_sandbox",
    "CreateContainer": "create_container",
    "StartContainer": "start_container",
    "StopContainer": "stop_container",
    "RemoveContainer": "remove_container",
    "ListContainers": "list_containers",
    "ContainerStatus": "container_status",
    "UpdateContainerResources": "update_container_resources",
}
IMAGE_METHODS: dict[str, str] = {
    "ListImages": "list_images",
    "ImageStatus": "image_status",
    "PullImage": "pull_image",
    "RemoveImage": "remove_image",
}


class CallRefused(Exception):
    """A CRI call the runtime refuses (an unknown id, a container not running);
    the gRPC status a served runtime answers with."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailing_metadata: Metadata = ()
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


@dataclass(slots=True)
class _Sandbox:
    id: str
    config: cri_pb2.PodSandboxConfig
    runtime_handler: str
    created_at: int
    state: cri_pb2.PodSandboxState = cri_pb2.SANDBOX_READY

    def fields(self) -> dict[str, Any]:
        """What a listed PodSandbox and a PodSandboxStatus both say of it."""
        return {
            "id": self.id,
            "metadata": self.config.metadata,
            "state": self.state,
            "created_at": self.created_at,
            "labels": self.config.labels,
            "annotations": self.config.annotations,
            "runtime_handler": self.runtime_handler,
        }


@dataclass(slots=True)
class _Container:
    id: str
    pod_id: str
    config: cri_pb2.ContainerConfig
    resources: cri_pb2.LinuxContainerResources
    created_at: int
    state: cri_pb2.ContainerState = cri_pb2.CONTAINER_CREATED
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    pid: int = 0

    def fields(self) -> dict[str, Any]:
        """What a listed Container and a ContainerStatus both say of it."""
        return {
            "id": self.id,
            "metadata": self.config.metadata,
            "state": self.state,
            "created_at": self.created_at,
            "image": self.config.image,
            "image_ref": self.config.image.image,
            "labels": self.config.labels,
            "annotations": self.config.annotations,
        }


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class MemoryRuntime:
    """A CRI runtime whose pods and containers live in dicts. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events_changed = threading.Condition(self._lock)
        self._sandboxes: dict[str, _Sandbox] = {}
        self._containers: dict[str, _Container] = {}
        self._images: dict[str, cri_pb2.Image] = {}
        self._events: list[cri_pb2.ContainerEventResponse] = []
        self._ids = itertools.count(1)
        self._pids = itertools.count(1000)

    def call(self, method: str, request: Any) -> Any:
        """One call by its CRI name ("CreateContainer"), as a relay forwards it."""
        attr = RUNTIME_METHODS.get(method) or IMAGE_METHODS.get(method)
        if attr is None:
            raise CallRefused(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented")
        return getattr(self, attr)(request)

    # ------------------------------------------------------------- what happens on the node

    def exit_container(self, container_id: str, exit_code: int = 0) -> None:
        """The container's process ended on its own (an init container finishing)."""
        with self._lock:
            ctr = self._container(container_id)
            self._finish(ctr, exit_code)

    # ------------------------------------------------------------- helpers (lock held)

    def _new_id(self, kind: str) -> str:
        # 64 hex digits like containerd's ids; distinct prefixes, so crictl-style
        # short ids work; deterministic, so test runs repeat.
        return hashlib.sha256(f"{kind}-{next(self._ids)}".encode()).hexdigest()

    def _sandbox(self, pod_id: str) -> _Sandbox:
        sandbox = self._sandboxes.get(pod_id)
        if sandbox is None:
            raise CallRefused(grpc.StatusCode.NOT_FOUND, f"pod sandbox {pod_id!r} not found")
        return sandbox

    def _container(self, container_id: str) -> _Container:
        ctr = self._containers.get(container_id)
        if ctr is None:
            raise CallRefused(grpc.StatusCode.NOT_FOUND, f"container {container_id!r} not found")
        return ctr

    def _emit(self, container_id: str, kind: cri_pb2.ContainerEventType) -> None:
        self._events.append(
            cri_pb2.ContainerEventResponse(
                container_id=container_id, container_event_type=kind, created_at=time.time_ns()
            )
        )
        self._events_changed.notify_all()

    def _finish(self, ctr: _Container, exit_code: int) -> None:
        if ctr.state == cri_pb2.CONTAINER_EXITED:
            return
        ctr.state = cri_pb2.CONTAINER_EXITED
        ctr.finished_at = time.time_ns()
        ctr.exit_code = exit_code
        ctr.pid = 0
        self._emit(ctr.id, cri_pb2.CONTAINER_STOPPED_EVENT)

    def _to_container(self, ctr: _Container) -> cri_pb2.Container:
        return cri_pb2.Container(pod_sandbox_id=ctr.pod_id, **ctr.fields())

    # ------------------------------------------------------------- RuntimeService

    def version(self, request: cri_pb2.VersionRequest) -> cri_pb2.VersionResponse:
        return cri_pb2.VersionResponse(
            version="0.1.0",
            runtime_name=RUNTIME_NAME,
            runtime_version=RUNTIME_VERSION,
            runtime_api_version=CRI_API_VERSION,
        )

    def run_pod_sandbox(
        self, request: cri_pb2.RunPodSandboxRequest
    ) -> cri_pb2.RunPodSandboxResponse:
        with self._lock:
            pod_id = self._new_id("pod")
            self._sandboxes[pod_id] = _Sandbox(
                pod_id, request.config, request.runtime_handler, time.time_ns()
            )
        return cri_pb2.RunPodSandboxResponse(pod_sandbox_id=pod_id)

    def stop_pod_sandbox(
        self, request: cri_pb2.StopPodSandboxRequest
    ) -> cri_pb2.StopPodSandboxResponse:
        with self._lock:
            sandbox = self._sandbox(request.pod_sandbox_id)
            for ctr in self._containers.values():
                if ctr.pod_id == sandbox.id:
                    self._finish(ctr, 137)
            sandbox.state = cri_pb2.SANDBOX_NOTREADY
        return cri_pb2.StopPodSandboxResponse()

    def remove_pod_sandbox(
        self, request: cri_pb2.RemovePodSandboxRequest
    ) -> cri_pb2.RemovePodSandboxResponse:
        with self._lock:
            # Removing what is already gone succeeds, as in containerd.
            if self._sandboxes.pop(request.pod_sandbox_id, None) is not None:
                for ctr in [
                    c for c in self._containers.values() if c.pod_id == request.pod_sandbox_id
                ]:
                    self._finish(ctr, 137)
                    del self._containers[ctr.id]
                    self._emit(ctr.id, cri_pb2.CONTAINER_DELETED_EVENT)
        return cri_pb2.RemovePodSandboxResponse()

    def pod_sandbox_status(
        self, request: cri_pb2.PodSandboxStatusRequest
    ) -> cri_pb2.PodSandboxStatusResponse:
        with self._lock:
            sb = self._sandbox(request.pod_sandbox_id)
            status = cri_pb2.PodSandboxStatus(**sb.fields())
            # As containerd: the sandbox's config (its cgroup parent) in the verbose info.
            config = {"linux": {"cgroup_parent": sb.config.linux.cgroup_parent}}
            info = {"info": json.dumps({"config": config})} if request.verbose else {}
        return cri_pb2.PodSandboxStatusResponse(status=status, info=info)

    def list_pod_sandbox(
        self, request: cri_pb2.ListPodSandboxRequest
    ) -> cri_pb2.ListPodSandboxResponse:
        flt = request.filter
        with self._lock:
            items = [
                cri_pb2.PodSandbox(**sb.fields())
                for sb in self._sandboxes.values()
                if (not flt.id or sb.id.startswith(flt.id))
                and (not flt.HasField("state") or sb.state == flt.state.state)
                and _labels_match(sb.config.labels, flt.label_selector)
            ]
        return cri_pb2.ListPodSandboxResponse(items=items)

    def create_container(
        self, request: cri_pb2.CreateContainerRequest
    ) -> cri_pb2.CreateContainerResponse:
        with self._lock:
            sandbox = self._sandbox(request.pod_sandbox_id)
            if sandbox.state != cri_pb2.SANDBOX_READY:
                raise CallRefused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"pod sandbox {sandbox.id!r} is not ready",
                )
            ctr_id = self._new_id("ctr")
            resources = cri_pb2.LinuxContainerResources()
            resources.CopyFrom(request.config.linux.resources)
            self._containers[ctr_id] = _Container(
                ctr_id, sandbox.id, request.config, resources, time.time_ns()
            )
            self._emit(ctr_id, cri_pb2.CONTAINER_CREATED_EVENT)
        return cri_pb2.CreateContainerResponse(container_id=ctr_id)

    def start_container(
        self, request: cri_pb2.StartContainerRequest
    ) -> cri_pb2.StartContainerResponse:
        with self._lock:
            ctr = self._container(request.container_id)
            if ctr.state != cri_pb2.CONTAINER_CREATED:
                raise CallRefused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"container {ctr.id!r} is in state "
                    f"{cri_pb2.ContainerState.Name(ctr.state)}, not CONTAINER_CREATED",
                )
            ctr.state = cri_pb2.CONTAINER_RUNNING
            ctr.started_at = time.time_ns()
            ctr.pid = next(self._pids)
            self._emit(ctr.id, cri_pb2.CONTAINER_STARTED_EVENT)
        return cri_pb2.StartContainerResponse()

    def stop_container(
        self, request: cri_pb2.StopContainerRequest
    ) -> cri_pb2.StopContainerResponse:
        with self._lock:
            self._finish(self._container(request.container_id), 137)
        return cri_pb2.StopContainerResponse()

    def remove_container(
        self, request: cri_pb2.RemoveContainerRequest
    ) -> cri_pb2.RemoveContainerResponse:
        with self._lock:
            ctr = self._containers.pop(request.container_id, None)
            if ctr is not None:
                self._emit(ctr.id, cri_pb2.CONTAINER_DELETED_EVENT)
        return cri_pb2.RemoveContainerResponse()

    def list_containers(
        self, request: cri_pb2.ListContainersRequest
    ) -> cri_pb2.ListContainersResponse:
        flt = request.filter
        with self._lock:
            containers = [
                self._to_container(ctr)
                for ctr in self._containers.values()
                if (not flt.id or ctr.id.startswith(flt.id))
                and (not flt.HasField("state") or ctr.state == flt.state.state)
                and (not flt.pod_sandbox_id or ctr.pod_id.startswith(flt.pod_sandbox_id))
                and _labels_match(ctr.config.labels, flt.label_selector)
            ]
        return cri_pb2.ListContainersResponse(containers=containers)

    def container_status(
        self, request: cri_pb2.ContainerStatusRequest
    ) -> cri_pb2.ContainerStatusResponse:
        with self._lock:
            ctr = self._container(request.container_id)
            status = cri_pb2.ContainerStatus(
                **ctr.fields(),
                started_at=ctr.started_at,
                finished_at=ctr.finished_at,
                exit_code=ctr.exit_code,
                log_path=ctr.config.log_path,
                resources=cri_pb2.ContainerResources(linux=ctr.resources),
            )
            info = (
                {"info": json.dumps({"pid": ctr.pid, "sandboxID": ctr.pod_id})}
                if request.verbose
                else {}
            )
        return cri_pb2.ContainerStatusResponse(status=status, info=info)

    def update_container_resources(
        self, request: cri_pb2.UpdateContainerResourcesRequest
    ) -> cri_pb2.UpdateContainerResourcesResponse:
        with self._lock:
            ctr = self._container(request.container_id)
            if ctr.state not in (cri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_RUNNING):
                raise CallRefused(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"container {ctr.id!r} is in state {cri_pb2.ContainerState.Name(ctr.state)}",
                )
            ctr.resources = merge_update(ctr.resources, request.linux)  # containerd 1.6's rule
        return cri_pb2.UpdateContainerResourcesResponse()

    def get_container_events(
        self, request: cri_pb2.GetEventsRequest, cancelled: threading.Event | None = None
    ) -> Iterator[cri_pb2.ContainerEventResponse]:
        """Every event so far, then (with `cancelled`) new ones until it is set.

        Replaying history (unlike a real runtime) lets a test read a known
        number of events without racing the calls that cause them.
        """
        sent = 0
        while True:
            with self._lock:
                while (
                    sent == len(self._events) and cancelled is not None and not cancelled.is_set()
                ):
                    self._events_changed.wait()
                batch = self._events[sent:]
            sent += len(batch)
            yield from batch
            if cancelled is None or cancelled.is_set():
                return

    def wake_event_streams(self) -> None:
        with self._lock:
            self._events_changed.notify_all()

    # ------------------------------------------------------------- ImageService

    def list_images(self, request: cri_pb2.ListImagesRequest) -> cri_pb2.ListImagesResponse:
        with self._lock:
            return cri_pb2.ListImagesResponse(images=list(self._images.values()))

    def image_status(self, request: cri_pb2.ImageStatusRequest) -> cri_pb2.ImageStatusResponse:
        with self._lock:
            image = self._images.get(request.image.image)
        # CRI: an unknown image is an empty response, not an error.
        return cri_pb2.ImageStatusResponse(image=image) if image else cri_pb2.ImageStatusResponse()

    def pull_image(self, request: cri_pb2.PullImageRequest) -> cri_pb2.PullImageResponse:
        name = request.image.image
        ref = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
        with self._lock:
            self._images[name] = cri_pb2.Image(id=ref, repo_tags=[name], size=1)
        return cri_pb2.PullImageResponse(image_ref=ref)

    def remove_image(self, request: cri_pb2.RemoveImageRequest) -> cri_pb2.RemoveImageResponse:
        with self._lock:
            self._images.pop(request.image.image, None)
        return cri_pb2.RemoveImageResponse()
