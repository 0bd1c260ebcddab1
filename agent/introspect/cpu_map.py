"""The status document read once into what the machine map draws: the machine's boxes
(sockets > dies > NUMA nodes > L3 groups > cores > CPUs), what each CPU is used for and
by whom, and which containers each box lists.

Parse, don't validate: the JSON dict becomes typed values here, with one error naming
what is missing; the HTML renderer reads only these values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent.policy.parts import part_name
from agent.rules import Level
from topology.cpuset import CPUSet, CPUSetError

RESERVED_POOL = "reserved"


class MapError(ValueError):
    """The document cannot be drawn; the message says what it lacks."""


class CpuUse(StrEnum):
    """What a CPU is for, one per CPU. An isolated CPU an exclusive container holds is
    EXCLUSIVE: who runs there matters more than how the kernel treats it."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"
    RESERVED = "reserved"
    ISOLATED = "isolated"
    OFFLINE = "offline"


@dataclass(frozen=True, slots=True)
class Container:
    namespace: str
    pod: str
    name: str
    container_id: str
    cpus: str  # cpuset_cpus as the agent wants it ("" = not pinned)
    mems: str
    exclusive: bool
    pool: str
    score: float

    @property
    def who(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.name}"

    @property
    def short_id(self) -> str:
        return self.container_id[:12]


@dataclass(frozen=True, slots=True)
class Cpu:
    id: int
    use: CpuUse
    owner: Container | None  # the exclusive container, if any
    runs: int  # containers whose cpuset holds this CPU
    isolated: bool


@dataclass(frozen=True, slots=True)
class Core:
    id: int
    cpus: tuple[Cpu, ...]
    cpu_class: str | None
    favoured: bool = False  # turbos higher than its class (older agents: absent)


@dataclass(frozen=True, slots=True)
class Pool:
    """A pool of the policy as a box lists it: capacity, and its shared containers."""

    name: str
    cpus: str
    exclusive_used: int
    exclusive_free: int
    isolated_free: int
    shared_cpus: int
    shared_milli_used: int
    shared_milli_free: int
    memory_bytes: int
    memory_used_bytes: int
    shared: tuple[Container, ...]


@dataclass(frozen=True, slots=True)
class L3Group:
    id: int
    cpus: str
    cores: tuple[Core, ...]
    pool: Pool | None  # None when the level folded into its parent's pool


@dataclass(frozen=True, slots=True)
class NumaNode:
    id: int
    cpus: str
    memory_bytes: int
    l3_groups: tuple[L3Group, ...]
    pool: Pool | None


@dataclass(frozen=True, slots=True)
class Die:
    id: int
    cpus: str
    numa_nodes: tuple[NumaNode, ...]
    pool: Pool | None


@dataclass(frozen=True, slots=True)
class MemoryNode:
    """A NUMA node with memory and no CPUs (CXL, PMEM, HBM)."""

    id: int
    memory_bytes: int
    closest_cpu_node: int
    distance: int


@dataclass(frozen=True, slots=True)
class Socket:
    id: int
    cpus: str
    dies: tuple[Die, ...]
    pool: Pool | None
    memory_nodes: tuple[MemoryNode, ...]  # drawn beside the socket they are closest to


@dataclass(frozen=True, slots=True)
class MachineMap:
    agent: Mapping[str, Any] | None  # the document's `agent` part (absent in simulate)
    cpus: str
    numa_node_count: int
    reserved_cpus: str
    isolated_cpus: str
    sockets: tuple[Socket, ...]
    offline: tuple[Cpu, ...]
    machine_pool: Pool | None  # the root pool: shared containers of the whole machine
    reserved: tuple[Container, ...]
    elsewhere: tuple[tuple[str, tuple[Container, ...]], ...]  # unknown pools, or boxless
    containers: tuple[Container, ...]

    @property
    def exclusive_containers(self) -> int:
        return sum(1 for c in self.containers if c.exclusive)

    @property
    def uses(self) -> Mapping[CpuUse, int]:
        """How many CPUs of each use (every use, 0 when none)."""
        counts = Counter(cpu.use for core in self.cores() for cpu in core.cpus)
        counts[CpuUse.OFFLINE] = len(self.offline)
        return {use: counts[use] for use in CpuUse}

    def cores(self) -> Iterator[Core]:
        for socket in self.sockets:
            for die in socket.dies:
                for node in die.numa_nodes:
                    for group in node.l3_groups:
                        yield from group.cores


def _parse(text: str, what: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        raise MapError(f"status document: {what}: {err}") from err


def _container(raw: Mapping[str, Any], pool: str) -> Container:
    return Container(
        namespace=str(raw["namespace"]),
        pod=str(raw["pod"]),
        name=str(raw["name"]),
        container_id=str(raw["container_id"]),
        cpus=str(raw["cpuset_cpus"]),
        mems=str(raw["cpuset_mems"]),
        exclusive=bool(raw["exclusive"]),
        pool=str(raw.get("pool", pool)),
        score=float(raw.get("score", 0.0)),
    )


def _pool(raw: Mapping[str, Any], containers: Sequence[Container]) -> Pool:
    return Pool(
        name=str(raw["name"]),
        cpus=str(raw["cpus"]),
        exclusive_used=len(_parse(raw["exclusive_cpus"], f"pool {raw['name']}")),
        exclusive_free=int(raw["exclusive_free"]),
        isolated_free=int(raw["isolated_free"]),
        shared_cpus=len(_parse(raw["shared_cpus"], f"pool {raw['name']}")),
        shared_milli_used=int(raw["shared_milli_used"]),
        shared_milli_free=int(raw["shared_milli_free"]),
        memory_bytes=int(raw["memory_bytes"]),
        memory_used_bytes=int(raw["memory_used_bytes"]),
        shared=tuple(c for c in containers if not c.exclusive),
    )


class _Books:
    """Per-CPU facts from the whole document, looked up while the boxes are built."""

    def __init__(self, doc: Mapping[str, Any], containers: Sequence[Container]) -> None:
        machine = doc["machine"]
        self.reserved = _parse(machine["reserved_cpus"], "machine.reserved_cpus")
        self.isolated = _parse(machine["isolated_cpus"], "machine.isolated_cpus")
        self.owner: dict[int, Container] = {}
        self.runs: Counter[int] = Counter()
        # Shared containers of a pool have one cpuset: expand each distinct one once.
        cpusets = Counter(c.cpus for c in containers if c.cpus)
        for text, count in cpusets.items():
            for cpu in _parse(text, f"cpuset {text!r}"):
                self.runs[cpu] += count
        for c in containers:
            if c.exclusive and c.cpus:
                for cpu in _parse(c.cpus, f"container {c.who}"):
                    self.owner[cpu] = c

    def cpu(self, cpu: int) -> Cpu:
        owner = self.owner.get(cpu)
        isolated = cpu in self.isolated
        if owner is not None:
            use = CpuUse.EXCLUSIVE
        elif cpu in self.reserved:
            use = CpuUse.RESERVED
        elif isolated:
            use = CpuUse.ISOLATED
        else:
            use = CpuUse.SHARED
        return Cpu(cpu, use, owner, self.runs[cpu], isolated)


def build_map(doc: Mapping[str, Any]) -> MachineMap:
    """MapError when the document lacks what the map needs (an agent older than the
    client has no `machine.layout`) or is malformed."""
    if "layout" not in doc.get("machine", {}):
        raise MapError(
            "the status document has no machine layout (machine.layout): the agent is older "
            "than this numa-agent; restart it with the installed version to get the map"
        )
    try:
        return _build(doc)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, MapError):
            raise
        raise MapError(f"malformed status document: {type(err).__name__}: {err}") from err


def _build(doc: Mapping[str, Any]) -> MachineMap:
    machine = doc["machine"]
    by_pool: dict[str, list[Container]] = {}
    for raw_pool in doc["pools"]:
        name = raw_pool["name"]
        by_pool[name] = [_container(c, name) for c in raw_pool["containers"]]
    reserved = tuple(_container(c, RESERVED_POOL) for c in doc["reserved"]["containers"])
    unknown = {
        name: tuple(_container(c, name) for c in raw)
        for name, raw in doc.get("unknown_pools", {}).items()
    }
    containers = [
        *(c for cs in by_pool.values() for c in cs),
        *reserved,
        *(c for cs in unknown.values() for c in cs),
    ]
    books = _Books(doc, containers)
    pools = {p["name"]: _pool(p, by_pool[p["name"]]) for p in doc["pools"]}
    drawn: set[str] = set()

    def pool(name: str) -> Pool | None:
        found = pools.get(name)
        if found is not None:
            drawn.add(name)
        return found

    memory_nodes = [
        MemoryNode(
            int(m["id"]), int(m["memory_bytes"]), int(m["closest_cpu_node"]), int(m["distance"])
        )
        for m in machine["memory_only_nodes"]
    ]
    sockets = []
    for raw_socket in machine["layout"]:
        sid = int(raw_socket["id"])
        dies = []
        for raw_die in raw_socket["dies"]:
            nodes = []
            for raw_node in raw_die["numa_nodes"]:
                nid = int(raw_node["id"])
                groups = tuple(
                    L3Group(
                        int(g["id"]),
                        str(g["cpus"]),
                        tuple(
                            Core(
                                int(core["id"]),
                                tuple(
                                    books.cpu(cpu)
                                    for cpu in _parse(core["cpus"], f"core {core['id']}")
                                ),
                                core.get("cpu_class"),
                                core.get("favoured") is True,
                            )
                            for core in g["cores"]
                        ),
                        pool(part_name(Level.L3, int(g["id"]), nid)),
                    )
                    for g in raw_node["l3_groups"]
                )
                nodes.append(
                    NumaNode(
                        nid,
                        str(raw_node["cpus"]),
                        int(raw_node["memory_bytes"]),
                        groups,
                        pool(part_name(Level.NUMA, nid)),
                    )
                )
            dies.append(
                Die(
                    int(raw_die["id"]),
                    str(raw_die["cpus"]),
                    tuple(nodes),
                    pool(part_name(Level.DIE, int(raw_die["id"]), sid)),
                )
            )
        node_ids = {n.id for d in dies for n in d.numa_nodes}
        sockets.append(
            Socket(
                sid,
                str(raw_socket["cpus"]),
                tuple(dies),
                pool(part_name(Level.SOCKET, sid)),
                tuple(m for m in memory_nodes if m.closest_cpu_node in node_ids),
            )
        )
    machine_pool = pool(doc["pools"][0]["name"]) if doc["pools"] else None
    # A pool no box stands for (never expected: the pool tree is built from the same
    # machine) is still listed, so no container goes missing from the map.
    elsewhere = [(name, tuple(p.shared)) for name, p in pools.items() if name not in drawn]
    elsewhere.extend(unknown.items())
    offline = tuple(
        Cpu(cpu, CpuUse.OFFLINE, None, 0, False)
        for cpu in _parse(machine.get("offline_cpus", ""), "machine.offline_cpus")
    )
    return MachineMap(
        agent=doc.get("agent"),
        cpus=str(machine["cpus"]),
        numa_node_count=int(machine["numa_nodes"]),
        reserved_cpus=str(machine["reserved_cpus"]),
        isolated_cpus=str(machine["isolated_cpus"]),
        sockets=tuple(sockets),
        offline=offline,
        machine_pool=machine_pool,
        reserved=reserved,
        elsewhere=tuple((name, cs) for name, cs in elsewhere if cs),
        containers=tuple(containers),
    )
