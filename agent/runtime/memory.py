"""An in-memory CRI runtime: pods and containers as records, no processes.

The test double behind the relay tests and the runtime behind `simulate`.
Call it in-process (methods take and return cri_pb2 messages, failures raise
`RuntimeFault`) or serve it over gRPC on a unix socket with `serve_memory_runtime`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.node.describe import merge_update
from agent.relay.endpoint import Endpoint
from proto import cri_pb2, cri_pb2_grpc

Metadata = tuple[tuple[str, str | bytes], ...]

RUNTIME_NAME = "numa-agent-memory"
RUNTIME_VERSION = "0.1.0"
CRI_API_VERSION = "v1"


class RuntimeFault(Exception):
    """A CRI call the runtime refuses; served as this gRPC status."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailing_metadata: Metadata = ()
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call the runtime served over gRPC: what the relay actually sent."""

    method: str
    request: Any
    metadata: Metadata
    time_remaining: float | None


@dataclass(slots=True)
class _Sandbox:
    id: str
    config: cri_pb2.PodSandboxConfig
    runtime_handler: str
    created_at: int
    state: cri_pb2.PodSandboxState = cri_pb2.SANDBOX_READY


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


@dataclass(frozen=True, slots=True)
class Gate:
    """A call held inside the runtime: `entered` is set when it arrives, and it
    proceeds once `release` is set (a slow runtime, for tests of calls in flight)."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass(slots=True)
class _Faults:
    pending: dict[str, list[RuntimeFault]] = field(default_factory=dict)
    gates: dict[str, list[Gate]] = field(default_factory=dict)


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
        self._faults = _Faults()
        self.calls: list[CallRecord] = []

    # ------------------------------------------------------------- test controls

    def fail_next(
        self,
        method: str,
        code: grpc.StatusCode,
        details: str = "injected failure",
        trailing_metadata: Metadata = (),
    ) -> None:
        """Make the next call of `method` (e.g. "CreateContainer") fail with `code`."""
        with self._lock:
            self._faults.pending.setdefault(method, []).append(
                RuntimeFault(code, details, trailing_metadata)
            )

    def hold_next(self, method: str) -> Gate:
        """Hold the next call of `method` until the returned gate is released."""
        gate = Gate()
        with self._lock:
            self._faults.gates.setdefault(method, []).append(gate)
        return gate

    def exit_container(self, container_id: str, exit_code: int = 0) -> None:
        """The container's process ended on its own (an init container finishing)."""
        with self._lock:
            ctr = self._container(container_id)
            self._finish(ctr, exit_code)

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self.calls.append(record)

    def _take_fault(self, method: str) -> None:
        with self._lock:
            queue = self._faults.pending.get(method)
            fault = queue.pop(0) if queue else None
            gates = self._faults.gates.get(method)
            gate = gates.pop(0) if gates else None
        if gate is not None:
            gate.entered.set()
            gate.release.wait()
        if fault is not None:
            raise fault

    # ------------------------------------------------------------- helpers (lock held)

    def _new_id(self, kind: str) -> str:
        # 64 hex digits like containerd's ids; distinct prefixes, so crictl-style
        # short ids work; deterministic, so test runs repeat.
        return hashlib.sha256(f"{kind}-{next(self._ids)}".encode()).hexdigest()

    def _sandbox(self, pod_id: str) -> _Sandbox:
        sandbox = self._sandboxes.get(pod_id)
        if sandbox is None:
            raise RuntimeFault(grpc.StatusCode.NOT_FOUND, f"pod sandbox {pod_id!r} not found")
        return sandbox

    def _container(self, container_id: str) -> _Container:
        ctr = self._containers.get(container_id)
        if ctr is None:
            raise RuntimeFault(grpc.StatusCode.NOT_FOUND, f"container {container_id!r} not found")
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
        return cri_pb2.Container(
            id=ctr.id,
            pod_sandbox_id=ctr.pod_id,
            metadata=ctr.config.metadata,
            image=ctr.config.image,
            image_ref=ctr.config.image.image,
            state=ctr.state,
            created_at=ctr.created_at,
            labels=ctr.config.labels,
            annotations=ctr.config.annotations,
        )

    # ------------------------------------------------------------- RuntimeService

    def version(self, request: cri_pb2.VersionRequest) -> cri_pb2.VersionResponse:
        self._take_fault("Version")
        return cri_pb2.VersionResponse(
            version="0.1.0",
            runtime_name=RUNTIME_NAME,
            runtime_version=RUNTIME_VERSION,
            runtime_api_version=CRI_API_VERSION,
        )

    def run_pod_sandbox(
        self, request: cri_pb2.RunPodSandboxRequest
    ) -> cri_pb2.RunPodSandboxResponse:
        self._take_fault("RunPodSandbox")
        with self._lock:
            pod_id = self._new_id("pod")
            self._sandboxes[pod_id] = _Sandbox(
                pod_id, request.config, request.runtime_handler, time.time_ns()
            )
        return cri_pb2.RunPodSandboxResponse(pod_sandbox_id=pod_id)

    def stop_pod_sandbox(
        self, request: cri_pb2.StopPodSandboxRequest
    ) -> cri_pb2.StopPodSandboxResponse:
        self._take_fault("StopPodSandbox")
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
        self._take_fault("RemovePodSandbox")
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
        self._take_fault("PodSandboxStatus")
        with self._lock:
            sb = self._sandbox(request.pod_sandbox_id)
            status = cri_pb2.PodSandboxStatus(
                id=sb.id,
                metadata=sb.config.metadata,
                state=sb.state,
                created_at=sb.created_at,
                labels=sb.config.labels,
                annotations=sb.config.annotations,
                runtime_handler=sb.runtime_handler,
            )
        return cri_pb2.PodSandboxStatusResponse(status=status)

    def list_pod_sandbox(
        self, request: cri_pb2.ListPodSandboxRequest
    ) -> cri_pb2.ListPodSandboxResponse:
        self._take_fault("ListPodSandbox")
        flt = request.filter
        with self._lock:
            items = [
                cri_pb2.PodSandbox(
                    id=sb.id,
                    metadata=sb.config.metadata,
                    state=sb.state,
                    created_at=sb.created_at,
                    labels=sb.config.labels,
                    annotations=sb.config.annotations,
                    runtime_handler=sb.runtime_handler,
                )
                for sb in self._sandboxes.values()
                if (not flt.id or sb.id.startswith(flt.id))
                and (not flt.HasField("state") or sb.state == flt.state.state)
                and _labels_match(sb.config.labels, flt.label_selector)
            ]
        return cri_pb2.ListPodSandboxResponse(items=items)

    def create_container(
        self, request: cri_pb2.CreateContainerRequest
    ) -> cri_pb2.CreateContainerResponse:
        self._take_fault("CreateContainer")
        with self._lock:
            sandbox = self._sandbox(request.pod_sandbox_id)
            if sandbox.state != cri_pb2.SANDBOX_READY:
                raise RuntimeFault(
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
        self._take_fault("StartContainer")
        with self._lock:
            ctr = self._container(request.container_id)
            if ctr.state != cri_pb2.CONTAINER_CREATED:
                raise RuntimeFault(
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
        self._take_fault("StopContainer")
        with self._lock:
            self._finish(self._container(request.container_id), 137)
        return cri_pb2.StopContainerResponse()

    def remove_container(
        self, request: cri_pb2.RemoveContainerRequest
    ) -> cri_pb2.RemoveContainerResponse:
        self._take_fault("RemoveContainer")
        with self._lock:
            ctr = self._containers.pop(request.container_id, None)
            if ctr is not None:
                self._emit(ctr.id, cri_pb2.CONTAINER_DELETED_EVENT)
        return cri_pb2.RemoveContainerResponse()

    def list_containers(
        self, request: cri_pb2.ListContainersRequest
    ) -> cri_pb2.ListContainersResponse:
        self._take_fault("ListContainers")
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
        self._take_fault("ContainerStatus")
        with self._lock:
            ctr = self._container(request.container_id)
            status = cri_pb2.ContainerStatus(
                id=ctr.id,
                metadata=ctr.config.metadata,
                state=ctr.state,
                created_at=ctr.created_at,
                started_at=ctr.started_at,
                finished_at=ctr.finished_at,
                exit_code=ctr.exit_code,
                image=ctr.config.image,
                image_ref=ctr.config.image.image,
                labels=ctr.config.labels,
                annotations=ctr.config.annotations,
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
        self._take_fault("UpdateContainerResources")
        with self._lock:
            ctr = self._container(request.container_id)
            if ctr.state not in (cri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_RUNNING):
                raise RuntimeFault(
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
        self._take_fault("GetContainerEvents")
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
        self._take_fault("ListImages")
        with self._lock:
            return cri_pb2.ListImagesResponse(images=list(self._images.values()))

    def image_status(self, request: cri_pb2.ImageStatusRequest) -> cri_pb2.ImageStatusResponse:
        self._take_fault("ImageStatus")
        with self._lock:
            image = self._images.get(request.image.image)
        # CRI: an unknown image is an empty response, not an error.
        return cri_pb2.ImageStatusResponse(image=image) if image else cri_pb2.ImageStatusResponse()

    def pull_image(self, request: cri_pb2.PullImageRequest) -> cri_pb2.PullImageResponse:
        self._take_fault("PullImage")
        name = request.image.image
        ref = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
        with self._lock:
            self._images[name] = cri_pb2.Image(id=ref, repo_tags=[name], size=1)
        return cri_pb2.PullImageResponse(image_ref=ref)

    def remove_image(self, request: cri_pb2.RemoveImageRequest) -> cri_pb2.RemoveImageResponse:
        self._take_fault("RemoveImage")
        with self._lock:
            self._images.pop(request.image.image, None)
        return cri_pb2.RemoveImageResponse()


# --------------------------------------------------------------------------- gRPC serving


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


def _unary(
    runtime: MemoryRuntime, method: str, impl: Callable[[Any], Any]
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        runtime.record(
            CallRecord(
                method,
                request,
                tuple(context.invocation_metadata()),
                context.time_remaining(),
            )
        )
        try:
            return impl(request)
        except RuntimeFault as fault:
            context.set_trailing_metadata(fault.trailing_metadata)
            context.abort(fault.code, fault.details)

    return handle


class _RuntimeServicer(cri_pb2_grpc.RuntimeServiceServicer):
    def __init__(self, runtime: MemoryRuntime) -> None:
        self._runtime = runtime
        for rpc, attr in RUNTIME_METHODS.items():
            setattr(self, rpc, _unary(runtime, rpc, getattr(runtime, attr)))

    def GetContainerEvents(
        self, request: cri_pb2.GetEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[cri_pb2.ContainerEventResponse]:
        runtime = self._runtime
        runtime.record(
            CallRecord(
                "GetContainerEvents",
                request,
                tuple(context.invocation_metadata()),
                context.time_remaining(),
            )
        )
        cancelled = threading.Event()

        def on_done() -> None:
            cancelled.set()
            runtime.wake_event_streams()

        context.add_callback(on_done)
        try:
            yield from runtime.get_container_events(request, cancelled)
        except RuntimeFault as fault:
            context.set_trailing_metadata(fault.trailing_metadata)
            context.abort(fault.code, fault.details)


class _ImageServicer(cri_pb2_grpc.ImageServiceServicer):
    def __init__(self, runtime: MemoryRuntime) -> None:
        for rpc, attr in IMAGE_METHODS.items():
            setattr(self, rpc, _unary(runtime, rpc, getattr(runtime, attr)))


def serve_memory_runtime(
    path: str | Path,
    runtime: MemoryRuntime | None = None,
    extra_handlers: Sequence[grpc.GenericRpcHandler] = (),
    max_workers: int = 16,
) -> tuple[grpc.Server, MemoryRuntime]:
    """Serve `runtime` (a new one if None) on the unix socket `path`; started.

    `extra_handlers` lets a test add methods the runtime does not implement
    (a CRI method from the future). Stop the server with `server.stop(grace)`.
    """
    runtime = runtime or MemoryRuntime()
    endpoint = Endpoint.parse(str(path))
    endpoint.path.parent.mkdir(parents=True, exist_ok=True)
    if endpoint.path.exists():
        os.unlink(endpoint.path)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
    cri_pb2_grpc.add_RuntimeServiceServicer_to_server(_RuntimeServicer(runtime), server)  # type: ignore[no-untyped-call]
    cri_pb2_grpc.add_ImageServiceServicer_to_server(_ImageServicer(runtime), server)  # type: ignore[no-untyped-call]
    handlers: Iterable[grpc.GenericRpcHandler] = extra_handlers
    server.add_generic_rpc_handlers(tuple(handlers))
    server.add_insecure_port(endpoint.target)
    server.start()
    return server, runtime
