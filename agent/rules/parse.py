"""A pod's numa-agent.io annotations to its PodRules, once per annotation text.

kubelet creates a pod's containers one by one with the same annotations, and
retries a refused one; results (errors included) are cached by the texts, so
each distinct value is parsed once while it is in use.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from agent.rules.compile import compile_affinity, compile_spread
from agent.rules.decode import decode_affinity, decode_spread
from agent.rules.errors import PathError, RuleError
from agent.rules.nodes import NodeAffinity
from agent.rules.rules import ANNOTATION_AFFINITY, ANNOTATION_SPREAD, NO_RULES, PodRules
from agent.rules.spread import SpreadConstraint
from agent.terms.term import Term

CACHE_SIZE = 128  # pods' annotation pairs; each text is at most 64 KiB


def parse_pod_rules(annotations: Mapping[str, str]) -> PodRules:
    """The rules of both annotations (NO_RULES without either); RuleError naming
    the annotation, the path and the reason for the first thing wrong."""
    affinity = annotations.get(ANNOTATION_AFFINITY)
    spread = annotations.get(ANNOTATION_SPREAD)
    if affinity is None and spread is None:
        return NO_RULES
    for name, value in ((ANNOTATION_AFFINITY, affinity), (ANNOTATION_SPREAD, spread)):
        if value is not None and not isinstance(value, str):  # a caller's bug, not a crash
            raise RuleError(name, "", f"is a {type(value).__name__}, not text")
    result = _parse_cached(affinity, spread)
    if isinstance(result, RuleError):
        raise result.copy()
    return result


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse_cached(affinity: str | None, spread: str | None) -> PodRules | RuleError:
    annotation = ANNOTATION_AFFINITY
    try:
        pod_terms: tuple[Term, ...] = ()
        node_affinity: NodeAffinity | None = None
        if affinity is not None:
            decoded = decode_affinity(affinity)
            if decoded is not None:
                pod_terms, node_affinity = compile_affinity(decoded)
        annotation = ANNOTATION_SPREAD
        constraints: tuple[SpreadConstraint, ...] = ()
        if spread is not None:
            decoded_spread = decode_spread(spread)
            if decoded_spread is not None:
                constraints = compile_spread(decoded_spread)
    except PathError as err:
        return RuleError(annotation, err.path, err.reason)
    return PodRules(pod_terms, node_affinity, constraints)
