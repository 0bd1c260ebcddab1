"""Affinity rules: what a container asks of its neighbours, as typed values.

A Rule is one entry of a container's list in either annotation, with the
defaults filled in and the anti-affinity strength already turned negative.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent.affinity.expression import Expression

ANNOTATION_AFFINITY = "cri-resource-manager.intel.com/affinity"
ANNOTATION_ANTI_AFFINITY = "cri-resource-manager.intel.com/anti-affinity"

# Inclusive weight ranges as written in each annotation; anti-affinity takes a
# strength, which the rule stores negated.
AFFINITY_WEIGHTS = (-1000, 1000)
ANTI_AFFINITY_WEIGHTS = (0, 1000)
DEFAULT_STRENGTH = 1


class RuleKind(StrEnum):
    """How binding a rule is. Only soft preferences exist today.

    This is the extension point for hard rules: a REQUIRED kind (with a topology
    level such as core, NUMA node, die or socket as a new defaulted Rule field)
    would be added here; evaluation of PREFERRED rules would not change.
    """

    PREFERRED = "preferred"


@dataclass(frozen=True, slots=True)
class Rule:
    """`weight` is signed: positive pulls, negative pushes. `scope` None means the
    containers of the rule owner's own pod (by pod UID). `annotation` says which
    annotation the rule came from, for messages and `check`. `mirrored` marks the
    rule a container gets because other containers' shorthand lists name it (the
    shorthand is symmetric); its match names those containers."""

    match: Expression
    scope: Expression | None
    weight: int
    annotation: str
    kind: RuleKind = RuleKind.PREFERRED
    mirrored: bool = False

    def __str__(self) -> str:
        kind = "affinity" if self.annotation == ANNOTATION_AFFINITY else "anti-affinity"
        notes = "scope: its pod" if self.scope is None else f"scope: {self.scope}"
        if self.mirrored:
            notes += f"; mirrored from the shorthand of {', '.join(self.match.values)}"
        return f"{kind} {self.weight:+d} on {self.match} ({notes})"
