"""Small builders for the pods and containers the affinity tests reason about."""

from __future__ import annotations

from typing import NamedTuple

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    Expression,
    PodAffinities,
    container_selector,
    crm_term,
)
from agent.terms.term import Term
from agent.workload import ContainerInfo, PodInfo, QoSClass

NAME_LABEL = "io.kubernetes.container.name"


def pod(
    name: str = "web-0",
    *,
    uid: str | None = None,
    namespace: str = "shop",
    qosclass: QoSClass = QoSClass.BURSTABLE,
    sandbox_id: str = "",
    labels: dict[str, str] | None = None,
) -> PodInfo:
    return PodInfo(
        uid=uid if uid is not None else f"uid-{name}",
        name=name,
        namespace=namespace,
        qosclass=qosclass,
        id=sandbox_id,
        labels=labels or {},
    )


def container(
    name: str,
    of: PodInfo,
    *,
    cid: str = "",
    labels: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
) -> ContainerInfo:
    """A container with the labels kubelet puts on every container, plus `labels`."""
    kubelet = {
        NAME_LABEL: name,
        "io.kubernetes.pod.name": of.name,
        "io.kubernetes.pod.namespace": of.namespace,
        "io.kubernetes.pod.uid": of.uid,
    }
    return ContainerInfo(
        name=name, pod=of, id=cid, labels=kubelet | (labels or {}), tags=tags or {}
    )


class Rule(NamedTuple):
    """A cri-resource-manager rule as its tables state it: match, scope, the weight
    signed (anti-affinity negative), the annotation, whether it is mirrored."""

    match: Expression
    scope: Expression | None
    weight: int
    annotation: str
    mirrored: bool = False

    @classmethod
    def of(cls, term: Term) -> Rule:
        selector = container_selector(term)
        return cls(selector.match, selector.scope, term.signed, term.source, term.mirrored)


def rules_of(parsed: PodAffinities, name: str) -> tuple[Rule, ...]:
    """A container's parsed terms as the tables state rules."""
    return tuple(map(Rule.of, parsed.rules_for(name)))


def signed_term(
    match: Expression,
    scope: Expression | None,
    weight: int,
    annotation: str = ANNOTATION_AFFINITY,
    *,
    mirrored: bool = False,
) -> Term:
    """The term of a rule stated with a signed weight (an anti-affinity's negative)."""
    strength = -weight if annotation == ANNOTATION_ANTI_AFFINITY else weight
    return crm_term(annotation, match, scope, strength, mirrored=mirrored)
