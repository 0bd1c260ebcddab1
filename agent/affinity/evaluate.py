"""Effective affinity between two containers: the one number the placement policy,
`simulate` and the tests all use.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.affinity.rule import Rule
from agent.workload import ContainerInfo


def is_same_container(c1: ContainerInfo, c2: ContainerInfo) -> bool:
    """Same pod UID and name, or the same runtime id (when it has one)."""
    if c1 is c2:
        return True
    if c1.id and c1.id == c2.id:
        return True
    return c1.name == c2.name and c1.pod.uid == c2.pod.uid


def effective_affinity(c1: ContainerInfo, rules: Sequence[Rule], c2: ContainerInfo) -> int:
    """A(c1, c2): the sum of the weights of c1's `rules` whose scope and match both
    select c2. A rule without a scope covers c1's own pod (by pod UID). A container
    has no affinity to itself. Asymmetric: A(c2, c1) uses c2's rules."""
    if not rules or is_same_container(c1, c2):
        return 0
    same_pod = c1.pod.uid == c2.pod.uid
    total = 0
    for rule in rules:
        if rule.scope is None:
            if not same_pod:
                continue
        elif not rule.scope.evaluate(c2):
            continue
        if rule.match.evaluate(c2):
            total += rule.weight
    return total
