"""Machines as data: the compact description (`MachineSpec`) and the named shapes.

`build_machine` turns a description into the `Machine` the sysfs reader would
read from the same machine, without writing a file: it hands the reader's
assembly (`topology.sysfs.assemble`) the facts the kernel's files would hold.
`simulate` places on these; `devtools.fakesysfs` writes them out as sysfs trees
for the tests that exercise the reader itself.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from topology.cpuset import CPUSet, CPUSetError
from topology.sysfs import MachineFacts, NodeFacts, ThreadFacts, assemble
from topology.tree import Machine, MemoryTier, NetworkInterface

Numbering = Literal["interleaved", "adjacent"]
HybridSignal = Literal["pmu", "capacity", "cpufreq"]

GI = 1024**3

# Kubernetes quantity suffixes (binary and decimal) for memory sizes.
_SUFFIXES: dict[str, int] = {
    "": 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "E": 1000**6,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")

# What the kernel reports for a hybrid machine's two kinds of core.
PERFORMANCE_CAPACITY = 1024
EFFICIENCY_CAPACITY = 600
PERFORMANCE_MAX_KHZ = 5_200_000
EFFICIENCY_MAX_KHZ = 3_900_000
# A favoured core (Turbo Boost Max 3.0, AMD preferred cores) turbos a little higher.
FAVOURED_MAX_KHZ = PERFORMANCE_MAX_KHZ + 200_000


class MachineSpecError(ValueError):
    """A compact machine description that cannot describe a machine; names the key."""


@dataclass(frozen=True, slots=True)
class DmiSpec:
    """What `/sys/class/dmi/id` says; an empty field is a file not written."""

    sys_vendor: str = ""
    product_name: str = ""
    product_uuid: str = ""


# A rack server, and a KVM guest as QEMU describes it (Proxmox, OpenStack, libvirt).
DMI_HARDWARE = DmiSpec("Dell Inc.", "PowerEdge R750", "4c4c4544-0051-3610-8052-b7c04f4e3333")
DMI_KVM = DmiSpec("QEMU", "Standard PC (Q35 + ICH9, 2009)", "8a3c5e0e-1f1d-4b6a-9d55-4a0c2a1f7e01")
DMI_PRESETS: dict[str, DmiSpec | None] = {"hardware": DMI_HARDWARE, "kvm": DMI_KVM, "none": None}

# Linux interface names: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or whitespace.
_IFNAME = re.compile(r"[^/:\s]{1,15}")


def parse_quantity(value: object, key: str = "memory") -> int:
    """Bytes from an int or a Kubernetes quantity string ("96Gi", "512Mi", "1G")."""
    if isinstance(value, bool):
        raise MachineSpecError(f"{key}: expected bytes or a quantity like '96Gi', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise MachineSpecError(f"{key}: memory size {value} is negative")
        return value
    if not isinstance(value, str):
        raise MachineSpecError(f"{key}: expected bytes or a quantity like '96Gi', got {value!r}")
    match = _QUANTITY.match(value)
    if match is None or match.group(2) not in _SUFFIXES:
        raise MachineSpecError(
            f"{key}: {value!r} is not a quantity (use bytes or a suffix among "
            f"{', '.join(s for s in _SUFFIXES if s)})"
        )
    try:
        amount = Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise MachineSpecError(f"{key}: {value!r} is not a number") from exc
    if amount != amount.to_integral_value():
        raise MachineSpecError(f"{key}: {value!r} is not a whole number of bytes")
    return int(amount)


@dataclass(frozen=True, slots=True)
class CoreLayout:
    """Where one generated core sits and which CPU ids its threads got."""

    socket: int
    die: int
    numa: int
    index: int  # core index within its NUMA node
    cpus: tuple[int, ...]
    efficiency: bool
    favoured: bool = False


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """A compact description of a machine, as a scenario file or a test writes it.

    Cores of a NUMA node: `cores_per_numa` in all, of which the last
    `efficiency_cores_per_numa` are single-threaded efficiency cores (hybrid),
    told apart as `hybrid_signal` says: `pmu` (Intel: devices/cpu_core and
    cpu_atom), `capacity` (Arm: cpu_capacity) or `cpufreq` (only a lower
    maximum frequency: an old kernel, no classes). The first
    `favoured_cores_per_numa` cores of a node turbo 200 MHz higher.
    CPU-node ids come first (socket by socket, die by die), memory-only nodes
    after them; memory-only node j sits nearest CPU node j * cpu_nodes // count.
    Without `distances`, they are generated: 10 local, `distance_same_die`,
    `distance_same_socket`, `distance_remote`; memory-only nodes are
    `memory_only_distance` from their CPU node and further from the rest.
    """

    sockets: int = 1
    dies_per_socket: int = 1
    numa_per_die: int = 1
    cores_per_numa: int = 4
    threads_per_core: int = 2
    numbering: Numbering = "interleaved"
    memory_per_numa: int = 16 * GI
    distances: tuple[tuple[int, ...], ...] | None = None
    distance_same_die: int = 11
    distance_same_socket: int = 12
    distance_remote: int = 21
    isolated: CPUSet = CPUSet()
    offline: CPUSet = CPUSet()
    memory_only_nodes: int = 0
    memory_per_memory_only_node: int = 128 * GI
    memory_only_distance: int = 14
    l3_per_numa: int = 1  # 0: no L3 cache files at all
    efficiency_cores_per_numa: int = 0
    hybrid_signal: HybridSignal = "capacity"
    favoured_cores_per_numa: int = 0
    # devices/virtual/memory_tiering: CPU nodes in tier 4 (DRAM), memory-only in tier 20.
    memory_tiers: bool = False
    write_die_id: bool = True  # kernels before 5.2 have no die_id
    write_node_dir: bool = True  # CONFIG_NUMA=n kernels have no node/ directory
    # PCI network interfaces and the NUMA node their device reports (-1: unknown).
    nics: tuple[tuple[str, int], ...] = ()
    # Interfaces without a device (class/net/<if> with no `device` link).
    virtual_nics: tuple[str, ...] = ("lo",)
    dmi: DmiSpec | None = None  # None: no class/dmi at all

    def __post_init__(self) -> None:
        for key in ("sockets", "dies_per_socket", "numa_per_die", "cores_per_numa"):
            if getattr(self, key) < 1:
                raise MachineSpecError(f"{key}: must be at least 1, got {getattr(self, key)}")
        if not 1 <= self.threads_per_core <= 8:
            raise MachineSpecError(f"threads_per_core: must be 1..8, got {self.threads_per_core}")
        if self.numbering not in ("interleaved", "adjacent"):
            raise MachineSpecError(
                f"numbering: must be 'interleaved' or 'adjacent', got {self.numbering!r}"
            )
        if self.hybrid_signal not in ("pmu", "capacity", "cpufreq"):
            raise MachineSpecError(
                f"hybrid_signal: must be 'pmu', 'capacity' or 'cpufreq', got {self.hybrid_signal!r}"
            )
        performance = self.cores_per_numa - self.efficiency_cores_per_numa
        if not 0 <= self.favoured_cores_per_numa <= max(performance, 0):
            raise MachineSpecError(
                f"favoured_cores_per_numa: must be 0..{performance} (the performance "
                f"cores of a node), got {self.favoured_cores_per_numa}"
            )
        if not 0 <= self.efficiency_cores_per_numa < self.cores_per_numa:
            raise MachineSpecError(
                f"efficiency_cores_per_numa: must be 0..{self.cores_per_numa - 1}, "
                f"got {self.efficiency_cores_per_numa}"
            )
        if not 0 <= self.l3_per_numa <= self.cores_per_numa:
            raise MachineSpecError(
                f"l3_per_numa: must be 0..{self.cores_per_numa}, got {self.l3_per_numa}"
            )
        if self.memory_only_nodes < 0:
            raise MachineSpecError(f"memory_only_nodes: must be >= 0, got {self.memory_only_nodes}")
        if self.memory_only_nodes and not self.write_node_dir:
            raise MachineSpecError("memory_only_nodes: needs write_node_dir")
        everything = CPUSet.range(0, self.cpu_count - 1)
        for key in ("isolated", "offline"):
            extra = getattr(self, key) - everything
            if extra:
                raise MachineSpecError(
                    f"{key}: CPUs {extra} do not exist (the machine has {everything})"
                )
        if everything.is_subset(self.offline):
            raise MachineSpecError("offline: at least one CPU must stay online")
        if self.distances is not None:
            n = self.node_count
            if len(self.distances) != n or any(len(row) != n for row in self.distances):
                raise MachineSpecError(
                    f"distances: must be a {n}x{n} matrix (CPU nodes then memory-only nodes)"
                )
        names = [name for name, _ in self.nics] + list(self.virtual_nics)
        for name in names:
            if not _IFNAME.fullmatch(name) or name in (".", ".."):
                raise MachineSpecError(
                    f"nics: {name!r} is not an interface name (1-15 characters, "
                    "no '/', ':' or whitespace)"
                )
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise MachineSpecError(f"nics: interface(s) {', '.join(twice)} given twice")
        for name, node in self.nics:
            if not -1 <= node < self.node_count:
                raise MachineSpecError(
                    f"nics: {name}: NUMA node {node} does not exist "
                    f"(-1 or 0..{self.node_count - 1})"
                )

    # -- derived sizes --------------------------------------------------------

    @property
    def cpu_node_count(self) -> int:
        return self.sockets * self.dies_per_socket * self.numa_per_die

    @property
    def node_count(self) -> int:
        return self.cpu_node_count + self.memory_only_nodes

    @property
    def threads_per_numa(self) -> int:
        performance = self.cores_per_numa - self.efficiency_cores_per_numa
        return performance * self.threads_per_core + self.efficiency_cores_per_numa

    @property
    def cpu_count(self) -> int:
        return self.cpu_node_count * self.threads_per_numa

    @property
    def core_count(self) -> int:
        return self.cpu_node_count * self.cores_per_numa

    def memory_only_host(self, j: int) -> int:
        """The CPU node that memory-only node number j (0-based) is closest to."""
        return j * self.cpu_node_count // self.memory_only_nodes

    # -- construction from a scenario ----------------------------------------

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> MachineSpec:
        """Build from the compact scenario form; errors name the offending key."""
        if not isinstance(data, Mapping):
            raise MachineSpecError(f"machine description must be a mapping, got {data!r}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in fields:
                raise MachineSpecError(f"{key}: unknown key (known: {', '.join(sorted(fields))})")
            kwargs[key] = _coerce(key, value)
        return cls(**kwargs)


_INT_KEYS = frozenset(
    {
        "sockets",
        "dies_per_socket",
        "numa_per_die",
        "cores_per_numa",
        "threads_per_core",
        "distance_same_die",
        "distance_same_socket",
        "distance_remote",
        "memory_only_nodes",
        "memory_only_distance",
        "l3_per_numa",
        "efficiency_cores_per_numa",
        "favoured_cores_per_numa",
    }
)


def _coerce(key: str, value: Any) -> Any:
    if key in _INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MachineSpecError(f"{key}: expected an integer, got {value!r}")
        return value
    if key in ("memory_per_numa", "memory_per_memory_only_node"):
        return parse_quantity(value, key)
    if key in ("isolated", "offline"):
        try:
            if isinstance(value, str):
                return CPUSet.parse(value)
            if isinstance(value, list | tuple) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                return CPUSet.of(value)
        except CPUSetError as exc:
            raise MachineSpecError(f"{key}: {exc}") from exc
        raise MachineSpecError(f"{key}: expected a CPU list like '0-3,8' or [0, 1], got {value!r}")
    if key == "distances":
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not all(
            isinstance(row, list | tuple)
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in row)
            for row in value
        ):
            raise MachineSpecError(
                f"distances: expected a square matrix of positive integers, got {value!r}"
            )
        return tuple(tuple(row) for row in value)
    if key in ("write_die_id", "write_node_dir", "memory_tiers"):
        if not isinstance(value, bool):
            raise MachineSpecError(f"{key}: expected true or false, got {value!r}")
        return value
    if key in ("numbering", "hybrid_signal"):
        if not isinstance(value, str):
            raise MachineSpecError(f"{key}: expected a string, got {value!r}")
        return value
    if key == "nics":
        return _nics(value)
    if key == "virtual_nics":
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise MachineSpecError(f"virtual_nics: expected a list of names, got {value!r}")
        return tuple(value)
    if key == "dmi":
        return _dmi(value)
    raise AssertionError(f"unhandled MachineSpec key {key}")  # pragma: no cover


def _nics(value: Any) -> tuple[tuple[str, int], ...]:
    """`{eth0: 0, eth1: 1}`: interface name -> the NUMA node its device reports."""
    if not isinstance(value, Mapping):
        raise MachineSpecError(f"nics: expected a mapping of interface to NUMA node, got {value!r}")
    out: list[tuple[str, int]] = []
    for name, node in value.items():
        if not isinstance(name, str):
            raise MachineSpecError(f"nics: interface name {name!r} is not a string")
        if isinstance(node, bool) or not isinstance(node, int):
            raise MachineSpecError(f"nics: {name}: expected a NUMA node number, got {node!r}")
        out.append((name, node))
    return tuple(out)


def _dmi(value: Any) -> DmiSpec | None:
    """A preset name (hardware, kvm, none) or {sys_vendor, product_name, product_uuid}."""
    if isinstance(value, str):
        if value not in DMI_PRESETS:
            raise MachineSpecError(
                f"dmi: unknown preset {value!r} (known: {', '.join(DMI_PRESETS)}, "
                "or a mapping of sys_vendor, product_name, product_uuid)"
            )
        return DMI_PRESETS[value]
    if not isinstance(value, Mapping):
        raise MachineSpecError(f"dmi: expected a preset name or a mapping, got {value!r}")
    known = [f.name for f in dataclasses.fields(DmiSpec)]
    for key, text in value.items():
        if key not in known:
            raise MachineSpecError(f"dmi: {key}: unknown key (known: {', '.join(known)})")
        if not isinstance(text, str):
            raise MachineSpecError(f"dmi: {key}: expected a string, got {text!r}")
    return DmiSpec(**value)


# -- layout -------------------------------------------------------------------


def cpu_layout(spec: MachineSpec) -> tuple[CoreLayout, ...]:
    """Every core in socket/die/node order, with the CPU ids the numbering gives it.

    interleaved: the first thread of every core (socket by socket) gets ids
    0..cores-1, then the second threads, and so on; adjacent: a core's threads
    get consecutive ids.
    """
    slots: list[tuple[int, int, int, int, int, bool]] = []  # socket, die, node, index, threads
    node = 0
    for socket in range(spec.sockets):
        for die in range(spec.dies_per_socket):
            for _ in range(spec.numa_per_die):
                first_efficiency = spec.cores_per_numa - spec.efficiency_cores_per_numa
                for index in range(spec.cores_per_numa):
                    efficiency = index >= first_efficiency
                    threads = 1 if efficiency else spec.threads_per_core
                    slots.append((socket, die, node, index, threads, efficiency))
                node += 1
    ids: list[list[int]] = [[] for _ in slots]
    next_id = 0
    if spec.numbering == "adjacent":
        for i, slot in enumerate(slots):
            ids[i] = list(range(next_id, next_id + slot[4]))
            next_id += slot[4]
    else:
        for thread in range(max(slot[4] for slot in slots)):
            for i, slot in enumerate(slots):
                if thread < slot[4]:
                    ids[i].append(next_id)
                    next_id += 1
    return tuple(
        CoreLayout(
            socket=s,
            die=d,
            numa=n,
            index=x,
            cpus=tuple(ids[i]),
            efficiency=e,
            favoured=x < spec.favoured_cores_per_numa,
        )
        for i, (s, d, n, x, _, e) in enumerate(slots)
    )


def core_speed(spec: MachineSpec, core: CoreLayout) -> tuple[int | None, int | None]:
    """(cpu_capacity, cpuinfo_max_freq) of a core's threads; None: no such file.

    Uniform machines without favoured cores have neither, as many VMs do.
    """
    capacity = max_khz = None
    hybrid = spec.efficiency_cores_per_numa > 0
    if hybrid and spec.hybrid_signal == "capacity":
        capacity = EFFICIENCY_CAPACITY if core.efficiency else PERFORMANCE_CAPACITY
    if hybrid or spec.favoured_cores_per_numa:
        if core.efficiency:
            max_khz = EFFICIENCY_MAX_KHZ
        else:
            max_khz = FAVOURED_MAX_KHZ if core.favoured else PERFORMANCE_MAX_KHZ
    return capacity, max_khz


DRAM_TIER = 4
FAR_TIER = 20


def memory_tiers(spec: MachineSpec) -> tuple[MemoryTier, ...]:
    """The kernel's memory tiers of the description (none unless `memory_tiers`)."""
    if not spec.memory_tiers or not spec.write_node_dir:
        return ()
    tiers = [MemoryTier(DRAM_TIER, tuple(range(spec.cpu_node_count)))]
    if spec.memory_only_nodes:
        tiers.append(MemoryTier(FAR_TIER, tuple(range(spec.cpu_node_count, spec.node_count))))
    return tuple(tiers)


def pmu_cpus(spec: MachineSpec) -> tuple[CPUSet, CPUSet] | None:
    """Intel hybrid's (cpu_core, cpu_atom) CPU lists, or None: no such devices."""
    if not spec.efficiency_cores_per_numa or spec.hybrid_signal != "pmu":
        return None
    layout = cpu_layout(spec)
    return (
        CPUSet.of(c for core in layout if not core.efficiency for c in core.cpus),
        CPUSet.of(c for core in layout if core.efficiency for c in core.cpus),
    )


def distance_matrix(spec: MachineSpec) -> tuple[tuple[int, ...], ...]:
    """The spec's distances, or the generated ones (CPU nodes first)."""
    if spec.distances is not None:
        return spec.distances
    per_socket = spec.dies_per_socket * spec.numa_per_die

    def place(node: int) -> tuple[int, int]:  # (socket, die) of a CPU node
        return node // per_socket, node // spec.numa_per_die

    cpu_nodes = spec.cpu_node_count

    def cpu_distance(a: int, b: int) -> int:
        if a == b:
            return 10
        (sa, da), (sb, db) = place(a), place(b)
        if da == db:
            return spec.distance_same_die
        return spec.distance_same_socket if sa == sb else spec.distance_remote

    def distance(a: int, b: int) -> int:
        if a == b:
            return 10
        if a < cpu_nodes and b < cpu_nodes:
            return cpu_distance(a, b)
        if a >= cpu_nodes and b >= cpu_nodes:
            # Reaching one far memory from another goes through both hosts.
            host_a = spec.memory_only_host(a - cpu_nodes)
            host_b = spec.memory_only_host(b - cpu_nodes)
            return 2 * spec.memory_only_distance + cpu_distance(host_a, host_b) - 10
        memory, cpu = (a, b) if a >= cpu_nodes else (b, a)
        host = spec.memory_only_host(memory - cpu_nodes)
        return spec.memory_only_distance + cpu_distance(host, cpu) - 10

    n = spec.node_count
    return tuple(tuple(distance(a, b) for b in range(n)) for a in range(n))


def l3_chunks(spec: MachineSpec) -> list[range]:
    """Core indexes of each L3 group in a NUMA node (split as evenly as possible)."""
    count = spec.l3_per_numa
    if count == 0:
        return []
    size, extra = divmod(spec.cores_per_numa, count)
    chunks: list[range] = []
    start = 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        chunks.append(range(start, end))
        start = end
    return chunks


# -- named shapes ---------------------------------------------------------------

SHAPES: dict[str, MachineSpec] = {
    # A 4-core desktop with hyper-threading, on a kernel old enough to lack die_id.
    # Its one NIC reports no node (-1), as single-node firmware often does; no DMI at all.
    "desktop-1s-4c-ht": MachineSpec(
        cores_per_numa=4,
        memory_per_numa=32 * GI,
        write_die_id=False,
        nics=(("enp3s0", -1),),
    ),
    # Dual Xeon with sub-NUMA clustering: 2 nodes per socket, 80 CPUs.
    "xeon-2s-2numa": MachineSpec(
        sockets=2,
        numa_per_die=2,
        cores_per_numa=10,
        memory_per_numa=96 * GI,
        distance_same_die=11,
        distance_remote=21,
        # Two ports of one card on node 0, one card on socket 1's first node; a
        # Kubernetes node's bridge and a pod's veth have no device.
        nics=(("eno1", 0), ("ens1f0", 0), ("ens1f1", 0), ("ens5f0", 2)),
        virtual_nics=("lo", "cni0", "veth5f3a9c1e"),
        dmi=DmiSpec("Dell Inc.", "PowerEdge R740", "4c4c4544-0044-5910-8034-c3c04f335632"),
    ),
    # Dual EPYC (Milan, 64 cores) in NPS4: 8 nodes, 2 CCD L3 caches per node.
    "epyc-2s-nps4": MachineSpec(
        sockets=2,
        numa_per_die=4,
        cores_per_numa=16,
        memory_per_numa=64 * GI,
        l3_per_numa=2,
        distance_same_die=12,
        distance_remote=32,
        nics=(("enp65s0f0np0", 1), ("enp65s0f1np1", 1), ("enp193s0f0np0", 5)),
        dmi=DmiSpec("Supermicro", "AS -2124US-TNRP", "2b6e1f0a-93c4-11ec-8000-3cecef5a7d10"),
    ),
    # Four sockets, one node each, fully connected.
    "server-4s": MachineSpec(
        sockets=4,
        cores_per_numa=24,
        memory_per_numa=192 * GI,
        distance_remote=21,
        nics=(("ens2f0", 0), ("ens6f0", 3)),
        dmi=DmiSpec("HPE", "ProLiant DL560 Gen10", "36383150-3630-584d-5139-333030383457"),
    ),
    # Cascade Lake-AP style: two dies per package, each its own NUMA node.
    "dies-2-per-socket": MachineSpec(
        sockets=2,
        dies_per_socket=2,
        cores_per_numa=12,
        memory_per_numa=96 * GI,
        distance_same_socket=12,
        distance_remote=21,
        nics=(("eno1", 0),),
        dmi=DmiSpec("Lenovo", "ThinkSystem SR850", "9d1b3c52-7a0e-11e9-a1b2-7ed30a1c2b3d"),
    ),
    # 16 CPUs, siblings adjacent; core 7 offline, one thread of core 6 offline,
    # cores 1 and 2 isolated (isolcpus=2-5).
    "isolated-offline": MachineSpec(
        numa_per_die=2,
        cores_per_numa=4,
        numbering="adjacent",
        memory_per_numa=8 * GI,
        offline=CPUSet.parse("13-15"),
        isolated=CPUSet.parse("2-5"),
        # A KVM guest: its emulated NIC's PCI device reports no node.
        nics=(("ens3", -1),),
        dmi=DMI_KVM,
    ),
    # Two sockets with one CXL memory expander each (nodes 2 and 3).
    "cxl-memory-only": MachineSpec(
        sockets=2,
        cores_per_numa=16,
        memory_per_numa=128 * GI,
        memory_only_nodes=2,
        memory_per_memory_only_node=256 * GI,
        memory_only_distance=14,
        memory_tiers=True,
        distance_remote=21,
        nics=(("ens7f0", 1),),
        dmi=DmiSpec("Supermicro", "SYS-221H-TNR", "7c1f0e2a-5d3b-11ee-8c99-0242ac120002"),
    ),
    # Alder Lake style: 8 performance cores with HT (0-15) + 8 efficiency cores (16-23),
    # as the kernel's cpu_core / cpu_atom devices list them; the first two P-cores are
    # favoured (Turbo Boost Max 3.0: 5.4 GHz against 5.2, E-cores 3.9).
    "hybrid-desktop": MachineSpec(
        cores_per_numa=16,
        efficiency_cores_per_numa=8,
        numbering="adjacent",
        memory_per_numa=64 * GI,
        hybrid_signal="pmu",
        favoured_cores_per_numa=2,
        nics=(("enp4s0", 0),),
        # A desktop board whose firmware never set a UUID: the well-known placeholder.
        dmi=DmiSpec(
            "Micro-Star International Co., Ltd.",
            "MS-7D25",
            "03000200-0400-0500-0006-000700080009",
        ),
    ),
    # A 10-core desktop (Comet Lake style) whose first two cores turbo 200 MHz higher:
    # favoured cores, one kind of core, no classes.
    "desktop-favoured": MachineSpec(
        cores_per_numa=10,
        memory_per_numa=32 * GI,
        favoured_cores_per_numa=2,
        nics=(("eno1", -1),),
    ),
    # An Arm board (RK3588 style): 4 big cores (0-3) and 4 LITTLE ones (4-7), one
    # thread each, told apart by cpu_capacity; no DMI.
    "arm-big-little": MachineSpec(
        cores_per_numa=8,
        threads_per_core=1,
        efficiency_cores_per_numa=4,
        memory_per_numa=16 * GI,
        hybrid_signal="capacity",
        nics=(("eth0", -1),),
    ),
}


# -- building the Machine -----------------------------------------------------

# Where facts built from a description come from, in the (never expected) errors.
_FROM_SPEC = Path("<machine description>")


def _threads(spec: MachineSpec, online: CPUSet) -> dict[int, ThreadFacts]:
    """Each online CPU's facts, as `devtools.fakesysfs.write_sysfs` writes them."""
    layout = cpu_layout(spec)
    l3_of_index = {index: group for group, chunk in enumerate(l3_chunks(spec)) for index in chunk}
    l3s: dict[tuple[int, int], CPUSet] = {}
    for core in layout:
        key = (core.numa, l3_of_index.get(core.index, 0))
        l3s[key] = l3s.get(key, CPUSet()) | (CPUSet.of(core.cpus) & online)
    threads: dict[int, ThreadFacts] = {}
    for core in layout:
        siblings = CPUSet.of(core.cpus) & online
        capacity, max_khz = core_speed(spec, core)
        for cpu in siblings:
            threads[cpu] = ThreadFacts(
                cpu=cpu,
                socket=core.socket,
                die=core.die if spec.write_die_id else 0,
                core_id=core.index,
                siblings=siblings,
                siblings_file=_FROM_SPEC,
                l3=l3s[core.numa, l3_of_index.get(core.index, 0)] if spec.l3_per_numa else None,
                capacity=capacity,
                max_khz=max_khz,
            )
    return threads


def _nodes(spec: MachineSpec, online: CPUSet) -> list[NodeFacts]:
    if not spec.write_node_dir:
        # A kernel without NUMA: one node; its memory would come from /proc/meminfo,
        # which a description does not have (nor does a fake tree beside it).
        return [NodeFacts(id=0, cpus=online, memory_bytes=0, distances={0: 10})]
    matrix = distance_matrix(spec)
    cpus_of: dict[int, CPUSet] = {}
    for core in cpu_layout(spec):
        cpus_of[core.numa] = cpus_of.get(core.numa, CPUSet()) | (CPUSet.of(core.cpus) & online)
    ids = range(spec.node_count)
    return [
        NodeFacts(
            id=node,
            cpus=cpus_of.get(node, CPUSet()),
            memory_bytes=(
                spec.memory_per_numa
                if node < spec.cpu_node_count
                else spec.memory_per_memory_only_node
            ),
            distances=dict(zip(ids, matrix[node], strict=True)),
        )
        for node in ids
    ]


def machine_facts(spec: MachineSpec) -> MachineFacts:
    """The facts a machine of this description's sysfs would give the reader."""
    everything = CPUSet.range(0, spec.cpu_count - 1)
    online = everything - spec.offline
    pmu = pmu_cpus(spec)
    return MachineFacts(
        online=online,
        offline=spec.offline,
        isolated=spec.isolated,
        present=everything,
        threads=_threads(spec, online),
        nodes=_nodes(spec, online),
        nics=tuple(
            NetworkInterface(name=name, numa_node=node)
            for name, node in sorted(spec.nics)
            if node >= 0
        ),
        node_dir=_FROM_SPEC,
        pmu_performance=pmu[0] if pmu else None,
        pmu_efficiency=pmu[1] if pmu else None,
        memory_tiers=memory_tiers(spec),
    )


def build_machine(spec: MachineSpec) -> Machine:
    """The Machine of a description: what reading its sysfs tree would give."""
    return assemble(machine_facts(spec))


def shape_machine(name: str) -> Machine:
    """The named shape's Machine; KeyError names the known shapes."""
    return build_machine(shape_spec(name))


def shape_spec(name: str) -> MachineSpec:
    """The named shape's description; KeyError names the known shapes."""
    try:
        return SHAPES[name]
    except KeyError:
        raise KeyError(f"unknown machine shape {name!r} (known: {', '.join(SHAPES)})") from None
