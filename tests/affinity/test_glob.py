"""Globs as Go's path/filepath.Match reads them (cri-resource-manager's Matches).

GO_MATCH restates the table of Go's own match_test.go (pattern, value, whether it
matches, whether the pattern is malformed); the rows after it are this project's
cases for the rules cri-resource-manager's users meet.
"""

from __future__ import annotations

import pytest

from agent.affinity import Expression, Operator
from agent.terms.glob import Glob
from tests.affinity.workloads import container, pod

GO_MATCH = [
    ("abc", "abc", True, False),
    ("*", "abc", True, False),
    ("*c", "abc", True, False),
    ("a*", "a", True, False),
    ("a*", "abc", True, False),
    ("a*", "ab/c", False, False),
    ("a*/b", "abc/b", True, False),
    ("a*/b", "a/c/b", False, False),
    ("a*b*c*d*e*/f", "axbxcxdxe/f", True, False),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f", True, False),
    ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", False, False),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", False, False),
    ("a*b?c*x", "abxbbxdbxebxczzx", True, False),
    ("a*b?c*x", "abxbbxdbxebxczzy", False, False),
    ("ab[c]", "abc", True, False),
    ("ab[b-d]", "abc", True, False),
    ("ab[e-g]", "abc", False, False),
    ("ab[^c]", "abc", False, False),
    ("ab[^b-d]", "abc", False, False),
    ("ab[^e-g]", "abc", True, False),
    ("a\\*b", "a*b", True, False),
    ("a\\*b", "ab", False, False),
    ("a?b", "a☺b", True, False),
    ("a[^a]b", "a☺b", True, False),
    ("a???b", "a☺b", False, False),
    ("a[^a][^a][^a]b", "a☺b", False, False),
    ("[a-ζ]*", "\u03b1", True, False),
    ("*[a-ζ]", "A", False, False),
    ("a?b", "a/b", False, False),
    ("a*b", "a/b", False, False),
    ("[\\]a]", "]", True, False),
    ("[\\-]", "-", True, False),
    ("[x\\-]", "x", True, False),
    ("[x\\-]", "-", True, False),
    ("[x\\-]", "z", False, False),
    ("[\\-x]", "x", True, False),
    ("[\\-x]", "-", True, False),
    ("[\\-x]", "a", False, False),
    ("[]a]", "]", False, True),
    ("[-]", "-", False, True),
    ("[x-]", "x", False, True),
    ("[x-]", "-", False, True),
    ("[x-]", "z", False, True),
    ("[-x]", "x", False, True),
    ("[-x]", "-", False, True),
    ("[-x]", "a", False, True),
    ("\\", "a", False, True),
    ("[a-b-c]", "a", False, True),
    ("[", "a", False, True),
    ("[^", "a", False, True),
    ("[^bc", "a", False, True),
    ("a[", "a", False, True),
    ("a[", "ab", False, True),
    ("a[", "x", False, True),
    ("a/b[", "x", False, True),
    ("*x", "xxx", True, False),
]

OURS = [
    # Negation is "^"; "!" is an ordinary character of the class.
    ("[^a]", "b", True, False),
    ("[^a]", "a", False, False),
    ("[!a]", "!", True, False),
    ("[!a]", "a", True, False),
    ("[!a]", "b", False, False),
    ("db-[^0]", "db-1", True, False),
    ("db-[^0]", "db-0", False, False),
    # A backslash escapes the next character, in and out of classes.
    ("\\[x\\]", "[x]", True, False),
    ("\\?", "?", True, False),
    ("\\?", "a", False, False),
    ("a\\b", "ab", True, False),
    ("[\\\\]", "\\", True, False),
    # Classes may hold stars and question marks; they are not special there.
    ("[*?]", "*", True, False),
    ("[*?]", "a", False, False),
    # A backward range is not an error, it holds nothing.
    ("[z-a]", "m", False, False),
    ("[^z-a]", "m", True, False),
    # A class, unlike * and ?, may match "/".
    ("a[/]b", "a/b", True, False),
    ("a[^x]b", "a/b", True, False),
    # Go takes the leftmost place for a chunk after a star and does not go back:
    # the class takes "a" here, and the second star cannot cross the "/".
    ("*[/a]*c", "a/c", False, False),
    ("*/*c", "a/c", True, False),
    # Whole value, case-sensitive, stars anywhere.
    ("fro", "front", False, False),
    ("FRONT", "front", False, False),
    ("**", "", True, False),
    ("", "", True, False),
    ("", "a", False, False),
    ("*", "", True, False),
    ("?", "", False, False),
    ("a*a*a*a*b", "a" * 50, False, False),
    ("*a*", "xxaxx", True, False),
    ("web-*", "web-0", True, False),
    ("web-*", "web-", True, False),
    # More malformed patterns: they match nothing at all.
    ("[]", "]", False, True),
    ("[^]", "a", False, True),
    ("*[", "", False, True),
    ("abc\\", "abc", False, True),
    ("[a", "a", False, True),
    # Characters, not bytes: Go would let "*" stop inside "é" and match its second
    # byte as a character other than "é"; here "é" is one character.
    ("*[^é]x", "éx", False, False),
    ("*[^é]", "é", False, False),
    ("*?x", "éx", True, False),
]


@pytest.mark.parametrize(("pattern", "value", "matches", "malformed"), GO_MATCH + OURS)
def test_match(pattern: str, value: str, matches: bool, malformed: bool) -> None:
    glob = Glob(pattern)
    assert glob.matches(value) is matches
    assert (glob.error is not None) is malformed


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("[]a]", 'has "]" where a character class needs a character (escape it: \\])'),
        ("[a-]", 'has "]" where a character class needs a character (escape it: \\])'),
        ("[-a]", 'has "-" where a character class needs a character (escape it: \\-)'),
        ("[a", "has a character class without its closing ]"),
        ("a\\", "ends with a backslash that escapes nothing"),
    ],
)
def test_malformed_patterns_say_why(pattern: str, error: str) -> None:
    assert Glob(pattern).error == error


APP = container("app", pod("web-0"))


@pytest.mark.parametrize(
    ("op", "patterns", "selected"),
    [
        # A malformed pattern matches nothing, so its negations select everyone,
        # as in cri-resource-manager (it ignores Go's ErrBadPattern).
        (Operator.MATCHES, ("[]a]",), False),
        (Operator.MATCHES_NOT, ("[]a]",), True),
        (Operator.MATCHES_ANY, ("[a-]", "a*"), True),
        (Operator.MATCHES_ANY, ("[a-]", "x*"), False),
        (Operator.MATCHES_NONE, ("[a-]", "x*"), True),
        (Operator.MATCHES_NONE, ("[a-]", "a*"), False),
        # Their negation is ^, not !.
        (Operator.MATCHES, ("[^x]pp",), True),
        (Operator.MATCHES, ("[!x]pp",), False),
    ],
)
def test_glob_operators(op: Operator, patterns: tuple[str, ...], selected: bool) -> None:
    assert Expression("name", op, patterns).evaluate(APP) is selected


def test_malformed_globs_are_listed_for_warnings() -> None:
    expr = Expression("name", Operator.MATCHES_ANY, ("[]a]", "ok*", "[a-"))
    assert [g.pattern for g in expr.malformed_globs()] == ["[]a]", "[a-"]
    assert Expression("name", Operator.IN, ("[]a]",)).malformed_globs() == ()


def test_a_long_hostile_pattern_is_fast() -> None:
    import time

    value = "a" * 20000
    start = time.perf_counter()
    assert not Glob("*" + "a*" * 2000 + "b").matches(value)
    assert not Glob("*" + "a" * 5000 + "b").matches(value)
    assert time.perf_counter() - start < 2.0
