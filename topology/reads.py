"""Which sysfs files a reading opened: the record `topology --capture` copies.

The readers (`topology.sysfs`, `topology.dmi`) note each file they read while a
`recording()` is active, and nothing otherwise; a capture then holds exactly the
files the agent reads, not a guess of them kept beside the reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_READS: ContextVar[list[Path] | None] = ContextVar("sysfs_reads", default=None)


def note(path: Path) -> None:
    """Record that `path` was read (a no-op outside `recording()`)."""
    reads = _READS.get()
    if reads is not None:
        reads.append(path)


@contextmanager
def recording() -> Iterator[list[Path]]:
    """Collect the paths read inside the block, in order (repeats kept out)."""
    reads: list[Path] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)
        unique = list(dict.fromkeys(reads))
        reads[:] = unique
