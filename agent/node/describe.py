"""What kubelet's CRI messages say about pods and containers, as the agent's typed values.

Pure functions: PodInfo from a PodSandboxConfig or a listed PodSandbox (keeping
only the annotations the agent reads), the policy's Resources from
LinuxContainerResources, and QoS when no cgroup parent says it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from agent.annotations import read_annotations
from agent.kubelet import qos_from_cgroup_parent
from agent.policy.request import Resources, milli_cpu_limit, milli_cpu_request
from agent.workload import ContainerInfo, PodInfo, QoSClass
from proto import cri_pb2

# Container states that hold CPUs: created (about to start) or running.
LIVE_STATES = (cri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_RUNNING)


def resources_of(linux: cri_pb2.LinuxContainerResources) -> Resources:
    return Resources(
        cpu_shares=linux.cpu_shares,
        cpu_quota=linux.cpu_quota,
        cpu_period=linux.cpu_period,
        memory_limit_bytes=linux.memory_limit_in_bytes,
    )


# The fields of LinuxContainerResources an update leaves as they were when it
# sends them as zero or empty (containerd's semantics, and what crictl relies on:
# `crictl update --memory 128M` sends only the memory limit).
_KEPT_WHEN_UNSET = (
    "cpu_period",
    "cpu_quota",
    "cpu_shares",
    "memory_limit_in_bytes",
    "oom_score_adj",
    "cpuset_cpus",
    "cpuset_mems",
    "memory_swap_limit_in_bytes",
)


def merge_update(
    current: cri_pb2.LinuxContainerResources, update: cri_pb2.LinuxContainerResources
) -> cri_pb2.LinuxContainerResources:
    """The resources after `update` is applied to `current`: fields left at zero or
    empty keep their value and `unified` entries are added or replaced. Fields the
    agent's CRI subset does not declare (hugepage limits) stay as in `current`."""
    merged = cri_pb2.LinuxContainerResources()
    merged.CopyFrom(current)
    for name in _KEPT_WHEN_UNSET:
        value = getattr(update, name)
        if value:
            setattr(merged, name, value)
    merged.unified.update(update.unified)
    return merged


def qos_from_resources(res: Resources) -> QoSClass:
    """An approximation of the pod's QoS from one container's numbers, used only when
    the cgroup parent does not say it (a pod the agent never saw start, a non-kubelet
    client): CPU limit equal to a non-zero request -> Guaranteed; any request or
    limit -> Burstable; nothing -> BestEffort."""
    request = milli_cpu_request(res)
    limit = milli_cpu_limit(res)
    if limit and request == limit:
        return QoSClass.GUARANTEED
    if request or limit or res.memory_limit_bytes:
        return QoSClass.BURSTABLE
    return QoSClass.BESTEFFORT


# Placeholder class of a pod whose cgroup parent is unknown; `container_pod`
# replaces it per container from the container's own resources.
UNKNOWN_QOS = QoSClass.BESTEFFORT


def pod_from_config(sandbox_id: str, config: cri_pb2.PodSandboxConfig) -> PodInfo:
    return _pod(
        sandbox_id, config.metadata, config.labels, config.annotations, config.linux.cgroup_parent
    )


def pod_from_sandbox(sandbox: cri_pb2.PodSandbox, cgroup_parent: str = "") -> PodInfo:
    """A pod listed by the runtime, with the cgroup parent its PodSandboxStatus
    reports ("" if none: its QoS is then estimated, see qos_of_pod)."""
    return _pod(sandbox.id, sandbox.metadata, sandbox.labels, sandbox.annotations, cgroup_parent)


def _pod(
    sandbox_id: str,
    md: cri_pb2.PodSandboxMetadata,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    cgroup_parent: str,
) -> PodInfo:
    return PodInfo(
        uid=md.uid,
        name=md.name,
        namespace=md.namespace,
        qosclass=qos_from_cgroup_parent(cgroup_parent) or UNKNOWN_QOS,
        id=sandbox_id,
        labels=dict(labels),
        annotations=read_annotations(annotations),
        cgroup_parent=cgroup_parent,
    )


def qos_of_pod(containers: list[Resources]) -> QoSClass:
    """A pod's class from all its containers' numbers, when no cgroup parent says it:
    Guaranteed only if every container has a CPU limit equal to a non-zero request
    and a memory limit; BestEffort if none asks for anything; else Burstable. Never
    one container's numbers alone: a Burstable pod's container with request = limit
    must not get exclusive CPUs because its sidecar was not looked at."""
    if not containers:
        return QoSClass.BESTEFFORT
    classes = {qos_from_resources(res) for res in containers}
    if classes == {QoSClass.GUARANTEED} and all(r.memory_limit_bytes for r in containers):
        return QoSClass.GUARANTEED
    if classes == {QoSClass.BESTEFFORT}:
        return QoSClass.BESTEFFORT
    return QoSClass.BURSTABLE


def container_pod(pod: PodInfo, res: Resources) -> PodInfo:
    """The pod as the policy must see it for this container: the cgroup parent's QoS,
    else the approximation from the container's resources."""
    qos = qos_from_cgroup_parent(pod.cgroup_parent) or qos_from_resources(res)
    return pod if qos is pod.qosclass else replace(pod, qosclass=qos)


def container_info(
    name: str, pod: PodInfo, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ContainerInfo:
    return ContainerInfo(name=name, pod=pod, labels=dict(labels), tags=dict(annotations))
