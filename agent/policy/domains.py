"""The machine's parts at each rule level, as CPU masks: the topology of the rules.

A rule's `topologyKey` names a level (core, L3 group, NUMA node, die, socket, the
whole machine); the domains of a level are its parts (parts.py), which partition
the machine's online CPUs. A set of domains is kept as the union of their masks,
so "which domains does this container occupy" and "does this place touch them"
are a few big-int operations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.policy.parts import Part, Parts, machine_parts
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


def _domains(level: Level, parts: tuple[Part, ...], size: int) -> Domains:
    of_cpu = [-1] * size
    for index, part in enumerate(parts):
        bits = part.cpus.mask
        while bits:
            low = bits & -bits
            of_cpu[low.bit_length() - 1] = index
            bits ^= low
    masks = tuple(p.cpus.mask for p in parts)
    return Domains(level, masks, tuple(p.name for p in parts), tuple(of_cpu))


def topology(parts: Parts) -> Topology:
    """Each level's parts as its domains, named as the parts (and the pools) are."""
    size = parts.root.cpus.mask.bit_length()
    return Topology({level: _domains(level, parts.at(level), size) for level in Level})


def machine_topology(machine: Machine) -> Topology:
    return topology(machine_parts(machine))
