"""What the policy answers for a container: its place and cpusets as the runtime
gets them, with the cpuset changes the call made for other containers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.policy.ledger import CpusetUpdate
from agent.policy.record import PlacementRecord
from topology.cpuset import CPUSet


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


def decision(record: PlacementRecord, updates: Iterable[CpusetUpdate], shown: str = "") -> Decision:
    """The answer for `record`; `shown` is the whole explanation when the call made
    the decision (the record keeps only its summary)."""
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
