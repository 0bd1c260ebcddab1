"""Compiled label selectors: Kubernetes' requirements over a label map.

One `Requirement` type serves pod label selectors (In, NotIn, Exists,
DoesNotExist) and NUMA-node selectors (those and Gt, Lt), with the semantics of
apimachinery's `labels` package: negative operators hold for a missing label, Gt
and Lt compare base-10 int64 values and fail on a label that is not one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.terms.operator import (
    LABEL_OPERATORS,
    NODE_OPERATORS,
    Operator,
    ValueTest,
    parse_integer,
    value_test,
)

__all__ = [
    "EVERYTHING",
    "KUBELET_LABEL_PREFIX",
    "LABEL_OPERATORS",
    "NODE_OPERATORS",
    "LabelSelector",
    "Operator",
    "Requirement",
    "parse_integer",
    "selectable_labels",
]

# kubelet's own labels on the sandbox (io.kubernetes.pod.name, .namespace, .uid):
# Kubernetes' selectors never see them, so the agent's do not either.
KUBELET_LABEL_PREFIX = "io.kubernetes."


def selectable_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    """The pod's own labels, as a selector sees them: without kubelet's."""
    if not any(key.startswith(KUBELET_LABEL_PREFIX) for key in labels):
        return labels
    return {k: v for k, v in labels.items() if not k.startswith(KUBELET_LABEL_PREFIX)}


@dataclass(frozen=True, slots=True)
class Requirement:
    """One expression: `key` `operator` `values`.

    `values` is empty for Exists and DoesNotExist, one or more for In and NotIn,
    and the one value for Gt and Lt, whose integer is `bound`.
    """

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()
    bound: int | None = None
    _test: ValueTest = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = sorted(self.values) if self.bound is None else [str(self.bound)]
        object.__setattr__(self, "_test", value_test(self.operator, values))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self._test(labels.get(self.key))

    def __reduce__(self) -> tuple[type[Requirement], tuple[object, ...]]:
        # The compiled test is a closure: rebuild it rather than pickle it.
        return (Requirement, (self.key, self.operator, self.values, self.bound))

    def describe(self) -> str:
        """Kubernetes' selector syntax: `app in (a,b)`, `app notin (a)`, `app`,
        `!app`, `mem>5`, `mem<5`."""
        values = ",".join(sorted(self.values))
        return {
            Operator.IN: f"{self.key} in ({values})",
            Operator.NOT_IN: f"{self.key} notin ({values})",
            Operator.EXISTS: self.key,
            Operator.NOT_EXISTS: f"!{self.key}",
            Operator.GT: f"{self.key}>{values}",
            Operator.LT: f"{self.key}<{values}",
        }[self.operator]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A compiled meta/v1 LabelSelector: every matchLabels pair (sorted by key)
    and every requirement (in written order) must hold (ANDed). No requirements
    at all (`{}`) matches every pod; an absent selector is None where it is
    used, and matches none."""

    match_labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[Requirement, ...] = ()

    @property
    def is_everything(self) -> bool:
        """Whether it matches every pod (`labelSelector: {}`)."""
        return not self.match_labels and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(r.matches(labels) for r in self.requirements)

    def describe(self) -> str:
        """Short text for messages: `app=db, tier in (cache)`; `{}` for everything."""
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts.extend(r.describe() for r in self.requirements)
        return ", ".join(parts) if parts else "{}"


EVERYTHING = LabelSelector()
