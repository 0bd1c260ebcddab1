"""cri-resource-manager's expression tables (pkg/apis/resmgr/expression_test.go:
TestResolveRefAndKeyValue, TestSimpleOperators, TestMatching) restated as our own
inputs and expected results, plus the joint-key separators its code accepts.

Their test subjects give a container its own namespace and QoS class ("cns",
"cqos") beside its pod's ("pns", "pqos"); in Kubernetes, and here, a container
has its pod's, and a QoS class is one of three names. Those rows are restated with
the pod's values; every other input and result is theirs.
"""

from __future__ import annotations

import pytest

from agent.affinity import Expression, ExpressionError, Operator
from agent.affinity.keys import compile_key, is_separator, split_joint
from agent.workload import ContainerInfo, QoSClass
from tests.affinity.workloads import pod

Op = Operator

# The pod P1 and its container C1 of TestResolveRefAndKeyValue and TestSimpleOperators.
P1 = pod(
    "P1",
    namespace="pns",
    qosclass=QoSClass.BURSTABLE,
    labels={"l1": "plone", "l2": "pltwo", "l5": "plfive"},
)
C1 = ContainerInfo(
    name="C1",
    pod=P1,
    labels={"l1": "clone", "l2": "cltwo", "l3": "clthree"},
    tags={"t1": "ctone", "t2": "cttwo", "t3": "ctthree"},
)

# TestResolveRefAndKeyValue: (key, value); None where their `ok` is false.
RESOLVE = [
    ("name", "C1"),
    ("namespace", "pns"),  # theirs: the container's own "cns"
    ("qosclass", "Burstable"),  # theirs: the container's own "cqos"
    ("labels/l1", "clone"),
    ("labels/l2", "cltwo"),
    ("labels/l3", "clthree"),
    ("labels/l4", None),
    ("tags/t1", "ctone"),
    ("tags/t2", "cttwo"),
    ("tags/t3", "ctthree"),
    ("tags/t4", None),
    ("pod/labels/l1", "plone"),
    ("pod/labels/l2", "pltwo"),
    ("pod/labels/l3", None),
    ("pod/labels/l4", None),
    ("pod/labels/l5", "plfive"),
    # Key separator ",", value separator "-" (item 3 of issue 13: "-" separates).
    (":,-pod/qosclass,pod/namespace,pod/name,name", "Burstable-pns-P1-C1"),
]


@pytest.mark.parametrize(("key", "value"), RESOLVE)
def test_resolve_ref_and_key_value(key: str, value: str | None) -> None:
    assert compile_key(key)(C1) == value
    exists = Expression(key, Op.EXISTS).evaluate(C1)
    assert exists is (value is not None)


# TestSimpleOperators: per key, the values given to Equals, NotEqual, In and NotIn,
# and the four results.
C1_TAGS = {"t1": "ctone", "t2": "cttwo", "t4": "ctfour"}
SIMPLE_OPERATORS: list[tuple[str, tuple[tuple[str, ...], ...], tuple[bool, ...]]] = [
    ("name", (("C1",), ("C1",), ("foo", "C1"), ("foo",)), (True, False, True, True)),
    ("pod/name", (("P1",), ("P1",), ("foo", "P1"), ("foo",)), (True, False, True, True)),
    ("namespace", (("pns",), ("pns",), ("foo", "pns"), ("foo",)), (True, False, True, True)),
    ("pod/namespace", (("pns",), ("pns",), ("foo", "pns"), ("pns",)), (True, False, True, False)),
    (
        "qosclass",
        (("Burstable",), ("Burstable",), ("foo", "Burstable"), ("foo",)),
        (True, False, True, True),
    ),
    (
        "pod/qosclass",
        (("Burstable",), ("Burstable",), ("foo", "Burstable"), ("Burstable",)),
        (True, False, True, False),
    ),
    ("labels/l1", (("clone",), ("clone",), ("foo", "clone"), ("foo",)), (True, False, True, True)),
    ("labels/l2", (("cltwo",), ("cltwo",), ("foo", "cltwo"), ("foo",)), (True, False, True, True)),
    (
        "labels/l3",
        (("clthree",), ("clthree",), ("foo", "clthree"), ("clthree",)),
        (True, False, True, False),
    ),
    (
        "labels/l4",
        (("clfour",), ("clfour",), ("foo", "clfour"), ("foo",)),
        (False, True, False, True),
    ),
    ("tags/t1", (("ctone",), ("ctone",), ("foo", "ctone"), ("foo",)), (True, False, True, True)),
    ("tags/t2", (("cttwo",), ("cttwo",), ("foo", "cttwo"), ("foo",)), (True, False, True, True)),
    (
        "tags/t3",
        (("ctthree",), ("ctthree",), ("foo", "ctthree"), ("foo",)),
        (False, True, False, True),
    ),
    (
        "tags/t4",
        (("ctfour",), ("ctfour",), ("foo", "ctfour"), ("ctfour",)),
        (True, False, True, False),
    ),
    (
        "pod/labels/l1",
        (("plone",), ("plone",), ("foo", "plone"), ("foo",)),
        (True, False, True, True),
    ),
    (
        "pod/labels/l2",
        (("pltwo",), ("pltwo",), ("foo", "pltwo"), ("foo",)),
        (True, False, True, True),
    ),
    (
        "pod/labels/l3",
        (("plthree",), ("plthree",), ("foo", "plthree"), ("foo",)),
        (False, True, False, True),
    ),
    (
        "pod/labels/l4",
        (("plfour",), ("plfour",), ("foo", "plfour"), ("foo",)),
        (False, True, False, True),
    ),
    (
        "pod/labels/l5",
        (("plfive",), ("plfive",), ("foo", "plfive"), ("foo",)),
        (True, False, True, True),
    ),
]
SIMPLE_OPS = (Op.EQUALS, Op.NOT_EQUAL, Op.IN, Op.NOT_IN)


@pytest.mark.parametrize(
    ("key", "op", "values", "result"),
    [
        (key, op, values[i], results[i])
        for key, values, results in SIMPLE_OPERATORS
        for i, op in enumerate(SIMPLE_OPS)
    ],
)
def test_simple_operators(key: str, op: Operator, values: tuple[str, ...], result: bool) -> None:
    subject = ContainerInfo(name="C1", pod=P1, labels=C1.labels, tags=C1_TAGS)
    assert Expression(key, op, values).evaluate(subject) is result


# TestMatching: three pods, seven containers (their third container of P1 is also
# named "C12", a slip; it matches neither selector, so it is "C13" here).
QOS = {"P1": QoSClass.GUARANTEED, "P2": QoSClass.BURSTABLE, "P3": QoSClass.BESTEFFORT}
POD_LABELS = {"l1": "plv1", "l2": "plv2", "l5": "plv5"}
LABELS = {"l1": "clv1", "l2": "clv2", "l3": "clv3"}
MATCHING_PODS = {
    name: pod(name, namespace=ns, qosclass=QOS[name], labels=POD_LABELS)
    for name, ns in (("P1", "pns1"), ("P2", "pns2"), ("P3", "pns3"))
}
MATCHING_SUBJECTS = [
    ContainerInfo(
        name=name,
        pod=MATCHING_PODS[pod_name],
        labels=LABELS,
        tags={"t1": "ctv1", "t2": t2, "t4": "ctv4"},
    )
    for name, pod_name, t2 in (
        ("C11", "P1", "tag2"),
        ("C12", "P1", "foo"),
        ("C13", "P1", "ctv2"),
        ("C21", "P2", "tag2"),
        ("C22", "P2", "ctv2"),
        ("C23", "P2", "foo"),
        ("C3", "P3", "tag2"),
    )
]


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        # Key separator ",", value separator ":" (item 1 of issue 13); P2 is Burstable.
        (
            Expression(
                ":,:pod/qosclass,pod/namespace,pod/name,qosclass,name",
                Op.MATCHES,
                ("Burstable:*:*:*:*",),
            ),
            ["C21", "C22", "C23"],
        ),
        (Expression("tags/t2", Op.MATCHES, ("[tf][ao][go]*",)), ["C11", "C12", "C21", "C23", "C3"]),
    ],
)
def test_matching(selector: Expression, selected: list[str]) -> None:
    assert [c.name for c in MATCHING_SUBJECTS if selector.evaluate(c)] == selected


def test_matching_joins_values_with_the_value_separator() -> None:
    key = ":,:pod/qosclass,pod/namespace,pod/name,qosclass,name"
    assert split_joint(key) == (
        ("pod/qosclass", "pod/namespace", "pod/name", "qosclass", "name"),
        ":",
    )
    assert compile_key(key)(MATCHING_SUBJECTS[3]) == "Burstable:pns2:P2:Burstable:C21"


# Separators: any ASCII character but a letter, a digit, "/" and "." (their
# validSeparator), so "-", "_" and ":" too.
@pytest.mark.parametrize(
    ("char", "separates"),
    [
        *((c, True) for c in ",;:-_|+=#@~ !$%&*()[]{}<>?'\"\\`^\t"),
        *((c, False) for c in "aAzZ09/."),
        ("é", False),  # not ASCII: Go would take only its first byte
        ("", False),
        ("::", False),
    ],
)
def test_joint_key_separators(char: str, separates: bool) -> None:
    assert is_separator(char) is separates


@pytest.mark.parametrize("sep", list(",;:-_|+=#@~ !$%&*\t"))
@pytest.mark.parametrize("vsep", [":", "-", "_", ","])
def test_every_separator_pair_works_in_a_full_form_key(sep: str, vsep: str) -> None:
    key = f":{sep}{vsep}pod/name{sep}name"
    assert compile_key(key)(C1) == f"P1{vsep}C1"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (":-_pod/name-name", "P1_C1"),
        (":_-pod/name_name", "P1-C1"),
        (":::pod/name:name", "P1:C1"),  # the full form of the simple :pod/name:name
        (":pod/name:name", "P1:C1"),
        (": :pod/name name", "P1:C1"),
    ],
)
def test_full_form_keys_with_separators_crm_accepts(key: str, value: str) -> None:
    assert compile_key(key)(C1) == value


@pytest.mark.parametrize(
    "key",
    [
        ":,pod/name,name",  # one separator: the value separator is missing
        ":-name-id",
        ":_name_id",
    ],
)
def test_a_key_with_one_separator_is_refused_with_a_hint(key: str) -> None:
    # cri-resource-manager reads it as a single key of that name, which never exists.
    with pytest.raises(ExpressionError, match="a full-form joint key starts with two separators"):
        compile_key(key)
