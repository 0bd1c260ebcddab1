"""The one set of operators both annotation languages select with, and what each means.

cri-resource-manager's expressions (Equals, In, Matches, ...) and Kubernetes'
selector requirements (In, NotIn, Exists, DoesNotExist, and Gt, Lt over NUMA-node
labels) compare a value that may be absent with some given values. The meaning of
each operator is written once, here, as a test over that value; each language
keeps only its own spelling (Kubernetes writes NotExists as DoesNotExist) and the
operators it allows. An absent value makes the positive operators false and the
negative ones true, as Kubernetes' selectors do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import StrEnum

from agent.terms.glob import Glob

ValueTest = Callable[["str | None"], bool]

INT64 = (-(2**63), 2**63 - 1)
INT64_DIGITS = 19
_INTEGER = re.compile(r"[+-]?[0-9]+")


class Operator(StrEnum):
    """An operator; its value is cri-resource-manager's spelling (`spelled` gives a
    language's own)."""

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
    GT = "Gt"
    LT = "Lt"

    @property
    def takes_globs(self) -> bool:
        """Whether the values are glob patterns (Go's path/filepath.Match syntax)."""
        return self in GLOB_OPERATORS

    @property
    def kubernetes(self) -> str:
        """How Kubernetes spells it (`DoesNotExist` for NotExists)."""
        return _KUBERNETES_SPELLING.get(self, self.value)


GLOB_OPERATORS = frozenset(
    {Operator.MATCHES, Operator.MATCHES_NOT, Operator.MATCHES_ANY, Operator.MATCHES_NONE}
)
_KUBERNETES_SPELLING = {Operator.NOT_EXISTS: "DoesNotExist"}

# What each language lets its users write.
CRI_RM_OPERATORS = tuple(op for op in Operator if op not in (Operator.GT, Operator.LT))
LABEL_OPERATORS = (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.NOT_EXISTS)
NODE_OPERATORS = (*LABEL_OPERATORS, Operator.GT, Operator.LT)


def parse_integer(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads it, None if it does not."""
    if not _INTEGER.fullmatch(text):
        return None
    # Bounded before int(): an int64 has at most 19 significant digits, and int()
    # refuses (with ValueError) texts of more than 4300 digits.
    if len(text.lstrip("+-").lstrip("0")) > INT64_DIGITS:
        return None
    value = int(text)
    return value if INT64[0] <= value <= INT64[1] else None


def value_test(op: Operator, values: Sequence[str]) -> ValueTest:
    """The test `op` with `values` makes of a value (None: absent), compiled once:
    one closure per operator, so applying it is a compare or a lookup."""
    if op is Operator.EQUALS:
        want = values[0]
        return lambda v: v == want
    if op is Operator.NOT_EQUAL:
        other = values[0]
        return lambda v: v != other
    if op is Operator.IN:
        members = frozenset(values)
        return lambda v: v in members
    if op is Operator.NOT_IN:
        excluded = frozenset(values)
        return lambda v: v not in excluded
    if op is Operator.EXISTS:
        return lambda v: v is not None
    if op is Operator.NOT_EXISTS:
        return lambda v: v is None
    if op is Operator.ALWAYS_TRUE:
        return lambda v: True
    if op is Operator.GT or op is Operator.LT:
        return _compare(op, parse_integer(values[0]) if values else None)
    match = _glob(values)
    if op is Operator.MATCHES or op is Operator.MATCHES_ANY:
        return lambda v: v is not None and match(v)
    return lambda v: v is None or not match(v)


def _compare(op: Operator, bound: int | None) -> ValueTest:
    """Gt and Lt: a value that is not a 64-bit integer (or no bound) never holds."""

    def test(value: str | None) -> bool:
        number = None if value is None else parse_integer(value)
        if number is None or bound is None:
            return False
        return number > bound if op is Operator.GT else number < bound

    return test


def _glob(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Whether a value matches any of `patterns`, each compiled once; malformed ones
    match nothing."""
    globs = tuple(g for g in map(Glob, dict.fromkeys(patterns)) if g.error is None)
    if len(globs) == 1:
        return globs[0].matches
    return lambda value: any(g.matches(value) for g in globs)
