"""The placement policy: a small facade over the ledger, the chooser and the pod's life.

`Policy` is what the node agent, simulate, check and the benchmarks call. The
pieces, one job each (in the spirit of kubelet's CPU manager, state / policy /
assignment apart): the ledger (ledger.py) keeps every container's record and the
indexes derived from it; the chooser (chooser.py) ranks the places for a request
without changing anything; refusals.py words a refusal; restore.py checks a saved
or running place; lifetime.py holds a pod's life (re-creates, init containers,
the domains its rules chose). Every mutation returns the cpuset updates other
containers need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from agent.labels.numa import numa_node_labels
from agent.policy import lifetime, refusals
from agent.policy.chooser import Chooser
from agent.policy.closeness import closeness_table
from agent.policy.config import ConfigError, PolicyConfig, check_numa_labels
from agent.policy.errors import (
    InvalidRequest,
    PlacementError,
    ResourceExhausted,
    RuleUnsatisfied,
    UnknownContainer,
)
from agent.policy.explain import explain, summary
from agent.policy.ledger import CpusetUpdate, Ledger, PoolCapacity, new_record
from agent.policy.pools import PoolTree, build_pools
from agent.policy.record import PlacementRecord, SavedPlacement
from agent.policy.request import ContainerRequest, CpuKind, classify
from agent.policy.restore import adopt_shared_pool, can_hold_exclusive, restorable
from topology.cpuset import CPUSet
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
    replaced: str = ""  # a re-create: the exited container whose place it took (now gone)


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
        self._ledger = Ledger(machine, config, self.tree)
        labels = numa_node_labels(machine, config.numa_labels)  # for node affinity
        numa = {n.id: (n.cpus.mask, labels[n.id]) for n in machine.iter_numa_nodes()}
        self._chooser = Chooser(self._ledger, closeness_table(machine, self.tree), numa)

    # -- placing --------------------------------------------------------------

    def place(self, request: ContainerRequest) -> Decision:
        """Choose a pool and cpusets for a new container; raises ResourceExhausted.

        A container kubelet re-creates (same sandbox, same name as an exited one)
        takes the exited one's place back, its rules not checked again. A later
        container of a placed pod stays inside the domains the pod's required
        rules chose for its first one (docs/pod-rules.md)."""
        ledger = self._ledger
        if request.key in ledger.records:
            return self.resize(request)
        ledger.begin()
        held = lifetime.held_for(ledger, request)
        if held is not None:
            record, text = self._recreate(request, held)
            decision = self._decision(record, ledger.flush(request.key), text)
            return replace(decision, replaced=held)
        confine = lifetime.confine(ledger, request.container.pod.uid)
        for key in lifetime.completed_inits(ledger, request):
            ledger.remove(key)
        record, text = self._place(request, None, confine)
        return self._decision(record, ledger.flush(request.key), text)

    def place_in(self, request: ContainerRequest, pool: str) -> Decision:
        """Place into the named pool regardless of score (what-if tools, tests)."""
        index = self.tree.by_name(pool).index
        if request.key in self._ledger.records:
            raise PlacementError(f"{request.key} is already placed; release it first")
        self._ledger.begin()
        record, text = self._place(request, index)
        return self._decision(record, self._ledger.flush(request.key), text)

    def resize(self, request: ContainerRequest) -> Decision:
        """The container's request changed: place it again inside its pod's domains,
        the pod rules not checked again (it keeps its place on failure)."""
        ledger = self._ledger
        old = ledger.records.get(request.key)
        if old is None:
            return self.place(request)
        ledger.begin()
        confine = lifetime.confine(ledger, old.request.container.pod.uid)
        ledger.remove(request.key)
        try:
            record, text = self._place(request, None, ledger.online if confine is None else confine)
        except PlacementError:
            ledger.install(old)
            ledger.begin()
            raise
        return self._decision(record, ledger.flush(request.key), text)

    def restore(self, request: ContainerRequest, saved: SavedPlacement) -> Decision | None:
        """Take back a container the state file knows, exactly where it was.

        The saved pool, exclusive CPUs, score and explanation are kept whenever
        they are still valid on this machine and configuration (the pool exists
        and has shared CPUs; exclusive CPUs are online, free, unreserved and as
        many as asked; the kind of CPUs the request needs is unchanged). Returns
        None, changing nothing, when they are not: the caller places it again.
        Capacity is not re-checked: the container runs, and was admitted.
        """
        ledger = self._ledger
        ledger.begin()
        if request.key in ledger.records:
            ledger.remove(request.key)
        record = restorable(ledger, request, classify(request, self.config), saved)
        if record is None:
            ledger.begin()
            return None
        return self._decision(ledger.install(record), ledger.flush(request.key))

    def adopt(self, request: ContainerRequest, cpus: CPUSet, mems: CPUSet) -> Decision:
        """Take in a running container no record names, inferring its place from its cpusets.

        Exclusive containers keep their CPUs when those are free and the count
        matches; everything else lands in the smallest pool containing `cpus`.
        The returned cpusets are the policy's, which may differ from the given ones.
        """
        ledger = self._ledger
        ledger.begin()
        if request.key in ledger.records:
            ledger.remove(request.key)
        need = classify(request, self.config)
        note = (
            f"{request.key}: {need.why}, adopted running on cpus {cpus or '-'} mems {mems or '-'}"
        )
        if need.kind is CpuKind.RESERVED:
            record = new_record(request, need, None, 0, 0.0, note)
        elif need.kind is CpuKind.EXCLUSIVE and can_hold_exclusive(ledger, need, cpus.mask):
            home = ledger.pools[self._chooser.home(0, cpus.mask)]
            record = new_record(request, need, home, cpus.mask, 0.0, note)
        else:
            shared = replace(
                need, kind=CpuKind.SHARED, milli_cpu=need.milli_cpu or (need.exclusive_cpus * 1000)
            )
            record = new_record(request, shared, adopt_shared_pool(ledger, cpus), 0, 0.0, note)
        return self._decision(ledger.install(record), ledger.flush(request.key))

    def rekey(self, old_key: str, new_key: str, container_id: str = "") -> None:
        """Rename a container (temporary key -> runtime container id); with
        `container_id`, the container is known by that runtime id from now on
        (so rules matching `id` select it)."""
        records = self._ledger.records
        record = records.get(old_key)
        if record is None:
            raise UnknownContainer(f"cannot rekey {old_key!r}: no such container is placed")
        if old_key != new_key and new_key in records:
            raise PlacementError(f"cannot rekey {old_key!r} to {new_key!r}: already placed")
        container = record.request.container
        if container_id and container.id != container_id:
            container = replace(container, id=container_id)
        request = replace(record.request, key=new_key, container=container)
        self._ledger.rekey(old_key, new_key, replace(record, request=request))

    # -- a container's and a pod's end ------------------------------------------

    def release(self, key: str) -> tuple[CpusetUpdate, ...]:
        """Return the container's CPUs and accounting; unknown keys are ignored."""
        if key not in self._ledger.records:
            return ()
        self._ledger.begin()
        self._ledger.remove(key)
        return self._ledger.flush(key)

    def exited(self, key: str) -> tuple[CpusetUpdate, ...]:
        """The container exited (or was stopped or removed) while its sandbox runs:
        its place (pool, exclusive CPUs, accounting) is kept for its re-creation,
        and its pod still occupies its domains. An init container's place is given
        back when the pod's next container is placed. Unknown keys are ignored."""
        if key in self._ledger.records and key not in self._ledger.held:
            self._ledger.hold(key)
        return ()

    def held(self, key: str) -> bool:
        """Whether `key` is an exited container whose place is kept."""
        return key in self._ledger.held

    def release_sandbox(self, sandbox_id: str) -> tuple[CpusetUpdate, ...]:
        """The sandbox stopped: its containers, exited ones too, give everything back."""
        return self._release_all(lambda r: r.request.container.pod.id == sandbox_id)

    def release_pod(self, pod_uid: str) -> tuple[CpusetUpdate, ...]:
        return self._release_all(lambda r: r.request.container.pod.uid == pod_uid)

    # -- reading --------------------------------------------------------------

    def record(self, key: str) -> PlacementRecord | None:
        return self._ledger.records.get(key)

    def records(self) -> Mapping[str, PlacementRecord]:
        """Every placed container's record (a read-only view; records are immutable)."""
        return self._ledger.records

    def current(self, key: str) -> Decision | None:
        record = self._ledger.records.get(key)
        return None if record is None else self._decision(record, ())

    def assignments(self) -> Mapping[str, Decision]:
        return {key: self._decision(record, ()) for key, record in self._ledger.records.items()}

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Every pool's use and free capacity, in pool-tree order; reads only."""
        return self._ledger.capacity()

    def check_invariants(self) -> None:
        """Raise AssertionError if any index disagrees with the records (tests)."""
        self._ledger.check_invariants()

    # -- inside ---------------------------------------------------------------

    def _place(
        self, request: ContainerRequest, forced: int | None, confine: int | None = None
    ) -> tuple[PlacementRecord, str]:
        """The new record (keeping the explanation's summary) and the whole explanation."""
        ledger = self._ledger
        need = classify(request, self.config)
        ledger.classes.check(need.cpu_class, request.container.who)
        if need.kind is CpuKind.RESERVED:
            where = str(self.config.reserved_cpus) or "the machine's shared CPUs"
            note = f"{request.key}: {need.why}, runs on {where}"
            return ledger.install(new_record(request, need, None, 0, 0.0, note)), note
        ranked, rejected, ruled_out = self._chooser.rank(request, need, confine, forced)
        if forced is not None:
            rejected = [r for r in rejected if r[0].index == forced]
            ruled_out = [r for r in ruled_out if r[0].index == forced]
        if not ranked:
            if ruled_out:
                raise RuleUnsatisfied(refusals.unsatisfied(need, ruled_out, rejected))
            free = self._chooser.exclusive_free(need)
            raise ResourceExhausted(refusals.exhausted(ledger, need, free, rejected))
        winner = ranked[0]
        text = explain(request.key, need, ranked, rejected, ruled_out)
        home = ledger.pools[winner.home]
        kept = summary(text)  # what the record (and the state file) keeps
        record = new_record(request, need, home, winner.pick, winner.score, kept)
        return ledger.install(record), text

    def _recreate(self, request: ContainerRequest, old_key: str) -> tuple[PlacementRecord, str]:
        """kubelet re-creates an exited container: it gets its place back (its
        exclusive CPUs too, as kubelet's CPU manager keeps them by pod and name),
        without its rules being checked again. Asking for other resources, it is
        placed as a resize would be: inside its pod's domains."""
        ledger = self._ledger
        old = ledger.records[old_key]
        need = classify(request, self.config)
        confine = lifetime.confine(ledger, request.container.pod.uid)
        ledger.remove(old_key)
        if need == old.need:
            where = old.pool_name + (f", cpus {old.exclusive}" if old.exclusive else "")
            note = (
                f"{request.key}: re-created in the place of {old_key} ({where}); the pod "
                "rules are not checked again"
            )
            record = new_record(request, need, old.pool, old.exclusive.mask, old.score, note)
            return ledger.install(record), note
        try:
            return self._place(request, None, ledger.online if confine is None else confine)
        except PlacementError:
            ledger.install(old)
            ledger.hold(old_key)
            raise

    def _release_all(self, which: Callable[[PlacementRecord], bool]) -> tuple[CpusetUpdate, ...]:
        ledger = self._ledger
        keys = [k for k, r in ledger.records.items() if which(r)]
        ledger.begin()
        for key in keys:
            ledger.remove(key)
        return ledger.flush(None)

    def _decision(
        self, record: PlacementRecord, updates: Iterable[CpusetUpdate], shown: str = ""
    ) -> Decision:
        return Decision(
            key=record.key,
            pool=record.pool_name,
            cpus=record.cpus,
            mems=record.mems,
            exclusive=record.is_exclusive,
            score=record.score,
            updates=tuple(updates),
            explanation=shown or record.explanation,
        )
