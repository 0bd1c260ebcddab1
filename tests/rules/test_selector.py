"""Selectors as apimachinery's labels package reads them: every operator against
present, absent and odd labels, matchLabels ANDed with expressions, `{}`."""

from __future__ import annotations

import pytest

from agent.rules import EVERYTHING, LabelSelector, Operator, Requirement
from agent.rules.selector import parse_integer


def req(key: str, op: Operator, *values: str) -> Requirement:
    bound = parse_integer(values[0]) if op in (Operator.GT, Operator.LT) else None
    return Requirement(key, op, frozenset(values), bound)


LABELS = {"app": "db", "tier": "back", "mem": "65536", "neg": "-3", "odd": "12x", "big": "9" * 20}


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("app", Operator.IN, "db", "cache"), True),
        (req("app", Operator.IN, "cache"), False),
        (req("missing", Operator.IN, "db"), False),
        (req("app", Operator.NOT_IN, "cache"), True),
        (req("app", Operator.NOT_IN, "db"), False),
        (req("missing", Operator.NOT_IN, "db"), True),  # absent: NotIn holds
        (req("app", Operator.EXISTS), True),
        (req("missing", Operator.EXISTS), False),
        (req("app", Operator.NOT_EXISTS), False),
        (req("missing", Operator.NOT_EXISTS), True),
        (req("mem", Operator.GT, "65535"), True),
        (req("mem", Operator.GT, "65536"), False),
        (req("mem", Operator.LT, "65537"), True),
        (req("mem", Operator.LT, "65536"), False),
        (req("neg", Operator.LT, "0"), True),
        (req("neg", Operator.GT, "-4"), True),
        (req("mem", Operator.GT, "+1"), True),
        (req("odd", Operator.GT, "0"), False),  # not an integer: never satisfies
        (req("odd", Operator.LT, "100"), False),
        (req("big", Operator.GT, "0"), False),  # beyond int64: not an integer
        (req("app", Operator.GT, "0"), False),
        (req("missing", Operator.GT, "0"), False),
        (req("missing", Operator.LT, "0"), False),
    ],
)
def test_requirement_matches(requirement: Requirement, expected: bool) -> None:
    assert requirement.matches(LABELS) is expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("-42", -42),
        ("+7", 7),
        ("007", 7),
        (str(2**63 - 1), 2**63 - 1),
        (str(-(2**63)), -(2**63)),
        (str(2**63), None),
        ("1_000", None),
        (" 1", None),
        ("1.0", None),
        ("0x10", None),
        ("", None),
        ("٣", None),  # a digit to Python's int(), not to Go's ParseInt
    ],
)
def test_integers_are_read_as_go_parse_int_reads_them(text: str, value: int | None) -> None:
    assert parse_integer(text) == value


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (EVERYTHING, {}, True),
        (EVERYTHING, {"app": "x"}, True),
        (LabelSelector((("app", "db"),)), {"app": "db", "x": "y"}, True),
        (LabelSelector((("app", "db"),)), {"app": "web"}, False),
        (LabelSelector((("app", "db"),)), {}, False),
        (LabelSelector((("app", ""),)), {"app": ""}, True),
        (LabelSelector((("app", ""),)), {}, False),
        (
            LabelSelector((("app", "db"),), (req("tier", Operator.IN, "back"),)),
            {"app": "db", "tier": "back"},
            True,
        ),
        (
            LabelSelector((("app", "db"),), (req("tier", Operator.IN, "back"),)),
            {"app": "db", "tier": "front"},
            False,
        ),
        (
            LabelSelector((), (req("app", Operator.EXISTS), req("app", Operator.NOT_IN, "db"))),
            {"app": "web"},
            True,
        ),
        (
            LabelSelector((), (req("app", Operator.EXISTS), req("app", Operator.NOT_IN, "db"))),
            {"app": "db"},
            False,
        ),
    ],
)
def test_selector_ands_everything(
    selector: LabelSelector, labels: dict[str, str], expected: bool
) -> None:
    assert selector.matches(labels) is expected
    assert selector.is_everything is (selector == EVERYTHING)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (EVERYTHING, "{}"),
        (LabelSelector((("app", "db"),)), "app=db"),
        (LabelSelector((), (req("app", Operator.IN, "cache"),)), "app in (cache)"),
        (LabelSelector((), (req("app", Operator.NOT_IN, "b", "a"),)), "app notin (a,b)"),
        (
            LabelSelector(
                (("app", "db"),), (req("x", Operator.EXISTS), req("y", Operator.NOT_EXISTS))
            ),
            "app=db, x, !y",
        ),
        (
            LabelSelector((), (req("mem", Operator.GT, "5"), req("mem", Operator.LT, "9"))),
            "mem>5, mem<9",
        ),
    ],
)
def test_describe_in_kubernetes_selector_syntax(selector: LabelSelector, text: str) -> None:
    assert selector.describe() == text
