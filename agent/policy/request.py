"""What a container asks for: CRI resource numbers, QoS and annotations made into a request.

Pure functions: a container's CRI numbers become milliCPU once (with kubelet's
encodings from agent.kubelet), and `classify` decides exclusive / shared / reserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from agent.kubelet import quota_to_milli_cpu, shares_to_milli_cpu
from agent.policy.classes import DRAM_FAR
from agent.policy.config import PolicyConfig
from agent.policy.errors import InvalidRequest
from agent.rules import NO_RULES, PodRules
from agent.terms.term import Term
from agent.workload import ContainerInfo, QoSClass

PREFER_SHARED = "prefer-shared-cpus.cri-resource-manager.intel.com"
PREFER_ISOLATED = "prefer-isolated-cpus.cri-resource-manager.intel.com"


@dataclass(frozen=True, slots=True)
class Resources:
    """The numbers of CRI LinuxContainerResources the policy reads."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit_bytes: int = 0


def milli_cpu_request(res: Resources) -> int:
    """CPU request in milliCPU from cpu_shares (kubelet: shares = milli * 1024 / 1000)."""
    return shares_to_milli_cpu(res.cpu_shares)


def milli_cpu_limit(res: Resources) -> int:
    """CPU limit in milliCPU from cpu_quota / cpu_period; 0 = no limit."""
    return quota_to_milli_cpu(res.cpu_quota, res.cpu_period)


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    key: str  # the agent's handle for the container (see Policy.rekey)
    container: ContainerInfo
    resources: Resources
    # The container's own terms (cri-resource-manager's annotations, agent.terms).
    terms: tuple[Term, ...] = ()
    rules: PodRules = NO_RULES  # the pod's numa-agent.io rules (pod terms, node affinity, spread)
    # numa-agent.io/cpu-class and memory-tiers (agent.policy.classes), parsed at the edge;
    # `invalid` says why they could not be (classify refuses the request with it).
    cpu_class: str | None = None
    memory_tiers: str = DRAM_FAR
    invalid: str | None = None


class CpuKind(StrEnum):
    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    RESERVED = "reserved"


@dataclass(frozen=True, slots=True)
class Need:
    """What placing one container takes, decided once by `classify`."""

    kind: CpuKind
    exclusive_cpus: int  # whole CPUs, EXCLUSIVE only
    milli_cpu: int  # accounted against the shared pool, SHARED only
    memory_bytes: int  # accounted against the pool's NUMA nodes (Guaranteed limits)
    isolated: bool  # an exclusive container that may (and prefers to) use isolated CPUs
    why: str  # one line for explanations
    cpu_class: str | None = None  # the class asked for (agent.policy.classes); None: not asked
    memory_tiers: str = DRAM_FAR

    def describe(self) -> str:
        if self.kind is CpuKind.EXCLUSIVE:
            return f"{self.exclusive_cpus} exclusive CPUs"
        if self.kind is CpuKind.SHARED:
            return f"{self.milli_cpu}m shared CPU"
        return "reserved CPUs"


def annotation_flag(annotations: Mapping[str, str], prefix: str, container: str) -> bool | None:
    """cri-resource-manager's per-container / per-pod boolean annotation; container wins."""
    for key in (f"{prefix}/container.{container}", f"{prefix}/pod"):
        value = annotations.get(key)
        if value is None:
            continue
        lowered = value.strip().lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise InvalidRequest(
            f'annotation {key}={value!r} on container {container!r}: expected "true" or "false"'
        )
    return None


def classify(request: ContainerRequest, config: PolicyConfig) -> Need:
    """Exclusive, shared or reserved, and the amounts to account."""
    container = request.container
    if request.invalid is not None:
        raise InvalidRequest(request.invalid)
    res = request.resources
    milli = milli_cpu_request(res)
    limit = milli_cpu_limit(res)
    guaranteed = container.qosclass is QoSClass.GUARANTEED
    memory = res.memory_limit_bytes if guaranteed and res.memory_limit_bytes > 0 else 0
    if container.namespace in config.reserved_namespaces:
        return Need(
            CpuKind.RESERVED, 0, milli, 0, False, f"namespace {container.namespace} is reserved"
        )
    annotations = container.pod.annotations
    whole = guaranteed and milli >= 1000 and milli % 1000 == 0 and limit == milli
    if whole and annotation_flag(annotations, PREFER_SHARED, container.name):
        return Need(
            CpuKind.SHARED,
            0,
            milli,
            memory,
            False,
            "Guaranteed but prefers shared CPUs",
            request.cpu_class,
            request.memory_tiers,
        )
    if whole:
        asked = annotation_flag(annotations, PREFER_ISOLATED, container.name)
        isolated = asked if asked is not None else config.isolated_for_exclusive
        count = milli // 1000
        return Need(
            CpuKind.EXCLUSIVE,
            count,
            0,
            memory,
            isolated,
            f"Guaranteed with {count} whole CPUs",
            request.cpu_class,
            request.memory_tiers,
        )
    why = f"{container.qosclass} with {milli}m request"
    if guaranteed:
        why += " (not whole CPUs)"
    return Need(
        CpuKind.SHARED, 0, milli, memory, False, why, request.cpu_class, request.memory_tiers
    )
