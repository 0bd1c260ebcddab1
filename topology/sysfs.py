"""Read the machine's topology from a sysfs root into the immutable `Machine` tree.

Reading is two steps: `read_facts` gathers what the files say (the only I/O),
`assemble` shapes those facts into the tree (pure). `topology.shapes` builds
the same facts from a compact description, so a simulated machine and a real
one go through the same assembly. The root is a parameter (default /sys) so
tests read fake trees (written by `devtools.fakesysfs`) and captured ones.
Every inconsistency is a `SysfsError` naming the file and what was wrong with
it. Network interfaces' NUMA locality is read here too, once, so nothing above
the reader touches sysfs at placement time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from topology.cpuset import CPUSet, CPUSetError
from topology.reads import note
from topology.tree import (
    EFFICIENCY,
    PERFORMANCE,
    Core,
    Die,
    L3Group,
    Machine,
    MemoryOnlyNode,
    MemoryTier,
    NetworkInterface,
    NumaNode,
    Socket,
)

REAL_SYSFS = Path("/sys")

_NODE_DIR = re.compile(r"^node(\d+)$")
_TIER_DIR = re.compile(r"^memory_tier(\d+)$")
MEMORY_TIERING = Path("devices") / "virtual" / "memory_tiering"
_CACHE_DIR = re.compile(r"^index(\d+)$")
_MEMTOTAL = re.compile(r"MemTotal:\s+(\d+)\s*kB", re.IGNORECASE)
# The kernel's scale for cpu_capacity: the biggest core of the machine is 1024.
CAPACITY_SCALE = 1024
# A core below this share of the biggest capacity is an efficiency core. Big and LITTLE
# differ by 2x or more; a phone's mid cores (A715: 84%) are big ones, GB10's A725 (71%) are not;
# a few percent is a faster part of one design (a favoured core), never a class.
EFFICIENCY_BELOW = 0.8
# Intel hybrid parts: the kernel's PMU devices list the CPUs of each kind of core.
PMU_PERFORMANCE = Path("devices") / "cpu_core" / "cpus"
PMU_EFFICIENCY = Path("devices") / "cpu_atom" / "cpus"


class SysfsError(ValueError):
    """sysfs is unreadable or inconsistent; the message names the file."""


# -- small file readers ------------------------------------------------------------


def _read(path: Path) -> str:
    note(path)
    try:
        return path.read_text()
    except OSError as exc:
        raise SysfsError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _read_optional(path: Path) -> str | None:
    return _read(path) if path.exists() else None


def _cpus(path: Path, text: str | None = None) -> CPUSet:
    raw = _read(path) if text is None else text
    try:
        return CPUSet.parse(raw)
    except CPUSetError as exc:
        raise SysfsError(f"{path}: not a CPU list: {exc}") from exc


def _optional_cpus(path: Path) -> CPUSet | None:
    text = _read_optional(path)
    return None if text is None else _cpus(path, text)


def _int(path: Path) -> int:
    raw = _read(path).strip()
    try:
        return int(raw)
    except ValueError:
        raise SysfsError(f"{path}: expected an integer, found {raw!r}") from None


def _optional_int(path: Path) -> int | None:
    return _int(path) if path.exists() else None


def _memtotal(path: Path) -> int:
    """MemTotal in bytes from a node meminfo or /proc/meminfo ("kB" there means KiB)."""
    match = _MEMTOTAL.search(_read(path))
    if match is None:
        raise SysfsError(f"{path}: no 'MemTotal: <n> kB' line")
    return int(match.group(1)) * 1024


# -- per-CPU facts -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadFacts:
    """What sysfs says about one online CPU."""

    cpu: int
    socket: int
    die: int
    core_id: int
    siblings: CPUSet
    siblings_file: Path
    l3: CPUSet | None  # None: no level-3 cache described
    capacity: int | None
    max_khz: int | None


def _read_thread(cpu_dir: Path, cpu: int, online: CPUSet) -> ThreadFacts:
    base = cpu_dir / f"cpu{cpu}"
    topo = base / "topology"
    if not topo.is_dir():
        raise SysfsError(f"{topo}: missing, but CPU {cpu} is online ({cpu_dir / 'online'})")
    # Some platforms report -1 for "unknown package/die": treat it as the only one.
    socket = max(_int(topo / "physical_package_id"), 0)
    die = max(_optional_int(topo / "die_id") or 0, 0)
    siblings_file = topo / "core_cpus_list"
    if not siblings_file.exists():
        siblings_file = topo / "thread_siblings_list"  # kernels before 5.6
    siblings = _cpus(siblings_file) & online
    if cpu not in siblings:
        raise SysfsError(f"{siblings_file}: does not contain CPU {cpu} itself ({siblings})")
    return ThreadFacts(
        cpu=cpu,
        socket=socket,
        die=die,
        core_id=_optional_int(topo / "core_id") or 0,
        siblings=siblings,
        siblings_file=siblings_file,
        l3=_read_l3(base / "cache", online),
        capacity=_optional_int(base / "cpu_capacity"),
        max_khz=_optional_int(base / "cpufreq" / "cpuinfo_max_freq"),
    )


def _read_l3(cache_dir: Path, online: CPUSet) -> CPUSet | None:
    if not cache_dir.is_dir():
        return None
    for index in sorted(cache_dir.iterdir()):
        if _CACHE_DIR.match(index.name) and _optional_int(index / "level") == 3:
            return _cpus(index / "shared_cpu_list") & online
    return None


# -- NUMA nodes ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What sysfs says about one online NUMA node."""

    id: int
    cpus: CPUSet
    memory_bytes: int
    distances: dict[int, int]


def _read_nodes(root: Path, node_dir: Path, online: CPUSet) -> list[NodeFacts]:
    if not node_dir.is_dir():
        # CONFIG_NUMA=n: one node holding everything; memory from the matching procfs.
        meminfo = root.parent / "proc" / "meminfo"
        memory = _memtotal(meminfo) if meminfo.exists() else 0
        return [NodeFacts(id=0, cpus=online, memory_bytes=memory, distances={0: 10})]
    dirs = sorted(
        int(m.group(1)) for p in node_dir.iterdir() if (m := _NODE_DIR.match(p.name)) is not None
    )
    if not dirs:
        raise SysfsError(f"{node_dir}: no node<N> directories")
    # Distance rows list the online nodes in id order; node/online says which they are.
    online_file = node_dir / "online"
    ids = list(_cpus(online_file)) if online_file.exists() else dirs
    missing = sorted(set(ids) - set(dirs))
    if missing:
        raise SysfsError(f"{online_file}: nodes {missing} are online but have no directory")
    nodes: list[NodeFacts] = []
    owner: dict[int, int] = {}
    for node_id in ids:
        base = node_dir / f"node{node_id}"
        cpulist = base / "cpulist"
        cpus = _cpus(cpulist) & online
        for cpu in cpus:
            if cpu in owner:
                raise SysfsError(
                    f"{cpulist}: CPU {cpu} is also in node{owner[cpu]} "
                    f"({node_dir / f'node{owner[cpu]}' / 'cpulist'})"
                )
            owner[cpu] = node_id
        distance_file = base / "distance"
        raw = _read(distance_file).split()
        try:
            row = [int(d) for d in raw]
        except ValueError:
            raise SysfsError(
                f"{distance_file}: expected integers, found {' '.join(raw)!r}"
            ) from None
        # The row has one entry per online node, in node id order.
        if len(row) != len(ids):
            raise SysfsError(
                f"{distance_file}: {len(row)} distances for {len(ids)} nodes "
                f"({', '.join(map(str, ids))})"
            )
        nodes.append(
            NodeFacts(
                id=node_id,
                cpus=cpus,
                memory_bytes=_memtotal(base / "meminfo"),
                distances=dict(zip(ids, row, strict=True)),
            )
        )
    orphans = online - CPUSet.of(owner)
    if orphans:
        raise SysfsError(
            f"{node_dir}: online CPUs {orphans} are in no node<N>/cpulist "
            f"(online CPUs from {root / 'devices/system/cpu/online'})"
        )
    return nodes


# -- network interfaces ---------------------------------------------------------------


def _read_nics(root: Path) -> tuple[NetworkInterface, ...]:
    """Interfaces under class/net whose device reports a NUMA node, sorted by name.

    Virtual interfaces (lo, bridges, veth, bonds) have no `device`; a virtio NIC's
    device has no numa_node file; -1 means the firmware did not say. None of
    them is local to any node, so they are left out.
    """
    net_dir = root / "class" / "net"
    if not net_dir.is_dir():
        return ()
    nics: list[NetworkInterface] = []
    for entry in sorted(net_dir.iterdir(), key=lambda p: p.name):
        numa_file = entry / "device" / "numa_node"
        try:
            raw = numa_file.read_text().strip()
            note(numa_file)
        except (FileNotFoundError, NotADirectoryError):
            continue  # no device (virtual), or the interface went away while listed
        except OSError as exc:
            raise SysfsError(f"{numa_file}: cannot read: {exc.strerror or exc}") from exc
        try:
            node = int(raw)
        except ValueError:
            raise SysfsError(f"{numa_file}: expected an integer, found {raw!r}") from None
        if node >= 0:
            nics.append(NetworkInterface(name=entry.name, numa_node=node))
    return tuple(nics)


# -- assembling the tree ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    cpu_class: str | None
    capacity: int | None
    favoured: bool


def _classes(facts: MachineFacts, cores: list[list[ThreadFacts]]) -> list[str | None]:
    """Each core's class, from what the kernel says a core is; all None when not hybrid.

    Intel hybrid parts list their kinds of core under devices/cpu_core and
    devices/cpu_atom; elsewhere (Arm, RISC-V) cpu_capacity tells a small core
    from a big one. Maximum frequency is never a class: a 10-core desktop whose
    two best cores turbo 200 MHz higher has ten cores of one kind.
    """
    core_pmu, atom_pmu = facts.pmu_performance, facts.pmu_efficiency
    if core_pmu is not None and atom_pmu is not None and core_pmu and atom_pmu:
        out: list[str | None] = []
        for core in cores:
            first = core[0]
            if first.cpu in atom_pmu and first.cpu not in core_pmu:
                out.append(EFFICIENCY)
            elif first.cpu in core_pmu and first.cpu not in atom_pmu:
                out.append(PERFORMANCE)
            else:
                raise SysfsError(
                    f"{facts.node_dir.parents[2] / PMU_PERFORMANCE}: CPU {first.cpu} is in "
                    f"{'both' if first.cpu in core_pmu else 'neither'} of cpu_core "
                    f"({core_pmu}) and cpu_atom ({atom_pmu})"
                )
        return out if len(set(out)) > 1 else [None] * len(cores)
    capacities = [max((t.capacity or 0) for t in core) for core in cores]
    if not capacities or not all(c > 0 for c in capacities):
        return [None] * len(cores)
    top = max(capacities)
    kinds: list[str | None] = [
        PERFORMANCE if c >= EFFICIENCY_BELOW * top else EFFICIENCY for c in capacities
    ]
    return kinds if EFFICIENCY in kinds else [None] * len(cores)


def _favoured(cores: list[list[ThreadFacts]], classes: list[str | None]) -> list[bool]:
    """Cores that reach a higher maximum frequency than others of their class.

    Read from cpufreq's cpuinfo_max_freq (capacity where no core has one). A class
    whose cores all reach the same speed has no favoured core.
    """
    speeds = [max((t.max_khz or 0) for t in core) for core in cores]
    if not all(s > 0 for s in speeds):
        speeds = [max((t.capacity or 0) for t in core) for core in cores]
        if not all(s > 0 for s in speeds):
            return [False] * len(cores)
    top: dict[str | None, int] = {}
    low: dict[str | None, int] = {}
    for cls, speed in zip(classes, speeds, strict=True):
        top[cls] = max(top.get(cls, 0), speed)
        low[cls] = min(low.get(cls, speed), speed)
    return [
        speed == top[cls] and low[cls] < top[cls]
        for cls, speed in zip(classes, speeds, strict=True)
    ]


def _classify(facts: MachineFacts, cores: list[list[ThreadFacts]]) -> dict[int, _Kind]:
    """Per core (by lowest CPU): its class, kernel capacity and whether it is favoured."""
    classes = _classes(facts, cores)
    favoured = _favoured(cores, classes)
    return {
        core[0].cpu: _Kind(
            cpu_class=cls,
            capacity=max((t.capacity for t in core if t.capacity is not None), default=None),
            favoured=fav,
        )
        for core, cls, fav in zip(cores, classes, favoured, strict=True)
    }


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, item: object) -> object:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            item = self.parent[item]
        return item

    def join(self, items: Iterable[object]) -> None:
        items = list(items)
        for other in items[1:]:
            self.parent[self.find(other)] = self.find(items[0])


def _build_cores(threads: dict[int, ThreadFacts]) -> list[list[ThreadFacts]]:
    cores: dict[CPUSet, list[ThreadFacts]] = {}
    for thread in threads.values():
        for sibling in thread.siblings:
            other = threads[sibling]
            if other.siblings != thread.siblings:
                raise SysfsError(
                    f"{other.siblings_file}: lists {other.siblings}, but "
                    f"{thread.siblings_file} says CPU {sibling}'s core is {thread.siblings}"
                )
        cores.setdefault(thread.siblings, []).append(thread)
    return sorted(cores.values(), key=lambda core: core[0].cpu)


def _build_node(
    node: NodeFacts,
    cores: list[list[ThreadFacts]],
    classes: dict[int, _Kind],
) -> NumaNode:
    groups: dict[CPUSet | None, list[Core]] = defaultdict(list)
    for threads in cores:
        first = threads[0]
        kind = classes[first.cpu]
        core = Core(
            id=first.cpu,
            cpus=first.siblings,
            core_id=first.core_id,
            cpu_class=kind.cpu_class,
            capacity=kind.capacity,
            favoured=kind.favoured,
        )
        # A core's L3 group is its cache's sharers within this node; no L3 file
        # means "the whole node shares whatever there is".
        key = first.l3 & node.cpus if first.l3 is not None else None
        groups[key].append(core)
    l3_groups = sorted(
        (
            L3Group(
                id=members[0].id,
                cpus=CPUSet().union(*(c.cpus for c in members)),
                cores=tuple(members),
            )
            for members in groups.values()
        ),
        key=lambda g: g.id,
    )
    return NumaNode(
        id=node.id,
        cpus=node.cpus,
        memory_bytes=node.memory_bytes,
        l3_groups=tuple(l3_groups),
        distances=dict(node.distances),
    )


def _renumber(ids: list[int]) -> list[int]:
    """Keep ids when they are distinct; otherwise number 0..n-1 in order."""
    return ids if len(set(ids)) == len(ids) else list(range(len(ids)))


def _machine_cpus(cpu_dir: Path) -> tuple[CPUSet, CPUSet, CPUSet, CPUSet]:
    """online, offline, isolated, present; only `online` must exist."""
    online = _cpus(cpu_dir / "online")
    if not online:
        raise SysfsError(f"{cpu_dir / 'online'}: no online CPUs")
    optional: list[CPUSet | None] = []
    for name in ("offline", "isolated", "present"):
        text = _read_optional(cpu_dir / name)
        optional.append(_cpus(cpu_dir / name, text) if text is not None else None)
    offline, isolated, present = optional
    offline = offline or CPUSet()
    if not online.isdisjoint(offline):
        raise SysfsError(
            f"{cpu_dir / 'offline'}: CPUs {online & offline} are also in {cpu_dir / 'online'}"
        )
    return online, offline, isolated or CPUSet(), present or online | offline


def _nest(
    cpu_nodes: list[NodeFacts], threads: dict[int, ThreadFacts], built: dict[int, NumaNode]
) -> tuple[Socket, ...]:
    """Sockets -> dies -> the built NUMA nodes, sorted by id.

    A NUMA node spanning sockets (common in VMs) or dies makes those one socket
    / die here, since the tree nests nodes inside dies inside sockets.
    """
    sockets_uf, dies_uf = _UnionFind(), _UnionFind()
    for node in cpu_nodes:
        sockets_uf.join(threads[c].socket for c in node.cpus)
        dies_uf.join((threads[c].socket, threads[c].die) for c in node.cpus)
    grouped: dict[object, dict[object, list[NumaNode]]] = defaultdict(lambda: defaultdict(list))
    for node in cpu_nodes:
        first = threads[node.cpus.first()]
        socket_key = sockets_uf.find(first.socket)
        die_key = dies_uf.find((first.socket, first.die))
        grouped[socket_key][die_key].append(built[node.id])

    def first_cpu(item: Socket | Die | NumaNode) -> int:
        return item.cpus.first()

    sockets: list[Socket] = []
    for die_map in grouped.values():
        members = sorted(
            (sorted(ns, key=lambda n: n.id) for ns in die_map.values()),
            key=lambda ns: first_cpu(ns[0]),
        )
        die_ids = _renumber([threads[first_cpu(ns[0])].die for ns in members])
        dies = tuple(
            Die(id=die_id, cpus=CPUSet().union(*(n.cpus for n in ns)), numa_nodes=tuple(ns))
            for die_id, ns in zip(die_ids, members, strict=True)
        )
        sockets.append(
            Socket(
                id=threads[first_cpu(dies[0])].socket,
                cpus=CPUSet().union(*(d.cpus for d in dies)),
                dies=dies,
            )
        )
    sockets.sort(key=first_cpu)
    socket_ids = _renumber([s.id for s in sockets])
    renamed = (
        Socket(id=i, cpus=s.cpus, dies=s.dies) for i, s in zip(socket_ids, sockets, strict=True)
    )
    return tuple(sorted(renamed, key=lambda s: s.id))


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """Everything the tree is built from, as the files said it (or as a description says).

    `node_dir` only names the place in error messages.
    """

    online: CPUSet
    offline: CPUSet
    isolated: CPUSet
    present: CPUSet
    threads: dict[int, ThreadFacts]
    nodes: list[NodeFacts]
    nics: tuple[NetworkInterface, ...]
    node_dir: Path
    # Intel hybrid: cpu_core / cpu_atom's CPU lists (None: the kernel has no such device).
    pmu_performance: CPUSet | None = None
    pmu_efficiency: CPUSet | None = None
    memory_tiers: tuple[MemoryTier, ...] = ()


def read_facts(root: str | Path = REAL_SYSFS) -> MachineFacts:
    """Read `<root>/devices/system/{cpu,node}` and `<root>/class/net`: all the I/O."""
    root = Path(root)
    cpu_dir = root / "devices" / "system" / "cpu"
    node_dir = root / "devices" / "system" / "node"
    if not cpu_dir.is_dir():
        raise SysfsError(f"{cpu_dir}: missing (is {root} a sysfs root?)")
    online, offline, isolated, present = _machine_cpus(cpu_dir)
    return MachineFacts(
        online=online,
        offline=offline,
        isolated=isolated,
        present=present,
        threads={cpu: _read_thread(cpu_dir, cpu, online) for cpu in online},
        nodes=_read_nodes(root, node_dir, online),
        nics=_read_nics(root),
        node_dir=node_dir,
        pmu_performance=_optional_cpus(root / PMU_PERFORMANCE),
        pmu_efficiency=_optional_cpus(root / PMU_EFFICIENCY),
        memory_tiers=_read_memory_tiers(root / MEMORY_TIERING),
    )


def _read_memory_tiers(tiering: Path) -> tuple[MemoryTier, ...]:
    """memory_tier<N>/nodelist, by tier id (Linux 6.1+; none before, or without NUMA)."""
    if not tiering.is_dir():
        return ()
    tiers = []
    for entry in tiering.iterdir():
        match = _TIER_DIR.match(entry.name)
        if match is not None:
            nodes = _cpus(entry / "nodelist")  # a node list has the CPU list's format
            tiers.append(MemoryTier(id=int(match.group(1)), nodes=tuple(nodes)))
    return tuple(sorted(tiers, key=lambda t: t.id))


def assemble(facts: MachineFacts, cpu_model: str = "", cpu_flags: tuple[str, ...] = ()) -> Machine:
    """The Machine tree from its facts; a SysfsError when the facts disagree."""
    threads, nodes, node_dir = facts.threads, facts.nodes, facts.node_dir
    cores = _build_cores(threads)
    classes = _classify(facts, cores)

    node_of = {cpu: node.id for node in nodes for cpu in node.cpus}
    cores_of_node: dict[int, list[list[ThreadFacts]]] = defaultdict(list)
    for threads_of_core in cores:
        homes = {node_of[t.cpu] for t in threads_of_core}
        if len(homes) > 1:
            first = threads_of_core[0]
            raise SysfsError(
                f"{first.siblings_file}: core {first.siblings} spans NUMA nodes "
                f"{sorted(homes)} ({node_dir}/node*/cpulist)"
            )
        cores_of_node[homes.pop()].append(threads_of_core)

    cpu_nodes = [n for n in nodes if n.cpus]
    built = {n.id: _build_node(n, cores_of_node[n.id], classes) for n in cpu_nodes}
    memory_only = tuple(
        _attach(node, cpu_nodes, node_dir) for node in nodes if not node.cpus and node.memory_bytes
    )
    return Machine(
        sockets=_nest(cpu_nodes, threads, built),
        online=facts.online,
        offline=facts.offline,
        isolated=facts.isolated,
        present=facts.present,
        memory_only_nodes=memory_only,
        distances={n.id: dict(n.distances) for n in nodes},
        cpu_model=cpu_model,
        cpu_flags=cpu_flags,
        nics=facts.nics,
        memory_tiers=facts.memory_tiers,
    )


def read_machine(root: str | Path = REAL_SYSFS, *, cpu_info: bool | None = None) -> Machine:
    """Read `<root>/devices/system/{cpu,node}` (and `<root>/class/net`) into a Machine.

    `cpu_info` fills cpu_model/cpu_flags through py-cpuinfo (about a second);
    by default only when reading the real /sys, never for fake roots.
    """
    facts = read_facts(root)
    if cpu_info is None:
        cpu_info = Path(root) == REAL_SYSFS
    model, flags = _cpu_info() if cpu_info else ("", ())
    return assemble(facts, model, flags)


def _attach(node: NodeFacts, cpu_nodes: list[NodeFacts], node_dir: Path) -> MemoryOnlyNode:
    """A CPU-less node, attached to the CPU node it is closest to (lowest id on a tie)."""
    if not cpu_nodes:
        raise SysfsError(f"{node_dir}: no node has CPUs")
    closest = min(cpu_nodes, key=lambda c: (node.distances[c.id], c.id))
    return MemoryOnlyNode(
        id=node.id,
        memory_bytes=node.memory_bytes,
        closest_cpu_node=closest.id,
        distances=dict(node.distances),
    )


def _cpu_info() -> tuple[str, tuple[str, ...]]:
    import cpuinfo  # slow (spawns a helper): imported only when the real machine is read

    info = cpuinfo.get_cpu_info()
    model = str(info.get("brand_raw", ""))
    flags = tuple(sorted(str(f) for f in info.get("flags", [])))
    return model, flags
