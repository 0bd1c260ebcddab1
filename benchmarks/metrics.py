"""Placement quality metrics, as pure functions over a machine and a set of cpusets.

These are the numbers the README quotes: hard faults, NUMA alignment, whole cores
and the affinity objective (sum of A(C1, C2) x closeness over placed pairs, with
the policy's own node closeness).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agent.policy.closeness import node_closeness
from topology.cpuset import CPUSet
from topology.tree import Machine


@dataclass(frozen=True, slots=True)
class Placed:
    """One live container as a placer left it."""

    key: str
    cpus: CPUSet
    exclusive: bool
    reserved: bool = False  # a reserved-namespace container (kube-system)


def hard_faults(machine: Machine, reserved: CPUSet, placed: Sequence[Placed]) -> list[str]:
    """Every rule broken, one line each; a correct placement gives []."""
    faults: list[str] = []
    owner: dict[int, str] = {}
    exclusive = 0
    for p in placed:
        if not p.exclusive:
            continue
        for cpu in p.cpus:
            if cpu in owner:
                faults.append(f"CPU {cpu} exclusive to both {owner[cpu]} and {p.key}")
            owner[cpu] = p.key
        exclusive |= p.cpus.mask
    online = machine.cpus.mask
    isolated = machine.isolated.mask
    for p in placed:
        mask = p.cpus.mask
        if mask & ~online:
            faults.append(f"{p.key} has offline CPUs {CPUSet(mask & ~online)}")
        if p.exclusive:
            if not p.reserved and mask & reserved.mask:
                faults.append(f"{p.key} holds reserved CPUs {CPUSet(mask & reserved.mask)}")
            continue
        if mask & exclusive:
            faults.append(f"{p.key} shares exclusive CPUs {CPUSet(mask & exclusive)}")
        if not p.reserved and mask & reserved.mask:
            faults.append(f"{p.key} runs on reserved CPUs {CPUSet(mask & reserved.mask)}")
        if mask & isolated:
            faults.append(f"{p.key} runs shared work on isolated CPUs {CPUSet(mask & isolated)}")
    return faults


def node_of_cpu(machine: Machine) -> dict[int, int]:
    return {cpu: node.id for node in machine.iter_numa_nodes() for cpu in node.cpus}


def nodes_of(machine: Machine, cpus: CPUSet) -> frozenset[int]:
    """The NUMA nodes `cpus` touch."""
    return frozenset(n.id for n in machine.iter_numa_nodes() if n.cpus.mask & cpus.mask)


def fewest_nodes(machine: Machine, reserved: CPUSet, count: int) -> int:
    """The fewest NUMA nodes whose usable CPUs (not reserved, not isolated) could hold
    `count` CPUs on the empty machine; 0 for count 0."""
    unusable = reserved.mask | machine.isolated.mask
    sizes = sorted(
        ((n.cpus.mask & ~unusable).bit_count() for n in machine.iter_numa_nodes()), reverse=True
    )
    if count <= 0:
        return 0
    total = 0
    for used, size in enumerate(sizes, start=1):
        total += size
        if total >= count:
            return used
    return len(sizes)


def numa_aligned(machine: Machine, reserved: CPUSet, cpus: CPUSet) -> bool:
    """Whether an exclusive container's CPUs span no more NUMA nodes than needed."""
    return len(nodes_of(machine, cpus)) <= fewest_nodes(machine, reserved, len(cpus))


def whole_cores(machine: Machine, cpus: CPUSet) -> bool:
    """Whether every core `cpus` touch is entirely in `cpus` (no sibling left to others)."""
    return all(
        core.cpus.mask & ~cpus.mask == 0
        for core in machine.iter_cores()
        if core.cpus.mask & cpus.mask
    )


Closeness = Callable[[frozenset[int], frozenset[int]], float]


def set_closeness(machine: Machine) -> Closeness:
    """Closeness of two node sets: the policy's node closeness averaged over node pairs
    (as the policy's pool table does); memoized."""
    memo: dict[tuple[frozenset[int], frozenset[int]], float] = {}
    pair: dict[tuple[int, int], float] = {}

    def close(a: frozenset[int], b: frozenset[int]) -> float:
        found = memo.get((a, b))
        if found is not None:
            return found
        if not a or not b:
            return 0.0
        total = 0.0
        for x, y in itertools.product(sorted(a), sorted(b)):
            if (x, y) not in pair:
                pair[x, y] = node_closeness(machine, x, y)
            total += pair[x, y]
        memo[a, b] = total / (len(a) * len(b))
        return memo[a, b]

    return close


def affinity_objective(
    weights: Mapping[tuple[str, str], int],
    where: Mapping[str, frozenset[int]],
    close: Closeness,
) -> float:
    """Sum over ordered pairs (c, d) both placed of A(c, d) x closeness(c, d)."""
    total = 0.0
    for (c, d), weight in weights.items():
        if weight and c in where and d in where:
            total += weight * close(where[c], where[d])
    return total


def attainment(value: float, best: float, worst: float) -> float:
    """Where `value` sits between the worst (0.0) and the best (1.0) objective any
    feasible placement reaches; 1.0 when all placements score the same."""
    if best - worst <= 1e-12:
        return 1.0
    return (value - worst) / (best - worst)
