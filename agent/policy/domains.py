"""The machine's parts at each rule level, as CPU masks: the topology of the rules.

A rule's `topologyKey` names a level (core, L3 group, NUMA node, die, socket, the
whole machine); the domains of a level partition the machine's online CPUs. A set
of domains is kept as the union of their masks, so "which domains does this
container occupy" and "does this place touch them" are a few big-int operations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.rules import Level
from topology.tree import Machine


@dataclass(frozen=True, slots=True)
class Domains:
    """The domains of one level: their CPU masks and names, in machine order."""

    level: Level
    masks: tuple[int, ...]
    names: tuple[str, ...]
    _of_cpu: tuple[int, ...]  # CPU id -> domain index (-1: not an online CPU)

    def indices(self, mask: int) -> Iterator[int]:
        """The domains `mask` touches, each once, in order of their lowest CPU."""
        of_cpu = self._of_cpu
        while mask:
            low = mask & -mask
            cpu = low.bit_length() - 1
            index = of_cpu[cpu] if cpu < len(of_cpu) else -1
            if index >= 0:
                yield index
                mask &= ~self.masks[index]  # the rest of this domain: done
            else:
                mask ^= low

    def expand(self, mask: int) -> int:
        """All of every domain `mask` touches."""
        out = 0
        for index in self.indices(mask):
            out |= self.masks[index]
        return out

    def single(self, mask: int) -> int | None:
        """The one domain holding all of `mask`, or None if it spans several (or none)."""
        found = None
        for index in self.indices(mask):
            if found is not None:
                return None
            found = index
        return found

    def describe(self, mask: int) -> str:
        """`socket0, socket1`: the domains `mask` touches, by name."""
        return ", ".join(self.names[i] for i in self.indices(mask)) or "none"


@dataclass(frozen=True, slots=True)
class Topology:
    """Every level's domains for one machine; built once, read by every decision."""

    levels: dict[Level, Domains]

    def __getitem__(self, level: Level) -> Domains:
        return self.levels[level]


def _domains(level: Level, parts: list[tuple[str, int]], size: int) -> Domains:
    of_cpu = [-1] * size
    for index, (_, mask) in enumerate(parts):
        bits = mask
        while bits:
            low = bits & -bits
            of_cpu[low.bit_length() - 1] = index
            bits ^= low
    return Domains(level, tuple(m for _, m in parts), tuple(n for n, _ in parts), tuple(of_cpu))


def machine_topology(machine: Machine) -> Topology:
    size = machine.cpus.mask.bit_length()
    cores: list[tuple[str, int]] = []
    l3s: list[tuple[str, int]] = []
    nodes: list[tuple[str, int]] = []
    dies: list[tuple[str, int]] = []
    sockets: list[tuple[str, int]] = []
    for socket in machine.sockets:
        sockets.append((f"socket{socket.id}", socket.cpus.mask))
        for die in socket.dies:
            dies.append((f"die{socket.id}.{die.id}", die.cpus.mask))
            for node in die.numa_nodes:
                nodes.append((f"numa{node.id}", node.cpus.mask))
                for group in node.l3_groups:
                    l3s.append((f"l3-{node.id}.{group.id}", group.cpus.mask))
                    for core in group.cores:
                        cores.append((f"core{core.id}", core.cpus.mask))
    parts = {
        Level.CORE: cores,
        Level.L3: l3s,
        Level.NUMA: nodes,
        Level.DIE: dies,
        Level.SOCKET: sockets,
        Level.HOST: [("machine", machine.cpus.mask)],
    }
    return Topology({level: _domains(level, p, size) for level, p in parts.items()})
