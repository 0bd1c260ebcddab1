"""The state directory lock: one agent per directory, a symlink planted as `lock`
never followed, and a read-only directory still locked (so the agent can serve)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.state.lock import StateDirBusy, StateDirLock
from tests.robust.privileges import read_only

VICTIM_TEXT = b"root's precious file\n"


@pytest.fixture
def lock() -> Iterator[list[StateDirLock]]:
    """Locks a test took; released afterwards."""
    taken: list[StateDirLock] = []
    yield taken
    for held in taken:
        held.release()


def test_second_lock_on_the_same_directory_is_busy(
    tmp_path: Path, lock: list[StateDirLock]
) -> None:
    first = StateDirLock(tmp_path / "state")
    first.acquire()
    lock.append(first)
    with pytest.raises(StateDirBusy, match=f"pid {os.getpid()}"):
        StateDirLock(tmp_path / "state").acquire()


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_planted_as_the_lock_is_not_followed(
    tmp_path: Path, lock: list[StateDirLock], caplog: pytest.LogCaptureFixture, dangling: bool
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    if not dangling:
        victim.write_bytes(VICTIM_TEXT)
    (state / "lock").symlink_to(victim)
    held = StateDirLock(state)
    with caplog.at_level(logging.WARNING):
        held.acquire()
    lock.append(held)
    if dangling:
        assert not victim.exists()  # O_CREAT through the link would have made it
    else:
        assert victim.read_bytes() == VICTIM_TEXT
    assert not (state / "lock").is_symlink()
    assert (state / "lock").read_text() == f"{os.getpid()}\n"
    assert "symbolic link" in caplog.text
    with pytest.raises(StateDirBusy):
        StateDirLock(state).acquire()


def test_fifo_planted_as_the_lock_does_not_block(tmp_path: Path, lock: list[StateDirLock]) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "lock")
    held = StateDirLock(state)
    held.acquire()  # would block forever in open() or write() without O_NONBLOCK
    lock.append(held)
    assert (state / "lock").read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("lock_file", ["file", "missing", "symlink"])
def test_read_only_directory_is_locked_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, lock_file: str
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    if lock_file == "file":
        (state / "lock").write_text("12345\n")
    elif lock_file == "symlink":
        (state / "lock").symlink_to(tmp_path / "victim")
    with read_only(state):
        first = StateDirLock(state)
        with caplog.at_level(logging.WARNING):
            first.acquire()
        try:
            assert first.read_only
            assert "read-only" in caplog.text and str(state) in caplog.text
            with pytest.raises(StateDirBusy):
                StateDirLock(state).acquire()
        finally:
            first.release()  # before the unmount
        again = StateDirLock(state)
        again.acquire()  # released means free again
        again.release()
