"""Glob patterns as Go's path/filepath.Match reads them, which is what
cri-resource-manager's Matches operators use, compiled once per pattern.

Syntax: `*` is any run of characters other than `/`, `?` one character other than
`/`, `[...]` one character from a class (`[^...]` negates it; `!` is an ordinary
character), and a backslash takes the next character literally, also inside a
class. A malformed pattern (`[]a]`, `[a-]`, `[`, a trailing backslash) matches
nothing, as cri-resource-manager ignores Go's ErrBadPattern.

Matching follows Go's procedure, not an idealised glob: the pattern is cut at its
stars into chunks of single-character items, and each chunk after a star takes the
leftmost place where it matches (the last chunk the place that ends the value),
within the stretch the star may cover. So `*[/a]*c` does not match `a/c` in Go,
nor here. One difference remains: Go steps over bytes, we over characters, so for
values with non-ASCII characters a star followed by a negated class can match
in Go (a lone UTF-8 continuation byte taken as a character) where it does not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SEPARATOR = "/"
_NEVER = r"[^\s\S]"  # a class no character is in
_ANY = r"[\s\S]"


class _Malformed(Exception):
    """Why a pattern is malformed; the text reads on from "the pattern ..."."""


@dataclass(frozen=True, slots=True)
class _Chunk:
    """The items between two stars: `star` says one or more stars come first;
    `regex` matches exactly `length` characters (None for a trailing star)."""

    star: bool
    regex: re.Pattern[str] | None
    length: int


@dataclass(frozen=True, slots=True)
class Glob:
    """One pattern. `error` says why it is malformed (then it matches nothing)."""

    pattern: str
    error: str | None = field(init=False, compare=False)
    _chunks: tuple[_Chunk, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            chunks, error = _compile(self.pattern), None
        except _Malformed as why:
            chunks, error = (), str(why)
        object.__setattr__(self, "_chunks", chunks)
        object.__setattr__(self, "error", error)

    def matches(self, value: str) -> bool:
        """Whether the whole of `value` matches (never, for a malformed pattern)."""
        if self.error is not None:
            return False
        pos = 0
        last = len(self._chunks) - 1
        for index, chunk in enumerate(self._chunks):
            if chunk.regex is None:  # a trailing star takes the rest, unless it holds a "/"
                return value.find(SEPARATOR, pos) < 0
            if not chunk.star:
                found = chunk.regex.match(value, pos)
                if found is None or (index == last and found.end() != len(value)):
                    return False
                pos = found.end()
                continue
            # The star may cover any characters up to the next "/", not past it.
            reach = value.find(SEPARATOR, pos)
            reach = len(value) if reach < 0 else reach
            if index == last:
                start = len(value) - chunk.length
                return pos <= start <= reach and chunk.regex.match(value, start) is not None
            found = chunk.regex.search(value, pos)
            if found is None or found.start() > reach:
                return False
            pos = found.end()
        return pos == len(value)


def _compile(pattern: str) -> tuple[_Chunk, ...]:
    chunks: list[_Chunk] = []
    pos = 0
    while pos < len(pattern):
        star = False
        while pos < len(pattern) and pattern[pos] == "*":
            star, pos = True, pos + 1
        if pos == len(pattern):
            chunks.append(_Chunk(star, None, 0))
            break
        items: list[str] = []
        while pos < len(pattern) and pattern[pos] != "*":
            char = pattern[pos]
            if char == "?":
                items.append("[^/]")
                pos += 1
            elif char == "[":
                item, pos = _class(pattern, pos + 1)
                items.append(item)
            else:
                if char == "\\":
                    pos += 1
                    if pos == len(pattern):
                        raise _Malformed("ends with a backslash that escapes nothing")
                items.append(re.escape(pattern[pos]))
                pos += 1
        chunks.append(_Chunk(star, re.compile("".join(items)), len(items)))
    return tuple(chunks)


def _class(pattern: str, pos: int) -> tuple[str, int]:
    """The regex for the class whose `[` ends just before `pos`, and where it ends."""
    negated = pos < len(pattern) and pattern[pos] == "^"
    if negated:
        pos += 1
    ranges: list[str] = []
    count = 0
    while True:
        if pos < len(pattern) and pattern[pos] == "]" and count:
            pos += 1
            break
        low, pos = _class_char(pattern, pos)
        high = low
        if pattern[pos] == "-":
            high, pos = _class_char(pattern, pos + 1)
        count += 1
        if low <= high:  # Go accepts a backward range such as z-a; it holds nothing
            ranges.append(f"\\U{ord(low):08x}-\\U{ord(high):08x}")
    if not ranges:
        return (_ANY if negated else _NEVER), pos
    return f"[{'^' if negated else ''}{''.join(ranges)}]", pos


def _class_char(pattern: str, pos: int) -> tuple[str, int]:
    """One (possibly escaped) character of a class, and the position after it; a
    class must go on after it, at least with its closing `]`."""
    if pos >= len(pattern):
        raise _Malformed("has a character class without its closing ]")
    char = pattern[pos]
    if char in "-]":
        raise _Malformed(
            f'has "{char}" where a character class needs a character (escape it: \\{char})'
        )
    if char == "\\":
        pos += 1
        if pos >= len(pattern):
            raise _Malformed("has a character class without its closing ]")
        char = pattern[pos]
    pos += 1
    if pos >= len(pattern):
        raise _Malformed("has a character class without its closing ]")
    return char, pos
