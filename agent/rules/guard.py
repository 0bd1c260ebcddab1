"""No tenant can close the node: which required anti-affinity terms a pod may not hold.

A required anti-affinity keeps every pod it selects out of the domains its own pod
occupies, and keeps its own pod out of theirs. Inside one namespace that is the
namespace's own business (as in Kubernetes); reaching other namespaces would let
one small pod refuse everyone else, whatever its selector looks like (`NotIn` a
value nobody has, `DoesNotExist` on a label nobody carries, `{}`). So a term whose
namespaces reach beyond its pod's is only for the namespaces the operator lists
in `exclusive_domain_namespaces`. At `core` it is only for exclusive containers:
a shared container occupies its whole pool, which would close a NUMA node or more.
"""

from __future__ import annotations

from collections.abc import Collection

from agent.rules.levels import Level
from agent.rules.rules import ANNOTATION_AFFINITY, PodRules
from agent.rules.terms import pod_selector
from agent.terms.term import TermKind


def reach_problems(
    rules: PodRules, namespace: str, exclusive_domain_namespaces: Collection[str]
) -> tuple[str, ...]:
    """Why the pod (in `namespace`) may not hold its required anti-affinity terms:
    one message per term that reaches other namespaces, naming it."""
    if namespace in exclusive_domain_namespaces:
        return ()
    out = []
    for term in rules.pod_terms:
        if term.kind is not TermKind.ANTI_AFFINITY or not term.required:
            continue
        scope = pod_selector(term).namespaces
        if scope.reaches_beyond(namespace):
            out.append(
                f"{ANNOTATION_AFFINITY}: {term.path}: a required anti-affinity that reaches "
                f"beyond the pod's own namespace ({scope.describe()}) would let "
                "one pod refuse every other tenant's pods; it is allowed only for namespaces "
                "listed in the agent's exclusive_domain_namespaces"
            )
    return tuple(out)


def core_problems(rules: PodRules) -> tuple[str, ...]:
    """Why a *shared* container of the pod may not hold its required anti-affinity
    terms at `core` (a shared container occupies its whole pool)."""
    return tuple(
        f"{ANNOTATION_AFFINITY}: {term.path}: a required anti-affinity at "
        "numa-agent.io/core is only for containers with exclusive CPUs; a shared "
        "container occupies its whole pool, so it would close that pool to the pods "
        "it selects"
        for term in rules.pod_terms
        if term.kind is TermKind.ANTI_AFFINITY and term.required and term.where is Level.CORE
    )
