"""Kubernetes manifests as `numa-agent check` reads them: the pod spec of a Pod (or of
a Deployment/StatefulSet/DaemonSet/Job/ReplicaSet template), its annotations and its
containers' requests and limits, as simulate's PodSpec values, and the node-local
keys its own scheduling rules use by mistake."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.simulate.scenario import (
    ContainerSpec,
    PodSpec,
    ScenarioError,
    parse_cpu,
    parse_memory,
    pod_uid,
)
from agent.yamlfile import YamlFileError, read_yaml_file

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
# Label keys of numa-agent's own domain name only ever label a machine's parts (the
# topology levels, NUMA nodes' labels), never a Kubernetes node.
NODE_LOCAL_PREFIX = "numa-agent.io/"
REPLICATED_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


class ManifestError(ValueError):
    """A manifest `check` cannot read; the message names the file, document and field."""


@dataclass(frozen=True, slots=True)
class Workload:
    """One pod-making document: its kind and name, its pod, how many replicas it asks.

    `node_local_keys` are the (path, key) pairs where the pod spec's own
    `affinity` or `topologySpreadConstraints` names a numa-agent.io/ key, which
    the cluster scheduler looks for on nodes and never finds.
    """

    kind: str
    name: str
    pod: PodSpec
    replicas: int
    node_local_keys: tuple[tuple[str, str], ...] = ()


def load_manifests(path: str | Path) -> tuple[Workload, ...]:
    """Every Pod and workload in a (multi-document) YAML file; other kinds are skipped."""
    path = Path(path)
    try:
        documents = [
            d for d in read_yaml_file(path, "manifest", all_documents=True) if d is not None
        ]
    except YamlFileError as err:
        raise ManifestError(str(err)) from None
    found: list[Workload] = []
    for index, document in enumerate(documents):
        where = f"{path}: document {index + 1}" if len(documents) > 1 else str(path)
        workload = parse_manifest(document, where)
        if workload is not None:
            found.append(workload)
    if not found:
        kinds = ", ".join(("Pod", *WORKLOAD_KINDS))
        raise ManifestError(f"{path}: no pod in it (kinds read: {kinds})")
    return tuple(found)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected a mapping, got {value!r}")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    data = _mapping(value, where)
    for key, item in data.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ManifestError(f"{where}: {key!r}: values must be strings (quote them)")
    return dict(data)


def parse_manifest(document: Any, where: str) -> Workload | None:
    """The workload of one document, None for kinds that make no pods (Service, ...)."""
    doc = _mapping(document, where)
    kind = doc.get("kind")
    if kind != "Pod" and kind not in WORKLOAD_KINDS:
        return None
    meta = _mapping(doc.get("metadata"), f"{where}: metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}: metadata.name: missing")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ManifestError(f"{where}: metadata.namespace: expected a string")
    spec = _mapping(doc.get("spec"), f"{where}: spec")
    replicas = 1
    spec_path = "spec"
    if kind == "Pod":
        pod_meta, pod_spec = meta, spec
    else:
        spec_path = "spec.template.spec"
        template = _mapping(spec.get("template"), f"{where}: spec.template")
        pod_meta = _mapping(template.get("metadata"), f"{where}: spec.template.metadata")
        pod_spec = _mapping(template.get("spec"), f"{where}: spec.template.spec")
        if kind in REPLICATED_KINDS:
            value = spec.get("replicas", 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ManifestError(f"{where}: spec.replicas: expected a count, got {value!r}")
            replicas = value
    at = f"{where}: {kind} {namespace}/{name}"
    pod = PodSpec(
        name=name,
        namespace=namespace,
        uid=pod_uid(namespace, name),
        labels=_strings(pod_meta.get("labels"), f"{at}: labels"),
        annotations=_strings(pod_meta.get("annotations"), f"{at}: annotations"),
        containers=_containers(pod_spec.get("containers"), f"{at}: containers", required=True),
        init_containers=_containers(
            pod_spec.get("initContainers"), f"{at}: initContainers", required=False
        ),
    )
    return Workload(str(kind), name, pod, replicas, node_local_keys(pod_spec, spec_path))


_TERM_LISTS = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "requiredDuringSchedulingRequiredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


def node_local_keys(pod_spec: Mapping[str, Any], path: str) -> tuple[tuple[str, str], ...]:
    """Where a pod spec's scheduling rules name a numa-agent.io/ key: topologyKeys of
    pod (anti-)affinity terms and spread constraints, keys of node affinity. Read
    leniently: the API server, not this, validates the rest."""
    found: list[tuple[str, str]] = []

    def note(value: Any, where: str) -> None:
        if isinstance(value, str) and value.startswith(NODE_LOCAL_PREFIX):
            found.append((where, value))

    affinity = _mapping_or_empty(pod_spec.get("affinity"))
    for part in ("podAffinity", "podAntiAffinity"):
        rules = _mapping_or_empty(affinity.get(part))
        for field in _TERM_LISTS:
            for i, term in _items(rules.get(field)):
                where = f"{path}.affinity.{part}.{field}[{i}]"
                if "podAffinityTerm" in term:
                    term = term["podAffinityTerm"]
                    where += ".podAffinityTerm"
                if isinstance(term, dict):
                    note(term.get("topologyKey"), f"{where}.topologyKey")
    node = _mapping_or_empty(affinity.get("nodeAffinity"))
    required = node.get(_TERM_LISTS[0])
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    selectors: list[tuple[str, Any]] = [
        (f"{path}.affinity.nodeAffinity.{_TERM_LISTS[0]}.nodeSelectorTerms[{i}]", term)
        for i, term in _items(terms)
    ]
    selectors.extend(
        (f"{path}.affinity.nodeAffinity.{_TERM_LISTS[2]}[{i}].preference", item.get("preference"))
        for i, item in _items(node.get(_TERM_LISTS[2]))
    )
    for where, term in selectors:
        if isinstance(term, dict):
            for j, expression in _items(term.get("matchExpressions")):
                note(expression.get("key"), f"{where}.matchExpressions[{j}].key")
    for i, constraint in _items(pod_spec.get("topologySpreadConstraints")):
        note(constraint.get("topologyKey"), f"{path}.topologySpreadConstraints[{i}].topologyKey")
    return tuple(found)


def _mapping_or_empty(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """The mappings of a list, with their indices; nothing if it is not a list."""
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, dict)]


def _containers(value: Any, where: str, *, required: bool) -> tuple[ContainerSpec, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or (required and not value):
        raise ManifestError(f"{where}: expected a list of containers")
    out = []
    for index, item in enumerate(value):
        data = _mapping(item, f"{where}[{index}]")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"{where}[{index}]: name: missing")
        out.append(_container(name, data.get("resources"), f"{where}: {name}: resources"))
    return tuple(out)


def _container(name: str, value: Any, where: str) -> ContainerSpec:
    """Kubernetes' rules: a limit alone sets the request; a request alone has no limit."""
    resources = _mapping(value, where)
    requests = _mapping(resources.get("requests"), f"{where}.requests")
    limits = _mapping(resources.get("limits"), f"{where}.limits")
    try:
        cpu_limit = parse_cpu(limits["cpu"], f"{where}.limits.cpu") if "cpu" in limits else 0
        cpu = parse_cpu(requests["cpu"], f"{where}.requests.cpu") if "cpu" in requests else None
        mem_limit = (
            parse_memory(limits["memory"], f"{where}.limits.memory") if "memory" in limits else 0
        )
        mem = (
            parse_memory(requests["memory"], f"{where}.requests.memory")
            if "memory" in requests
            else None
        )
    except ScenarioError as err:
        raise ManifestError(str(err)) from None
    cpu = cpu_limit if cpu is None else cpu
    mem = mem_limit if mem is None else mem
    if cpu_limit and cpu > cpu_limit:
        raise ManifestError(f"{where}: cpu request {cpu}m is above its limit {cpu_limit}m")
    if mem_limit and mem > mem_limit:
        raise ManifestError(f"{where}: memory request {mem} is above its limit {mem_limit}")
    return ContainerSpec(name, cpu, cpu_limit, mem, mem_limit)
