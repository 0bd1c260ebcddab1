"""Property tests: no annotation text makes parse_pod_rules raise anything but
RuleError, and rules written out as YAML or JSON come back as the same model."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    NO_RULES,
    LabelSelector,
    Level,
    NamespaceScope,
    NodeAffinity,
    NodeSelectorTerm,
    Operator,
    PodRules,
    PreferredNodeTerm,
    Requirement,
    RuleError,
    SpreadConstraint,
    Term,
    TermKind,
    WhenUnsatisfiable,
    parse_pod_rules,
    pod_term,
)
from agent.rules.selector import LABEL_OPERATORS, NODE_OPERATORS
from tests.affinity.test_properties import YAMLISH

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def check(annotations: dict[str, str]) -> PodRules | RuleError:
    """The contract: PodRules or RuleError naming one of the two annotations."""
    try:
        return parse_pod_rules(annotations)
    except RuleError as err:
        assert err.annotation in (ANNOTATION_AFFINITY, ANNOTATION_SPREAD)
        assert str(err).startswith(err.annotation + ": ")
        assert len(str(err)) < 2000, "messages stay short whatever the input"
        str(err).encode("utf-8")  # loggable, and fit for a gRPC status
        return err


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_random_text(affinity: str, spread: str) -> None:
    check({ANNOTATION_AFFINITY: affinity, ANNOTATION_SPREAD: spread})


@settings(max_examples=300, deadline=None)
@given(YAMLISH, YAMLISH)
def test_random_yamlish_text(affinity: str, spread: str) -> None:
    check({ANNOTATION_AFFINITY: affinity, ANNOTATION_SPREAD: spread})


FIELDS = st.sampled_from(
    [
        "nodeAffinity",
        "podAffinity",
        "podAntiAffinity",
        REQ,
        PREF,
        "requiredDuringSchedulingRequiredDuringExecution",
        "nodeSelectorTerms",
        "matchExpressions",
        "matchFields",
        "matchLabels",
        "labelSelector",
        "namespaceSelector",
        "namespaces",
        "topologyKey",
        "weight",
        "podAffinityTerm",
        "preference",
        "key",
        "operator",
        "values",
        "maxSkew",
        "whenUnsatisfiable",
        "minDomains",
        "nodeAffinityPolicy",
        "matchLabelKeys",
    ]
)
SCALARS = (
    st.text(max_size=10)
    | st.integers()
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=True)
    | st.sampled_from(
        [
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
            "Gt",
            "Lt",
            "numa-agent.io/numa",
            "kubernetes.io/hostname",
            "DoNotSchedule",
            "ScheduleAnyway",
            "app",
            "-1",
            "65536",
        ]
    )
)
STRUCTURES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(FIELDS | st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(STRUCTURES, STRUCTURES)
def test_random_kubernetes_like_structures(affinity: Any, spread: Any) -> None:
    for dump in (yaml.safe_dump, json.dumps, lambda d: yaml.dump(d)):
        check({ANNOTATION_AFFINITY: dump(affinity), ANNOTATION_SPREAD: dump(spread)})


# -- round trip: a valid model, written out, parses back to itself -------------

NAMES = st.sampled_from(
    ["app", "tier", "example.com/role", "numa-agent.io/memory-mib", "a.b/c-d_e"]
)
VALUES = st.sampled_from(["db", "web", "", "cache-1", "x.y_z", "A1"])
INTS = st.integers(-(2**63), 2**63 - 1).map(str)


@st.composite
def requirements(draw: st.DrawFn, node: bool) -> Requirement:
    ops = list(NODE_OPERATORS if node else LABEL_OPERATORS)
    op = draw(st.sampled_from(ops))
    key = draw(NAMES)
    if op in (Operator.IN, Operator.NOT_IN):
        return Requirement(key, op, frozenset(draw(st.lists(VALUES, min_size=1, max_size=4))))
    if op in (Operator.GT, Operator.LT):
        text = draw(INTS)
        return Requirement(key, op, frozenset({text}), int(text))
    return Requirement(key, op)


@st.composite
def selectors(draw: st.DrawFn) -> LabelSelector:
    pairs = draw(st.dictionaries(NAMES, VALUES, max_size=3))
    reqs = draw(st.lists(requirements(False), max_size=3))
    return LabelSelector(tuple(sorted(pairs.items())), tuple(reqs))


def requirement_data(r: Requirement) -> dict[str, Any]:
    data: dict[str, Any] = {"key": r.key, "operator": r.operator.kubernetes}
    if r.values:
        data["values"] = sorted(r.values)
    return data


def selector_data(s: LabelSelector) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if s.match_labels:
        data["matchLabels"] = dict(s.match_labels)
    if s.requirements:
        data["matchExpressions"] = [requirement_data(r) for r in s.requirements]
    return data


@st.composite
def affinities(draw: st.DrawFn) -> tuple[dict[str, Any], PodRules]:
    data: dict[str, Any] = {}
    terms: list[Term] = []
    for part, kind in (
        ("podAffinity", TermKind.AFFINITY),
        ("podAntiAffinity", TermKind.ANTI_AFFINITY),
    ):
        body: dict[str, Any] = {}
        for field in (REQ, PREF):
            items = []
            for i in range(draw(st.integers(0, 2))):
                selector = draw(st.none() | selectors())
                names = draw(st.lists(st.sampled_from(["shop", "web", "kube-system"]), max_size=2))
                everywhere = draw(st.booleans())
                level = draw(st.sampled_from(list(Level)))
                term: dict[str, Any] = {"topologyKey": level.value}
                if selector is not None:
                    term["labelSelector"] = selector_data(selector)
                if names:
                    term["namespaces"] = names
                if everywhere:
                    term["namespaceSelector"] = {}
                scope = NamespaceScope(frozenset(names), everywhere)
                path = f"{part}.{field}[{i}]"
                weight = 0
                if field == PREF:
                    weight = draw(st.integers(1, 100))
                    term = {"weight": weight, "podAffinityTerm": term}
                    path += ".podAffinityTerm"
                items.append(term)
                terms.append(pod_term(kind, field == REQ, weight, selector, scope, level, path))
            if items:
                body[field] = items
        if body:
            data[part] = body
    node: NodeAffinity | None = None
    required = draw(st.lists(st.lists(requirements(True), min_size=1, max_size=3), max_size=2))
    preferred = draw(
        st.lists(
            st.tuples(st.integers(1, 100), st.lists(requirements(True), min_size=1, max_size=3)),
            max_size=2,
        )
    )
    if required or preferred:
        body = {}
        where = f"nodeAffinity.{REQ}.nodeSelectorTerms"
        if required:
            body[REQ] = {
                "nodeSelectorTerms": [
                    {"matchExpressions": [requirement_data(r) for r in t]} for t in required
                ]
            }
        if preferred:
            body[PREF] = [
                {"weight": w, "preference": {"matchExpressions": [requirement_data(r) for r in t]}}
                for w, t in preferred
            ]
        data["nodeAffinity"] = body
        node = NodeAffinity(
            tuple(NodeSelectorTerm(tuple(t), f"{where}[{i}]") for i, t in enumerate(required))
            or None,
            tuple(
                PreferredNodeTerm(
                    w,
                    NodeSelectorTerm(tuple(t), f"nodeAffinity.{PREF}[{i}].preference"),
                    f"nodeAffinity.{PREF}[{i}]",
                )
                for i, (w, t) in enumerate(preferred)
            ),
        )
    return data, PodRules(tuple(terms), node)


@st.composite
def spreads(draw: st.DrawFn) -> tuple[list[dict[str, Any]], tuple[SpreadConstraint, ...]]:
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(list(Level)), st.sampled_from(list(WhenUnsatisfiable))),
            unique=True,
            max_size=4,
        )
    )
    data, model = [], []
    for i, (level, when) in enumerate(pairs):
        selector = draw(selectors())
        skew = draw(st.integers(1, 2**31 - 1))
        domains = (
            draw(st.none() | st.integers(1, 8))
            if when is WhenUnsatisfiable.DO_NOT_SCHEDULE
            else None
        )
        item: dict[str, Any] = {
            "maxSkew": skew,
            "topologyKey": level.value,
            "labelSelector": selector_data(selector),
        }
        if when is WhenUnsatisfiable.SCHEDULE_ANYWAY or draw(st.booleans()):
            item["whenUnsatisfiable"] = when.value
        if domains is not None:
            item["minDomains"] = domains
        data.append(item)
        model.append(SpreadConstraint(skew, level, when, selector, domains, f"[{i}]"))
    return data, tuple(model)


@settings(max_examples=200, deadline=None)
@given(affinities(), spreads(), st.booleans())
def test_rules_round_trip_through_yaml_and_json(
    affinity: tuple[dict[str, Any], PodRules],
    spread: tuple[list[dict[str, Any]], tuple[SpreadConstraint, ...]],
    as_json: bool,
) -> None:
    dump = json.dumps if as_json else yaml.safe_dump
    rules = parse_pod_rules(
        {ANNOTATION_AFFINITY: dump(affinity[0]), ANNOTATION_SPREAD: dump(spread[0])}
    )
    expected = PodRules(affinity[1].pod_terms, affinity[1].node_affinity, spread[1])
    assert rules == expected
    assert rules.is_empty is (expected == NO_RULES)
