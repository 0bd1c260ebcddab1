"""A Term: the one shape of every rule about other containers.

Both annotation languages and the colocate options compile into terms:

- who it concerns: a `Selector`, over pods (Kubernetes' label selector and
  namespaces, agent.rules) or over containers (cri-resource-manager's
  expressions, agent.affinity);
- where it holds: a `Level` of the machine (the place lies within, or away from,
  the domains the selected containers occupy) or `CLOSENESS` (the place is pulled
  towards, or pushed from, each selected container by how close the hardware
  puts the two, a number in (0, 1]);
- how binding: required (a place that breaks it is refused) or preferred;
- its weight, in weight points: what a place earns when a preferred affinity
  holds there (times closeness for CLOSENESS terms) or loses when an anti-affinity
  does. docs/placement.md states the scale.

A term does not know which language wrote it, except for messages (`source`,
`path`). Placement evaluates terms in agent.policy.evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from agent.terms.level import Level
from agent.workload import ContainerInfo

AttributePair = tuple[str, str]

# The attributes the occupancy index keeps for every placed container (named as
# cri-resource-manager keys, agent.affinity.keys): a selector anchors on them.
POD_LABELS = "pod/labels/"
INDEXED_ATTRIBUTES = (
    "name",
    "namespace",
    "pod/uid",
    "pod/name",
    "labels/io.kubernetes.container.name",
)


def is_indexed(attribute: str) -> bool:
    """Whether the occupancy index keeps `attribute` (a selector anchoring on any
    other makes its term look at every placed container)."""
    return attribute in INDEXED_ATTRIBUTES or (
        attribute.startswith(POD_LABELS) and len(attribute) > len(POD_LABELS)
    )


class TermKind(StrEnum):
    AFFINITY = "affinity"  # pull towards the selected containers
    ANTI_AFFINITY = "anti-affinity"  # push away from them


class Closeness(StrEnum):
    """Where a term holds when it names no level: everywhere, by how close."""

    POOLS = "closeness"


CLOSENESS = Closeness.POOLS
Where = Level | Closeness


class Selector(Protocol):
    """Whom a term concerns, seen from the container (or pod) that holds it."""

    @property
    def pod_wide(self) -> bool:
        """Whether the term belongs to its whole pod (Kubernetes: one set of terms per
        pod, counted once) rather than to one container (cri-resource-manager)."""
        ...

    def selects(
        self, owner: ContainerInfo, other: ContainerInfo, labels: Mapping[str, str]
    ) -> bool:
        """Whether `other` (whose pod's selectable labels are `labels`) is one of the
        containers the term of `owner` concerns."""
        ...

    def anchors(self, owner: ContainerInfo) -> tuple[AttributePair, ...] | None:
        """(attribute, value) pairs of which every selected container has one, for
        the occupancy index (attributes are cri-resource-manager keys such as
        `pod/labels/app`); None when no such short list exists."""
        ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Term:
    """One rule about other containers (see the module docstring).

    `weight` is never negative: the kind says whether a place earns it or loses it.
    Required terms have weight 0 and a level. `source` is the annotation (or the
    configuration key) it was written in, `path` where inside it, for messages;
    `mirrored` marks a cri-resource-manager rule a container gets because another
    container's shorthand list names it.
    """

    kind: TermKind
    required: bool
    weight: int
    selector: Selector
    where: Where
    source: str
    path: str
    mirrored: bool = False
    # Derived once (placement reads them for every term of every decision).
    anti: bool = field(init=False, compare=False, repr=False)
    level: Level | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "anti", self.kind is TermKind.ANTI_AFFINITY)
        # The level where it holds, None for a term by closeness.
        object.__setattr__(self, "level", self.where if isinstance(self.where, Level) else None)

    @property
    def signed(self) -> int:
        """The weight with its sign: positive pulls, negative pushes."""
        return -self.weight if self.anti else self.weight

    def strength(self) -> str:
        """`required anti-affinity`, `preferred affinity`."""
        return f"{'required' if self.required else 'preferred'} {self.kind}"

    def describe(self) -> str:
        """`required anti-affinity podAntiAffinity....[0]: pods matching app=db
        (the pod's own namespace) at numa-agent.io/socket`."""
        strength = "required" if self.required else f"preferred (weight {self.weight})"
        at = f"at {self.where}" if self.level is not None else "by closeness"
        return f"{strength} {self.kind} {self.path}: {self.selector.describe()} {at}"
