"""The model's matching helpers: namespaces, pod terms, NUMA-node terms, spread
constraints, a pod's rules, and RuleError's rendering."""

from __future__ import annotations

import pickle

import pytest

from agent.rules import (
    EVERYTHING,
    NO_RULES,
    OWN_NAMESPACE,
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
    pod_selector,
    pod_term,
)

DB = LabelSelector((("app", "db"),))


@pytest.mark.parametrize(
    ("scope", "namespace", "expected"),
    [
        (OWN_NAMESPACE, "shop", True),
        (OWN_NAMESPACE, "web", False),
        (NamespaceScope(frozenset({"web", "ops"})), "web", True),
        (NamespaceScope(frozenset({"web", "ops"})), "shop", False),  # the list replaces own
        (NamespaceScope(all_namespaces=True), "anything", True),
        (NamespaceScope(frozenset({"web"}), all_namespaces=True), "shop", True),
    ],
)
def test_namespace_scope(scope: NamespaceScope, namespace: str, expected: bool) -> None:
    assert scope.matches("shop", namespace) is expected
    assert scope.selects_all is scope.all_namespaces


def term(
    selector: LabelSelector | None,
    namespaces: NamespaceScope = OWN_NAMESPACE,
    *,
    kind: TermKind = TermKind.ANTI_AFFINITY,
) -> Term:
    return pod_term(kind, True, 0, selector, namespaces, Level.SOCKET, "p[0]")


@pytest.mark.parametrize(
    ("pod_term", "namespace", "labels", "expected"),
    [
        (term(DB), "shop", {"app": "db"}, True),
        (term(DB), "web", {"app": "db"}, False),
        (term(DB), "shop", {"app": "web"}, False),
        (term(None), "shop", {"app": "db"}, False),  # no labelSelector: no pod
        (term(EVERYTHING), "shop", {}, True),
        (term(EVERYTHING, NamespaceScope(all_namespaces=True)), "kube-system", {}, True),
    ],
)
def test_pod_term_matches_pods(
    pod_term: Term, namespace: str, labels: dict[str, str], expected: bool
) -> None:
    assert pod_selector(pod_term).matches_pod("shop", namespace, labels) is expected


@pytest.mark.parametrize(
    ("pod_term", "expected"),
    [
        (term(EVERYTHING, NamespaceScope(all_namespaces=True)), True),
        (term(EVERYTHING), False),
        (term(EVERYTHING, NamespaceScope(frozenset({"a", "b"}))), False),
        (term(DB, NamespaceScope(all_namespaces=True)), False),
        (term(None, NamespaceScope(all_namespaces=True)), False),
    ],
)
def test_selects_every_pod_only_for_both_empty_selectors(pod_term: Term, expected: bool) -> None:
    assert pod_selector(pod_term).selects_every_pod is expected


def test_pod_term_describes_itself() -> None:
    preferred = pod_term(
        TermKind.AFFINITY, False, 50, DB, NamespaceScope(frozenset({"shop"})), Level.NUMA, "x"
    )
    assert preferred.describe() == (
        "preferred (weight 50) affinity x: pods matching app=db (namespace shop) "
        "at numa-agent.io/numa"
    )
    assert term(None).describe() == (
        "required anti-affinity p[0]: no pods (the pod's own namespace) at numa-agent.io/socket"
    )


NIC = Requirement("numa-agent.io/net.eth1", Operator.EXISTS)
BIG = Requirement("numa-agent.io/memory-mib", Operator.GT, frozenset({"65536"}), 65536)
NVME = Requirement("example.com/storage", Operator.IN, frozenset({"nvme"}))
AFFINITY = NodeAffinity(
    required=(NodeSelectorTerm((NIC, BIG), "t[0]"), NodeSelectorTerm((NVME,), "t[1]")),
    preferred=(PreferredNodeTerm(20, NodeSelectorTerm((BIG,), "p[0].preference"), "p[0]"),),
)


@pytest.mark.parametrize(
    ("labels", "allowed", "failing"),
    [
        ({"numa-agent.io/net.eth1": "true", "numa-agent.io/memory-mib": "131072"}, True, ()),
        ({"example.com/storage": "nvme"}, True, ()),  # terms are ORed
        (
            {"numa-agent.io/net.eth1": "true", "numa-agent.io/memory-mib": "1024"},
            False,
            (("t[0]", (BIG,)), ("t[1]", (NVME,))),
        ),
        ({}, False, (("t[0]", (NIC, BIG)), ("t[1]", (NVME,)))),
    ],
)
def test_node_affinity_ors_terms_and_says_what_fails(
    labels: dict[str, str], allowed: bool, failing: tuple[tuple[str, tuple[Requirement, ...]], ...]
) -> None:
    assert AFFINITY.allows(labels) is allowed
    assert tuple((t.path, reqs) for t, reqs in AFFINITY.failing(labels)) == failing


def test_node_affinity_without_required_terms_allows_every_numa_node() -> None:
    only_preferred = NodeAffinity(None, AFFINITY.preferred)
    assert only_preferred.allows({}) and only_preferred.failing({}) == ()
    assert only_preferred.preferred[0].matches({"numa-agent.io/memory-mib": "65537"})
    assert not only_preferred.preferred[0].matches({"numa-agent.io/memory-mib": "65536"})
    assert AFFINITY.required is not None
    assert (
        AFFINITY.required[0].describe() == "numa-agent.io/net.eth1, numa-agent.io/memory-mib>65536"
    )


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [("shop", {"app": "db"}, True), ("web", {"app": "db"}, False), ("shop", {}, False)],
)
def test_spread_counts_pods_of_the_own_namespace(
    namespace: str, labels: dict[str, str], expected: bool
) -> None:
    spread = SpreadConstraint(1, Level.NUMA, WhenUnsatisfiable.DO_NOT_SCHEDULE, DB, 2, "[0]")
    assert spread.matches_pod("shop", namespace, labels) is expected
    assert spread.required
    assert (
        spread.describe()
        == "[0]: maxSkew 1 at numa-agent.io/numa over app=db (DoNotSchedule, minDomains 2)"
    )


def test_pod_rules_filters_terms() -> None:
    a = term(DB, kind=TermKind.AFFINITY)
    b = pod_term(TermKind.ANTI_AFFINITY, False, 5, DB, OWN_NAMESPACE, Level.CORE, "x")
    rules = PodRules((a, b))
    assert rules.terms(TermKind.AFFINITY) == (a,)
    assert rules.terms(required=False) == (b,)
    assert rules.terms(TermKind.ANTI_AFFINITY, required=True) == ()
    assert rules.terms() == (a, b)
    assert NO_RULES.is_empty and not rules.is_empty
    assert not PodRules(node_affinity=AFFINITY).is_empty


def test_levels_are_the_issue_keys() -> None:
    assert [level.value for level in Level] == [
        "numa-agent.io/core",
        "numa-agent.io/l3",
        "numa-agent.io/numa",
        "numa-agent.io/die",
        "numa-agent.io/socket",
        "kubernetes.io/hostname",
    ]


def test_rule_error_renders_and_survives_pickling() -> None:
    err = RuleError("numa-agent.io/affinity", "podAffinity.x", "is not a field")
    assert str(err) == "numa-agent.io/affinity: podAffinity.x: is not a field"
    assert err.render(pod="shop/web-0", container="web") == (
        "container 'web' of pod shop/web-0: numa-agent.io/affinity: podAffinity.x: is not a field"
    )
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.annotation, copy.path, copy.reason, str(copy)) == (
        err.annotation,
        err.path,
        err.reason,
        str(err),
    )
    whole = RuleError("numa-agent.io/affinity", "", "is not valid YAML")
    assert str(whole) == "numa-agent.io/affinity: is not valid YAML"
    assert isinstance(err, ValueError)
