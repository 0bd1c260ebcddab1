"""Pod affinity and anti-affinity terms, as Terms whose selector looks at pods.

A term selects pods by their labels (`selector`) among the namespaces of its
`namespaces` scope, and holds at one `level` of the machine. Placement decides
what a term means for a candidate place; this module only says which pods count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.rules.selector import LabelSelector, Operator
from agent.terms.level import Level
from agent.terms.term import POD_LABELS, AttributePair, Term, TermKind
from agent.workload import ContainerInfo

ANNOTATION_AFFINITY = "numa-agent.io/affinity"


@dataclass(frozen=True, slots=True)
class NamespaceScope:
    """The namespaces whose pods a term looks at, as Kubernetes reads
    `namespaces` and `namespaceSelector`:

    - neither (or an empty list and no selector): the namespace of the term's pod;
    - `names`: those namespaces;
    - `namespaceSelector: {}` (`all_namespaces`): every namespace, whatever the list.

    A non-empty namespaceSelector never gets here: the node does not know the
    namespaces' labels, so the parser refuses it.
    """

    names: frozenset[str] = frozenset()
    all_namespaces: bool = False

    @property
    def selects_all(self) -> bool:
        return self.all_namespaces

    def matches(self, owner_namespace: str, namespace: str) -> bool:
        """Whether a pod in `namespace` is in scope for a term of a pod in
        `owner_namespace`."""
        if self.all_namespaces:
            return True
        if self.names:
            return namespace in self.names
        return namespace == owner_namespace

    def reaches_beyond(self, owner_namespace: str) -> bool:
        """Whether it looks at pods of any namespace but `owner_namespace`."""
        return self.all_namespaces or bool(self.names - {owner_namespace})

    def describe(self) -> str:
        if self.all_namespaces:
            return "all namespaces"
        if self.names:
            return (
                "namespace" + ("s " if len(self.names) > 1 else " ") + ", ".join(sorted(self.names))
            )
        return "the pod's own namespace"


OWN_NAMESPACE = NamespaceScope()


@dataclass(frozen=True, slots=True)
class PodSelector:
    """Whom a Kubernetes term concerns: the pods whose labels `labels` matches (None,
    no labelSelector: no pod) among the namespaces of `namespaces`. A pod's terms are
    its own, shared by its containers (`pod_wide`)."""

    labels: LabelSelector | None
    namespaces: NamespaceScope = OWN_NAMESPACE

    @property
    def pod_wide(self) -> bool:
        return True

    @property
    def selects_every_pod(self) -> bool:
        """`labelSelector: {}` with `namespaceSelector: {}`: every pod of every
        namespace. As a required anti-affinity term above `core` it would close
        whole domains to everyone; placement decides whether to allow it."""
        return self.labels is not None and self.labels.is_everything and self.namespaces.selects_all

    def matches_pod(self, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod (its namespace and selectable labels) is one this selector,
        of a pod in `owner_namespace`, looks at."""
        return (
            self.labels is not None
            and self.namespaces.matches(owner_namespace, namespace)
            and self.labels.matches(labels)
        )

    def selects(
        self, owner: ContainerInfo, other: ContainerInfo, labels: Mapping[str, str]
    ) -> bool:
        return self.matches_pod(owner.pod.namespace, other.pod.namespace, labels)

    def anchors(self, owner: ContainerInfo) -> tuple[AttributePair, ...] | None:
        """A matchLabels pair, or the values of an In requirement (every pod the
        selector matches has one of them); None otherwise."""
        selector = self.labels
        if selector is None:
            return ()  # matches no pod
        if selector.match_labels:
            key, value = selector.match_labels[0]
            return ((f"{POD_LABELS}{key}", value),)
        for req in selector.requirements:
            if req.operator is Operator.IN:
                return tuple((f"{POD_LABELS}{req.key}", value) for value in sorted(req.values))
        return None

    def describe(self) -> str:
        """`pods matching app=db (the pod's own namespace)`."""
        pods = "no pods" if self.labels is None else f"pods matching {self.labels.describe()}"
        return f"{pods} ({self.namespaces.describe()})"


def pod_term(
    kind: TermKind,
    required: bool,
    weight: int,
    selector: LabelSelector | None,
    namespaces: NamespaceScope,
    level: Level,
    path: str,
) -> Term:
    """One podAffinity or podAntiAffinity term as a Term.

    `required` terms come from requiredDuringSchedulingIgnoredDuringExecution (and
    requiredDuringSchedulingRequiredDuringExecution, accepted and treated alike:
    the agent never evicts); their `weight` is 0. Preferred terms carry their
    weight, 1-100. `selector` None (no labelSelector) matches no pod. `path` is
    where the term is in the annotation's value, for messages, such as
    `podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]` or
    `podAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm`.
    """
    return Term(
        kind, required, weight, PodSelector(selector, namespaces), level, ANNOTATION_AFFINITY, path
    )


def pod_selector(term: Term) -> PodSelector:
    """The selector of a Kubernetes term (TypeError for any other: a caller's bug)."""
    if not isinstance(term.selector, PodSelector):
        raise TypeError(f"{term.path}: not a pod term")
    return term.selector
