"""A small CRI client that talks and shapes requests as kubelet does.

`CRIClient` wraps the RuntimeService/ImageService stubs; `kubelet_pod_config`
and `kubelet_container_config` are pure builders of the messages kubelet sends.
Used by the e2e tests, `simulate` and the demo to drive a runtime or the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import Message

from agent.relay.endpoint import Endpoint
from agent.workload import QoSClass
from proto import cri_pb2, cri_pb2_grpc

DEFAULT_TIMEOUT_S = 10.0
# kubelet's limit on CRI messages (pkg/kubelet/cri/remote: maxMsgSize).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# kubelet's constants (pkg/kubelet/cm/helpers_linux.go).
MIN_SHARES = 2
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
DEFAULT_CPU_PERIOD = 100_000
MIN_QUOTA_PERIOD = 1000

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"


class CRIError(Exception):
    """A CRI call failed; `code` is the gRPC status the runtime (or agent) gave."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


# --------------------------------------------------------------------------- builders


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """kubelet's MilliCPUToShares: a request of 0 (BestEffort) still gets 2 shares."""
    if milli_cpu == 0:
        return MIN_SHARES
    return max(MIN_SHARES, milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU)


def milli_cpu_to_quota(milli_cpu: int, period: int = DEFAULT_CPU_PERIOD) -> int:
    """kubelet's milliCPUToQuota: 0 means no limit."""
    if milli_cpu == 0:
        return 0
    return max(MIN_QUOTA_PERIOD, milli_cpu * period // MILLI_CPU_TO_CPU)


def pod_cgroup_parent(uid: str, qos: QoSClass, cgroup_driver: str = "systemd") -> str:
    """The pod cgroup kubelet puts in LinuxPodSandboxConfig.cgroup_parent.

    With the systemd driver kubelet escapes '-' in the uid to '_' (systemd uses
    '-' as the slice hierarchy separator).
    """
    if cgroup_driver == "systemd":
        tier = {
            QoSClass.GUARANTEED: "",
            QoSClass.BURSTABLE: "-burstable",
            QoSClass.BESTEFFORT: "-besteffort",
        }[qos]
        return f"kubepods{tier}-pod{uid.replace('-', '_')}.slice"
    if cgroup_driver == "cgroupfs":
        tier = {
            QoSClass.GUARANTEED: "",
            QoSClass.BURSTABLE: "/burstable",
            QoSClass.BESTEFFORT: "/besteffort",
        }[qos]
        return f"/kubepods{tier}/pod{uid}"
    raise ValueError(f"cgroup driver {cgroup_driver!r}: expected 'systemd' or 'cgroupfs'")


def kubelet_pod_config(
    name: str,
    namespace: str,
    uid: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    qos: QoSClass = QoSClass.BESTEFFORT,
    cgroup_driver: str = "systemd",
    *,
    attempt: int = 0,
    host_network: bool = True,
    log_root: str = "/var/log/pods",
) -> cri_pb2.PodSandboxConfig:
    """The PodSandboxConfig kubelet sends in RunPodSandbox (and again in
    CreateContainerRequest.sandbox_config). Host networking by default: it
    needs no CNI, and kubelet leaves `hostname` empty for such pods."""
    all_labels = dict(labels or {})
    all_labels.update({POD_NAME_LABEL: name, POD_NAMESPACE_LABEL: namespace, POD_UID_LABEL: uid})
    network = cri_pb2.NODE if host_network else cri_pb2.POD
    return cri_pb2.PodSandboxConfig(
        metadata=cri_pb2.PodSandboxMetadata(
            name=name, uid=uid, namespace=namespace, attempt=attempt
        ),
        hostname="" if host_network else name,
        log_directory=f"{log_root}/{namespace}_{name}_{uid}",
        labels=all_labels,
        annotations=dict(annotations or {}),
        linux=cri_pb2.LinuxPodSandboxConfig(
            cgroup_parent=pod_cgroup_parent(uid, qos, cgroup_driver),
            security_context=cri_pb2.LinuxSandboxSecurityContext(
                namespace_options=cri_pb2.NamespaceOption(
                    network=network, pid=cri_pb2.CONTAINER, ipc=cri_pb2.POD
                )
            ),
        ),
    )


def kubelet_container_resources(
    cpu_request_milli: int = 0,
    cpu_limit_milli: int = 0,
    memory_limit_bytes: int = 0,
    *,
    cpu_period: int = DEFAULT_CPU_PERIOD,
    cpuset_cpus: str = "",
    oom_score_adj: int = 0,
) -> cri_pb2.LinuxContainerResources:
    """The LinuxContainerResources kubelet computes from a container's requests
    and limits. Period and quota are sent only when there is a CPU limit."""
    resources = cri_pb2.LinuxContainerResources(
        cpu_shares=milli_cpu_to_shares(cpu_request_milli),
        memory_limit_in_bytes=memory_limit_bytes,
        oom_score_adj=oom_score_adj,
        cpuset_cpus=cpuset_cpus,
    )
    if cpu_limit_milli:
        resources.cpu_period = cpu_period
        resources.cpu_quota = milli_cpu_to_quota(cpu_limit_milli, cpu_period)
    return resources


def kubelet_container_config(
    pod: cri_pb2.PodSandboxConfig,
    name: str,
    cpu_request_milli: int = 0,
    cpu_limit_milli: int = 0,
    memory_limit_bytes: int = 0,
    *,
    image: str = "docker.io/library/busybox:latest",
    command: Sequence[str] = (),
    args: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    attempt: int = 0,
    cpuset_cpus: str = "",
    oom_score_adj: int = 0,
) -> cri_pb2.ContainerConfig:
    """The ContainerConfig kubelet sends in CreateContainer for one container
    of `pod`, with kubelet's io.kubernetes.* labels."""
    md = pod.metadata
    all_annotations = {"io.kubernetes.container.restartCount": str(attempt)}
    all_annotations.update(annotations or {})
    return cri_pb2.ContainerConfig(
        metadata=cri_pb2.ContainerMetadata(name=name, attempt=attempt),
        image=cri_pb2.ImageSpec(image=image, user_specified_image=image),
        command=list(command),
        args=list(args),
        labels={
            CONTAINER_NAME_LABEL: name,
            POD_NAME_LABEL: md.name,
            POD_NAMESPACE_LABEL: md.namespace,
            POD_UID_LABEL: md.uid,
        },
        annotations=all_annotations,
        log_path=f"{name}/{attempt}.log",
        linux=cri_pb2.LinuxContainerConfig(
            resources=kubelet_container_resources(
                cpu_request_milli,
                cpu_limit_milli,
                memory_limit_bytes,
                cpuset_cpus=cpuset_cpus,
                oom_score_adj=oom_score_adj,
            )
        ),
    )


# --------------------------------------------------------------------------- client


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
