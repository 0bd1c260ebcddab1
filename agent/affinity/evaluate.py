"""A(c1, c2): how strongly one container's cri-resource-manager rules pull it towards
another, the number `simulate`'s and the benchmarks' objectives and the tests use.

Placement itself does not call this: it evaluates the same terms over the
occupancy index (agent.policy.evaluation), which gives the same sums.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.terms.term import CLOSENESS, Term
from agent.workload import ContainerInfo


def effective_affinity(c1: ContainerInfo, terms: Sequence[Term], c2: ContainerInfo) -> int:
    """The sum of the signed weights of c1's terms by closeness that select c2. A
    rule without a scope covers c1's own pod (by pod UID). A container has no
    affinity to itself. Asymmetric: A(c2, c1) uses c2's rules."""
    total = 0
    for term in terms:
        if term.where is CLOSENESS and term.selector.selects(c1, c2, c2.pod.labels):
            total += term.signed
    return total
