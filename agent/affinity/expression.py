"""Expressions (key, operator, values) that select containers, compiled once.

An Expression checks itself when built and turns its key and values into one
closure, so evaluating it against a container is a couple of calls, no parsing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from agent.affinity.errors import ExpressionError, quote
from agent.affinity.glob import Glob
from agent.affinity.keys import Accessor, compile_key
from agent.workload import ContainerInfo

Test = Callable[[ContainerInfo], bool]


class Operator(StrEnum):
    EQUALS = "Equals"
    NOT_EQUAL = "NotEqual"
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    NOT_EXISTS = "NotExists"
    ALWAYS_TRUE = "AlwaysTrue"
    MATCHES = "Matches"
    MATCHES_NOT = "MatchesNot"
    MATCHES_ANY = "MatchesAny"
    MATCHES_NONE = "MatchesNone"

    @property
    def takes_globs(self) -> bool:
        """Whether the values are glob patterns (Go's path/filepath.Match syntax)."""
        return self in _GLOB_OPERATORS

    @classmethod
    def parse(cls, text: str) -> Operator:
        """The operator spelled `text`; raises ExpressionError listing the valid ones."""
        op = _SPELLINGS.get(text)
        if op is not None:
            return op
        names = ", ".join(o.value for o in cls)
        close = difflib.get_close_matches(text, list(_SPELLINGS), n=1)
        hint = f' (did you mean "{_SPELLINGS[close[0]].value}"?)' if close else ""
        raise ExpressionError("operator", f"{quote(text)} is not one of {names}{hint}")


_GLOB_OPERATORS = frozenset(
    {Operator.MATCHES, Operator.MATCHES_NOT, Operator.MATCHES_ANY, Operator.MATCHES_NONE}
)

# cri-resource-manager's code spelled NotExists without the s; accept both.
_SPELLINGS: dict[str, Operator] = {op.value: op for op in Operator} | {
    "NotExist": Operator.NOT_EXISTS
}


class Arity(Enum):
    NONE = "no values"
    ONE = "exactly one value"
    SOME = "one or more values"


ARITY: dict[Operator, Arity] = {
    Operator.EQUALS: Arity.ONE,
    Operator.NOT_EQUAL: Arity.ONE,
    Operator.IN: Arity.SOME,
    Operator.NOT_IN: Arity.SOME,
    Operator.EXISTS: Arity.NONE,
    Operator.NOT_EXISTS: Arity.NONE,
    Operator.ALWAYS_TRUE: Arity.NONE,
    Operator.MATCHES: Arity.ONE,
    Operator.MATCHES_NOT: Arity.ONE,
    Operator.MATCHES_ANY: Arity.SOME,
    Operator.MATCHES_NONE: Arity.SOME,
}


@dataclass(frozen=True, slots=True)
class Expression:
    """`key operator values`, e.g. `labels/app In [web, db]`.

    A key that does not exist makes Equals, In, Matches and MatchesAny false and
    NotEqual, NotIn, MatchesNot and MatchesNone true (as Kubernetes selectors do).
    The key may be "" only for AlwaysTrue. Raises ExpressionError if malformed.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    _test: Test = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = tuple(self.values)
        for i, value in enumerate(values, 1):
            if not isinstance(value, str):
                raise ExpressionError(f"values[{i}]", f"{value!r} is not a string")
        arity = ARITY[self.operator]
        count = len(values)
        if arity is Arity.NONE:
            fits = count == 0
        else:
            fits = count == 1 if arity is Arity.ONE else count >= 1
        if not fits:
            raise ExpressionError(
                "values",
                f"must hold {arity.value} for operator {self.operator.value}, not {count}",
            )
        if self.operator is Operator.ALWAYS_TRUE and not self.key:
            test: Test = _always
        elif not self.key:
            raise ExpressionError("key", f"is required for operator {self.operator.value}")
        else:
            # Even AlwaysTrue checks a key it was given: a typo there is still a typo.
            test = _compile(self.operator, compile_key(self.key), values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_test", test)

    def evaluate(self, subject: ContainerInfo) -> bool:
        """Whether this expression selects `subject`."""
        return self._test(subject)

    def malformed_globs(self) -> tuple[Glob, ...]:
        """The patterns among `values` that are malformed and so match nothing (as in
        cri-resource-manager, which ignores Go's ErrBadPattern): for warnings."""
        if not self.operator.takes_globs:
            return ()
        return tuple(g for g in map(Glob, self.values) if g.error is not None)

    def __reduce__(self) -> tuple[type[Expression], tuple[str, Operator, tuple[str, ...]]]:
        # The compiled test is a closure: rebuild it rather than pickle it.
        return (Expression, (self.key, self.operator, self.values))

    def __str__(self) -> str:
        words = [self.key] if self.key else []
        words.append(self.operator.value)
        if self.values or ARITY[self.operator] is not Arity.NONE:
            words.append(f"[{', '.join(self.values)}]")
        return " ".join(words)


def _always(_: ContainerInfo) -> bool:
    return True


def _glob(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Whether a value matches any of `patterns`, each compiled once; malformed ones
    match nothing."""
    globs = tuple(g for g in map(Glob, dict.fromkeys(patterns)) if g.error is None)
    if len(globs) == 1:
        return globs[0].matches
    return lambda value: any(g.matches(value) for g in globs)


def _compile(op: Operator, get: Accessor, values: tuple[str, ...]) -> Test:
    # One closure per operator so evaluation is a lookup and a compare; an absent key
    # reads as None, which equals no string and is in no set of strings.
    if op is Operator.EQUALS or op is Operator.NOT_EQUAL:
        want = values[0]
        if op is Operator.EQUALS:
            return lambda c: get(c) == want
        return lambda c: get(c) != want
    if op is Operator.IN:
        members = frozenset(values)
        return lambda c: get(c) in members
    if op is Operator.NOT_IN:
        members = frozenset(values)
        return lambda c: get(c) not in members
    if op is Operator.EXISTS:
        return lambda c: get(c) is not None
    if op is Operator.NOT_EXISTS:
        return lambda c: get(c) is None
    if op is Operator.ALWAYS_TRUE:
        return _always
    match = _glob(values)
    if op is Operator.MATCHES or op is Operator.MATCHES_ANY:

        def matches(c: ContainerInfo) -> bool:
            value = get(c)
            return value is not None and match(value)

        return matches

    def matches_not(c: ContainerInfo) -> bool:
        value = get(c)
        return value is None or not match(value)

    return matches_not
