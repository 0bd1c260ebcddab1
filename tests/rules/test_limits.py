"""Limits against hostile input, the parse cache, and the speed path."""

from __future__ import annotations

import json

import pytest
import yaml

from agent.affinity import loader
from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    MAX_ANNOTATION_BYTES,
    MAX_DEPTH,
    MAX_NAMESPACES,
    MAX_NODE_TERMS,
    MAX_POD_TERMS,
    MAX_REQUIREMENTS,
    MAX_SPREAD_CONSTRAINTS,
    MAX_VALUES,
    RuleError,
    parse_pod_rules,
)
from agent.rules import decode as decode_module
from agent.rules import parse as parse_module

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
TERM = {"topologyKey": "numa-agent.io/numa", "labelSelector": {"matchLabels": {"app": "x"}}}


def dump(value: object, *, as_json: bool) -> str:
    # Through JSON first, so that YAML writes repeated parts out instead of aliasing them.
    text = json.dumps(value)
    return text if as_json else yaml.safe_dump(json.loads(text))


def refusal(annotation: str, value: object, *, as_json: bool = False) -> RuleError:
    text = dump(value, as_json=as_json)
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({annotation: text})
    return caught.value


def pod_terms(required: int, preferred: int = 0, anti: int = 0) -> dict[str, object]:
    return {
        "podAffinity": {
            REQ: [TERM] * required,
            PREF: [{"weight": 1, "podAffinityTerm": TERM}] * preferred,
        },
        "podAntiAffinity": {REQ: [TERM] * anti},
    }


def node_terms(required: int, preferred: int) -> dict[str, object]:
    term = {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
    return {
        "nodeAffinity": {
            REQ: {"nodeSelectorTerms": [term] * required},
            PREF: [{"weight": 1, "preference": term}] * preferred,
        }
    }


def spread(count: int) -> list[dict[str, object]]:
    levels = ["core", "l3", "numa", "die", "socket"]
    pairs = [
        (f"numa-agent.io/{level}", when)
        for level in levels
        for when in ("DoNotSchedule", "ScheduleAnyway")
    ] + [("kubernetes.io/hostname", "DoNotSchedule"), ("kubernetes.io/hostname", "ScheduleAnyway")]
    pairs = (pairs * 2)[:count]
    return [
        {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {}}
        for key, when in pairs
    ]


def selector(labels: int, expressions: int, values: int = 1) -> dict[str, object]:
    return {
        "podAffinity": {
            REQ: [
                {
                    "topologyKey": "numa-agent.io/numa",
                    "labelSelector": {
                        "matchLabels": {f"l{i}": "v" for i in range(labels)},
                        "matchExpressions": [
                            {
                                "key": f"e{i}",
                                "operator": "In",
                                "values": [f"v{j}" for j in range(values)],
                            }
                            for i in range(expressions)
                        ],
                    },
                }
            ]
        }
    }


def namespaces(count: int) -> dict[str, object]:
    return {"podAffinity": {REQ: [{**TERM, "namespaces": [f"n{i}" for i in range(count)]}]}}


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize(
    ("annotation", "at_limit", "over", "path", "reason"),
    [
        (
            ANNOTATION_AFFINITY,
            pod_terms(MAX_POD_TERMS - 2, 1, 1),
            pod_terms(MAX_POD_TERMS - 1, 2, 0),
            f"podAffinity.{PREF}",
            f"brings the pod to {MAX_POD_TERMS + 1} pod affinity and anti-affinity terms, "
            f"more than {MAX_POD_TERMS}",
        ),
        (
            ANNOTATION_AFFINITY,
            pod_terms(MAX_POD_TERMS - 1, 0, 1),
            pod_terms(MAX_POD_TERMS, 0, 1),
            f"podAntiAffinity.{REQ}",
            f"brings the pod to {MAX_POD_TERMS + 1} pod affinity and anti-affinity terms, "
            f"more than {MAX_POD_TERMS}",
        ),
        (
            ANNOTATION_AFFINITY,
            node_terms(MAX_NODE_TERMS - 1, 1),
            node_terms(MAX_NODE_TERMS - 1, 2),
            f"nodeAffinity.{PREF}",
            f"brings the pod to {MAX_NODE_TERMS + 1} node selector terms, more than "
            f"{MAX_NODE_TERMS}",
        ),
        (
            ANNOTATION_AFFINITY,
            node_terms(MAX_NODE_TERMS, 0),
            node_terms(MAX_NODE_TERMS + 1, 0),
            f"nodeAffinity.{REQ}.nodeSelectorTerms",
            f"brings the pod to {MAX_NODE_TERMS + 1} node selector terms, more than "
            f"{MAX_NODE_TERMS}",
        ),
        (
            ANNOTATION_SPREAD,
            spread(MAX_SPREAD_CONSTRAINTS),
            spread(MAX_SPREAD_CONSTRAINTS + 1),
            "",
            f"has {MAX_SPREAD_CONSTRAINTS + 1} constraints, more than {MAX_SPREAD_CONSTRAINTS}",
        ),
        (
            ANNOTATION_AFFINITY,
            selector(MAX_REQUIREMENTS // 2, MAX_REQUIREMENTS // 2),
            selector(MAX_REQUIREMENTS // 2, MAX_REQUIREMENTS // 2 + 1),
            f"podAffinity.{REQ}[0].labelSelector",
            f"has {MAX_REQUIREMENTS // 2} matchLabels and {MAX_REQUIREMENTS // 2 + 1} "
            f"matchExpressions, more than {MAX_REQUIREMENTS} in all",
        ),
        (
            ANNOTATION_AFFINITY,
            selector(0, 1, MAX_VALUES),
            selector(0, 1, MAX_VALUES + 1),
            f"podAffinity.{REQ}[0].labelSelector.matchExpressions[0].values",
            f"has {MAX_VALUES + 1} values, more than {MAX_VALUES}",
        ),
        (
            ANNOTATION_AFFINITY,
            namespaces(MAX_NAMESPACES),
            namespaces(MAX_NAMESPACES + 1),
            f"podAffinity.{REQ}[0].namespaces",
            f"lists {MAX_NAMESPACES + 1} namespaces, more than {MAX_NAMESPACES}",
        ),
    ],
)
def test_counts_up_to_the_limit_pass_and_one_more_is_refused(
    annotation: str, at_limit: object, over: object, path: str, reason: str, as_json: bool
) -> None:
    text = dump(at_limit, as_json=as_json)
    assert not parse_pod_rules({annotation: text}).is_empty
    err = refusal(annotation, over, as_json=as_json)
    assert (err.annotation, err.path, err.reason) == (annotation, path, reason)


@pytest.mark.parametrize(
    "text", ["a" * (MAX_ANNOTATION_BYTES + 1), "[" + " " * MAX_ANNOTATION_BYTES + "]"]
)
def test_size_limit(text: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({ANNOTATION_SPREAD: text})
    size = len(text.encode())
    assert (caught.value.path, caught.value.reason) == (
        "",
        f"is {size} bytes long, more than the limit of {MAX_ANNOTATION_BYTES}",
    )


def test_size_counts_utf8_bytes() -> None:
    text = "é" * (MAX_ANNOTATION_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
    with pytest.raises(RuleError, match="bytes long"):
        parse_pod_rules({ANNOTATION_AFFINITY: text})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nests deeper than {MAX_DEPTH} levels"),
        ("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH, f"nests deeper than {MAX_DEPTH} levels"),
        ("[" * 5000 + "]" * 5000, f"nests deeper than {MAX_DEPTH} levels"),
        (
            "- " * (MAX_DEPTH + 1) + "x",
            f"nests deeper than {MAX_DEPTH} levels at line 1, column {2 * MAX_DEPTH + 1}",
        ),
    ],
)
def test_depth_limit(text: str, reason: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({ANNOTATION_SPREAD: text})
    assert (caught.value.path, caught.value.reason) == ("", reason)


def test_depth_at_the_limit_reads_then_fails_on_shape() -> None:
    text = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)  # the 1 is level MAX_DEPTH
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({ANNOTATION_SPREAD: text})
    assert caught.value.reason == "must be a mapping (TopologySpreadConstraint), not a list"


def test_aliases_are_refused() -> None:
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    with pytest.raises(RuleError, match="anchors are not allowed"):
        parse_pod_rules({ANNOTATION_AFFINITY: bomb})


def big_annotation() -> str:
    """Nearly 64 KiB of valid rules: 32 preferred terms with two long In lists each."""
    values, previous = 1, ""
    while True:
        doc = {
            "podAntiAffinity": {
                PREF: [
                    {
                        "weight": i % 100 + 1,
                        "podAffinityTerm": {
                            "topologyKey": "numa-agent.io/socket",
                            "labelSelector": {
                                "matchExpressions": [
                                    {
                                        "key": f"example.com/k{j}",
                                        "operator": "In",
                                        "values": [f"value-{i}-{j}-{k}" for k in range(values + 1)],
                                    }
                                    for j in range(2)
                                ]
                            },
                        },
                    }
                    for i in range(MAX_POD_TERMS)
                ]
            }
        }
        text = yaml.safe_dump(doc)
        if len(text.encode()) > MAX_ANNOTATION_BYTES:
            return previous
        previous, values = text, values + 1


def test_a_64k_annotation_takes_the_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python YAML path is ~20x slower at this size: plain YAML must not
    reach it, and JSON must not reach YAML at all."""
    text = big_annotation()
    assert len(text.encode()) > MAX_ANNOTATION_BYTES - 2048

    def slow(*args: object, **kwargs: object) -> None:
        raise AssertionError("took a slow path")

    monkeypatch.setattr(loader, "_load_pure", slow)
    rules = parse_module._parse_cached.__wrapped__(text, None)
    assert not isinstance(rules, RuleError) and len(rules.pod_terms) == MAX_POD_TERMS
    monkeypatch.setattr(
        parse_module.decode_affinity.__globals__["load"], "__call__", slow, raising=False
    )
    monkeypatch.setattr(decode_module, "load", slow)
    as_json = json.dumps(yaml.safe_load(text))
    rules = parse_module._parse_cached.__wrapped__(as_json, None)
    assert not isinstance(rules, RuleError) and len(rules.pod_terms) == MAX_POD_TERMS


def test_results_and_errors_are_cached_by_text() -> None:
    text = dump(pod_terms(1), as_json=False)
    first = parse_pod_rules({ANNOTATION_AFFINITY: text})
    assert parse_pod_rules({ANNOTATION_AFFINITY: text, "other": "x"}) is first
    bad = "podAfinity: {}"
    errors = []
    for _ in range(2):
        with pytest.raises(RuleError) as caught:
            parse_pod_rules({ANNOTATION_AFFINITY: bad})
        errors.append(caught.value)
    assert errors[0] is not errors[1] and str(errors[0]) == str(errors[1])
    info = parse_module._parse_cached.cache_info()
    assert info.maxsize == parse_module.CACHE_SIZE and info.hits >= 2


def test_a_value_that_is_not_text_is_refused() -> None:
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({ANNOTATION_SPREAD: 5})  # type: ignore[dict-item]
    assert str(caught.value) == f"{ANNOTATION_SPREAD}: is a int, not text"
