"""Container affinity and anti-affinity: the annotation language and its evaluation.

`parse_pod_affinities` turns a pod's two annotations into typed Rules once;
`effective_affinity` scores a placed container against one being placed.
"""

from agent.affinity.errors import AnnotationError, ExpressionError
from agent.affinity.evaluate import effective_affinity, is_same_container
from agent.affinity.expression import Expression, parse_operator
from agent.affinity.loader import MAX_ANNOTATION_BYTES, MAX_DEPTH
from agent.affinity.parse import (
    CONTAINER_NAME_KEY,
    MAX_RULES_PER_CONTAINER,
    NO_AFFINITIES,
    PodAffinities,
    parse_pod_affinities,
)
from agent.affinity.rule import ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY, Rule, RuleKind
from agent.terms.operator import CRI_RM_OPERATORS, Operator

__all__ = [
    "ANNOTATION_AFFINITY",
    "ANNOTATION_ANTI_AFFINITY",
    "CONTAINER_NAME_KEY",
    "CRI_RM_OPERATORS",
    "MAX_ANNOTATION_BYTES",
    "MAX_DEPTH",
    "MAX_RULES_PER_CONTAINER",
    "NO_AFFINITIES",
    "AnnotationError",
    "Expression",
    "ExpressionError",
    "Operator",
    "PodAffinities",
    "Rule",
    "RuleKind",
    "effective_affinity",
    "is_same_container",
    "parse_operator",
    "parse_pod_affinities",
]
