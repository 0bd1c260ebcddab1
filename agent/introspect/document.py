"""The status document: agent info, the machine's layout, the pool tree with each pool's
capacity and containers, and the reserved CPUs; a plain JSON-able dict, built by pure
functions. It is the contract between the daemon and `numa-agent status` (text, JSON
and the HTML machine map), so fields are only ever added (docs/observability.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.node.agent import Placement
from agent.observe.process import ProcessStats
from agent.policy.policy import PoolCapacity
from agent.policy.pools import build_pools
from topology.cpuset import CPUSet
from topology.tree import Core, Machine

DOCUMENT_VERSION = 1
START_COUNTS = ("restored", "placed_again", "adopted", "adopted_and_moved")
RESERVED_POOL = "reserved"


@dataclass(frozen=True, slots=True)
class AgentInfo:
    version: str
    runtime_endpoint: str
    listen: str
    metrics_address: str  # "" = metrics off
    pending_updates: int
    process: ProcessStats
    # Why the state file cannot be written now ("" when it can): calls that need a
    # new record are refused meanwhile (docs/operations.md).
    state_problem: str = ""
    # Processes the reconcile saw outside their container's cgroup (it cannot move them).
    stray_processes: tuple[str, ...] = ()
    # How the last start took containers back (the numbers its log line shows).
    start: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(START_COUNTS, 0))


def _container(p: Placement) -> dict[str, Any]:
    return {
        "namespace": p.namespace,
        "pod": p.pod,
        "name": p.name,
        "container_id": p.container_id,
        "cpuset_cpus": p.cpuset_cpus,
        "cpuset_mems": p.cpuset_mems,
        "exclusive": p.exclusive,
        "pool": p.pool,
        "score": round(p.score, 3),
    }


def _core(core: Core) -> dict[str, Any]:
    return {
        "id": core.id,
        "cpus": str(core.cpus),
        "cpu_class": core.cpu_class,
        "favoured": core.favoured,
    }


def machine_layout(machine: Machine) -> list[dict[str, Any]]:
    """Sockets > dies > NUMA nodes > L3 groups > cores, each with its (online) CPUs:
    what the machine map draws, without which the client would need the sysfs tree."""
    return [
        {
            "id": socket.id,
            "cpus": str(socket.cpus),
            "dies": [
                {
                    "id": die.id,
                    "cpus": str(die.cpus),
                    "numa_nodes": [
                        {
                            "id": node.id,
                            "cpus": str(node.cpus),
                            "memory_bytes": node.memory_bytes,
                            "l3_groups": [
                                {
                                    "id": group.id,
                                    "cpus": str(group.cpus),
                                    "cores": [_core(core) for core in group.cores],
                                }
                                for group in node.l3_groups
                            ],
                        }
                        for node in die.numa_nodes
                    ],
                }
                for die in socket.dies
            ],
        }
        for socket in machine.sockets
    ]


def _memory_only_nodes(machine: Machine) -> list[dict[str, Any]]:
    return [
        {
            "id": m.id,
            "memory_bytes": m.memory_bytes,
            "closest_cpu_node": m.closest_cpu_node,
            "distance": machine.distance(m.closest_cpu_node, m.id),
        }
        for m in machine.memory_only_nodes
    ]


def machine_document(
    machine: Machine,
    reserved_cpus: CPUSet,
    placements: Sequence[Placement],
    capacity: Sequence[PoolCapacity],
) -> dict[str, Any]:
    """The document without its `version` and `agent` parts: what `simulate` has too."""
    all_pools = build_pools(machine).pools
    tree = {pool.name: pool for pool in all_pools}
    by_pool: dict[str, list[dict[str, Any]]] = {}
    for placement in placements:
        by_pool.setdefault(placement.pool, []).append(_container(placement))
    pools = []
    for cap in capacity:
        pool = tree[cap.pool]
        pools.append(
            {
                "name": cap.pool,
                "parent": None if pool.parent is None else all_pools[pool.parent].name,
                "depth": pool.depth,
                "cpus": str(cap.cpus),
                "numa_nodes": list(pool.numa_nodes),
                "exclusive_cpus": str(cap.exclusive),
                "exclusive_free": cap.exclusive_free,
                "isolated_free": cap.isolated_free,
                "shared_cpus": str(cap.shared),
                "shared_milli_used": cap.shared_milli_used,
                "shared_milli_free": cap.shared_milli_free,
                "memory_bytes": cap.memory_bytes,
                "memory_used_bytes": cap.memory_used_bytes,
                "containers": by_pool.pop(cap.pool, []),
            }
        )
    return {
        "machine": {
            "cpus": str(machine.cpus),
            "sockets": len(machine.sockets),
            "numa_nodes": len(list(machine.iter_numa_nodes())),
            "isolated_cpus": str(machine.isolated),
            "reserved_cpus": str(reserved_cpus),
            "offline_cpus": str(machine.offline),
            "layout": machine_layout(machine),
            "memory_only_nodes": _memory_only_nodes(machine),
        },
        "pools": pools,
        "reserved": {"cpus": str(reserved_cpus), "containers": by_pool.pop(RESERVED_POOL, [])},
        # Books naming a pool this machine does not have (should never happen): still shown.
        "unknown_pools": {name: containers for name, containers in sorted(by_pool.items())},
    }


def status_document(
    info: AgentInfo,
    machine: Machine,
    reserved_cpus: CPUSet,
    placements: Sequence[Placement],
    capacity: Sequence[PoolCapacity],
    now: float,
) -> dict[str, Any]:
    """Everything `numa-agent status` shows; `now` is Unix time (for the uptime)."""
    proc = info.process
    return {
        "version": DOCUMENT_VERSION,
        "agent": {
            "version": info.version,
            "pid": proc.pid,
            "uptime_seconds": round(max(now - proc.started, 0.0), 1),
            "runtime_endpoint": info.runtime_endpoint,
            "listen": info.listen,
            "metrics_address": info.metrics_address,
            "pending_updates": info.pending_updates,
            "cpu_seconds": round(proc.cpu_seconds, 2),
            "rss_bytes": proc.rss_bytes,
            "state_problem": info.state_problem,
            "stray_processes": list(info.stray_processes),
            "start": dict(info.start),
        },
        **machine_document(machine, reserved_cpus, placements, capacity),
    }
