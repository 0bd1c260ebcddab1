"""The node's NodeResourceTopology object (topology.node.k8s.io/v1alpha2), for
topology-aware schedulers: one zone per NUMA node with CPUs.

Each zone has `cpu` and `memory` with capacity (what the node has), allocatable
(capacity minus the reserved CPUs) and available (allocatable minus what the
running agent's containers take, `agent.labels.usage`; = allocatable without
it), and costs from the SLIT distances to every zone, itself included. Memory
is the node's own plus the CPU-less memory nodes attached to it, the memory a
container placed there gets. On hybrid machines a zone's `attributes` list its
`performance-cpus` and `efficiency-cpus` (CPU lists, as the kernel classes
the cores). The agent does not align to kubelet's Topology Manager, so the
policy is "None" and the scope "container".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.labels.usage import NodeUse, node_memory
from topology.cpuset import CPUSet
from topology.tree import CPU_CLASSES, Machine

API_VERSION = "topology.node.k8s.io/v1alpha2"
KIND = "NodeResourceTopology"
ZONE_TYPE = "Node"


def zone_name(node_id: int) -> str:
    return f"node-{node_id}"


def cpu_quantity(milli: int) -> str:
    """Whole CPUs as an integer ("12"), else millicores ("11500m")."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def memory_quantity(size: int) -> str:
    """Bytes in KiB ("67108864Ki") as kubelet reports memory, else plain bytes."""
    return f"{size // 1024}Ki" if size % 1024 == 0 else str(size)


def _resource(name: str, capacity: str, allocatable: str, available: str) -> dict[str, str]:
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": available}


def node_resource_topology(
    machine: Machine,
    *,
    node_name: str,
    reserved_cpus: CPUSet,
    use: Mapping[int, NodeUse] | None = None,
) -> dict[str, Any]:
    """The object, ready for `yaml.safe_dump` and `kubectl apply`."""
    nodes = list(machine.iter_numa_nodes())
    zones: list[dict[str, Any]] = []
    for node in sorted(nodes, key=lambda n: n.id):
        taken = (use or {}).get(node.id, NodeUse(0, 0))
        cpu_capacity = 1000 * len(node.cpus)
        cpu_allocatable = 1000 * len(node.cpus - reserved_cpus)
        memory = node_memory(machine, node.id)
        zone: dict[str, Any] = {
            "name": zone_name(node.id),
            "type": ZONE_TYPE,
            "costs": [
                {"name": zone_name(other.id), "value": machine.distance(node.id, other.id)}
                for other in sorted(nodes, key=lambda n: n.id)
            ],
            "resources": [
                _resource(
                    "cpu",
                    cpu_quantity(cpu_capacity),
                    cpu_quantity(cpu_allocatable),
                    cpu_quantity(max(cpu_allocatable - taken.cpu_milli, 0)),
                ),
                _resource(
                    "memory",
                    memory_quantity(memory),
                    memory_quantity(memory),
                    memory_quantity(max(memory - taken.memory_bytes, 0)),
                ),
            ],
        }
        if machine.hybrid:
            zone["attributes"] = [
                {"name": f"{cls}-cpus", "value": str(node.cpus & machine.class_cpus(cls))}
                for cls in CPU_CLASSES
            ]
        zones.append(zone)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": node_name},
        "topologyPolicies": ["None"],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "none"},
            {"name": "topologyManagerScope", "value": "container"},
        ],
        "zones": zones,
    }
