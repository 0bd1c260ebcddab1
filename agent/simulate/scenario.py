"""Simulation scenarios: the YAML file parsed and validated once into frozen values.

Every error is a ScenarioError whose message names the file, the pod, the
container and the key that was wrong; nothing downstream re-checks the data.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any

from agent.policy.config import ConfigError, PolicyConfig
from agent.workload import QoSClass
from agent.yamlfile import YamlFileError, read_yaml_file
from topology.shapes import SHAPES, MachineSpec, MachineSpecError, parse_quantity

# uuid5 namespace for pod UIDs generated from "namespace/name": stable across runs.
POD_UID_NAMESPACE = uuid.UUID("8f5d2a9e-4c1b-5e7a-9b3d-6a0f1e2c3d4b")
DEFAULT_NAMESPACE = "default"

TOP_KEYS = ("description", "topology", "config", "pods", "events")
POD_KEYS = ("name", "namespace", "uid", "labels", "annotations", "containers", "init_containers")
CONTAINER_KEYS = ("name", "cpu", "cpu_limit", "memory", "memory_limit")
EVENT_KEYS = ("create", "remove", "exit", "recreate", "resize", "restart")
RESIZE_KEYS = ("container", "cpu", "cpu_limit", "memory", "memory_limit")
# What happens to the state file when the agent restarts (see docs/simulate.md).
RESTART_KINDS = ("keep", "lost", "corrupt")

# Kubernetes object names (RFC 1123 labels for containers, subdomains for pods).
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_CPU = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(m?)\s*$")


class ScenarioError(ValueError):
    """A scenario that cannot be simulated; the message names the file, place and key."""


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """One container's requests and limits (0 = none), as the pod spec gives them."""

    name: str
    cpu_milli: int = 0
    cpu_limit_milli: int = 0
    memory_bytes: int = 0
    memory_limit_bytes: int = 0

    @property
    def guaranteed(self) -> bool:
        """Requests equal limits, both set, for CPU and memory (Kubernetes' rule)."""
        return (
            self.cpu_milli > 0
            and self.cpu_milli == self.cpu_limit_milli
            and self.memory_bytes > 0
            and self.memory_bytes == self.memory_limit_bytes
        )

    @property
    def asks_nothing(self) -> bool:
        return not (
            self.cpu_milli or self.cpu_limit_milli or self.memory_bytes or self.memory_limit_bytes
        )


@dataclass(frozen=True, slots=True)
class PodSpec:
    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    containers: tuple[ContainerSpec, ...]
    init_containers: tuple[ContainerSpec, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def qos(self) -> QoSClass:
        """Kubernetes' QoS class; init containers count like the others (GetPodQOS)."""
        everyone = self.init_containers + self.containers
        if all(c.asks_nothing for c in everyone):
            return QoSClass.BESTEFFORT
        if all(c.guaranteed for c in everyone):
            return QoSClass.GUARANTEED
        return QoSClass.BURSTABLE


@dataclass(frozen=True, slots=True)
class SysfsTopology:
    path: Path


@dataclass(frozen=True, slots=True)
class ShapeTopology:
    name: str


@dataclass(frozen=True, slots=True)
class CompactTopology:
    spec: MachineSpec


Topology = SysfsTopology | ShapeTopology | CompactTopology


@dataclass(frozen=True, slots=True)
class CreatePod:
    pod: str  # PodSpec.key


@dataclass(frozen=True, slots=True)
class RemovePod:
    pod: str


@dataclass(frozen=True, slots=True)
class ExitContainer:
    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class RecreateContainer:
    """kubelet re-creates an exited app container of a running pod (attempt + 1)."""

    pod: str
    container: str


@dataclass(frozen=True, slots=True)
class ResizeContainer:
    """UpdateContainerResources with kubelet's fields; None keeps the value (0: no limit)."""

    pod: str
    container: str
    cpu_milli: int | None = None
    cpu_limit_milli: int | None = None
    memory_bytes: int | None = None
    memory_limit_bytes: int | None = None

    def apply(self, spec: ContainerSpec) -> ContainerSpec:
        return ContainerSpec(
            spec.name,
            spec.cpu_milli if self.cpu_milli is None else self.cpu_milli,
            spec.cpu_limit_milli if self.cpu_limit_milli is None else self.cpu_limit_milli,
            spec.memory_bytes if self.memory_bytes is None else self.memory_bytes,
            spec.memory_limit_bytes if self.memory_limit_bytes is None else self.memory_limit_bytes,
        )


@dataclass(frozen=True, slots=True)
class Restart:
    """The agent stops and a new one starts on the same state directory and runtime;
    `state` says what became of the state file in between (RESTART_KINDS)."""

    state: str


Event = CreatePod | RemovePod | ExitContainer | RecreateContainer | ResizeContainer | Restart


@dataclass(frozen=True, slots=True)
class Scenario:
    source: str
    description: str
    topology: Topology
    config: PolicyConfig
    pods: tuple[PodSpec, ...]
    events: tuple[Event, ...]

    def pod(self, key: str) -> PodSpec:
        for pod in self.pods:
            if pod.key == key:
                return pod
        raise KeyError(key)


# --------------------------------------------------------------------------- loading


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; relative sysfs paths are relative to it."""
    path = Path(path)
    try:
        data = read_yaml_file(path, "scenario")
    except YamlFileError as err:
        raise ScenarioError(str(err)) from None
    return parse_scenario(data, base_dir=path.parent, source=str(path))


def parse_scenario(data: object, *, base_dir: Path, source: str = "<scenario>") -> Scenario:
    """Validate already-loaded YAML data; errors are prefixed with `source`."""
    try:
        return _Parser(base_dir).scenario(data, source)
    except ScenarioError as exc:
        raise ScenarioError(f"{source}: {exc}") from exc


def pod_uid(namespace: str, name: str) -> str:
    """The UID a pod without one gets: the same for the same namespace/name, every run."""
    return str(uuid.uuid5(POD_UID_NAMESPACE, f"{namespace}/{name}"))


def parse_cpu(value: object, where: str) -> int:
    """milliCPU from a Kubernetes CPU quantity: 2, 1.5, "2", "1.5", "500m"."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ScenarioError(f'{where}: expected a CPU quantity like "2", "1.5" or "500m"')
    match = _CPU.match(str(value))
    if match is None:
        raise ScenarioError(
            f'{where}: {value!r} is not a CPU quantity (use cores like "2" or "1.5", '
            f'or millicores like "500m")'
        )
    try:
        amount = Decimal(match.group(1))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ScenarioError(f"{where}: {value!r} is not a number") from exc
    milli = amount if match.group(2) == "m" else amount * 1000
    if milli != milli.to_integral_value():
        raise ScenarioError(f"{where}: {value!r} is finer than 1m (one millicore)")
    return int(milli)


def parse_memory(value: object, where: str) -> int:
    """Bytes from a Kubernetes memory quantity: 1Gi, 256Mi, 1G, or plain bytes."""
    try:
        return parse_quantity(value, where)
    except MachineSpecError as exc:
        raise ScenarioError(str(exc)) from exc


class _Parser:
    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir

    def scenario(self, data: object, source: str) -> Scenario:
        top = _mapping(data, "scenario", TOP_KEYS)
        if "topology" not in top:
            raise ScenarioError("topology: missing (a sysfs path, a shape name or a description)")
        if "pods" not in top:
            raise ScenarioError("pods: missing (a list of pods)")
        description = top.get("description", "")
        if not isinstance(description, str):
            raise ScenarioError(f"description: expected text, got {description!r}")
        topology = self.topology(top["topology"])
        config = _config(top.get("config") or {})
        pods = self.pods(top["pods"])
        events = _events(top.get("events"), pods)
        return Scenario(source, description.strip(), topology, config, pods, events)

    def topology(self, data: object) -> Topology:
        if not isinstance(data, Mapping):
            raise ScenarioError(
                f"topology: expected {{sysfs: PATH}}, {{shape: NAME}} or a machine "
                f"description mapping, got {data!r}"
            )
        for form in ("sysfs", "shape"):
            if form in data and len(data) > 1:
                others = ", ".join(sorted(str(k) for k in data if k != form))
                raise ScenarioError(f"topology: {form} cannot be combined with {others}")
        if "sysfs" in data:
            value = data["sysfs"]
            if not isinstance(value, str) or not value:
                raise ScenarioError(f"topology.sysfs: expected a directory path, got {value!r}")
            path = (self.base_dir / value).resolve()
            if not path.is_dir():
                raise ScenarioError(f"topology.sysfs: {path} is not a directory")
            return SysfsTopology(path)
        if "shape" in data:
            name = data["shape"]
            if name not in SHAPES:
                raise ScenarioError(
                    f"topology.shape: unknown shape {name!r} (known: {', '.join(SHAPES)})"
                )
            return ShapeTopology(str(name))
        try:
            return CompactTopology(MachineSpec.from_mapping(data))
        except MachineSpecError as exc:
            raise ScenarioError(f"topology.{exc}") from exc

    def pods(self, data: object) -> tuple[PodSpec, ...]:
        if not isinstance(data, list) or not data:
            raise ScenarioError(f"pods: expected a non-empty list of pods, got {data!r}")
        pods: list[PodSpec] = []
        seen: set[str] = set()
        for index, item in enumerate(data):
            pod = _pod(item, index)
            if pod.key in seen:
                raise ScenarioError(f"pod {pod.key}: defined twice")
            seen.add(pod.key)
            pods.append(pod)
        uids: dict[str, str] = {}
        for pod in pods:
            if pod.uid in uids:
                raise ScenarioError(f"pod {pod.key}: uid {pod.uid} is also pod {uids[pod.uid]}'s")
            uids[pod.uid] = pod.key
        return tuple(pods)


def _mapping(data: object, where: str, known: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping, got {data!r}")
    for key in data:
        if key not in known:
            raise ScenarioError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")
    return data


def _config(data: object) -> PolicyConfig:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"config: expected a mapping of agent settings, got {data!r}")
    try:
        return PolicyConfig.from_mapping(data)
    except ConfigError as exc:
        raise ScenarioError(f"config: {exc}") from exc


def _name(data: Mapping[str, Any], where: str, what: str) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScenarioError(
            f"{where}: name: {what} needs a name of lower-case letters, digits, '-' and '.', "
            f"got {name!r}"
        )
    return name


def _strings(data: object, where: str) -> Mapping[str, str]:
    if data is None:
        return MappingProxyType({})
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping of strings, got {data!r}")
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ScenarioError(
                f"{where}: {key!r}: keys and values must be strings "
                f"(quote values such as {value!r} in YAML)"
            )
    return MappingProxyType(dict(data))


def _pod(data: object, index: int) -> PodSpec:
    raw = _mapping(data, f"pods[{index}]", POD_KEYS)
    name = _name(raw, f"pods[{index}]", "a pod")
    namespace = raw.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not _NAME.match(namespace):
        raise ScenarioError(f"pod {name}: namespace: expected a namespace name, got {namespace!r}")
    where = f"pod {namespace}/{name}"
    uid = raw.get("uid")
    if uid is None:
        uid = pod_uid(namespace, name)
    elif not isinstance(uid, str) or not uid:
        raise ScenarioError(f"{where}: uid: expected a non-empty string, got {uid!r}")
    labels = _strings(raw.get("labels"), f"{where}: labels")
    annotations = _strings(raw.get("annotations"), f"{where}: annotations")
    if "containers" not in raw:
        raise ScenarioError(f"{where}: containers: missing (a pod needs at least one)")
    containers = _containers(raw["containers"], f"{where}: containers", required=True)
    init = _containers(raw.get("init_containers"), f"{where}: init_containers", required=False)
    names = [c.name for c in init + containers]
    for container_name in names:
        if names.count(container_name) > 1:
            raise ScenarioError(f"{where}: container {container_name}: name used twice")
    return PodSpec(name, namespace, uid, labels, annotations, containers, init)


def _containers(data: object, where: str, *, required: bool) -> tuple[ContainerSpec, ...]:
    if data is None and not required:
        return ()
    if not isinstance(data, list) or (required and not data):
        raise ScenarioError(f"{where}: expected a non-empty list of containers, got {data!r}")
    return tuple(_container(item, f"{where}[{i}]") for i, item in enumerate(data))


def _container(data: object, where: str) -> ContainerSpec:
    raw = _mapping(data, where, CONTAINER_KEYS)
    name = _name(raw, where, "a container")
    at = f"{where.rsplit(':', 1)[0]}: container {name}"
    cpu, cpu_limit = _request_limit(raw, "cpu", at, parse_cpu)
    memory, memory_limit = _request_limit(raw, "memory", at, parse_memory)
    return ContainerSpec(name, cpu, cpu_limit, memory, memory_limit)


def _request_limit(raw: Mapping[str, Any], key: str, at: str, parse: Any) -> tuple[int, int]:
    """(request, limit): the limit defaults to the request; an explicit null means no limit;
    a limit alone sets the request too, as Kubernetes does."""
    limit_key = f"{key}_limit"
    request = parse(raw[key], f"{at}: {key}") if raw.get(key) is not None else None
    if limit_key in raw:
        value = raw[limit_key]
        limit = 0 if value is None else parse(value, f"{at}: {limit_key}")
    else:
        limit = request or 0
    if request is None:
        request = limit
    if limit and request > limit:
        raise ScenarioError(
            f"{at}: {key}: request {raw[key]} is above {limit_key} {raw[limit_key]}"
        )
    return request, limit


def _events(data: object, pods: tuple[PodSpec, ...]) -> tuple[Event, ...]:
    """The event list (default: create every pod in order), checked against pod lifetimes."""
    if data is None:
        return tuple(CreatePod(pod.key) for pod in pods)
    if not isinstance(data, list):
        raise ScenarioError(f"events: expected a list, got {data!r}")
    by_key = {pod.key: pod for pod in pods}
    running: set[str] = set()
    exited: set[tuple[str, str]] = set()
    events: list[Event] = []
    for index, item in enumerate(data):
        where = f"events[{index}]"
        raw = _mapping(item, where, EVENT_KEYS)
        if len(raw) != 1:
            raise ScenarioError(f"{where}: expected exactly one of {', '.join(EVENT_KEYS)}")
        (kind, ref), *_ = raw.items()
        event: Event
        if kind == "restart":
            if ref not in RESTART_KINDS:
                raise ScenarioError(
                    f"{where}: restart: expected one of {', '.join(RESTART_KINDS)}, got {ref!r}"
                )
            events.append(Restart(ref))
            continue
        if kind == "resize":
            events.append(_resize(ref, by_key, running, exited, f"{where}: resize"))
            continue
        if not isinstance(ref, str):
            raise ScenarioError(f"{where}: {kind}: expected a name, got {ref!r}")
        if kind == "recreate":
            pod, container = _app_container(ref, by_key, running, f"{where}: recreate")
            if (pod.key, container) not in exited:
                raise ScenarioError(
                    f"{where}: recreate: {pod.key}/{container} has not exited (kubelet "
                    "re-creates only an exited container)"
                )
            exited.discard((pod.key, container))
            events.append(RecreateContainer(pod.key, container))
            continue
        if kind == "exit":
            pod_ref, sep, container = ref.rpartition("/")
            if not sep:
                raise ScenarioError(f"{where}: exit: expected POD/CONTAINER, got {ref!r}")
            pod = _resolve(pod_ref, by_key, f"{where}: exit")
            if container not in {c.name for c in pod.containers}:
                known = ", ".join(c.name for c in pod.containers)
                raise ScenarioError(
                    f"{where}: exit: pod {pod.key} has no app container {container!r} "
                    f"(app containers: {known}; init containers exit on their own)"
                )
            if pod.key not in running:
                raise ScenarioError(f"{where}: exit: pod {pod.key} is not running at that point")
            if (pod.key, container) in exited:
                raise ScenarioError(f"{where}: exit: {pod.key}/{container} already exited")
            exited.add((pod.key, container))
            event = ExitContainer(pod.key, container)
        else:
            pod = _resolve(ref, by_key, f"{where}: {kind}")
            if kind == "create":
                if pod.key in running:
                    raise ScenarioError(f"{where}: create: pod {pod.key} is already running")
                running.add(pod.key)
                exited -= {e for e in exited if e[0] == pod.key}
                event = CreatePod(pod.key)
            else:
                if pod.key not in running:
                    raise ScenarioError(f"{where}: remove: pod {pod.key} is not running")
                running.discard(pod.key)
                event = RemovePod(pod.key)
        events.append(event)
    return tuple(events)


def _app_container(
    ref: str, by_key: Mapping[str, PodSpec], running: set[str], where: str
) -> tuple[PodSpec, str]:
    """POD/CONTAINER: an app container of a running pod."""
    pod_ref, sep, container = ref.rpartition("/")
    if not sep:
        raise ScenarioError(f"{where}: expected POD/CONTAINER, got {ref!r}")
    pod = _resolve(pod_ref, by_key, where)
    if container not in {c.name for c in pod.containers}:
        known = ", ".join(c.name for c in pod.containers)
        raise ScenarioError(
            f"{where}: pod {pod.key} has no app container {container!r} (app containers: {known})"
        )
    if pod.key not in running:
        raise ScenarioError(f"{where}: pod {pod.key} is not running at that point")
    return pod, container


def _resize(
    data: object,
    by_key: Mapping[str, PodSpec],
    running: set[str],
    exited: set[tuple[str, str]],
    where: str,
) -> ResizeContainer:
    raw = _mapping(data, where, RESIZE_KEYS)
    ref = raw.get("container")
    if not isinstance(ref, str):
        raise ScenarioError(f"{where}: container: expected POD/CONTAINER, got {ref!r}")
    pod, container = _app_container(ref, by_key, running, where)
    if (pod.key, container) in exited:
        raise ScenarioError(f"{where}: {pod.key}/{container} has exited: nothing to resize")
    numbers: dict[str, int | None] = {}
    for key, parse in (
        ("cpu", parse_cpu),
        ("cpu_limit", parse_cpu),
        ("memory", parse_memory),
        ("memory_limit", parse_memory),
    ):
        if key not in raw:
            numbers[key] = None
        elif raw[key] is None:
            if not key.endswith("_limit"):
                raise ScenarioError(f"{where}: {key}: a request cannot be null")
            numbers[key] = 0
        else:
            numbers[key] = parse(raw[key], f"{where}: {key}")
    if len(raw) == 1:
        raise ScenarioError(
            f"{where}: nothing to change (give cpu, cpu_limit, memory or memory_limit)"
        )
    return ResizeContainer(
        pod.key,
        container,
        numbers["cpu"],
        numbers["cpu_limit"],
        numbers["memory"],
        numbers["memory_limit"],
    )


def _resolve(ref: str, by_key: Mapping[str, PodSpec], where: str) -> PodSpec:
    """A pod by "name" (when unambiguous) or "namespace/name"."""
    if ref in by_key:
        return by_key[ref]
    matches = [pod for pod in by_key.values() if pod.name == ref]
    if len(matches) == 1:
        return matches[0]
    if matches:
        spelled = ", ".join(pod.key for pod in matches)
        raise ScenarioError(f"{where}: pod {ref!r} is ambiguous, say one of {spelled}")
    raise ScenarioError(f"{where}: no pod {ref!r} (pods: {', '.join(by_key)})")
