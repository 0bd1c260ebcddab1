"""Labels of each NUMA node with CPUs: what node affinity inside the machine selects on.

Kubernetes' node labels, one level down: a NUMA node carries its id, socket,
die, CPU count, memory and local NICs (all from the `Machine` the sysfs reader
built, so placement does no I/O), plus the operator's own labels from the
`numa_labels` setting.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.kube.names import label_key_problem
from agent.labels import PREFIX
from topology.tree import EFFICIENCY, PERFORMANCE, Machine

NUMA = PREFIX + "numa"
SOCKET = PREFIX + "socket"
# A die's index in Machine.iter_dies() order (socket by socket, dies in id order),
# not sysfs die_id: die ids restart at 0 in every socket, a label must not.
DIE = PREFIX + "die"
CPUS = PREFIX + "cpus"
MEMORY_MIB = PREFIX + "memory-mib"
NET_PREFIX = PREFIX + "net."
# Hybrid machines only: the node's online CPUs of each kind of core (counts).
PERFORMANCE_CPUS = PREFIX + "performance-cpus"
EFFICIENCY_CPUS = PREFIX + "efficiency-cpus"

MIB = 1024 * 1024


def net_label(interface: str) -> str | None:
    """`numa-agent.io/net.<interface>`, or None when the name cannot be in a label key."""
    key = NET_PREFIX + interface
    return key if label_key_problem(key) is None else None


def numa_node_labels(
    machine: Machine, operator_labels: Mapping[int, Mapping[str, str]] | None = None
) -> Mapping[int, Mapping[str, str]]:
    """NUMA node id -> its labels, for every NUMA node with CPUs.

    - `numa-agent.io/numa`: the node id; `socket`: its package id; `die`: the
      die's index in the machine (unique across sockets, see DIE);
    - `cpus`: its online CPUs (a count); `memory-mib`: its own memory in MiB
      (CPU-less memory nodes attached to it are not counted);
    - on hybrid machines, `performance-cpus` / `efficiency-cpus`: how many of
      its online CPUs are on cores of each kind (so a rule can ask for a node
      that has efficiency cores);
    - `net.<interface>`: "true" for each NIC whose PCI device reports this node
      (names that cannot form a label key are skipped);
    - then `operator_labels[node]`, already validated (parse_numa_labels); nodes
      it names that this machine lacks are ignored here (numa_labels_problem
      reports them). The agent's labels win over an operator label of the same key.
    """
    extra = operator_labels or {}
    hybrid = machine.hybrid
    performance, efficiency = machine.class_cpus(PERFORMANCE), machine.class_cpus(EFFICIENCY)
    out: dict[int, Mapping[str, str]] = {}
    dies = ((socket, die) for socket in machine.sockets for die in socket.dies)
    for die_index, (socket, die) in enumerate(dies):  # the order of Machine.iter_dies()
        for node in die.numa_nodes:
            own = {
                NUMA: str(node.id),
                SOCKET: str(socket.id),
                DIE: str(die_index),
                CPUS: str(len(node.cpus)),
                MEMORY_MIB: str(node.memory_bytes // MIB),
            }
            if hybrid:
                own[PERFORMANCE_CPUS] = str(len(node.cpus & performance))
                own[EFFICIENCY_CPUS] = str(len(node.cpus & efficiency))
            for interface in machine.nics_on(node.id):
                key = net_label(interface)
                if key is not None:
                    own[key] = "true"
            labels = {**extra.get(node.id, {}), **own}
            out[node.id] = dict(sorted(labels.items()))
    return out
