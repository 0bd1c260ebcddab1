"""Parsing a pod's affinity and anti-affinity annotations into typed Terms, once.

`parse_pod_affinities` never raises: errors are kept and raised by `rules_for` only
for the containers they concern, so one bad rule fails one container, not the pod.
The shorthand (`a: [b]`) is symmetric, as cri-resource-manager's parser makes it:
b gets the mirrored rule towards a.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent.affinity.errors import AnnotationError, ExpressionError, quote
from agent.affinity.expression import Expression, parse_operator
from agent.affinity.loader import Data, LoadError, Scalar, load
from agent.affinity.rule import (
    AFFINITY_WEIGHTS,
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    ANTI_AFFINITY_WEIGHTS,
    DEFAULT_STRENGTH,
    container_selector,
    crm_term,
)
from agent.terms.operator import CRI_RM_OPERATORS, Operator
from agent.terms.term import Term

MAX_RULES_PER_CONTAINER = 256
CONTAINER_NAME_KEY = "labels/io.kubernetes.container.name"
RULE_FIELDS = ("match", "scope", "weight")
EXPRESSION_FIELDS = ("key", "operator", "values")

_NO_RULES: Mapping[str, tuple[Term, ...]] = MappingProxyType({})
_NO_ERRORS: Mapping[str, tuple[AnnotationError, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PodAffinities:
    """The rules of every container a pod's annotations name, and what was wrong.

    `rules` holds only containers with at least one rule and no error, affinity
    rules first. `errors` lists every error (annotation-wide ones first, then by
    annotation and container) for reporting; `pod_errors` concern every container.
    """

    rules: Mapping[str, tuple[Term, ...]] = field(default_factory=lambda: _NO_RULES)
    pod_errors: tuple[AnnotationError, ...] = ()
    container_errors: Mapping[str, tuple[AnnotationError, ...]] = field(
        default_factory=lambda: _NO_ERRORS
    )
    errors: tuple[AnnotationError, ...] = field(default=(), compare=False)

    @property
    def has_rules(self) -> bool:
        """Whether any container has a rule (errors aside): the policy's fast path."""
        return bool(self.rules)

    def rules_for(self, container_name: str) -> tuple[Term, ...]:
        """This container's rules from both annotations (anti-affinity weights are
        negative); raises AnnotationError if a part that concerns it is bad."""
        if self.pod_errors:
            raise _fresh(self.pod_errors[0])
        errors = self.container_errors.get(container_name)
        if errors:
            raise _fresh(errors[0])
        return self.rules.get(container_name, ())


NO_AFFINITIES = PodAffinities()


def parse_pod_affinities(annotations: Mapping[str, str]) -> PodAffinities:
    """Parse both affinity annotations of a pod. Never raises."""
    affinity = annotations.get(ANNOTATION_AFFINITY)
    anti_affinity = annotations.get(ANNOTATION_ANTI_AFFINITY)
    if affinity is None and anti_affinity is None:
        return NO_AFFINITIES
    if isinstance(affinity, str | None) and isinstance(anti_affinity, str | None):
        return _parse_cached(affinity, anti_affinity)
    return _parse(affinity, anti_affinity)  # a caller's bug; not hashable for the cache


def _parse(affinity: str | None, anti_affinity: str | None) -> PodAffinities:
    first = _parse_annotation(ANNOTATION_AFFINITY, affinity)
    second = _parse_annotation(ANNOTATION_ANTI_AFFINITY, anti_affinity)
    _check_combined_count(first, second)
    pod_errors = (*first.pod_errors, *second.pod_errors)
    container_errors: dict[str, list[AnnotationError]] = {}
    rules: dict[str, list[Term]] = {}
    for part in (first, second):
        for name, errors in part.container_errors.items():
            container_errors.setdefault(name, []).extend(errors)
        for name, container_rules in part.rules.items():
            rules.setdefault(name, []).extend(container_rules)
    return PodAffinities(
        rules=MappingProxyType(
            {n: tuple(r) for n, r in rules.items() if r and n not in container_errors}
        ),
        pod_errors=pod_errors,
        container_errors=MappingProxyType({n: tuple(e) for n, e in container_errors.items()}),
        errors=(
            *pod_errors,
            *(
                e
                for part in (first, second)
                for errs in part.container_errors.values()
                for e in errs
            ),
        ),
    )


# kubelet creates a pod's containers one by one with the same annotations; the
# result is immutable, so sharing it is safe. Small, since keys may be 64 KiB each.
_parse_cached = functools.lru_cache(maxsize=128)(_parse)


@dataclass(slots=True)
class _Parsed:
    """One annotation's result while the pod's two are being put together."""

    rules: dict[str, list[Term]] = field(default_factory=dict)
    pod_errors: list[AnnotationError] = field(default_factory=list)
    container_errors: dict[str, list[AnnotationError]] = field(default_factory=dict)
    shorthand: dict[str, tuple[str, ...]] = field(default_factory=dict)  # valid lists of names


class _FieldError(Exception):
    """A bad part of one rule: `field` is its dotted path, `message` the whole text."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _parse_annotation(annotation: str, text: str | None) -> _Parsed:
    parsed = _Parsed()
    if text is None:
        return parsed
    if not isinstance(text, str):  # a caller's bug, but still no crash
        parsed.pod_errors.append(
            AnnotationError(annotation, f"is a {type(text).__name__}, not text")
        )
        return parsed
    try:
        data = load(text)
    except LoadError as err:
        parsed.pod_errors.append(AnnotationError(annotation, str(err)))
        return parsed
    if _is_null(data):  # empty, only comments, or null: no rules
        return parsed
    if not isinstance(data, dict):
        parsed.pod_errors.append(
            AnnotationError(
                annotation,
                "must be a mapping from container name to a list of rules or of container "
                f"names, not {_describe(data)}",
            )
        )
        return parsed
    for name, value in data.items():
        if isinstance(name, Scalar):
            parsed.pod_errors.append(
                AnnotationError(
                    annotation,
                    f"container name {_cut(name.text)} is {_describe(name)}, not a string; "
                    f"quote it: {quote(name.text)}",
                )
            )
        elif not name:
            parsed.pod_errors.append(AnnotationError(annotation, "a container name is empty"))
        else:
            rules, errors = _parse_container(annotation, name, value)
            if errors:
                parsed.container_errors[name] = errors
            else:
                parsed.rules[name] = rules
                if _is_shorthand(value):
                    parsed.shorthand[name] = container_selector(rules[0]).match.values
    _mirror_shorthand(annotation, parsed)
    return parsed


def _is_shorthand(value: Data) -> bool:
    return isinstance(value, list) and bool(value) and not isinstance(value[0], dict)


def _mirror_shorthand(annotation: str, parsed: _Parsed) -> None:
    """Give every container a shorthand list names the rule back, as cri-resource-
    manager's parser does (its documentation shows one direction only): `a: [b]`
    pulls a towards b and b towards a, whichever is created first. A pair written
    both ways (`a: [b]` and `b: [a]`) is one pair: its weight is not doubled. Only
    the shorthand mirrors; a rule written out in full acts for its owner alone.
    A mirrored rule adds to the target's own rules of this annotation, if any."""
    mirrors: dict[str, dict[str, None]] = {}  # target -> the lists naming it, in order
    for owner, names in parsed.shorthand.items():
        for target in names:
            if owner not in parsed.shorthand.get(target, ()):
                mirrors.setdefault(target, {})[owner] = None
    for target, owners in mirrors.items():
        if target in parsed.container_errors:
            continue  # the target is refused anyway
        parsed.rules.setdefault(target, []).append(
            crm_term(
                annotation,
                Expression(CONTAINER_NAME_KEY, Operator.IN, tuple(owners)),
                None,
                DEFAULT_STRENGTH,
                f"container {quote(target)}, mirrored from the shorthand of "
                + ", ".join(map(quote, owners)),
                mirrored=True,
            )
        )


def _parse_container(
    annotation: str, name: str, value: Data
) -> tuple[list[Term], list[AnnotationError]]:
    def error(reason: str, rule: int | None = None, field: str | None = None) -> AnnotationError:
        return AnnotationError(annotation, reason, container=name, rule=rule, field=field)

    if not isinstance(value, list):
        return [], [
            error(f"expected a list of rules or of container names, not {_describe(value)}")
        ]
    if not value:
        return [], []
    if not isinstance(value[0], dict):
        try:
            return [_shorthand(annotation, name, value)], []
        except _FieldError as err:
            return [], [error(err.message, field=err.field)]
    if len(value) > MAX_RULES_PER_CONTAINER:
        return [], [
            error(f"has {len(value)} rules, more than the limit of {MAX_RULES_PER_CONTAINER}")
        ]
    rules: list[Term] = []
    errors: list[AnnotationError] = []
    for position, item in enumerate(value, 1):
        try:
            if not isinstance(item, dict):
                raise _FieldError(
                    None,
                    f"expected a rule (a mapping with {', '.join(RULE_FIELDS)}), not "
                    f"{_describe(item)}: a list holds either rules or container names, not both",
                )
            rules.append(_rule(annotation, item, f"container {quote(name)}, rule {position}"))
        except _FieldError as err:
            errors.append(error(err.message, position, err.field))
    return rules, errors


def _shorthand(annotation: str, owner: str, items: list[Data]) -> Term:
    """`[a, b]`: one rule matching those container names, default weight and scope."""
    names: list[str] = []
    for i, item in enumerate(items, 1):
        where = f"item {i}"
        if isinstance(item, dict):
            raise _FieldError(
                where,
                f"{where} is a rule, but item 1 is a container name: a list holds either rules "
                "or container names, not both",
            )
        name = _string(item, where, "a container name")
        if not name:
            raise _FieldError(where, f"{where} is an empty container name")
        names.append(name)
    match = Expression(CONTAINER_NAME_KEY, Operator.IN, tuple(names))
    return crm_term(annotation, match, None, DEFAULT_STRENGTH, f"container {quote(owner)}")


def _rule(annotation: str, item: dict[str | Scalar, Data], path: str) -> Term:
    _check_fields(item, RULE_FIELDS, "", "a rule")
    if "match" not in item:
        raise _FieldError("match", "match is missing: a rule needs a match expression")
    match = _expression(item["match"], "match")
    scope_data = item.get("scope")
    scope = None if _is_null(scope_data) else _expression(scope_data, "scope")
    return crm_term(annotation, match, scope, _weight(annotation, item.get("weight")), path)


def _expression(data: Data, where: str) -> Expression:
    if not isinstance(data, dict):
        raise _FieldError(
            where,
            f"{where} must be an expression (a mapping with {', '.join(EXPRESSION_FIELDS)}), "
            f"not {_describe(data)}",
        )
    _check_fields(data, EXPRESSION_FIELDS, f"{where}.", "an expression")
    key = _string(data["key"], f"{where}.key", "a string") if "key" in data else ""
    if "operator" not in data:
        ops = ", ".join(op.value for op in CRI_RM_OPERATORS)
        raise _FieldError(f"{where}.operator", f"{where}.operator is missing; it is one of {ops}")
    raw_values = data.get("values")
    if _is_null(raw_values):
        raw_values = []
    if not isinstance(raw_values, list):
        raise _FieldError(
            f"{where}.values", f"{where}.values must be a list, not {_describe(raw_values)}"
        )
    try:
        operator = parse_operator(_string(data["operator"], f"{where}.operator", "a string"))
        values = tuple(
            _string(v, f"{where}.values[{i}]", "a string") for i, v in enumerate(raw_values, 1)
        )
        return Expression(key, operator, values)
    except ExpressionError as err:
        path = f"{where}.{err.field}"
        raise _FieldError(path, f"{path} {err.reason}") from None


def _weight(annotation: str, data: Data) -> int:
    if _is_null(data):
        return DEFAULT_STRENGTH
    low, high = AFFINITY_WEIGHTS if annotation == ANNOTATION_AFFINITY else ANTI_AFFINITY_WEIGHTS
    value = data.integer() if isinstance(data, Scalar) else None
    if value is None:
        shown = quote(data) if isinstance(data, str) else _describe(data)
        if isinstance(data, Scalar):
            shown = f"{_cut(data.text)} ({_describe(data)})"
        raise _FieldError("weight", f"weight {shown} is not an integer in [{low}, {high}]")
    if low <= value <= high:
        return value
    hint = ""
    if annotation == ANNOTATION_ANTI_AFFINITY:
        hint = "; an anti-affinity weight is a strength that pushes"
        if -high <= value < 0:
            hint += f" (write {-value} to push with weight {value})"
    raise _FieldError("weight", f"weight {value} is out of range [{low}, {high}]{hint}")


def _check_fields(
    mapping: dict[str | Scalar, Data], known: tuple[str, ...], prefix: str, what: str
) -> None:
    for name in mapping:
        text = name if isinstance(name, str) else name.text
        if text not in known or not isinstance(name, str):
            raise _FieldError(
                prefix + text,
                f"{quote(prefix + text)} is not a field of {what}; {what} has {', '.join(known)}",
            )


def _string(data: Data, where: str, what: str) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, Scalar) and data.tag == "null":
        raise _FieldError(where, f"{where} is empty; expected {what}")
    if isinstance(data, Scalar):
        raise _FieldError(
            where,
            f"{where} is {_cut(data.text)}, {_describe(data)}, not {what}; "
            f"quote it: {quote(data.text)}",
        )
    raise _FieldError(where, f"{where} must be {what}, not {_describe(data)}")


def _is_null(data: Data) -> bool:
    return data is None or (isinstance(data, Scalar) and data.tag == "null")


def _describe(data: Data) -> str:
    if isinstance(data, str):
        return f"the string {quote(data)}"
    if isinstance(data, Scalar):
        return f"a YAML {data.tag}"
    if isinstance(data, list):
        return "a list"
    if isinstance(data, dict):
        return "a mapping"
    return "nothing"


def _cut(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _written(rules: list[Term]) -> int:
    # Mirrored rules do not count: a container's limit must not depend on the lists
    # of others, and there is at most one per annotation.
    return sum(not rule.mirrored for rule in rules)


def _check_combined_count(first: _Parsed, second: _Parsed) -> None:
    for name, rules in list(second.rules.items()):
        count, other = _written(rules), _written(first.rules.get(name, []))
        if count + other > MAX_RULES_PER_CONTAINER:
            second.rules.pop(name)
            second.container_errors[name] = [
                AnnotationError(
                    ANNOTATION_ANTI_AFFINITY,
                    f"has {count} rules and {ANNOTATION_AFFINITY} has {other}, more than "
                    f"the limit of {MAX_RULES_PER_CONTAINER} in all",
                    container=name,
                )
            ]


def _fresh(error: AnnotationError) -> AnnotationError:
    # A stored exception raised twice would pile up tracebacks; raise a copy instead.
    return AnnotationError(
        error.annotation,
        error.reason,
        container=error.container,
        rule=error.rule,
        field=error.field,
    )
