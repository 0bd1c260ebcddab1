"""Placement requests from what the agent knows of a container: its resources and
its pod's annotations parsed into affinity rules.

Strict when kubelet creates the container (a bad annotation refuses it), lenient
when the agent itself re-places a container that already runs (a restart or a
resize must not fail over an annotation that was accepted before).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.affinity import AnnotationError, Rule, effective_affinity, parse_pod_affinities
from agent.policy.request import AffinityFn, ContainerRequest, Resources
from agent.workload import ContainerInfo


def container_rules(info: ContainerInfo) -> tuple[Rule, ...]:
    """The container's affinity rules from its pod's annotations; AnnotationError if bad."""
    return parse_pod_affinities(info.pod.annotations).rules_for(info.name)


def request_for(
    key: str, info: ContainerInfo, resources: Resources, rules: Sequence[Rule]
) -> ContainerRequest:
    return ContainerRequest(key, info, resources, _affinity(info, tuple(rules)))


def running_request(key: str, info: ContainerInfo, resources: Resources) -> ContainerRequest:
    """The request of a container that already runs: its rules, or none if they are bad."""
    try:
        rules = container_rules(info)
    except AnnotationError:
        rules = ()
    return request_for(key, info, resources, rules)


def _affinity(info: ContainerInfo, rules: tuple[Rule, ...]) -> AffinityFn | None:
    if not rules:
        return None
    return lambda other: effective_affinity(info, rules, other)
