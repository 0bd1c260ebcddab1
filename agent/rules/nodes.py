"""Node affinity over NUMA nodes: which of the machine's NUMA nodes a pod may use
or prefers, by their labels, in Kubernetes' NodeAffinity shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.rules.selector import Requirement


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold for a NUMA node's labels (ANDed).

    The parser refuses an empty term (Kubernetes reads one as matching no node);
    `matches` of no requirements would be True. `path` locates it, for messages.
    """

    requirements: tuple[Requirement, ...]
    path: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def failing(self, labels: Mapping[str, str]) -> tuple[Requirement, ...]:
        """The requirements these labels fail, in order: what a NUMA node lacks."""
        return tuple(r for r in self.requirements if not r.matches(labels))

    def describe(self) -> str:
        return ", ".join(r.describe() for r in self.requirements)


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    """A preferredDuringSchedulingIgnoredDuringExecution entry: weight 1-100."""

    weight: int
    term: NodeSelectorTerm
    path: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.term.matches(labels)


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """`required`: the NUMA nodes allowed are those matching any of these terms
    (ORed); None allows every NUMA node (never an empty tuple: refused).
    `preferred`: terms adding their weight where they hold."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredNodeTerm, ...] = ()

    def allows(self, labels: Mapping[str, str]) -> bool:
        """Whether a NUMA node with these labels satisfies the required terms."""
        return self.required is None or any(t.matches(labels) for t in self.required)

    def failing(
        self, labels: Mapping[str, str]
    ) -> tuple[tuple[NodeSelectorTerm, tuple[Requirement, ...]], ...]:
        """For a NUMA node the required terms refuse: each term with the
        requirements these labels fail (empty when the node is allowed)."""
        if self.allows(labels) or self.required is None:
            return ()
        return tuple((t, t.failing(labels)) for t in self.required)
