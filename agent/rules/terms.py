"""Pod affinity and anti-affinity terms: which pods a term looks at, and where.

A term selects pods by their labels (`selector`) among the namespaces of its
`namespaces` scope, and holds at one `level` of the machine. Placement decides
what a term means for a candidate place; this module only says which pods count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from agent.rules.levels import Level
from agent.rules.selector import LabelSelector


class TermKind(StrEnum):
    AFFINITY = "affinity"  # from podAffinity: pull towards matching pods
    ANTI_AFFINITY = "anti-affinity"  # from podAntiAffinity: push away from them


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
class PodTerm:
    """One podAffinity or podAntiAffinity term.

    `required` terms come from requiredDuringSchedulingIgnoredDuringExecution (and
    requiredDuringSchedulingRequiredDuringExecution, accepted and treated alike:
    the agent never evicts); their `weight` is 0. Preferred terms carry their
    weight, 1-100. `selector` None (no labelSelector) matches no pod. `path` is
    where the term is in the annotation's value, for messages, such as
    `podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]` or
    `podAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm`.
    """

    kind: TermKind
    required: bool
    weight: int
    selector: LabelSelector | None
    namespaces: NamespaceScope
    level: Level
    path: str

    @property
    def selects_every_pod(self) -> bool:
        """`labelSelector: {}` with `namespaceSelector: {}`: every pod of every
        namespace. As a required anti-affinity term above `core` it would close
        whole domains to everyone; placement decides whether to allow it."""
        return (
            self.selector is not None
            and self.selector.is_everything
            and self.namespaces.selects_all
        )

    def matches_pod(self, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod (its namespace and labels) is one this term, of a pod in
        `owner_namespace`, looks at."""
        return (
            self.selector is not None
            and self.namespaces.matches(owner_namespace, namespace)
            and self.selector.matches(labels)
        )

    def describe(self) -> str:
        """`required anti-affinity podAntiAffinity....[0]: pods matching app=db
        (the pod's own namespace) at numa-agent.io/socket`."""
        strength = "required" if self.required else f"preferred (weight {self.weight})"
        pods = "no pods" if self.selector is None else f"pods matching {self.selector.describe()}"
        return (
            f"{strength} {self.kind} {self.path}: {pods} ({self.namespaces.describe()}) "
            f"at {self.level}"
        )
