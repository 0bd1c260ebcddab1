"""cri-resource-manager's rules as Terms whose selector looks at containers.

A rule of either annotation selects containers by its `match` expression among
those its `scope` selects (no scope: the containers of the rule owner's own pod)
and pulls its owner towards them, or pushes it away, by hardware closeness: it is
a preferred Term at CLOSENESS. An affinity weight may be negative (a push); an
anti-affinity weight is a strength that pushes. A container has no affinity to
itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.affinity.expression import Expression
from agent.terms.operator import Operator
from agent.terms.term import CLOSENESS, AttributePair, Term, TermKind, is_indexed
from agent.workload import ContainerInfo

ANNOTATION_AFFINITY = "cri-resource-manager.intel.com/affinity"
ANNOTATION_ANTI_AFFINITY = "cri-resource-manager.intel.com/anti-affinity"

# Inclusive weight ranges as written in each annotation; anti-affinity takes a
# strength, which pushes.
AFFINITY_WEIGHTS = (-1000, 1000)
ANTI_AFFINITY_WEIGHTS = (0, 1000)
DEFAULT_STRENGTH = 1
POD_UID = "pod/uid"  # the occupancy index's attribute of a container's pod


def is_same_container(c1: ContainerInfo, c2: ContainerInfo) -> bool:
    """Same pod UID and name, or the same runtime id (when it has one)."""
    if c1 is c2:
        return True
    if c1.id and c1.id == c2.id:
        return True
    return c1.name == c2.name and c1.pod.uid == c2.pod.uid


@dataclass(frozen=True, slots=True)
class ContainerSelector:
    """Whom a cri-resource-manager rule concerns: the containers `match` selects
    among those `scope` selects (None: the containers of the owner's own pod, by
    pod UID), never the owner itself."""

    match: Expression
    scope: Expression | None = None

    @property
    def pod_wide(self) -> bool:
        return False

    def selects(
        self, owner: ContainerInfo, other: ContainerInfo, labels: Mapping[str, str]
    ) -> bool:
        if is_same_container(owner, other):
            return False
        if self.scope is None:
            if owner.pod.uid != other.pod.uid:
                return False
        elif not self.scope.evaluate(other):
            return False
        return self.match.evaluate(other)

    def anchors(self, owner: ContainerInfo) -> tuple[AttributePair, ...] | None:
        """The owner's pod (no scope: the fewest candidates), else the values an
        Equals or In expression names."""
        if self.scope is None:
            return ((POD_UID, owner.pod.uid),)
        for expression in (self.match, self.scope):
            if expression.operator in (Operator.EQUALS, Operator.IN) and is_indexed(expression.key):
                return tuple((expression.key, value) for value in expression.values)
        return None

    def describe(self) -> str:
        scope = "its pod" if self.scope is None else str(self.scope)
        return f"containers where {self.match} (scope: {scope})"


def crm_term(
    annotation: str,
    match: Expression,
    scope: Expression | None,
    weight: int,
    path: str = "",
    *,
    mirrored: bool = False,
) -> Term:
    """A rule of `annotation` with its `weight` as written there (an anti-affinity
    strength pushes; a negative affinity weight too)."""
    if annotation == ANNOTATION_ANTI_AFFINITY:
        weight = -weight
    kind = TermKind.ANTI_AFFINITY if weight < 0 else TermKind.AFFINITY
    selector = ContainerSelector(match, scope)
    return Term(kind, False, abs(weight), selector, CLOSENESS, annotation, path, mirrored)


def rule_text(term: Term) -> str:
    """`affinity +5 on name In [db] (scope: its pod)`: a rule as `check` shows it."""
    selector = term.selector
    assert isinstance(selector, ContainerSelector)
    kind = "affinity" if term.source == ANNOTATION_AFFINITY else "anti-affinity"
    notes = "scope: its pod" if selector.scope is None else f"scope: {selector.scope}"
    if term.mirrored:
        notes += f"; mirrored from the shorthand of {', '.join(selector.match.values)}"
    return f"{kind} {term.signed:+d} on {selector.match} ({notes})"


def container_selector(term: Term) -> ContainerSelector:
    """The selector of a cri-resource-manager term (TypeError for any other)."""
    if not isinstance(term.selector, ContainerSelector):
        raise TypeError(f"{term.path}: not a cri-resource-manager rule")
    return term.selector
