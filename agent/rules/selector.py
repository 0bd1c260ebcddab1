"""Compiled label selectors: Kubernetes' requirements over a label map.

One `Requirement` type serves pod label selectors (In, NotIn, Exists,
DoesNotExist) and NUMA-node selectors (those and Gt, Lt), with the semantics of
apimachinery's `labels` package: negative operators hold for a missing label, Gt
and Lt compare base-10 int64 values and fail on a label that is not one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

INT64 = (-(2**63), 2**63 - 1)
INT64_DIGITS = 19
# kubelet's own labels on the sandbox (io.kubernetes.pod.name, .namespace, .uid):
# Kubernetes' selectors never see them, so the agent's do not either.
KUBELET_LABEL_PREFIX = "io.kubernetes."
_INTEGER = re.compile(r"[+-]?[0-9]+")


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


LABEL_OPERATORS = (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST)
NODE_OPERATORS = (*LABEL_OPERATORS, Operator.GT, Operator.LT)


def parse_integer(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads it, None if it does not."""
    if not _INTEGER.fullmatch(text):
        return None
    # Bounded before int(): an int64 has at most 19 significant digits, and int()
    # refuses (with ValueError) texts of more than 4300 digits.
    if len(text.lstrip("+-").lstrip("0")) > INT64_DIGITS:
        return None
    value = int(text)
    return value if INT64[0] <= value <= INT64[1] else None


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

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op is Operator.IN:
            return value is not None and value in self.values
        if op is Operator.NOT_IN:
            return value is None or value not in self.values
        if op is Operator.EXISTS:
            return value is not None
        if op is Operator.DOES_NOT_EXIST:
            return value is None
        number = None if value is None else parse_integer(value)
        if number is None or self.bound is None:
            return False
        return number > self.bound if op is Operator.GT else number < self.bound

    def describe(self) -> str:
        """Kubernetes' selector syntax: `app in (a,b)`, `app notin (a)`, `app`,
        `!app`, `mem>5`, `mem<5`."""
        values = ",".join(sorted(self.values))
        return {
            Operator.IN: f"{self.key} in ({values})",
            Operator.NOT_IN: f"{self.key} notin ({values})",
            Operator.EXISTS: self.key,
            Operator.DOES_NOT_EXIST: f"!{self.key}",
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
