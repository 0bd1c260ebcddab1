"""The agent's own process statistics when no descriptor is left to read /proc."""

from __future__ import annotations

import errno
import os

import pytest

from agent.observe import process


class _NoDescriptors:
    """psutil's Process as a descriptor flood leaves it: reading /proc fails (EMFILE)."""

    pid = os.getpid()

    def oneshot(self) -> None:
        raise OSError(errno.EMFILE, "Too many open files")


def test_without_descriptors_status_falls_back_to_the_last_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full = process.process_stats()
    monkeypatch.setattr(process, "_SELF", _NoDescriptors())
    during = process.process_stats()
    assert during.pid == os.getpid()
    assert (during.rss_bytes, during.started) == (full.rss_bytes, full.started)
    # CPU time is still current: os.times() needs no descriptor.
    assert during.cpu_seconds >= full.cpu_seconds - 0.01


def test_without_any_earlier_reading_the_error_is_not_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(process, "_last", None)
    monkeypatch.setattr(process, "_SELF", _NoDescriptors())
    with pytest.raises(OSError):
        process.process_stats()
