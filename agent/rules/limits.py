"""Limits against hostile or runaway annotations, checked while parsing.

Kubernetes bounds these only by the object's size; the agent evaluates every
term on each placement decision, so it keeps them small enough for a decision
well under a millisecond, and far above what a real pod writes.
"""

from __future__ import annotations

from agent.affinity.loader import MAX_ANNOTATION_BYTES, MAX_DEPTH

__all__ = [
    "MAX_ANNOTATION_BYTES",
    "MAX_DEPTH",
    "MAX_NAMESPACES",
    "MAX_NODE_TERMS",
    "MAX_POD_TERMS",
    "MAX_REQUIREMENTS",
    "MAX_SPREAD_CONSTRAINTS",
    "MAX_VALUES",
]

# 64 KiB of UTF-8 per annotation (the cri-resource-manager annotations' limit).
# podAffinity and podAntiAffinity terms of a pod, required and preferred, in all.
MAX_POD_TERMS = 32
# nodeAffinity's required nodeSelectorTerms and preferred terms, in all.
MAX_NODE_TERMS = 16
# Topology spread constraints: one per (level, whenUnsatisfiable) pair anyway.
MAX_SPREAD_CONSTRAINTS = 12
# matchLabels pairs plus matchExpressions of one selector, or expressions of one
# node selector term.
MAX_REQUIREMENTS = 16
# Values of one expression.
MAX_VALUES = 64
# Namespaces listed by one pod term.
MAX_NAMESPACES = 64
