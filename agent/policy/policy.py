"""The placement policy: the state of every placed container and the decisions that change it.

`Policy` owns which pool each container is in, which CPUs are exclusive, the
shared milliCPU and memory accounted per pool, and the cpusets handed out;
every mutation returns the cpuset updates other containers need.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from agent.policy.closeness import closeness_table
from agent.policy.config import ConfigError, PolicyConfig, check_numa_labels
from agent.policy.cpus import pick_exclusive
from agent.policy.errors import (
    InvalidRequest,
    PlacementError,
    ResourceExhausted,
    StateError,
    UnknownContainer,
)
from agent.policy.explain import Candidate, explain
from agent.policy.pools import Pool, PoolTree, build_pools
from agent.policy.request import ContainerRequest, CpuKind, Need, classify
from topology.cpuset import CPUSet, CPUSetError
from topology.render import format_bytes
from topology.tree import Machine

__all__ = [
    "CpusetUpdate",
    "Decision",
    "InvalidRequest",
    "PlacementError",
    "Policy",
    "PoolCapacity",
    "ResourceExhausted",
    "StateError",
    "UnknownContainer",
]

RESERVED_POOL = -1
RESERVED_NAME = "reserved"
STATE_VERSION = 1
# Scores are sums of products of floats; rounding keeps symmetric pools tied.
SCORE_DIGITS = 9


@dataclass(frozen=True, slots=True)
class CpusetUpdate:
    key: str
    cpus: CPUSet
    mems: CPUSet


@dataclass(frozen=True, slots=True)
class Decision:
    key: str
    pool: str  # "machine", "socket0", "die0.1", "numa1", "l3-1.8", "reserved"
    cpus: CPUSet  # what goes into cpuset_cpus ("" when pin_cpus is off)
    mems: CPUSet  # what goes into cpuset_mems ("" when pin_memory is off)
    exclusive: bool
    score: float
    updates: tuple[CpusetUpdate, ...]  # OTHER containers whose cpuset must change now
    explanation: str  # candidate pools, their scores, why the winner won


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


@dataclass(slots=True)
class _Entry:
    """A placed container (mutable: its shared cpuset follows the pool's)."""

    request: ContainerRequest
    need: Need
    pool: int  # index into the pool tree, RESERVED_POOL for reserved containers
    exclusive: int  # mask of its exclusive CPUs
    cpus: CPUSet
    mems: CPUSet
    score: float
    explanation: str


class Policy:
    def __init__(self, machine: Machine, config: PolicyConfig) -> None:
        stray = config.reserved_cpus - machine.cpus
        if stray:
            raise ConfigError(
                f"reserved_cpus: CPUs {stray} are not online CPUs of this machine "
                f"(online: {machine.cpus})"
            )
        check_numa_labels(config.numa_labels, machine)
        self.machine = machine
        self.config = config
        self.tree: PoolTree = build_pools(machine)
        self._pools = self.tree.pools
        self._masks = [p.cpus.mask for p in self._pools]
        self._lineage = [(p.index, *p.ancestors) for p in self._pools]
        self._close = closeness_table(machine, self.tree)
        self._online = machine.cpus.mask
        self._reserved = config.reserved_cpus.mask
        self._isolated = machine.isolated.mask & self._online
        self._node_masks = [(n.id, n.cpus.mask) for n in machine.iter_numa_nodes()]
        self._memory_known = any(n.memory_bytes for n in machine.iter_numa_nodes())
        self._reserved_mems = self._mems_of_cpus(self._reserved)
        n = len(self._pools)
        self._taken = 0  # exclusive CPUs
        self._shared_used = [0] * n  # milliCPU, in the pool and all its ancestors
        self._mem_used = [0] * n  # bytes, in the pool and all its ancestors
        self._members: list[set[str]] = [set() for _ in range(n)]  # shared, placed directly
        self._reserved_keys: set[str] = set()
        self._entries: dict[str, _Entry] = {}
        self._pod_pools: dict[str, list[int]] = {}  # pod uid -> containers per pool
        self._ns_pools: dict[str, list[int]] = {}  # namespace -> containers per pool
        self._orig: dict[str, tuple[CPUSet, CPUSet]] = {}  # cpusets before the current call

    # -- public API -----------------------------------------------------------

    def place(self, request: ContainerRequest) -> Decision:
        """Choose a pool and cpusets for a new container; raises ResourceExhausted."""
        if request.key in self._entries:
            return self.resize(request)
        self._orig = {}
        entry = self._place(request, None)
        return self._decision(entry, self._flush(request.key))

    def place_in(self, request: ContainerRequest, pool: str) -> Decision:
        """Place into the named pool regardless of score (what-if tools, tests)."""
        index = self.tree.by_name(pool).index
        if request.key in self._entries:
            raise PlacementError(f"{request.key} is already placed; release it first")
        self._orig = {}
        entry = self._place(request, index)
        return self._decision(entry, self._flush(request.key))

    def resize(self, request: ContainerRequest) -> Decision:
        """The container's request changed: place it again (it keeps its place on failure)."""
        old = self._entries.get(request.key)
        if old is None:
            return self.place(request)
        self._orig = {}
        self._remove(request.key)
        try:
            entry = self._place(request, None)
        except PlacementError:
            self._install(
                old.request, old.need, old.pool, old.exclusive, old.score, old.explanation
            )
            self._orig = {}
            raise
        return self._decision(entry, self._flush(request.key))

    def adopt(self, request: ContainerRequest, cpus: CPUSet, mems: CPUSet) -> Decision:
        """Take in a container already running with these cpusets (agent start, restore).

        Exclusive containers keep their CPUs when those are free and the count
        matches; everything else lands in the smallest pool containing `cpus`.
        The returned cpusets are the policy's, which may differ from the given ones.
        """
        self._orig = {}
        if request.key in self._entries:
            self._remove(request.key)
        need = classify(request, self.config)
        note = (
            f"{request.key}: {need.why}, adopted running on cpus {cpus or '-'} mems {mems or '-'}"
        )
        if need.kind is CpuKind.RESERVED:
            entry = self._install(request, need, RESERVED_POOL, 0, 0.0, note)
        elif need.kind is CpuKind.EXCLUSIVE and self._can_adopt_exclusive(need, cpus):
            entry = self._install(request, need, self._home(0, cpus.mask), cpus.mask, 0.0, note)
        else:
            shared = replace(
                need, kind=CpuKind.SHARED, milli_cpu=need.milli_cpu or (need.exclusive_cpus * 1000)
            )
            pool = self._adopt_shared_pool(cpus)
            entry = self._install(request, shared, pool, 0, 0.0, note)
        return self._decision(entry, self._flush(request.key))

    def rekey(self, old_key: str, new_key: str) -> None:
        """Rename a container (temporary key -> runtime container id)."""
        if old_key == new_key:
            return
        entry = self._entries.get(old_key)
        if entry is None:
            raise UnknownContainer(f"cannot rekey {old_key!r}: no such container is placed")
        if new_key in self._entries:
            raise PlacementError(f"cannot rekey {old_key!r} to {new_key!r}: already placed")
        del self._entries[old_key]
        entry.request = replace(entry.request, key=new_key)
        self._entries[new_key] = entry
        for keys in (self._members[entry.pool] if entry.pool >= 0 else set(), self._reserved_keys):
            if old_key in keys:
                keys.discard(old_key)
                keys.add(new_key)

    def release(self, key: str) -> tuple[CpusetUpdate, ...]:
        """Return the container's CPUs and accounting; unknown keys are ignored."""
        if key not in self._entries:
            return ()
        self._orig = {}
        self._remove(key)
        return self._flush(key)

    def release_pod(self, pod_uid: str) -> tuple[CpusetUpdate, ...]:
        keys = [k for k, e in self._entries.items() if e.request.container.pod.uid == pod_uid]
        self._orig = {}
        for key in keys:
            self._remove(key)
        return self._flush(None)

    def current(self, key: str) -> Decision | None:
        entry = self._entries.get(key)
        return None if entry is None else self._decision(entry, ())

    def assignments(self) -> Mapping[str, Decision]:
        return {key: self._decision(entry, ()) for key, entry in self._entries.items()}

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Every pool's use and free capacity, in pool-tree order; reads only."""
        usable = self._online & ~(self._taken | self._reserved | self._isolated)
        free = self._online & ~(self._taken | self._reserved)
        shared_now = self._shared_counts()
        out = []
        for pool, mask in zip(self._pools, self._masks, strict=True):
            # A shared container here is accounted in every ancestor too: the tightest wins.
            room = min(
                shared_now[q] * 1000 - self._shared_used[q] for q in self._lineage[pool.index]
            )
            out.append(
                PoolCapacity(
                    pool=pool.name,
                    cpus=pool.cpus,
                    exclusive=CPUSet(mask & self._taken),
                    exclusive_free=(mask & free & ~self._isolated).bit_count(),
                    isolated_free=(mask & free & self._isolated).bit_count(),
                    shared=CPUSet(mask & usable),
                    shared_milli_used=self._shared_used[pool.index],
                    shared_milli_free=max(room, 0),
                    memory_bytes=pool.memory_bytes,
                    memory_used_bytes=self._mem_used[pool.index],
                )
            )
        return tuple(out)

    def to_dict(self) -> dict[str, object]:
        """JSON-able state: enough, with the containers' requests, to rebuild the policy."""
        return {
            "version": STATE_VERSION,
            "containers": [
                {
                    "key": key,
                    "pool": self._pool_name(entry.pool),
                    "kind": str(entry.need.kind),
                    "exclusive_cpus": str(CPUSet(entry.exclusive)),
                    "cpus": str(entry.cpus),
                    "mems": str(entry.mems),
                    "score": entry.score,
                }
                for key, entry in self._entries.items()
            ],
        }

    @classmethod
    def from_dict(
        cls,
        machine: Machine,
        config: PolicyConfig,
        data: Mapping[str, object],
        requests: Mapping[str, ContainerRequest],
    ) -> Policy:
        """Rebuild from `to_dict` output; saved containers without a request are dropped
        (they are gone), requests without a saved record are not placed here."""
        policy = cls(machine, config)
        if data.get("version") != STATE_VERSION:
            raise StateError(f"policy state version {data.get('version')!r}, expected 1")
        records = data.get("containers")
        if not isinstance(records, list):
            raise StateError("policy state: 'containers' must be a list")
        for number, record in enumerate(records):
            if not isinstance(record, dict):
                raise StateError(f"policy state: containers[{number}] is not a mapping")
            key = record.get("key")
            request = requests.get(key) if isinstance(key, str) else None
            if request is None:
                continue
            policy._restore(number, record, request)
        policy._orig = {}
        return policy

    # -- placement ------------------------------------------------------------

    def _place(self, request: ContainerRequest, forced: int | None) -> _Entry:
        need = classify(request, self.config)
        if need.kind is CpuKind.RESERVED:
            where = str(self.config.reserved_cpus) or "the machine's shared CPUs"
            note = f"{request.key}: {need.why}, runs on {where}"
            return self._install(request, need, RESERVED_POOL, 0, 0.0, note)
        ranked, rejected = self._rank(request, need)
        if forced is not None:
            ranked = [c for c in ranked if c.pool.index == forced]
            rejected = [r for r in rejected if r[0].index == forced]
        if not ranked:
            raise ResourceExhausted(self._exhausted(need, rejected))
        winner = ranked[0]
        text = explain(request.key, need, ranked, rejected)
        return self._install(request, need, winner.home, winner.pick, winner.score, text)

    def _scores(self, request: ContainerRequest) -> list[float] | None:
        """Affinity score of every pool, or None when all are zero (no affinities)."""
        weights: dict[int, float] = {}
        fn = request.affinity
        symmetric = self.config.symmetric_affinity
        if fn is not None or symmetric:
            container = request.container
            for key, entry in self._entries.items():
                if entry.pool < 0 or key == request.key:
                    continue
                weight = fn(entry.request.container) if fn is not None else 0
                if symmetric and entry.request.affinity is not None:
                    # A(D, C): the placed container's own rules toward the newcomer.
                    weight += entry.request.affinity(container)
                if weight:
                    weights[entry.pool] = weights.get(entry.pool, 0.0) + weight
        container = request.container
        pull = self.config.colocate_weight
        groups: list[list[int] | None] = []
        if self.config.colocate_pods:
            groups.append(self._pod_pools.get(container.pod.uid))
        if self.config.colocate_namespaces:
            groups.append(self._ns_pools.get(container.namespace))
        for counts in groups:
            if counts is None:
                continue
            for pool, count in enumerate(counts):
                if count:
                    weights[pool] = weights.get(pool, 0.0) + pull * count
        nonzero = [(q, w) for q, w in weights.items() if w]
        if not nonzero:
            return None
        return [round(sum(w * row[q] for q, w in nonzero), SCORE_DIGITS) for row in self._close]

    def _rank(
        self, request: ContainerRequest, need: Need
    ) -> tuple[list[Candidate], list[tuple[Pool, str]]]:
        """Every pool with capacity, best first, and the others with the reason they are out.

        The rank tuple is the comparator, rule by rule:
        1. higher affinity score: the weighted pull and push of the container's affinities;
        2. deeper pool: threads and memory stay close when nothing says otherwise;
        3. shared: less loaded after placement (spreads shared work);
           exclusive: isolated CPUs when the container prefers them, then fewer newly
           split cores, then fewer free CPUs left over (best fit keeps large holes
           for large requests);
        4. lower pool id: deterministic.
        """
        scores = self._scores(request)
        shared_now = self._shared_counts()
        ranked: list[Candidate] = []
        rejected: list[tuple[Pool, str]] = []
        exclusive = need.kind is CpuKind.EXCLUSIVE
        for pool in self._pools:
            if exclusive:
                found = self._exclusive_candidate(pool, need, scores)
            else:
                found = self._shared_candidate(pool, need, scores, shared_now)
            if isinstance(found, str):
                rejected.append((pool, found))
            else:
                ranked.append(found)
        ranked.sort(key=lambda c: c.rank)
        return ranked, rejected

    def _shared_candidate(
        self, pool: Pool, need: Need, scores: list[float] | None, shared_now: list[int]
    ) -> Candidate | str:
        index = pool.index
        reason = self._memory_short(index, need) or self._shared_short(pool, need, shared_now)
        if reason is not None:
            return reason
        load = (self._shared_used[index] + need.milli_cpu) / (shared_now[index] * 1000)
        score = scores[index] if scores is not None else 0.0
        rank = (-score, -pool.depth, (round(load, SCORE_DIGITS),), index)
        return Candidate(pool, score, rank, f"load {load:.0%}", 0, index)

    def _exclusive_candidate(
        self, pool: Pool, need: Need, scores: list[float] | None
    ) -> Candidate | str:
        reason = self._exclusive_short(pool, need)
        if reason is not None:
            return reason
        found = self._pick(pool, need)
        if isinstance(found, str):
            return found
        pick, isolated, split, left = found
        # The container lives where its CPUs are: a socket pool's pick may sit in
        # one node, and is scored (and its memory accounted) as that node.
        home = self._home(pool.index, pick)
        reason = self._memory_short(home, need)
        if reason is not None:
            return reason
        score = scores[home] if scores is not None else 0.0
        # Preferring isolated CPUs and not getting them here ranks after every
        # pool where it would get them.
        missed = int(need.isolated and not isolated)
        rank = (-score, -pool.depth, (missed, split, left), pool.index)
        kind = "isolated, " if isolated else ""
        where = "" if home == pool.index else f"in {self._pools[home].name}, "
        detail = f"{where}{kind}splits {split} cores, leaves {left} free"
        return Candidate(pool, score, rank, detail, pick, home)

    def _home(self, pool: int, cpus: int) -> int:
        """The deepest pool under `pool` holding all of `cpus`."""
        while True:
            for child in self.tree.children[pool]:
                if not cpus & ~self._masks[child]:
                    pool = child
                    break
            else:
                return pool

    def _shared_counts(self) -> list[int]:
        usable = self._online & ~(self._taken | self._reserved | self._isolated)
        return [(mask & usable).bit_count() for mask in self._masks]

    def _memory_short(self, pool: int, need: Need) -> str | None:
        if not need.memory_bytes or not self._memory_known:
            return None
        for q in self._lineage[pool]:
            capacity = self._pools[q].memory_bytes
            free = capacity - self._mem_used[q]
            if need.memory_bytes > free:
                where = "" if q == pool else f" in {self._pools[q].name}"
                return f"{max(free, 0)} bytes of memory free{where}"
        return None

    def _shared_short(self, pool: Pool, need: Need, shared_now: list[int]) -> str | None:
        if shared_now[pool.index] == 0:
            return "no shared CPUs"
        for q in self._lineage[pool.index]:
            free = shared_now[q] * 1000 - self._shared_used[q]
            if need.milli_cpu > free:
                where = "" if q == pool.index else f" in {self._pools[q].name}"
                return f"{max(free, 0)}m shared CPU free{where}"
        return None

    def _exclusive_free(self, need: Need) -> tuple[int, int]:
        """(ordinary, isolated) CPUs free for an exclusive container, as masks."""
        free = self._online & ~(self._taken | self._reserved)
        isolated = free & self._isolated if need.isolated else 0
        return free & ~self._isolated, isolated

    def _exclusive_short(self, pool: Pool, need: Need) -> str | None:
        ordinary, isolated = self._exclusive_free(need)
        mask = self._masks[pool.index]
        count = (mask & ordinary).bit_count()
        if count >= need.exclusive_cpus or (mask & isolated).bit_count() >= need.exclusive_cpus:
            return None
        return f"{count} free exclusive CPUs"

    def _pick(self, pool: Pool, need: Need) -> tuple[int, bool, int, int] | str:
        """Exclusive CPUs in the pool and what taking them costs, or why it is not allowed."""
        ordinary, isolated = self._exclusive_free(need)
        mask = self._masks[pool.index]
        # Isolated CPUs when the container wants them and the pool has enough;
        # never a mix, which would put part of it under the scheduler and part not.
        use_isolated = (mask & isolated).bit_count() >= need.exclusive_cpus
        free = isolated if use_isolated else ordinary
        pick = pick_exclusive(pool.layout, free & mask, need.exclusive_cpus, self._distance)
        if pick is None:
            return f"{(free & mask).bit_count()} free exclusive CPUs"
        after = self._taken | pick.mask
        usable = self._online & ~(after | self._reserved | self._isolated)
        if usable == 0:
            return "would take the machine's last shared CPU (one always stays shared)"
        for q, q_mask in enumerate(self._masks):
            if not q_mask & pick.mask:
                continue
            shared = (q_mask & usable).bit_count()
            if self._shared_used[q] > shared * 1000 or (self._members[q] and shared == 0):
                return (
                    f"would leave {self._pools[q].name} {shared} shared CPUs for "
                    f"{self._shared_used[q]}m of shared containers"
                )
        left = (mask & free).bit_count() - need.exclusive_cpus
        return pick.mask, use_isolated, pick.split_cores, left

    def _distance(self, a: int, b: int) -> float:
        return (self.machine.distance(a, b) + self.machine.distance(b, a)) / 2

    def _exhausted(self, need: Need, rejected: list[tuple[Pool, str]]) -> str:
        reasons = {pool.index: reason for pool, reason in rejected}
        root = reasons.get(0)
        # Memory is named with the request, in units a person reads, so the
        # reason after "machine:" is not mistaken for part of the CPU count.
        memory = f" with {format_bytes(need.memory_bytes)} of memory" if need.memory_bytes else ""
        if need.kind is CpuKind.EXCLUSIVE:
            ordinary, isolated = self._exclusive_free(need)
            free = ordinary | isolated
            per_node = max((free & m).bit_count() for _, m in self._node_masks)
            text = (
                f"requested {need.exclusive_cpus} exclusive CPUs{memory}, at most {per_node} "
                f"free in any NUMA node; {free.bit_count()} free in total"
            )
        else:
            shared_now = self._shared_counts()
            best = max(
                min(shared_now[q] * 1000 - self._shared_used[q] for q in self._lineage[i])
                for i in range(len(self._pools))
            )
            text = (
                f"requested {need.milli_cpu}m of shared CPU{memory}, at most {max(best, 0)}m "
                "free in any pool"
            )
        if root is not None:
            text += f"; machine: {root}"
        return text

    # -- state changes --------------------------------------------------------

    def _install(
        self,
        request: ContainerRequest,
        need: Need,
        pool: int,
        exclusive: int,
        score: float,
        explanation: str,
    ) -> _Entry:
        key = request.key
        entry = _Entry(request, need, pool, exclusive, CPUSet(), CPUSet(), score, explanation)
        self._entries[key] = entry
        if pool == RESERVED_POOL:
            self._reserved_keys.add(key)
            entry.cpus, entry.mems = self._cpusets(entry)
            return entry
        for q in self._lineage[pool]:
            self._shared_used[q] += need.milli_cpu if need.kind is CpuKind.SHARED else 0
            self._mem_used[q] += need.memory_bytes
        if need.kind is CpuKind.SHARED:
            self._members[pool].add(key)
        self._count(request, pool, +1)
        entry.cpus, entry.mems = self._cpusets(entry)
        if exclusive:
            if exclusive & self._taken:
                raise PlacementError(
                    f"internal: CPUs {CPUSet(exclusive & self._taken)} are already exclusive"
                )
            self._taken |= exclusive
            self._refresh(exclusive)
        return entry

    def _remove(self, key: str) -> _Entry:
        entry = self._entries.pop(key)
        self._orig.pop(key, None)
        if entry.pool == RESERVED_POOL:
            self._reserved_keys.discard(key)
            return entry
        need = entry.need
        for q in self._lineage[entry.pool]:
            self._shared_used[q] -= need.milli_cpu if need.kind is CpuKind.SHARED else 0
            self._mem_used[q] -= need.memory_bytes
        self._members[entry.pool].discard(key)
        self._count(entry.request, entry.pool, -1)
        if entry.exclusive:
            self._taken &= ~entry.exclusive
            self._refresh(entry.exclusive)
        return entry

    def _count(self, request: ContainerRequest, pool: int, delta: int) -> None:
        container = request.container
        for table, group in (
            (self._pod_pools, container.pod.uid),
            (self._ns_pools, container.namespace),
        ):
            counts = table.setdefault(group, [0] * len(self._pools))
            counts[pool] += delta
            if not any(counts):
                del table[group]

    def _refresh(self, changed: int) -> None:
        """Exclusive CPUs `changed` were taken or returned: follow up every shared cpuset."""
        keys: list[str] = []
        for q, mask in enumerate(self._masks):
            if mask & changed:
                keys.extend(self._members[q])
        if not self.config.reserved_cpus:
            keys.extend(self._reserved_keys)  # they run on the machine's shared CPUs
        for key in keys:
            entry = self._entries[key]
            cpus, mems = self._cpusets(entry)
            if (cpus, mems) != (entry.cpus, entry.mems):
                self._orig.setdefault(key, (entry.cpus, entry.mems))
                entry.cpus, entry.mems = cpus, mems

    def _flush(self, exclude: str | None) -> tuple[CpusetUpdate, ...]:
        out = []
        for key, before in self._orig.items():
            entry = self._entries.get(key)
            if entry is None or key == exclude or (entry.cpus, entry.mems) == before:
                continue
            out.append(CpusetUpdate(key, entry.cpus, entry.mems))
        self._orig = {}
        return tuple(out)

    def _cpusets(self, entry: _Entry) -> tuple[CPUSet, CPUSet]:
        usable = self._online & ~(self._taken | self._reserved | self._isolated)
        if entry.pool == RESERVED_POOL:
            cpus = self._reserved or usable
            mems = self._reserved_mems if self._reserved else self.tree.root.mems
        elif entry.exclusive:
            cpus = entry.exclusive
            mems = self._mems_of_cpus(entry.exclusive)
        else:
            cpus = self._masks[entry.pool] & usable
            mems = self._pools[entry.pool].mems
        return (
            CPUSet(cpus) if self.config.pin_cpus else CPUSet(),
            mems if self.config.pin_memory else CPUSet(),
        )

    def _mems_of_cpus(self, mask: int) -> CPUSet:
        ids: list[int] = []
        for node, node_mask in self._node_masks:
            if node_mask & mask:
                ids.extend(self.machine.memory_nodes_for(node))
        return CPUSet.of(ids)

    # -- adopt / restore ------------------------------------------------------

    def _can_adopt_exclusive(self, need: Need, cpus: CPUSet) -> bool:
        mask = cpus.mask
        if len(cpus) != need.exclusive_cpus or mask & ~self._online:
            return False
        if mask & (self._taken | self._reserved):
            return False
        usable = self._online & ~(self._taken | mask | self._reserved | self._isolated)
        return usable != 0

    def _adopt_shared_pool(self, cpus: CPUSet) -> int:
        pool: Pool | None = self.tree.smallest_containing(cpus) if cpus else self.tree.root
        shared_now = self._shared_counts()
        while pool is not None and shared_now[pool.index] == 0:
            pool = None if pool.parent is None else self._pools[pool.parent]
        return 0 if pool is None else pool.index

    def _restore(
        self, number: int, record: Mapping[str, object], request: ContainerRequest
    ) -> None:
        pool_name = record.get("pool")
        if not isinstance(pool_name, str):
            raise StateError(f"policy state: containers[{number}].pool must be a string")
        text = record.get("exclusive_cpus", "")
        try:
            exclusive = CPUSet.parse(str(text))
        except CPUSetError as err:
            raise StateError(f"policy state: containers[{number}].exclusive_cpus: {err}") from err
        need = classify(request, self.config)
        note = f"{request.key}: {need.why}, restored from saved state in {pool_name}"
        if need.kind is CpuKind.RESERVED or pool_name == RESERVED_NAME:
            self._install(request, need, RESERVED_POOL, 0, 0.0, note)
            return
        try:
            pool = self.tree.by_name(pool_name).index
        except KeyError as err:
            raise StateError(f"policy state: containers[{number}].pool: {err}") from err
        score = record.get("score", 0.0)
        score = float(score) if isinstance(score, int | float) else 0.0
        if need.kind is CpuKind.EXCLUSIVE and self._can_adopt_exclusive(need, exclusive):
            self._install(request, need, pool, exclusive.mask, score, note)
        elif need.kind is CpuKind.SHARED:
            self._install(request, need, pool, 0, score, note)
        else:
            self.adopt(request, exclusive, CPUSet())

    # -- output ---------------------------------------------------------------

    def _pool_name(self, pool: int) -> str:
        return RESERVED_NAME if pool == RESERVED_POOL else self._pools[pool].name

    def _decision(self, entry: _Entry, updates: Iterable[CpusetUpdate]) -> Decision:
        return Decision(
            key=entry.request.key,
            pool=self._pool_name(entry.pool),
            cpus=entry.cpus,
            mems=entry.mems,
            exclusive=entry.need.kind is CpuKind.EXCLUSIVE and bool(entry.exclusive),
            score=entry.score,
            updates=tuple(updates),
            explanation=entry.explanation,
        )

    # -- checks (tests, debugging) -------------------------------------------

    def check_invariants(self) -> None:
        """Raise AssertionError if the state is inconsistent; cheap enough for tests."""
        seen = 0
        usable = self._online & ~(self._taken | self._reserved | self._isolated)
        assert usable, "no shared CPU left on the machine"
        shared_used = [0] * len(self._pools)
        for key, entry in self._entries.items():
            assert entry.request.key == key, f"{key}: entry keyed {entry.request.key}"
            if entry.exclusive:
                assert not entry.exclusive & seen, f"{key}: CPUs exclusive twice"
                assert not entry.exclusive & self._reserved, f"{key}: exclusive reserved CPUs"
                seen |= entry.exclusive
            if entry.need.kind is CpuKind.SHARED and entry.pool >= 0:
                for q in self._lineage[entry.pool]:
                    shared_used[q] += entry.need.milli_cpu
            if self.config.pin_cpus and not entry.exclusive:
                cpus = entry.cpus.mask
                assert cpus, f"{key}: empty shared cpuset"
                assert not cpus & self._taken, f"{key}: shared cpuset has exclusive CPUs"
                assert not cpus & self._isolated, f"{key}: shared cpuset has isolated CPUs"
                if entry.pool >= 0:
                    assert not cpus & self._reserved, f"{key}: shared cpuset has reserved CPUs"
            if self.config.pin_cpus and entry.exclusive:
                assert entry.cpus.mask == entry.exclusive, f"{key}: cpuset differs from its CPUs"
        assert seen == self._taken, "exclusive CPUs out of sync with the containers"
        assert shared_used == self._shared_used, "shared accounting out of sync"
        assert min(self._shared_used, default=0) >= 0, "negative shared accounting"
        assert min(self._mem_used, default=0) >= 0, "negative memory accounting"
