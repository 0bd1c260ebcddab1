"""What each pool holds: the per-pool state the policy keeps beside its records.

A shared container is accounted in its pool and every ancestor (a socket's
shared CPUs serve the containers of its NUMA nodes too), so each pool knows its
lineage. Which CPUs are shared right now is a machine-wide fact (the exclusive
CPUs taken), passed in as a mask rather than copied into every pool.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from agent.policy.pools import Pool, PoolTree


@dataclass(slots=True, eq=False)
class PoolState:
    """One pool's use: shared milliCPU and memory placed in it or below, and who."""

    pool: Pool
    lineage: tuple[PoolState, ...] = ()  # itself, its parent, ..., the machine
    shared_milli: int = 0
    memory_used: int = 0
    members: set[str] = field(default_factory=set)  # shared containers placed directly here
    pods: Counter[str] = field(default_factory=Counter)  # pod uid -> containers placed here
    namespaces: Counter[str] = field(default_factory=Counter)

    def usable(self, shared: int) -> int:
        """CPUs of the pool shared containers may run on, given the machine's shared mask."""
        return (self.pool.cpus.mask & shared).bit_count()

    def free_milli(self, shared: int) -> int:
        """The most one more shared container could request here: the tightest of the
        pool and its ancestors, since it is accounted in each."""
        return min(q.usable(shared) * 1000 - q.shared_milli for q in self.lineage)

    def short_of_milli(self, milli: int, shared: int) -> str | None:
        """Why `milli` more does not fit (naming the ancestor that is full), or None."""
        if self.usable(shared) == 0:
            return "no shared CPUs"
        for q in self.lineage:
            free = q.usable(shared) * 1000 - q.shared_milli
            if milli > free:
                where = "" if q is self else f" in {q.pool.name}"
                return f"{max(free, 0)}m shared CPU free{where}"
        return None

    def short_of_memory(self, need: int) -> str | None:
        """Why `need` bytes do not fit in the pool's NUMA nodes (or an ancestor's), or None."""
        for q in self.lineage:
            free = q.pool.memory_bytes - q.memory_used
            if need > free:
                where = "" if q is self else f" in {q.pool.name}"
                return f"{max(free, 0)} bytes of memory free{where}"
        return None

    def load(self, milli: int, shared: int) -> float:
        """Shared load after adding `milli`: the tie-break that spreads shared work."""
        return (self.shared_milli + milli) / (self.usable(shared) * 1000)


def pool_states(tree: PoolTree) -> tuple[PoolState, ...]:
    """A fresh, empty state for every pool of the tree, indexed like `tree.pools`."""
    states = [PoolState(pool) for pool in tree.pools]
    for state in states:
        state.lineage = (state, *(states[a] for a in state.pool.ancestors))
    return tuple(states)
