"""Expressions (key, operator, values) that select containers, compiled once.

An Expression checks itself when built and turns its key and values into one
closure, so evaluating it against a container is a couple of calls, no parsing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from agent.affinity.errors import ExpressionError, quote
from agent.affinity.keys import Accessor, compile_key
from agent.terms.glob import Glob
from agent.terms.operator import CRI_RM_OPERATORS, Operator, value_test
from agent.workload import ContainerInfo

Test = Callable[[ContainerInfo], bool]


def parse_operator(text: str) -> Operator:
    """The operator spelled `text` in cri-resource-manager's language; raises
    ExpressionError listing the valid ones."""
    op = _SPELLINGS.get(text)
    if op is not None:
        return op
    names = ", ".join(o.value for o in CRI_RM_OPERATORS)
    close = difflib.get_close_matches(text, list(_SPELLINGS), n=1)
    hint = f' (did you mean "{_SPELLINGS[close[0]].value}"?)' if close else ""
    raise ExpressionError("operator", f"{quote(text)} is not one of {names}{hint}")


# cri-resource-manager's code spelled NotExists without the s; accept both.
_SPELLINGS: dict[str, Operator] = {op.value: op for op in CRI_RM_OPERATORS}
_SPELLINGS["NotExist"] = Operator.NOT_EXISTS


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
    Operator.GT: Arity.ONE,
    Operator.LT: Arity.ONE,
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


def _compile(op: Operator, get: Accessor, values: tuple[str, ...]) -> Test:
    if op is Operator.ALWAYS_TRUE:
        return _always
    test = value_test(op, values)
    return lambda c: test(get(c))
