"""Kinds of core and memory tiers a container asks for, and what they allow it.

Two pod annotations, each a value for every container of the pod or a mapping
from container name to value (`{app: performance, sidecar: efficiency}`):

- `numa-agent.io/cpu-class`: `performance`, `efficiency` or `any`. On a hybrid
  machine an exclusive container that does not say gets performance cores when
  they can hold it (a preference); one that says gets only that class (or is
  refused). A shared container that asks runs on the shared part of that
  class's cores. On a machine with one kind of core `performance` and `any`
  change nothing and `efficiency` is refused.
- `numa-agent.io/memory-tiers`: `dram+far` (default: the NUMA nodes of its CPUs
  and the memory-only nodes closest to them) or `dram` (only the nodes of its CPUs).

Parsed once at the edge (`parse_classes`); `CpuClasses` is the machine's side,
pure over masks, for the policy's CPU pick and cpusets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.policy.errors import InvalidRequest
from topology.tree import EFFICIENCY, PERFORMANCE, Machine

CPU_CLASS_ANNOTATION = "numa-agent.io/cpu-class"
MEMORY_TIERS_ANNOTATION = "numa-agent.io/memory-tiers"
ANY = "any"
CPU_CLASS_VALUES = (PERFORMANCE, EFFICIENCY, ANY)
DRAM = "dram"
DRAM_FAR = "dram+far"
MEMORY_TIERS_VALUES = (DRAM_FAR, DRAM)
# Longer values are refused before they are read: a mapping of every container of a
# pod by name fits in far less.
MAX_VALUE_BYTES = 16 * 1024
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ContainerClasses:
    """What one container asked for; None: the annotation does not name it."""

    cpu_class: str | None = None
    memory_tiers: str = DRAM_FAR


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _value_for(key: str, raw: str, container: str, allowed: tuple[str, ...]) -> str | None:
    """The value the annotation gives `container`, or None when a mapping leaves it out."""
    where = f"annotation {key} on container {container!r}"
    if len(raw.encode()) > MAX_VALUE_BYTES:
        raise InvalidRequest(f"{where}: longer than {MAX_VALUE_BYTES} bytes")
    text = raw.strip()
    if text.startswith("{"):
        if not text.endswith("}"):
            raise InvalidRequest(f"{where}: {raw!r} opens a mapping with '{{' but never closes it")
        items = [i for i in text[1:-1].split(",") if i.strip()]
    elif ":" in text:
        items = [line for line in text.splitlines() if line.strip()]
    else:
        value = _unquote(text)
        if value not in allowed:
            raise InvalidRequest(
                f"{where}: {raw!r} is not one of {', '.join(allowed)} "
                "(or a mapping of container name to one of them)"
            )
        return value
    mapping: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        name, value = _unquote(name), _unquote(value)
        if not sep or not _NAME.match(name):
            raise InvalidRequest(f"{where}: {item.strip()!r} is not 'container: value'")
        if value not in allowed:
            raise InvalidRequest(
                f"{where}: container {name!r}: {value!r} is not one of {', '.join(allowed)}"
            )
        if name in mapping:
            raise InvalidRequest(f"{where}: container {name!r} is named twice")
        mapping[name] = value
    return mapping.get(container)


def parse_classes(annotations: Mapping[str, str], container: str) -> ContainerClasses:
    """The container's cpu-class and memory-tiers; InvalidRequest names the annotation,
    the container and the offending part."""
    cpu_raw = annotations.get(CPU_CLASS_ANNOTATION)
    tiers_raw = annotations.get(MEMORY_TIERS_ANNOTATION)
    cpu_class = (
        None
        if cpu_raw is None
        else _value_for(CPU_CLASS_ANNOTATION, cpu_raw, container, CPU_CLASS_VALUES)
    )
    tiers = (
        None
        if tiers_raw is None
        else _value_for(MEMORY_TIERS_ANNOTATION, tiers_raw, container, MEMORY_TIERS_VALUES)
    )
    return ContainerClasses(cpu_class, tiers or DRAM_FAR)


def mapping_names(annotations: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Container names each annotation's mapping lists (for `check`'s warnings)."""
    out: dict[str, tuple[str, ...]] = {}
    for key in (CPU_CLASS_ANNOTATION, MEMORY_TIERS_ANNOTATION):
        raw = annotations.get(key, "").strip()
        if raw.startswith("{") and raw.endswith("}"):
            items = raw[1:-1].split(",")
        elif ":" in raw:
            items = raw.splitlines()
        else:
            continue
        out[key] = tuple(_unquote(i.partition(":")[0]) for i in items if i.strip())
    return out


# -- the machine's side ------------------------------------------------------------------

EVERYWHERE = -1  # a mask allowing every CPU


@dataclass(frozen=True, slots=True)
class CpuClasses:
    """The machine's kinds of core as masks; `hybrid` False: one kind, no masks."""

    hybrid: bool
    performance: int
    efficiency: int

    @classmethod
    def of(cls, machine: Machine) -> CpuClasses:
        return cls(
            machine.hybrid,
            machine.class_cpus(PERFORMANCE).mask,
            machine.class_cpus(EFFICIENCY).mask,
        )

    def check(self, cpu_class: str | None, who: str) -> None:
        """InvalidRequest when the machine has no cores of the class asked for."""
        if cpu_class == EFFICIENCY and not self.hybrid:
            raise InvalidRequest(
                f"annotation {CPU_CLASS_ANNOTATION} asks efficiency cores for {who}, but this "
                "machine has one kind of core (no efficiency cores)"
            )

    def required(self, cpu_class: str | None) -> int:
        """The CPUs a container must stay on (EVERYWHERE unless it asked a class here)."""
        if not self.hybrid or cpu_class is None or cpu_class == ANY:
            return EVERYWHERE
        return self.performance if cpu_class == PERFORMANCE else self.efficiency

    def preferred(self, cpu_class: str | None, exclusive: bool) -> int:
        """The CPUs it should get when they can hold it: its class, or for an exclusive
        container that did not say, the performance cores."""
        required = self.required(cpu_class)
        if required != EVERYWHERE or not self.hybrid:
            return required
        return self.performance if exclusive and cpu_class is None else EVERYWHERE

    def for_pick(self, cpu_class: str | None, count: int, free: int) -> int:
        """The CPUs an exclusive pick of `count` out of `free` may use: the class
        required, else the preferred one when it holds the request, else all."""
        required = self.required(cpu_class)
        if required != EVERYWHERE:
            return required
        preferred = self.preferred(cpu_class, True)
        if preferred != EVERYWHERE and (free & preferred).bit_count() >= count:
            return preferred
        return EVERYWHERE

    def missed(self, cpu_class: str | None, pick: int) -> int:
        """1 when an exclusive pick left the preferred class (ranks after picks that did not)."""
        preferred = self.preferred(cpu_class, True)
        return int(preferred != EVERYWHERE and bool(pick & ~preferred))


def word(cpu_class: str | None) -> str:
    """ " efficiency" / " performance" for messages about a class asked for, else ""."""
    return f" {cpu_class}" if cpu_class in (PERFORMANCE, EFFICIENCY) else ""


def shared_class_short(
    lineage: Iterable[tuple[int, int]],
    used: Mapping[int, int],
    milli: int,
    cpu_class: str,
) -> str | None:
    """Why `milli` more of shared `cpu_class` CPU does not fit: each (pool index,
    its shared CPUs of the class as a count) of the pool and its ancestors against
    the class's requests placed there or below (`used`, by pool index)."""
    for index, usable in lineage:
        if usable == 0:
            return f"no shared {cpu_class} CPUs"
        free = usable * 1000 - used.get(index, 0)
        if milli > free:
            return f"{max(free, 0)}m shared {cpu_class} CPU free"
    return None
