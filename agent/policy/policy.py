"""The placement policy: the one record of every placed container and the decisions that change it.

`Policy` owns each container's `PlacementRecord` (pool, exclusive CPUs, cpusets,
what it was placed with), the per-pool accounting beside them (`PoolState`) and
the machine's exclusive CPUs; every mutation returns the cpuset updates other
containers need. A restart takes records back through `restore`; `adopt` is
only for containers no record names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from agent.labels.numa import numa_node_labels
from agent.policy.accounting import PoolState, pool_states
from agent.policy.classes import DRAM, EVERYWHERE, CpuClasses, shared_class_short, word
from agent.policy.closeness import closeness_table
from agent.policy.config import ConfigError, PolicyConfig, check_numa_labels
from agent.policy.constraints import Evaluation, Required
from agent.policy.cpus import pick_exclusive
from agent.policy.domains import machine_topology
from agent.policy.errors import (
    InvalidRequest,
    PlacementError,
    ResourceExhausted,
    RuleUnsatisfied,
    UnknownContainer,
)
from agent.policy.explain import Candidate, explain
from agent.policy.occupancy import Occupancy
from agent.policy.pools import Pool, PoolTree, build_pools
from agent.policy.record import RESERVED_POOL_NAME, PlacementRecord, SavedPlacement
from agent.policy.request import ContainerRequest, CpuKind, Need, classify
from topology.cpuset import CPUSet
from topology.render import format_bytes
from topology.tree import Machine

__all__ = [
    "CpusetUpdate",
    "Decision",
    "InvalidRequest",
    "PlacementError",
    "PlacementRecord",
    "Policy",
    "PoolCapacity",
    "ResourceExhausted",
    "RuleUnsatisfied",
    "SavedPlacement",
    "UnknownContainer",
]

# Scores are sums of products of floats; rounding keeps symmetric pools tied.
SCORE_DIGITS = 9
MAX_FULL_LISTED = 8


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
        self._close = closeness_table(machine, self.tree)
        self._online = machine.cpus.mask
        self._reserved = config.reserved_cpus.mask
        self._isolated = machine.isolated.mask & self._online
        self._node_masks = [(n.id, n.cpus.mask) for n in machine.iter_numa_nodes()]
        self._classes = CpuClasses.of(machine)  # hybrid machines' kinds of core
        self._memory_known = any(n.memory_bytes for n in machine.iter_numa_nodes())
        self._reserved_mems = self._mems_of_cpus(self._reserved)
        self._states = pool_states(self.tree)
        self._topology = machine_topology(machine)
        self._occupancy = Occupancy()  # which pods occupy which CPUs (pod rules)
        labels = numa_node_labels(machine, config.numa_labels)  # for node affinity
        self._numa = {n.id: (n.cpus.mask, labels[n.id]) for n in machine.iter_numa_nodes()}
        self._taken = 0  # exclusive CPUs, as a mask
        self._reserved_keys: set[str] = set()  # containers of reserved namespaces
        self._records: dict[str, PlacementRecord] = {}
        self._orig: dict[str, tuple[CPUSet, CPUSet]] = {}  # cpusets before the current call

    # -- public API -----------------------------------------------------------

    def place(self, request: ContainerRequest) -> Decision:
        """Choose a pool and cpusets for a new container; raises ResourceExhausted."""
        if request.key in self._records:
            return self.resize(request)
        self._orig = {}
        record = self._place(request, None)
        return self._decision(record, self._flush(request.key))

    def place_in(self, request: ContainerRequest, pool: str) -> Decision:
        """Place into the named pool regardless of score (what-if tools, tests)."""
        index = self.tree.by_name(pool).index
        if request.key in self._records:
            raise PlacementError(f"{request.key} is already placed; release it first")
        self._orig = {}
        record = self._place(request, index)
        return self._decision(record, self._flush(request.key))

    def resize(self, request: ContainerRequest) -> Decision:
        """The container's request changed: place it again (it keeps its place on failure)."""
        old = self._records.get(request.key)
        if old is None:
            return self.place(request)
        self._orig = {}
        self._remove(request.key)
        try:
            record = self._place(request, None)
        except PlacementError:
            self._install(old)
            self._orig = {}
            raise
        return self._decision(record, self._flush(request.key))

    def restore(self, request: ContainerRequest, saved: SavedPlacement) -> Decision | None:
        """Take back a container the state file knows, exactly where it was.

        The saved pool, exclusive CPUs, score and explanation are kept whenever
        they are still valid on this machine and configuration (the pool exists
        and has shared CPUs; exclusive CPUs are online, free, unreserved and as
        many as asked; the kind of CPUs the request needs is unchanged). Returns
        None, changing nothing, when they are not: the caller places it again.
        Capacity is not re-checked: the container runs, and was admitted.
        """
        self._orig = {}
        if request.key in self._records:
            self._remove(request.key)
        need = classify(request, self.config)
        record = self._restorable(request, need, saved)
        if record is None:
            self._orig = {}
            return None
        return self._decision(self._install(record), self._flush(request.key))

    def adopt(self, request: ContainerRequest, cpus: CPUSet, mems: CPUSet) -> Decision:
        """Take in a running container no record names, inferring its place from its cpusets.

        Exclusive containers keep their CPUs when those are free and the count
        matches; everything else lands in the smallest pool containing `cpus`.
        The returned cpusets are the policy's, which may differ from the given ones.
        """
        self._orig = {}
        if request.key in self._records:
            self._remove(request.key)
        need = classify(request, self.config)
        note = (
            f"{request.key}: {need.why}, adopted running on cpus {cpus or '-'} mems {mems or '-'}"
        )
        if need.kind is CpuKind.RESERVED:
            record = self._new_record(request, need, None, 0, 0.0, note)
        elif need.kind is CpuKind.EXCLUSIVE and self._can_hold_exclusive(need, cpus.mask):
            home = self._pools[self._home(0, cpus.mask)]
            record = self._new_record(request, need, home, cpus.mask, 0.0, note)
        else:
            shared = replace(
                need, kind=CpuKind.SHARED, milli_cpu=need.milli_cpu or (need.exclusive_cpus * 1000)
            )
            pool = self._adopt_shared_pool(cpus)
            record = self._new_record(request, shared, pool, 0, 0.0, note)
        return self._decision(self._install(record), self._flush(request.key))

    def rekey(self, old_key: str, new_key: str, container_id: str = "") -> None:
        """Rename a container (temporary key -> runtime container id); with
        `container_id`, the container is known by that runtime id from now on
        (so rules matching `id` select it)."""
        record = self._records.get(old_key)
        if record is None:
            raise UnknownContainer(f"cannot rekey {old_key!r}: no such container is placed")
        if old_key != new_key and new_key in self._records:
            raise PlacementError(f"cannot rekey {old_key!r} to {new_key!r}: already placed")
        request = record.request
        container = request.container
        if container_id and container.id != container_id:
            container = replace(container, id=container_id)
        request = replace(request, key=new_key, container=container)
        del self._records[old_key]
        self._records[new_key] = replace(record, request=request)
        self._occupancy.rekey(old_key, new_key, record.request.container)
        groups = [self._reserved_keys] if record.pool is None else []
        if record.pool is not None:
            groups.append(self._states[record.pool.index].members)
        for keys in groups:
            if old_key in keys:
                keys.discard(old_key)
                keys.add(new_key)

    def release(self, key: str) -> tuple[CpusetUpdate, ...]:
        """Return the container's CPUs and accounting; unknown keys are ignored."""
        if key not in self._records:
            return ()
        self._orig = {}
        self._remove(key)
        return self._flush(key)

    def release_pod(self, pod_uid: str) -> tuple[CpusetUpdate, ...]:
        keys = [k for k, r in self._records.items() if r.request.container.pod.uid == pod_uid]
        self._orig = {}
        for key in keys:
            self._remove(key)
        return self._flush(None)

    def record(self, key: str) -> PlacementRecord | None:
        return self._records.get(key)

    def records(self) -> Mapping[str, PlacementRecord]:
        """Every placed container's record (a read-only view; records are immutable)."""
        return self._records

    def current(self, key: str) -> Decision | None:
        record = self._records.get(key)
        return None if record is None else self._decision(record, ())

    def assignments(self) -> Mapping[str, Decision]:
        return {key: self._decision(record, ()) for key, record in self._records.items()}

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Every pool's use and free capacity, in pool-tree order; reads only."""
        shared = self._shared_mask()
        free = self._online & ~(self._taken | self._reserved)
        out = []
        for state in self._states:
            pool = state.pool
            mask = pool.cpus.mask
            out.append(
                PoolCapacity(
                    pool=pool.name,
                    cpus=pool.cpus,
                    exclusive=CPUSet(mask & self._taken),
                    exclusive_free=(mask & free & ~self._isolated).bit_count(),
                    isolated_free=(mask & free & self._isolated).bit_count(),
                    shared=CPUSet(mask & shared),
                    shared_milli_used=state.shared_milli,
                    shared_milli_free=max(state.free_milli(shared), 0),
                    memory_bytes=pool.memory_bytes,
                    memory_used_bytes=state.memory_used,
                )
            )
        return tuple(out)

    # -- placement ------------------------------------------------------------

    def _place(self, request: ContainerRequest, forced: int | None) -> PlacementRecord:
        need = classify(request, self.config)
        self._classes.check(need.cpu_class, request.container.who)
        if need.kind is CpuKind.RESERVED:
            where = str(self.config.reserved_cpus) or "the machine's shared CPUs"
            note = f"{request.key}: {need.why}, runs on {where}"
            return self._install(self._new_record(request, need, None, 0, 0.0, note))
        ranked, rejected, ruled_out = self._rank(request, need)
        if forced is not None:
            ranked = [c for c in ranked if c.pool.index == forced]
            rejected = [r for r in rejected if r[0].index == forced]
            ruled_out = [r for r in ruled_out if r[0].index == forced]
        if not ranked:
            if ruled_out:
                raise RuleUnsatisfied(self._unsatisfied(need, ruled_out, rejected))
            raise ResourceExhausted(self._exhausted(need, rejected))
        winner = ranked[0]
        text = explain(request.key, need, ranked, rejected)
        home = self._pools[winner.home]
        return self._install(self._new_record(request, need, home, winner.pick, winner.score, text))

    def _scores(self, request: ContainerRequest) -> list[float] | None:
        """Affinity score of every pool, or None when all are zero (no affinities)."""
        weights: dict[int, float] = {}
        fn = request.affinity
        symmetric = self.config.symmetric_affinity
        container = request.container
        if fn is not None or symmetric:
            for key, record in self._records.items():
                if record.pool is None or key == request.key:
                    continue
                weight = fn(record.request.container) if fn is not None else 0
                if symmetric and record.request.affinity is not None:
                    # A(D, C): the placed container's own rules toward the newcomer.
                    weight += record.request.affinity(container)
                if weight:
                    index = record.pool.index
                    weights[index] = weights.get(index, 0.0) + weight
        pull = self.config.colocate_weight
        if self.config.colocate_pods or self.config.colocate_namespaces:
            for state in self._states:
                count = 0
                if self.config.colocate_pods:
                    count += state.pods.get(container.pod.uid, 0)
                if self.config.colocate_namespaces:
                    count += state.namespaces.get(container.namespace, 0)
                if count:
                    index = state.pool.index
                    weights[index] = weights.get(index, 0.0) + pull * count
        nonzero = [(q, w) for q, w in weights.items() if w]
        if not nonzero:
            return None
        return [round(sum(w * row[q] for q, w in nonzero), SCORE_DIGITS) for row in self._close]

    def _rank(
        self, request: ContainerRequest, need: Need
    ) -> tuple[list[Candidate], list[tuple[Pool, str]], list[tuple[Pool, list[Required]]]]:
        """Every pool with capacity that the pod rules allow, best first; the pools
        without capacity with the reason; the pools the rules rule out with the rules.

        The rank tuple is the comparator, rule by rule:
        1. higher score: the weighted pull and push of the container's affinities
           (cri-resource-manager's annotations, by hardware closeness), plus the
           weight of every preferred pod rule (numa-agent.io) the place satisfies;
        2. lower spread skew (ScheduleAnyway constraints, summed);
        3. deeper pool: threads and memory stay close when nothing says otherwise;
        4. shared: less loaded after placement (spreads shared work);
           exclusive: its preferred kind of core on a hybrid machine (performance
           unless it asked), then isolated CPUs when it prefers them, then fewer newly
           split cores, then fewer free CPUs left over (best fit keeps large holes
           for large requests);
        5. lower pool id: deterministic.
        """
        scores = self._scores(request)
        rules = self._evaluation(request)
        shared = self._shared_mask()
        ranked: list[Candidate] = []
        rejected: list[tuple[Pool, str]] = []
        ruled_out: list[tuple[Pool, list[Required]]] = []
        exclusive = need.kind is CpuKind.EXCLUSIVE
        for state in self._states:
            if exclusive:
                found = self._exclusive_candidate(state, need, scores, rules)
            else:
                found = self._shared_candidate(state, need, scores, shared, rules)
            if isinstance(found, str):
                rejected.append((state.pool, found))
            elif isinstance(found, list):
                ruled_out.append((state.pool, found))
            else:
                ranked.append(found)
        if rules is not None and rules.spread and ranked:
            skews = rules.skews([c.occupied for c in ranked])
            ranked = [
                replace(c, rank=(c.rank[0], skew, *c.rank[2:]), notes=c.notes + notes)
                for c, (skew, notes) in zip(ranked, skews, strict=True)
            ]
        ranked.sort(key=lambda c: c.rank)
        return ranked, rejected, ruled_out

    def _evaluation(self, request: ContainerRequest) -> Evaluation | None:
        """The pod rules for this container, or None when no rule can concern it."""
        if request.rules.is_empty and not self._occupancy.any_terms:
            return None
        rules = Evaluation(
            request,
            self._topology,
            self._occupancy,
            self.config,
            self._numa,
            self._reserved,
        )
        return None if rules.empty else rules

    def _shared_candidate(
        self,
        state: PoolState,
        need: Need,
        scores: list[float] | None,
        shared: int,
        rules: Evaluation | None,
    ) -> Candidate | str | list[Required]:
        pool = state.pool
        reason = self._memory_short(state, need) or state.short_of_milli(need.milli_cpu, shared)
        if reason is None and self._classes.required(need.cpu_class) != EVERYWHERE:
            reason = self._class_short(state, need, shared)
        if reason is not None:
            return reason
        occupied = pool.cpus.mask
        score = scores[pool.index] if scores is not None else 0.0
        notes: tuple[str, ...] = ()
        if rules is not None:
            failing = rules.failing(occupied)
            if failing:
                return failing
            extra, notes = rules.score(occupied)
            score = round(score + extra, SCORE_DIGITS)
        load = state.load(need.milli_cpu, shared)
        rank = (-score, 0, -pool.depth, (round(load, SCORE_DIGITS),), pool.index)
        return Candidate(pool, score, rank, f"load {load:.0%}", 0, pool.index, notes, occupied)

    def _exclusive_candidate(
        self, state: PoolState, need: Need, scores: list[float] | None, rules: Evaluation | None
    ) -> Candidate | str | list[Required]:
        pool = state.pool
        reason = self._exclusive_short(pool, need)
        if reason is not None:
            return reason
        if rules is None:
            found = self._pick(pool, need)
            if isinstance(found, str):
                return found
        else:
            within = self._pick_within_rules(pool, need, rules)
            if isinstance(within, list):
                # No pick the rules allow: for lack of room, or because of the rules?
                plain = self._pick(pool, need)
                return plain if isinstance(plain, str) else within
            found = within
        pick, isolated, split, left = found
        # The container lives where its CPUs are: a socket pool's pick may sit in
        # one node, and is scored (and its memory accounted) as that node.
        home = self._home(pool.index, pick)
        reason = self._memory_short(self._states[home], need)
        if reason is not None:
            return reason
        score = scores[home] if scores is not None else 0.0
        notes: tuple[str, ...] = ()
        if rules is not None:
            extra, notes = rules.score(pick)
            score = round(score + extra, SCORE_DIGITS)
        # Preferring isolated CPUs and not getting them here ranks after every
        # pool where it would get them.
        missed = int(need.isolated and not isolated)
        # Off the preferred kind of core (hybrid, performance by default): after every
        # pool where it stays on them.
        off_class = self._classes.missed(need.cpu_class, pick)
        rank = (-score, 0, -pool.depth, (off_class, missed, split, left), pool.index)
        kind = "isolated, " if isolated else ""
        kind += "off its preferred kind of core, " if off_class else ""
        where = "" if home == pool.index else f"in {self._pools[home].name}, "
        detail = f"{where}{kind}splits {split} cores, leaves {left} free"
        return Candidate(pool, score, rank, detail, pick, home, notes, pick)

    def _pick_within_rules(
        self, pool: Pool, need: Need, rules: Evaluation
    ) -> tuple[int, bool, int, int] | list[Required]:
        """The pick of `_pick` restricted to the CPUs the required rules allow, and,
        when one wants the place within one domain of a level, within one such
        domain (each domain of the pool tried, the best kept); or the rules that
        leave no pick."""
        allowed = rules.allowed() & pool.cpus.mask
        level = rules.finest_single()
        if allowed == pool.cpus.mask and level is None:
            # The rules allow the whole pool: one pick, as without them.
            found = self._pick(pool, need)
            if isinstance(found, str) or rules.failing(found[0]):
                return rules.failing(pool.cpus.mask) or list(rules.required)
            return found
        regions = [allowed]
        if level is not None:
            domains = self._topology[level]
            if domains.single(pool.cpus.mask) is None:
                regions = [domains.masks[i] & allowed for i in domains.indices(allowed)]
        best: tuple[int, bool, int, int] | None = None
        for region in regions:
            found = self._pick(pool, need, region)
            if isinstance(found, str) or rules.failing(found[0]):
                continue
            if best is None or (found[2], found[3]) < (best[2], best[3]):
                best = found
        if best is None:
            return rules.failing(pool.cpus.mask) or list(rules.required)
        return best

    def _home(self, pool: int, cpus: int) -> int:
        """The deepest pool under `pool` holding all of `cpus`."""
        while True:
            for child in self.tree.children[pool]:
                if not cpus & ~self._pools[child].cpus.mask:
                    pool = child
                    break
            else:
                return pool

    def _shared_mask(self) -> int:
        """The CPUs shared containers run on now: online, not exclusive, reserved or isolated."""
        return self._online & ~(self._taken | self._reserved | self._isolated)

    def _memory_short(self, state: PoolState, need: Need) -> str | None:
        if not need.memory_bytes or not self._memory_known:
            return None
        return state.short_of_memory(need.memory_bytes)

    def _exclusive_free(self, need: Need) -> tuple[int, int]:
        """(ordinary, isolated) CPUs free for an exclusive container, as masks."""
        free = self._online & ~(self._taken | self._reserved)
        isolated = free & self._isolated if need.isolated else 0
        return free & ~self._isolated, isolated

    def _exclusive_short(self, pool: Pool, need: Need) -> str | None:
        ordinary, isolated = self._exclusive_free(need)
        mask = pool.cpus.mask & self._classes.required(need.cpu_class)
        count = (mask & ordinary).bit_count()
        if count >= need.exclusive_cpus or (mask & isolated).bit_count() >= need.exclusive_cpus:
            return None
        return f"{count} free exclusive{word(need.cpu_class)} CPUs"

    def _pick(self, pool: Pool, need: Need, within: int = -1) -> tuple[int, bool, int, int] | str:
        """Exclusive CPUs in the pool (and `within`) and what taking them costs, or why
        it is not allowed."""
        ordinary, isolated = self._exclusive_free(need)
        mask = pool.cpus.mask & within
        mask &= self._classes.for_pick(need.cpu_class, need.exclusive_cpus, mask & ordinary)
        # Isolated CPUs when the container wants them and the pool has enough;
        # never a mix, which would put part of it under the scheduler and part not.
        use_isolated = (mask & isolated).bit_count() >= need.exclusive_cpus
        free = isolated if use_isolated else ordinary
        pick = pick_exclusive(pool.layout, free & mask, need.exclusive_cpus, self._distance)
        if pick is None:
            return f"{(free & mask).bit_count()} free exclusive{word(need.cpu_class)} CPUs"
        reason = self._starves_shared(pick.mask)
        if reason is not None:
            return reason
        left = (mask & free).bit_count() - need.exclusive_cpus
        return pick.mask, use_isolated, pick.split_cores, left

    def _starves_shared(self, taking: int) -> str | None:
        """Why taking `taking` exclusively would leave shared containers without room."""
        shared = self._online & ~(self._taken | taking | self._reserved | self._isolated)
        if shared == 0:
            return "would take the machine's last shared CPU (one always stays shared)"
        # Shared containers that asked a kind of core keep one of its CPUs (hybrid only).
        for record in self._records.values() if self._classes.hybrid else ():
            needs_class = self._classes.required(record.need.cpu_class)
            if record.pool is None or record.exclusive or needs_class == EVERYWHERE:
                continue
            if record.pool.cpus.mask & taking and not record.pool.cpus.mask & shared & needs_class:
                return (
                    f"would leave {record.key} (shared, {record.need.cpu_class} cores) "
                    f"no shared {record.need.cpu_class} CPU in {record.pool.name}"
                )
        for state in self._states:
            if not state.pool.cpus.mask & taking:
                continue
            left = state.usable(shared)
            if state.shared_milli > left * 1000 or (state.members and left == 0):
                return (
                    f"would leave {state.pool.name} {left} shared CPUs for "
                    f"{state.shared_milli}m of shared containers"
                )
        return None

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
            free &= self._classes.required(need.cpu_class)
            per_node = max((free & m).bit_count() for _, m in self._node_masks)
            text = (
                f"requested {need.exclusive_cpus} exclusive{word(need.cpu_class)} CPUs{memory}, "
                f"at most {per_node} free in any NUMA node; {free.bit_count()} free in total"
            )
        else:
            shared = self._shared_mask()
            best = max(state.free_milli(shared) for state in self._states)
            text = (
                f"requested {need.milli_cpu}m of shared{word(need.cpu_class)} CPU{memory}, "
                f"at most {max(best, 0)}m free in any pool"
            )
        if root is not None:
            text += f"; machine: {root}"
        return text

    def _unsatisfied(
        self,
        need: Need,
        ruled_out: list[tuple[Pool, list[Required]]],
        rejected: list[tuple[Pool, str]],
    ) -> str:
        """Which rules leave no place, and why, for a refusal kubelet will show."""
        seen: dict[str, Required] = {}
        for _, failing in ruled_out:
            for rule in failing:
                seen.setdefault(rule.rule, rule)
        parts = [f"{rule.rule}: {rule.why()}" for rule in seen.values()]
        text = f"no place for {need.describe()} satisfies the pod rules: " + "; ".join(parts)
        if rejected:
            full = ", ".join(pool.name for pool, _ in rejected[:MAX_FULL_LISTED])
            more = (
                f" (+{len(rejected) - MAX_FULL_LISTED} more)"
                if len(rejected) > MAX_FULL_LISTED
                else ""
            )
            text += f"; without room: {full}{more}"
        return text

    # -- state changes --------------------------------------------------------

    def _new_record(
        self,
        request: ContainerRequest,
        need: Need,
        pool: Pool | None,
        exclusive: int,
        score: float,
        explanation: str,
    ) -> PlacementRecord:
        """A record not yet installed; its cpusets are filled in by `_install`."""
        return PlacementRecord(
            request, need, pool, CPUSet(exclusive), CPUSet(), CPUSet(), score, explanation
        )

    def _install(self, record: PlacementRecord) -> PlacementRecord:
        """Account a record and keep it (with the cpusets it has now)."""
        key = record.key
        exclusive = record.exclusive.mask
        if exclusive & self._taken:
            raise PlacementError(
                f"internal: CPUs {CPUSet(exclusive & self._taken)} are already exclusive"
            )
        need = record.need
        if record.pool is None:
            self._reserved_keys.add(key)
        else:
            state = self._states[record.pool.index]
            shared_milli = need.milli_cpu if need.kind is CpuKind.SHARED else 0
            for q in state.lineage:
                q.shared_milli += shared_milli
                q.memory_used += need.memory_bytes
            if need.kind is CpuKind.SHARED:
                state.members.add(key)
            container = record.request.container
            state.pods[container.pod.uid] += 1
            state.namespaces[container.namespace] += 1
        self._taken |= exclusive
        cpus, mems = self._cpusets(record.pool, exclusive, record.need)
        record = record.with_cpusets(cpus, mems)
        self._records[key] = record
        self._occupancy.add(
            key, record.request.container, record.request.rules, self._occupies(record)
        )
        if exclusive:
            self._refresh(exclusive)
        return record

    def _remove(self, key: str) -> PlacementRecord:
        record = self._records.pop(key)
        self._orig.pop(key, None)
        self._occupancy.remove(key, record.request.container)
        if record.pool is None:
            self._reserved_keys.discard(key)
            return record
        need = record.need
        state = self._states[record.pool.index]
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
            self._taken &= ~exclusive
            self._refresh(exclusive)
        return record

    def _occupies(self, record: PlacementRecord) -> int:
        """The CPUs a container occupies for the pod rules: an exclusive one its own,
        a shared one its whole pool (its cpuset may grow to all of it), a reserved
        one the reserved CPUs (or, with none reserved, the machine)."""
        if record.exclusive:
            return record.exclusive.mask
        if record.pool is None:
            return self._reserved or self._online
        return record.pool.cpus.mask

    def _refresh(self, changed: int) -> None:
        """Exclusive CPUs `changed` were taken or returned: follow up every shared cpuset."""
        keys: list[str] = []
        for state in self._states:
            if state.pool.cpus.mask & changed:
                keys.extend(state.members)
        if not self.config.reserved_cpus:
            keys.extend(self._reserved_keys)  # they run on the machine's shared CPUs
        # Every shared container of a pool has the pool's cpusets: compute them once
        # per pool, not once per container (hundreds share the large pools).
        per_pool: dict[tuple[int, str | None, str], tuple[CPUSet, CPUSet]] = {}
        for key in keys:
            record = self._records[key]
            need = record.need
            index = (
                -1 if record.pool is None else record.pool.index,
                need.cpu_class,
                need.memory_tiers,
            )
            cpusets = per_pool.get(index)
            if cpusets is None:
                cpusets = per_pool[index] = self._cpusets(record.pool, 0, need)
            cpus, mems = cpusets
            if cpus != record.cpus or mems != record.mems:
                self._orig.setdefault(key, (record.cpus, record.mems))
                self._records[key] = record.with_cpusets(cpus, mems)

    def _flush(self, exclude: str | None) -> tuple[CpusetUpdate, ...]:
        out = []
        for key, before in self._orig.items():
            record = self._records.get(key)
            if record is None or key == exclude or (record.cpus, record.mems) == before:
                continue
            out.append(CpusetUpdate(key, record.cpus, record.mems))
        self._orig = {}
        return tuple(out)

    def _cpusets(
        self, pool: Pool | None, exclusive: int, need: Need | None = None
    ) -> tuple[CPUSet, CPUSet]:
        """The cpusets a container in `pool` (holding `exclusive`) should have now; `need`
        says the kind of core (shared) and memory tiers it asked for."""
        far = need is None or need.memory_tiers != DRAM
        if pool is None:
            cpus = self._reserved or self._shared_mask()
            mems = self._reserved_mems if self._reserved else self.tree.root.mems
        elif exclusive:
            cpus = exclusive
            mems = self._mems_of_cpus(exclusive, far)
        else:
            cpus = pool.cpus.mask & self._shared_mask()
            if need is not None:
                cpus &= self._classes.required(need.cpu_class)
            mems = pool.mems if far else CPUSet.of(pool.numa_nodes)
        return (
            CPUSet(cpus) if self.config.pin_cpus else CPUSet(),
            mems if self.config.pin_memory else CPUSet(),
        )

    def _mems_of_cpus(self, mask: int, far: bool = True) -> CPUSet:
        """The NUMA nodes of `mask`'s CPUs, with the memory-only nodes attached to them
        unless `far` is False (memory-tiers: dram)."""
        ids: list[int] = []
        for node, node_mask in self._node_masks:
            if node_mask & mask:
                ids.extend(self.machine.memory_nodes_for(node) if far else (node,))
        return CPUSet.of(ids)

    def _class_short(self, state: PoolState, need: Need, shared: int) -> str | None:
        """Why a shared container asking for a kind of core has no room for it here."""
        wanted = self._classes.required(need.cpu_class)
        used: dict[int, int] = {}
        for record in self._records.values():
            if record.pool is None or record.exclusive or record.need.cpu_class != need.cpu_class:
                continue
            for index in (record.pool.index, *record.pool.ancestors):
                used[index] = used.get(index, 0) + record.need.milli_cpu
        lineage = [
            (q.pool.index, (q.pool.cpus.mask & shared & wanted).bit_count()) for q in state.lineage
        ]
        return shared_class_short(lineage, used, need.milli_cpu, str(need.cpu_class))

    # -- restore / adopt ------------------------------------------------------

    def _can_hold_exclusive(self, need: Need, mask: int) -> bool:
        """Whether a running container may keep exactly the CPUs `mask` to itself: as
        many as it asks, online, nobody else's, not reserved, and one CPU stays shared."""
        if mask.bit_count() != need.exclusive_cpus or mask & ~self._online:
            return False
        if mask & (self._taken | self._reserved):
            return False
        return self._online & ~(self._taken | mask | self._reserved | self._isolated) != 0

    def _restorable(
        self, request: ContainerRequest, need: Need, saved: SavedPlacement
    ) -> PlacementRecord | None:
        if need.kind is CpuKind.RESERVED:
            if saved.pool != RESERVED_POOL_NAME:
                return None
            return self._new_record(request, need, None, 0, saved.score, saved.explanation)
        if saved.pool == RESERVED_POOL_NAME:
            return None
        try:
            pool = self.tree.by_name(saved.pool)
        except KeyError:
            return None
        mask = saved.exclusive.mask
        if need.kind is CpuKind.EXCLUSIVE:
            if not self._can_hold_exclusive(need, mask) or mask & ~pool.cpus.mask:
                return None
        elif mask or self._states[pool.index].usable(self._shared_mask()) == 0:
            return None
        return self._new_record(request, need, pool, mask, saved.score, saved.explanation)

    def _adopt_shared_pool(self, cpus: CPUSet) -> Pool:
        pool: Pool | None = self.tree.smallest_containing(cpus) if cpus else self.tree.root
        shared = self._shared_mask()
        while pool is not None and self._states[pool.index].usable(shared) == 0:
            pool = None if pool.parent is None else self._pools[pool.parent]
        return self.tree.root if pool is None else pool

    # -- output ---------------------------------------------------------------

    def _decision(self, record: PlacementRecord, updates: Iterable[CpusetUpdate]) -> Decision:
        return Decision(
            key=record.key,
            pool=record.pool_name,
            cpus=record.cpus,
            mems=record.mems,
            exclusive=record.is_exclusive,
            score=record.score,
            updates=tuple(updates),
            explanation=record.explanation,
        )

    # -- checks (tests, debugging) -------------------------------------------

    def check_invariants(self) -> None:
        """Raise AssertionError if the state is inconsistent; cheap enough for tests."""
        seen = 0
        shared = self._shared_mask()
        assert shared, "no shared CPU left on the machine"
        shared_used = [0] * len(self._pools)
        memory_used = [0] * len(self._pools)
        for key, record in self._records.items():
            assert record.key == key, f"{key}: record keyed {record.key}"
            exclusive = record.exclusive.mask
            if exclusive:
                assert not exclusive & seen, f"{key}: CPUs exclusive twice"
                assert not exclusive & self._reserved, f"{key}: exclusive reserved CPUs"
                seen |= exclusive
            if record.pool is not None:
                for q in self._states[record.pool.index].lineage:
                    if record.need.kind is CpuKind.SHARED:
                        shared_used[q.pool.index] += record.need.milli_cpu
                    memory_used[q.pool.index] += record.need.memory_bytes
            expected = self._cpusets(record.pool, exclusive, record.need)
            assert (record.cpus, record.mems) == expected, f"{key}: cpusets out of date"
            if self.config.pin_cpus and not exclusive:
                cpus = record.cpus.mask
                assert cpus, f"{key}: empty shared cpuset"
                assert not cpus & self._taken, f"{key}: shared cpuset has exclusive CPUs"
                assert not cpus & self._isolated, f"{key}: shared cpuset has isolated CPUs"
                if record.pool is not None:
                    assert not cpus & self._reserved, f"{key}: shared cpuset has reserved CPUs"
        assert seen == self._taken, "exclusive CPUs out of sync with the containers"
        assert shared_used == [s.shared_milli for s in self._states], "shared accounting"
        assert memory_used == [s.memory_used for s in self._states], "memory accounting"
        assert min(shared_used, default=0) >= 0, "negative shared accounting"
