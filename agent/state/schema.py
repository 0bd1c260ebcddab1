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

from agent.annotations import read_annotations
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
    journal: str = ""  # the generation of the journal that follows the file (journal.py)


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
    """The saved state from a payload the store read; StateFormatError if anything is off.

    A version 1 payload (numa-agent 0.1's) is converted first, so an upgrade keeps
    every placement."""
    version = payload.get("version")
    if version == 1:
        payload = upgrade_v1(payload)
    elif version != STATE_VERSION:
        raise StateFormatError(f"version {version!r}, this agent reads 1 and {STATE_VERSION}")
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


def upgrade_v1(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A version 1 payload in version 2's shape. Version 1 kept each container's
    pod in full beside it, the resources last sent, its cpusets, pool and whether
    it was exclusive; its score and explanation were not kept."""
    pods_in, containers_in = payload.get("pods"), payload.get("containers")
    if not isinstance(pods_in, dict) or not isinstance(containers_in, dict):
        raise StateFormatError("version 1: 'pods' and 'containers' must be objects")
    pods = {sid: _v1_pod(pod) for sid, pod in pods_in.items()}
    containers: dict[str, Any] = {}
    for cid, old in containers_in.items():
        where = f"version 1 containers[{cid!r}]"
        if not isinstance(old, dict) or not isinstance(old.get("info"), dict):
            raise StateFormatError(f"{where}: expected an object with 'info'")
        info = old["info"]
        pod = info.get("pod")
        if not isinstance(pod, dict):
            raise StateFormatError(f"{where}.info.pod: expected an object")
        sandbox = pod.get("id")
        if not isinstance(sandbox, str):
            raise StateFormatError(f"{where}.info.pod.id: expected a string")
        pods.setdefault(sandbox, _v1_pod(pod))
        sent = old.get("resources")
        if not isinstance(sent, dict):
            raise StateFormatError(f"{where}.resources: expected an object")
        linux = _linux(sent, f"{where}.resources")
        pool = old.get("pool")
        containers[cid] = {
            "sandbox": sandbox,
            "name": info.get("name"),
            "qosclass": pod.get("qosclass"),
            "labels": info.get("labels"),
            "tags": info.get("tags"),
            "requested": {
                "cpu_shares": linux.cpu_shares,
                "cpu_quota": linux.cpu_quota,
                "cpu_period": linux.cpu_period,
                "memory_limit_bytes": linux.memory_limit_in_bytes,
            },
            "sent": sent,
            "pool": pool,
            "exclusive_cpus": old.get("cpus", "") if old.get("exclusive") is True else "",
            "score": 0.0,
            "explanation": f"{cid}: restored from a version 1 state file in {pool}",
        }
    return {"version": STATE_VERSION, "pods": pods, "containers": containers}


def _v1_pod(pod: object) -> object:
    if not isinstance(pod, dict):
        return pod  # decoding names it
    out = {key: value for key, value in pod.items() if key != "id"}
    annotations = out.get("annotations")
    if isinstance(annotations, dict):
        out["annotations"] = read_annotations(annotations)
    return out


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
