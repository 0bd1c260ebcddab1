"""The state file's payload: what the agent saves of its books and how it reads it back.

One version, one error type. The payload holds the pods the agent knows (with
only the annotations it reads), and for every created container the policy's
record of its placement (pool, exclusive CPUs, score, explanation, and what it
was placed with) plus the one CRI fact placement does not own: the resources
last sent to the runtime. Decoding is strict (msgspec): a wrong type anywhere is
a `StateFormatError` naming the path, and the caller moves the file aside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import msgspec
from google.protobuf import json_format

from agent.policy.record import PlacementRecord, SavedPlacement
from agent.policy.request import Resources
from agent.workload import ContainerInfo, PodInfo, QoSClass
from proto import cri_pb2
from topology.cpuset import CPUSet, CPUSetError

STATE_VERSION = 2


class StateFormatError(ValueError):
    """A payload that cannot be read back; the message names the path that is wrong."""


# -- the JSON shapes -----------------------------------------------------------


class _Pod(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    uid: str
    name: str
    namespace: str
    qosclass: QoSClass
    labels: dict[str, str]
    annotations: dict[str, str]
    cgroup_parent: str = ""


class _Requested(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit_bytes: int = 0


class _Container(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    sandbox: str
    name: str
    qosclass: QoSClass  # the pod's class as placement saw it for this container
    labels: dict[str, str]
    tags: dict[str, str]
    requested: _Requested  # what it was placed with
    sent: dict[str, Any]  # LinuxContainerResources as last sent, proto3 JSON
    pool: str
    exclusive_cpus: str
    score: float
    explanation: str


class _Payload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: Literal[2]
    pods: dict[str, _Pod]
    containers: dict[str, _Container]


# -- decoded values ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SavedContainer:
    """A container as the state file remembers it."""

    info: ContainerInfo  # its id is its key in the file
    resources: Resources  # what it was placed with
    sent: cri_pb2.LinuxContainerResources  # what the runtime was last told
    placement: SavedPlacement


@dataclass(frozen=True, slots=True)
class SavedState:
    pods: Mapping[str, PodInfo]  # by sandbox id
    containers: Mapping[str, SavedContainer]  # by container id


EMPTY = SavedState({}, {})


def decode(payload: Mapping[str, Any]) -> SavedState:
    """The saved state from a payload the store read; StateFormatError if anything is off."""
    version = payload.get("version")
    if version != STATE_VERSION:
        raise StateFormatError(f"version {version!r}, this agent reads {STATE_VERSION}")
    try:
        data = msgspec.convert(payload, _Payload)
    except msgspec.ValidationError as err:
        raise StateFormatError(str(err).replace("$.", "", 1)) from None
    pods = {sid: _pod(sid, pod) for sid, pod in data.pods.items()}
    containers: dict[str, SavedContainer] = {}
    for cid, saved in data.containers.items():
        where = f"containers[{cid!r}]"
        if not cid:
            raise StateFormatError(f"{where}: a container id must not be empty")
        pod = pods.get(saved.sandbox)
        if pod is None:
            raise StateFormatError(f"{where}.sandbox: no pod {saved.sandbox!r} in 'pods'")
        if pod.qosclass is not saved.qosclass:
            pod = replace(pod, qosclass=saved.qosclass)
        info = ContainerInfo(saved.name, pod, cid, saved.labels, saved.tags)
        r = saved.requested
        containers[cid] = SavedContainer(
            info,
            Resources(r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_bytes),
            _linux(saved.sent, f"{where}.sent"),
            SavedPlacement(
                saved.pool,
                _cpuset(saved.exclusive_cpus, f"{where}.exclusive_cpus"),
                saved.score,
                saved.explanation,
            ),
        )
    return SavedState(pods, containers)


def _pod(sandbox_id: str, pod: _Pod) -> PodInfo:
    if not sandbox_id:
        raise StateFormatError("pods: a sandbox id must not be empty")
    return PodInfo(
        uid=pod.uid,
        name=pod.name,
        namespace=pod.namespace,
        qosclass=pod.qosclass,
        id=sandbox_id,
        labels=pod.labels,
        annotations=pod.annotations,
        cgroup_parent=pod.cgroup_parent,
    )


def _cpuset(text: str, where: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        raise StateFormatError(f"{where}: {err}") from None


def _linux(data: dict[str, Any], where: str) -> cri_pb2.LinuxContainerResources:
    linux = cri_pb2.LinuxContainerResources()
    try:
        json_format.ParseDict(data, linux)
    except json_format.ParseError as err:
        raise StateFormatError(f"{where}: {err}") from None
    return linux


# -- encoding --------------------------------------------------------------------


def pod_json(pod: PodInfo) -> dict[str, Any]:
    return {
        "uid": pod.uid,
        "name": pod.name,
        "namespace": pod.namespace,
        "qosclass": str(pod.qosclass),
        "labels": dict(pod.labels),
        "annotations": dict(pod.annotations),
        "cgroup_parent": pod.cgroup_parent,
    }


def container_json(
    record: PlacementRecord, sent: cri_pb2.LinuxContainerResources
) -> dict[str, Any]:
    info = record.request.container
    res = record.request.resources
    return {
        "sandbox": info.pod.id,
        "name": info.name,
        "qosclass": str(info.pod.qosclass),
        "labels": dict(info.labels),
        "tags": dict(info.tags),
        "requested": {
            "cpu_shares": res.cpu_shares,
            "cpu_quota": res.cpu_quota,
            "cpu_period": res.cpu_period,
            "memory_limit_bytes": res.memory_limit_bytes,
        },
        "sent": json_format.MessageToDict(sent, preserving_proto_field_name=True),
        "pool": record.pool_name,
        "exclusive_cpus": str(record.exclusive),
        "score": record.score,
        "explanation": record.explanation,
    }


class StateEncoder:
    """Builds the payload to save. It runs on every change, so each pod's and
    container's JSON is cached by the identity of the (immutable, only ever
    replaced) objects it was built from: a placement costs only what it touched."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[tuple[object, ...], dict[str, Any]]] = {}

    def payload(
        self,
        pods: Mapping[str, PodInfo],
        records: Mapping[str, PlacementRecord],
        sent: Mapping[str, cri_pb2.LinuxContainerResources],
    ) -> dict[str, Any]:
        """Every pod, and every container the runtime created (records of creates still
        in flight have no resources sent yet and are left out)."""
        cache = self._cache
        if len(cache) > 2 * (len(pods) + len(sent)) + 64:
            live = {("pod", sid) for sid in pods} | {("container", cid) for cid in sent}
            for stale in [key for key in cache if key not in live]:
                del cache[stale]
        containers = {}
        for cid, linux in sent.items():
            record = records.get(cid)
            if record is not None:
                containers[cid] = self._cached(("container", cid), (record, linux), container_json)
        return {
            "version": STATE_VERSION,
            "pods": {
                sid: self._cached(("pod", sid), (pod,), pod_json) for sid, pod in pods.items()
            },
            "containers": containers,
        }

    def _cached(
        self,
        key: tuple[str, str],
        sources: tuple[Any, ...],
        encode: Callable[..., dict[str, Any]],
    ) -> dict[str, Any]:
        hit = self._cache.get(key)
        if (
            hit is None
            or len(hit[0]) != len(sources)
            or any(a is not b for a, b in zip(hit[0], sources, strict=True))
        ):
            hit = (sources, encode(*sources))
            self._cache[key] = hit
        return hit[1]
