"""The policy's record of one placed container: the one record of each placement.

Everything else (the node agent's view, the state file, `status`) reads these.
A record is immutable; when a shared container's cpuset follows its pool, the
policy replaces the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.policy.pools import Pool
from agent.policy.request import ContainerRequest, CpuKind, Need
from topology.cpuset import CPUSet

RESERVED_POOL_NAME = "reserved"


@dataclass(frozen=True, slots=True)
class PlacementRecord:
    """Where a container is and what it was placed with.

    `pool` is None for containers of reserved namespaces: they run on the
    reserved CPUs, outside the pool tree. `exclusive` holds the CPUs it has to
    itself (empty for shared and reserved containers); `cpus` and `mems` are what
    its cpuset should be now (empty when pinning is off).
    """

    request: ContainerRequest
    need: Need
    pool: Pool | None
    exclusive: CPUSet
    cpus: CPUSet
    mems: CPUSet
    score: float
    explanation: str  # the summary of the decision (the whole of it went with the Decision)

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def pool_name(self) -> str:
        return RESERVED_POOL_NAME if self.pool is None else self.pool.name

    @property
    def is_exclusive(self) -> bool:
        return self.need.kind is CpuKind.EXCLUSIVE and bool(self.exclusive)

    def with_cpusets(self, cpus: CPUSet, mems: CPUSet) -> PlacementRecord:
        """The same record with new cpusets (a shared container following its pool).
        Built directly: dataclasses.replace costs several times more, and this runs
        for every shared container of a pool each time exclusive CPUs move."""
        return PlacementRecord(
            self.request,
            self.need,
            self.pool,
            self.exclusive,
            cpus,
            mems,
            self.score,
            self.explanation,
        )

    def saved(self) -> SavedPlacement:
        return SavedPlacement(self.pool_name, self.exclusive, self.score, self.explanation)


@dataclass(frozen=True, slots=True)
class SavedPlacement:
    """What the state file keeps of a record besides its request: enough to take the
    container back exactly where it was (`Policy.restore`)."""

    pool: str
    exclusive: CPUSet
    score: float
    explanation: str
