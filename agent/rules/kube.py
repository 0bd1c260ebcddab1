"""Kubernetes' API shapes of the two annotations, as strict msgspec Structs.

Field names are exactly Kubernetes' (core/v1 Affinity and TopologySpreadConstraint,
meta/v1 LabelSelector); class names too, since messages name them. Unknown fields
are errors. A few Kubernetes fields the agent does not support are declared so
that the compiler can refuse them by name instead of calling them unknown.
Every optional field defaults to None: JSON null and a missing field mean the same,
as in the API server. matchLabels values are left to the compiler (`object`), so
that a bad one is named by its key.
"""

from __future__ import annotations

import msgspec


class KubeStruct(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The shared strictness: camelCase names as in the API, no unknown fields.
    (Fields keep Kubernetes' order; `kw_only` lets a required one follow others.)"""


class LabelSelectorRequirement(KubeStruct, frozen=True):
    key: str
    operator: str
    values: tuple[str, ...] | None = None


class LabelSelector(KubeStruct, frozen=True):
    match_labels: dict[str, object] | None = None
    match_expressions: tuple[LabelSelectorRequirement, ...] | None = None


class PodAffinityTerm(KubeStruct, frozen=True, kw_only=True):
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] | None = None
    topology_key: str
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] | None = None  # refused
    mismatch_label_keys: tuple[str, ...] | None = None  # refused


class WeightedPodAffinityTerm(KubeStruct, frozen=True):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KubeStruct, frozen=True):
    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] | None = None
    # Commented out in Kubernetes' types ("not yet implemented"); accepted as required.
    required_during_scheduling_required_during_execution: tuple[PodAffinityTerm, ...] | None = None
    preferred_during_scheduling_ignored_during_execution: (
        tuple[WeightedPodAffinityTerm, ...] | None
    ) = None


class PodAntiAffinity(PodAffinity, frozen=True):
    pass


class NodeSelectorRequirement(KubeStruct, frozen=True):
    key: str
    operator: str
    values: tuple[str, ...] | None = None


class NodeSelectorTerm(KubeStruct, frozen=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] | None = None
    match_fields: tuple[NodeSelectorRequirement, ...] | None = None  # refused


class NodeSelector(KubeStruct, frozen=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...]


class PreferredSchedulingTerm(KubeStruct, frozen=True):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(KubeStruct, frozen=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: (
        tuple[PreferredSchedulingTerm, ...] | None
    ) = None


class Affinity(KubeStruct, frozen=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class TopologySpreadConstraint(KubeStruct, frozen=True, kw_only=True):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str | None = None  # required by Kubernetes; DoNotSchedule here
    label_selector: LabelSelector  # optional in Kubernetes, required here
    min_domains: int | None = None
    node_affinity_policy: str | None = None  # refused
    node_taints_policy: str | None = None  # refused
    match_label_keys: tuple[str, ...] | None = None  # refused


SpreadConstraints = tuple[TopologySpreadConstraint, ...]
