"""An immutable set of CPU ids in the Linux list format ("0-3,8,10-11").

Stored as an integer bit mask: union, intersection, difference and size are
single big-int operations, which keeps placement on 512-CPU machines cheap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import total_ordering

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

# A sanity bound against hostile input ("0-999999999999" would otherwise build
# a huge integer); Linux's NR_CPUS tops out at 8192.
MAX_CPU_ID = 65535


class CPUSetError(ValueError):
    """Text that is not a valid Linux CPU list; the message quotes the text."""


@total_ordering
@dataclass(frozen=True, slots=True)
class CPUSet:
    """Immutable set of CPU ids. Iterates in ascending order."""

    mask: int = 0

    def __post_init__(self) -> None:
        if self.mask < 0:
            raise CPUSetError(f"negative CPU mask {self.mask}")

    # -- construction -------------------------------------------------------

    @classmethod
    def of(cls, ids: Iterable[int]) -> CPUSet:
        mask = 0
        for cpu in ids:
            if cpu < 0 or cpu > MAX_CPU_ID:
                raise CPUSetError(f"CPU id {cpu} out of range 0-{MAX_CPU_ID}")
            mask |= 1 << cpu
        return cls(mask)

    @classmethod
    def range(cls, first: int, last: int) -> CPUSet:
        """CPUs first..last inclusive (empty when last < first)."""
        if last < first:
            return cls()
        if first < 0 or last > MAX_CPU_ID:
            raise CPUSetError(f"CPU range {first}-{last} out of range 0-{MAX_CPU_ID}")
        return cls(((1 << (last - first + 1)) - 1) << first)

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse the Linux list format; the empty string (or whitespace) is the empty set."""
        stripped = text.strip()
        if not stripped:
            return cls()
        mask = 0
        for part in stripped.split(","):
            match = _RANGE.match(part.strip())
            if match is None:
                raise CPUSetError(f"invalid CPU list {text!r}: bad element {part!r}")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            if last < first:
                raise CPUSetError(f"invalid CPU list {text!r}: range {part!r} is reversed")
            if last > MAX_CPU_ID:
                raise CPUSetError(f"invalid CPU list {text!r}: CPU id {last} exceeds {MAX_CPU_ID}")
            mask |= ((1 << (last - first + 1)) - 1) << first
        return cls(mask)

    # -- queries ------------------------------------------------------------

    def __len__(self) -> int:
        return self.mask.bit_count()

    def size(self) -> int:
        return self.mask.bit_count()

    def __bool__(self) -> bool:
        return self.mask != 0

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and bool(self.mask >> cpu & 1)

    def __iter__(self) -> Iterator[int]:
        mask = self.mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def ids(self) -> tuple[int, ...]:
        return tuple(self)

    def first(self) -> int:
        """Lowest CPU id; ValueError on the empty set."""
        if not self.mask:
            raise ValueError("empty CPU set has no first CPU")
        return (self.mask & -self.mask).bit_length() - 1

    def is_subset(self, other: CPUSet) -> bool:
        return self.mask & ~other.mask == 0

    def isdisjoint(self, other: CPUSet) -> bool:
        return self.mask & other.mask == 0

    # -- algebra ------------------------------------------------------------

    def union(self, *others: CPUSet) -> CPUSet:
        mask = self.mask
        for other in others:
            mask |= other.mask
        return CPUSet(mask)

    def intersection(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & other.mask)

    def difference(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & ~other.mask)

    __or__ = union

    def __and__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & other.mask)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self.mask & ~other.mask)

    def take_lowest(self, count: int) -> CPUSet:
        """The `count` lowest CPUs (all of them when there are fewer)."""
        out = 0
        mask = self.mask
        while mask and count > 0:
            low = mask & -mask
            out |= low
            mask ^= low
            count -= 1
        return CPUSet(out)

    # -- ordering and printing ----------------------------------------------

    def __lt__(self, other: CPUSet) -> bool:
        # Ordered as the sorted id sequences compare: by lowest CPU first.
        return self.ids() < other.ids()

    def __str__(self) -> str:
        # One step per run of consecutive CPUs, not per CPU: states and logs print
        # many large sets. For x = mask >> start, x ^ (x + 1) has one bit more than
        # x has trailing ones, which is the length of the run at `start`.
        parts: list[str] = []
        mask = self.mask
        while mask:
            start = (mask & -mask).bit_length() - 1
            x = mask >> start
            length = (x ^ (x + 1)).bit_length() - 1
            last = start + length - 1
            parts.append(str(start) if length == 1 else f"{start}-{last}")
            mask &= ~((1 << (last + 1)) - 1)
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"CPUSet({str(self)!r})"
