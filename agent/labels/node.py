"""The node's own labels: its shape, whether it is a VM, and the physical machine behind it.

Pure over a `Machine` and facts read at the edge (DMI, the hashed host id),
so `numa-agent labels` and the daemon's feature file print the same thing.
"""

from __future__ import annotations

from agent.labels import PREFIX
from topology.tree import EFFICIENCY, PERFORMANCE, Machine

SOCKETS = PREFIX + "sockets"
NUMA_NODES = PREFIX + "numa-nodes"
MEMORY_ONLY_NODES = PREFIX + "memory-only-nodes"
CORES = PREFIX + "cores"
CPUS = PREFIX + "cpus"
SMT = PREFIX + "smt"
L3_GROUPS = PREFIX + "l3-groups"
ISOLATED_CPUS = PREFIX + "isolated-cpus"
VIRTUAL = PREFIX + "virtual"
PHYSICAL_HOST = PREFIX + "physical-host"
# Hybrid machines only: how many cores of each kind the kernel reports.
PERFORMANCE_CORES = PREFIX + "performance-cores"
EFFICIENCY_CORES = PREFIX + "efficiency-cores"
# Only where some cores turbo higher than the rest of their class.
FAVOURED_CORES = PREFIX + "favoured-cores"


def node_labels(
    machine: Machine, *, virtual: bool | None, physical_host: str | None
) -> dict[str, str]:
    """Label -> value, sorted by label.

    Counts cover what the tree holds (online CPUs, cores with an online thread,
    NUMA nodes with CPUs); `smt` is "true" when any core has two threads online;
    `isolated-cpus` counts online isolated CPUs. `virtual` (None: DMI unreadable)
    and `physical_host` (the hash; None: no source) are left out when unknown.
    `performance-cores` / `efficiency-cores` are there only on hybrid machines,
    `favoured-cores` only when some core turbos higher than its class.
    """
    cores = list(machine.iter_cores())
    labels = {
        SOCKETS: str(len(machine.sockets)),
        NUMA_NODES: str(len(list(machine.iter_numa_nodes()))),
        MEMORY_ONLY_NODES: str(len(machine.memory_only_nodes)),
        CORES: str(len(cores)),
        CPUS: str(len(machine.cpus)),
        SMT: str(any(len(core.cpus) > 1 for core in cores)).lower(),
        L3_GROUPS: str(len(list(machine.iter_l3_groups()))),
        ISOLATED_CPUS: str(len(machine.isolated & machine.cpus)),
    }
    if machine.hybrid:
        labels[PERFORMANCE_CORES] = str(sum(c.cpu_class == PERFORMANCE for c in cores))
        labels[EFFICIENCY_CORES] = str(sum(c.cpu_class == EFFICIENCY for c in cores))
    favoured = sum(c.favoured for c in cores)
    if favoured:
        labels[FAVOURED_CORES] = str(favoured)
    if virtual is not None:
        labels[VIRTUAL] = str(virtual).lower()
    if physical_host is not None:
        labels[PHYSICAL_HOST] = physical_host
    return dict(sorted(labels.items()))
