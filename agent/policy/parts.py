"""The machine's parts at every level, walked once: the one view of the tree.

A part is a core, an L3 group, a NUMA node, a die, a socket or the whole machine,
named once ("core3", "l3-0.8", "numa0", "die0.1", "socket0", "machine") and
placed at its `Level`. The pool tree (pools.py: the parts where the tree
branches) and the rules' domains (domains.py: each level's parts as CPU masks)
are both read from these parts, so a pool and the domain of the same name are
the same CPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.rules import Level
from topology.cpuset import CPUSet
from topology.tree import Core, Die, L3Group, Machine, NumaNode, Socket

# The levels from the whole machine down to a core: the tree's nesting.
DOWNWARD: tuple[Level, ...] = (
    Level.HOST,
    Level.SOCKET,
    Level.DIE,
    Level.NUMA,
    Level.L3,
    Level.CORE,
)

Element = Machine | Socket | Die | NumaNode | L3Group | Core


@dataclass(frozen=True, slots=True)
class Part:
    """One part of the machine. `element` is the tree's own value, for what its
    level adds (a NUMA node's memory, an L3 group's cores)."""

    index: int  # in `Parts.parts`: depth-first, a parent before its children
    level: Level
    name: str
    cpus: CPUSet  # its online CPUs
    parent: int | None  # the part one level up; None for the machine
    children: tuple[int, ...]  # the parts one level down, in machine order
    element: Element


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of one machine, depth-first from the machine (index 0)."""

    parts: tuple[Part, ...]

    @property
    def root(self) -> Part:
        return self.parts[0]

    def at(self, level: Level) -> tuple[Part, ...]:
        """The parts of one level, in machine order; they partition the online CPUs."""
        return tuple(p for p in self.parts if p.level is level)

    def below(self, part: Part, level: Level) -> Iterator[Part]:
        """The parts of `level` inside `part` (itself, if it is of that level)."""
        if part.level is level:
            yield part
            return
        for child in part.children:
            yield from self.below(self.parts[child], level)


def part_name(level: Level, ident: int, outer: int = -1) -> str:
    """A part's name from its level and id. The ids of dies and L3 groups repeat
    across sockets and NUMA nodes, so theirs carry `outer`: the id of the socket
    (a die) or NUMA node (an L3 group) they lie in."""
    if level is Level.HOST:
        return "machine"
    if level is Level.SOCKET:
        return f"socket{ident}"
    if level is Level.DIE:
        return f"die{outer}.{ident}"
    if level is Level.NUMA:
        return f"numa{ident}"
    if level is Level.L3:
        return f"l3-{outer}.{ident}"
    return f"core{ident}"


def _inside(element: Element) -> tuple[Element, ...]:
    if isinstance(element, Machine):
        return element.sockets
    if isinstance(element, Socket):
        return element.dies
    if isinstance(element, Die):
        return element.numa_nodes
    if isinstance(element, NumaNode):
        return element.l3_groups
    if isinstance(element, L3Group):
        return element.cores
    return ()


def machine_parts(machine: Machine) -> Parts:
    """Walk the machine once, down to its cores, naming every part."""
    found: list[tuple[Level, str, CPUSet, int | None, Element]] = []
    children: list[list[int]] = []

    def add(element: Element, depth: int, parent: int | None, socket: int, node: int) -> None:
        if isinstance(element, Socket):
            socket = element.id
        elif isinstance(element, NumaNode):
            node = element.id
        level = DOWNWARD[depth]
        if isinstance(element, Machine):
            name, cpus = part_name(level, 0), machine.cpus
        else:
            outer = socket if level is Level.DIE else node
            name, cpus = part_name(level, element.id, outer), element.cpus
        index = len(found)
        found.append((level, name, cpus, parent, element))
        children.append([])
        if parent is not None:
            children[parent].append(index)
        for inner in _inside(element):
            add(inner, depth + 1, index, socket, node)

    add(machine, 0, None, -1, -1)
    return Parts(
        tuple(
            Part(i, level, name, cpus, parent, tuple(children[i]), element)
            for i, (level, name, cpus, parent, element) in enumerate(found)
        )
    )
