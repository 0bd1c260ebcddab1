"""The pool tree: the machine's parts (parts.py) where the tree branches.

A pool is the machine, a socket, a die, a NUMA node or an L3 group with a
sibling; a part that is its parent's only child is the same set of CPUs and
folds into it (the upper part's name and level are kept), and cores are never
pools. So dies appear only when a socket has several, L3 groups only when a
NUMA node has several. Pools are numbered in depth-first order; 0 is "machine".
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.policy.parts import Part, Parts, machine_parts
from agent.rules import Level
from topology.cpuset import CPUSet
from topology.tree import L3Group, Machine, NumaNode


@dataclass(frozen=True, slots=True)
class Pool:
    index: int
    name: str  # "machine", "socket0", "die0.1", "numa1", "l3-1.8": its part's name
    level: Level  # the level of the part that names the pool (the upper of folded ones)
    depth: int  # 0 for the machine
    parent: int | None
    ancestors: tuple[int, ...]  # parent first, up to the machine
    cpus: CPUSet  # all online CPUs under the pool
    numa_nodes: tuple[int, ...]  # CPU-bearing NUMA nodes under the pool
    mems: CPUSet  # NUMA node ids for cpuset_mems: numa_nodes + attached memory-only nodes
    memory_bytes: int  # capacity of `mems`
    layout: tuple[tuple[int, tuple[L3Group, ...]], ...]  # (node id, its L3 groups in the pool)


@dataclass(frozen=True, slots=True)
class PoolTree:
    pools: tuple[Pool, ...]
    children: tuple[tuple[int, ...], ...]
    parts: Parts  # every part of the machine, pools or not: `domains.topology(parts)`

    @property
    def root(self) -> Pool:
        return self.pools[0]

    def by_name(self, name: str) -> Pool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool named {name!r}; pools: {', '.join(p.name for p in self.pools)}")

    def smallest_containing(self, cpus: CPUSet) -> Pool:
        """The deepest pool whose CPUs include all of `cpus` (the machine for the empty set)."""
        best = self.pools[0]
        for pool in self.pools:
            if cpus.is_subset(pool.cpus) and pool.depth > best.depth:
                best = pool
        return best


def is_pool(parts: Parts, part: Part) -> bool:
    """The machine, and every part above a core that has a sibling."""
    if part.parent is None:
        return True
    return part.level is not Level.CORE and len(parts.parts[part.parent].children) > 1


def _node(part: Part) -> NumaNode:
    assert isinstance(part.element, NumaNode), part.name
    return part.element


def _layout(parts: Parts, part: Part) -> tuple[tuple[int, tuple[L3Group, ...]], ...]:
    if isinstance(part.element, L3Group):
        assert part.parent is not None
        return ((_node(parts.parts[part.parent]).id, (part.element,)),)
    nodes = (_node(n) for n in parts.below(part, Level.NUMA))
    return tuple((n.id, n.l3_groups) for n in nodes)


def pool_tree(machine: Machine, parts: Parts) -> PoolTree:
    """The pools of `parts`, the parts `machine` has (for its memory-only nodes)."""
    pools: list[Pool] = []
    children: list[list[int]] = []
    memory = {n.id: n.memory_bytes for n in machine.iter_numa_nodes()}
    memory.update({m.id: m.memory_bytes for m in machine.memory_only_nodes})
    pool_of: dict[int, int] = {}  # part index -> the pool it is or folds into

    for part in parts.parts:
        parent = None if part.parent is None else pool_of[part.parent]
        if not is_pool(parts, part):
            assert parent is not None  # only the machine has no parent, and it is a pool
            pool_of[part.index] = parent  # folded: the same CPUs as its parent, or a core
            continue
        layout = _layout(parts, part)
        node_ids = tuple(n for n, _ in layout)
        mem_ids = sorted({m for n in node_ids for m in machine.memory_nodes_for(n)})
        ancestors: tuple[int, ...] = ()
        if parent is not None:
            ancestors = (parent, *pools[parent].ancestors)
        index = len(pools)
        pool_of[part.index] = index
        pools.append(
            Pool(
                index=index,
                name=part.name,
                level=part.level,
                depth=len(ancestors),
                parent=parent,
                ancestors=ancestors,
                cpus=part.cpus,
                numa_nodes=node_ids,
                mems=CPUSet.of(mem_ids),
                memory_bytes=sum(memory.get(m, 0) for m in mem_ids),
                layout=layout,
            )
        )
        children.append([])
        if parent is not None:
            children[parent].append(index)
    return PoolTree(tuple(pools), tuple(tuple(c) for c in children), parts)


def build_pools(machine: Machine) -> PoolTree:
    return pool_tree(machine, machine_parts(machine))
