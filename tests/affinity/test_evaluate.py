"""Effective affinity A(C1, C2): scopes, matches, weights, self, and asymmetry."""

from __future__ import annotations

import pytest

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    Expression,
    Operator,
    effective_affinity,
    is_same_container,
    parse_pod_affinities,
)
from agent.terms.term import Term
from agent.workload import ContainerInfo, QoSClass
from tests.affinity.workloads import container, pod, signed_term

FARM = pod("farm-0", namespace="meadow")
PETER, SHEEP, WOLF, DOG = (container(n, FARM) for n in ("peter", "sheep", "wolf", "dog"))
PETER_RULES = parse_pod_affinities(
    {
        ANNOTATION_AFFINITY: "peter:\n- match: {key: name, operator: Equals, values: [sheep]}\n"
        "  weight: 5\n",
        ANNOTATION_ANTI_AFFINITY: "peter:\n- match: {key: name, operator: Equals, values: [wolf]}\n"
        "  weight: 5\n",
    }
).rules_for("peter")


@pytest.mark.parametrize(("other", "affinity"), [(SHEEP, 5), (WOLF, -5), (DOG, 0)])
def test_peter_sheep_wolf(other: ContainerInfo, affinity: int) -> None:
    assert effective_affinity(PETER, PETER_RULES, other) == affinity


def test_affinity_is_asymmetric() -> None:
    assert effective_affinity(SHEEP, (), PETER) == 0
    assert effective_affinity(PETER, PETER_RULES, SHEEP) == 5


def test_default_scope_is_the_pod_by_uid_not_by_name() -> None:
    # Another pod with the same name (a recreated StatefulSet pod has a new UID).
    old_farm = pod("farm-0", namespace="meadow", uid="uid-old")
    other_sheep = container("sheep", old_farm)
    assert effective_affinity(PETER, PETER_RULES, other_sheep) == 0


def rule(match: Expression, weight: int, scope: Expression | None = None) -> Term:
    return signed_term(match, scope, weight, ANNOTATION_AFFINITY)


ANY = Expression("", Operator.ALWAYS_TRUE)
SHEEP_NAME = Expression("name", Operator.EQUALS, ("sheep",))


@pytest.mark.parametrize(
    ("scope", "other", "affinity"),
    [
        # A node-wide scope reaches other pods.
        (ANY, container("sheep", pod("barn-0")), 3),
        # A namespace scope reaches pods in that namespace only.
        (
            Expression("namespace", Operator.EQUALS, ("meadow",)),
            container("sheep", pod("barn-0", namespace="meadow")),
            3,
        ),
        (
            Expression("namespace", Operator.EQUALS, ("meadow",)),
            container("sheep", pod("barn-0", namespace="city")),
            0,
        ),
        # An explicit scope replaces the default: it can even leave the own pod out.
        (Expression("pod/name", Operator.NOT_EQUAL, ("farm-0",)), SHEEP, 0),
    ],
)
def test_explicit_scope(scope: Expression, other: ContainerInfo, affinity: int) -> None:
    assert effective_affinity(PETER, [rule(SHEEP_NAME, 3, scope)], other) == affinity


def test_weights_of_all_matching_rules_add_up() -> None:
    rules = [
        rule(SHEEP_NAME, 4),
        rule(Expression("name", Operator.MATCHES, ("s*",)), 2),
        rule(Expression("name", Operator.EQUALS, ("wolf",)), 100),
        signed_term(SHEEP_NAME, None, -1, ANNOTATION_ANTI_AFFINITY),
        rule(SHEEP_NAME, 0),
    ]
    assert effective_affinity(PETER, rules, SHEEP) == 4 + 2 - 1
    assert effective_affinity(PETER, rules, WOLF) == 100


EVERYTHING = [rule(Expression("name", Operator.EXISTS), 7, ANY)]


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (PETER, True),
        # Same pod UID and name: the same container, even as a different object.
        (container("peter", FARM, cid="new-id"), True),
        # Same non-empty runtime id.
        (container("peter-renamed", pod("elsewhere"), cid="c-1"), True),
        # Same name in another pod is another container.
        (container("peter", pod("farm-1")), False),
        # Empty ids do not make containers the same.
        (container("sheep", FARM, cid=""), False),
    ],
)
def test_no_affinity_to_itself(other: ContainerInfo, same: bool) -> None:
    me = container("peter", FARM, cid="c-1")
    assert is_same_container(me, other) is same
    assert effective_affinity(me, EVERYTHING, other) == (0 if same else 7)


def test_shorthand_matches_the_kubelet_container_name_label() -> None:
    rules = parse_pod_affinities({ANNOTATION_AFFINITY: "peter: [sheep]"}).rules_for("peter")
    assert effective_affinity(PETER, rules, SHEEP) == 1
    # Without kubelet's io.kubernetes.container.name label the shorthand cannot match.
    unlabelled = ContainerInfo(name="sheep", pod=FARM)
    assert effective_affinity(PETER, rules, unlabelled) == 0


def test_joint_key_rule_across_pods() -> None:
    # Pull towards Guaranteed containers named "db" in any pod.
    joint = Expression(":pod/qosclass:name", Operator.EQUALS, ("Guaranteed:db",))
    rules = [rule(joint, 9, ANY)]
    assert (
        effective_affinity(PETER, rules, container("db", pod("db-0", qosclass=QoSClass.GUARANTEED)))
        == 9
    )
    assert effective_affinity(PETER, rules, container("db", pod("db-1"))) == 0


def test_no_rules() -> None:
    assert effective_affinity(PETER, (), SHEEP) == 0
