"""Container affinity and anti-affinity: the annotation language and its evaluation.

`parse_pod_affinities` turns a pod's two annotations into Terms (agent.terms)
once; `effective_affinity` sums one container's pull towards another.
"""

from agent.affinity.errors import AnnotationError, ExpressionError
from agent.affinity.evaluate import effective_affinity
from agent.affinity.expression import Expression, parse_operator
from agent.affinity.loader import MAX_ANNOTATION_BYTES, MAX_DEPTH
from agent.affinity.parse import (
    CONTAINER_NAME_KEY,
    MAX_RULES_PER_CONTAINER,
    NO_AFFINITIES,
    PodAffinities,
    parse_pod_affinities,
)
from agent.affinity.rule import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    ContainerSelector,
    container_selector,
    crm_term,
    is_same_container,
    rule_text,
)
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
    "ContainerSelector",
    "Expression",
    "ExpressionError",
    "Operator",
    "PodAffinities",
    "container_selector",
    "crm_term",
    "effective_affinity",
    "is_same_container",
    "parse_operator",
    "parse_pod_affinities",
    "rule_text",
]
