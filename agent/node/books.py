"""The node agent's books: what it knows, changed only under its decision lock.

The policy holds the one record of each placement. Beside it the books keep only
CRI facts placement does not own: the pods (by sandbox id) and, for every
container the runtime created, the resources last sent to it. What the runtime
is owed follows from the two: a container's sent resources with the policy's
cpusets (`want`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent.node.updates import Updater
from agent.policy.config import PolicyConfig
from agent.policy.policy import CpusetUpdate, Policy
from agent.policy.record import PlacementRecord
from agent.state.schema import StateEncoder
from agent.workload import PodInfo
from proto import cri_pb2
from topology.cpuset import CPUSet
from topology.tree import Machine


def write_cpusets(linux: cri_pb2.LinuxContainerResources, cpus: CPUSet, mems: CPUSet) -> None:
    """Put the policy's cpusets into `linux`; empty means the policy does not pin
    (pin_cpus / pin_memory off) and kubelet's value stays."""
    if cpus:
        linux.cpuset_cpus = str(cpus)
    if mems:
        linux.cpuset_mems = str(mems)


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A CreateContainer whose answer never came (the caller's deadline passed, the
    connection broke): the runtime may still create the container, with the cpusets
    in `linux`, so its placement stays reserved under its temporary key until the
    container is seen (then it is tracked) or the runtime is seen without it."""

    since: float  # time.monotonic() when the answer was given up on
    linux: cri_pb2.LinuxContainerResources  # as sent in the create


class Books:
    def __init__(self, machine: Machine, config: PolicyConfig, updater: Updater) -> None:
        self.machine = machine
        self.config = config
        self.updater = updater
        self.policy = Policy(machine, config)
        self.pods: dict[str, PodInfo] = {}  # by sandbox id
        # Per created container (by id): the full resources last sent to the runtime.
        # Never mutated in place, only replaced (the state encoder caches by identity).
        self.sent: dict[str, cri_pb2.LinuxContainerResources] = {}
        self.unresolved: dict[str, Unresolved] = {}  # by temporary key
        # Containers seen running (started through the agent, or listed running): a
        # stop frees their CPUs; one never seen running may still start (containers.py).
        self.started: set[str] = set()
        self._encoder = StateEncoder()

    def reset(self) -> None:
        """Forget everything (a start rebuilds the books from the state file and the runtime)."""
        self.policy = Policy(self.machine, self.config)
        self.pods.clear()
        self.unresolved.clear()
        self.started.clear()
        for cid in self.sent:
            self.updater.forget(cid)
        self.sent.clear()

    def created(self, cid: str, linux: cri_pb2.LinuxContainerResources) -> None:
        """The runtime has container `cid` with `linux` (as created, restored or adopted)."""
        copy = cri_pb2.LinuxContainerResources()
        copy.CopyFrom(linux)
        self.sent[cid] = copy

    def adopt_created(self, key: str, cid: str, linux: cri_pb2.LinuxContainerResources) -> None:
        """The runtime created `cid` for the placement under temporary `key` with
        `linux`: from now on it is tracked by its id."""
        self.unresolved.pop(key, None)
        self.policy.rekey(key, cid, container_id=cid)
        self.created(cid, linux)
        self.updater.set_applied(cid, linux.cpuset_cpus, linux.cpuset_mems)
        self.want(cid)  # moved while in flight (an update addressed to its temporary key)

    def record(self, cid: str) -> PlacementRecord | None:
        return self.policy.record(cid)

    def apply(self, updates: Iterable[CpusetUpdate]) -> None:
        """Other containers' new cpusets are owed to the runtime; containers not created
        yet (creates in flight) are caught up once they are."""
        for update in updates:
            if update.key in self.sent:
                self.want(update.key)

    def want(self, cid: str) -> None:
        """The runtime is owed the container's sent resources with the policy's cpusets."""
        record = self.policy.record(cid)
        if record is None or self.policy.held(cid):
            return  # gone, or exited (nothing runs to take a cpuset)
        full = cri_pb2.LinuxContainerResources()
        full.CopyFrom(self.sent[cid])
        write_cpusets(full, record.cpus, record.mems)
        self.updater.want(cid, full)

    def release(self, keys: Iterable[str]) -> None:
        updates: list[CpusetUpdate] = []
        for key in keys:
            self.unresolved.pop(key, None)
            updates.extend(self.policy.release(key))
            self.started.discard(key)
            if self.sent.pop(key, None) is not None:
                self.updater.forget(key)
        self.apply(updates)

    def exited(self, keys: Iterable[str]) -> None:
        """Containers exited, stopped or removed: the policy keeps their places (and
        the state file their records) until their sandbox stops; nothing more is
        owed to them. One the policy no longer knows (re-created) is forgotten."""
        for key in keys:
            if self.policy.record(key) is None:
                self.release([key])
                continue
            self.apply(self.policy.exited(key))
            self.updater.forget(key)

    def removed(self, keys: Iterable[str]) -> None:
        """Containers removed from the runtime: the policy keeps their places until
        their sandbox stops (a re-create takes them back); the runtime has nothing
        more to hear about them, and a restart would not find them."""
        for key in keys:
            self.apply(self.policy.exited(key))
            self.unresolved.pop(key, None)
            if self.sent.pop(key, None) is not None:
                self.updater.forget(key)

    def payload(self) -> dict[str, Any]:
        """What the state file keeps (see agent.state.schema)."""
        return self._encoder.payload(self.pods, self.policy.records(), self.sent)
