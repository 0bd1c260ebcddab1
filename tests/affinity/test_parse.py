"""Parsing annotations: the cri-resource-manager document's examples, every default,
every error with its whole message, the limits, and which containers an error concerns."""

from __future__ import annotations

import pickle
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    MAX_ANNOTATION_BYTES,
    MAX_DEPTH,
    NO_AFFINITIES,
    AnnotationError,
    Expression,
    Operator,
    parse_pod_affinities,
)
from agent.rules import MAX_DEPTH as RULES_MAX_DEPTH
from tests.affinity.workloads import Rule, rules_of

AFF = ANNOTATION_AFFINITY
ANTI = ANNOTATION_ANTI_AFFINITY
NAME_KEY = "labels/io.kubernetes.container.name"
Op = Operator


def parse(affinity: str | None = None, anti: str | None = None) -> dict[str, tuple[Rule, ...]]:
    """Rules by container for annotations that must be valid."""
    annotations = {}
    if affinity is not None:
        annotations[AFF] = textwrap.dedent(affinity)
    if anti is not None:
        annotations[ANTI] = textwrap.dedent(anti)
    parsed = parse_pod_affinities(annotations)
    assert parsed.errors == (), [str(e) for e in parsed.errors]
    return {name: rules_of(parsed, name) for name in parsed.rules}


def only_error(annotation: str, text: str) -> AnnotationError:
    parsed = parse_pod_affinities({annotation: textwrap.dedent(text)})
    assert len(parsed.errors) == 1, [str(e) for e in parsed.errors]
    return parsed.errors[0]


# --- the examples of cri-resource-manager's container affinity document ----------


def test_peter_sheep_wolf() -> None:
    rules = parse(
        """\
        peter:
        - match:
            key: name
            operator: Equals
            values:
            - sheep
          weight: 5
        """,
        """\
        peter:
        - match:
            key: name
            operator: Equals
            values:
            - wolf
          weight: 5
        """,
    )
    assert rules == {
        "peter": (
            Rule(Expression("name", Op.EQUALS, ("sheep",)), None, 5, AFF),
            Rule(Expression("name", Op.EQUALS, ("wolf",)), None, -5, ANTI),
        )
    }


SHORTHAND = (
    """\
    container3: [ container1 ]
    """,
    """\
    container3: [ container2 ]
    container4: [ container2, container3 ]
    """,
)
FULL_SYNTAX = (
    """\
    container3:
    - match:
        key: labels/io.kubernetes.container.name
        operator: In
        values:
        - container1
    """,
    """\
    container3:
    - match:
        key: labels/io.kubernetes.container.name
        operator: In
        values:
        - container2
    container4:
    - match:
        key: labels/io.kubernetes.container.name
        operator: In
        values:
        - container2
        - container3
    """,
)


def test_shorthand_means_what_cri_resource_managers_code_does() -> None:
    # Their document lists container3's and container4's rules; their parser also
    # gives every container a list names the rule back (TestSimpleParsingSymmetry).
    def mirror(names: tuple[str, ...], annotation: str) -> Rule:
        weight = 1 if annotation == AFF else -1
        return Rule(Expression(NAME_KEY, Op.IN, names), None, weight, annotation, mirrored=True)

    assert parse(*SHORTHAND) == {
        "container3": (
            Rule(Expression(NAME_KEY, Op.IN, ("container1",)), None, 1, AFF),
            Rule(Expression(NAME_KEY, Op.IN, ("container2",)), None, -1, ANTI),
            mirror(("container4",), ANTI),
        ),
        "container4": (
            Rule(Expression(NAME_KEY, Op.IN, ("container2", "container3")), None, -1, ANTI),
        ),
        "container1": (mirror(("container3",), AFF),),
        "container2": (mirror(("container3", "container4"), ANTI),),
    }


def test_the_full_syntax_gives_the_owners_the_same_rules_but_mirrors_nothing() -> None:
    shorthand, full = parse(*SHORTHAND), parse(*FULL_SYNTAX)
    assert full == {
        name: tuple(r for r in rules if not r.mirrored)
        for name, rules in shorthand.items()
        if any(not r.mirrored for r in rules)
    }
    assert not any(r.mirrored for rules in full.values() for r in rules)


def test_internal_form_with_explicit_weights_in_the_affinity_annotation() -> None:
    # The topology-aware policy document shows the shorthand "represented internally"
    # as affinity rules with weights 1 and -1 (written with the labels/ key here).
    # For the containers it lists that holds; the mirrored rules it leaves out.
    internal = parse(
        """\
        container3:
        - match:
            key: labels/io.kubernetes.container.name
            operator: In
            values:
            - container1
          weight: 1
        - match:
            key: labels/io.kubernetes.container.name
            operator: In
            values:
            - container2
          weight: -1
        container4:
        - match:
            key: labels/io.kubernetes.container.name
            operator: In
            values:
            - container2
            - container3
          weight: -1
        """
    )

    def meaning(rules: dict[str, tuple[Rule, ...]]) -> dict[str, list[tuple[object, ...]]]:
        return {
            n: [(r.match, r.scope, r.weight) for r in rs if not r.mirrored]
            for n, rs in rules.items()
            if n in ("container3", "container4")
        }

    assert meaning(internal) == meaning(parse(*SHORTHAND))


def test_general_syntax_with_scope_match_and_weight() -> None:
    rules = parse(
        """\
        container1:
          - scope:
              key: pod/labels/app
              operator: In
              values:
              - db
              - cache
            match:
              key: name
              operator: MatchesAny
              values:
              - "replica-*"
              - primary
            weight: 40
        """,
        """\
        container1:
          - scope:
              key: namespace
              operator: Equals
              values: [shop]
            match:
              key: tags/role
              operator: Exists
            weight: 7
        """,
    )
    assert rules == {
        "container1": (
            Rule(
                Expression("name", Op.MATCHES_ANY, ("replica-*", "primary")),
                Expression("pod/labels/app", Op.IN, ("db", "cache")),
                40,
                AFF,
            ),
            Rule(
                Expression("tags/role", Op.EXISTS),
                Expression("namespace", Op.EQUALS, ("shop",)),
                -7,
                ANTI,
            ),
        )
    }


# --- defaults -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "weight_line", "weight"),
    [
        (AFF, "", 1),
        (ANTI, "", -1),
        (AFF, "weight: ~", 1),
        (ANTI, "weight: null", -1),
        (AFF, "weight: 0", 0),
        (ANTI, "weight: 0", 0),
        (AFF, "weight: -7", -7),
        (AFF, "weight: 1000", 1000),
        (AFF, "weight: -1000", -1000),
        (ANTI, "weight: 5", -5),
        (ANTI, "weight: 1000", -1000),
        (AFF, "weight: 0x10", 16),  # YAML 1.1 integer forms are integers
        (AFF, "weight: 1_000", 1000),
    ],
)
def test_weights(annotation: str, weight_line: str, weight: int) -> None:
    text = f"c:\n- match: {{key: name, operator: Exists}}\n  {weight_line}\n"
    rules = parse_pod_affinities({annotation: text}).rules_for("c")
    assert [r.signed for r in rules] == [weight]


def test_default_scope_and_kind() -> None:
    (rule,) = parse("c:\n- match: {key: name, operator: Exists}\n")["c"]
    assert rule.scope is None
    assert (
        not parse_pod_affinities({AFF: "c:\n- match: {key: name, operator: Exists}\n"})
        .rules_for("c")[0]
        .required
    )
    (rule,) = parse("c:\n- {match: {key: name, operator: Exists}, scope: ~}\n")["c"]
    assert rule.scope is None


@pytest.mark.parametrize("values", ["", "values: []", "values: ~", "values:"])
def test_operators_without_values_accept_no_or_empty_values(values: str) -> None:
    text = f"c:\n- match:\n    key: name\n    operator: NotExist\n    {values}\n"
    (rule,) = parse(text)["c"]
    assert rule.match == Expression("name", Op.NOT_EXISTS)


def test_always_true_needs_no_key() -> None:
    (rule,) = parse("c:\n- match: {operator: AlwaysTrue}\n")["c"]
    assert rule.match == Expression("", Op.ALWAYS_TRUE)


def test_explicit_string_tag_makes_a_number_a_string() -> None:
    (rule,) = parse("c:\n- match: {key: labels/v, operator: In, values: [!!str 1, '2']}\n")["c"]
    assert rule.match.values == ("1", "2")


@pytest.mark.parametrize("text", ["", "   \n", "# nothing yet\n", "~", "null"])
def test_empty_annotation_has_no_rules(text: str) -> None:
    parsed = parse_pod_affinities({AFF: text})
    assert parsed.errors == () and not parsed.has_rules and parsed.rules_for("c") == ()


def test_empty_list_has_no_rules() -> None:
    parsed = parse_pod_affinities({AFF: "c: []"})
    assert parsed.errors == () and parsed.rules_for("c") == ()


def test_pod_without_annotations() -> None:
    parsed = parse_pod_affinities({"other": "x"})
    assert parsed is NO_AFFINITIES
    assert not parsed.has_rules and parsed.errors == () and parsed.rules_for("any") == ()


def test_has_rules() -> None:
    assert parse_pod_affinities({AFF: "a: [b]"}).has_rules
    assert not parse_pod_affinities({AFF: "a: []"}).has_rules


# --- errors -----------------------------------------------------------------------

ALL_OPERATORS = (
    "Equals, NotEqual, In, NotIn, Exists, NotExists, AlwaysTrue, Matches, MatchesNot, "
    "MatchesAny, MatchesNone"
)

# (annotation, text, container, rule, field, whole message)
ERRORS = [
    (
        ANTI,
        """\
        web:
        - match: {key: name, operator: In, values: [db]}
        - match: {key: name, operator: Equal, values: [db]}
        """,
        "web",
        2,
        "match.operator",
        f'{ANTI}: container "web", rule 2: match.operator "Equal" is not one of '
        f'{ALL_OPERATORS} (did you mean "Equals"?)',
    ),
    (
        AFF,
        "web:\n- weight: 3\n",
        "web",
        1,
        "match",
        f'{AFF}: container "web", rule 1: match is missing: a rule needs a match expression',
    ),
    (
        AFF,
        "web:\n- match: {key: name, values: [db]}\n",
        "web",
        1,
        "match.operator",
        f'{AFF}: container "web", rule 1: match.operator is missing; it is one of {ALL_OPERATORS}',
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Equals}\n",
        "web",
        1,
        "match.values",
        f'{AFF}: container "web", rule 1: match.values must hold exactly one value for '
        "operator Equals, not 0",
    ),
    (
        AFF,
        "web:\n- match: {operator: Equals, values: [db]}\n",
        "web",
        1,
        "match.key",
        f'{AFF}: container "web", rule 1: match.key is required for operator Equals',
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: In, values: db}\n",
        "web",
        1,
        "match.values",
        f'{AFF}: container "web", rule 1: match.values must be a list, not the string "db"',
    ),
    (
        AFF,
        "web:\n- match: {key: labels/v, operator: In, values: [a, 1, true]}\n",
        "web",
        1,
        "match.values[2]",
        f'{AFF}: container "web", rule 1: match.values[2] is 1, a YAML int, not a string; '
        'quote it: "1"',
    ),
    (
        AFF,
        "web:\n- match: {key: labels/v, operator: In, values: [on]}\n",
        "web",
        1,
        "match.values[1]",
        f'{AFF}: container "web", rule 1: match.values[1] is on, a YAML bool, not a string; '
        'quote it: "on"',
    ),
    (
        AFF,
        "web:\n- match: {key: labels/v, operator: In, values: [[a]]}\n",
        "web",
        1,
        "match.values[1]",
        f'{AFF}: container "web", rule 1: match.values[1] must be a string, not a list',
    ),
    (
        AFF,
        "web:\n- match: {key: labels/v, operator: In, values: [~]}\n",
        "web",
        1,
        "match.values[1]",
        f'{AFF}: container "web", rule 1: match.values[1] is empty; expected a string',
    ),
    (
        AFF,
        "web:\n- match: {key: 3, operator: Exists}\n",
        "web",
        1,
        "match.key",
        f'{AFF}: container "web", rule 1: match.key is 3, a YAML int, not a string; quote it: "3"',
    ),
    (
        AFF,
        "web:\n- match: {key: io.kubernetes.container.name, operator: In, values: [db]}\n",
        "web",
        1,
        "match.key",
        f'{AFF}: container "web", rule 1: match.key "io.kubernetes.container.name" is not a '
        "container key; keys are name, namespace, qosclass, id, labels/<label>, "
        'tags/<annotation>, pod/<pod key> or a joint key starting with ":" '
        '(did you mean "labels/io.kubernetes.container.name"?)',
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists, value: [x]}\n",
        "web",
        1,
        "match.value",
        f'{AFF}: container "web", rule 1: "match.value" is not a field of an expression; '
        "an expression has key, operator, values",
    ),
    (
        AFF,
        "web:\n- match: name\n",
        "web",
        1,
        "match",
        f'{AFF}: container "web", rule 1: match must be an expression (a mapping with key, '
        'operator, values), not the string "name"',
    ),
    (
        AFF,
        "web:\n- scope: [x]\n  match: {key: name, operator: Exists}\n",
        "web",
        1,
        "scope",
        f'{AFF}: container "web", rule 1: scope must be an expression (a mapping with key, '
        "operator, values), not a list",
    ),
    (
        AFF,
        "web:\n- scope: {key: name, operator: In}\n  match: {key: name, operator: Exists}\n",
        "web",
        1,
        "scope.values",
        f'{AFF}: container "web", rule 1: scope.values must hold one or more values for '
        "operator In, not 0",
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  wieght: 2\n",
        "web",
        1,
        "wieght",
        f'{AFF}: container "web", rule 1: "wieght" is not a field of a rule; '
        "a rule has match, scope, weight",
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  weight: 1001\n",
        "web",
        1,
        "weight",
        f'{AFF}: container "web", rule 1: weight 1001 is out of range [-1000, 1000]',
    ),
    (
        ANTI,
        "web:\n- match: {key: name, operator: Exists}\n  weight: -5\n",
        "web",
        1,
        "weight",
        f'{ANTI}: container "web", rule 1: weight -5 is out of range [0, 1000]; an '
        "anti-affinity weight is a strength that pushes (write 5 to push with weight -5)",
    ),
    (
        ANTI,
        "web:\n- match: {key: name, operator: Exists}\n  weight: 1001\n",
        "web",
        1,
        "weight",
        f'{ANTI}: container "web", rule 1: weight 1001 is out of range [0, 1000]; an '
        "anti-affinity weight is a strength that pushes",
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  weight: '5'\n",
        "web",
        1,
        "weight",
        f'{AFF}: container "web", rule 1: weight "5" is not an integer in [-1000, 1000]',
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  weight: 2.5\n",
        "web",
        1,
        "weight",
        f'{AFF}: container "web", rule 1: weight 2.5 (a YAML float) is not an integer in '
        "[-1000, 1000]",
    ),
    (
        # An explicit int tag on nothing: once an IndexError out of PyYAML's constructor.
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  weight: !!int \n",
        "web",
        1,
        "weight",
        f'{AFF}: container "web", rule 1: weight  (a YAML int) is not an integer in [-1000, 1000]',
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n  weight: true\n",
        "web",
        1,
        "weight",
        f'{AFF}: container "web", rule 1: weight true (a YAML bool) is not an integer in '
        "[-1000, 1000]",
    ),
    (
        AFF,
        "web:\n- match: {key: name, operator: Exists}\n- db\n",
        "web",
        2,
        None,
        f'{AFF}: container "web", rule 2: expected a rule (a mapping with match, scope, '
        'weight), not the string "db": a list holds either rules or container names, not both',
    ),
    (
        AFF,
        "web: [db, {match: {key: name, operator: Exists}}]\n",
        "web",
        None,
        "item 2",
        f'{AFF}: container "web": item 2 is a rule, but item 1 is a container name: a list '
        "holds either rules or container names, not both",
    ),
    (
        AFF,
        "web: [db, 7]\n",
        "web",
        None,
        "item 2",
        f'{AFF}: container "web": item 2 is 7, a YAML int, not a container name; quote it: "7"',
    ),
    (
        AFF,
        "web: [db, '']\n",
        "web",
        None,
        "item 2",
        f'{AFF}: container "web": item 2 is an empty container name',
    ),
    (
        AFF,
        "web: db\n",
        "web",
        None,
        None,
        f'{AFF}: container "web": expected a list of rules or of container names, not the '
        'string "db"',
    ),
    (
        AFF,
        "web:\n",
        "web",
        None,
        None,
        f'{AFF}: container "web": expected a list of rules or of container names, not a YAML null',
    ),
    # Errors of the annotation as a whole: no container.
    (
        AFF,
        "[web, db]\n",
        None,
        None,
        None,
        f"{AFF}: must be a mapping from container name to a list of rules or of container "
        "names, not a list",
    ),
    (
        AFF,
        "just text\n",
        None,
        None,
        None,
        f"{AFF}: must be a mapping from container name to a list of rules or of container "
        'names, not the string "just text"',
    ),
    (
        AFF,
        "web: [db\n",
        None,
        None,
        None,
        f"{AFF}: is not valid YAML: expected ',' or ']', but got '<stream end>' at line 2, "
        "column 1 (while parsing a flow sequence)",
    ),
    (
        AFF,
        "web: [a]\n---\ndb: [b]\n",
        None,
        None,
        None,
        f"{AFF}: is not valid YAML: but found another document at line 2, column 1 "
        "(expected a single document in the stream)",
    ),
    (
        AFF,
        "web: [a]\nweb: [b]\n",
        None,
        None,
        None,
        f'{AFF}: has the key "web" twice in one mapping (lines 1 and 2)',
    ),
    (
        AFF,
        "1: [a]\n",
        None,
        None,
        None,
        f'{AFF}: container name 1 is a YAML int, not a string; quote it: "1"',
    ),
    (
        AFF,
        "'': [a]\n",
        None,
        None,
        None,
        f"{AFF}: a container name is empty",
    ),
    (
        AFF,
        "? [a]\n: [b]\n",
        None,
        None,
        None,
        f"{AFF}: has a list or mapping as a mapping key at line 1",
    ),
    (
        AFF,
        "web: !!set {a, b}\n",
        None,
        None,
        None,
        f"{AFF}: uses YAML tag tag:yaml.org,2002:set at line 1, which is not supported here",
    ),
    (
        AFF,
        "web: !!python/object:os.system [a]\n",
        None,
        None,
        None,
        f"{AFF}: uses YAML tag tag:yaml.org,2002:python/object:os.system at line 1, which is "
        "not supported here",
    ),
    (
        AFF,
        "web: [a\x00]\n",
        None,
        None,
        None,
        f"{AFF}: is not valid YAML: unacceptable character #x0000: special characters are not "
        'allowed in "<unicode string>", position 7',
    ),
]


@pytest.mark.parametrize(("annotation", "text", "container", "rule", "field", "message"), ERRORS)
def test_errors(
    annotation: str,
    text: str,
    container: str | None,
    rule: int | None,
    field: str | None,
    message: str,
) -> None:
    error = only_error(annotation, text)
    assert str(error) == message
    assert (error.annotation, error.container, error.rule, error.field) == (
        annotation,
        container,
        rule,
        field,
    )


def test_every_bad_rule_of_a_container_is_reported() -> None:
    parsed = parse_pod_affinities(
        {
            AFF: (
                "web:\n"
                "- match: {key: name, operator: Exists}\n"
                "- match: {key: nmae, operator: Exists}\n"
                "- match: {key: name, operator: Exists}\n"
                "  weight: 5000\n"
            )
        }
    )
    assert [(e.rule, e.field) for e in parsed.errors] == [(2, "match.key"), (3, "weight")]


def test_long_values_are_cut_in_messages() -> None:
    error = only_error(AFF, f"web:\n- match: {{key: name, operator: {'X' * 500}}}\n")
    assert len(str(error)) < 400 and '"' + "X" * 77 + '..."' in str(error)


def test_error_pickles() -> None:
    error = only_error(ANTI, ERRORS[0][1])
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.container, copy.rule, copy.field) == (
        str(error),
        "web",
        2,
        "match.operator",
    )


# --- which containers an error concerns ----------------------------------------------

GOOD_AND_BAD = {
    AFF: "db: [cache]\nweb:\n- match: {key: name, operator: Exists}\n  weight: nope\n",
    ANTI: "web: [db]\n",
}


def test_a_bad_rule_concerns_only_its_container() -> None:
    parsed = parse_pod_affinities(GOOD_AND_BAD)
    assert rules_of(parsed, "db") == (
        Rule(Expression(NAME_KEY, Op.IN, ("cache",)), None, 1, AFF),
        # web's own list is good: the anti-affinity shorthand still mirrors to db.
        Rule(Expression(NAME_KEY, Op.IN, ("web",)), None, -1, ANTI, mirrored=True),
    )
    assert parsed.rules_for("other") == ()
    with pytest.raises(AnnotationError) as caught:
        parsed.rules_for("web")
    assert caught.value.container == "web" and caught.value.field == "weight"
    assert "web" not in parsed.rules  # its good anti-affinity rule is not half-applied


def test_an_annotation_that_does_not_parse_concerns_every_container() -> None:
    parsed = parse_pod_affinities({AFF: "db: [cache]\n", ANTI: "web: [db\n"})
    assert parsed.has_rules  # the affinity annotation alone was fine
    for name in ("db", "web", "not-mentioned"):
        with pytest.raises(AnnotationError) as caught:
            parsed.rules_for(name)
        assert caught.value.annotation == ANTI and caught.value.container is None


def test_errors_lists_all_in_order() -> None:
    parsed = parse_pod_affinities(
        {
            AFF: "a: [x]\nb: x\nc: [1]\n",
            ANTI: "{",
        }
    )
    assert [(e.annotation, e.container) for e in parsed.errors] == [
        (ANTI, None),
        (AFF, "b"),
        (AFF, "c"),
    ]


def test_rules_for_raises_a_fresh_error_each_time() -> None:
    parsed = parse_pod_affinities(GOOD_AND_BAD)
    raised = []
    for _ in range(2):
        with pytest.raises(AnnotationError) as caught:
            parsed.rules_for("web")
        raised.append(caught.value)
    assert raised[0] is not raised[1] and str(raised[0]) == str(raised[1])


def test_annotation_that_is_not_text() -> None:
    parsed = parse_pod_affinities({AFF: None})  # type: ignore[dict-item]
    assert parsed.errors == ()  # absent
    parsed = parse_pod_affinities({AFF: b"a: [b]"})  # type: ignore[dict-item]
    assert [str(e) for e in parsed.errors] == [f"{AFF}: is a bytes, not text"]
    parsed = parse_pod_affinities({AFF: ["a"], ANTI: "a: [b]"})  # type: ignore[dict-item]
    assert [str(e) for e in parsed.errors] == [f"{AFF}: is a list, not text"]


# --- limits ----------------------------------------------------------------------------


def _padded(size: int, filler: str = "#") -> str:
    head = "web: [db]\n"
    return head + filler * ((size - len(head.encode())) // len(filler.encode()))


def test_size_limit_is_in_bytes() -> None:
    at_limit = _padded(MAX_ANNOTATION_BYTES)
    assert len(at_limit.encode()) == MAX_ANNOTATION_BYTES
    assert parse_pod_affinities({AFF: at_limit}).rules_for("web")
    # The same number of characters, but some take two bytes in UTF-8.
    over = at_limit[:-2] + "éé"
    error = only_error(AFF, over)
    assert str(error) == (
        f"{AFF}: is {MAX_ANNOTATION_BYTES + 2} bytes long, more than the limit of 65536"
    )


def test_aliases_and_anchors_are_refused() -> None:
    laughs = 'a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: [*b,*b]\n'
    assert str(only_error(AFF, laughs)) == (
        f"{AFF}: YAML anchor &a at line 1, column 4: anchors are not allowed"
    )
    # An alias without an anchor is a YAML error of its own.
    error = only_error(AFF, "web: *x\n")
    assert str(error).startswith(f"{AFF}: ") and "alias" in str(error)


def test_nesting_is_bounded() -> None:
    # mapping > list > rule > expression > values > scalar is six levels: fine.
    parse("web:\n- match: {key: name, operator: In, values: [a]}\n")
    # One limit for both annotation languages.
    assert MAX_DEPTH == RULES_MAX_DEPTH == 12
    deep = "web: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert str(only_error(AFF, deep)) == (
        f"{AFF}: nests deeper than {MAX_DEPTH} levels at line 1, column {5 + MAX_DEPTH}"
    )
    very_deep = "[" * 60000
    assert f"nests deeper than {MAX_DEPTH} levels" in str(only_error(AFF, very_deep))


def test_rule_count_is_bounded() -> None:
    rule = "- match: {key: name, operator: Exists}\n"
    assert len(parse("web:\n" + rule * 256)["web"]) == 256
    error = only_error(AFF, "web:\n" + rule * 257)
    assert str(error) == f'{AFF}: container "web": has 257 rules, more than the limit of 256'
    assert error.container == "web"


def test_rule_count_is_bounded_over_both_annotations() -> None:
    rule = "- match: {key: name, operator: Exists}\n"
    ok = parse_pod_affinities({AFF: "web:\n" + rule * 156, ANTI: "web:\n" + rule * 100})
    assert len(ok.rules_for("web")) == 256
    parsed = parse_pod_affinities({AFF: "web:\n" + rule * 200, ANTI: "web:\n" + rule * 57})
    (error,) = parsed.errors
    assert str(error) == (
        f'{ANTI}: container "web": has 57 rules and {AFF} has 200, more than the limit of '
        "256 in all"
    )
    with pytest.raises(AnnotationError):
        parsed.rules_for("web")


def test_a_long_shorthand_list_is_one_rule() -> None:
    names = [f"c{i}" for i in range(1000)]
    (rule,) = parse(f"web: [{', '.join(names)}]\n")["web"]
    assert rule.match.values == tuple(names)


# --- the reference document's own examples ---------------------------------------


def _annotation_blocks() -> list[dict[str, str]]:
    doc = Path(__file__).resolve().parents[2] / "docs" / "affinity.md"
    blocks = re.findall(r"```yaml\n(.*?)```", doc.read_text(), flags=re.S)
    found = []
    for block in blocks:
        data = yaml.safe_load(textwrap.dedent(block))
        if isinstance(data, dict) and "metadata" in data:
            data = data["metadata"]["annotations"]
        if isinstance(data, dict) and {AFF, ANTI} & set(data):
            found.append(data)
    return found


def test_reference_examples_parse() -> None:
    blocks = _annotation_blocks()
    assert len(blocks) == 4  # peter/sheep/wolf, shorthand, db replicas, cache
    for block in blocks:
        parsed = parse_pod_affinities(block)
        assert parsed.errors == () and parsed.has_rules


def test_rules_pickle() -> None:
    rules = parse_pod_affinities({AFF: SHORTHAND[0], ANTI: SHORTHAND[1]}).rules_for("container4")
    assert pickle.loads(pickle.dumps(rules)) == rules
