"""Pod rules from the numa-agent.io annotations: Kubernetes' affinity and topology
spread shapes, with the machine's parts as the topology.

`numa-agent.io/affinity` holds a core/v1 Affinity (podAffinity, podAntiAffinity,
nodeAffinity over NUMA nodes); `numa-agent.io/topology-spread-constraints` a list
of TopologySpreadConstraint. `parse_pod_rules(annotations)` turns both into one
immutable `PodRules` (or raises `RuleError`: annotation, path, reason), once per
text. The model:

- `Level`: a topologyKey, one of core, l3, numa, die, socket (numa-agent.io/...)
  and kubernetes.io/hostname (the whole machine).
- `LabelSelector`: matchLabels and `Requirement`s (In, NotIn, Exists,
  DoesNotExist; Gt and Lt for NUMA nodes), ANDed; `{}` matches everything.
- `NamespaceScope`: the pod's own namespace, listed ones, or all.
- pod terms: `Term`s (agent.terms) whose `PodSelector` holds a label selector
  (None matches no pod) and a namespace scope; affinity or anti-affinity,
  required or preferred (weight 1-100), at a level, with their path.
- `NodeAffinity`: required `NodeSelectorTerm`s (ORed) and `PreferredNodeTerm`s
  over NUMA-node labels.
- `SpreadConstraint`: maxSkew, level, whenUnsatisfiable, selector, minDomains.
- `PodRules`: a pod's terms, node affinity and spread constraints.

Placement (occupancy, filters, scores) is not here: only which pods and which
NUMA nodes each rule selects.
"""

from agent.rules.errors import RuleError
from agent.rules.guard import core_problems, reach_problems
from agent.rules.levels import LEVEL_KEYS, Level
from agent.rules.limits import (
    MAX_ANNOTATION_BYTES,
    MAX_DEPTH,
    MAX_NAMESPACES,
    MAX_NODE_TERMS,
    MAX_POD_TERMS,
    MAX_REQUIREMENTS,
    MAX_SPREAD_CONSTRAINTS,
    MAX_VALUES,
)
from agent.rules.nodes import NodeAffinity, NodeSelectorTerm, PreferredNodeTerm
from agent.rules.parse import parse_pod_rules
from agent.rules.rules import ANNOTATION_AFFINITY, ANNOTATION_SPREAD, NO_RULES, PodRules
from agent.rules.selector import (
    EVERYTHING,
    LabelSelector,
    Operator,
    Requirement,
    selectable_labels,
)
from agent.rules.spread import SpreadConstraint, WhenUnsatisfiable
from agent.rules.terms import OWN_NAMESPACE, NamespaceScope, PodSelector, pod_selector, pod_term
from agent.terms.term import CLOSENESS, Term, TermKind

__all__ = [
    "ANNOTATION_AFFINITY",
    "ANNOTATION_SPREAD",
    "CLOSENESS",
    "EVERYTHING",
    "LEVEL_KEYS",
    "MAX_ANNOTATION_BYTES",
    "MAX_DEPTH",
    "MAX_NAMESPACES",
    "MAX_NODE_TERMS",
    "MAX_POD_TERMS",
    "MAX_REQUIREMENTS",
    "MAX_SPREAD_CONSTRAINTS",
    "MAX_VALUES",
    "NO_RULES",
    "OWN_NAMESPACE",
    "LabelSelector",
    "Level",
    "NamespaceScope",
    "NodeAffinity",
    "NodeSelectorTerm",
    "Operator",
    "PodRules",
    "PodSelector",
    "PreferredNodeTerm",
    "Requirement",
    "RuleError",
    "SpreadConstraint",
    "Term",
    "TermKind",
    "WhenUnsatisfiable",
    "core_problems",
    "parse_pod_rules",
    "pod_selector",
    "pod_term",
    "reach_problems",
    "selectable_labels",
]
