"""The state file when it is hostile or broken: nothing a file in the state
directory can be (a FIFO, a symlink, a huge or deeply nested document) makes
`load` raise, hang or read without bound, and `save` never follows a symlink
planted in the directory. Whatever is refused is moved aside, never deleted."""

from __future__ import annotations

import logging
import os
import resource
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.state import StateError, StateStore
from agent.state.store import MAX_STATE_BYTES, STATE_FILE

FIXED_TIME = 1_700_000_000.0
ASIDE = "state.json.rejected-20231114T221320Z"
VICTIM_TEXT = b"root's precious file\n"


def store(tmp_path: Path, **kwargs: int) -> StateStore:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700, exist_ok=True)
    return StateStore(state_dir, "m1", clock=lambda: FIXED_TIME, **kwargs)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the state directory that a planted symlink points at."""
    path = tmp_path / "victim"
    path.write_bytes(VICTIM_TEXT)
    return path


# ----------------------------------------------------------------------------- load


def _nested(depth: int) -> Callable[[Path, Path], None]:
    def write(path: Path, _victim: Path) -> None:
        path.write_bytes(b"[" * depth + b"]" * depth)

    return write


def _nested_payload(path: Path, _victim: Path) -> None:
    inner = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    path.write_bytes(b'{"schema": 1, "machine": "m1", "checksum": "x", "payload": ' + inner + b"}")


def _fifo(path: Path, _victim: Path) -> None:
    os.mkfifo(path, 0o600)


def _huge_sparse(path: Path, _victim: Path) -> None:
    with path.open("wb") as f:
        f.truncate(300 << 20)  # 300 MiB that cost no disk


def _symlink(path: Path, victim: Path) -> None:
    path.symlink_to(victim)


def _directory(path: Path, _victim: Path) -> None:
    path.mkdir()


def _huge_number(path: Path, _victim: Path) -> None:
    path.write_bytes(b'{"schema": ' + b"9" * 100_000 + b"}")


def _not_utf8(path: Path, _victim: Path) -> None:
    path.write_bytes(b'{"schema": "\xff\xfe"}')


HOSTILE: list[tuple[str, Callable[[Path, Path], None], str]] = [
    ("nested-200k", _nested(200_000), "nested too deeply"),
    ("nested-payload", _nested_payload, "nested too deeply"),
    ("fifo", _fifo, "not a regular file"),
    ("huge", _huge_sparse, f"over the limit of {MAX_STATE_BYTES} bytes"),
    ("symlink", _symlink, "symbolic link"),
    ("directory", _directory, "not a regular file"),
    ("huge-number", _huge_number, "not valid JSON"),
    ("not-utf8", _not_utf8, "not valid JSON"),
]


@pytest.fixture
def unblock_fifo(tmp_path: Path) -> Iterator[None]:
    """If a load blocks opening a FIFO, open its other end so the thread can end."""
    yield
    fifo = tmp_path / "state" / STATE_FILE
    if fifo.exists() and stat.S_ISFIFO(fifo.lstat().st_mode):
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)


@pytest.mark.parametrize(("kind", "make", "reason"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_file_is_refused_and_moved_aside(
    tmp_path: Path,
    victim: Path,
    caplog: pytest.LogCaptureFixture,
    unblock_fifo: None,
    kind: str,
    make: Callable[[Path, Path], None],
    reason: str,
) -> None:
    s = store(tmp_path)
    make(s.path, victim)
    before = s.path.lstat()
    outcome: list[object] = []

    def load() -> None:
        try:
            outcome.append(s.load())
        except BaseException as err:  # the test reports what escaped
            outcome.append(err)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with caplog.at_level(logging.WARNING):
        worker = threading.Thread(target=load, daemon=True)
        worker.start()
        worker.join(10)
    assert not worker.is_alive(), f"load() hangs on a {kind} state file"
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mib < 64, f"load() of a {kind} file took {grown_mib:.0f} MiB"
    (result,) = outcome
    assert not isinstance(result, BaseException), f"load() raised {result!r}"
    assert result.payload is None  # type: ignore[union-attr]
    assert reason in result.reason, result.reason  # type: ignore[union-attr]
    aside = s.state_dir / ASIDE
    assert result.moved_aside == aside  # type: ignore[union-attr]
    assert aside.lstat().st_ino == before.st_ino  # the very file, kept for the operator
    assert not os.path.lexists(s.path)
    assert reason in caplog.text and str(aside) in caplog.text
    assert victim.read_bytes() == VICTIM_TEXT


def test_a_file_at_the_bound_is_still_read(tmp_path: Path) -> None:
    s = store(tmp_path, max_bytes=4096)
    s.save({"blob": "x" * 3000})
    assert s.path.stat().st_size <= 4096
    assert s.load().payload == {"blob": "x" * 3000}


def test_a_file_that_grows_past_the_bound_while_read_is_refused(tmp_path: Path) -> None:
    s = store(tmp_path, max_bytes=4096)
    s.save({"blob": "x" * 3000})
    with s.path.open("ab") as f:
        f.write(b" " * 2000)  # trailing whitespace keeps it valid JSON, but too big
    result = s.load()
    assert result.payload is None and "over the limit of 4096 bytes" in result.reason


# ----------------------------------------------------------------------------- save


def test_save_refuses_a_state_over_the_bound_and_keeps_the_old_file(tmp_path: Path) -> None:
    s = store(tmp_path, max_bytes=4096)
    s.save({"n": 1})
    with pytest.raises(StateError) as err:
        s.save({"blob": "x" * 5000})
    message = str(err.value)
    assert str(s.path) in message and "over the limit of 4096 bytes" in message, message
    assert s.load().payload == {"n": 1}
    assert sorted(p.name for p in s.state_dir.iterdir()) == [STATE_FILE]
    assert s.write_failures == 1


def test_save_does_not_follow_a_symlink_planted_as_its_temporary_file(
    tmp_path: Path, victim: Path
) -> None:
    s = store(tmp_path)
    planted = s.state_dir / f".{STATE_FILE}.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    s.save({"n": 1})
    assert victim.read_bytes() == VICTIM_TEXT
    assert s.load().payload == {"n": 1}
    assert not os.path.lexists(planted)


def test_save_replaces_a_symlinked_state_file_without_touching_its_target(
    tmp_path: Path, victim: Path
) -> None:
    s = store(tmp_path)
    s.path.symlink_to(victim)
    s.save({"n": 1})
    assert victim.read_bytes() == VICTIM_TEXT
    assert not s.path.is_symlink() and s.load().payload == {"n": 1}


def test_saved_file_is_0600_under_umask_000(tmp_path: Path) -> None:
    s = store(tmp_path)
    old = os.umask(0)
    try:
        s.save({"n": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(s.path.stat().st_mode) == 0o600


def test_write_failures_are_counted(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    s = StateStore(blocker / "state", "m")
    for expected in (1, 2):
        with pytest.raises(StateError):
            s.save({"x": 1})
        assert s.write_failures == expected


# ----------------------------------------------------------------------------- the directory


@pytest.mark.parametrize(
    ("mode", "trusted"), [(0o700, True), (0o755, True), (0o770, False), (0o777, False)]
)
def test_state_in_a_directory_others_can_write_is_not_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, trusted: bool
) -> None:
    s = store(tmp_path)
    s.save({"n": 1})
    os.chmod(s.state_dir, mode)
    with caplog.at_level(logging.WARNING):
        result = s.load()
    assert (result.payload == {"n": 1}) is trusted
    if not trusted:
        assert "other users can write" in result.reason, result.reason
        assert result.moved_aside is not None and result.moved_aside.exists()
        assert f"{mode:o}" in caplog.text


# ----------------------------------------------------------------------------- move_aside


def test_move_aside_keeps_the_file_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = store(tmp_path)
    s.save({"containers": {"c1": {"cpus": 7}}})
    data = s.path.read_bytes()
    with caplog.at_level(logging.WARNING):
        aside = s.move_aside("containers.c1.cpus: expected a string, got 7")
    assert aside == s.state_dir / ASIDE
    assert aside.read_bytes() == data
    assert not s.path.exists()
    assert "expected a string, got 7" in caplog.text and str(aside) in caplog.text
    assert s.move_aside("again") is None  # nothing left to move
    s.save({"n": 2})
    second = s.move_aside("same second")
    assert second is not None and second != aside and aside.exists()
