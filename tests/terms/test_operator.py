"""One set of operators for both annotation languages: one meaning, each language's
own spelling and allowed list (agent/terms/operator.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.affinity import CRI_RM_OPERATORS, Expression, ExpressionError, parse_operator
from agent.rules import RuleError, parse_pod_rules
from agent.rules.selector import LABEL_OPERATORS, NODE_OPERATORS, Requirement
from agent.terms.operator import Operator, value_test
from agent.workload import ContainerInfo, PodInfo, QoSClass

VALUES = st.sampled_from(["db", "web", "", "7", "10"])


def holder(labels: dict[str, str]) -> ContainerInfo:
    return ContainerInfo("c", PodInfo("u", "p", "ns", QoSClass.BURSTABLE, labels=labels))


@given(
    op=st.sampled_from(LABEL_OPERATORS),
    values=st.lists(VALUES, min_size=1, max_size=3),
    labels=st.dictionaries(st.sampled_from(["app", "tier"]), VALUES, max_size=2),
)
def test_both_languages_mean_the_same_by_each_shared_operator(
    op: Operator, values: list[str], labels: dict[str, str]
) -> None:
    """A Kubernetes requirement over a pod label and a cri-resource-manager expression
    over the same label (`pod/labels/app`) select the same pods."""
    given_values = values if op in (Operator.IN, Operator.NOT_IN) else []
    kube = Requirement("app", op, frozenset(given_values))
    crm = Expression("pod/labels/app", op, tuple(given_values))
    assert kube.matches(labels) == crm.evaluate(holder(labels))


@pytest.mark.parametrize(
    ("op", "values", "absent"),
    [
        (Operator.EQUALS, ("a",), False),
        (Operator.NOT_EQUAL, ("a",), True),
        (Operator.IN, ("a",), False),
        (Operator.NOT_IN, ("a",), True),
        (Operator.EXISTS, (), False),
        (Operator.NOT_EXISTS, (), True),
        (Operator.ALWAYS_TRUE, (), True),
        (Operator.MATCHES, ("a*",), False),
        (Operator.MATCHES_NOT, ("a*",), True),
        (Operator.MATCHES_ANY, ("a*",), False),
        (Operator.MATCHES_NONE, ("a*",), True),
        (Operator.GT, ("1",), False),
        (Operator.LT, ("1",), False),
    ],
)
def test_an_absent_value_makes_positive_operators_false_and_negative_ones_true(
    op: Operator, values: tuple[str, ...], absent: bool
) -> None:
    assert value_test(op, values)(None) is absent


def test_every_operator_is_in_one_enum_and_each_language_allows_its_own() -> None:
    assert set(CRI_RM_OPERATORS) | set(NODE_OPERATORS) == set(Operator)
    assert set(LABEL_OPERATORS) <= set(CRI_RM_OPERATORS)
    assert Operator.GT not in CRI_RM_OPERATORS
    # One operator, two spellings.
    assert parse_operator("NotExists") is parse_operator("NotExist") is Operator.NOT_EXISTS
    assert Operator.NOT_EXISTS.kubernetes == "DoesNotExist"
    with pytest.raises(ExpressionError, match="is not one of"):
        parse_operator("Gt")


def _with_operator(operator: str) -> dict[str, str]:
    term = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": operator}]},
        "topologyKey": "numa-agent.io/numa",
    }
    text = '{"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [%s]}}'
    return {"numa-agent.io/affinity": text % json.dumps(term)}


def test_kubernetes_spells_not_exists_its_own_way() -> None:
    (term,) = parse_pod_rules(_with_operator("DoesNotExist")).pod_terms
    selector = term.selector.describe()
    assert "!app" in selector
    with pytest.raises(
        RuleError, match='"NotExists" is not one of In, NotIn, Exists, DoesNotExist'
    ):
        parse_pod_rules(_with_operator("NotExists"))
