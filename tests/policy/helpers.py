"""Machines and requests for the policy tests: real fake-sysfs shapes read by the real reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from agent.policy.config import PolicyConfig
from agent.policy.policy import Policy
from agent.policy.request import ContainerRequest, Resources
from agent.terms.term import Term
from agent.workload import ContainerInfo, PodInfo, QoSClass
from devtools.fakesysfs import write_sysfs
from topology.shapes import SHAPES, MachineSpec
from topology.sysfs import read_machine
from topology.tree import Machine

_CACHE: dict[str, Machine] = {}


def spec_machine(spec: MachineSpec, base: Path, label: str) -> Machine:
    if label not in _CACHE:
        root = base / label
        write_sysfs(spec, root)
        _CACHE[label] = read_machine(root, cpu_info=False)
    return _CACHE[label]


ALL_SHAPES = tuple(SHAPES)


def resources(milli: int, limit: int | None = None, memory: int = 0) -> Resources:
    """As kubelet encodes them: shares = milli * 1024 / 1000 (min 2), quota over 100 ms."""
    limit = milli if limit is None else limit
    return Resources(
        cpu_shares=max(milli * 1024 // 1000, 2),
        cpu_quota=limit * 100 if limit else 0,
        cpu_period=100_000,
        memory_limit_bytes=memory,
    )


def request(
    key: str,
    milli: int,
    *,
    qos: QoSClass = QoSClass.GUARANTEED,
    pod: str | None = None,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    terms: Sequence[Term] = (),
    limit: int | None = None,
    memory: int = 0,
) -> ContainerRequest:
    pod_name = pod or key
    info = PodInfo(
        uid=f"uid-{pod_name}",
        name=pod_name,
        namespace=namespace,
        qosclass=qos,
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
    )
    kubelet_labels = {
        "io.kubernetes.container.name": name or key,
        "io.kubernetes.pod.name": pod_name,
        "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.uid": info.uid,
    }
    container = ContainerInfo(
        name=name or key, pod=info, labels={**kubelet_labels, **(labels or {})}
    )
    if qos is QoSClass.BESTEFFORT:
        res = Resources(cpu_shares=2, memory_limit_bytes=memory)
    else:
        res = resources(milli, limit, memory)
    return ContainerRequest(key, container, res, tuple(terms))


def policy(machine: Machine, **config: object) -> Policy:
    return Policy(machine, PolicyConfig.from_mapping(config))
