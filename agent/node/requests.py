"""Placement requests from what the agent knows of a container: its resources and
its pod's annotations parsed into terms (agent.terms) and pod rules.

Also the cpu-class and memory-tiers annotations (agent.policy.classes).
Strict when kubelet creates the container (a bad annotation refuses it), lenient
when the agent itself re-places a container that already runs (a restart or a
resize must not fail over an annotation that was accepted before).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.affinity import AnnotationError, parse_pod_affinities
from agent.policy.classes import ContainerClasses, parse_classes
from agent.policy.errors import InvalidRequest
from agent.policy.request import ContainerRequest, Resources
from agent.rules import NO_RULES, PodRules, RuleError, parse_pod_rules
from agent.terms.term import Term
from agent.workload import ContainerInfo


def container_rules(info: ContainerInfo) -> tuple[Term, ...]:
    """The container's cri-resource-manager rules from its pod's annotations, as terms;
    AnnotationError if bad."""
    return parse_pod_affinities(info.pod.annotations).rules_for(info.name)


def pod_rules(info: ContainerInfo) -> PodRules:
    """The pod's numa-agent.io rules (pod and node affinity, spread); RuleError if bad.
    Parsed once per annotation text (cached), so once per pod, not per container."""
    return parse_pod_rules(info.pod.annotations)


def request_for(
    key: str,
    info: ContainerInfo,
    resources: Resources,
    rules: Sequence[Term],
    pod: PodRules = NO_RULES,
    *,
    strict: bool = True,
) -> ContainerRequest:
    """The request; with `strict`, a bad cpu-class / memory-tiers annotation makes it
    one the policy refuses (INVALID_ARGUMENT), else such an annotation is ignored."""
    invalid = None
    try:
        asked = parse_classes(info.pod.annotations, info.name)
    except InvalidRequest as err:
        asked, invalid = ContainerClasses(), (str(err) if strict else None)
    return ContainerRequest(
        key,
        info,
        resources,
        tuple(rules),
        pod,
        cpu_class=asked.cpu_class,
        memory_tiers=asked.memory_tiers,
        invalid=invalid,
    )


def running_request(key: str, info: ContainerInfo, resources: Resources) -> ContainerRequest:
    """The request of a container that already runs: its rules, or none if they are bad."""
    try:
        rules = container_rules(info)
    except AnnotationError:
        rules = ()
    try:
        pod = pod_rules(info)
    except RuleError:
        pod = NO_RULES
    return request_for(key, info, resources, rules, pod, strict=False)
