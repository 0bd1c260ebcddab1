"""The pool tree built from a Machine: machine -> sockets -> dies -> NUMA nodes -> L3 groups.

Dies appear only when a socket has several, L3 groups only when a NUMA node has
several, and any level with a single child collapses into its parent (the
parent's name is kept). Pools are numbered in depth-first order; 0 is "machine".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from topology.cpuset import CPUSet
from topology.tree import Die, L3Group, Machine, NumaNode, Socket

_Level = Machine | Socket | Die | NumaNode | L3Group


@dataclass(frozen=True, slots=True)
class Pool:
    index: int
    name: str  # "machine", "socket0", "die0.1", "numa1", "l3-1.8"
    kind: str  # the level the pool was created at: machine/socket/die/numa/l3
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


def _children(level: _Level) -> Sequence[_Level]:
    if isinstance(level, Machine):
        return level.sockets
    if isinstance(level, Socket):
        if len(level.dies) > 1:
            return level.dies
        return level.dies[0].numa_nodes if level.dies else ()
    if isinstance(level, Die):
        return level.numa_nodes
    if isinstance(level, NumaNode):
        return level.l3_groups if len(level.l3_groups) > 1 else ()
    return ()


def _name(level: _Level, socket: int, node: int) -> tuple[str, str]:
    if isinstance(level, Machine):
        return "machine", "machine"
    if isinstance(level, Socket):
        return f"socket{level.id}", "socket"
    if isinstance(level, Die):
        return f"die{socket}.{level.id}", "die"
    if isinstance(level, NumaNode):
        return f"numa{level.id}", "numa"
    return f"l3-{node}.{level.id}", "l3"


def _layout(
    level: _Level, machine: Machine, node: int
) -> tuple[tuple[int, tuple[L3Group, ...]], ...]:
    if isinstance(level, L3Group):
        return ((node, (level,)),)
    if isinstance(level, NumaNode):
        return ((level.id, level.l3_groups),)
    if isinstance(level, Machine):
        nodes: Sequence[NumaNode] = tuple(machine.iter_numa_nodes())
    else:
        nodes = level.numa_nodes
    return tuple((n.id, n.l3_groups) for n in nodes)


def build_pools(machine: Machine) -> PoolTree:
    pools: list[Pool] = []
    children: list[list[int]] = []
    memory = {n.id: n.memory_bytes for n in machine.iter_numa_nodes()}
    memory.update({m.id: m.memory_bytes for m in machine.memory_only_nodes})

    def add(level: _Level, parent: int | None, socket: int, node: int) -> None:
        name, kind = _name(level, socket, node)
        layout = _layout(level, machine, node)
        node_ids = tuple(n for n, _ in layout)
        mem_ids = sorted({m for n in node_ids for m in machine.memory_nodes_for(n)})
        ancestors: tuple[int, ...] = ()
        if parent is not None:
            ancestors = (parent, *pools[parent].ancestors)
        cpus = machine.cpus if isinstance(level, Machine) else level.cpus
        index = len(pools)
        pools.append(
            Pool(
                index=index,
                name=name,
                kind=kind,
                depth=len(ancestors),
                parent=parent,
                ancestors=ancestors,
                cpus=cpus,
                numa_nodes=node_ids,
                mems=CPUSet.of(mem_ids),
                memory_bytes=sum(memory.get(m, 0) for m in mem_ids),
                layout=layout,
            )
        )
        children.append([])
        if parent is not None:
            children[parent].append(index)
        # A single child is the same set of CPUs: fold it (and its own single
        # children) into this pool and continue with the first real branching.
        subs = _children(level)
        while len(subs) == 1:
            only = subs[0]
            socket, node = _ids(only, socket, node)
            subs = _children(only)
        for sub in subs:
            sub_socket, sub_node = _ids(sub, socket, node)
            add(sub, index, sub_socket, sub_node)

    add(machine, None, -1, -1)
    return PoolTree(tuple(pools), tuple(tuple(c) for c in children))


def _ids(level: _Level, socket: int, node: int) -> tuple[int, int]:
    """Carry the enclosing socket / NUMA node ids down for naming dies and L3 groups."""
    if isinstance(level, Socket):
        return level.id, node
    if isinstance(level, NumaNode):
        return socket, level.id
    return socket, node
