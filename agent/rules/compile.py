"""Kubernetes' shapes to the rule model, with Kubernetes' validation rules and ours.

Every check raises PathError at the exact field: label key and value syntax,
operators and their values, weights, the levels, the fields the agent refuses
(matchFields, a non-empty namespaceSelector, matchLabelKeys, ...) and the limits.
What comes out needs no further checking.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from agent.kube.names import MAX_NAME, label_key_problem, label_value_problem, namespace_problem
from agent.rules import kube
from agent.rules.decode import describe, quote_hint
from agent.rules.errors import PathError, join, quote
from agent.rules.levels import Level, parse_level
from agent.rules.limits import (
    MAX_NAMESPACES,
    MAX_NODE_TERMS,
    MAX_POD_TERMS,
    MAX_REQUIREMENTS,
    MAX_SPREAD_CONSTRAINTS,
    MAX_VALUES,
)
from agent.rules.nodes import NodeAffinity, NodeSelectorTerm, PreferredNodeTerm
from agent.rules.selector import (
    LABEL_OPERATORS,
    NODE_OPERATORS,
    LabelSelector,
    Operator,
    Requirement,
    parse_integer,
)
from agent.rules.spread import SpreadConstraint, WhenUnsatisfiable
from agent.rules.terms import OWN_NAMESPACE, NamespaceScope, pod_term
from agent.terms.term import Term, TermKind

INT32_MAX = 2**31 - 1
WEIGHTS = (1, 100)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_REQUIRED_EXECUTION = "requiredDuringSchedulingRequiredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


# -- numa-agent.io/affinity ---------------------------------------------------


def compile_affinity(
    affinity: kube.Affinity,
) -> tuple[tuple[Term, ...], NodeAffinity | None]:
    """The pod terms (podAffinity's, then podAntiAffinity's) and the node affinity."""
    terms: list[Term] = []
    for name, kind, raw in (
        ("podAffinity", TermKind.AFFINITY, affinity.pod_affinity),
        ("podAntiAffinity", TermKind.ANTI_AFFINITY, affinity.pod_anti_affinity),
    ):
        if raw is not None:
            _pod_terms(raw, name, kind, terms)
    node = None
    if affinity.node_affinity is not None:
        node = _node_affinity(affinity.node_affinity, "nodeAffinity")
    return tuple(terms), node


def _pod_terms(raw: kube.PodAffinity, path: str, kind: TermKind, out: list[Term]) -> None:
    for field, terms in (
        (_REQUIRED, raw.required_during_scheduling_ignored_during_execution),
        (_REQUIRED_EXECUTION, raw.required_during_scheduling_required_during_execution),
    ):
        where = join(path, field)
        _count(out, terms, MAX_POD_TERMS, where, "pod affinity and anti-affinity terms")
        for i, term in enumerate(terms or ()):
            out.append(_pod_term(term, join(where, i), kind, required=True, weight=0))
    where = join(path, _PREFERRED)
    weighted = raw.preferred_during_scheduling_ignored_during_execution
    _count(out, weighted, MAX_POD_TERMS, where, "pod affinity and anti-affinity terms")
    for i, item in enumerate(weighted or ()):
        at = join(where, i)
        weight = _weight(item.weight, join(at, "weight"))
        term_path = join(at, "podAffinityTerm")
        out.append(
            _pod_term(item.pod_affinity_term, term_path, kind, required=False, weight=weight)
        )


def _pod_term(
    raw: kube.PodAffinityTerm, path: str, kind: TermKind, *, required: bool, weight: int
) -> Term:
    _refuse(
        raw.match_label_keys,
        join(path, "matchLabelKeys"),
        "is not supported: it copies label values of the pod being placed into the "
        "selector; write those labels into labelSelector",
    )
    _refuse(
        raw.mismatch_label_keys,
        join(path, "mismatchLabelKeys"),
        "is not supported: it copies label values of the pod being placed into the "
        "selector; write those labels into labelSelector (with NotIn)",
    )
    selector = None
    if raw.label_selector is not None:
        selector = compile_selector(raw.label_selector, join(path, "labelSelector"))
    return pod_term(
        kind,
        required,
        weight,
        selector,
        _namespaces(raw, path),
        parse_level(raw.topology_key, join(path, "topologyKey")),
        path,
    )


def _namespaces(raw: kube.PodAffinityTerm, path: str) -> NamespaceScope:
    names = raw.namespaces or ()
    where = join(path, "namespaces")
    if len(names) > MAX_NAMESPACES:
        raise PathError(where, f"lists {len(names)} namespaces, more than {MAX_NAMESPACES}")
    for i, name in enumerate(names):
        problem = namespace_problem(name)
        if problem:
            raise PathError(join(where, i), f"{quote(name)} is not a namespace name: {problem}")
    all_namespaces = False
    selector = raw.namespace_selector
    if selector is not None:
        if selector.match_labels or selector.match_expressions:
            raise PathError(
                join(path, "namespaceSelector"),
                "must be empty ({}, every namespace) or left out: the node does not know "
                "namespaces' labels; list the namespaces in namespaces instead",
            )
        all_namespaces = True
    if not names and not all_namespaces:
        return OWN_NAMESPACE
    return NamespaceScope(frozenset(names), all_namespaces)


def _node_affinity(raw: kube.NodeAffinity, path: str) -> NodeAffinity | None:
    required = None
    count: list[object] = []
    if raw.required_during_scheduling_ignored_during_execution is not None:
        where = join(join(path, _REQUIRED), "nodeSelectorTerms")
        terms = raw.required_during_scheduling_ignored_during_execution.node_selector_terms
        if not terms:
            raise PathError(
                where,
                "is empty, so no NUMA node could match; leave "
                f"{_REQUIRED} out to allow every NUMA node",
            )
        _count(count, terms, MAX_NODE_TERMS, where, "node selector terms")
        required = tuple(_node_term(t, join(where, i)) for i, t in enumerate(terms))
        count.extend(required)
    preferred: list[PreferredNodeTerm] = []
    where = join(path, _PREFERRED)
    weighted = raw.preferred_during_scheduling_ignored_during_execution
    _count(count, weighted, MAX_NODE_TERMS, where, "node selector terms")
    for i, item in enumerate(weighted or ()):
        at = join(where, i)
        weight = _weight(item.weight, join(at, "weight"))
        preferred.append(
            PreferredNodeTerm(weight, _node_term(item.preference, join(at, "preference")), at)
        )
    if required is None and not preferred:
        return None
    return NodeAffinity(required, tuple(preferred))


def _node_term(raw: kube.NodeSelectorTerm, path: str) -> NodeSelectorTerm:
    _refuse(
        raw.match_fields,
        join(path, "matchFields"),
        "is not supported: NUMA nodes have no fields (it selects Kubernetes nodes by "
        "metadata.name); select by label with matchExpressions, such as "
        "numa-agent.io/numa",
    )
    expressions = raw.match_expressions or ()
    if not expressions:
        raise PathError(
            path,
            "has no matchExpressions: Kubernetes reads an empty node selector term as "
            "matching no node; give it expressions, or leave the term out",
        )
    where = join(path, "matchExpressions")
    if len(expressions) > MAX_REQUIREMENTS:
        raise PathError(where, f"has {len(expressions)} expressions, more than {MAX_REQUIREMENTS}")
    requirements = tuple(
        _requirement(e.key, e.operator, e.values, join(where, i), NODE_OPERATORS)
        for i, e in enumerate(expressions)
    )
    return NodeSelectorTerm(requirements, path)


# -- numa-agent.io/topology-spread-constraints -------------------------------


def compile_spread(constraints: kube.SpreadConstraints) -> tuple[SpreadConstraint, ...]:
    if len(constraints) > MAX_SPREAD_CONSTRAINTS:
        raise PathError(
            "",
            f"has {len(constraints)} constraints, more than {MAX_SPREAD_CONSTRAINTS}",
        )
    out: list[SpreadConstraint] = []
    seen: dict[tuple[Level, WhenUnsatisfiable], str] = {}
    for i, raw in enumerate(constraints):
        constraint = _spread(raw, join("", i))
        pair = (constraint.level, constraint.when_unsatisfiable)
        if pair in seen:
            raise PathError(
                constraint.path,
                f"has the topologyKey and whenUnsatisfiable of {seen[pair]} "
                f"({constraint.level}, {constraint.when_unsatisfiable}); one constraint "
                "per pair, as in Kubernetes",
            )
        seen[pair] = constraint.path
        out.append(constraint)
    return tuple(out)


def _spread(raw: kube.TopologySpreadConstraint, path: str) -> SpreadConstraint:
    for value, field, reason in (
        (
            raw.node_affinity_policy,
            "nodeAffinityPolicy",
            "spreading always counts only the domains the pod's required node affinity "
            "allows (as Honor)",
        ),
        (raw.node_taints_policy, "nodeTaintsPolicy", "NUMA nodes have no taints"),
        (
            raw.match_label_keys,
            "matchLabelKeys",
            "write the labels into labelSelector instead",
        ),
    ):
        _refuse(value, join(path, field), f"is not supported: {reason}")
    max_skew = _bounded(raw.max_skew, join(path, "maxSkew"), 1)
    level = parse_level(raw.topology_key, join(path, "topologyKey"))
    when = WhenUnsatisfiable.DO_NOT_SCHEDULE
    if raw.when_unsatisfiable is not None:
        try:
            when = WhenUnsatisfiable(raw.when_unsatisfiable)
        except ValueError:
            allowed = ", ".join(w.value for w in WhenUnsatisfiable)
            raise PathError(
                join(path, "whenUnsatisfiable"),
                f"{quote(raw.when_unsatisfiable)} is not one of {allowed}",
            ) from None
    min_domains = None
    if raw.min_domains is not None:
        where = join(path, "minDomains")
        if when is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            raise PathError(where, "can only be used with whenUnsatisfiable: DoNotSchedule")
        min_domains = _bounded(raw.min_domains, where, 1)
    selector = compile_selector(raw.label_selector, join(path, "labelSelector"))
    return SpreadConstraint(max_skew, level, when, selector, min_domains, path)


# -- shared parts ---------------------------------------------------------------


def compile_selector(raw: kube.LabelSelector, path: str) -> LabelSelector:
    """A meta/v1 LabelSelector: label syntax, operators, values; `{}` is everything."""
    labels = raw.match_labels or {}
    expressions = raw.match_expressions or ()
    if len(labels) + len(expressions) > MAX_REQUIREMENTS:
        raise PathError(
            path,
            f"has {len(labels)} matchLabels and {len(expressions)} matchExpressions, more "
            f"than {MAX_REQUIREMENTS} in all",
        )
    pairs: list[tuple[str, str]] = []
    where = join(path, "matchLabels")
    for key, value in sorted(labels.items()):
        at = f"{where}[{_cut(key)}]"
        _label_key(key, at)
        if not isinstance(value, str):
            raise PathError(at, f"must be a string, not {describe(value)}{quote_hint(value)}")
        _label_value(value, at)
        pairs.append((key, value))
    where = join(path, "matchExpressions")
    requirements = tuple(
        _requirement(e.key, e.operator, e.values, join(where, i), LABEL_OPERATORS)
        for i, e in enumerate(expressions)
    )
    return LabelSelector(tuple(pairs), requirements)


def _requirement(
    key: str,
    operator: str,
    values: Sequence[str] | None,
    path: str,
    allowed: tuple[Operator, ...],
) -> Requirement:
    _label_key(key, join(path, "key"))
    op = _operator(operator, join(path, "operator"), allowed)
    values = values or ()
    where = join(path, "values")
    if len(values) > MAX_VALUES:
        raise PathError(where, f"has {len(values)} values, more than {MAX_VALUES}")
    if op in (Operator.IN, Operator.NOT_IN):
        if not values:
            raise PathError(where, f"must list at least one value for operator {op.kubernetes}")
        if not _all_label_values(values):
            for i, value in enumerate(values):
                _label_value(value, join(where, i))
        return Requirement(key, op, frozenset(values))
    if op in (Operator.EXISTS, Operator.NOT_EXISTS):
        if values:
            raise PathError(where, f"must be empty or left out for operator {op.kubernetes}")
        return Requirement(key, op)
    if len(values) != 1:
        raise PathError(
            where, f"must be exactly one integer for operator {op}, not {len(values)} values"
        )
    bound = parse_integer(values[0])
    if bound is None:
        raise PathError(
            join(where, 0),
            f"{quote(values[0])} is not a 64-bit integer (operator {op} compares integers)",
        )
    return Requirement(key, op, frozenset(values), bound)


def _operator(text: str, path: str, allowed: tuple[Operator, ...]) -> Operator:
    spelled = {op.kubernetes: op for op in allowed}
    names = list(spelled)
    if text in spelled:
        return spelled[text]
    close = [n for n in names if n.lower() == text.lower()] or difflib.get_close_matches(
        text, names, n=1
    )
    hint = f" (did you mean {close[0]}?)" if close else ""
    if text in (Operator.GT, Operator.LT):
        hint = " (Gt and Lt compare NUMA-node labels, in nodeAffinity only)"
    raise PathError(path, f"{quote(text)} is not one of {', '.join(names)}{hint}")


def _label_key(key: str, path: str) -> None:
    problem = label_key_problem(key)
    if problem:
        raise PathError(path, f"{quote(key)} is not a valid label key: {problem}")


# Many values in one regular expression match (label_value_problem's rule), for
# speed; when it fails, label_value_problem finds the value and says why.
_LABEL_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_LABEL_VALUES = re.compile(f"{_LABEL_VALUE}(?:\n{_LABEL_VALUE})*")


def _all_label_values(values: Sequence[str]) -> bool:
    return max(map(len, values)) <= MAX_NAME and bool(_LABEL_VALUES.fullmatch("\n".join(values)))


def _label_value(value: str, path: str) -> None:
    problem = label_value_problem(value)
    if problem:
        raise PathError(path, f"{quote(value)} is not a valid label value: {problem}")


def _weight(value: int, path: str) -> int:
    if not WEIGHTS[0] <= value <= WEIGHTS[1]:
        raise PathError(
            path, f"{_cut(str(value))} is out of range: a weight is {WEIGHTS[0]}-{WEIGHTS[1]}"
        )
    return value


def _bounded(value: int, path: str, low: int) -> int:
    if value < low:
        raise PathError(path, f"{_cut(str(value))} is too small: it must be at least {low}")
    if value > INT32_MAX:
        raise PathError(path, f"{_cut(str(value))} is too large: it must be at most {INT32_MAX}")
    return value


def _cut(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(value: object, path: str, reason: str) -> None:
    """A Kubernetes field the agent does not support: refused whenever given."""
    if value is not None:
        raise PathError(path, reason)


def _count(
    so_far: Sequence[object], more: Sequence[object] | None, limit: int, path: str, what: str
) -> None:
    if more and len(so_far) + len(more) > limit:
        raise PathError(
            path, f"brings the pod to {len(so_far) + len(more)} {what}, more than {limit}"
        )
