"""Topology spread constraints inside the machine: spread matching pods evenly
over the domains of one level, at most `max_skew` apart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from agent.rules.levels import Level
from agent.rules.selector import LabelSelector


class WhenUnsatisfiable(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"  # a hard rule: refuse a place over max_skew
    SCHEDULE_ANYWAY = "ScheduleAnyway"  # a soft one: rank by skew, never refuse


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One entry of the topology spread annotation.

    `max_skew` >= 1; `min_domains` (>= 1, only with DoNotSchedule) or None;
    `selector` always present (the annotation requires it). Pods counted are those
    of the pod's own namespace that the selector matches (`matches_pod`). `path`
    is the entry's place in the list, `[0]`, for messages.
    """

    max_skew: int
    level: Level
    when_unsatisfiable: WhenUnsatisfiable
    selector: LabelSelector
    min_domains: int | None
    path: str

    @property
    def required(self) -> bool:
        return self.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE

    def matches_pod(self, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod counts for a constraint of a pod in `owner_namespace`."""
        return namespace == owner_namespace and self.selector.matches(labels)

    def describe(self) -> str:
        """`[0]: maxSkew 1 at numa-agent.io/numa over app=web (DoNotSchedule)`."""
        extra = "" if self.min_domains is None else f", minDomains {self.min_domains}"
        return (
            f"{self.path}: maxSkew {self.max_skew} at {self.level} over "
            f"{self.selector.describe()} ({self.when_unsatisfiable}{extra})"
        )
