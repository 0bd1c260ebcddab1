"""Everything a pod's numa-agent.io annotations say, as one value."""

from __future__ import annotations

from dataclasses import dataclass

from agent.rules.nodes import NodeAffinity
from agent.rules.spread import SpreadConstraint
from agent.rules.terms import ANNOTATION_AFFINITY
from agent.terms.term import Term, TermKind

__all__ = ["ANNOTATION_AFFINITY", "ANNOTATION_SPREAD", "NO_RULES", "PodRules"]

ANNOTATION_SPREAD = "numa-agent.io/topology-spread-constraints"


@dataclass(frozen=True, slots=True)
class PodRules:
    """The rules of one pod, shared by all its containers (init containers too).

    `pod_terms` in annotation order: podAffinity's required, then its preferred
    terms, then podAntiAffinity's. `node_affinity` None when there is none.
    Paths inside are relative to the annotation's value; the annotation a part
    comes from is known by its type (`numa-agent.io/affinity` for terms and node
    affinity, `numa-agent.io/topology-spread-constraints` for `spread`).
    """

    pod_terms: tuple[Term, ...] = ()
    node_affinity: NodeAffinity | None = None
    spread: tuple[SpreadConstraint, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.pod_terms and self.node_affinity is None and not self.spread

    def terms(
        self, kind: TermKind | None = None, *, required: bool | None = None
    ) -> tuple[Term, ...]:
        """The pod terms of one kind and/or strength, in annotation order."""
        return tuple(
            t
            for t in self.pod_terms
            if (kind is None or t.kind is kind) and (required is None or t.required is required)
        )


NO_RULES = PodRules()
