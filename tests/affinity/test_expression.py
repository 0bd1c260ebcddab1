"""Expressions: every operator with its key present and absent, every key, joint
keys, and the errors an expression can raise on its own."""

from __future__ import annotations

import copy
import pickle

import pytest

from agent.affinity import CRI_RM_OPERATORS, Expression, ExpressionError, Operator, parse_operator
from agent.affinity.keys import compile_key
from agent.workload import QoSClass
from tests.affinity.workloads import container, pod

WEB = pod(
    "web-0", uid="uid-1", sandbox_id="sandbox-1", labels={"app": "web"}, qosclass=QoSClass.BURSTABLE
)
APP = container("app", WEB, cid="ctr-1", labels={"tier": "front"}, tags={"note": "x"})

Op = Operator

# (operator, values, result when labels/tier = "front", result when the key is absent)
OPERATOR_CASES = [
    (Op.EQUALS, ("front",), True, False),
    (Op.EQUALS, ("back",), False, False),
    (Op.NOT_EQUAL, ("front",), False, True),
    (Op.NOT_EQUAL, ("back",), True, True),
    (Op.IN, ("back", "front"), True, False),
    (Op.IN, ("back",), False, False),
    (Op.NOT_IN, ("back",), True, True),
    (Op.NOT_IN, ("back", "front"), False, True),
    (Op.EXISTS, (), True, False),
    (Op.NOT_EXISTS, (), False, True),
    (Op.ALWAYS_TRUE, (), True, True),
    (Op.MATCHES, ("fr*",), True, False),
    (Op.MATCHES, ("f?ont",), True, False),
    (Op.MATCHES, ("[ef]ront",), True, False),
    (Op.MATCHES, ("*",), True, False),
    (Op.MATCHES, ("fro",), False, False),  # a glob matches the whole value
    (Op.MATCHES, ("FRONT",), False, False),  # and is case-sensitive
    (Op.MATCHES, ("b*",), False, False),
    (Op.MATCHES_NOT, ("fr*",), False, True),
    (Op.MATCHES_NOT, ("b*",), True, True),
    (Op.MATCHES_NOT, ("*",), False, True),
    (Op.MATCHES_ANY, ("b*", "*nt"), True, False),
    (Op.MATCHES_ANY, ("b*", "x"), False, False),
    (Op.MATCHES_NONE, ("b*", "x"), True, True),
    (Op.MATCHES_NONE, ("b*", "*nt"), False, True),
]


@pytest.mark.parametrize(("op", "values", "present", "absent"), OPERATOR_CASES)
def test_operator_with_key_present_and_absent(
    op: Operator, values: tuple[str, ...], present: bool, absent: bool
) -> None:
    assert Expression("labels/tier", op, values).evaluate(APP) is present
    assert Expression("labels/missing", op, values).evaluate(APP) is absent


def test_every_operator_is_covered_both_ways() -> None:
    assert {case[0] for case in OPERATOR_CASES} == set(CRI_RM_OPERATORS)


def test_glob_metacharacters_are_not_regex() -> None:
    dotted = container("a.b", WEB)
    assert Expression("name", Op.MATCHES, ("a.b",)).evaluate(dotted)
    assert not Expression("name", Op.MATCHES, ("a.b",)).evaluate(container("axb", WEB))
    assert Expression("name", Op.MATCHES, ("a[.]?",)).evaluate(dotted)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", "app"),
        ("namespace", "shop"),
        ("qosclass", "Burstable"),
        ("id", "ctr-1"),
        ("labels/io.kubernetes.container.name", "app"),
        ("labels/tier", "front"),
        ("labels/missing", None),
        ("tags/note", "x"),
        ("tags/missing", None),
        ("pod/name", "web-0"),
        ("pod/namespace", "shop"),
        ("pod/qosclass", "Burstable"),
        ("pod/uid", "uid-1"),
        ("pod/id", "sandbox-1"),
        ("pod/labels/app", "web"),
        ("pod/labels/missing", None),
        # labels/ takes the rest of the key, slashes included
        ("labels/example.com/role", None),
    ],
)
def test_key_reads(key: str, value: str | None) -> None:
    assert compile_key(key)(APP) == value


def test_empty_ids_do_not_exist() -> None:
    fresh = container("app", pod("web-1"))  # not created yet: no container or sandbox id
    assert not Expression("id", Op.EXISTS).evaluate(fresh)
    assert not Expression("pod/id", Op.EXISTS).evaluate(fresh)
    assert Expression("id", Op.NOT_EQUAL, ("ctr-1",)).evaluate(fresh)


def test_label_with_slash_in_its_name() -> None:
    c = container("app", WEB, labels={"example.com/role": "cache"})
    assert Expression("labels/example.com/role", Op.EQUALS, ("cache",)).evaluate(c)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # The three examples.
        (":pod/qosclass:pod/name:name", "Burstable:web-0:app"),
        (":,;pod/name,name", "web-0;app"),
        (":::pod/qosclass:name", "Burstable:app"),
        # Separators may be any ASCII character that is not a letter, digit, / or .
        (": |name pod/name", "app|web-0"),
        (":+=labels/tier+tags/note", "front=x"),
        (":,:pod/name,name", "web-0:app"),
        (":-_name-pod/name", "app_web-0"),
        # A missing subkey contributes "", keeping the others in place.
        (":labels/missing:name", ":app"),
        (":name:labels/missing:pod/name", "app::web-0"),
        # Exists if any subkey exists; None (absent) only if none does.
        (":labels/missing:tags/missing", None),
        # A single-subkey joint key is just that key.
        (":name", "app"),
    ],
)
def test_joint_keys(key: str, value: str | None) -> None:
    assert compile_key(key)(APP) == value


def test_joint_key_in_an_expression() -> None:
    both = Expression(":pod/qosclass:name", Op.EQUALS, ("Burstable:app",))
    assert both.evaluate(APP)
    assert not both.evaluate(container("app", pod("db-0", qosclass=QoSClass.GUARANTEED)))
    assert not Expression(":labels/a:labels/b", Op.EXISTS).evaluate(APP)
    assert Expression(":labels/a:labels/tier", Op.EXISTS).evaluate(APP)


KEY_LIST = (
    "keys are name, namespace, qosclass, id, labels/<label>, tags/<annotation>, "
    'pod/<pod key> or a joint key starting with ":"'
)
POD_KEY_LIST = "pod keys are name, namespace, qosclass, uid, id, labels/<label>"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "io.kubernetes.container.name",
            f'key "io.kubernetes.container.name" is not a container key; {KEY_LIST} '
            '(did you mean "labels/io.kubernetes.container.name"?)',
        ),
        ("nmae", f'key "nmae" is not a container key; {KEY_LIST} (did you mean "name"?)'),
        (
            "labls/app",
            f'key "labls/app" is not a container key; {KEY_LIST} (did you mean "labels/app"?)',
        ),
        ("annotations/x", f'key "annotations/x" is not a container key; {KEY_LIST}'),
        ("labels/", 'key "labels/" names no label or tag'),
        ("tags/", 'key "tags/" names no label or tag'),
        ("pod/tags/x", f'key "pod/tags/x": "tags/x" is not a pod key; {POD_KEY_LIST}'),
        ("pod/", f'key "pod/": "" is not a pod key; {POD_KEY_LIST}'),
        ("pod/labels/", 'key "pod/labels/" names no label or tag'),
        (":", 'key ":" has an empty subkey'),
        ("::name", 'key "::name" has an empty subkey'),
        (":name:", 'key ":name:" has an empty subkey'),
        (":,;", 'key ":,;" has an empty subkey'),
        (":,;name,:id", 'key ":,;name,:id": joint keys cannot nest (":id")'),
        (
            ":name:bogus",
            f'key ":name:bogus": "bogus" is not a container key; {KEY_LIST} '
            '(did you mean "labels/bogus"?)',
        ),
        (
            ":,name,id",
            'key ":,name,id": a full-form joint key starts with two separators, one for keys '
            'and one for values, e.g. ":,;name,id"',
        ),
    ],
)
def test_bad_keys(key: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        Expression(key, Op.EXISTS)
    assert str(caught.value) == message
    assert caught.value.field == "key"


ALL_OPERATORS = (
    "Equals, NotEqual, In, NotIn, Exists, NotExists, AlwaysTrue, Matches, MatchesNot, "
    "MatchesAny, MatchesNone"
)


@pytest.mark.parametrize("op", list(CRI_RM_OPERATORS))
def test_operator_spellings(op: Operator) -> None:
    assert parse_operator(op.value) is op


def test_not_exist_is_accepted_for_not_exists() -> None:
    assert parse_operator("NotExist") is Operator.NOT_EXISTS


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("Equal", ' (did you mean "Equals"?)'),
        ("equals", ' (did you mean "Equals"?)'),
        ("NotExist ", ' (did you mean "NotExists"?)'),
        ("Gt", ""),
    ],
)
def test_unknown_operator(text: str, hint: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_operator(text)
    assert str(caught.value) == f'operator "{text}" is not one of {ALL_OPERATORS}{hint}'


@pytest.mark.parametrize(
    ("op", "values", "message"),
    [
        (Op.EQUALS, (), "values must hold exactly one value for operator Equals, not 0"),
        (
            Op.NOT_EQUAL,
            ("a", "b"),
            "values must hold exactly one value for operator NotEqual, not 2",
        ),
        (Op.MATCHES, (), "values must hold exactly one value for operator Matches, not 0"),
        (
            Op.MATCHES_NOT,
            ("a", "b"),
            "values must hold exactly one value for operator MatchesNot, not 2",
        ),
        (Op.IN, (), "values must hold one or more values for operator In, not 0"),
        (Op.NOT_IN, (), "values must hold one or more values for operator NotIn, not 0"),
        (Op.MATCHES_ANY, (), "values must hold one or more values for operator MatchesAny, not 0"),
        (
            Op.MATCHES_NONE,
            (),
            "values must hold one or more values for operator MatchesNone, not 0",
        ),
        (Op.EXISTS, ("a",), "values must hold no values for operator Exists, not 1"),
        (Op.NOT_EXISTS, ("a",), "values must hold no values for operator NotExists, not 1"),
        (Op.ALWAYS_TRUE, ("a",), "values must hold no values for operator AlwaysTrue, not 1"),
    ],
)
def test_wrong_number_of_values(op: Operator, values: tuple[str, ...], message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        Expression("name", op, values)
    assert str(caught.value) == message
    assert caught.value.field == "values"


def test_key_is_required_except_for_always_true() -> None:
    assert Expression("", Op.ALWAYS_TRUE).evaluate(APP)
    with pytest.raises(ExpressionError, match=r"^key is required for operator Exists$"):
        Expression("", Op.EXISTS)


def test_always_true_still_checks_a_key_it_was_given() -> None:
    with pytest.raises(ExpressionError, match='key "bogus" is not a container key'):
        Expression("bogus", Op.ALWAYS_TRUE)


def test_expressions_compare_by_what_they_say() -> None:
    a = Expression("name", Op.IN, ("x", "y"))
    b = Expression("name", Op.IN, ["x", "y"])  # type: ignore[arg-type]
    assert a == b and hash(a) == hash(b) and b.values == ("x", "y")
    assert a != Expression("name", Op.IN, ("y", "x"))
    assert str(a) == "name In [x, y]"
    assert str(Expression("", Op.ALWAYS_TRUE)) == "AlwaysTrue"
    assert str(Expression("labels/a", Op.EXISTS)) == "labels/a Exists"


def test_non_string_value_is_refused() -> None:
    with pytest.raises(ExpressionError, match=r"^values\[2\] 1 is not a string$"):
        Expression("name", Op.IN, ("a", 1))  # type: ignore[arg-type]


def test_expressions_pickle_and_copy() -> None:
    glob = Expression(":pod/name:name", Op.MATCHES_ANY, ("web-*:app", "x"))
    for clone in (pickle.loads(pickle.dumps(glob)), copy.deepcopy(glob), copy.copy(glob)):
        assert clone == glob and clone.evaluate(APP)
