"""A blocking CRI client that talks to a runtime, or to the agent, as kubelet does.

Development only (tests, the demo, the benchmarks): the agent itself reaches the
runtime through the relay's raw-bytes `Backend`. Requests are shaped by the
builders in `agent.kubelet`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import Message

from agent.relay.endpoint import Endpoint
from proto import cri_pb2, cri_pb2_grpc

DEFAULT_TIMEOUT_S = 10.0
# kubelet's limit on CRI messages (pkg/kubelet/cri/remote: maxMsgSize).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class CRIError(Exception):
    """A CRI call failed; `code` is the gRPC status the runtime (or agent) gave."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


class CRIClient:
    """Blocking CRI client on one unix socket (runtime and image services)."""

    def __init__(self, endpoint: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.endpoint = Endpoint.parse(endpoint)
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            self.endpoint.target,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        self.runtime = cri_pb2_grpc.RuntimeServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self.images = cri_pb2_grpc.ImageServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CRIClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, method: str, stub_method: Callable[..., Any], request: Message) -> Any:
        try:
            return stub_method(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise CRIError(method, err.code(), err.details() or "") from err

    def version(self) -> cri_pb2.VersionResponse:
        resp: cri_pb2.VersionResponse = self._call(
            "Version", self.runtime.Version, cri_pb2.VersionRequest(version="v1")
        )
        return resp

    def run_pod_sandbox(self, config: cri_pb2.PodSandboxConfig, runtime_handler: str = "") -> str:
        req = cri_pb2.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        resp: cri_pb2.RunPodSandboxResponse = self._call(
            "RunPodSandbox", self.runtime.RunPodSandbox, req
        )
        return resp.pod_sandbox_id

    def stop_pod_sandbox(self, pod_id: str) -> None:
        req = cri_pb2.StopPodSandboxRequest(pod_sandbox_id=pod_id)
        self._call("StopPodSandbox", self.runtime.StopPodSandbox, req)

    def remove_pod_sandbox(self, pod_id: str) -> None:
        req = cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=pod_id)
        self._call("RemovePodSandbox", self.runtime.RemovePodSandbox, req)

    def pod_sandbox_status(
        self, pod_id: str, verbose: bool = False
    ) -> cri_pb2.PodSandboxStatusResponse:
        req = cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=pod_id, verbose=verbose)
        resp: cri_pb2.PodSandboxStatusResponse = self._call(
            "PodSandboxStatus", self.runtime.PodSandboxStatus, req
        )
        return resp

    def list_pod_sandbox(
        self, filter: cri_pb2.PodSandboxFilter | None = None
    ) -> list[cri_pb2.PodSandbox]:
        req = cri_pb2.ListPodSandboxRequest(filter=filter)
        resp: cri_pb2.ListPodSandboxResponse = self._call(
            "ListPodSandbox", self.runtime.ListPodSandbox, req
        )
        return list(resp.items)

    def create_container(
        self,
        pod_id: str,
        config: cri_pb2.ContainerConfig,
        sandbox_config: cri_pb2.PodSandboxConfig,
    ) -> str:
        req = cri_pb2.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=config, sandbox_config=sandbox_config
        )
        resp: cri_pb2.CreateContainerResponse = self._call(
            "CreateContainer", self.runtime.CreateContainer, req
        )
        return resp.container_id

    def start_container(self, container_id: str) -> None:
        req = cri_pb2.StartContainerRequest(container_id=container_id)
        self._call("StartContainer", self.runtime.StartContainer, req)

    def stop_container(self, container_id: str, timeout: int = 0) -> None:
        req = cri_pb2.StopContainerRequest(container_id=container_id, timeout=timeout)
        self._call("StopContainer", self.runtime.StopContainer, req)

    def remove_container(self, container_id: str) -> None:
        req = cri_pb2.RemoveContainerRequest(container_id=container_id)
        self._call("RemoveContainer", self.runtime.RemoveContainer, req)

    def list_containers(
        self, filter: cri_pb2.ContainerFilter | None = None
    ) -> list[cri_pb2.Container]:
        req = cri_pb2.ListContainersRequest(filter=filter)
        resp: cri_pb2.ListContainersResponse = self._call(
            "ListContainers", self.runtime.ListContainers, req
        )
        return list(resp.containers)

    def container_status(
        self, container_id: str, verbose: bool = False
    ) -> cri_pb2.ContainerStatusResponse:
        req = cri_pb2.ContainerStatusRequest(container_id=container_id, verbose=verbose)
        resp: cri_pb2.ContainerStatusResponse = self._call(
            "ContainerStatus", self.runtime.ContainerStatus, req
        )
        return resp

    def update_container_resources(
        self,
        container_id: str,
        linux: cri_pb2.LinuxContainerResources,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        req = cri_pb2.UpdateContainerResourcesRequest(
            container_id=container_id, linux=linux, annotations=dict(annotations or {})
        )
        self._call("UpdateContainerResources", self.runtime.UpdateContainerResources, req)

    def container_events(
        self, timeout: float | None = None
    ) -> Iterator[cri_pb2.ContainerEventResponse]:
        """GetContainerEvents; the stream ends when `timeout` runs out (None: never)."""
        stream = self.runtime.GetContainerEvents(cri_pb2.GetEventsRequest(), timeout=timeout)
        try:
            yield from stream
        except grpc.RpcError as err:
            raise CRIError("GetContainerEvents", err.code(), err.details() or "") from err
        finally:
            stream.cancel()

    def pull_image(self, image: str) -> str:
        req = cri_pb2.PullImageRequest(image=cri_pb2.ImageSpec(image=image))
        resp: cri_pb2.PullImageResponse = self._call("PullImage", self.images.PullImage, req)
        return resp.image_ref

    def list_images(self) -> list[cri_pb2.Image]:
        resp: cri_pb2.ListImagesResponse = self._call(
            "ListImages", self.images.ListImages, cri_pb2.ListImagesRequest()
        )
        return list(resp.images)

    def image_status(self, image: str) -> cri_pb2.ImageStatusResponse:
        req = cri_pb2.ImageStatusRequest(image=cri_pb2.ImageSpec(image=image))
        resp: cri_pb2.ImageStatusResponse = self._call("ImageStatus", self.images.ImageStatus, req)
        return resp
