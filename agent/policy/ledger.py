"""The ledger: the one record of every placed container, and the indexes derived from it.

Like kubelet's CPU manager state, the records are the account of who runs where
(`PlacementRecord`, keyed by container); everything else here is an index kept
beside them for speed: the exclusive CPUs taken, the reserved containers, each
pool's shared members, its pod and namespace counters and its shared and memory
accounting, and the pods' occupancy for the pod rules. `install` and `remove`
change records and indexes together; `check_invariants` rebuilds every index from
the records and compares. The ledger chooses nothing (see chooser.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.policy.accounting import PoolState, pool_states
from agent.policy.classes import DRAM, CpuClasses
from agent.policy.config import PolicyConfig
from agent.policy.domains import Topology, topology
from agent.policy.errors import PlacementError
from agent.policy.occupancy import Occupancy
from agent.policy.pools import Pool, PoolTree
from agent.policy.record import PlacementRecord
from agent.policy.request import ContainerRequest, CpuKind, Need
from topology.cpuset import CPUSet
from topology.tree import Machine


@dataclass(frozen=True, slots=True)
class CpusetUpdate:
    key: str
    cpus: CPUSet
    mems: CPUSet


@dataclass(frozen=True, slots=True)
class PoolCapacity:
    """What a pool holds and what it has left, as `numa-agent status` and metrics show it."""

    pool: str
    cpus: CPUSet  # every online CPU of the pool
    exclusive: CPUSet  # CPUs held by exclusive containers
    exclusive_free: int  # CPUs an exclusive container could still take (isolated ones aside)
    isolated_free: int  # free kernel-isolated CPUs (for containers that prefer them)
    shared: CPUSet  # the CPUs shared containers placed here run on
    shared_milli_used: int  # requests of shared containers in the pool and below it
    shared_milli_free: int  # the most one more shared container could request here
    memory_bytes: int
    memory_used_bytes: int


def new_record(
    request: ContainerRequest,
    need: Need,
    pool: Pool | None,
    exclusive: int,
    score: float,
    explanation: str,
) -> PlacementRecord:
    """A record not yet installed; its cpusets are filled in by `Ledger.install`."""
    return PlacementRecord(
        request, need, pool, CPUSet(exclusive), CPUSet(), CPUSet(), score, explanation
    )


class Ledger:
    def __init__(self, machine: Machine, config: PolicyConfig, tree: PoolTree) -> None:
        self.machine = machine
        self.config = config
        self.tree = tree
        self.pools = tree.pools
        self.online = machine.cpus.mask
        self.reserved = config.reserved_cpus.mask
        self.isolated = machine.isolated.mask & self.online
        self.node_masks = [(n.id, n.cpus.mask) for n in machine.iter_numa_nodes()]
        self.classes = CpuClasses.of(machine)  # hybrid machines' kinds of core
        self.memory_known = any(n.memory_bytes for n in machine.iter_numa_nodes())
        self.reserved_mems = self.mems_of_cpus(self.reserved)
        self.topology: Topology = topology(tree.parts)  # the domains of the same walk
        self.states: tuple[PoolState, ...] = pool_states(tree)
        self.occupancy = self.new_occupancy()  # who occupies which CPUs (the terms' index)
        self.records: dict[str, PlacementRecord] = {}
        # Exited containers whose place is kept for their re-creation (until their
        # sandbox stops): their records stay, their cpusets no longer follow the pool.
        self.held: set[str] = set()
        self.taken = 0  # exclusive CPUs, as a mask
        self.reserved_keys: set[str] = set()  # containers of reserved namespaces
        self._orig: dict[str, tuple[CPUSet, CPUSet]] = {}  # cpusets before the current call

    def new_occupancy(self) -> Occupancy:
        return Occupancy(symmetric=self.config.symmetric_affinity)

    def begin(self) -> None:
        """A public call starts: cpuset changes are collected from here for `flush`."""
        self._orig = {}

    def hold(self, key: str) -> None:
        """Keep an exited container's record; its cpusets stop following its pool."""
        record = self.records[key]
        self.held.add(key)
        if record.pool is None:
            self.reserved_keys.discard(key)
        else:
            self.states[record.pool.index].members.discard(key)

    def rekey(self, old_key: str, new_key: str, record: PlacementRecord) -> None:
        """`record` (renamed) replaces the one under `old_key`."""
        del self.records[old_key]
        self.records[new_key] = record
        self.occupancy.rekey(old_key, new_key, record.request.container)
        groups = [self.reserved_keys] if record.pool is None else []
        if record.pool is not None:
            groups.append(self.states[record.pool.index].members)
        for keys in groups:
            if old_key in keys:
                keys.discard(old_key)
                keys.add(new_key)

    def install(self, record: PlacementRecord) -> PlacementRecord:
        """Account a record and keep it (with the cpusets it has now)."""
        key = record.key
        exclusive = record.exclusive.mask
        if exclusive & self.taken:
            raise PlacementError(
                f"internal: CPUs {CPUSet(exclusive & self.taken)} are already exclusive"
            )
        need = record.need
        if record.pool is None:
            self.reserved_keys.add(key)
        else:
            state = self.states[record.pool.index]
            shared_milli = need.milli_cpu if need.kind is CpuKind.SHARED else 0
            for q in state.lineage:
                q.shared_milli += shared_milli
                q.memory_used += need.memory_bytes
            if need.kind is CpuKind.SHARED:
                state.members.add(key)
            container = record.request.container
            state.pods[container.pod.uid] += 1
            state.namespaces[container.namespace] += 1
        self.taken |= exclusive
        cpus, mems = self.cpusets(record.pool, exclusive, record.need)
        record = record.with_cpusets(cpus, mems)
        self.records[key] = record
        self.occupy(self.occupancy, record)
        if exclusive:
            self.refresh(exclusive)
        return record

    def remove(self, key: str) -> PlacementRecord:
        record = self.records.pop(key)
        self.held.discard(key)
        self._orig.pop(key, None)
        self.occupancy.remove(key)
        if record.pool is None:
            self.reserved_keys.discard(key)
            return record
        need = record.need
        state = self.states[record.pool.index]
        shared_milli = need.milli_cpu if need.kind is CpuKind.SHARED else 0
        for q in state.lineage:
            q.shared_milli -= shared_milli
            q.memory_used -= need.memory_bytes
        state.members.discard(key)
        container = record.request.container
        for counter, group in (
            (state.pods, container.pod.uid),
            (state.namespaces, container.namespace),
        ):
            counter[group] -= 1
            if counter[group] <= 0:
                del counter[group]
        exclusive = record.exclusive.mask
        if exclusive:
            self.taken &= ~exclusive
            self.refresh(exclusive)
        return record

    def occupy(self, occupancy: Occupancy, record: PlacementRecord) -> None:
        request = record.request
        home = -1 if record.pool is None else record.pool.index
        occupancy.add(
            record.key,
            request.container,
            request.rules,
            request.terms,
            home,
            self.occupies(record),
        )

    def occupies(self, record: PlacementRecord) -> int:
        """The CPUs a container occupies for the pod rules: an exclusive one its own,
        a shared one its whole pool (its cpuset may grow to all of it), a reserved
        one the reserved CPUs (or, with none reserved, the machine)."""
        if record.exclusive:
            return record.exclusive.mask
        if record.pool is None:
            return self.reserved or self.online
        return record.pool.cpus.mask

    def refresh(self, changed: int) -> None:
        """Exclusive CPUs `changed` were taken or returned: follow up every shared cpuset."""
        keys: list[str] = []
        for state in self.states:
            if state.pool.cpus.mask & changed:
                keys.extend(state.members)
        if not self.config.reserved_cpus:
            keys.extend(self.reserved_keys)  # they run on the machine's shared CPUs
        # Every shared container of a pool has the pool's cpusets: compute them once
        # per pool, not once per container (hundreds share the large pools).
        per_pool: dict[tuple[int, str | None, str], tuple[CPUSet, CPUSet]] = {}
        for key in keys:
            record = self.records[key]
            need = record.need
            index = (
                -1 if record.pool is None else record.pool.index,
                need.cpu_class,
                need.memory_tiers,
            )
            cpusets = per_pool.get(index)
            if cpusets is None:
                cpusets = per_pool[index] = self.cpusets(record.pool, 0, need)
            cpus, mems = cpusets
            if cpus != record.cpus or mems != record.mems:
                self._orig.setdefault(key, (record.cpus, record.mems))
                self.records[key] = record.with_cpusets(cpus, mems)

    def flush(self, exclude: str | None) -> tuple[CpusetUpdate, ...]:
        out = []
        for key, before in self._orig.items():
            record = self.records.get(key)
            if record is None or key == exclude or (record.cpus, record.mems) == before:
                continue
            out.append(CpusetUpdate(key, record.cpus, record.mems))
        self._orig = {}
        return tuple(out)

    def cpusets(
        self, pool: Pool | None, exclusive: int, need: Need | None = None
    ) -> tuple[CPUSet, CPUSet]:
        """The cpusets a container in `pool` (holding `exclusive`) should have now; `need`
        says the kind of core (shared) and memory tiers it asked for."""
        far = need is None or need.memory_tiers != DRAM
        if pool is None:
            cpus = self.reserved or self.shared_mask()
            mems = self.reserved_mems if self.reserved else self.tree.root.mems
        elif exclusive:
            cpus = exclusive
            mems = self.mems_of_cpus(exclusive, far)
        else:
            cpus = pool.cpus.mask & self.shared_mask()
            if need is not None:
                cpus &= self.classes.required(need.cpu_class)
            mems = pool.mems if far else CPUSet.of(pool.numa_nodes)
        return (
            CPUSet(cpus) if self.config.pin_cpus else CPUSet(),
            mems if self.config.pin_memory else CPUSet(),
        )

    def mems_of_cpus(self, mask: int, far: bool = True) -> CPUSet:
        """The NUMA nodes of `mask`'s CPUs, with the memory-only nodes attached to them
        unless `far` is False (memory-tiers: dram)."""
        ids: list[int] = []
        for node, node_mask in self.node_masks:
            if node_mask & mask:
                ids.extend(self.machine.memory_nodes_for(node) if far else (node,))
        return CPUSet.of(ids)

    def shared_mask(self) -> int:
        """The CPUs shared containers run on now: online, not exclusive, reserved or isolated."""
        return self.online & ~(self.taken | self.reserved | self.isolated)

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Every pool's use and free capacity, in pool-tree order; reads only."""
        shared = self.shared_mask()
        free = self.online & ~(self.taken | self.reserved)
        out = []
        for state in self.states:
            pool = state.pool
            mask = pool.cpus.mask
            out.append(
                PoolCapacity(
                    pool=pool.name,
                    cpus=pool.cpus,
                    exclusive=CPUSet(mask & self.taken),
                    exclusive_free=(mask & free & ~self.isolated).bit_count(),
                    isolated_free=(mask & free & self.isolated).bit_count(),
                    shared=CPUSet(mask & shared),
                    shared_milli_used=state.shared_milli,
                    shared_milli_free=max(state.free_milli(shared), 0),
                    memory_bytes=pool.memory_bytes,
                    memory_used_bytes=state.memory_used,
                )
            )
        return tuple(out)

    def check_invariants(self) -> None:
        """Raise AssertionError if the state is inconsistent; cheap enough for tests."""
        seen = 0
        shared = self.shared_mask()
        assert shared, "no shared CPU left on the machine"
        shared_used = [0] * len(self.pools)
        memory_used = [0] * len(self.pools)
        for key, record in self.records.items():
            assert record.key == key, f"{key}: record keyed {record.key}"
            exclusive = record.exclusive.mask
            if exclusive:
                assert not exclusive & seen, f"{key}: CPUs exclusive twice"
                assert not exclusive & self.reserved, f"{key}: exclusive reserved CPUs"
                seen |= exclusive
            if record.pool is not None:
                for q in self.states[record.pool.index].lineage:
                    if record.need.kind is CpuKind.SHARED:
                        shared_used[q.pool.index] += record.need.milli_cpu
                    memory_used[q.pool.index] += record.need.memory_bytes
            if key in self.held:
                continue  # exited: its cpusets are what it had; nobody runs on them
            expected = self.cpusets(record.pool, exclusive, record.need)
            assert (record.cpus, record.mems) == expected, f"{key}: cpusets out of date"
            if self.config.pin_cpus and not exclusive:
                cpus = record.cpus.mask
                assert cpus, f"{key}: empty shared cpuset"
                assert not cpus & self.taken, f"{key}: shared cpuset has exclusive CPUs"
                assert not cpus & self.isolated, f"{key}: shared cpuset has isolated CPUs"
                if record.pool is not None:
                    assert not cpus & self.reserved, f"{key}: shared cpuset has reserved CPUs"
        assert seen == self.taken, "exclusive CPUs out of sync with the containers"
        assert shared_used == [s.shared_milli for s in self.states], "shared accounting"
        assert memory_used == [s.memory_used for s in self.states], "memory accounting"
        assert min(shared_used, default=0) >= 0, "negative shared accounting"
        self.check_indexes()

    def check_indexes(self) -> None:
        """Every index kept beside the records, rebuilt from the records and compared."""
        assert self.held <= self.records.keys(), "held keys without records"
        live = {k: r for k, r in self.records.items() if k not in self.held}
        reserved = {k for k, r in live.items() if r.pool is None}
        assert reserved == self.reserved_keys, "reserved keys out of sync with the records"
        for state in self.states:
            index = state.pool.index
            members = {
                k
                for k, r in live.items()
                if r.pool is not None and r.pool.index == index and r.need.kind is CpuKind.SHARED
            }
            assert members == state.members, f"{state.pool.name}: members out of sync"
            pods: dict[str, int] = {}
            namespaces: dict[str, int] = {}
            for r in self.records.values():
                if r.pool is not None and r.pool.index == index:
                    c = r.request.container
                    pods[c.pod.uid] = pods.get(c.pod.uid, 0) + 1
                    namespaces[c.namespace] = namespaces.get(c.namespace, 0) + 1
            assert pods == dict(state.pods), f"{state.pool.name}: pod counters out of sync"
            assert namespaces == dict(state.namespaces), f"{state.pool.name}: namespace counters"
        rebuilt = self.new_occupancy()
        for record in self.records.values():
            self.occupy(rebuilt, record)
        parts = ("containers", "pods", "attribute index", "term index", "anchors", "unanchored")
        for part, fresh, kept in zip(parts, rebuilt.shape(), self.occupancy.shape(), strict=True):
            assert fresh == kept, f"occupancy: {part} out of sync with the records"
        for pod in self.occupancy.pods():
            union = 0
            for cpus in pod.containers.values():
                union |= cpus
            assert pod.occupied == union, f"{pod.key}: occupied CPUs out of sync"
