"""The machine's tree: sockets -> dies -> NUMA nodes -> L3 groups -> cores -> threads.

Immutable values built once by `topology.sysfs.read_machine` (or by tests);
everything above the reader (policy, simulate, the `topology` command) speaks
in these types and never touches sysfs itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from topology.cpuset import CPUSet

# The kinds of core a hybrid machine has (Core.cpu_class).
PERFORMANCE = "performance"
EFFICIENCY = "efficiency"
CPU_CLASSES = (PERFORMANCE, EFFICIENCY)


@dataclass(frozen=True, slots=True)
class Core:
    """A physical core: the hardware threads that share its execution units.

    `id` is the core's lowest CPU id (sysfs core_id values repeat across
    sockets, so they are kept separately in `core_id`). `cpu_class` is
    "performance" / "efficiency" on hybrid machines (as the kernel tells the
    kinds of core apart), None elsewhere. `capacity` is the kernel's
    `cpu_capacity` (0..1024) where it gives one. `favoured` marks a core that
    turbos higher than the others of its class (Intel Turbo Boost Max 3.0,
    AMD preferred cores): the same kind of core, a little faster, not a class.
    """

    id: int
    cpus: CPUSet
    core_id: int = 0
    cpu_class: str | None = None
    capacity: int | None = None
    favoured: bool = False


@dataclass(frozen=True, slots=True)
class L3Group:
    """CPUs of one NUMA node that share a last-level cache. `id` = lowest CPU."""

    id: int
    cpus: CPUSet
    cores: tuple[Core, ...]


@dataclass(frozen=True, slots=True)
class NumaNode:
    id: int
    cpus: CPUSet
    memory_bytes: int
    l3_groups: tuple[L3Group, ...]
    distances: Mapping[int, int] = field(default_factory=dict)

    @property
    def cores(self) -> tuple[Core, ...]:
        return tuple(core for group in self.l3_groups for core in group.cores)


@dataclass(frozen=True, slots=True)
class MemoryOnlyNode:
    """A NUMA node with memory but no CPUs (CXL, PMEM, HBM)."""

    id: int
    memory_bytes: int
    closest_cpu_node: int
    distances: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryTier:
    """A kernel memory tier (/sys/devices/virtual/memory_tiering/memory_tier<id>).

    Lower ids are faster: DRAM is usually tier 4, CXL or PMEM memory a higher one.
    The kernel demotes cold pages down the tiers when reclaim is allowed to.
    """

    id: int
    nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Die:
    id: int
    cpus: CPUSet
    numa_nodes: tuple[NumaNode, ...]


@dataclass(frozen=True, slots=True)
class Socket:
    id: int
    cpus: CPUSet
    dies: tuple[Die, ...]

    @property
    def numa_nodes(self) -> tuple[NumaNode, ...]:
        return tuple(node for die in self.dies for node in die.numa_nodes)


@dataclass(frozen=True, slots=True)
class NetworkInterface:
    """A network interface whose PCI device reports the NUMA node it hangs off.

    Only interfaces with a `device` that names a node are kept: virtual ones
    (lo, bridges, veth, bonds) and devices reporting -1 carry no locality.
    """

    name: str
    numa_node: int


@dataclass(frozen=True, slots=True)
class Machine:
    """The whole machine. CPU sets in the tree hold online CPUs only.

    `distances[a][b]` is the sysfs NUMA distance from node a to node b (10 =
    local), over all nodes including memory-only ones. `nics` (sorted by name)
    is not part of the topology proper: `topology.render.machine_to_json`, and
    with it the state file's machine fingerprint, leaves it out, so a NIC
    appearing or going does not make the agent distrust its state. Neither are
    `memory_tiers` (sorted by id; empty where the kernel has none), which are
    shown, not used for placement.
    """

    sockets: tuple[Socket, ...]
    online: CPUSet
    offline: CPUSet = CPUSet()
    isolated: CPUSet = CPUSet()
    present: CPUSet = CPUSet()
    memory_only_nodes: tuple[MemoryOnlyNode, ...] = ()
    distances: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    cpu_model: str = ""
    cpu_flags: tuple[str, ...] = ()
    nics: tuple[NetworkInterface, ...] = ()
    memory_tiers: tuple[MemoryTier, ...] = ()

    @property
    def cpus(self) -> CPUSet:
        """All online CPUs in the tree."""
        return CPUSet().union(*(s.cpus for s in self.sockets))

    def iter_dies(self) -> Iterator[Die]:
        for socket in self.sockets:
            yield from socket.dies

    def iter_numa_nodes(self) -> Iterator[NumaNode]:
        for die in self.iter_dies():
            yield from die.numa_nodes

    def iter_l3_groups(self) -> Iterator[L3Group]:
        for node in self.iter_numa_nodes():
            yield from node.l3_groups

    def iter_cores(self) -> Iterator[Core]:
        for group in self.iter_l3_groups():
            yield from group.cores

    @property
    def hybrid(self) -> bool:
        """True when the kernel tells two kinds of core apart (performance, efficiency)."""
        return any(core.cpu_class is not None for core in self.iter_cores())

    def class_cpus(self, cpu_class: str) -> CPUSet:
        """The online CPUs of cores of `cpu_class` ("performance" or "efficiency").

        Empty on a machine that is not hybrid: there, no core has a class.
        """
        return CPUSet().union(*(c.cpus for c in self.iter_cores() if c.cpu_class == cpu_class))

    @property
    def favoured_cpus(self) -> CPUSet:
        """CPUs of the favoured cores (see `Core.favoured`); empty when none is."""
        return CPUSet().union(*(c.cpus for c in self.iter_cores() if c.favoured))

    def numa_node(self, node_id: int) -> NumaNode:
        for node in self.iter_numa_nodes():
            if node.id == node_id:
                return node
        raise KeyError(f"no NUMA node {node_id} with CPUs")

    def distance(self, a: int, b: int) -> int:
        """sysfs NUMA distance; 10 for a node to itself when no table is known."""
        row = self.distances.get(a)
        if row is None or b not in row:
            return 10 if a == b else 20
        return row[b]

    def nics_on(self, node_id: int) -> tuple[str, ...]:
        """Names of the network interfaces local to NUMA node `node_id`, sorted."""
        return tuple(nic.name for nic in self.nics if nic.numa_node == node_id)

    def memory_nodes_for(self, node_id: int) -> tuple[int, ...]:
        """The CPU node plus the memory-only nodes attached to it."""
        extra = tuple(m.id for m in self.memory_only_nodes if m.closest_cpu_node == node_id)
        return (node_id, *extra)
