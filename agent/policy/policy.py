"""The placement policy: a small facade over the ledger, the chooser and the pod's life.

`Policy` is what the node agent, simulate, check and the benchmarks call. The
pieces, one job each (in the spirit of kubelet's CPU manager, state / policy /
assignment apart): the ledger (ledger.py) keeps every container's record and the
indexes derived from it; the chooser (chooser.py) ranks the places for a request
without changing anything; refusals.py words a refusal; restore.py checks a saved
place and infers an adopted one; lifetime.py holds a pod's life (a re-create
taking its place back, init containers, the domains its rules chose);
decision.py is the answer. Every mutation returns the cpuset updates other
containers need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from agent.labels.numa import numa_node_labels
from agent.policy import lifetime, refusals
from agent.policy.chooser import Chooser
from agent.policy.closeness import closeness_table
from agent.policy.config import ConfigError, PolicyConfig, check_numa_labels
from agent.policy.decision import Decision, decision
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
from agent.policy.restore import adopted, restorable
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
            need = classify(request, self.config)
            taken = lifetime.take_place(ledger, request, need, held)
            record, text = taken if taken is not None else self._again(request, held, hold=True)
            answer = decision(record, ledger.flush(request.key), text)
            return replace(answer, replaced=held)
        confine = lifetime.confine(ledger, request.container.pod.uid)
        for key in lifetime.completed_inits(ledger, request):
            ledger.remove(key)
        record, text = self._place(request, None, confine)
        return decision(record, ledger.flush(request.key), text)

    def place_in(self, request: ContainerRequest, pool: str) -> Decision:
        """Place into the named pool regardless of score (what-if tools, tests)."""
        index = self.tree.by_name(pool).index
        if request.key in self._ledger.records:
            raise PlacementError(f"{request.key} is already placed; release it first")
        self._ledger.begin()
        record, text = self._place(request, index)
        return decision(record, self._ledger.flush(request.key), text)

    def resize(self, request: ContainerRequest) -> Decision:
        """The container's request changed: place it again inside its pod's domains,
        the pod rules not checked again (it keeps its place on failure)."""
        ledger = self._ledger
        old = ledger.records.get(request.key)
        if old is None:
            return self.place(request)
        ledger.begin()
        record, text = self._again(request, request.key, hold=False)
        return decision(record, ledger.flush(request.key), text)

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
        return decision(ledger.install(record), ledger.flush(request.key))

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
        record = adopted(ledger, request, classify(request, self.config), cpus, mems)
        return decision(ledger.install(record), ledger.flush(request.key))

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
        return None if record is None else decision(record, ())

    def assignments(self) -> Mapping[str, Decision]:
        return {key: decision(record, ()) for key, record in self._ledger.records.items()}

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

    def _again(
        self, request: ContainerRequest, old_key: str, hold: bool
    ) -> tuple[PlacementRecord, str]:
        """Place `request` again in place of `old_key` (a resize, or a re-create asking
        for other resources): inside its pod's domains, the pod rules not checked
        again. On failure `old_key` keeps its place (and, with `hold`, stays held)."""
        ledger = self._ledger
        old = ledger.records[old_key]
        confine = lifetime.confine(ledger, old.request.container.pod.uid)
        ledger.remove(old_key)
        try:
            return self._place(request, None, ledger.online if confine is None else confine)
        except PlacementError:
            ledger.install(old)
            if hold:
                ledger.hold(old_key)
            ledger.begin()
            raise

    def _release_all(self, which: Callable[[PlacementRecord], bool]) -> tuple[CpusetUpdate, ...]:
        ledger = self._ledger
        keys = [k for k, r in ledger.records.items() if which(r)]
        ledger.begin()
        for key in keys:
            ledger.remove(key)
        return ledger.flush(None)
