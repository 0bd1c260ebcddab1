"""cri-resource-manager's annotation tables (pkg/cri/resource-manager/cache/
affinity_test.go: TestSimpleParsingSymmetry, TestStrictParsing) restated as our own
inputs and results, and what its parser does beyond them: the shorthand is
symmetric, a pair written both ways counts once, and only the shorthand mirrors.
"""

from __future__ import annotations

import textwrap

import pytest

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    MAX_RULES_PER_CONTAINER,
    Expression,
    Operator,
    effective_affinity,
    parse_pod_affinities,
    rule_text,
)
from agent.workload import ContainerInfo
from tests.affinity.workloads import Rule, container, pod, rules_of

AFF = ANNOTATION_AFFINITY
ANTI = ANNOTATION_ANTI_AFFINITY
POD = pod("testpod")


def partners(annotation: str, text: str) -> dict[str, set[str]]:
    """Per container, the container names its rules from `text` point at."""
    parsed = parse_pod_affinities({annotation: textwrap.dedent(text)})
    assert parsed.errors == ()
    found: dict[str, set[str]] = {}
    for name in parsed.rules:
        for rule in rules_of(parsed, name):
            assert rule.weight == (1 if annotation == AFF else -1)
            assert rule.scope is None and rule.match.key == "labels/io.kubernetes.container.name"
            found.setdefault(name, set()).update(rule.match.values)
    return found


SIMPLE_PARSING_SYMMETRY = [
    ("trivial 2 by 2", "c1: [ c2 ]", {"c1": {"c2"}, "c2": {"c1"}}),
    (
        "simple",
        "c1: [ c2, c3, c4, c5 ]",
        {"c1": {"c2", "c3", "c4", "c5"}, "c2": {"c1"}, "c3": {"c1"}, "c4": {"c1"}, "c5": {"c1"}},
    ),
    (
        "a bit more complex",
        """\
        c1: [ c2 ]
        c2: [ c3, c4, c5 ]
        c4: [ c5 ]
        """,
        {
            "c1": {"c2"},
            "c2": {"c1", "c3", "c4", "c5"},
            "c3": {"c2"},
            "c4": {"c2", "c5"},
            "c5": {"c2", "c4"},
        },
    ),
]


@pytest.mark.parametrize("annotation", [AFF, ANTI])
@pytest.mark.parametrize(
    ("text", "expected"),
    [(text, expected) for _, text, expected in SIMPLE_PARSING_SYMMETRY],
    ids=[name for name, _, _ in SIMPLE_PARSING_SYMMETRY],
)
def test_simple_parsing_symmetry(annotation: str, text: str, expected: dict[str, set[str]]) -> None:
    assert partners(annotation, text) == expected


STRICT_PARSING = [
    (
        # scope's fields are indented as the rule's own: key, operator and values are
        # then unknown fields of the rule.
        "invalid annotation",
        """\
          memtier-benchmark:
            - scope:
              key: pod/name
              operator: Matches
              values:
                - redis-*
              match:
                key: name
                operator: Equals
                values:
                  - redis
              weight: 10
        """,
        '"key" is not a field of a rule',
    ),
    (
        "valid annotation",
        """\
          memtier-benchmark:
            - scope:
                key: pod/name
                operator: Matches
                values:
                  - redis-*
              match:
                key: name
                operator: Equals
                values:
                  - redis
              weight: 10
        """,
        None,
    ),
]


@pytest.mark.parametrize(
    ("text", "error"),
    [(text, error) for _, text, error in STRICT_PARSING],
    ids=[name for name, _, _ in STRICT_PARSING],
)
def test_strict_parsing(text: str, error: str | None) -> None:
    parsed = parse_pod_affinities({AFF: textwrap.dedent(text)})
    if error is None:
        assert parsed.errors == ()
        (rule,) = rules_of(parsed, "memtier-benchmark")
        assert rule.weight == 10
        assert rule.scope == Expression("pod/name", Operator.MATCHES, ("redis-*",))
    else:
        (only,) = parsed.errors
        assert only.container == "memtier-benchmark" and error in str(only)


# --- what the symmetry means for A(C1, C2) ------------------------------------------


def names(*wanted: str) -> dict[str, ContainerInfo]:
    return {n: container(n, POD) for n in wanted}


def affinity(annotations: dict[str, str], me: str, other: str) -> int:
    """A(me, other) for containers of one pod with these annotations."""
    c = names(me, other)
    rules = parse_pod_affinities(annotations).rules_for(me)
    return effective_affinity(c[me], rules, c[other])


FULL_A_TO_B = "a:\n- match: {key: name, operator: Equals, values: [b]}\n"
FULL_B_TO_A = "b:\n- match: {key: name, operator: Equals, values: [a]}\n"

# (annotations, A(a, b), A(b, a))
SYMMETRY = [
    ({AFF: "a: [b]"}, 1, 1),
    ({AFF: "b: [a]"}, 1, 1),
    # Both directions written: the same pair, not twice the weight.
    ({AFF: "a: [b]\nb: [a]"}, 1, 1),
    ({AFF: "a: [b, b]"}, 1, 1),
    ({ANTI: "a: [b]"}, -1, -1),
    ({ANTI: "a: [b]\nb: [a]"}, -1, -1),
    # Pull and push of the same pair cancel in both directions.
    ({AFF: "a: [b]", ANTI: "b: [a]"}, 0, 0),
    # The full form acts for its owner only, as in cri-resource-manager.
    ({AFF: FULL_A_TO_B}, 1, 0),
    ({AFF: FULL_A_TO_B + FULL_B_TO_A}, 1, 1),
    # A mirrored rule adds to the target's own rules of the same annotation (which
    # cri-resource-manager cannot express: it refuses mixing the two forms).
    ({AFF: "a: [b]\n" + FULL_B_TO_A}, 1, 2),
    # ... and to its rules of the other annotation, as in cri-resource-manager.
    ({AFF: "a: [b]", ANTI: FULL_B_TO_A.replace("[a]}", "[a]}\n  weight: 3")}, 1, -2),
    # Naming oneself means nothing.
    ({AFF: "a: [a, b]"}, 1, 1),
]


@pytest.mark.parametrize(("annotations", "a_to_b", "b_to_a"), SYMMETRY)
def test_symmetry(annotations: dict[str, str], a_to_b: int, b_to_a: int) -> None:
    assert affinity(annotations, "a", "b") == a_to_b
    assert affinity(annotations, "b", "a") == b_to_a


@pytest.mark.parametrize("annotation", [AFF, ANTI])
def test_the_shorthand_does_not_depend_on_creation_order(annotation: str) -> None:
    # Whichever of web and cache is placed second scores the first: both see it.
    annotations = {annotation: "web: [cache]"}
    later_cache = affinity(annotations, "cache", "web")
    later_web = affinity(annotations, "web", "cache")
    assert later_cache == later_web != 0


def test_self_reference_gives_no_rule_back() -> None:
    parsed = parse_pod_affinities({AFF: "a: [a]"})
    assert rules_of(parsed, "a") == (
        Rule(Expression("labels/io.kubernetes.container.name", Operator.IN, ("a",)), None, 1, AFF),
    )
    assert affinity({AFF: "a: [a]"}, "a", "a") == 0


def test_a_bad_list_mirrors_nothing_and_a_bad_target_stays_refused() -> None:
    parsed = parse_pod_affinities({AFF: "a: [b, 7]\nc: [d]\nd: [x, ~]\n"})
    assert parsed.rules_for("b") == ()  # a's list is refused: nothing to mirror
    with pytest.raises(ValueError, match='container "a"'):
        parsed.rules_for("a")
    with pytest.raises(ValueError, match='container "d"'):
        parsed.rules_for("d")  # c's list names d, but d's own list is bad
    assert [r.match.values for r in rules_of(parsed, "c")] == [("d",)]


def test_mirrored_rules_do_not_count_against_the_limit() -> None:
    rule = "- match: {key: name, operator: Exists}\n"
    text = "full:\n" + rule * MAX_RULES_PER_CONTAINER + "other: [full]\n"
    rules = parse_pod_affinities({AFF: text}).rules_for("full")
    assert len(rules) == MAX_RULES_PER_CONTAINER + 1 and rules[-1].mirrored


def test_a_container_named_only_by_others_gets_rules() -> None:
    # "ghost" is not a container of the pod; `check` warns about it.
    parsed = parse_pod_affinities({AFF: "main: [ghost]"})
    assert set(parsed.rules) == {"main", "ghost"}
    (term,) = parsed.rules_for("ghost")
    rule = Rule.of(term)
    assert rule.mirrored and rule.match.values == ("main",)
    assert rule_text(term) == (
        "affinity +1 on labels/io.kubernetes.container.name In [main] "
        "(scope: its pod; mirrored from the shorthand of main)"
    )
    (own,) = parsed.rules_for("main")
    assert (
        rule_text(own)
        == "affinity +1 on labels/io.kubernetes.container.name In [ghost] (scope: its pod)"
    )


# --- id of a placed container (issue 13, item 2, fixed where placements are kept) ----


@pytest.mark.parametrize(("placed_id", "selected"), [("ctr-9", True), ("", False)])
def test_id_rules_select_a_container_by_its_runtime_id(placed_id: str, selected: bool) -> None:
    # The policy must hand evaluation the placed container with its runtime id set:
    # then `id` exists and equals it; a record without the id matches neither.
    me = container("web", POD)
    placed = container("db", POD, cid=placed_id)
    rules = parse_pod_affinities(
        {
            AFF: "web:\n- match: {key: id, operator: Exists}\n  weight: 2\n"
            "- match: {key: id, operator: Equals, values: [ctr-9]}\n  weight: 3\n"
        }
    ).rules_for("web")
    assert effective_affinity(me, rules, placed) == (5 if selected else 0)
