"""Property tests: no annotation text, however odd, makes the parser raise anything
but AnnotationError (and parse_pod_affinities never raises); valid rules survive a
trip through YAML unchanged."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    CRI_RM_OPERATORS,
    AnnotationError,
    Expression,
    PodAffinities,
    effective_affinity,
    parse_pod_affinities,
)
from agent.affinity.expression import ARITY, Arity
from tests.affinity.workloads import Rule, container, pod, rules_of

NAMES = ["web", "db", "peter", "sheep", "a", "1", ""]
POD = pod("web-0", labels={"app": "web"})
SUBJECTS = [
    container("web", POD, cid="c1", labels={"tier": "front"}, tags={"role": "x"}),
    container("db", POD),
    container("sheep", pod("barn-0")),
]


def check(annotations: dict[str, str]) -> PodAffinities:
    """The contract: parsing never raises; rules_for raises only AnnotationError; the
    rules it returns evaluate without raising and keep their weights in range."""
    parsed = parse_pod_affinities(annotations)
    for name in [*NAMES, *parsed.rules, *parsed.container_errors]:
        try:
            rules = parsed.rules_for(name)
        except AnnotationError as err:
            assert err.annotation in (ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY)
            assert err in parsed.errors or any(str(err) == str(e) for e in parsed.errors)
            continue
        for rule in rules:
            high = 1000 if rule.source == ANNOTATION_AFFINITY else 0
            assert -1000 <= rule.signed <= high
        me = container(name or "x", POD)
        for other in SUBJECTS:
            assert isinstance(effective_affinity(me, rules, other), int)
    return parsed


YAMLISH = st.lists(
    st.sampled_from(
        [
            "web",
            "db",
            ":",
            ": ",
            " ",
            "  ",
            "\n",
            "\n  ",
            "\n- ",
            "- ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&a ",
            "*a",
            "!!str ",
            "!!int ",
            "!!set ",
            "!!python/object:os.system ",
            "!foo ",
            "'",
            '"',
            "#",
            "?",
            "|",
            ">",
            "%YAML 1.1\n",
            "---\n",
            "...\n",
            "@",
            "`",
            "\t",
            "key",
            "operator",
            "values",
            "match",
            "scope",
            "weight",
            "In",
            "Equals",
            "Equal",
            "Exists",
            "NotExist",
            "AlwaysTrue",
            "MatchesAny",
            "name",
            "labels/",
            "pod/",
            "tags/x",
            ":,;",
            "1",
            "-5",
            "0x",
            "1_0",
            "yes",
            "on",
            "~",
            "null",
            "2001-02-30",
            "1e400",
            ".nan",
            "9" * 5000,
            "\\",
            "\x00",
            "\x85",
            "\ufeff",
            "é",
            "<<",
            "=",
        ]
    ),
    max_size=60,
).map("".join)

SCALARS = (
    st.text(max_size=12)
    | st.integers()
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=True)
    | st.sampled_from(["In", "Equals", "Exists", "name", "labels/x", ":pod/name:name", "*"])
)
FIELDS = st.sampled_from(["key", "operator", "values", "match", "scope", "weight", "web"])
STRUCTURES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(FIELDS | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_random_text(affinity: str, anti: str) -> None:
    check({ANNOTATION_AFFINITY: affinity, ANNOTATION_ANTI_AFFINITY: anti})


@settings(max_examples=300, deadline=None)
@given(YAMLISH, YAMLISH)
def test_random_yamlish_text(affinity: str, anti: str) -> None:
    check({ANNOTATION_AFFINITY: affinity, ANNOTATION_ANTI_AFFINITY: anti})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(NAMES) | SCALARS, STRUCTURES, max_size=4), STRUCTURES)
def test_random_structures_dumped_to_yaml(affinity: Any, anti: Any) -> None:
    check(
        {
            ANNOTATION_AFFINITY: yaml.safe_dump(affinity),
            ANNOTATION_ANTI_AFFINITY: yaml.dump(anti),  # may carry python tags
        }
    )


KEYS = st.sampled_from(
    [
        "name",
        "namespace",
        "qosclass",
        "id",
        "labels/tier",
        "tags/role",
        "pod/name",
        "pod/uid",
        "pod/id",
        "pod/labels/app",
        ":pod/qosclass:name",
        ":,;pod/name,name",
    ]
)
VALUE = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=8)


@st.composite
def expressions(draw: st.DrawFn) -> Expression:
    op = draw(st.sampled_from(list(CRI_RM_OPERATORS)))
    arity = ARITY[op]
    count = {Arity.NONE: 0, Arity.ONE: 1}.get(arity, draw(st.integers(1, 4)))
    return Expression(draw(KEYS), op, tuple(draw(VALUE) for _ in range(count)))


def to_yaml(expression: Expression) -> dict[str, Any]:
    return {
        "key": expression.key,
        "operator": expression.operator.value,
        "values": list(expression.values),
    }


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(expressions(), st.none() | expressions(), st.none() | st.integers(-1000, 1000)),
        min_size=1,
        max_size=5,
    ),
    st.lists(
        st.tuples(expressions(), st.none() | expressions(), st.none() | st.integers(0, 1000)),
        min_size=1,
        max_size=5,
    ),
)
def test_valid_rules_round_trip(
    positive: list[tuple[Expression, Expression | None, int | None]],
    negative: list[tuple[Expression, Expression | None, int | None]],
) -> None:
    def document(rules: list[tuple[Expression, Expression | None, int | None]]) -> str:
        items = []
        for match, scope, weight in rules:
            item: dict[str, Any] = {"match": to_yaml(match)}
            if scope is not None:
                item["scope"] = to_yaml(scope)
            if weight is not None:
                item["weight"] = weight
            items.append(item)
        return yaml.safe_dump({"web": items})

    parsed = check(
        {ANNOTATION_AFFINITY: document(positive), ANNOTATION_ANTI_AFFINITY: document(negative)}
    )
    assert parsed.errors == ()
    expected = [Rule(m, s, 1 if w is None else w, ANNOTATION_AFFINITY) for m, s, w in positive] + [
        Rule(m, s, -1 if w is None else -w, ANNOTATION_ANTI_AFFINITY) for m, s, w in negative
    ]
    assert list(rules_of(parsed, "web")) == expected
