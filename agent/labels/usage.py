"""What is taken on each NUMA node, from the running agent's status document.

The status document (agent/introspect/document.py) gives, per pool, the
exclusive CPUs held and the shared milliCPU and memory requested by containers
placed in the pool or below it. A NUMA node's use is then:

- its exclusive CPUs (1000 milliCPU each);
- the shared requests of containers placed in the node's own pool or below it;
- a share of the requests of containers placed in a pool spanning several
  nodes (a die, socket, or the machine): their CPU requests split by how many
  of that pool's shared CPUs each node holds, their memory by each node's memory.

Splits are exact in total (largest-remainder rounding in node id order).
Containers on reserved CPUs are not counted: reserved CPUs are not allocatable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topology.cpuset import CPUSet, CPUSetError
from topology.tree import Machine


class UsageError(ValueError):
    """The status document does not describe this machine, or is not one; says what differs."""


@dataclass(frozen=True, slots=True)
class NodeUse:
    cpu_milli: int
    memory_bytes: int


def node_memory(machine: Machine, node_id: int) -> int:
    """A NUMA node's memory with the CPU-less memory nodes attached to it (its cpuset_mems)."""
    own = machine.numa_node(node_id).memory_bytes
    return own + sum(
        m.memory_bytes for m in machine.memory_only_nodes if m.closest_cpu_node == node_id
    )


def split(total: int, weights: Mapping[int, int]) -> dict[int, int]:
    """`total` shared out by `weights` (node -> weight), integers summing to `total`.

    Cumulative rounding: node i gets floor(total * W_i / W) - floor(total * W_{i-1} / W)
    with W_i the weights up to i in id order. All weights 0: nothing is split.
    """
    whole = sum(weights.values())
    if whole <= 0:
        return {node: 0 for node in weights}
    out: dict[int, int] = {}
    running = given = 0
    for node in sorted(weights):
        running += weights[node]
        upto = total * running // whole
        out[node] = upto - given
        given = upto
    return out


def _cpus(pool: Mapping[str, Any], key: str) -> CPUSet:
    try:
        return CPUSet.parse(str(pool[key]))
    except (KeyError, CPUSetError) as err:
        raise UsageError(f"pool {pool.get('name')!r}: bad {key}: {err}") from None


def _int(pool: Mapping[str, Any], key: str) -> int:
    value = pool.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"pool {pool.get('name')!r}: {key} is {value!r}, not an integer")
    return value


def node_use(document: Mapping[str, Any], machine: Machine) -> dict[int, NodeUse]:
    """NUMA node id -> what containers take there; UsageError for another machine's document."""
    about = document.get("machine") if isinstance(document, Mapping) else None
    seen = about.get("cpus") if isinstance(about, Mapping) else None
    if seen != str(machine.cpus):
        raise UsageError(
            f"the running agent sees CPUs {seen!r}, this machine has {str(machine.cpus)!r}"
        )
    pools: Sequence[Mapping[str, Any]] = document.get("pools") or []
    if not isinstance(pools, list) or not all(isinstance(p, Mapping) for p in pools):
        raise UsageError("the status document has no list of pools")
    nodes = {node.id: node for node in machine.iter_numa_nodes()}
    memory = {node_id: node_memory(machine, node_id) for node_id in nodes}
    cpu = dict.fromkeys(nodes, 0)
    mem = dict.fromkeys(nodes, 0)

    # Exclusive CPUs: every pool lists those under it; the union is the machine's.
    exclusive = CPUSet().union(*(_cpus(p, "exclusive_cpus") for p in pools))
    for node_id, node in nodes.items():
        cpu[node_id] += 1000 * len(exclusive & node.cpus)

    # Shared requests and memory are counted in a pool and all its ancestors: what
    # a pool holds directly is its count minus its children's.
    children: dict[str, list[Mapping[str, Any]]] = {}
    for pool in pools:
        if pool.get("parent") is not None:
            children.setdefault(str(pool["parent"]), []).append(pool)
    for pool in pools:
        below = children.get(str(pool.get("name")), [])
        own_milli = _int(pool, "shared_milli_used") - sum(
            _int(c, "shared_milli_used") for c in below
        )
        own_memory = _int(pool, "memory_used_bytes") - sum(
            _int(c, "memory_used_bytes") for c in below
        )
        spanned = [n for n in pool.get("numa_nodes", []) if n in nodes]
        if not spanned:
            continue
        shared = _cpus(pool, "shared_cpus")
        weights = {n: len(shared & nodes[n].cpus) for n in spanned}
        if not any(weights.values()):  # no shared CPU left: split by the pool's CPUs
            weights = {n: len(_cpus(pool, "cpus") & nodes[n].cpus) for n in spanned}
        for node_id, part in split(max(own_milli, 0), weights).items():
            cpu[node_id] += part
        for node_id, part in split(max(own_memory, 0), {n: memory[n] for n in spanned}).items():
            mem[node_id] += part
    return {node_id: NodeUse(cpu[node_id], mem[node_id]) for node_id in nodes}
