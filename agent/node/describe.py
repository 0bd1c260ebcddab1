"""What kubelet's CRI messages say about pods and containers, as the agent's typed values.

Pure functions: PodInfo from a PodSandboxConfig or a listed PodSandbox, the
policy's Resources from LinuxContainerResources, QoS when no cgroup parent says
it, and the JSON form of all of these for the state file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from google.protobuf import json_format

from agent.kubelet import qos_from_cgroup_parent
from agent.policy.request import Resources, milli_cpu_limit, milli_cpu_request
from agent.workload import ContainerInfo, PodInfo, QoSClass
from proto import cri_pb2


class StateFormatError(ValueError):
    """A saved pod or container record that cannot be read back; names the field."""


def resources_of(linux: cri_pb2.LinuxContainerResources) -> Resources:
    return Resources(
        cpu_shares=linux.cpu_shares,
        cpu_quota=linux.cpu_quota,
        cpu_period=linux.cpu_period,
        memory_limit_bytes=linux.memory_limit_in_bytes,
    )


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
    md = config.metadata
    parent = config.linux.cgroup_parent
    return PodInfo(
        uid=md.uid,
        name=md.name,
        namespace=md.namespace,
        qosclass=qos_from_cgroup_parent(parent) or UNKNOWN_QOS,
        id=sandbox_id,
        labels=dict(config.labels),
        annotations=dict(config.annotations),
        cgroup_parent=parent,
    )


def pod_from_sandbox(sandbox: cri_pb2.PodSandbox) -> PodInfo:
    """A pod listed by the runtime: no cgroup parent, so its QoS is decided per container."""
    md = sandbox.metadata
    return PodInfo(
        uid=md.uid,
        name=md.name,
        namespace=md.namespace,
        qosclass=UNKNOWN_QOS,
        id=sandbox.id,
        labels=dict(sandbox.labels),
        annotations=dict(sandbox.annotations),
    )


def container_pod(pod: PodInfo, res: Resources) -> PodInfo:
    """The pod as the policy must see it for this container: the cgroup parent's QoS,
    else the approximation from the container's resources."""
    qos = qos_from_cgroup_parent(pod.cgroup_parent) or qos_from_resources(res)
    return pod if qos is pod.qosclass else replace(pod, qosclass=qos)


def container_info(
    name: str, pod: PodInfo, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ContainerInfo:
    return ContainerInfo(name=name, pod=pod, labels=dict(labels), tags=dict(annotations))


# ---------------------------------------------------------------------------- JSON


def pod_to_json(pod: PodInfo) -> dict[str, Any]:
    return {
        "uid": pod.uid,
        "name": pod.name,
        "namespace": pod.namespace,
        "qosclass": str(pod.qosclass),
        "id": pod.id,
        "labels": dict(pod.labels),
        "annotations": dict(pod.annotations),
        "cgroup_parent": pod.cgroup_parent,
    }


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise StateFormatError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return value


def _strings(data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = _field(data, key, dict, where)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise StateFormatError(f"{where}.{key}: expected a map of strings")
    return dict(value)


def pod_from_json(data: Any, where: str) -> PodInfo:
    if not isinstance(data, dict):
        raise StateFormatError(f"{where}: expected an object, got {data!r}")
    qos = _field(data, "qosclass", str, where)
    try:
        qosclass = QoSClass(qos)
    except ValueError:
        raise StateFormatError(f"{where}.qosclass: unknown QoS class {qos!r}") from None
    return PodInfo(
        uid=_field(data, "uid", str, where),
        name=_field(data, "name", str, where),
        namespace=_field(data, "namespace", str, where),
        qosclass=qosclass,
        id=_field(data, "id", str, where),
        labels=_strings(data, "labels", where),
        annotations=_strings(data, "annotations", where),
        cgroup_parent=_field(data, "cgroup_parent", str, where),
    )


def container_to_json(info: ContainerInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "id": info.id,
        "labels": dict(info.labels),
        "tags": dict(info.tags),
        "pod": pod_to_json(info.pod),
    }


def container_from_json(data: Any, where: str) -> ContainerInfo:
    if not isinstance(data, dict):
        raise StateFormatError(f"{where}: expected an object, got {data!r}")
    return ContainerInfo(
        name=_field(data, "name", str, where),
        pod=pod_from_json(data.get("pod"), f"{where}.pod"),
        id=_field(data, "id", str, where),
        labels=_strings(data, "labels", where),
        tags=_strings(data, "tags", where),
    )


def linux_to_json(linux: cri_pb2.LinuxContainerResources) -> dict[str, Any]:
    data: dict[str, Any] = json_format.MessageToDict(linux, preserving_proto_field_name=True)
    return data


def linux_from_json(data: Any, where: str) -> cri_pb2.LinuxContainerResources:
    if not isinstance(data, dict):
        raise StateFormatError(f"{where}: expected an object, got {data!r}")
    linux = cri_pb2.LinuxContainerResources()
    try:
        json_format.ParseDict(data, linux)
    except json_format.ParseError as err:
        raise StateFormatError(f"{where}: {err}") from err
    return linux
